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
# 1. what memory *coalescing* alone buys, and why it is far less than the 32x fewer
#    transactions promise;
# 2. how shared-memory tiling and register blocking raise the *arithmetic intensity* of each level
#    of the memory hierarchy (FLOPs per byte from DRAM, from L2, from shared memory);
# 3. what wide loads, bank-conflict-free layouts, double buffering and warp tiling each change,
#    and how to see the change in the compiled kernel (its *anatomy*) with no GPU;
# 4. how to autotune: reject illegal configurations, prune by registers/spills/occupancy, time the rest;
# 5. how an `mma.sync` tensor-core instruction distributes a 16x8x16 product over a warp.
#
# In the simulator every rung is **checked** at a small awkward shape, but times say nothing about
# GPU speed: speeds shown here come only from results recorded on real GPUs.
#
# **How to read a rung section.**  First what changed in the kernel (the kernel body and the
# helpers it calls, as a diff) and its anatomy (folded: open it for registers, shared memory,
# occupancy, instruction mix).  Then **predict**: faster or slower than the rung before, by how
# much, and which resource binds.  Only then open the answer: the time recorded on a real GPU
# (with the GPU, date and commit), its rate, x the rung before, the fraction of cuBLAS, and the
# performance model's estimate beside it, with a paragraph on where the model misses.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
check_shape = (37, 41, 29)  # (m, n, k) every rung is checked at (small: the simulator is slow)
sweep_sizes = []            # square sizes to time on a GPU (e.g. 1024, 2048, 4096); empty: none
llm_shapes = False          # also time gemm.LLM_SHAPES (4096x4096x11008, 8192x1024x4096, ...) on a GPU
cc = (9, 0)                 # compile target for the anatomy view
records_gpu = None          # pin the records to one GPU (name or slug); None: each card the newest of today's code, any GPU
gpu = None                  # devices.yaml key of the published ceilings (None: the shown GPU's)
seed = None                 # None: fresh random inputs for the check
record = "auto"             # record GPU measurements into data/results/ ("auto": only on a real GPU)
search_candidates = 6       # tile configurations the autotuning section compiles (each compile takes seconds)
model_estimates = True      # per rung, perfkit.model.estimate beside the record (compiles each rung: slower)
unrecorded_banks = False    # simulate bank conflicts for rungs with no record too (minutes for the tensor-core rungs)
exercise_reference = False  # True: the exercises grade the reference solutions, for CI
launch_hung = False         # True: on a real GPU, also launch the rungs that hung on one (rung 24 cluster: docs/CLUSTER_HANG.md)

# %%
import os

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import backend, bench, results, roofline, plots, anatomy, lesson, model, autotune
from perfkit.kernels import gemm, peers

lesson.quiet_numba_warnings()       # Numba's performance warnings: once per kind, the rest counted
SIM = backend.is_simulator()        # (the backend is announced once, on import)
EX = gemm.EXAMPLE_PROBLEM           # compiled for the anatomy view, never run here
# a rung whose kernel hung on a real GPU (no error and no trap: the cell would never return) is not
# launched on a GPU here until its GPU probes pass; the simulator runs it like any other rung
HUNG_ON_GPU = {"cluster": "its kernel hung on the H200 (2026-11-27) and the H100 (2026-11-28), cause not yet "
                          "found: docs/CLUSTER_HANG.md"}
if launch_hung:  # the rung's own launch refuses on a GPU without it (perfkit/kernels/gemm/hopper_cluster.py)
    os.environ["PERFKIT_LAUNCH_HUNG"] = "1"
launchable = [v for v in gemm.LADDER if SIM or launch_hung or v.name not in HUNG_ON_GPU]
for v in gemm.LADDER:
    if v not in launchable:
        print(f"{v.label}: not checked or timed on this GPU ({HUNG_ON_GPU[v.name]}); launch_hung = True launches it")
shown_gpu = lesson.shown_gpu(records_gpu, ["gemm"])  # the figures draw one GPU's records
gpu = gpu or lesson.spec_key(shown_gpu)
print(f"cards: per rung, the newest record of today's code on {records_gpu or 'any GPU'} (named on the card: "
      f"neighbouring cards may be of different GPUs, and a card's 'x the rung before' compares two records of "
      f"its own GPU); "
      f"figures: {shown_gpu or 'none yet'}; published ceilings: {gpu}")
lesson.fold(pd.DataFrame([{"rung": v.label, "what changed and why": v.what} for v in gemm.LADDER]),
            summary=f"the ladder: {len(gemm.LADDER) - 1} rungs and the oracle (each section below begins with its idea)")


# %% [markdown]
# ## The check, the recorded timings and the model, once for all rungs
#
# Every rung is run on fresh random inputs with a NaN-poisoned output and compared with float64
# NumPy (`problem.check`; the tolerance grows like sqrt(k)).  SIMT rungs take float32; the
# tensor-core rung takes float16 inputs (its `example` is the float16 twin of a problem).

# %%
checks = lesson.check_rungs([(v.example(gemm.Problem(*check_shape)), v) for v in launchable], seed=seed)
lesson.fold(checks[["label", "problem", "max_abs_err", "atol"]],  # a failed check stops above, naming the rung
            summary=f"all {len(checks)} rungs match the float64 reference (each at its problem; open for the errors)")

# %% [markdown]
# ## What was measured on real GPUs
#
# Every number below that is a speed comes from a record in `data/results/` (one JSON file per
# problem and rung, with its provenance).  A record belongs to a rung by **op + variant name +
# problem parameters**, never by rung number (the ladder is renumbered as rungs are added); a
# record whose rung's kernel code has changed since it was taken says "kernel changed since".

# %%
every = lesson.records("gemm", gpu=records_gpu, latest=False)  # today's labels; every record: cards choose by code
recorded = lesson.chosen_records(every, "gemm")  # one per GPU, problem and rung: today's code first, by the cards' rule
print("matching rule:", lesson.MATCH_RULE)
if recorded.empty:
    print("No GEMM results have been recorded on a real GPU yet (data/results/ has none): "
          "every rung card below says 'no record', and only the model's estimates are shown.")
else:  # the numbers themselves wait, folded, behind each rung's prompt and in the summary
    print(f"{lesson.plural(len(recorded), 'GEMM record')} on {lesson.plural(recorded.gpu.nunique(), 'GPU')}, "
          f"at {lesson.plural(recorded.problem.nunique(), 'problem')}")

if sweep_sizes and not SIM:
    probs = ([gemm.Problem(s, s, s) for s in sweep_sizes] + [gemm.Problem(s, s, s, "float16") for s in sweep_sizes]
             + (gemm.LLM_SHAPES if llm_shapes else []))
    table = bench.sweep(probs, launchable + peers.peers_for("gemm"), record=record, progress=False)  # + torch, Triton
    display(lesson.sweep_table(table))
    if record is False:  # not recorded: keep this run's rows beside the records
        every = pd.concat([every, table], ignore_index=True)
    else:
        lesson.reload()
        every = lesson.records("gemm", gpu=records_gpu, latest=False)
    recorded = lesson.chosen_records(every, "gemm")
elif sweep_sizes:
    print("sweep_sizes is set but there is no GPU here: nothing is timed.")


# %%
# one view for every rung section: the kernel or its diff, the anatomy (folded), the prompt, then
# the answer folded (the record, the model's estimate, the Nsight Compute counters)
view = lesson.LadderView("gemm", EX, table=every, model_gpu=gpu, cc=cc, estimate=model_estimates,
                         banks_unrecorded=unrecorded_banks, plot_gpu=shown_gpu)


# %% [markdown]
# Each card's model line is `perfkit.model.estimate` (DRAM, L2, shared memory, issue, pipes,
# latency, launch, from the rung's static traffic and its compiled anatomy) when this perfkit has
# it, otherwise the plain roofline bound max(FLOPs / peak, DRAM bytes / bandwidth), which is the
# same for every SIMT rung at 4096³ and so cannot tell them apart.  The ratio measured / estimate,
# and where it is far from 1, is the lesson of each rung.  Each leg is the time one resource would
# need alone: `dram` and `l2` the bytes of that level over its bandwidth, `smem` the shared-memory
# *wavefronts* (shared memory is 32 banks of 4-byte words; a warp's access is served in one pass, a
# wavefront, when its 32 addresses fall in different banks or share words, and each further word
# in one bank costs another: a *bank conflict*, the counter rows of the same names), `lsu` the 128-byte lines a warp's global loads and stores
# touch (one per clock per SM: a scattered access touches up to 32), `issue` the warp instructions
# (4 per clock per SM), `fp32` and `tensor` the math pipes, `alu` the integer, compare and
# conversion instructions, `latency` one warp's dependent waits against the warps that can hide
# them, `launch` the launch itself; notebook 06 takes the model apart.
#
# ## Naive
#
# One thread per element of C.  `threadIdx.x` walks down a column, so a warp's 32 loads of A hit
# 32 different rows: 32 memory transactions where one would do.

# %%
view.show("naive")

# %% [markdown]
# ## Global-memory coalescing (`coalesced`)
#
# Swap x and y: a warp now covers 32 consecutive columns of C.  Its load of B is one 128-byte
# transaction and its load of A a broadcast.  The arithmetic is unchanged; the transactions per
# warp load fall by up to 32x.  Does the time fall 32x too?  Think about where the naive kernel's
# scattered loads were served from (the card, its counters and the model's legs answer it).

# %%
view.show("coalesced")

# %% [markdown]
# ## Shared-memory tiling (`smem_tiling`)
#
# A block stages a 32x32 tile of A and of B in shared memory and every thread reads its operands
# from there: each global element is loaded once per block, not once per thread.  Partial tiles at
# the edges are zero-filled, which is what lets every rung handle any (m, n, k).

# %%
view.show("smem_tiling")

# %% [markdown]
# ## 1D register blocking (`blocktile_1d`)
#
# Each thread computes TM results down a column.  A value of B read from shared memory stays in a
# register and feeds TM FMAs: shared loads per FMA fall from 2 toward 1.  `launch_bounds(512, 2)`
# (512 threads, at least 2 blocks an SM) caps the kernel at 64 registers a thread; its first
# version had no bound, and Nsight Compute found it at 123 registers and 25% achieved occupancy on
# the H100 (`data/ncu/`, commit 7c7b2e0).  Fewer loads are not the whole story: before you
# predict, open the anatomy diff and compare the occupancy.

# %%
view.show("blocktile_1d")

# %% [markdown]
# ## 2D register blocking (`blocktile_2d`)
#
# Each thread owns a TMxTN tile of C and accumulates outer products: TM+TN shared loads feed
# TM·TN FMAs, and the larger block tile reads each global element fewer times.  Watch the register
# count rise, and the occupancy it costs: `launch_bounds(256, 2)` holds it to 128 registers, where
# the first version, without a bound, took 196 and ran at 12.5% achieved occupancy (Nsight Compute,
# H100, commit 7c7b2e0).  The 128x128 block tile also means few blocks at small sizes: 64 at 1024³,
# for the 132 SMs of an H100.

# %%
view.show("blocktile_2d")

# %% [markdown]
# ## Wide loads, A transposed in shared memory (`vectorized`)
#
# Global loads of four consecutive floats as one 128-bit instruction (`LDG.E.128` in the SASS mix),
# and A stored transposed so the inner loop reads A's column as contiguous shared memory.

# %%
view.show("vectorized")

# %% [markdown]
# ## No shared-memory bank conflicts (`no_bank_conflicts`)
#
# Padding the transposed A tile and swizzling the B tile make the shared stores and loads of a warp
# hit 32 different banks.

# %%
view.show("no_bank_conflicts")

# %% [markdown]
# ## Double buffering (`double_buffer`)
#
# Two shared buffers: while the block computes on one tile, the next tile's global loads are in
# flight into the other, hiding global latency behind FMAs (one barrier per tile instead of two).
# It pays only if the buffering itself is cheap.  The first version picked the buffer as `tile % 2`
# in int64 and recomputed every thread's store addresses each tile, and its H100 record (4096³,
# commit 7c7b2e0) was only x1.10 rung 7's of the same run (5.70 ms against 6.25 ms).  This one unrolls the k-loop
# by two, so each buffer is its own shared array named at compile time, and computes each thread's
# shared offsets once, before the loop.

# %%
view.show("double_buffer")

# %% [markdown]
# ## 32-bit indexing (`index32`)
#
# The same algorithm as `double_buffer`, and nothing else: Numba types every integer expression as
# int64 (numba#8447), so each index costs 64-bit multiplies and adds (`IMAD.WIDE`, `IADD3.X` pairs)
# and each signed array index a negative-index check.  This rung passes A, B and C as flat 1-D views,
# keeps every offset an int32, unrolls the 8 k-steps of a tile so each shared offset is a base plus
# an immediate, and computes each thread's global offsets once.  The diff is long (it rewrites every
# index expression); the idea is in the anatomy: open it and compare the integer instructions per
# FFMA with `double_buffer`'s.  The next rung, `warptile`, starts from this kernel.

# %%
view.show("index32")

# %% [markdown]
# ## Warp tiling (`warptile`)
#
# A level between block and thread: each warp owns a sub-tile of C, so the shared-memory reads of a
# warp come from a small region (better locality, fewer bank conflicts), and the thread tile is
# iterated several times within the warp tile for more register reuse.  This is the step that
# makes siboehm's SGEMM fast; whether it does here is what the card's record says.  It starts from
# `index32`'s kernel (32-bit offsets, unrolled k-steps), so the diff is the warp level alone.
#
# ### Exercise 02.predict_order · which rung is faster? (graded)
#
# Before warptile's section below (its diff, anatomy and card): at 4096³ float32 on an H100, which
# is faster, `no_bank_conflicts` or `warptile`, and by what factor (slower time / faster time)?
# Decide from what the sections above change (double buffering, 32-bit indexing, the warp level
# just described) and from `no_bank_conflicts`' anatomy, then grade it against the newest H100
# records of the two rungs (the grader names their date and commit).

# %%
from perfkit.exercises import grade  # (the other exercises are at the end of the notebook)

my_prediction = None  # the form: {"faster": "no_bank_conflicts" or "warptile", "x": 2.0}
grade("02.predict_order", my_prediction, reference=exercise_reference)

# %%
view.show("warptile")

# %% [markdown]
# ## Autotuned (`autotuned`)
#
# `autotune.search_gemm` enumerates tile configurations, rejects the illegal ones with stated divisibility
# checks, compiles the rest for `cc` and prunes by spills and occupancy, then times the survivors
# on a GPU (or ranks them by a documented static rule without one).  The `autotuned` rung's defaults
# are the static rule's pick, made with no GPU (`search_gemm(EXAMPLE_PROBLEM, cc=(9, 0))`: the
# model ranks the compiled survivors); a GPU session can retune it with `time_fn`.
#
# Its pick, a k-tile of 16 (`warptile` has 8), needs one more fix.  The rows of the transposed A
# tile are padded to 132 words (128 + 4), so rows k and k+8 start 1056 words apart, a multiple of
# the 32 banks: a warp's stores into rows k and k+8 of one column would fall on the same bank.  Rows
# 8-15 are therefore skewed by 8 more words (still 16-byte aligned, still an immediate offset in
# every `LDS.128`).

# %%
cands = autotune.search_gemm(EX, gemm.search_space()[:search_candidates], cc=cc)
# one column per config field that differs between the candidates (the shared ones said once):
# a config shown whole was cut by the column's width, and two rows differing only in LR looked the same
cfg = pd.DataFrame([c.variant.config for c in cands])
varies = [k for k in cfg if cfg[k].nunique() > 1] or list(cfg)
shared = [k for k in cfg if k not in varies]
import inspect
est_gpu = inspect.signature(autotune.search_gemm).parameters["gpu"].default  # the GPU its estimates speak of
print((f"every candidate shares {', '.join(f'{k}={cfg[k].iloc[0]}' for k in shared)}; " if shared else "")
      + f"best first, by the model's estimate on {est_gpu}; a tie the model cannot tell apart goes to fewer warp chunks")
display(cfg[varies].assign(
    rejected=[c.rejected or "—" for c in cands], registers=[c.registers for c in cands],
    spills=[c.spills for c in cands],
    **{"static estimate us": [c.estimate_s * 1e6 if c.estimate_s else None for c in cands],
       "model us": [c.model_s * 1e6 if c.model_s else None for c in cands],
       "warp chunks (tie-break)": [autotune.warp_chunks(c.variant) for c in cands]}).round(1))
view.show("autotuned")

# %% [markdown]
# ## cuBLAS's SGEMM recipe: one block an SM, two sets of operands (`simt_wide`)
#
# `autotuned` issues the same instruction mix as cuBLAS's SGEMM (Nsight Compute counts the same
# share of FFMA) but issues less often: `launch_bounds(256, 2)` caps it at 128 registers, so a
# thread holds one set of operands and a shared load's latency is covered only by the other
# block's warps.  cuBLAS runs
# one block of 256 threads an SM with nearly every register in use.  This rung does the same: a
# 128x256 block tile, an 8x16 thread tile, `launch_bounds(256, 1)`, and two register sets of
# operands, so the shared loads of step k+1 are in flight while step k's FFMAs issue.  Its global
# loads stay staged through registers, not `cp.async`: A is stored transposed (a lane reads 4 rows
# of one k with one `LDS.128`), and `cp.async` copies 16 contiguous bytes, 4 consecutive k of one
# row, so it cannot transpose.  (B is stored as read and could take `cp.async`; the rung keeps
# rung 11's staging for both operands, so that one idea changes.)  Its k-tile is 8 deep, half of
# `autotuned`'s, so its block meets a barrier twice as often: the second register set has to win
# more than that costs.  Every k-tile, the bounds-checked last one too, runs its k-steps
# written out: a rolled loop would put the 128 accumulators of an 8x16 thread tile on the stack.
# It is the SIMT ladder's last rung, so it compares with `autotuned` (rungs 12-18 are the
# tensor-core sub-ladder below).  Predict from the anatomy's occupancy and registers, and from what
# the model's legs say about a kernel with one block an SM (the card's paragraph).

# %%
view.show("simt_wide", prev="autotuned")

# %% [markdown]
# ## Tensor cores (`tensor_core`)
#
# float16 inputs, float32 accumulation, one `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
# per 16x8x16 product through inline PTX.  Each lane of a warp holds 8 halves of A, 4 of B and 4
# floats of C in a fixed layout (the PTX ISA's fragment tables).  The simulator cannot run inline
# PTX, so there the rung emulates the instruction through shared memory with the *same* fragment
# index functions, which is what the check above verified.  The model's peak is the FP16 tensor rate.
# This first rung is far from that peak: its card gives its fraction of cuBLAS, and the
# tensor-core rungs after it (vector loads, `ldmatrix`, `cp.async` pipelining, warp tiling, the
# epilogue) are the climb from there.

# %%
view.show("tensor_core")

# %% [markdown]
# ## 16-byte tiles (`tc_vector`)
#
# The first tensor-core rung moved A and B two bytes at a time, each behind a bounds check, with
# two barriers per 16 of k.  Here every thread moves 16-byte chunks (one `LDG.E.128` and one
# `STS.128`), a k-tile is 32 deep, and each warp owns a 32x32 tile of C, so an A fragment feeds 4
# mmas.  The fragments are still gathered from shared memory two bytes at a time: that is the next rung.

# %%
view.show("tc_vector")

# %% [markdown]
# ## `ldmatrix` and a swizzled tile (`tc_ldmatrix`)
#
# One `ldmatrix.x4` gives each lane its four A registers of a 16x16 tile (eight 2-byte loads and
# packing before).  `ldmatrix` reads 8 rows of 16 bytes per phase; stored plainly, those rows fall on
# one or two bank groups, so the tiles are XOR-swizzled (16-byte chunk c of row r at c ^ f(r)).
# Predict which counter falls most: shared wavefronts, or bank conflicts?

# %%
view.show("tc_ldmatrix")

# %% [markdown]
# ## `cp.async` pipelining (`tc_cp_async`)
#
# `cp.async` copies global memory straight into shared memory, without registers and without
# waiting: with a ring of 3 stages, two k-tiles are in flight while the warps multiply the third,
# and each k-tile needs one barrier instead of two.  The registers that staged the copy are freed:
# watch the occupancy in the anatomy.

# %%
view.show("tc_cp_async")

# %% [markdown]
# ## Larger warp tiles (`tc_warptile`)
#
# Each warp owns 64x64 of C (128 float32 accumulators per lane), so an A fragment feeds 8 mmas and a
# B fragment 4, and the 128x128 block tile halves the L2 traffic per FLOP again.  The price is
# registers (and so occupancy): the tensor pipe has to be kept busy by fewer warps.  At small sizes
# there are few warps at all: at 1024³ the 64x64 warp tiles make 256 warps, fewer than the 528
# warp schedulers of an H100 (132 SMs of 4), and they come as 64 blocks of 4 warps, so 68 of the
# 132 SMs get no block.

# %%
view.show("tc_warptile")

# %% [markdown]
# ## A vectorized epilogue (`tc_epilogue`)
#
# An mma accumulator tile gives a lane 2 adjacent floats in each of 2 rows.  Lanes swap one pair with
# a shuffle, so each holds 4 consecutive floats of one row and writes them with one 16-byte store:
# a quarter of the store instructions, whole 32-byte sectors.  The k-loop is unchanged: predict how
# much of the time the stores of C were.

# %%
view.show("tc_epilogue")

# %% [markdown]
# ## Deeper k-tiles, double-buffered fragments, grouped blocks (`tc_deep`)
#
# Three changes take `mma.sync` as far as it goes.  A k-tile is 64 deep, so a block waits at a
# barrier once every four k-steps; the ring of three such tiles outgrows the 48 KiB a kernel gets
# by default, so it lives in dynamic shared memory and the launch opts in to more.  Fragments are
# double-buffered: the `ldmatrix` of step k+1 is issued before the mmas of step k.  And blocks
# are launched in groups of block rows (`GROUP_M`), so the blocks resident at once share a few
# panels of A and B in L2 instead of streaming every panel of B; that matters once B no longer fits
# in L2 (at 8192³).  Predict which of the card's legs each change acts on.

# %%
view.show("tc_deep")

# %% [markdown]
# ## Hopper's warpgroup MMA (`wgmma`)
#
# Everything above issues `mma.sync`: one warp, a 16x8x16 product, its operands first loaded from
# shared memory into registers (`ldmatrix`) in the instruction's fragment layout.  Hopper (sm_90a)
# adds `wgmma.mma_async`: the four warps of a *warpgroup* issue it together, it multiplies a
# 64xNx16 block (here N = 128), and it reads A and B **straight from shared memory** through two
# 64-bit *descriptors* (a tile's address, the strides between its 8-row groups and 64-column
# blocks, and its swizzle).  No fragments pass through registers; only the float32 accumulators
# live there.  Three consequences are visible in the code:
#
# * the tiles must be stored in the layout the descriptor names: rows of 128 bytes, 16-byte chunk
#   c of row r at chunk c ^ (r mod 8) (the 128-byte swizzle), the ring's start aligned to 1024 bytes;
# * the instruction is **asynchronous**: `wgmma.fence` before, `commit_group` after, and
#   `wait_group` before the accumulators are read or the stage is refilled; shared memory written
#   by ordinary stores must be made visible to this "async proxy" with `fence.proxy.async`;
# * the kernel needs sm_90a: on an older GPU the rung refuses to run and says why, while the
#   anatomy below compiles it for sm_90a on any machine.
#
# The rung it builds on is `tc_deep` (the same 128x128 block tile and three-stage `cp.async` ring of
# 64-deep k-tiles), so the diff and the card compare with it.  This kernel still waits for its own
# wgmma at every k-tile, so the tensor cores idle while a stage is refilled: the next rungs remove
# that wait.

# %%
view.show("wgmma", prev="tc_deep")

# %% [markdown]
# **What it becomes.**  Before you open the compiled code: which SASS instruction will a `wgmma`
# become, and how many of them will one k-tile of 64 issue per warpgroup (`tc_deep` issued its
# products as `HMMA`, fed by `LDSM`)?  Which instructions of `tc_deep`'s hot loop should disappear?

# %%
view.sass("wgmma", ["HMMA", "LDSM", "HGMMA", "WARPGROUP", "LDGSTS", "BAR", "FENCE"],
          "Which SASS instruction does wgmma become, how many per k-tile, and what leaves the hot loop?",
          prev="tc_deep")

# %% [markdown]
# ## Copies by the Tensor Memory Accelerator (`tma`)
#
# In `wgmma` every one of the 256 threads still issues its share of 16-byte `cp.async` copies and
# computes their swizzled addresses, and waits on its own copy groups.  Hopper's **TMA** unit copies
# a whole 2-D box of a matrix in one instruction, issued by **one thread**
# (`cp.async.bulk.tensor`): a *tensor map* (the array's address, extents, row stride, the box, the
# swizzle) is encoded once on the host by the driver and kept in global memory; the copy engine
# applies the 128-byte swizzle on the way into shared memory and fills zeros where a box leaves the
# matrix, so the kernel has no edge code.
#
# Who waits for what changes too.  Each stage of the ring gets an **mbarrier** in shared memory:
# thread 0 announces the stage's bytes (`mbarrier.arrive.expect_tx`), the copies count them off as
# they land, and the barrier's phase flips when all have; every thread waits on that phase's parity
# (`try_wait.parity`) instead of on its own `cp.async` group.  The threads issue nothing but wgmma.
# Rows must be multiples of 16 bytes (k and n multiples of 8) for a tensor map; other shapes go to
# `wgmma`.

# %%
view.show("tma")

# %% [markdown]
# **What it becomes.**  Predict first: what replaces the `LDGSTS` copies in the SASS, how many copy
# instructions a stage takes (one per box: A's box, and B's 64-column boxes), and what the
# mbarrier's init, arrive and wait become.

# %%
view.sass("tma", ["LDGSTS", "UTMALDG", "SYNCS", "HGMMA", "WARPGROUP", "BAR", "FENCE"],
          "What do the copies and the mbarrier become in SASS, and how many copies does a stage take?")

# %% [markdown]
# ## One warpgroup copies, two multiply (`warp_specialized`)
#
# In `tma` the same threads issue the copies and the products, so a warp that waits for a stage
# to land has nothing else to do.  Here the block's 384 threads split into **roles** by warpgroup:
# warpgroup 0 is the *producer* (one of its threads issues the TMA boxes), warpgroups 1 and 2 are
# *consumers*, each computing a 64x256 half of a 128x256 tile with `m64n256k16`.  They meet only on
# two mbarriers per stage of a 4-stage ring: **full** (the stage's bytes have landed: the consumers
# may multiply) and **empty** (both consumers are done reading it: the producer may refill it).
#
# The producer needs few registers and the consumers many (128x256 float32 accumulators over 256
# threads is 128 a thread), so `setmaxnreg` moves them: the producer gives its registers back down
# to 40, the consumers take up to 232 (the PTX instruction `setmaxnreg`; its SASS is the answer to the
# prompt below).  ptxas keeps the request only when
# the kernel is linked with LTO and its entry register count is pinned (here by its launch bounds,
# 384 threads, one block an SM); otherwise it drops it with warning C7504 or C7508, which the build
# test turns into a failure.  In the simulator a waiting thread now yields to the rest of its block, and
# a barrier that can never complete raises an error naming it instead of hanging.

# %%
view.show("warp_specialized", prev="tma")

# %% [markdown]
# **What it becomes.**  Predict first: which SASS instruction hands registers between the roles,
# how many of them, and do the producer's copies (`UTMALDG`) and the consumers' products (`HGMMA`)
# now sit in different loops?

# %%
view.sass("warp_specialized", ["UTMALDG", "SYNCS", "HGMMA", "USETMAXREG", "WARPGROUP", "BAR"],
          "Which instruction moves registers between the roles, and where do the copies and products go?",
          prev="tma")

# %% [markdown]
# ## One block per SM walks the tiles (`persistent`)
#
# `warp_specialized` launches one block per output tile; each block fills its ring, computes, writes
# its tile and exits, and the next block starts with an empty ring.  Here the grid is **one block per
# SM** (the device's SM count), and each block walks tiles in turn with its ring running on from
# one tile to the next, so the next tile's loads overlap this tile's epilogue.  The epilogue itself
# leaves by TMA too: each consumer warpgroup writes 64x32 float32 boxes into swizzled shared memory,
# waits for its own warpgroup only (not the whole block), and one thread stores the box to global
# memory with a bulk copy; a box is reused only after the store has read it
# (`cp.async.bulk.wait_group.read`).  Which instruction stores C, and how many barriers the
# consumers meet at, is the prompt after the card.

# %%
view.show("persistent", prev="warp_specialized")

# %% [markdown]
# **What it becomes.**  Predict first: which instruction stores C now, and how many named barriers
# does the SASS use?

# %%
view.sass("persistent", ["UTMALDG", "UTMASTG", "SYNCS", "HGMMA", "USETMAXREG", "BAR", "STS"],
          "Which instruction stores C now, and what do the per-warpgroup barriers become?",
          prev="warp_specialized")

# %% [markdown]
# ## Two blocks share one load (`cluster`)
#
# Two blocks whose tiles sit one above the other (m tiles 2i and 2i+1) read the same k-tiles of B,
# the larger operand: with 128x256 tiles and 64-deep float16 k-tiles, a stage holds 32 KiB of B
# and 16 KiB of A.
# On Hopper, blocks can form a **thread-block cluster**: they are scheduled together on neighbouring
# SMs and can reach each other's shared memory and mbarriers.  Here each pair is a cluster of two
# along m, and each block's producer loads only half of B's stage with a **multicast** TMA copy
# (`.multicast::cluster`, mask 0b11): the copy engine reads that half from L2 once and writes it into
# both blocks' shared memory at the same offset, counting its bytes on both blocks' "full" barriers.
# B then crosses from L2 to the SMs once per cluster.  A stage now holds data from both producers,
# so it is free only when all four consumer warpgroups of the pair are done with it: each consumer
# arrives on its own empty barrier and on its peer's (`mapa` maps the barrier's address into the
# peer's shared memory, then a remote `mbarrier.arrive`).  The whole cluster meets
# (`barrier.cluster`) after the barriers are initialized and again before it exits, so that no block
# leaves while its peer may still write into it.  The cluster shape belongs to the kernel
# (`cluster_dims(1, 2, 1)` in its body becomes `.reqnctapercluster 1, 2, 1` in its PTX).  This is
# `warp_specialized` plus the multicast, nothing else, so the diff below is that one idea.
#
# This kernel hung on the H200 on 2026-11-27 (commit 6ba0514) and again on the H100 on 2026-11-28
# (its three full-rung tests ran out of time: `docs/device-runs/2026-11-28-h100-sxm-probes.log`),
# which its check in the simulator (above) does not show; the cause was not found then
# (`docs/CLUSTER_HANG.md` lists the suspects; the cluster probes in `tests/test_gemm_hopper.py` will
# say which mechanism fails).  Its mbarrier waits are bounded (a trap after 10 s), yet the H100 run
# of 2026-11-28 saw no trap in 30 s: the hang is in a wait that is not bounded, or the trap does not
# end a cluster launch.  So on a GPU this notebook neither checks nor times it (`launch_hung = True`
# does).  The line above its diff says, from the records, whether a GPU has timed it since; with
# no record its card is the model's estimate only.
#
# **Predict:** every Hopper rung is tensor-bound in the model; which leg does the multicast shrink,
# and on which GPU could that move the time?  (For scale, from outside perfkit's records: fast.cu,
# a public worklog of Hopper GEMM kernels in bf16, gained 2.7% with its 2-CTA cluster step on an
# H100 at 8192^3, 778 -> 799 TFLOP/s.)

# %%
print(lesson.recorded_where("gemm", "cluster", gpu=records_gpu))  # from the records, when this runs
view.show("cluster", prev="warp_specialized")

# %% [markdown]
# **What it becomes.**  Predict first: what do the multicast copy, the remote arrive and the cluster
# barrier become in SASS, and how many memory fences are left inside the k loop?

# %%
view.sass("cluster", ["UTMALDG", "SYNCS", "UCGABAR", "MEMBAR", "HGMMA", "USETMAXREG"],
          "What do the multicast copy, the remote arrive and the cluster barrier become?",
          prev="warp_specialized")

# %% [markdown]
# The Hopper rungs 20-23 (`wgmma`, `tma`, `warp_specialized`, `persistent`) and `tc_deep`: their
# cards above give each time against cuBLAS's HGEMM (a wgmma kernel on Hopper) beside the model's
# estimate, and the table of where the ladder stands below counts them (notebook 06 sorts the rungs
# first recorded in the newest run by how far the model was off).  Rung 24 `cluster`'s kernel hung
# on the H200 (2026-11-27) and on the H100 (2026-11-28), the cause not found then
# (`docs/CLUSTER_HANG.md` lists the suspects and the probes that will tell); with no record its card
# shows the model's estimate only.  The cell below says, from the records, which GPU timed these
# rungs, at which problems and when.  `docs/MODEL_NOTES.md` lists what the model assumes for them.

# %%
hopper = [v.name for v in gemm.LADDER if v.name in ("wgmma", "tma", "warp_specialized", "persistent", "tc_deep")]
print(lesson.recorded_where("gemm", hopper, gpu=records_gpu))
print(lesson.recorded_where("gemm", "cluster", gpu=records_gpu))

# %% [markdown]
# ## Rungs of today's ladder without a section above
#
# The ladder grows (new rungs are added and renumbered); any rung the sections above do not cover
# is shown here the same way, under its own description, so none is left out.

# %%
new = view.rest()
print(f"rungs without a section above: {', '.join(new)}" if new else
      f"every rung of today's ladder ({len(gemm.LADDER) - 1} rungs and the oracle) has its section above")

# %% [markdown]
# ## Summary
#
# Open these once you have made your predictions.  One row per rung that runs the problem: the
# recorded median and rate, x the rung before, the fraction of cuBLAS (the oracle: SGEMM at
# float32, HGEMM at float16), the model's estimate and the ratio; then the same as bars
# (measurements from real GPUs only, the model's estimates as black ticks).  The float32 problems
# hold the SIMT rungs, their float16 twins the tensor-core and Hopper rungs: a factor across dtypes
# would compare two different problems.

# %%
for p in [EX, gemm.Problem(1024, 1024, 1024)]:
    for q in [p, gemm.Problem(p.m, p.n, p.k, "float16")]:
        view.summary(q, title=f"GEMM ladder at {q.label}")
shown = recorded[recorded.gpu == shown_gpu] if not recorded.empty else recorded  # one GPU per table and figure
if not shown.empty:  # every record of that GPU, by rung and problem ("*": a kernel changed since)
    display(lesson.fold(lesson.record_pivot(shown, "tflops", caption="TFLOP/s recorded on "
                                            + plots.provenance(shown).removeprefix(" on ")),
                        summary=f"every GEMM record of {shown_gpu}, TFLOP/s by rung and problem"))

# %% [markdown]
# Every rung of one problem sits at the same arithmetic intensity (the problem's FLOPs over its
# minimal DRAM bytes): on the roofline the rungs climb a vertical line toward the FP32 roof (SIMT
# rungs) or the tensor roof (tensor-core rungs).  The distance to the roof is what the ladder is about.

# %%
tc_problem = gemm.Problem(EX.m, EX.n, EX.k, "float16")
on_roof = shown[shown.problem.isin([EX.label, tc_problem.label])] if not shown.empty else None
ax = roofline.plot(on_roof, roofline.ceilings(gpu), group_col="dtype",
                   title=f"GEMM rungs at {EX.m}x{EX.n}x{EX.k} on the roofline ({gpu} ceilings)\n"
                         + ("recorded" + plots.provenance(on_roof) if on_roof is not None and not on_roof.empty else ""))
display(lesson.fold_figure(ax, "the GEMM rungs on the roofline (open once you have predicted)"))
if on_roof is None or on_roof.empty:
    print(f"No recorded GPU results at {EX.label}: the figure shows the ceilings only.")

# %% [markdown]
# ## Where the ladder stands
#
# The best rung against cuBLAS at every recorded problem, per dtype and GPU (SIMT float32 against
# SGEMM, the tensor-core rungs against HGEMM): one bar per comparison, each of one GPU and one
# problem, and a paragraph written from the same numbers (it changes when the records do), which
# says whether each goal is met: the best SIMT rung at ≥ 1.0 of cuBLAS in float32, the best
# float16 rung at ≥ 0.85 of cuBLAS's HGEMM (issue 45; mma.sync alone aims at 0.70, the Hopper
# rungs at 0.85).  Table, bars and paragraph lead with today's code: per rung the newest record of
# today's code (older code only where the rung has no record of today's code), and per problem the fastest rung of
# today's code (older code, its commit marked `*`, only where no rung of today's code was
# recorded), each against cuBLAS timed in the same run (the same GPU and commit; where that run
# timed no cuBLAS, cuBLAS's own median is shown and nothing is divided).  A record of older code
# that ran faster is named beside it, against cuBLAS of its own run.

# %%
st = lesson.standing("gemm", every)
display(lesson.fold(lesson.standing_table(st, "cuBLAS"), summary="the best rung vs cuBLAS, per problem and GPU"))
display(lesson.fold_figure(lesson.standing_figure(st, "cuBLAS", title="GEMM: best rung / cuBLAS"),
                           "the same as bars"))
display(lesson.fold(lesson.paragraph(lesson.takeaway(st, "cuBLAS", goals={"float32": 1.0, "float16": 0.85})),
                    summary="where the GEMM ladder stands, in words",
                    open_=False))
# the two float16 sub-ladders against their own goals: mma.sync (perfkit/kernels/gemm/tensor*.py)
# at 0.70 of cuBLAS, the Hopper rungs (gemm/hopper*.py) at 0.85, each the same standing of its rungs
for what, kind, goal in (("the mma.sync rungs", ".tensor", 0.70), ("the Hopper rungs", ".hopper", 0.85)):
    names = [v.name for v in gemm.LADDER if v.oracle or type(v).__module__.split(".gemm")[-1].startswith(kind)]
    sub = lesson.standing("gemm", every[every.variant.isin(names)]) if not every.empty else every
    sub = sub[sub.group == "float16"] if not sub.empty else sub
    display(lesson.fold(lesson.paragraph(lesson.takeaway(sub, "cuBLAS", goals={"float16": goal})),
                        summary=f"{what} alone against their goal, x{goal:.2f} cuBLAS's HGEMM"))

# %% [markdown]
# ## Tuning on the device
#
# Rungs 18 and 19 are each one point of a space: rung 18's warp grid, warp tile, k-tile depth and
# stages, rung 19's block and thread tiles. `perfkit record --parts tune` compiles every point for
# the GPU (no GPU needed for that), lets the model rank them (its prediction, written down before
# anything runs), then checks and times them on the GPU in the model's order.
#
# **Predict:** on a Hopper GPU, which is faster for rung 18: its own 128x128 block of 4 warps (two
# blocks an SM), or a 128x256 block of 8 warps of 64x64 (CUTLASS's Ampere default, one block an
# SM)? What does the bigger tile save, and what could it cost?

# %%
tuned = lesson.tuning_table()
if tuned.empty:
    print(lesson.tuning_paragraph(tuned))
else:
    display(lesson.fold(tuned, summary="each configuration timed on the device, the model's rank beside it"))
    display(lesson.fold(lesson.paragraph(lesson.tuning_paragraph(tuned)), summary="what the device found"))

# %% [markdown]
# ## Exercises
#
# Complete each skeleton, then run its `grade(...)`: the grader runs your kernel (simulator here,
# the GPU when there is one) against the float64 reference at sizes that are not multiples of any
# tile, with NaN-poisoned outputs, compiles it for an H100 to read its anatomy, and counts shared
# memory bank conflicts in a simulated launch.  A failed check names the size, the first wrong
# element or the property.  `show(name)` prints a task; reference solutions live apart, in
# `perfkit/exercises/solutions/` (`exercise_reference = True` grades those, for CI).

# %%
from perfkit.exercises import grade, show
from numba import cuda, float32

# %% [markdown]
# ### Exercise 02.smem_tile · the shared-memory tile loop (rung 3)
#
# Blocks of `(TILE, TILE)` threads each own a `TILE x TILE` tile of C.  Per step of k, every
# thread loads one element of A's tile and one of B's into shared memory (zero outside the
# matrices: sizes are not multiples of TILE), the block waits, and each thread accumulates a
# row of As times a column of Bs.

# %%
TILE = 16


@cuda.jit
def gemm_tiled(a, b, c, M, N, K):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, K, TILE):
        pass  # FILL ME IN (2 lines): As[ty, tx] from A, Bs[ty, tx] from B, 0 outside them
        cuda.syncthreads()
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc


grade("02.smem_tile", gemm_tiled, tile=TILE, reference=exercise_reference)

# %% [markdown]
# ### Exercise 02.pad · pad a shared tile (rung 7's idea)
#
# This transpose is correct: it reads a 32x32 tile of `inp` row by row and writes `out` from the
# tile's columns, so both global accesses coalesce.  But a warp reading a *column* of a 32-wide
# float32 tile finds all 32 words in one bank.  The grader records every warp's shared addresses
# in a simulated launch; make it report no bank conflicts.  (A shared array's shape must be a
# compile-time constant: compute it in a global.)

# %%
WIDTH = 32  # FILL ME IN


@cuda.jit
def transpose(out, inp, rows, cols):
    tile = cuda.shared.array((32, WIDTH), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    r0 = cuda.blockIdx.y * 32
    c0 = cuda.blockIdx.x * 32
    for j in range(0, 32, 8):
        r = r0 + ty + j
        if r < rows and c0 + tx < cols:
            tile[ty + j, tx] = inp[r, c0 + tx]
    cuda.syncthreads()
    for j in range(0, 32, 8):
        r = c0 + ty + j
        if r < cols and r0 + tx < rows:
            out[r, r0 + tx] = tile[tx, ty + j]


grade("02.pad", transpose, reference=exercise_reference)
