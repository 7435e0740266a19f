"""Notebooks are stored without outputs, have one `parameters` cell, and all run headless in the
`ci` profile: through papermill (the way `make run` runs them with no GPU), or, for those
tests/test_browser.py runs, in JupyterLab in Chromium (tests/notebook_checks.py)."""
import json

import pytest
from notebook_checks import check_executed, runs_in_browser

from perfkit import workbook

NOTEBOOKS = workbook.notebooks()


def test_there_are_notebooks():
    assert any(p.stem.startswith("01_") for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs_and_parameterised(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        f"{path.name} has outputs: strip them before committing"
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"


def test_profiles_name_existing_notebooks():
    stems = {p.stem for p in NOTEBOOKS}
    for name, prof in workbook.profiles().items():
        for nb in (prof.get("notebooks") or {}):
            assert nb in stems, f"profile {name} names unknown notebook {nb}"


def test_profile_parameters_are_declared_and_parse():
    """papermill reads every line of each parameters cell (else it warns "Unable to parse" and
    "unknown parameter"), and every parameter a profile sets is one the notebook declares."""
    import logging

    import nbformat
    from papermill.translators import PythonTranslator

    declared = {}
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assignments = [l for l in cell.source.splitlines() if l and not l.startswith("#")]
        logger = logging.getLogger("papermill")
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logger.addHandler(handler)
        try:
            params = PythonTranslator.inspect(cell)
        finally:
            logger.removeHandler(handler)
        assert not records and len(params) == len(assignments), (path.name, [r.getMessage() for r in records])
        declared[path.stem] = {p.name for p in params}
    for name, prof in workbook.profiles().items():
        for nb, params in (prof.get("notebooks") or {}).items():
            unknown = set(params or {}) - declared[nb]
            assert not unknown, f"profile {name} sets {sorted(unknown)} that {nb} does not declare"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_ci_profile(path, tmp_path):
    """The way `make run` runs a notebook; one that tests/test_browser.py runs in JupyterLab in
    this session is not run twice (the same checks hold there, on the notebook it saved)."""
    if runs_in_browser(path.stem):
        pytest.skip("run in JupyterLab by tests/test_browser.py, with the same checks")
    runs = workbook.run([str(path)], profile="ci", out_dir=tmp_path, progress=False)
    assert runs[0].status == "ok", f"{path.name} failed: {runs[0].error} (executed copy: {runs[0].output})"
    check_executed(path.name, json.loads(runs[0].output.read_text()))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_paired_with_a_percent_script_in_step(path):
    """Each notebook is paired by jupytext with a percent-format script (the source of truth in
    review); the two hold the same cells.  After editing the script: `make sync`."""
    import jupytext

    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired script {script.name}"
    nb = jupytext.read(path)
    assert "py:percent" in nb.metadata.get("jupytext", {}).get("formats", ""), \
        f"{path.name} is not paired (jupytext --set-formats ipynb,py:percent)"
    py = jupytext.read(script)
    pairs = list(zip(nb.cells, py.cells))
    assert len(nb.cells) == len(py.cells), \
        f"{path.name} has {len(nb.cells)} cells, {script.name} {len(py.cells)}: run `make sync`"
    for i, (a, b) in enumerate(pairs):
        assert (a.cell_type, a.source.strip()) == (b.cell_type, b.source.strip()), \
            f"cell {i} of {path.name} differs from {script.name}: run `make sync`"
        assert a.metadata.get("tags", []) == b.metadata.get("tags", []), f"cell {i} tags differ"


def test_no_notebook_states_by_hand_what_the_copy_kernel_reached():
    """What the copy kernel reached goes stale with each new copy record (01 said 82% on the H200,
    the 2026-11-26 record, when the newest, of 2026-11-27, was 81%): the notebooks print
    lesson.copy_sentence, read from the newest records (tests/test_lesson.py checks it), and no
    markdown or code quotes a share of a published bandwidth by hand."""
    import re

    share = re.compile(r"\d+% (?:of (?:the published )?[\d.]+ TB/s|on the H\d00)")
    for path in NOTEBOOKS:
        text = path.with_suffix(".py").read_text()
        assert not share.search(text), f"{path.stem} quotes the copy kernel's share by hand: {share.search(text).group(0)}"
    first = next(p for p in NOTEBOOKS if p.stem.startswith("01_")).with_suffix(".py").read_text()
    assert "lesson.copy_sentence()" in first


def test_notebook_06s_what_if_never_shows_the_rung_its_gpu_exercise_asks_about():
    """The ci profile's what-if was saxpy grid_stride on every GPU, a few cells above exercise
    06.predict_gpu, which asks which GPU runs saxpy grid_stride faster and what binds it: no
    profile (nor the notebook's own defaults) may show that rung there."""
    import ast

    import nbformat

    from perfkit import exercises

    task = exercises.EXERCISES["06.predict_gpu"].task
    path = next(p for p in NOTEBOOKS if p.stem.startswith("06_"))
    cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    defaults = {t.id: ast.literal_eval(n.value) for n in ast.parse(cell.source).body
                if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
                and t.id in ("what_if_op", "what_if_rung")}
    settings = [defaults] + [{**defaults, **((prof.get("notebooks") or {}).get(path.stem) or {})}
                             for prof in workbook.profiles().values()]
    for s in settings:
        asked = s["what_if_op"].rsplit(".", 1)[-1] in task and s["what_if_rung"] in task
        assert not asked, f"06's what-if shows {s['what_if_op']} {s['what_if_rung']}, which 06.predict_gpu asks about"
