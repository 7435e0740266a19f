"""Shared test setup: perfkit picks its backend (the simulator on a machine with no GPU)
before anything imports numba.cuda.

No test may write under ``data/results/`` (it holds real GPU records only): every real record
made during the run with no explicit root goes to a temporary folder (``PERFKIT_RECORD_DIR``,
inherited by notebook kernels and child processes), and a session fixture fails the run if
any file there appeared, changed or vanished.
"""
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

import perfkit  # noqa: E402,F401  (decides GPU or simulator first)
from perfkit import backend, results  # noqa: E402

# set at import, before any test (or xdist worker) can record: a session-wide temporary root
_RECORD_TMP = tempfile.TemporaryDirectory(prefix="perfkit-test-records-")
os.environ[results.RECORD_DIR_ENV] = _RECORD_TMP.name


def snapshot_results(root: Path | None = None) -> dict:
    """{relative path: (size, mtime_ns)} of every file under ``data/results/``."""
    root = Path(root or results.RESULTS_DIR)
    out = {}
    if root.exists():
        for p in root.rglob("*"):
            if p.is_file() or p.is_symlink():
                st = p.lstat()
                out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def results_changes(before: dict, after: dict) -> list[str]:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    return ([f"appeared: {k}" for k in added] + [f"vanished: {k}" for k in removed]
            + [f"changed: {k}" for k in changed])


@pytest.fixture(scope="session", autouse=True)
def data_results_untouched():
    """Fail the run if any test wrote, changed or removed a file under data/results/."""
    before = snapshot_results()
    yield
    changes = results_changes(before, snapshot_results())
    if changes:
        pytest.fail(f"tests touched {results.RESULTS_DIR} (no test may write there): "
                    + "; ".join(changes[:20]) + (f" ... {len(changes)} in all" if len(changes) > 20 else ""),
                    pytrace=False)


@pytest.fixture
def fresh_seed(request):
    """A new random seed each run, printed on failure so a failing case can be replayed."""
    seed = int(np.random.SeedSequence().entropy % (2**31))
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed}")
    return seed


def pytest_report_header(config):
    return f"perfkit: {backend.describe()}"


def pytest_collection_modifyitems(config, items):
    """Run the tests marked ``slow`` (the notebooks, JupyterLab in Chromium, the 65537-column
    rows: up to three minutes each in the simulator) first, longest first by a rough order,
    the rest as collected.  With ``-n auto --dist worksteal`` the long tests then start at
    once on separate workers and the short ones fill in around them, rather than one starting
    last and running alone (CI's wall time: the README's test command)."""
    def rank(item):
        if item.get_closest_marker("slow") is None:
            return 2
        return 0 if "notebook" in item.nodeid else 1

    items.sort(key=rank)  # stable: the collected order within each rank
