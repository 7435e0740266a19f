"""Record and load measurements with provenance.

One JSON file per measured (problem, rung) under ``data/results/<gpu>/<op>/``, written
atomically (a temporary file hard-linked into place, so a reader never sees half a file and
an existing file is never overwritten).  Each carries what is needed to trust or reproduce
it: GPU name, compute capability, driver, CUDA runtime, package versions, git commit and
dirty flag, UTC time, host, problem, variant, timer settings, raw samples and check result.

Simulated runs are never written to ``data/results/`` (that folder holds real GPU numbers
only); :func:`record` sends them under ``runs/sim-results/`` instead, marked simulated.
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import platform
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pandas as pd

from . import backend, paths

__all__ = ["ResultsError", "REPO_ROOT", "RESULTS_DIR", "SIM_RESULTS_DIR", "RECORD_DIR_ENV", "COLUMNS", "provenance", "git_commit", "record",
           "load", "metric_columns"]

REPO_ROOT = paths.repo_root()
RESULTS_DIR = paths.DATA / "results"
SIM_RESULTS_DIR = REPO_ROOT / "runs" / "sim-results"
#: environment variable that sends real records made with no explicit ``root`` elsewhere than
#: ``data/results/`` (the test suite points it at a temporary folder: no test writes there)
RECORD_DIR_ENV = "PERFKIT_RECORD_DIR"
SCHEMA = 1


class ResultsError(RuntimeError):
    """A result cannot be recorded or read as asked."""


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def _static_provenance() -> dict:
    from importlib import metadata

    versions = {}
    for pkg in ("perfkit", "numba", "numba-cuda", "llvmlite", "numpy", "cupy-cuda13x",
                "cuda-bindings", "torch", "triton", "pandas"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    status = _git("status", "--porcelain", "--untracked-files=no")
    commit = _git("rev-parse", "HEAD")
    return {
        "packages": versions,
        "python": platform.python_version(),
        # a copy of the working tree with no .git (a lent GPU machine): the commit it was made
        # from, as the caller says in PERFKIT_GIT_COMMIT (tools/record_gpu.py --commit)
        "git_commit": commit or os.environ.get("PERFKIT_GIT_COMMIT") or None,
        "git_commit_from": "git" if commit else ("PERFKIT_GIT_COMMIT" if os.environ.get("PERFKIT_GIT_COMMIT") else None),
        "git_dirty": bool(status) if status is not None else None,
        "host": socket.gethostname(),
        "platform": platform.platform(),
    }


def git_commit() -> str | None:
    """The commit of the code in use: git's HEAD, else ``PERFKIT_GIT_COMMIT`` (a copy with no
    .git, as on a lent GPU machine), else None."""
    return _static_provenance().get("git_commit")


def provenance() -> dict:
    """Where and with what a measurement is being taken now."""
    dev = backend.device()
    return {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": dev.name,
        "gpu_slug": dev.slug,
        "simulated": dev.simulated,
        "compute_capability": list(dev.compute_capability) if dev.compute_capability else None,
        "driver_version": dev.driver_version,
        "runtime_version": dev.runtime_version,
        "device": dev.as_dict(),
        **_static_provenance(),
    }


def _jsonable(x):
    """Plain JSON: NumPy scalars and arrays become numbers and lists, NaN and infinities
    null (strict JSON has neither), paths and other objects their text."""
    if isinstance(x, dict):
        out = {str(k): _jsonable(v) for k, v in x.items()}
        if len(out) != len(x):  # 1 and "1" would be one JSON key: one value lost
            raise ResultsError(f"keys {list(x)} collide once written as JSON text keys")
        return out
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist") and callable(x.tolist):
        return _jsonable(x.tolist())  # NumPy arrays and scalars
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)


def record(entry: dict, *, root: Path | str | None = None) -> Path:
    """Write one result (a dict; see :mod:`perfkit.bench` for its fields) with provenance.

    Returns the path written.  Never overwrites: a name clash gets a new unique suffix.
    With no ``root``, real results go to ``$PERFKIT_RECORD_DIR`` when that is set, else
    ``data/results/``.
    A simulated entry is refused for ``data/results`` and goes under ``runs/sim-results``.
    """
    if not isinstance(entry, dict):
        raise ResultsError(f"a result is a dict, got {type(entry).__name__}")
    prov = provenance()
    # simulated if the entry or the device in use says so: a simulator run cannot be relabelled
    simulated = bool(entry.get("simulated")) or bool(prov["simulated"])
    if root is None:
        root = SIM_RESULTS_DIR if simulated else (os.environ.get(RECORD_DIR_ENV) or RESULTS_DIR)
    root = Path(root).resolve()
    if simulated and (root == RESULTS_DIR.resolve() or RESULTS_DIR.resolve() in root.parents):
        raise ResultsError(f"simulated results are never written to {RESULTS_DIR}; "
                           f"they may go under {SIM_RESULTS_DIR}")
    op = str(entry.get("op", "unknown"))
    folder = root / prov["gpu_slug"] / op
    folder.mkdir(parents=True, exist_ok=True)
    doc = _jsonable({"schema": SCHEMA, "provenance": prov, **entry, "simulated": simulated})
    stamp = prov["utc"].replace(":", "").replace("-", "").replace("+0000", "Z")
    rung = entry.get("rung", "x")
    base = f"{stamp}-r{rung}-{entry.get('variant', 'variant')}"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        while True:
            path = folder / f"{base}-{uuid.uuid4().hex[:8]}.json"
            try:
                os.link(tmp, path)  # atomic, and fails rather than overwrite
                break
            except FileExistsError:
                continue
    finally:
        os.unlink(tmp)
    return path


def metric_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``tflops`` and ``gbps`` from ``flops``, ``bytes`` and ``median_s`` where present."""
    if df.empty or "median_s" not in df:
        return df
    df = df.copy()
    t = pd.to_numeric(df["median_s"], errors="coerce")
    df["tflops"] = pd.to_numeric(df.get("flops"), errors="coerce") / t / 1e12
    df["gbps"] = pd.to_numeric(df.get("bytes"), errors="coerce") / t / 1e9
    return df


def _flatten(doc: dict, path: Path) -> dict:
    prov = doc.get("provenance", {})
    row = {k: v for k, v in doc.items() if k not in ("provenance", "timing", "check", "params", "traffic")}
    row.update({k: v for k, v in (doc.get("params") or {}).items()})
    timing = doc.get("timing") or {}
    for k in ("median_s", "iqr_s", "min_s", "mean_s", "cv", "n", "stop_reason", "l2", "flush_bytes"):
        if k in timing:
            row["n_samples" if k == "n" else k] = timing[k]
    if "spin_s" in (timing.get("extra") or {}):  # the GPU work the timer queued ahead (model.record_ahead)
        row["spin_s"] = timing["extra"]["spin_s"]
    check = doc.get("check") or {}
    row.setdefault("check_ok", check.get("ok"))
    row["max_abs_err"] = check.get("max_abs_err")
    traffic = doc.get("traffic") or {}
    row["model_dram_bytes"] = traffic.get("dram_bytes")
    row.update(gpu=prov.get("gpu"), gpu_slug=prov.get("gpu_slug"), commit=prov.get("git_commit"),
               dirty=prov.get("git_dirty"), utc=prov.get("utc"), driver=prov.get("driver_version"),
               path=str(path))
    return row


#: the columns of :func:`load`'s frame that every recorded result has (more come from params)
COLUMNS = ["op", "problem", "rung", "variant", "simulated", "median_s", "iqr_s", "min_s", "cv", "n_samples",
           "check_ok", "max_abs_err", "model_dram_bytes", "gpu", "gpu_slug", "commit", "dirty", "utc",
           "driver", "path", "tflops", "gbps"]


def load(op: str | None = None, gpu: str | None = None, *, root: Path | str | None = None,
         latest: bool = True) -> pd.DataFrame:
    """Recorded results as a tidy DataFrame (one row per file); with no results, an empty
    frame with the :data:`COLUMNS` every result has.

    ``gpu`` matches the GPU name or its folder name, case-insensitively.  With ``latest``,
    only the newest record of each (gpu, op, problem, rung, variant) is kept.
    """
    root = Path(root) if root is not None else RESULTS_DIR
    rows = []
    for path in sorted(root.glob("*/*/*.json")):
        if path.name.startswith(".tmp-"):
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultsError(f"unreadable result file {path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise ResultsError(f"result file {path} holds a JSON {type(doc).__name__}, not a result object")
        row = _flatten(doc, path)
        if op is not None and row.get("op") != op:
            continue
        if gpu is not None and gpu.lower() not in {str(row.get("gpu", "")).lower(),
                                                    str(row.get("gpu_slug", "")).lower()}:
            continue
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = metric_columns(df)
    if latest:
        keys = [c for c in ("gpu", "op", "problem", "rung", "variant") if c in df]
        df = df.sort_values("utc").drop_duplicates(keys, keep="last")
    return df.sort_values([c for c in ("op", "problem", "rung") if c in df]).reset_index(drop=True)
