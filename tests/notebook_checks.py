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
# after them, and they are folded (01.predict_saxpy and 06.predict_gpu are not held to it yet)
PREDICTION = re.compile(r"grade\(\"((?:02\.predict_order|03\.predict_bound|04\.predict_softmax|05\.predict_share))\"")

# what answers a graded prediction even folded (a card of a rung it asks about): the prediction
# comes before the first output that matches.  02.predict_order compares no_bank_conflicts with
# warptile, answered once warptile's card is there; 04.predict_softmax asks for the best softmax
# rung, whose section's cards are the notebook's first.
ANSWERED_BY = {"02.predict_order": re.compile(r"answer for \d+ warptile\b|GEMM ladder at|every GEMM record"),
               "04.predict_softmax": re.compile(r"answer for \d+ \w+|the softmax ladder")}


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
    no progress bar's text stub, no recorded answer unfolded above a graded prediction, and none
    of :data:`ANSWERED_BY`'s above its prediction, folded or not."""
    from perfkit import lesson, results

    text = json.dumps(nb)
    assert "Traceback" not in text, f"{name} shows a traceback"
    assert lesson.false_no_record_claims(text) == [], f"{name} says 'no record' where there is one"
    assert progress_stubs(nb) == [], f"{name} shows a progress bar's text stub: {progress_stubs(nb)}"
    gpus = sorted(set(results.load()["gpu"].dropna().astype(str)))
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and PREDICTION.search(src):
            ex = PREDICTION.search(src).group(1)
            shown = lesson.answers_shown_before(nb["cells"], i, gpus)
            if ex in ANSWERED_BY:
                shown += answered_before(nb["cells"], i, ANSWERED_BY[ex])
            assert shown == [], f"{name}: {ex} comes after answers: {shown}"
