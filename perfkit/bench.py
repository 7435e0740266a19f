"""``sweep(problems, variants)``: verify each rung, then time it, into a tidy DataFrame.

For every (problem, rung), in this order:

1. **Check** on fresh random inputs (a new seed each sweep, kept in the row), the output
   poisoned with NaN first (``Variant.prepare`` does that), against the float64 reference.
   A failing rung is never timed: it stays in the table with its error.
2. **Time** it with :func:`perfkit.timing.measure` on seeded inputs, then check the timed
   buffers once more (a kernel that only works the first time shows here).
3. **Model**: the rung's own traffic model turned into a predicted time with the ceilings of
   the device in use (published figures from ``data/devices.yaml``).
4. **Record** it at once through :mod:`perfkit.results` (on a GPU), so nothing measured is lost
   if a later step fails.

An exception in any step is caught and kept in the ``error`` column; the sweep goes on.
Simulated rows keep their host-clock times in ``median_s`` but have NaN ``tflops`` and ``gbps``:
a simulated time is never a speed.

**Device faults.**  A kernel that faults the device (misaligned or illegal address, illegal
instruction, launch failure, a device-side assert: "sticky" CUDA errors) leaves the process's
CUDA context unusable: every later CUDA call in it fails.  Such a rung's row gets status
``"device fault"`` and an error starting ``"device fault: "``; the pairs after it run in a fresh
process (``spawn``, same backend, same recording root), another one after each further fault,
and their rows come back in order with ``worker`` = 1, 2, ... (0: this process).  Rows are sent
back one at a time and every record is written by the process that measured it, so nothing
measured is lost; a child that dies without a word marks its rung as a device fault too.  After a
fault this process's own CUDA context stays broken (restart the kernel before more GPU work);
:data:`last_fault` says what happened.
"""
from __future__ import annotations

import os
import time
import traceback
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from . import backend, results
from .kernels.base import Problem, UnsupportedProblem, Variant
from .model import predict

__all__ = ["sweep", "table", "GPU_TIMER", "DeviceFault", "is_device_fault", "FAULT_STATUS", "last_fault"]

#: the ``status`` of a rung whose run faulted the device
FAULT_STATUS = "device fault"

#: the error of the last device fault a sweep met in this process (None: none)
last_fault: str | None = None


class DeviceFault(RuntimeError):
    """A kernel faulted the device: this process's CUDA context is unusable from now on."""


# CUDA driver errors that leave the context unusable ("sticky"): name and number, as the driver,
# the runtime (CuPy, torch) and cuda.core spell them
_STICKY = {
    700: ("ILLEGAL_ADDRESS", "illegal memory access", "illegal address", "IllegalAddress"),
    702: ("LAUNCH_TIMEOUT", "LaunchTimeout", "launch timed out"),
    710: ("ERROR_ASSERT", "device-side assert", "cudaErrorAssert"),
    714: ("HARDWARE_STACK_ERROR", "HardwareStackError", "hardware stack error"),
    715: ("ILLEGAL_INSTRUCTION", "IllegalInstruction", "illegal instruction"),
    716: ("MISALIGNED_ADDRESS", "MisalignedAddress", "misaligned address"),
    717: ("INVALID_ADDRESS_SPACE", "InvalidAddressSpace", "invalid address space"),
    718: ("INVALID_PC", "InvalidPc", "invalid program counter"),
    719: ("LAUNCH_FAILED", "LaunchFailure", "unspecified launch failure"),
}


def is_device_fault(exc: BaseException) -> bool:
    """Whether ``exc`` (from Numba, CuPy, torch or cuda.core) reports a sticky device fault."""
    seen = set()
    while exc is not None and id(exc) not in seen:  # the cause chain too
        seen.add(id(exc))
        if isinstance(exc, DeviceFault):
            return True
        code = getattr(exc, "code", None)
        code = getattr(code, "value", code)
        if isinstance(code, int) and code in _STICKY:
            return True
        text = f"{exc.__class__.__name__}: {exc}".lower()
        if any(word.lower() in text for words in _STICKY.values() for word in words):
            return True
        exc = exc.__cause__ or exc.__context__
    return False

#: measure() settings of a sweep on a GPU (in the simulator, measure()'s own defaults).
GPU_TIMER = dict(warmup_s=0.1, min_samples=10, max_samples=500, min_time_s=0.1, max_time_s=3.0,
                 rel_ci=0.02, l2="cold")


def _model(variant: Variant, problem: Problem):
    """The rung's traffic model and, on a device with published specs, its predicted time."""
    traffic = variant.traffic(problem)
    row = {"model_flops": traffic.flops, "model_dram_bytes": traffic.dram_bytes,
           "model_limiter": traffic.limiter, "model_s": np.nan, "model_bound": None}
    try:
        from .roofline import published_rates

        rates = published_rates(traffic)
    except Exception:  # no spec for this device (e.g. the simulator): no prediction
        rates = None
    if rates:
        pred = predict(traffic, peak_flops=rates["flops"], dram_bw=rates["dram_bw"])
        row.update(model_s=pred.seconds, model_bound=pred.limiter)
    return row, traffic


class _ProblemData:
    """A problem's seeded inputs and their float64 reference, made once per (problem, seed) and
    shared by the rungs of a sweep (each rung gets its own copy of the inputs; the reference is
    only read).  One problem is kept at a time: the sweep goes problem by problem."""

    def __init__(self):
        self._key, self._data = None, {}
        self.made = 0  # how many (inputs, reference) pairs were built: tests count them

    def get(self, problem: Problem, seed: int):
        if self._key != problem:
            self._key, self._data = problem, {}
        if seed not in self._data:
            inputs = problem.make_inputs(seed)
            self._data[seed] = (inputs, problem.reference(inputs))
            self.made += 1
        inputs, ref = self._data[seed]
        return {k: v.copy() for k, v in inputs.items()}, ref


def _measure_one(problem, variant, *, seed, check_seed, timer, record, results_root, data=None):
    """One row of the sweep.  Never raises: failures end up in ``row['error']``."""
    data = data if data is not None else _ProblemData()
    from .timing import measure

    row: dict = {"op": problem.op, "problem": problem.label, **problem.params,
                 "rung": variant.rung, "variant": variant.name, "label": variant.label,
                 "config": variant.config, "flops": problem.flops, "bytes": problem.bytes,
                 "simulated": backend.is_simulator(), "check_ok": False, "error": None, "traceback": None,
                 "status": "pending", "check_seed": check_seed, "seed": seed}
    stage = "model"
    clock = [time.perf_counter()]

    def lap(column: str) -> None:  # a rung's seconds: inputs_s, check_s (with its compile), time_s, record_s
        now = time.perf_counter()
        row[column] = row.get(column, 0.0) + now - clock[0]
        clock[0] = now

    try:
        model_row, traffic = _model(variant, problem)
        row.update(model_row)
        stage = "supports"
        variant.supports(problem)
        stage = "check"
        lap("model_s")
        fresh, fresh_ref = data.get(problem, check_seed)
        lap("inputs_s")
        check = problem.check(variant.run(problem, fresh), fresh_ref)
        lap("check_s")
        row.update(check_ok=check.ok, max_abs_err=check.max_abs_err, max_rel_err=check.max_rel_err)
        if not check.ok:
            row.update(status="failed check", error=f"check failed (seed {check_seed}): {check.message}")
            return row
        stage = "time"
        inputs, ref = data.get(problem, seed)
        lap("inputs_s")
        prepared = variant.prepare(problem, inputs)
        m = measure(prepared, sync=prepared.synchronize, **timer)
        lap("time_s")
        row.update(median_s=m.median_s, min_s=m.min_s, iqr_s=m.iqr_s, cv=m.cv, n_samples=m.n,
                   stop_reason=m.stop_reason, simulated=m.simulated)
        stage = "recheck"
        after = problem.check(prepared.output(), ref)
        if not after.ok:
            row.update(check_ok=False, status="failed check after timing",
                       error=f"timed output wrong: {after.message}")
        else:
            row["status"] = "ok"
        if record:
            stage = "record"
            entry = {"op": problem.op, "problem": problem.label, "params": problem.params,
                     "rung": variant.rung, "variant": variant.name, "label": variant.label,
                     "config": variant.config,
                     "flops": problem.flops, "bytes": problem.bytes, "timing": m.as_dict(),
                     "check": {**check.as_dict(), "seed": check_seed, "after_timing": after.as_dict()},
                     "traffic": traffic.as_dict(), "simulated": m.simulated,
                     "check_ok": bool(check.ok and after.ok)}
            row["path"] = str(results.record(entry, root=results_root))
        lap("record_s")
    except UnsupportedProblem as exc:
        row.update(status="unsupported", error=f"unsupported: {exc}")
    except Exception as exc:  # keep going: one broken rung must not lose the others
        if is_device_fault(exc):
            row.update(status=FAULT_STATUS, check_ok=False,
                       error=f"device fault: {exc.__class__.__name__}: {exc} (in {stage}; the rest of "
                             "the sweep runs in a fresh process)",
                       traceback=traceback.format_exc(limit=6))
            return row
        row.update(status=f"error in {stage}", check_ok=False if stage in ("check", "supports") else row["check_ok"],
                   error=f"{exc.__class__.__name__}: {exc}",
                   traceback=traceback.format_exc(limit=6))
    return row


def sweep(problems: Problem | Iterable[Problem], variants: Variant | Iterable[Variant], *,
          seed: int = 0, check_seed: int | None = None, timer: dict | None = None,
          record: bool | str = "auto", results_root=None, progress: bool | Callable = True,
          on_row: Callable[[dict], None] | None = None) -> pd.DataFrame:
    """Check then time every variant on every problem; return one row per pair.

    ``record``: ``"auto"`` records real GPU measurements in ``data/results/`` and nothing in
    the simulator; ``True`` records in the simulator too (under ``runs/sim-results/``);
    ``False`` records nothing.  ``timer`` overrides :func:`perfkit.timing.measure` settings.
    ``progress``: tqdm's bar (True), none (False), or a callable that makes the bar
    (``progress(total=, desc=)``, e.g. :func:`perfkit.lesson.progress`, whose bar a saved
    notebook keeps as one line, not as a frozen stub).  ``on_row(row)`` is called with each
    row, in order, as soon as this process has it (a recorder's log line, written before the
    next rung starts; after a device fault the fresh process's rows come when it ends).
    """
    problems = [problems] if isinstance(problems, Problem) else list(problems)
    variants = [variants] if isinstance(variants, Variant) else list(variants)
    if not problems or not variants:
        raise ValueError("sweep needs at least one problem and one variant")
    for p in problems:
        if not isinstance(p, Problem):
            raise TypeError(f"sweep: {p!r} is not a perfkit Problem")
    for v in variants:
        if not isinstance(v, Variant):
            raise TypeError(f"sweep: {v!r} is not a perfkit Variant")
    if record not in (True, False, "auto"):
        raise ValueError(f"record must be True, False or 'auto', got {record!r}")
    sim = backend.is_simulator()
    settings = {} if sim else dict(GPU_TIMER)
    settings.update(timer or {})
    if check_seed is None:  # fresh inputs for the check each sweep; the seed is kept in the row
        check_seed = int(np.random.SeedSequence().entropy % (2**31))
    do_record = bool(record) if record != "auto" else not sim

    pairs = [(p, v) for p in problems for v in variants]
    kw = dict(seed=seed, check_seed=check_seed, timer=settings, record=do_record, results_root=results_root)
    rows = []
    if callable(progress):
        bar = progress(total=len(pairs), desc="sweep")
    else:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pairs), desc="sweep", disable=not progress, leave=False)
    worker = 0

    def emit(row: dict) -> None:
        row["worker"] = worker
        if on_row is not None:
            on_row(row)

    while len(rows) < len(pairs):
        rest = pairs[len(rows):]
        if worker == 0:  # this process, until the first device fault
            new_rows = _run_pairs(rest, kw, bar=bar, emit=emit)
        else:  # a fresh process (a fresh CUDA context) for what is left after a fault
            new_rows = _run_in_child(rest, kw, worker)
            bar.update(len(new_rows))
            for r in new_rows:
                emit(r)
        rows += new_rows
        if rows and rows[-1]["status"] == FAULT_STATUS:
            global last_fault
            last_fault = rows[-1]["error"]
            worker += 1
    bar.close()
    if worker:
        import warnings

        warnings.warn(f"sweep: {worker} device fault(s); the rungs after each ran in a fresh process. "
                      f"This process's CUDA context is unusable now: restart it before more GPU work. "
                      f"Last: {last_fault}", RuntimeWarning, stacklevel=2)
    return table(rows)


def table(rows: list[dict]) -> pd.DataFrame:
    """Rows of :func:`sweep` (all, or some as they come) as its table: the timing columns always
    there, TFLOP/s and GB/s added, and NaN for simulated rows (a simulated time is never a speed)."""
    df = pd.DataFrame(rows)
    for col in ("median_s", "min_s", "iqr_s", "cv", "n_samples", "max_abs_err", "model_s"):
        if col not in df:
            df[col] = np.nan
    df = results.metric_columns(df)
    df.loc[df["simulated"].astype(bool), ["tflops", "gbps"]] = np.nan
    return df


# --- device-fault isolation ------------------------------------------------------------------
def _run_pairs(pairs, kw, bar=None, emit=None) -> list[dict]:
    """Measure pairs in order in this process; stop after a device fault (the context is gone)."""
    rows = []
    kw = {**kw, "data": _ProblemData()}  # inputs and references shared by a problem's rungs
    for p, v in pairs:
        if bar is not None:
            bar.set_postfix_str(f"{v.label} | {p.label}"[:60])
        row = _measure_one(p, v, **kw)
        rows.append(row)
        if emit is not None:
            emit(row)
        if bar is not None:
            bar.update(1)
        if row["status"] == FAULT_STATUS:
            break
    return rows


def _child_main(job_path: str, rows_path: str) -> int:
    """In the fresh process: measure, appending each row to ``rows_path`` the moment it exists."""
    import pickle
    import sys

    with open(job_path, "rb") as f:
        path = pickle.load(f)
        sys.path[:0] = [p for p in path if p not in sys.path]  # the parent's modules (tests, tools)
        pairs, kw = pickle.load(f)
    with open(rows_path, "ab") as out:
        def emit(row):
            pickle.dump(row, out)
            out.flush()

        _run_pairs(pairs, kw, emit=emit)
    return 0


def _run_in_child(pairs, kw, worker: int) -> list[dict]:
    """Run ``pairs`` in a fresh ``python -m perfkit.bench`` process with this process's backend;
    return its rows (up to and including a fault, if it meets one).

    If the child dies without reporting the pair it was on, that pair is a device fault too
    (the next child starts after it)."""
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="perfkit-sweep-") as tmp:
        job, out = os.path.join(tmp, "job.pkl"), os.path.join(tmp, "rows.pkl")
        try:
            with open(job, "wb") as f:
                pickle.dump(list(sys.path), f)
                pickle.dump((pairs, kw), f)
        except Exception as exc:  # e.g. a variant defined in a notebook cell: say so on every row left
            return [_unrun_row(p, v, kw, f"not run: could not hand this rung to a fresh process after a "
                                         f"device fault ({exc.__class__.__name__}: {exc})") for p, v in pairs]
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        env["PERFKIT_BACKEND"] = backend.name()  # the child decides as this process did
        r = subprocess.run([sys.executable, "-m", "perfkit.bench", "--child", job, out], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rows: list[dict] = []
        if os.path.exists(out):
            with open(out, "rb") as f:
                while True:
                    try:
                        rows.append(pickle.load(f))
                    except EOFError:
                        break
                    except Exception:  # a row cut short by the child's death
                        break
    if len(rows) < len(pairs) and (not rows or rows[-1]["status"] != FAULT_STATUS):
        p, v = pairs[len(rows)]
        tail = (r.stderr or "").strip().splitlines()[-3:]
        row = _unrun_row(p, v, kw, f"device fault: the sweep's process {worker} died (exit code "
                                   f"{r.returncode}) without reporting this rung: {' | '.join(tail)}")
        row["status"] = FAULT_STATUS
        rows.append(row)
    return rows


def _unrun_row(p, v, kw, error: str) -> dict:
    return {"op": p.op, "problem": p.label, **p.params, "rung": v.rung, "variant": v.name, "label": v.label,
            "config": v.config, "flops": p.flops, "bytes": p.bytes, "simulated": backend.is_simulator(),
            "check_ok": False, "status": "not run", "check_seed": kw["check_seed"], "seed": kw["seed"],
            "error": error, "traceback": None}


if __name__ == "__main__":  # the fresh process of a sweep after a device fault
    import sys

    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(_child_main(sys.argv[2], sys.argv[3]))
    sys.exit("usage: python -m perfkit.bench --child JOB ROWS (run by bench.sweep)")
