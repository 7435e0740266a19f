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
# # 04 · Normalization at the memory-bandwidth limit
#
# Softmax, LayerNorm (forward and backward), RMSNorm and BatchNorm do a handful of FLOPs per
# element: on any GPU of the last decade they are **memory-bound**.  The best such kernel reads its
# input once and writes its output once, so its goal is not a FLOP rate but the **measured copy
# bandwidth** of the device (notebook 01).  Each op gets a ladder in the format of the GEMM
# notebook; the rungs are the same ideas in the same order for every op:
#
# | rung | idea | what it aims to buy |
# |---|---|---|
# | naive | one thread per row, one kernel per pass, statistics through global memory | a baseline: x read 2-4 times, uncoalesced |
# | fused | one block per row (channel), one kernel, shared-memory tree reductions | coalesced sweeps, re-reads hit L1/L2 |
# | warp | reductions by warp shuffles (`shfl_xor_sync`), one shared slot per warp | 2 barriers per reduction instead of log2(block) |
# | online / welford | single-pass statistics: online softmax, Welford + Chan's merge | one sweep fewer, no E[x²]−E[x]² cancellation |
# | multirow / split | several rows per block, `vec` independent (128-bit) loads per thread | narrow rows fill the GPU; more bytes in flight |
# | tuned | the launch shape fitted to the row width (search, or a static rule) | the right shape at every width |
#
# Aims, not results: each card says, from the records of the GPU shown, what a rung bought (and
# whether it bought what it aimed at is for you to predict first).
#
# You will learn to count the bytes a kernel must move, to predict its time from the bandwidth,
# to see in the compiled kernel what each rung changed, and to check numerically fragile code
# (large magnitudes, constant rows, NaNs, float16 inputs with float32 accumulation).
#
# In the simulator every rung is **checked**, but times say nothing about GPU speed: speeds shown
# here come only from results recorded on real GPUs, with their provenance.
#
# **How to read an op's section.**  First the bytes each rung moves against the ideal (the model,
# before anything runs).  Then, rung by rung: what it changes, the kernel diff, the anatomy folded; a
# question to **predict** (faster or slower, by how much, what binds); and the answer folded below
# it (the record, the model's estimate, the Nsight Compute counters), to open once you have guessed.
# After the rungs, folded: the whole ladder as one table and as bars, and the anatomy of every rung;
# at the end, where each ladder stands against torch, Triton and the copy bandwidth at every
# recorded shape and dtype.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
ops = ["softmax", "layernorm", "layernorm_bwd", "rmsnorm", "batchnorm"]
check_shape = (3, 37)         # (rows, cols) every row-op rung is checked at (small: the simulator is slow)
bn_check_shape = (2, 3, 4, 5) # (n, c, h, w) for batchnorm, in both layouts
check_dtypes = ["float32", "float16"]
sweep = False                 # on a GPU: time every rung over each op's GPU_SWEEP (and record)
sweep_dtypes = ["float32"]    # dtypes of the GPU sweep
cc = (9, 0)                   # compile target for the anatomy view
records_gpu = None            # pin the records to one GPU (name or slug); None: each card the newest of today's code, any GPU
gpu = None                    # devices.yaml key of the published bandwidth (None: the shown GPU's)
seed = None                   # None: fresh random inputs for the check
record = "auto"               # record GPU measurements into data/results/ ("auto": only on a real GPU)
model_estimates = True        # per rung, perfkit.model.estimate beside the record (compiles each rung: slower)
exercise_reference = False    # True: the exercises grade the reference solutions, for CI

# %%
import dataclasses
import functools
import importlib

import pandas as pd
from IPython.display import Markdown, display

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import anatomy, backend, bench, lesson, model, plots, results, roofline, specs
from perfkit.kernels import peers

lesson.quiet_numba_warnings()       # Numba's performance warnings: once per kind, the rest counted
SIM = backend.is_simulator()        # (the backend is announced once, on import)
MODS = {op: importlib.import_module(f"perfkit.kernels.norm.{op}") for op in ops}
shown_gpu = lesson.shown_gpu(records_gpu, ops)  # tables and figures show one GPU's records
gpu = gpu or lesson.spec_key(shown_gpu)
print(f"cards: per rung, the newest record of today's code on {records_gpu or 'any GPU'} (named on the card: "
      f"neighbouring cards may be of different GPUs, and a card's 'x the rung before' compares two records of "
      f"its own GPU); "
      f"tables and figures: {shown_gpu or 'none yet'}; published bandwidth: {gpu}")
lesson.fold(pd.DataFrame([{"op": op, "rung": v.label, "config": v.config, "what changed and why": v.what}
                          for op, m in MODS.items() for v in m.LADDER]),
            summary="the ladders, one row per rung (each op's section shows its rungs' ideas again)")


# %% [markdown]
# ## 1 · The check, once for every rung of every op
#
# Each rung runs on fresh random inputs with NaN-poisoned outputs and is compared with a float64
# NumPy reference (`problem.check`: every output, a tolerance that grows with the length of the
# reduction).  float16 inputs are accumulated in float32.  The test suite goes further (widths 1,
# 3, 1000, 4097 and 65537, |x| ~ 1e4, constant rows, a NaN that must stay in its own row, odd
# launch shapes); here is the short version.

# %%
bn_layouts = ("NCHW", "NHWC") if "batchnorm" in MODS else ()
problems = ([MODS[op].Problem(*check_shape, dtype=d) for op in ops if op != "batchnorm" for d in check_dtypes]
            + [MODS["batchnorm"].Problem(*bn_check_shape, dtype=d, layout=lay) for d in check_dtypes for lay in bn_layouts])
checks = lesson.check_rungs([(p, v) for p in problems for v in MODS[p.op].LADDER], seed=seed)  # a failure stops here
lesson.fold(checks.groupby(["op", "problem"], sort=False).agg(rungs=("label", "size"), worst_abs_err=("max_abs_err", "max"),
                                                              atol=("atol", "max")),
            summary=f"all {len(checks)} rung/problem pairs match the float64 reference (open for the worst error per op)")

# %% [markdown]
# ## 2 · Bytes, the model, and the measured ceiling
#
# For a memory-bound kernel the model is one line: time ≥ bytes moved / bandwidth.  Each rung's
# `traffic(problem)` counts the DRAM bytes it moves (its extra sweeps, its temporaries; re-reads
# that fit on chip are counted once) against the ideal `problem.bytes` (every input read once,
# every output written once).  The ratio *DRAM bytes / ideal bytes* is the rung's handicap before
# anything runs.  The ceiling is the **measured** copy bandwidth: measured here on a GPU, or taken
# from results recorded on real GPUs.

# %%
if not SIM:
    copy = roofline.copy_bandwidth(record=record != False)
    copy_bw = copy["bytes_per_s"]
    print(f"measured copy bandwidth: {copy_bw / 1e12:.2f} TB/s ({copy['measurement']})")
else:
    copy_bw = None
    ceil = results.load(op="roofline")
    ceil = ceil[(ceil.variant == "copy") & (ceil.gpu == shown_gpu)] if not ceil.empty else ceil
    if not ceil.empty:  # the newest copy record of the shown GPU: the ceiling to predict against
        ceil = ceil.sort_values("utc")
        copy_bw = float(ceil.gbps.iloc[-1]) * 1e9
        print(f"using the copy bandwidth recorded on {ceil.gpu.iloc[-1]} ({str(ceil.utc.iloc[-1])[:10]}, commit "
              f"{str(ceil.commit.iloc[-1])[:7]}): {copy_bw / 1e12:.2f} TB/s")
    else:
        print(f"No copy bandwidth recorded on {shown_gpu}: predictions below use the published bandwidth "
              f"of {gpu}, which no kernel reaches. {lesson.copy_sentence()}")
published_bw = specs.get(gpu).dram_bw
model_bw = copy_bw or published_bw

# today's labels, matched by name; every record (the cards choose by code), and one per GPU, problem
# and rung chosen by the cards' rule (today's code first) for the counts and the roofline
every = pd.concat([lesson.records(op, gpu=records_gpu, latest=False) for op in ops], ignore_index=True)
recorded = pd.concat([lesson.chosen_records(every[every.op == op], op) for op in ops], ignore_index=True)
print("matching rule:", lesson.MATCH_RULE)
if recorded.empty:
    print("No normalization results have been recorded on a real GPU yet (data/results/ has none).")
else:
    print(f"{len(recorded)} normalization records: recorded" + plots.provenance(recorded))

# %%
swept = pd.DataFrame()
if sweep and not SIM:
    probs = {op: [dataclasses.replace(p, dtype=d) for p in MODS[op].GPU_SWEEP for d in sweep_dtypes] for op in ops}
    swept = pd.concat([bench.sweep(probs[op], MODS[op].LADDER + peers.peers_for(op), record=record, progress=False)
                       for op in ops], ignore_index=True)  # the ladder, plus a Triton peer where there is one
    display(lesson.sweep_table(swept, metric="gbps"))
    if record is False:  # not recorded: keep this run's rows beside the records
        every = pd.concat([every, swept], ignore_index=True)
    else:
        lesson.reload()
        every = pd.concat([lesson.records(op, gpu=records_gpu, latest=False) for op in ops], ignore_index=True)
    recorded = pd.concat([lesson.chosen_records(every[every.op == op], op) for op in ops], ignore_index=True)
elif sweep:
    print("sweep=True but there is no GPU here: nothing is timed.")


# %%
# one view per op's ladder (its sections, the card folded behind each prompt), and the bytes each rung
# moves against the ideal at the published bandwidth: the model before anything runs
ladder_view = functools.partial(lesson.LadderView, table=every, model_gpu=gpu, cc=cc, estimate=model_estimates,
                                plot_gpu=shown_gpu)
published = f"the published {published_bw / 1e12:.2f} TB/s of {gpu}"


# %% [markdown]
# ## 3 · Softmax
#
# `y = exp(x − max x) / Σ exp(x − max x)` over each row.  Subtracting the row maximum is what keeps
# `exp` from overflowing at |x| ~ 100 in float32 (and ~11 in float16), so a safe softmax needs the
# max *before* the sum: two reductions and, naively, three sweeps over x.  The **naive** rung also
# gives a row one thread, so nothing inside a row runs in parallel and few rows idle the GPU: the
# example's 4096 rows are 32 blocks of 128 threads, so 32 of an H100's 132 SMs work and 100 idle
# (Nsight Compute found 6% achieved occupancy on the busy ones).  The **online** rung
# (Milakov & Gimelshein, 2018, arXiv:1805.02867) carries a running max `m` and a running sum `s`
# and rescales `s` by `exp(m_old − m_new)` when the max grows, so max and sum come from one sweep;
# two (max, sum) pairs merge the same way, which is what lets warps combine their partial results.
# It is the same trick FlashAttention uses for attention.
#
# The last rungs of softmax, layernorm and rmsnorm are one idea each, shared by the three ops:
#
# * **`smem_row`** (wide rows): one block per row stages the row once in shared memory with 16-byte
#   `cp.async` (a few scalar elements around the 16-byte boundaries of an unaligned row), and every
#   pass reads it there, so x leaves DRAM once even when the rows in flight exceed L2.
# * **`packed`** (float16): `tuned` counts a thread's share of a row in elements, 16 a thread: 64
#   bytes of float32 but only 32 of float16, so float16 rows had half the bytes in flight.  `packed`
#   counts bytes: 64 a thread, 32 halves kept two to a 32-bit register and loaded 16 bytes at a time,
#   converted to float32 where used.  Predict: at 4096 float16 columns, does the time fall toward the
#   copy ceiling, and why should nothing change at 16384?
# * **`persist`** (narrow rows, 1024 columns): each block of `tuned` has little work, and its 1024
#   blocks of 256 threads are 1.3 to 1.6 waves on an H100 (5 or 6 blocks an SM at its registers), so
#   the last wave leaves half the SMs or more without a block.  `persist` launches one block for every slot the GPU has (SMs x blocks an SM
#   holds, from the occupancy calculator at the kernel's register cap) and loops over rows, loading
#   the next row while it reduces this one.  So its anatomy is at 4096 x 1024, the width it is for.
#   Where it has a record at the op's 4096 x 4096 (a quick plan times the float32 rungs there), its
#   card (a line above it says so), its prompt (against `smem_row`, the rung before it that runs
#   float32: `packed` takes float16 only), and the ladder's table and bars are at 4096 x 4096, not at
#   the width it is for.
# * **`split_row`** (rows past shared memory, 65536 float32 columns): a 256 KiB row does not fit the
#   227 KiB of shared memory a block may have, so `smem_row` refuses it and `tuned` reads the part of
#   each row its registers do not hold twice.  `split_row` keeps 16 elements a thread in registers
#   (1024 threads: 64 KiB of the row) and stages the other 192 KiB in shared memory by `cp.async`, so x
#   leaves DRAM once; one such block fills an SM's shared memory, so each SM loads, reduces and writes
#   one row at a time.  Its anatomy and card are at 4096 x 65536, compared with `tuned` there.
#
# The cell below says, from the records, which GPU has timed `smem_row`, `packed`, `persist` and
# `split_row` of softmax, layernorm and rmsnorm, at which problems and when.  A rung with no record at
# its card's problem shows the model's estimate only.

# %%
# which GPU has timed the three shared rungs: read from the records when this runs (they grow)
for op in ("softmax", "layernorm", "rmsnorm"):
    rungs = {v.name: v for v in MODS[op].LADDER} if op in MODS else {}
    if "persist" in rungs:  # persist is for narrow rows: said first where it has no record there
        narrow = rungs["persist"].example(MODS[op].EXAMPLE_PROBLEM)
        print(f"{op}:", lesson.recorded_where(op, "smem_row", gpu=records_gpu),
              lesson.recorded_where(op, "packed", gpu=records_gpu),
              lesson.recorded_where(op, "persist", at=narrow, gpu=records_gpu))
    if "split_row" in rungs:  # split_row is for rows past shared memory: at its own width
        wide = rungs["split_row"].example(MODS[op].EXAMPLE_PROBLEM)
        print(f"{op}:", lesson.recorded_where(op, "split_row", at=wide, gpu=records_gpu))
lesson.traffic_table(MODS['softmax'].LADDER, MODS['softmax'].EXAMPLE_PROBLEM, published_bw, published)

# %% [markdown]
# ### Exercise 04.predict_softmax · a softmax at the bandwidth (graded)
#
# Before the rungs' cards below: softmax at 4096 x 4096 float32 on an H100, how many microseconds
# does the best perfkit rung take, and did it beat the oracle (torch)?  Bytes over bandwidth gives
# the first (the table above counts each rung's bytes); graded against the H100 records.

# %%
from perfkit.exercises import grade  # (the other exercises are at the end of the notebook)

my_prediction = None  # e.g. {"us": 100.0, "beats_oracle": False}
grade("04.predict_softmax", my_prediction, reference=exercise_reference)

# %%
view = ladder_view('softmax', MODS['softmax'].EXAMPLE_PROBLEM)
view.rest()
view.summary(metric="gbps")
view.anatomy_table()

# %% [markdown]
# ## 4 · LayerNorm forward
#
# `y = (x − mean) · rstd · γ + β` with `rstd = 1/√(var + eps)`; the forward pass also writes `mean`
# and `rstd` (one float per row) for the backward pass.  The variance as `E[x²] − E[x]²` in float32
# loses every digit when |mean| ≫ std; the naive and fused rungs therefore sweep twice (mean, then
# the centred variance).  **Welford**'s update (mean += d/n, M2 += d·(x − mean)) gets both in one
# sweep with no cancellation, and Chan et al.'s pairwise formula merges (n, mean, M2) triples across
# lanes and warps.

# %%
lesson.traffic_table(MODS['layernorm'].LADDER, MODS['layernorm'].EXAMPLE_PROBLEM, published_bw, published)

# %%
view = ladder_view('layernorm', MODS['layernorm'].EXAMPLE_PROBLEM)
view.rest()
view.summary(metric="gbps")
view.anatomy_table()

# %% [markdown]
# ## 5 · LayerNorm backward
#
# With `x̂ = (x − mean)·rstd` and `g = dy·γ`:
# `dx = rstd · (g − mean(g) − x̂ · mean(g·x̂))`, `dγ = Σ_rows dy·x̂`, `dβ = Σ_rows dy`.
# Per row that is two more reductions; per column, a reduction over all rows.  The ideal kernel
# reads x and dy once and writes dx once (γ, dγ and dβ are small).  The row rungs differ in how they
# reduce; up to the Welford rung the column sums are a separate kernel (a two-stage column
# reduction today; one thread per column in the H100's records of 2026-11-23), a second read of x and dy.
# That one-thread-per-column kernel ran at 6% achieved occupancy (Nsight Compute, H100, 2026-11-23):
# 4096 columns are 4096 threads for the whole GPU.  Today's first stage gives a block 32 columns by
# a chunk of rows (about 8 blocks an SM), and a small kernel adds the blocks' partial sums.  The
# multirow rung runs a persistent grid (a few blocks per SM) in which every lane owns the same
# columns in every row it visits, adds its `dy·x̂` and `dy` into its group's partial-sum row (small,
# L2-resident), and a small kernel sums the partials: x and dy leave DRAM once (the H100's record
# of this rung of 2026-11-23, commit 7c7b2e0, is of an earlier version that updated partials in
# global memory per row).  Apex and llm.c's `layernorm_backward` reduce dγ/dβ in two stages the same way.
#
# * **`packed`** (float16): `twosum` holds 8 elements of x and of dy a thread, 32 bytes each of a
#   float32 row but only 16 of a float16 one, with no room left for γ or the next row.  `packed`
#   counts by bytes: 16 halves a thread, kept two to a 32-bit register next to γ and the next row's x
#   and dy; every sum, dx and the dγ/dβ partials stay float32.  Predict before its card: does the
#   model, which already reads `twosum`'s float16 row kernel as DRAM-bound, expect it to gain?  The
#   cell below says whether a GPU has run it (with no record, its card shows the estimate only); the
#   float16 records of issue 44 are what it is for (the H100's at 4096 x 4096, 2026-11-23, commit
#   7c7b2e0: the best rung at 0.57 of torch).

# %%
print(lesson.recorded_where("layernorm_bwd", "packed", gpu=records_gpu))  # from the records, when this runs
lesson.traffic_table(MODS['layernorm_bwd'].LADDER, MODS['layernorm_bwd'].EXAMPLE_PROBLEM, published_bw, published)

# %%
view = ladder_view('layernorm_bwd', MODS['layernorm_bwd'].EXAMPLE_PROBLEM)
view.rest()
view.summary(metric="gbps")
view.anatomy_table()

# %% [markdown]
# ## 6 · RMSNorm
#
# `y = x / √(mean(x²) + eps) · γ` (Zhang & Sennrich, 2019): LayerNorm without the mean, so one
# reduction and no cancellation problem; there is no "single-pass statistics" rung because the
# fused rung is already single-statistic.  Its second sweep re-reads the row from L1/L2 when the
# row fits on chip, which is why the ideal traffic is reachable without holding the row in registers.

# %%
lesson.traffic_table(MODS['rmsnorm'].LADDER, MODS['rmsnorm'].EXAMPLE_PROBLEM, published_bw, published)

# %%
view = ladder_view('rmsnorm', MODS['rmsnorm'].EXAMPLE_PROBLEM)
view.rest()
view.summary(metric="gbps")
view.anatomy_table()

# %% [markdown]
# ## 7 · BatchNorm (training)
#
# Statistics per **channel**, over N·H·W; running statistics updated with momentum (unbiased
# variance, as PyTorch does).  The layout decides the access pattern: in NCHW a channel is N
# contiguous runs of H·W values; in NHWC a channel is a stride-C column, so a block that owns one
# channel reads one float per 4·C bytes.  The **split** rung tiles the reduction over a 2-D grid
# (channel tiles × slices of N·H·W), so that few channels still fill every SM and NHWC reads are
# coalesced across 32 channels, and merges the partial (n, mean, M2) triples with Chan's formula in a
# small finalize kernel (which also folds γ and rstd into one scale per channel) before a
# grid-stride normalize.  x is read twice from DRAM: keeping it on chip between statistics and
# normalization would need a grid-wide barrier (a cooperative launch), so the ideal here is 1.5x.
# The normalize computes `(x − mean)·scale + β`, not the one-FMA `x·scale + shift` with
# `shift = β − mean·scale`: in a near-constant channel `scale` ≈ 1/√eps ≈ 316, `mean·scale` is
# hundreds, and the float32 rounding of `shift` alone exceeds the whole output (the tests caught it).
#
# * **`ticket`** folds the finalize into the statistics kernel: the last block to finish (a global
#   counter, the "ticket") merges the partials, so statistics, finalize and normalize are two
#   launches.  Its normalize walks x from the end the statistics read last, so the part of x still
#   in L2 is read from there: a little under the 1.5x above in the table below.  In NHWC its blocks
#   take a strip of rows by a tile of channels and read 16 bytes along C.
# * **`nhwc`** (NHWC only): in `ticket` a block adds its row groups' per-channel sums through shared
#   memory with a thread's channels side by side, so a warp's 32 stores land W words apart (8-way
#   bank conflicts in float16, 4-way in float32, at every level of the tree).  `nhwc` stores them
#   channel-major (32 lanes, 32 consecutive words) and, after one barrier, one thread per channel adds
#   the row groups.  Predict: which pass does that change, and does the whole sequence move in the
#   model?  The cell below says whether a GPU has run it.  Either way x is read twice here: it does
#   not fit in L2.

# %%
bn = MODS["batchnorm"]
bn_problems = (bn.EXAMPLE_PROBLEM, dataclasses.replace(bn.EXAMPLE_PROBLEM, layout="NHWC"))
print(lesson.recorded_where("batchnorm", "nhwc", gpu=records_gpu))  # from the records, when this runs
display(*[lesson.traffic_table(bn.LADDER, p, published_bw, published) for p in bn_problems])

# %%
view = ladder_view('batchnorm', bn.EXAMPLE_PROBLEM)
view.rest()
for p in bn_problems:
    view.summary(p, metric="gbps")
view.anatomy_table()

# %% [markdown]
# ## 8 · Where the ladders stand: every recorded shape and dtype
#
# For each op and each recorded GPU, every problem recorded there (row width 1024, 4096 or 16384 columns;
# float32 and float16; batchnorm in NCHW and NHWC): the fastest rung of today's ladder that passed
# its check, torch (the oracle) and Triton at the same problem, the ladder's speed over torch's,
# and its useful bytes per second as a fraction of the **measured copy bandwidth** of that GPU
# (notebook 01), the ceiling a memory-bound kernel can reach.  Per rung and problem the record is
# the newest of today's code, an older one (marked `*`) only where today's code was never measured
# there; the best rung is the fastest of today's code, an older one (marked `*`) only where no
# rung of today's code was measured there, and a record of older code that ran faster is named
# beside it, never in its place; torch and Triton come from each rung's own run where they were
# measured in it.  Then the same numbers against the width, with the copy ceiling as a line: each
# point one record.
#
# **Predict before you open it.**  The goal of every ladder is to match torch and to move its bytes
# at the copy bandwidth.  At 4096 x 4096 float32, which ops will beat torch, and at what fraction
# of copy?  At narrow rows (1024 columns: 4096 blocks of one row, a few waves), at wide rows (16384
# columns: a row no longer fits on chip when many are in flight), in float16 (half the bytes per
# element, same elements per thread), for layernorm backward (two more reductions a row) and for
# batchnorm (x read twice)?  Write your guesses down, then open the table.

# %%
# every recorded GPU (the one shown first; records_gpu pins one), each GPU's records chosen by code
where = lesson.WhereTheyStand(ops, [shown_gpu] if records_gpu else lesson.recorded_gpus(ops, shown_gpu))
display(*where.folded("the normalization ladders"))

# %%
# The normalizations on the roofline: about one FLOP per byte, far left of the ridge point, so only
# the memory roof matters.  Only real GPU measurements are drawn, of the GPU shown.
examples = {MODS[op].EXAMPLE_PROBLEM.label for op in ops}
shown = recorded[recorded.gpu == shown_gpu] if not recorded.empty else recorded  # one GPU per figure
on_roof = shown[shown.problem.isin(examples)] if not shown.empty else None
ax = roofline.plot(on_roof, roofline.ceilings(gpu), group_col="op", title=f"normalizations on the roofline ({gpu} ceilings)"
                   + ("\nrecorded" + plots.provenance(on_roof) if on_roof is not None and not on_roof.empty else ""))
display(lesson.fold_figure(ax, "the normalizations on the roofline (open once you have predicted)"))
if on_roof is None or on_roof.empty:
    print("No recorded GPU results for the example problems: the figure shows the ceilings only.")

# %% [markdown]
# ## What to take away
#
# * Count bytes first: a normalization's time is its DRAM bytes over the bandwidth, and every
#   extra sweep that misses on-chip caches is a full extra read of the tensor.
# * Reductions are cheap once they stay in registers: warp shuffles remove shared-memory round
#   trips and barriers.  Single-pass statistics (online softmax, Welford) save a pass over the row
#   without giving up numerical safety, but where the row already sits in L1/L2 the saved pass
#   costs little and the extra arithmetic can make them slower (their cards say which).
# * Fill the machine: narrow rows may need several rows per block (the records say when it paid);
#   few channels need a split grid.
# * Check the numerically fragile cases (huge magnitudes, constant rows, NaNs, float16) every time
#   you change a kernel; they are where fast kernels are wrong.

# %% [markdown]
# ## Exercises
#
# Complete each skeleton, then run its `grade(...)`: the grader runs your code (simulator here,
# the GPU when there is one) against the float64 reference at awkward shapes with NaN-poisoned
# outputs (and, for softmax, rows near 1000 and masked `-inf` positions), then compiles it for an
# H100 and reads the anatomy (warp shuffles, shared memory, registers).  A failed check names the
# shape, the first wrong element or the property.  `show(name)` prints a task; reference
# solutions live apart, in `perfkit/exercises/solutions/` (`exercise_reference = True` grades
# those, for CI).

# %%
import math

from perfkit.exercises import grade, show, shfl_down
from numba import cuda, float32

# %% [markdown]
# ### Exercise 04.warp_sum · a warp-shuffle row sum
#
# One warp per row, 4 warps per block.  Each lane sums a strided part of the row; then the warp
# adds its 32 partials in registers with `shfl_down` (log2 32 = 5 steps), and lane 0 writes.
# `shfl_down` is `cuda.shfl_down_sync` on a GPU and an exact emulation in the simulator; every
# lane must call it, so no early `return`.

# %%
@cuda.jit
def row_sum(out, x, rows, cols):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    v = float32(0)
    if row < rows:
        for j in range(lane, cols, 32):
            v += x[row, j]
    # FILL ME IN (4 lines): v += shfl_down(v, off) for off = 16, 8, 4, 2, 1
    if lane == 0 and row < rows:
        out[row] = v


grade("04.warp_sum", row_sum, reference=exercise_reference)

# %% [markdown]
# ### Exercise 04.online_softmax · the online-softmax update
#
# Rung 4's single pass keeps, per row, the running max `m` and the running sum
# `s = sum(exp(x_i - m))`.  Write the update for one more element `x`.  The grader's kernel starts
# each row at `(m, s) = (-inf, 0)`, calls `online_update` for every element, then writes
# `exp(x - m) / s`.  Think about a row whose first elements are `-inf` (masked).

# %%
@cuda.jit(device=True)
def online_update(m, s, x):
    m_new = max(m, x)
    return m_new, s + math.exp(x - m_new)  # FILL ME IN: s was relative to m, not m_new


grade("04.online_softmax", online_update, reference=exercise_reference)
