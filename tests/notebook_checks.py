"""What every executed notebook must show, however it ran: through papermill
(tests/test_notebooks.py) or through JupyterLab's Run All in Chromium (tests/test_browser.py).

Each notebook runs once in the suite: 01-04 in the browser where Chromium and Playwright are
there (CI requires them), 05 and 06 through papermill (the path ``make run`` takes); with no
browser outside CI, papermill runs them all.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

#: the notebooks the browser test runs (Run All in JupyterLab); papermill runs the rest
BROWSER_NOTEBOOKS = ("01_timing_and_roofline", "02_gemm", "03_convolution", "04_normalization")
REQUIRED = os.environ.get("PERFKIT_REQUIRE_BROWSER", "") not in ("", "0")

# the graded predictions whose answer the page shows (records, or the model's tables): each comes
# after them, and they are folded
PREDICTION = re.compile(r"grade\(\"((?:02\.predict_order|03\.predict_bound|04\.predict_softmax|05\.predict_share))\"")
# every graded prediction; each must be held to PREDICTION's check, to ANSWER_VALUES or to ANSWERED_BY
GRADED_PREDICTION = re.compile(r"grade\(\"(\d\d\.predict_\w+)\"")

# what answers a graded prediction even folded (a card of a rung it asks about): the prediction
# comes before the first output that matches.  02.predict_order compares no_bank_conflicts with
# warptile, answered once warptile's card is there; 04.predict_softmax asks for the best softmax
# rung, whose section's cards are the notebook's first.
ANSWERED_BY = {"02.predict_order": re.compile(r"answer for \d+ warptile\b|GEMM ladder at|every GEMM record"),
               "04.predict_softmax": re.compile(r"answer for \d+ \w+|the softmax ladder"),
               # graded against the model's estimate of saxpy grid_stride on two GPUs: notebook 06 shows
               # no saxpy above it, folded or not (its what-if is of another rung)
               "06.predict_gpu": re.compile(r"\bgrid_stride\b")}


def saxpy_answers_us() -> list[float]:
    """The times (us) that answer 01.predict_saxpy (saxpy grid_stride at n = 2**26): Nsight Compute's
    kernel time per table in data/ncu/ (what the grader checks against), each timer check's times
    of that rung (data/timer/; the first check names it '02 grid_stride') and its records, if any.
    Notebook 01 shows other records and figures unfolded above the prompt (the timer's ratios, the
    ceilings), so the check is on these values."""
    import csv

    from perfkit import paths, results

    vals = []
    for f in sorted((paths.DATA / "ncu").glob("*.csv")):
        with open(f) as fh:
            rows = [r for r in csv.DictReader(fh) if r["op"] == "saxpy" and r["rung"].endswith(" grid_stride")]
        if rows:
            vals.append(sum(float(r["time_us"]) for r in rows))
    for f in sorted((paths.DATA / "timer").glob("*.csv")):
        with open(f) as fh:
            vals += [float(r[k]) * 1e6 for r in csv.DictReader(fh)
                     if r.get("op") == "saxpy" and (r.get("variant") or "").split()[-1:] == ["grid_stride"]
                     for k in ("measure_s", "do_bench_s") if r.get(k)]
    rec = results.load(op="saxpy")
    if not rec.empty:
        vals += list(rec.loc[rec["variant"] == "grid_stride", "median_s"].astype(float) * 1e6)
    return vals


#: graded predictions checked by the values that answer them, outside a fold (printed lines too)
ANSWER_VALUES = {"01.predict_saxpy": saxpy_answers_us}


def answered_before(cells: list, stop: int, pattern: re.Pattern) -> list[str]:
    """'cell i: <match>' for each output of ``cells[:stop]`` (executed nbformat cells) whose text,
    folded or not, matches ``pattern``."""
    found = []
    for i, cell in enumerate(cells[:stop]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            m = pattern.search(json.dumps(out))
            if m:
                found.append(f"cell {i}: {m.group(0)}")
    return found


#: tqdm's text stand-in for its widget, frozen in a saved notebook (``sweep:   0%|   | 0/8 [00:00<?, ?it/s]``)
PROGRESS_STUB = re.compile(r"\d+%\|.*\|\s*\d+/\d+ \[")


def progress_stubs(nb: dict) -> list[tuple[int, str]]:
    """(cell index, text) of each output that is a progress bar's text stub (a bar that a saved
    notebook shows frozen at some step: perfkit.lesson.progress leaves one line instead)."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            texts = [out.get("text", "")] + [(out.get("data") or {}).get("text/plain", "")]
            for t in texts:
                t = "".join(t) if isinstance(t, list) else t
                if PROGRESS_STUB.search(t):
                    found.append((i, t.strip()[:120]))
    return found


def browser_missing() -> str | None:
    """Why the browser test cannot run here (None: it can)."""
    exe = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if exe is None:
        return "Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


def runs_in_browser(stem: str) -> bool:
    """Whether the browser test executes this notebook in this run (so papermill need not)."""
    return stem in BROWSER_NOTEBOOKS and (REQUIRED or browser_missing() is None)


def check_executed(name: str, nb: dict) -> None:
    """An executed notebook (nbformat JSON): no traceback, no 'no record' where a record exists,
    no progress bar's text stub, no recorded answer unfolded above a graded prediction, none of
    :data:`ANSWERED_BY`'s above its prediction, folded or not, and none of :data:`ANSWER_VALUES`'
    numbers outside a fold above theirs; every graded prediction is held to one of these."""
    from perfkit import lesson, results

    text = json.dumps(nb)
    assert "Traceback" not in text, f"{name} shows a traceback"
    assert lesson.false_no_record_claims(text) == [], f"{name} says 'no record' where there is one"
    assert progress_stubs(nb) == [], f"{name} shows a progress bar's text stub: {progress_stubs(nb)}"
    gpus = sorted(set(results.load()["gpu"].dropna().astype(str)))
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or not GRADED_PREDICTION.search(src):
            continue
        ex = GRADED_PREDICTION.search(src).group(1)
        generic = bool(PREDICTION.search(src))
        assert generic or ex in ANSWER_VALUES or ex in ANSWERED_BY, \
            f"{name}: {ex} is a graded prediction no check holds to 'predict, then reveal'"
        shown = lesson.answers_shown_before(nb["cells"], i, gpus) if generic else []
        if ex in ANSWERED_BY:
            shown += answered_before(nb["cells"], i, ANSWERED_BY[ex])
        if ex in ANSWER_VALUES:
            shown += lesson.values_shown_before(nb["cells"], i, ANSWER_VALUES[ex]())
        assert shown == [], f"{name}: {ex} comes after answers: {shown}"
