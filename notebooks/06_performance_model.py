# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · A performance model that predicts a rung before it runs
#
# The roofline gives one number per op: every SIMT GEMM rung "should" take the FP32-peak time.
# `perfkit.model.estimate(variant, problem, gpu)` predicts each rung from what is known without
# running it: the kernel as compiled for that GPU (its loops, their instruction mix and trip
# counts, registers and occupancy), the rung's traffic per memory level, the shared-memory bank
# conflicts of its access pattern (simulated on a small twin of the problem), the waves of
# blocks, and the device's published and measured rates. Every number it uses is listed with
# its source in `Estimate.inputs`.
#
# This notebook shows (1) one estimate and its legs, (2) the same rung on every GPU of
# `data/devices.yaml` (which GPU would this kernel like, and why, and what the timer hides), and
# (3) the check against one GPU's measurements in `data/results/` and its Nsight Compute counters.
# **Every time here is a model prediction or a recorded GPU measurement; nothing is timed in this
# notebook.**

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
exercise_reference = False    # True: the exercises grade the reference answers, for CI
what_if_op = "gemm"               # op module under perfkit.kernels, e.g. gemm, saxpy, norm.softmax
what_if_rung = "double_buffer"    # rung name
what_if_size = {"m": 4096, "n": 4096, "k": 4096}  # problem fields
records_gpu = None                # the GPU whose records are validated (name or slug); None: the newest records' GPU
validate_ops = []                 # empty: every recorded op (validate's own headline)
validate_problems = []            # empty: every recorded problem
validate_budget_s = 240           # past it, records with no stored estimate are listed, not estimated (None: all)
use_banks = True                  # simulate shared-memory bank conflicts (slow the first time)

# %%
import importlib

import matplotlib.pyplot as plt
import pandas as pd

import perfkit  # noqa: F401  (chooses the backend before numba)
from IPython.display import display
from perfkit import lesson, model

mod = importlib.import_module(f"perfkit.kernels.{what_if_op}")
variant = next(v for v in mod.LADDER if v.name == what_if_rung)
problem = variant.example(mod.Problem(**what_if_size))
est = model.estimate(variant, problem, "h100-sxm", banks=use_banks)
print(est)

# %% [markdown]
# ## The legs of one estimate
#
# Each leg is the time one resource would need if nothing else limited the kernel; the estimate
# combines them (`max` plus a fitted part of the second largest, none of it where DRAM binds
# and the second is a pipe or another level, as in the roofline; the module docstring states
# the rule). The bound is the largest leg.

# %%
legs = pd.Series({k: v * 1e6 for k, v in est.legs.items() if v > 0}, name="microseconds").sort_values()
ax = legs.plot.barh(figsize=(6, 3), title=f"{variant.label} at {problem.label}: legs on the H100 (model)")
ax.set_xlabel("microseconds (model prediction)")
plt.show()
launch = est.launches[0] if est.launches else {}
pd.Series({k: launch.get(k) for k in ("kernel", "registers", "blocks_per_sm", "occupancy", "waves", "tail",
                                      "warp_instructions", "smem_wavefronts", "bank_degree_load",
                                      "bank_source", "hot_loop")}, name="first launch")

# %% [markdown]
# ## The latency leg: one warp against the warps sharing its scheduler
#
# For each loop the model runs an in-order scoreboard over the SASS body: an instruction issues
# one cycle after the one before it, or when the registers it reads are ready (a global load's
# result after the L2 or DRAM latency, a shared load's after ~30 cycles times its conflict
# degree, an FFMA's after 4). That gives one warp's cycles per iteration. The warps sharing a
# scheduler need their instructions' issue cycles; the loop costs whichever is larger, per
# iteration. A loop whose `warp_cycles` exceed its `issue_cycles` waits on latency (too few
# warps, or loads used right after they issue); the other way round, the scheduler is busy.

# %%
detail = pd.DataFrame(launch.get("latency_detail", []))
if len(detail):
    detail["bound_by"] = ["latency" if c > i else "issue" for c, i in zip(detail["warp_cycles"], detail["issue_cycles"])]
    if "role" in detail:  # the warp-role arm a loop belongs to; every warp runs it where there is none
        detail["role"] = ["every warp" if r is None or r != r else f"arm {int(r)}" for r in detail["role"]]
    print(detail.round(1).to_string(index=False))
    print("trip rules:", dict(enumerate(launch.get("trip_rules", []))))

# %% [markdown]
# ## Where the L1 spends its cycles: coalescing, with no GPU
#
# The `lsu` leg counts the 128-byte lines each warp-wide global request touches: one for a warp
# reading 32 consecutive floats, 32 when every thread walks its own row. `perfkit.banks` learns
# it from the addresses themselves: the simulation that counts bank conflicts also records every
# element a thread reads or writes in a kernel argument. Nsight Compute calls the same numbers
# sectors and requests. The naive GEMM (threads of a warp on neighbouring rows) against the
# coalesced one (neighbouring columns), at a tiny size in the simulator:

# %%
from perfkit import backend, banks  # noqa: E402

if backend.is_simulator():
    from perfkit.kernels import gemm as _g

    rows = []
    for name in ("naive", "coalesced"):
        v = next(x for x in _g.LADDER if x.name == name)
        co = banks.count(v, _g.Problem(m=64, n=64, k=32, dtype="float32")).coalescing()
        rows.append({"rung": v.label, "requests": co["requests"], "sectors/request": co["sectors_per_request"],
                     "lines/request (loads)": co["load_lines_per_request"],
                     "lines/request (stores)": co["store_lines_per_request"], "sector efficiency": co["efficiency"]})
    print(pd.DataFrame(rows).round(2).to_string(index=False))
else:
    print("a GPU process: ask Nsight Compute (l1tex__t_sectors_pipe_lsu_mem_global_op_ld / requests)")

# %% [markdown]
# The naive rung's load of `A` touches a line per thread, its load of `B` one line for the warp
# (every thread the same element): the average above.  At one line per clock per SM, those lines
# are the naive rung's `lsu` leg at 4096³, its bound in the model; notebook 02's card of the naive
# rung shows that leg beside the record.
#
# ## What if it ran on another GPU?
#
# The same rung, compiled for each device's compute capability, with that device's SM count,
# clock, bandwidth and rates. The stacked bars show the legs (their sum is not the time: the
# dot is the estimate).

# %%
wi = model.what_if(variant, problem, banks=use_banks)
legs_ = [c for c in wi.columns if c.startswith("leg_")]
shown = wi[["gpu", "seconds", "bound"] + legs_].copy()
shown[["seconds"] + legs_] = shown[["seconds"] + legs_] * 1e6  # every time in microseconds
shown = shown.rename(columns={"seconds": "model_us", **{c: c.removeprefix("leg_") + "_us" for c in legs_}})
display(lesson.fold(shown.round(2), summary=f"{variant.label} at {problem.label} on every GPU: the estimate and its "
                                            "legs in microseconds (model)"))
model.plot_what_if(wi.dropna(subset=["seconds"]), title=f"{variant.label}: which GPU would it like, and why (model)")
plt.show()

# %% [markdown]
# ### What the timer hides
#
# A time is the kernel *as a timer saw it*.  A cold-L2 timing queues an L2 flush ahead of the
# kernel; the host's launch through Numba overlaps that flush, and whatever of it outlasts the
# flush lands inside the timed window: the model's `launch` leg.  Today's `timing.measure` also
# queues a spin kernel, longer than the host's enqueue, ahead of every sample, which hides the
# host's part and leaves the launch latency.  The same rung under both, per GPU (both columns are
# the model's):

# %%
timers = lesson.what_if_timers(variant, problem, banks=use_banks)
display(lesson.fold(timers.round(2), summary="per GPU: the estimate behind the flush only and behind today's spin (µs)"))
display(lesson.paragraph(lesson.timers_paragraph(timers, variant.label)))

# %% [markdown]
# ## Checked against one GPU's measurements
#
# `perfkit model validate --gpu G` estimates every (problem, rung) recorded on G and compares,
# then sums it up in its **headline lines**: the median absolute error, the worst ratio predicted /
# measured and how many rungs are within 2x (oracles and peers, library calls the model only bounds
# with a roofline, are listed but left out of the line); how far repeated records of the same code
# lie apart (the measurements' own spread, a floor under any model's error); and, **per level**, how
# many of the model's counts (DRAM and L2 bytes, shared wavefronts, FFMA and warp instructions) lie
# within 25% of Nsight Compute's, wherever one of G's tables in `data/ncu/` has the rung (the newest
# table that has it; `*`: a row no record of that commit has, estimated at the table's commit).
#
# Each record is compared with the code it measured: where a rung's kernel changed since its
# record, `validate` rebuilds the rung as it was at the record's commit (`perfkit.history`, from
# git) and estimates that; the `code` column says `at <commit>`.  Estimating today's kernel against
# an old kernel's time would score the model on the wrong program.  The GPU is the one with the
# newest records (the parameter `records_gpu` pins another); the full tables are folded.  Records
# of problems the static store holds no estimate for take seconds each to compile and estimate: past
# `validate_budget_s` they are listed as not estimated, and the headline says how many.

# %% [markdown]
# **Predict before you look**, from what you know of the model's legs: which kinds of kernel will
# it get within 25% of the GPU, and which will it miss (and which way: slower or faster than the
# GPU ran)?  Write it down: the folded table below lists every record beside its estimate, and the
# section after it sorts the rungs the model had never been checked against.

# %%
from perfkit.kernels import registry  # noqa: E402

val_name = lesson.shown_gpu(records_gpu, list(registry.OPS))
val_gpu = lesson.spec_key(val_name)
table, line, levels = model.validate(val_gpu, ops=validate_ops or None, problems=validate_problems or None,
                                     budget_s=validate_budget_s)
subset = " of " + ", ".join(validate_ops) if validate_ops else ""
subset += (" at " + "; ".join(validate_problems)) if validate_problems else ""
print(f"perfkit model validate --gpu {val_gpu}: the {len(table)} records of {val_name}{subset or ''}"
      + (" (a subset: the parameters validate_ops/validate_problems)" if subset else ""))
print("  " + line)
print("  " + model.repeat_line(table))
print("  " + (model.levels_line(levels) if len(levels) else
              "per level: no Nsight Compute table of this GPU (" + ", ".join(p.name for p, _ in model.ncu_tables(val_gpu))
              + ") has a row for the records validated here"))
show = table.drop(columns=[c for c in table.columns if c.startswith("_")])
show = show.assign(measured_us=show["measured_s"] * 1e6, predicted_us=show["predicted_s"] * 1e6)
display(lesson.fold(show[["op", "problem", "rung", "code", "measured_us", "predicted_us", "ratio", "bound"]].round(2),
                    summary=f"every record of {val_name} beside its estimate ({len(show)} rows)"))
if len(levels):  # * a row of the Nsight Compute table no record has
    display(lesson.fold(model.levels_table(levels), summary="per level: the model's counts against Nsight Compute's"))

# %% [markdown]
# ### Rungs new in this GPU's newest run
#
# The test a model can fail: rungs that no GPU had recorded before this GPU's newest run, so that
# until then the model had never been checked against them.  Where that run recorded only rungs
# another GPU had recorded first (the folded cell below says which), they are this GPU's first
# records of them, and the model may have learned from the other GPU's.
# The estimates below are today's model's, and some of its rules changed after the H200's runs of
# 2026-11-27 because of what those records showed (a Winograd loop
# runs for the FLOPs the rung computes; the FP32 leg is inside the issue legs; the scoreboard waits
# for the pipe): `docs/MODEL_NOTES.md` keeps the estimates made before the records.  Hold them
# against your prediction above (which kinds of kernel within 25%, which missed).  The cell sorts
# them by predicted / measured (above 1: the model said slower than the GPU ran).

# %%
# the rungs whose first record on any GPU is in this GPU's newest run, predicted / measured
display(lesson.first_recorded_answer(table, val_name))

# %% [markdown]
# Where the model misses, the per-launch details in `Estimate.launches` say which leg it
# believed and why (trip rules, bank degree, waves, the scoreboard per loop, the load latencies
# in `latencies_clk`). Its known weak spots, in short (the measurements and rules behind each,
# and the model's history, are in `docs/MODEL_NOTES.md`):
#
# - **where a global load's data comes from** (L1, L2 or DRAM) decides the latency leg of the
#   rungs whose threads walk their own rows;
# - **loads that wait behind stores** the compiler cannot reorder: the multirow/tuned norm rungs
#   of the first H100 records (commit 7c7b2e0) took longer than predicted;
# - **DRAM traffic the static counts miss**: some GEMM rungs read the wide operand twice per
#   wave, which no static feature separates from the rungs that read it once;
# - **the DRAM rate**: one fitted efficiency of the datasheet's bandwidth (`data/rates.yaml`, the
#   first copy kernel's figure), below what perfkit's rewritten copy kernel reaches (notebook 01's
#   recorded ceilings): today's multirow/tuned rungs of softmax, layernorm
#   and rmsnorm run near the copy kernel, and the model predicts them slower than recorded (their
#   rows above whose `code` is `today`), as it does the DRAM-bound rungs added last
#   (`smem_row`, `persist`, `twosum`, `ticket`).  Raising the rate, with the launch
#   cost re-derived for it, helps the H200 and today's rungs and hurts the first H100 records
#   (`docs/MODEL_NOTES.md`).

# %% [markdown]
# ## Exercise
#
# Write your prediction down before you grade it: the grader checks it against a record or
# the performance model and, when it is off, says what to reconsider (never the answer).

# %%
from perfkit.exercises import grade

# %% [markdown]
# ### Exercise 06.predict_gpu · which GPU wins, and why?
#
# saxpy's grid-stride rung at n = 2**26: faster on an H100 SXM or an A100 SXM 80GB, and which leg
# binds it on the H100?  Compare the two devices in `data/devices.yaml`, then grade it against
# `perfkit.model.estimate` on both.

# %%
my_prediction = None  # e.g. {"faster": "a100-sxm-80gb", "bound": "fp32"}
grade("06.predict_gpu", my_prediction, reference=exercise_reference)
