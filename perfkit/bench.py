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
"""
from __future__ import annotations

import traceback
from typing import Iterable

import numpy as np
import pandas as pd

from . import backend, results
from .kernels.base import Problem, UnsupportedProblem, Variant
from .model import predict

__all__ = ["sweep", "GPU_TIMER"]

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


def _measure_one(problem, variant, *, seed, check_seed, timer, record, results_root):
    """One row of the sweep.  Never raises: failures end up in ``row['error']``."""
    from .timing import measure

    row: dict = {"op": problem.op, "problem": problem.label, **problem.params,
                 "rung": variant.rung, "variant": variant.name, "label": variant.label,
                 "config": variant.config, "flops": problem.flops, "bytes": problem.bytes,
                 "simulated": backend.is_simulator(), "check_ok": False, "error": None, "traceback": None,
                 "status": "pending", "check_seed": check_seed, "seed": seed}
    stage = "model"
    try:
        model_row, traffic = _model(variant, problem)
        row.update(model_row)
        stage = "supports"
        variant.supports(problem)
        stage = "check"
        fresh = problem.make_inputs(check_seed)
        check = problem.check(variant.run(problem, fresh), problem.reference(fresh))
        row.update(check_ok=check.ok, max_abs_err=check.max_abs_err, max_rel_err=check.max_rel_err)
        if not check.ok:
            row.update(status="failed check", error=f"check failed (seed {check_seed}): {check.message}")
            return row
        stage = "time"
        inputs = problem.make_inputs(seed)
        prepared = variant.prepare(problem, inputs)
        m = measure(prepared, sync=prepared.synchronize, **timer)
        row.update(median_s=m.median_s, min_s=m.min_s, iqr_s=m.iqr_s, cv=m.cv, n_samples=m.n,
                   stop_reason=m.stop_reason, simulated=m.simulated)
        stage = "recheck"
        after = problem.check(prepared.output(), problem.reference(inputs))
        if not after.ok:
            row.update(check_ok=False, status="failed check after timing",
                       error=f"timed output wrong: {after.message}")
        else:
            row["status"] = "ok"
        if record:
            stage = "record"
            entry = {"op": problem.op, "problem": problem.label, "params": problem.params,
                     "rung": variant.rung, "variant": variant.name, "config": variant.config,
                     "flops": problem.flops, "bytes": problem.bytes, "timing": m.as_dict(),
                     "check": {**check.as_dict(), "seed": check_seed, "after_timing": after.as_dict()},
                     "traffic": traffic.as_dict(), "simulated": m.simulated,
                     "check_ok": bool(check.ok and after.ok)}
            row["path"] = str(results.record(entry, root=results_root))
    except UnsupportedProblem as exc:
        row.update(status="unsupported", error=f"unsupported: {exc}")
    except Exception as exc:  # keep going: one broken rung must not lose the others
        row.update(status=f"error in {stage}", check_ok=False if stage in ("check", "supports") else row["check_ok"],
                   error=f"{exc.__class__.__name__}: {exc}",
                   traceback=traceback.format_exc(limit=6))
    return row


def sweep(problems: Problem | Iterable[Problem], variants: Variant | Iterable[Variant], *,
          seed: int = 0, check_seed: int | None = None, timer: dict | None = None,
          record: bool | str = "auto", results_root=None, progress: bool = True) -> pd.DataFrame:
    """Check then time every variant on every problem; return one row per pair.

    ``record``: ``"auto"`` records real GPU measurements in ``data/results/`` and nothing in
    the simulator; ``True`` records in the simulator too (under ``runs/sim-results/``);
    ``False`` records nothing.  ``timer`` overrides :func:`perfkit.timing.measure` settings.
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

    from tqdm.auto import tqdm

    pairs = [(p, v) for p in problems for v in variants]
    rows = []
    bar = tqdm(pairs, desc="sweep", disable=not progress, leave=False)
    for p, v in bar:
        bar.set_postfix_str(f"{v.label} | {p.label}"[:60])
        rows.append(_measure_one(p, v, seed=seed, check_seed=check_seed, timer=settings,
                                 record=do_record, results_root=results_root))
    df = pd.DataFrame(rows)
    for col in ("median_s", "min_s", "iqr_s", "cv", "n_samples", "max_abs_err", "model_s"):
        if col not in df:
            df[col] = np.nan
    df = results.metric_columns(df)
    df.loc[df["simulated"].astype(bool), ["tflops", "gbps"]] = np.nan
    return df
