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
# # 02 · GEMM: from a naive kernel to the tensor cores
#
# `C = A @ B` is the op that decides the speed of most of deep learning.  We climb Simon Boehm's
# SGEMM worklog ([siboehm/SGEMM_CUDA](https://github.com/siboehm/SGEMM_CUDA)) one rung at a time
# in Numba, then take one more step onto the tensor cores.  You will learn:
#
# 1. why memory *coalescing* alone buys an order of magnitude;
# 2. how shared-memory tiling and register blocking raise the *arithmetic intensity* of each level
#    of the memory hierarchy (FLOPs per byte from DRAM, from L2, from shared memory);
# 3. what wide loads, bank-conflict-free layouts, double buffering and warp tiling each change,
#    and how to see the change in the compiled kernel (its *anatomy*) with no GPU;
# 4. how to autotune: reject illegal configurations, prune by registers/spills/occupancy, time the rest;
# 5. how an `mma.sync` tensor-core instruction distributes a 16x8x16 product over a warp.
#
# In the simulator every rung is **checked** at a small awkward shape, but times say nothing about
# GPU speed: speeds shown here come only from results recorded on real GPUs.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
check_shape = (37, 41, 29)  # (m, n, k) every rung is checked at (small: the simulator is slow)
sweep_sizes = []            # square sizes to time on a GPU (e.g. 1024, 2048, 4096); empty: none
llm_shapes = False          # also time gemm.LLM_SHAPES (4096x4096x11008, 8192x1024x4096, ...) on a GPU
cc = (9, 0)                 # compile target for the anatomy view
gpu = "h100-sxm"            # GPU whose published ceilings feed the model predictions
seed = None                 # None: fresh random inputs for the check
record = "auto"             # record GPU measurements into data/results/ ("auto": only on a real GPU)

# %%
import numpy as np
import pandas as pd

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import backend, bench, results, roofline, plots, anatomy, lesson, model
from perfkit.kernels import gemm, peers

SIM = backend.is_simulator()
print(backend.describe())
EX = gemm.EXAMPLE_PROBLEM           # compiled for the anatomy view, never run here
pd.DataFrame([{"rung": v.rung, "name": v.name, "what changed and why": v.what} for v in gemm.LADDER])


# %% [markdown]
# ## The check, the recorded timings and the model, once for all rungs
#
# Every rung is run on fresh random inputs with a NaN-poisoned output and compared with float64
# NumPy (`problem.check`; the tolerance grows like sqrt(k)).  SIMT rungs take float32; the
# tensor-core rung takes float16 inputs (its `example` is the float16 twin of a problem).

# %%
def problem_for(v, m, n, k):
    return v.example(gemm.Problem(m, n, k))

checks = []
for v in gemm.LADDER:
    p = problem_for(v, *check_shape)
    x = p.make_inputs(seed)
    res = p.check(v.run(p, x), inputs=x)
    checks.append({"label": v.label, "problem": p.label, "ok": res.ok, "max_abs_err": res.max_abs_err,
                   "atol": res.atol})
checks = pd.DataFrame(checks)
assert checks.ok.all(), checks[~checks.ok]
checks

# %%
recorded = results.load(op="gemm")
if recorded.empty:
    print("No GEMM results have been recorded on a real GPU yet (data/results/ has none): "
          "the tables below show model predictions only.")
else:
    display(recorded[["gpu", "problem", "label", "tflops", "median_s", "utc", "commit"]])

if sweep_sizes and not SIM:
    probs = ([gemm.Problem(s, s, s) for s in sweep_sizes] + [gemm.Problem(s, s, s, "float16") for s in sweep_sizes]
             + (gemm.LLM_SHAPES if llm_shapes else []))
    table = bench.sweep(probs, gemm.LADDER + peers.peers_for("gemm"), record=record)  # + torch, Triton
    display(table[["problem", "label", "check_ok", "median_s", "tflops", "model_s", "error"]])
    recorded = pd.concat([recorded, table], ignore_index=True)
elif sweep_sizes:
    print("sweep_sizes is set but there is no GPU here: nothing is timed.")


# %%
def prediction(v, p):
    t = v.traffic(p)
    r = roofline.published_rates(t, gpu=gpu)
    pr = model.predict(t, peak_flops=r["flops"], dram_bw=r["dram_bw"])
    return t, pr

def measured(v, p):
    if recorded.empty:
        return None
    rows = recorded[(recorded.variant == v.name) & (recorded.problem == p.label)]
    return None if rows.empty else float(rows.tflops.median())

reports = {}
def rung_view(i):
    v, prev = gemm.LADDER[i], gemm.LADDER[i - 1]
    p = v.example(EX)
    display(lesson.source_diff(prev, v, p) if i > 1 else lesson.source(v, p))
    reports[i] = anatomy.inspect(v, p, cc)
    if i - 1 in reports:
        display(anatomy.diff(reports[i - 1], reports[i]))
    else:
        display(reports[i])
    t, pr = prediction(v, p)
    got = measured(v, p)
    print(f"model ({gpu}, {p.label}): >= {pr.seconds * 1e3:.2f} ms, bound by {pr.limiter} "
          f"(rung's own guess: {t.limiter}); {t.notes}")
    print(f"  DRAM {t.dram_bytes / 1e9:.2f} GB, L2 {(t.l2_bytes or 0) / 1e9:.1f} GB, "
          f"shared {(t.smem_bytes or 0) / 1e9:.1f} GB, {p.flops / 1e12:.2f} TFLOP")
    print("  measured:", f"{got:.1f} TFLOP/s" if got is not None else "none recorded on a real GPU")


# %% [markdown]
# The model is the simplest roofline: time ≥ max(FLOPs / peak, DRAM bytes / bandwidth).  For GEMM
# at 4096³ the DRAM leg is tiny (each input read once if panels stay in L2), so the model says
# "compute" for every rung: what separates the rungs is the L2 and shared-memory traffic each
# rung's `traffic` reports, which the model lists but (without measured L2/shared bandwidths) does
# not turn into time.  The gap between the model and a measurement is the lesson of each rung.
#
# ## Rung 1 · naive
#
# One thread per element of C.  `threadIdx.x` walks down a column, so a warp's 32 loads of A hit
# 32 different rows: 32 memory transactions where one would do.

# %%
rung_view(1)

# %% [markdown]
# ## Rung 2 · global-memory coalescing
#
# Swap x and y: a warp now covers 32 consecutive columns of C.  Its load of B is one 128-byte
# transaction and its load of A a broadcast.  The arithmetic is unchanged; the memory traffic
# falls by up to 32x.

# %%
rung_view(2)

# %% [markdown]
# ## Rung 3 · shared-memory tiling
#
# A block stages a 32x32 tile of A and of B in shared memory and every thread reads its operands
# from there: each global element is loaded once per block, not once per thread.  Partial tiles at
# the edges are zero-filled, which is what lets every rung handle any (m, n, k).

# %%
rung_view(3)

# %% [markdown]
# ## Rung 4 · 1D register blocking
#
# Each thread computes TM results down a column.  A value of B read from shared memory stays in a
# register and feeds TM FMAs: shared loads per FMA fall from 2 toward 1.

# %%
rung_view(4)

# %% [markdown]
# ## Rung 5 · 2D register blocking
#
# Each thread owns a TMxTN tile of C and accumulates outer products: TM+TN shared loads feed
# TM·TN FMAs.  The larger block tile halves L2 traffic again.  Watch the register count rise.

# %%
rung_view(5)

# %% [markdown]
# ## Rung 6 · wide loads, A transposed in shared memory
#
# Global loads of four consecutive floats as one 128-bit instruction (`LDG.E.128` in the SASS mix),
# and A stored transposed so the inner loop reads A's column as contiguous shared memory.

# %%
rung_view(6)

# %% [markdown]
# ## Rung 7 · no shared-memory bank conflicts
#
# Padding the transposed A tile and swizzling the B tile make the shared stores and loads of a warp
# hit 32 different banks.

# %%
rung_view(7)

# %% [markdown]
# ## Rung 8 · double buffering
#
# Two shared buffers: while the block computes on one tile, the next tile's global loads are in
# flight into the other, hiding global latency behind FMAs (one barrier per tile instead of two).

# %%
rung_view(8)

# %% [markdown]
# ## Rung 9 · warp tiling
#
# A level between block and thread: each warp owns a sub-tile of C, so the shared-memory reads of a
# warp come from a small region (better locality, fewer bank conflicts), and the thread tile is
# iterated several times within the warp tile for more register reuse.

# %%
rung_view(9)

# %% [markdown]
# ## Rung 10 · autotuned
#
# `gemm.search` enumerates tile configurations, rejects the illegal ones with stated divisibility
# checks, compiles the rest for `cc` and prunes by spills and occupancy, then times the survivors
# on a GPU (or ranks them by a documented static rule without one).  Rung 10's defaults are its pick.

# %%
cands = gemm.search(EX, gemm.search_space()[:6], cc=cc)
display(pd.DataFrame([{"config": c.variant.config, "rejected": c.rejected, "registers": c.registers,
                       "spills": c.spills, "score": c.static_score} for c in cands]))
rung_view(10)

# %% [markdown]
# ## Rung 11 · tensor cores
#
# float16 inputs, float32 accumulation, one `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
# per 16x8x16 product through inline PTX.  Each lane of a warp holds 8 halves of A, 4 of B and 4
# floats of C in a fixed layout (the PTX ISA's fragment tables).  The simulator cannot run inline
# PTX, so there the rung emulates the instruction through shared memory with the *same* fragment
# index functions, which is what the check above verified.  The model's peak is the FP16 tensor rate.

# %%
rung_view(11)

# %% [markdown]
# ## Summary
#
# The ladder plot shows only measurements from real GPUs (recorded, or swept above); with none,
# it draws a labelled placeholder.

# %%
rows = []
for v in gemm.LADDER:
    p = v.example(EX)
    t, pr = prediction(v, p)
    rows.append({"label": v.label, "problem": p.label, "model_ms": pr.seconds * 1e3, "model_limiter": pr.limiter,
                 "rung_limiter": t.limiter, "measured_tflops": measured(v, p), "notes": t.notes})
summary = pd.DataFrame(rows)
plots.ladder(recorded if not recorded.empty else checks.assign(simulated=True), title="GEMM ladder")
summary

# %% [markdown]
# Every rung of one problem sits at the same arithmetic intensity (the problem's FLOPs over its
# minimal DRAM bytes): on the roofline the rungs climb a vertical line toward the FP32 roof (SIMT
# rungs) or the tensor roof (rung 11).  The distance to the roof is what the ladder is about.

# %%
on_roof = recorded[recorded.problem == EX.label] if not recorded.empty else None
roofline.plot(on_roof, roofline.ceilings(gpu), title=f"GEMM rungs at {EX.label} on the roofline ({gpu} ceilings)")
if on_roof is None or on_roof.empty:
    print(f"No recorded GPU results at {EX.label}: the figure shows the ceilings only.")
