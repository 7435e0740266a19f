"""Run the workbook's notebooks headless through papermill, with a profile of parameters.

Profiles live in ``notebooks/profiles.yaml``: ``ci`` keeps every notebook small enough for
the CUDA simulator on a laptop, ``gpu`` sizes them for a real GPU; ``auto`` picks ``gpu`` when
a GPU is present and ``ci`` otherwise.  Each notebook runs in its own kernel; one failing
notebook does not stop the others, and its executed copy (with the error in it) is kept.
"""
from __future__ import annotations

import datetime as _dt
import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import paths

__all__ = ["WorkbookError", "NotebookRun", "NOTEBOOKS_DIR", "RUNS_DIR", "profiles", "resolve_profile",
           "notebooks", "run", "summary", "parse_params"]

ROOT = paths.repo_root()
NOTEBOOKS_DIR = ROOT / "notebooks"
RUNS_DIR = ROOT / "runs"


class WorkbookError(ValueError):
    """A notebook, profile or parameter that does not exist or cannot be used."""


@dataclass
class NotebookRun:
    name: str
    status: str  # "ok" or "failed"
    seconds: float
    output: Path
    error: str = ""


def profiles(path: Path | None = None) -> dict:
    path = Path(path or NOTEBOOKS_DIR / "profiles.yaml")
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise WorkbookError(f"cannot read profiles from {path}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), dict):
        raise WorkbookError(f"{path}: expected a mapping with a 'profiles' key")
    return doc["profiles"]


def resolve_profile(name: str) -> str:
    """``auto`` -> ``gpu`` if a GPU is usable here, else ``ci``; other names pass through."""
    if name != "auto":
        return name
    from .backend import probe_gpu

    forced = os.environ.get("PERFKIT_BACKEND", "auto").lower()
    if forced == "sim":
        return "ci"
    return "gpu" if probe_gpu()[0] else "ci"


def notebooks(names: list[str] | None = None) -> list[Path]:
    """Notebook paths for names given as paths, file names or stems (``01`` prefixes work)."""
    found = sorted(NOTEBOOKS_DIR.glob("[0-9]*.ipynb"))
    if not names:
        return found
    out = []
    for name in names:
        p = Path(name)
        if p.suffix == ".ipynb" and p.exists():
            out.append(p.resolve())
            continue
        matches = [f for f in found if f.stem == p.stem or f.stem.startswith(p.stem)]
        if len(matches) != 1:
            raise WorkbookError(f"no single notebook matches {name!r}; have: {', '.join(f.stem for f in found)}")
        out.append(matches[0])
    return out


def parse_params(pairs: list[str] | None) -> dict:
    """``["n=1024", "sizes=[1, 2]"]`` -> ``{"n": 1024, "sizes": [1, 2]}`` (values read as YAML)."""
    params = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise WorkbookError(f"parameter {pair!r} must look like NAME=VALUE")
        k, v = pair.split("=", 1)
        if not k.isidentifier():
            raise WorkbookError(f"parameter name {k!r} is not a Python identifier")
        params[k] = yaml.safe_load(v)
    return params


def run(names: list[str] | None = None, profile: str = "auto", params: dict | None = None,
        out_dir: Path | None = None, progress: bool = True, jobs: int | None = None) -> list[NotebookRun]:
    """Execute notebooks; returns one :class:`NotebookRun` per notebook, in the order asked
    (never raises for a failing notebook: its error is in the result and in its executed copy).

    ``jobs``: notebooks run at once, each in its own kernel (None: the profile's ``jobs``, where
    ``auto`` is one per CPU core; 1 without it).  The ``gpu`` profile keeps 1: two notebooks
    timing kernels on one GPU at once would each measure the other's load."""
    import papermill as pm

    prof_name = resolve_profile(profile)
    all_profiles = profiles()
    if prof_name not in all_profiles:
        raise WorkbookError(f"unknown profile {prof_name!r}; have: {', '.join(all_profiles)}")
    prof = all_profiles[prof_name] or {}
    paths = notebooks(names)
    if not paths:
        raise WorkbookError(f"no notebooks found in {NOTEBOOKS_DIR}")
    jobs = _jobs(prof.get("jobs", 1) if jobs is None else jobs, len(paths))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    # absolute: papermill's cwd= changes the process's working directory while other threads'
    # notebooks still write under out_dir
    out_dir = Path(out_dir or RUNS_DIR / stamp).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(path: Path) -> NotebookRun:
        p = dict(prof.get("parameters") or {})
        p.update((prof.get("notebooks") or {}).get(path.stem) or {})
        p.update(params or {})
        out = out_dir / path.name
        t0 = time.perf_counter()
        status, error = "ok", ""
        try:  # per-cell bars only when one notebook runs at a time (several would interleave)
            pm.execute_notebook(str(path), str(out), parameters=p, cwd=str(path.parent),
                                progress_bar=progress and jobs == 1, execution_timeout=prof.get("cell_timeout_s"),
                                kernel_name=prof.get("kernel", "python3"),
                                # the kernel app's own warnings (ipykernel 7: "running over TCP without
                                # encryption", six a run) are machinery, not the lesson; errors still show
                                extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except Exception as exc:  # keep going; the executed copy holds the traceback
            status = "failed"
            error = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else exc.__class__.__name__
        run_ = NotebookRun(path.stem, status, time.perf_counter() - t0, out, error)
        if progress and jobs > 1:
            print(f"  {run_.name}: {run_.status} in {run_.seconds:.0f} s", flush=True)
        return run_

    if jobs == 1:
        return [one(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    if progress:
        print(f"running {len(paths)} notebooks, {jobs} at a time (each in its own kernel)", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each thread only drives its kernel
        return list(pool.map(one, paths))


def _jobs(value, n: int) -> int:
    """How many notebooks to run at once: ``auto`` (one per CPU core) or a positive integer,
    never more than there are notebooks."""
    if value == "auto":
        value = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise WorkbookError(f"jobs must be 'auto' or a positive integer, not {value!r}") from None
    if value < 1:
        raise WorkbookError(f"jobs must be 'auto' or a positive integer, not {value!r}")
    return min(value, n)


def summary(runs: list[NotebookRun], profile: str) -> str:
    width = max(len(r.name) for r in runs)
    lines = [f"perfkit workbook, profile {profile}:"]
    for r in runs:
        lines.append(f"  {r.name:<{width}}  {r.status:<6}  {r.seconds:7.1f} s  {r.output}"
                     + (f"\n      error: {r.error}" if r.error else ""))
    ok = sum(r.status == "ok" for r in runs)
    lines.append(f"{ok}/{len(runs)} notebooks ran; executed copies in {runs[0].output.parent}")
    return "\n".join(lines)
