import json
import subprocess
import sys

import nbformat
import pytest

from perfkit import workbook


def test_parse_params():
    assert workbook.parse_params(["n=3", "sizes=[1, 2]", "name=abc", "x=0.5"]) == \
        {"n": 3, "sizes": [1, 2], "name": "abc", "x": 0.5}
    with pytest.raises(workbook.WorkbookError, match="NAME=VALUE"):
        workbook.parse_params(["n"])
    with pytest.raises(workbook.WorkbookError, match="identifier"):
        workbook.parse_params(["1n=3"])


def test_unknown_notebook_is_named():
    with pytest.raises(workbook.WorkbookError, match="no single notebook matches 'zz_nope'"):
        workbook.notebooks(["zz_nope"])


def test_auto_profile():
    assert workbook.resolve_profile("auto") in ("ci", "gpu")
    assert workbook.resolve_profile("ci") == "ci"


def _nb(path, code):
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell("x = 1")
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return str(path)


def test_a_failing_notebook_does_not_stop_the_others(tmp_path):
    bad = _nb(tmp_path / "bad.ipynb", "raise ValueError('deliberate failure')")
    good = _nb(tmp_path / "good.ipynb", "assert x == 5, x")
    runs = workbook.run([bad, good], profile="ci", params={"x": 5}, out_dir=tmp_path / "out", progress=False)
    assert [r.status for r in runs] == ["failed", "ok"]
    assert "deliberate failure" in runs[0].error
    kept = json.loads(runs[0].output.read_text())  # the executed copy keeps its error
    assert "deliberate failure" in json.dumps(kept)
    text = workbook.summary(runs, "ci")
    assert "1/2 notebooks ran" in text and "failed" in text


def test_cli_exit_status(tmp_path):
    bad = _nb(tmp_path / "bad.ipynb", "1/0")
    r = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", bad, "--profile", "ci", "-q",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "ZeroDivisionError" in r.stdout
    # ipykernel 7 warns once a kernel that it runs over TCP without encryption: machinery, kept off
    assert "IPKernelApp" not in r.stderr and "without encryption" not in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", "zz_nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "zz_nope" in r.stderr


def test_a_relative_output_folder_holds_every_notebook(tmp_path, monkeypatch):
    """``perfkit run --out runs/x``: papermill runs each notebook in its own folder (``cwd=``), which
    changes the process's working directory while the other notebooks still write their output;
    a relative folder must mean the one the command was given in."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    paths = [_nb(nbs / f"n{i}.ipynb", "x = 1") for i in range(3)]
    monkeypatch.chdir(tmp_path)
    runs = workbook.run(paths, profile="ci", out_dir="rel/out", progress=False, jobs=2)
    assert [r.status for r in runs] == ["ok"] * 3
    assert sorted(p.name for p in (tmp_path / "rel" / "out").iterdir()) == ["n0.ipynb", "n1.ipynb", "n2.ipynb"]


def test_notebooks_run_side_by_side_in_order_asked(tmp_path):
    """With jobs=2 two kernels run at once (each sleeps 3 s: overlapped, not one after the other); the
    results come back in the order asked, a failure among them kept."""
    import time

    a = _nb(tmp_path / "a.ipynb", "import time; time.sleep(3)")
    b = _nb(tmp_path / "b.ipynb", "import time; time.sleep(3); 1/0")
    t0 = time.perf_counter()
    runs = workbook.run([a, b], profile="ci", out_dir=tmp_path / "o", progress=False, jobs=2)
    assert [(r.name, r.status) for r in runs] == [("a", "ok"), ("b", "failed")]
    # one after the other would take at least the sum of both; side by side at most the longer
    assert time.perf_counter() - t0 < sum(r.seconds for r in runs) - 1.5
    assert workbook._jobs("auto", 1) == 1 and workbook._jobs(8, 3) == 3
    for bad in (0, "x", -1):
        with pytest.raises(workbook.WorkbookError, match="jobs must be"):
            workbook._jobs(bad, 3)
    assert workbook.profiles()["gpu"]["jobs"] == 1  # a GPU's timings are never taken side by side
