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
# # 03 · Convolution: from a direct loop to a tensor-core implicit GEMM
#
# A 2-D convolution slides R x S filters of C channels over an N x C x H x W input and produces
# K output channels.  Written out, every output is a dot product of length C·R·S, so the whole
# layer is a matrix product in disguise, the **implicit GEMM** that cuDNN and CUTLASS run for
# most forward convolutions:
#
# | GEMM | convolution |
# |---|---|
# | M (rows of C) | N·P·Q output pixels |
# | N (columns of C) | K output channels |
# | K (the reduction) | C·R·S filter taps |
# | A[m, j] | the input value under tap j of output pixel m (zero in the padding) |
# | B[j, n] | the filter weight w[n, j] |
#
# This notebook climbs a ladder from the definition to that GEMM on the tensor cores, reusing what
# notebook 02 taught (coalescing, shared-memory tiles, register blocking, 16-byte loads,
# `mma.sync`).  What is new is **data layout**: whether channels are the slowest (NCHW) or the
# fastest (NHWC) index decides which loads coalesce and which vectorize.  You will learn:
#
# 1. to see a convolution as a GEMM, and what an explicit im2col buffer costs compared with
#    gathering the same matrix on the fly;
# 2. how a halo tile in shared memory turns R·S re-reads of each input value into one;
# 3. why NHWC lets the implicit GEMM's gather be a 16-byte load, and what a layout transpose costs;
# 4. how each rung's traffic model and compiled anatomy predict its speed before any GPU runs it.
#
# Every rung is *checked* here in Numba's CUDA simulator (times there mean nothing) and compiled
# for sm_90 with no GPU.  Speeds come from the ladder's records on real GPUs: "What was measured
# on real GPUs" below lists, from the records, each GPU's runs (which rungs, when, at which
# layers), and each card names the record it shows.  The goals
# at this layer (issue 43: the best rung at ≥ 0.7 of cuDNN in float32, whose choice here is an
# FFT, and ≥ 0.5 in float16) are checked against the records at the end of the notebook, which
# says whether each is met and by how much (predict first).  The whole ResNet-50 sweep runs with
# `perfkit record --plan full --ops conv`, or this notebook with the `gpu` profile and
# `sweep=True` on a GPU.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
# check_cases: (n, c, h, w, k, r, s, stride, pad, dtype, layout) every rung is checked at (tiny: the simulator
# is slow); the float16 case has 8 channels, the tensor-core rungs' 16-byte chunk
check_cases = [[1, 3, 7, 5, 17, 3, 3, 1, 1, "float32", "NCHW"], [1, 4, 5, 6, 5, 3, 2, 2, 1, "float32", "NHWC"], [1, 8, 5, 6, 6, 3, 3, 1, 1, "float16", "NHWC"]]
sweep = False               # on a GPU: time every rung and the peers over conv.GPU_SWEEP (ResNet-50, batch 32)
sweep_configs = ["float32 NCHW", "float32 NHWC", "float16 NHWC"]  # which of the sweep's (dtype, layout) to time
table_configs = ["float32 NCHW", "float32 NHWC", "float16 NHWC"]  # ResNet-50 sweeps to show (those with records)
table_estimator = "auto"    # "auto": perfkit.model.estimate where it exists; "roofline": the plain bound
resnet_batch = 32           # batch of the ResNet-50 layers (the records' batch)
cc = (9, 0)                 # compile target for the anatomy view
records_gpu = None          # pin the records to one GPU (name or slug); None: each card the newest of today's code, any GPU
gpu = None                  # devices.yaml key of the published ceilings (None: the shown GPU's)
seed = None                 # None: fresh random inputs for the check
record = "auto"             # record GPU measurements into data/results/ ("auto": only on a real GPU)
exercise_reference = False  # True: the exercises grade the reference solutions, for CI

# %%
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import backend, bench, roofline, plots, anatomy, lesson, model
from perfkit.kernels import conv, peers

lesson.quiet_numba_warnings()       # Numba's performance warnings: once per kind, the rest counted
SIM = backend.is_simulator()        # (the backend is announced once, on import)
EX = conv.EXAMPLE_PROBLEM           # ResNet-50's stage-2 3x3 layer at batch 32: compiled, never run here
shown_gpu = lesson.shown_gpu(records_gpu, ["conv"])  # tables and figures show one GPU's records
gpu = gpu or lesson.spec_key(shown_gpu)
print(f"cards: per rung, the newest record of today's code on {records_gpu or 'any GPU'} (named on the card: "
      f"neighbouring cards may be of different GPUs, and a card's 'x the rung before' compares two records of "
      f"its own GPU); "
      f"tables and figures: {shown_gpu or 'none yet'}; published ceilings: {gpu}")
print("example problem:", EX.label, f"(P x Q = {EX.p} x {EX.q}; GEMM M, N, K = {EX.gemm_mnk})")
lesson.fold(pd.DataFrame([{"rung": v.label, "what changed and why": v.what} for v in conv.LADDER]),
            summary=f"the ladder: {len(conv.LADDER) - 1} rungs and the oracle (each section below begins with its idea)")

# %% [markdown]
# ## The check, once for all rungs
#
# Every rung runs on fresh random inputs with a NaN-poisoned output (and workspace) and is
# compared with an independent float64 NumPy convolution (`problem.reference`: pad, then one
# tensordot per filter tap; `tests/test_conv.py` checks it against torch in float64 and runs a
# wider set of awkward cases).  The tolerance grows like sqrt(C·R·S), as GEMM's grows like
# sqrt(k); a float16 output adds its own rounding.  The first tensor-core rung takes float16 only, so
# it runs the float16 twin of each case.  The rungs after it (`tc_vector` to `tc_epilogue`) read
# NHWC in 16-byte chunks of 8 channels, so they run only the float16 NHWC case with 8 channels and
# refuse the others, each saying why (in the `ci` profile that case is a 1x1 layer, so their
# filter-tap loop and padding masks are checked by `tests/test_conv.py`, at 3x3 with padding).

# %%
cases = [conv.Problem(*c[:9], dtype=c[9], layout=c[10]) for c in check_cases]
checks = lesson.check_rungs([(conv.to_layout(p, dtype="float16") if v.name == "tensor_core" else p, v)
                             for p in cases for v in conv.LADDER], seed=seed)  # a failed check stops here
refused = checks[~checks.supported]  # e.g. Winograd takes 3x3 stride-1 layers only, tensor-core rungs float16
display(lesson.fold(refused[["label", "problem", "message"]], summary=f"{len(refused)} rung/problem pairs a rung "
                    "refuses (not run: each says why)"))
ran = checks[checks.supported]
errors = ran.pivot_table(index="label", columns="problem", values="max_abs_err", sort=False)
lesson.fold(errors.map(lambda e: "—" if e != e else f"{e:.2e}"),  # a dash where a rung did not run that problem
            summary=f"all {len(ran)} rung/problem pairs run match the float64 reference (open for the errors)")

# %% [markdown]
# ## What was measured on real GPUs
#
# Speeds come only from records in `data/results/` (matched to a rung by op + variant name +
# problem parameters, never by rung number).  With `sweep` on a GPU, the ResNet-50 layers are
# timed here against cuDNN (rung 0) and the peers (torch with `cudnn.benchmark`, which lets cuDNN
# time its algorithms, and a Triton implicit GEMM) and recorded.

# %%
every = lesson.records("conv", gpu=records_gpu, latest=False)  # every record: cards choose by code
recorded = lesson.chosen_records(every, "conv")  # one per GPU, problem and rung: today's code first, by the cards' rule
print("matching rule:", lesson.MATCH_RULE)
if recorded.empty:
    print("No convolution has been timed on a real GPU yet (data/results/ has no conv records): "
          "every rung card below says 'no record' and shows the model's estimate only.")
else:  # the numbers wait, folded, behind each rung's prompt and in the summary
    print(f"{lesson.plural(len(recorded), 'convolution record')} on {lesson.plural(recorded.gpu.nunique(), 'GPU')}, "
          f"at {lesson.plural(recorded.problem.nunique(), 'problem')}")
    print(lesson.runs_sentence("conv", gpu=records_gpu))  # each GPU's runs, read from the records

if sweep and not SIM:
    probs = [p for p in conv.GPU_SWEEP if f"{p.dtype} {p.layout}" in sweep_configs]
    table = bench.sweep(probs, conv.LADDER + peers.peers_for("conv"), record=record, progress=False)  # + torch, Triton
    display(lesson.sweep_table(table))
    if record is False:
        every = pd.concat([every, table], ignore_index=True)
    else:
        lesson.reload()
        every = lesson.records("conv", gpu=records_gpu, latest=False)
    recorded = lesson.chosen_records(every, "conv")
elif sweep:
    print("sweep is set but there is no GPU here: nothing is timed.")
shown = recorded[recorded.gpu == shown_gpu] if not recorded.empty else recorded  # one GPU per table and figure


# %%
# one view for every rung section: the kernel or its diff, the anatomy (folded), the rung's traffic
# model, the prompt, then the answer folded (the record, the model's estimate, the counters)
view = lesson.LadderView("conv", EX, table=every, model_gpu=gpu, cc=cc, traffic=True, plot_gpu=shown_gpu)


# %% [markdown]
# Each card's model line is `perfkit.model.estimate` (from the rung's traffic model and its
# compiled anatomy) when this perfkit has it, otherwise the plain roofline bound
# max(FLOPs / peak, DRAM bytes / bandwidth), which at this layer says "compute" for every SIMT
# rung and cannot tell them apart; the L2 and shared-memory bytes printed above each card are
# what separates them.
#
# ## Direct (`direct`)
#
# The definition as a kernel: one thread per output element, in y's memory order so that a warp's
# stores are one coalesced line, looping over the taps and channels.  Padding is a bounds test.
# Every input value is read by every output that sees it: up to K·R·S times, caught only by
# L1 and L2.  In NCHW a warp covers 32 neighbouring output columns, so its loads of x are
# coalesced and its load of w a broadcast; in NHWC it covers 32 output channels of one pixel,
# so x is the broadcast and w the scattered one.

# %%
view.show("direct", fold_source="the kernel of rung 01 direct: exercise 03.direct asks you to write "
                                 "it, so try that first (open once you have)")

# %% [markdown]
# ## Direct with a halo tile in shared memory (`direct_halo`)
#
# A block owns a TP x TQ tile of outputs for KB output channels.  One channel at a time it copies
# the input rows and columns that tile needs (the tile plus an R-1 by S-1 *halo*, scaled by the
# stride) into shared memory, with the KB filters' taps; each input value then comes from DRAM/L2
# about once per block, and each shared load feeds KB FMAs.  The shared-array shapes depend on
# (R, S, stride), so the kernel is compiled per filter shape, as libraries specialise theirs.

# %%
view.show("direct_halo")

# %% [markdown]
# ## Explicit im2col + the GEMM ladder (`im2col_gemm`)
#
# Caffe's recipe: copy each output pixel's receptive field into a row of an (N·P·Q) x (C·R·S)
# buffer, transpose w into a (C·R·S) x K matrix, and call the GEMM ladder's best SIMT rung (picked
# from `gemm.LADDER` by name) on them, unchanged.  The GEMM is good; the buffer is the cost: R·S /
# stride² times the size of x (9x for this layer), written to DRAM and read back.  The anatomy
# shown is the im2col kernel's (launch 0); the GEMM's is notebook 02's.

# %%
view.show("im2col_gemm")
print("the launches of im2col_gemm (kernel, registers):",
      [(l["kernel"], l["registers"]) for l in view.reports["im2col_gemm", 0].launches])
im2col_bytes = EX.gemm_mnk[0] * EX.gemm_mnk[2] * 4
print(f"im2col buffer at {EX.label}: {im2col_bytes / 1e6:.0f} MB, "
      f"{im2col_bytes / (EX.n * EX.c * EX.h * EX.w * 4):.1f}x the input")

# %% [markdown]
# ## Implicit GEMM, naive (`igemm_naive`)
#
# The same matrix product with no buffer: a thread per (pixel, output channel) loops over the
# flattened reduction index j, decodes it into (c, r, s) (NCHW keeps w's (c, r, s) order, NHWC
# its (r, s, c) order, so B is w itself in both) and gathers A[m, j] from x.  This is the direct
# rung with the loop flattened: the point is the indexing that the next rungs tile.

# %%
view.show("igemm_naive")

# %% [markdown]
# ## Implicit GEMM tiled in shared memory (`igemm_smem`)
#
# GEMM rung 3 on the implicit GEMM: a block stages a 16x16 tile of A, *gathered* from x (the
# im2col happens in shared memory, never in DRAM), and a 16x16 tile of B read along rows of w
# (coalesced) and stored transposed with one word of padding against bank conflicts.

# %%
view.show("igemm_smem")

# %% [markdown]
# ## Register blocking and 16-byte loads (`igemm_regblock`)
#
# GEMM rungs 5 and 6 on the implicit GEMM: 128x64 block tiles, each thread an 8x4 tile of outputs
# accumulated as outer products (12 shared loads per 32 FMAs).  In **NHWC** with C a multiple of
# 4, four consecutive taps of the reduction are four consecutive channels of one input pixel, so
# the gather is a single 16-byte `load4` (`LDG.E.128` in the SASS); in NCHW consecutive taps are
# neighbouring columns, not 16-byte aligned in general, so the rung falls back to scalar loads.
# Its example problem is the NHWC twin; compare the global-load mix of both layouts below.
#
# A second change is about the gather's arithmetic, not its bytes.  Decoding a reduction index j
# into (c, r, s) and a row m into (n, p, q) takes integer divisions by runtime sizes, and a 64-bit
# integer division is a subroutine of dozens of instructions on a GPU.  Here each thread gathers
# the same output pixel at every k step, so it decodes the pixel once, before the loop, and walks
# its taps as (c, r, s) counters advanced by BK: no division is left inside the k loop.  (The
# static instruction counts in the anatomy cannot show this: the win is per loop trip.)

# %%
view.show("igemm_regblock")
regblock = next(v for v in conv.LADDER if v.name == "igemm_regblock")
both = {lay: anatomy.inspect(regblock, conv.to_layout(EX, lay), cc) for lay in ("NCHW", "NHWC")}
pd.DataFrame([{"layout": lay, "registers": r.registers, "global load 128": r.mix.get("global load 128", 0),
               "global load 32": r.mix.get("global load 32", 0), "occupancy": f"{r.occupancy.ratio:.0%}"}
              for lay, r in both.items()])

# %% [markdown]
# ## Winograd F(2x2, 3x3) (`winograd`)
#
# A different algorithm, not a better schedule: for a 3x3 stride-1 layer, each 2x2 output tile
# is A^T [ Σ_c (G g G^T) ⊙ (B^T d B) ] A, with d the overlapping 4x4 input tile (Lavin & Gray,
# 2016).  The element-wise products summed over channels are 16 independent GEMMs (K x C times
# C x tiles), run here as one launch with `blockIdx.z` choosing the element; 16 multiplies per
# tile and channel replace 36, so the rung *does* 2.25x fewer FLOPs than the problem's
# algorithmic count (its traffic model says so: compare its FLOPs with the problem's).  The price:
# transformed input, filter and output workspaces written to DRAM and read back, and slightly
# larger rounding (the transforms add and halve; its check above passed the same tolerance).
# The anatomy shown is the batched GEMM's (launch 2); launch 0 is the input transform.

# %%
view.show("winograd", kernel=2)
t_w = conv.Winograd().traffic(EX)
print(f"winograd does {t_w.flops / 1e9:.2f} GFLOP for the problem's {EX.flops / 1e9:.2f} "
      f"({t_w.flops / EX.flops:.2f}x); DRAM {t_w.dram_bytes / 1e6:.0f} MB against the problem's minimum "
      f"{EX.bytes / 1e6:.0f} MB")

# %% [markdown]
# ## Tensor cores (`tensor_core`)
#
# float16 x and w, float32 accumulation, float16 y (cuDNN's contract).  Each block gathers a 64x16
# tile of A and a 16x64 tile of B into shared memory; each warp issues
# `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (the GEMM ladder's intrinsic, from
# `perfkit.kernels._ptx`) on fragments read from there.  In the simulator the instruction is
# emulated exactly with the same fragment maps, which is what the check above verified.  The
# model's peak is the FP16 tensor rate, ~15x the FP32 one: the element-wise gather, not the math,
# is what this first tensor-core rung is bound by.  It has neither of the GEMM ladder's tools for
# that: no `ldmatrix` (each lane gathers its fragments from shared memory two bytes at a time) and
# no `cp.async` ring (a k-tile's gather is loaded, stored, and only then multiplied).

# %%
view.show("tensor_core")

# %% [markdown]
# ## Beyond rung 8: two sub-ladders, predicted before their records
#
# Rung 8 is GEMM rung 12's design on a gathered A, and its records put it far below cuDNN (its card
# above).  What binds it, read from its Nsight Compute row on the H200, its SASS and a bank
# simulation: about 150 warp instructions per mma (the cell below prints the figure; int64 address
# math, 2-byte gathers, while-loop tap counters), 164 registers and so one block per SM, no prefetch, and a transposed B store that
# conflicts 16 ways.  The tensor-core rungs 9, 10, 12, 13 and 15 (float16 NHWC, float32
# accumulation) remove those one at a time.  Float32 needs something else: cuDNN's float32 choice
# at this layer is an FFT (its Nsight Compute kernels are named at the end of this notebook), so
# parity needs fewer multiplies, which the Winograd rungs 11 and 14 bring.  The sections follow the
# ladder's order; each diff is against the rung it builds on (not the rung before it in the
# ladder, which may belong to the other sub-ladder) and shows the code each build compiles: the
# tensor-core rungs 9-15 are one kernel whose compile-time switches (`LDSM`, `STAGES`, `EPI`, tile
# sizes) turn each idea on, and the Winograd rungs 11 and 14 share one batched GEMM.
#
# **These sections were written before any of rungs 9-15 had a GPU record**, as predictions: each
# says what its rung should change, and the model estimated every rung before it ran.  The cell
# below says, from the records, which GPU recorded them first and when (`tools/record_gpu.py --plan
# quick --ops conv` records them).  Each card now shows the newest
# record of today's code (the GPU named) beside the model's estimate and says where the
# model was right and where it missed; predict from the section, the diff and the anatomy before
# you open it (the summary near the end sets every rung's record beside its estimate in one table,
# and notebook 06 sorts the rungs first recorded in the newest run by how far the model was
# off).  The cell below says which rungs still have no record, and prints the counters of rungs 7
# and 8 that the new rungs are meant to move.

# %%
for name, p in (("tensor_core", conv.to_layout(EX, "NHWC", "float16")), ("winograd", EX)):
    for g in sorted(recorded.gpu.unique()) if not recorded.empty else []:
        k = lesson.counters("conv", p.label, name, g)
        if k is not None:  # read from data/ncu/, never computed
            print(f"{name} at {p.label} on {g} (Nsight Compute, commit {str(k.commit)[:7]}): "
                  f"{k.get('shared_bank_conflicts') / 1e6:.1f} M of {k.get('shared_wavefronts') / 1e6:.1f} M shared "
                  f"wavefronts conflict; achieved occupancy {k.get('achieved_occupancy_pct'):.1f}%, issue active "
                  f"{k.get('issue_active_pct'):.0f}%"
                  # tensor rung: the pipe's share and warp instructions per mma.m16n8k16 (4096 FLOPs each)
                  + (f", tensor pipe active {k.get('tensor_pipe_active_pct'):.2f}%, "
                     f"{k.get('warp_instructions') / (p.flops / 4096):.0f} warp instructions per mma"
                     if name == "tensor_core" else "")
                  + (f", {k.get('instructions_per_ffma'):.1f} instructions per FFMA"
                     if np.isfinite(k.get('instructions_per_ffma')) else ""))
new_rungs = [v.name for v in conv.LADDER if v.rung >= 9]
print(lesson.recorded_where("conv", new_rungs, gpu=records_gpu))
unrecorded = [n for n in new_rungs if recorded.empty or n not in set(recorded.variant)]
print("rungs 9 and up with no GPU record yet (their cards: the model's estimate only): " + ", ".join(unrecorded)
      if unrecorded else f"rungs 9 and up: all {len(new_rungs)} have a GPU record (each card names it)")

# %% [markdown]
# ## 16-byte chunks in filter-position order (`tc_vector`, after `tensor_core`)
#
# Rung 8 gathers A and B two bytes at a time through 64-bit index math and while-loop tap counters.
# Here the reduction runs by filter position: for each tap (r, s), the channels in 32-deep k-tiles,
# so in NHWC a row of an A k-tile is 32 consecutive channels of one input pixel, four 16-byte chunks
# (each one `LDG.E.128` and one `STS.128`).  Each thread decodes its rows' pixels once, into 32-bit
# offsets and per-row validity masks (a bit per filter row and column, as CUTLASS's optimized
# iterators keep them): a new tap costs an AND of mask bits and a constant pointer increment, no
# division.  w is read along its rows, K-contiguous as the mma's column-major B wants it: no
# transposed store, so no 16-way conflict.  It is a new kernel, so its diff is a rewrite (folded).
# Predict from the anatomy diff (registers, instructions) which of rung 8's limits is left.

# %%
view.show("tc_vector", prev="tensor_core", built=True)

# %% [markdown]
# ## `ldmatrix` and XOR-swizzled tiles (`tc_ldmatrix`, after `tc_vector`)
#
# Rung 9 still reads its mma fragments from shared memory two bytes at a time: eight loads and the
# packing for each A fragment.  One `ldmatrix.x4` gives each lane its four A registers of a 16x16
# tile, another the B registers of two 16x8 tiles; both tiles are k-contiguous, so both take the
# non-transposed form.  A row of a 32-deep float16 tile is 64 bytes, so the 8 rows an `ldmatrix`
# phase reads would fall on 2 bank groups (4-way conflicts): both tiles are stored XOR-swizzled
# (16-byte chunk c of row r at c ^ (r/2 mod 4)).  The diff is the switch `LDSM`: the fragment
# gathers and the emulated mma go, the lane's `ldmatrix` addresses and the register-operand mma come.
# Predict which counter falls more: shared wavefronts, or bank conflicts?

# %%
view.show("tc_ldmatrix", prev="tc_vector", built=True)

# %% [markdown]
# ## Winograd's GEMM, warp-tiled (`winograd_tiled`, after `winograd`)
#
# Rung 7 does 2.25x fewer multiplies than the direct method, but most of its time is its 16
# batched GEMMs, run far below the FP32 peak: many instructions per FFMA and a transposing 4-byte
# store of A that conflicts 8 ways (its Nsight Compute row above).  On the H200 (Nsight Compute,
# commit ed6ffd5) the batched-GEMM kernel took 446 µs, 88% of the time of rung 7's four kernels:
# 7.4 TFLOP/s of the multiplies Winograd keeps.  This rung keeps F(2x2, 3x3) and gives those
# GEMMs GEMM rung 10's warp-tiled main loop, one Winograd element per `blockIdx.z`: a warp owns
# 64x32 of the product, each lane 8x8 as 4x4 sub-tiles, so a k-step is 4 `LDS.128` for 64 FFMA
# (rung 7: 8 loads for 16); 128x128x8 block tiles, double-buffered, one barrier per k-tile.  The
# filter transform now writes U k-major, so both operand tiles are stored as they are read, 16
# bytes at a time: rung 7's conflicted transposing store is gone.  The anatomy compared is the
# batched GEMM's (launch 2) with rung 7's.  Predict: once the GEMM runs like GEMM rung 10, what is
# left of rung 7's time?

# %%
view.show("winograd_tiled", prev="winograd", built=True, kernel=2, prev_kernel=2)

# %% [markdown]
# ## `cp.async` pipelining (`tc_cp_async`, after `tc_ldmatrix`)
#
# Until now a k-tile goes global -> registers -> shared memory behind two barriers, and nothing is
# in flight while the warps multiply.  `cp.async` copies global memory straight into shared memory,
# without registers and without waiting: with a ring of 3 stages, two k-tiles are in flight while
# the warps multiply the third, and a k-tile needs one barrier (`cp.async.wait_group`, then
# `__syncthreads`) instead of two.  The padding needs no branch around the copy: a chunk in the
# padding, past the last pixel or past the channels copies 0 of its 16 bytes and the copy
# zero-fills the rest (the row predicate becomes the copy size).  The diff is the switch `STAGES`
# 1 -> 3: the register path goes, the prologue and the ring come; the shared memory triples.
# Predict: does latency stop binding?

# %%
view.show("tc_cp_async", prev="tc_ldmatrix", built=True)

# %% [markdown]
# ## 64x64 warp tiles (`tc_warptile`, after `tc_cp_async`)
#
# Each warp now owns 64x64 of y (4x8 mma tiles, 128 float32 accumulators per lane), so an A
# fragment feeds 8 mmas and a B fragment 4: per k-step of 16 a warp issues 4 + 4 `ldmatrix` for 32
# mma (rung 12: 2 + 2 for 8).  The price is registers (230-242 a lane, no spills), which leave 8
# warps per SM whatever the block holds, so the block tile is chosen per layer: among 128x128,
# 64x128, 128x64 and 64x64 blocks of these warp tiles, the one that leaves the least output area on
# the busiest SM (`conv.tensor.warptile_choices(problem)` lists blocks, blocks per SM, waves and the
# loss).  At this layer (M = 25088) 128x128 makes 196 blocks for 132 SMs: 64 SMs run two and 68 run
# one, so about a quarter of the GPU's time is lost.  64x128 makes 392 blocks, three on nearly every
# SM, and still covers all 128 output channels, so each gathered pixel is read from L2 once.
# Predict: do a quarter of the fragment loads per mma and a balanced grid beat the lost occupancy?

# %%
view.show("tc_warptile", prev="tc_cp_async", built=True)

# %% [markdown]
# ## F(4x4, 3x3) (`winograd_f4`, after `winograd_tiled`)
#
# A 6x6 input tile gives a 4x4 output tile: 36 multiplies per (tile, c, k) where the direct method
# does 144 and F(2x2) 64, so 36 batched GEMMs on rung 11's loop (unchanged), each over a quarter of
# rung 11's tiles: 1.78x fewer GEMM FLOPs.  The transforms grow (6x6 tiles, more adds per element),
# and so does the rounding: their constants (1/24 in G, 5 in B^T, 8 in A^T) amplify float32
# rounding several times over F(2x2)'s.  The check at the top passed the problem's tolerance
# against the float64 reference, and `tests/test_conv.py` runs F(4x4)'s float32 arithmetic against
# float64 at c = 128, 512 and 2048 with inputs of magnitude 1000: the error stays under half the
# tolerance and does not grow with c, because rounding errors summed over c grow like sqrt(c), as
# the tolerance does.  Other filter sizes and strides are refused with the reason, naming
# `igemm_regblock` (or the tensor-core rungs in float16 NHWC).
# The diff is in the transforms (long, folded; the GEMM kernel is the same), and the anatomy
# compared is the input transform's (launch 0) with rung 11's.  Predict: with 1.78x fewer GEMM
# FLOPs, what keeps the time from falling 1.78x?

# %%
view.show("winograd_f4", prev="winograd_tiled", built=True)

# %% [markdown]
# ## A 16-byte epilogue (`tc_epilogue`, after `tc_warptile`)
#
# An mma accumulator tile gives a lane 2 adjacent outputs in each of 2 rows, so rung 13 writes y
# one half (2 bytes) at a time.  Here a block inside the (M, K) view of y first stages each warp's
# 64x64 tile as float16 in shared memory (the rings are free once the k-loop ends), then each lane
# writes 16-byte chunks, 8 output channels of one pixel (`STG.128`): an eighth of the store
# instructions, whole sectors, and no division (row m of the GEMM is pixel m of NHWC y).  The diff
# is the `EPI` branch.  The staging is conflict-free: a lane's two adjacent outputs leave in one
# packed 4-byte store, and each row's 16-byte chunks are XOR-swizzled by the row, so the 8 rows one
# store spans (128 bytes apart, on the same banks without the swizzle) land on 8 different chunks;
# the bank simulation counts one wavefront per store.  Predict: with the conflicts gone, does the
# epilogue beat rung 13 on the card's estimate?

# %%
view.show("tc_epilogue", prev="tc_warptile", built=True)

# %% [markdown]
# ## Any channel count (`tc_padded`, after `tc_epilogue`)
#
# Rungs 9-15 refuse a layer whose channels are not a multiple of 8, and ResNet-50 has one: the 7x7
# stride-2 stem on the 3 colour channels, left to the SIMT `igemm_regblock`.  This rung is for such
# layers.  A first launch pads x and w to 8 channels (zeros after c; no launch where c % 8 == 0),
# and the reduction runs over the flattened (tap, 16-byte chunk) sequence, so at the stem a 32-deep
# k-tile holds 4 taps: 13 k-tiles where rung 15 on padded input would take 49, mostly zeros.  The
# diff is at this notebook's layer (c = 128, no pad launch): the per-thread (r, s, chunk) counters
# that replace rung 15's per-tap channel loop.  When this section was written the rung had no GPU
# record (the cell after "Beyond rung 8" says whether it has one now); its card is the model's
# estimate until then.  Predict: at the stem, how far below `igemm_regblock` should it land?

# %%
view.show("tc_padded", prev="tc_epilogue", built=True)

# %% [markdown]
# Any rung added to `conv.LADDER` after this notebook was written is shown here the same way, under
# its own description.

# %%
new = view.rest()
print(f"rungs without a section above: {', '.join(new)}" if new else "every rung has its section above")
view.anatomy_table()


# %% [markdown]
# ## ResNet-50, layer by layer
#
# One layer is not a network.  ResNet-50 (torchvision v1.5) has 53 convolutions of 23 distinct
# shapes: mostly 1x1, then 3x3, the stride-2 3x3 and 1x1 downsampling layers, and the 7x7 stem.
# `perfkit.workload.conv_sweep.resnet50_sweep` reads, per distinct layer and from one GPU's records,
# the fastest checked rung and cuDNN, and weights each layer by how often it occurs (cuDNN's time
# over the best rungs' time, summed over the layers with both).  Its sentences say which layers the
# ladder does not serve yet and why, from the records and from each refusing rung's own
# `supports()` message.
#
# The first line printed below says what the records cover.  Predict before you open the rest:
# how far from cuDNN is the best rung at the measured layer, and which of the new rungs can take a
# 1x1 layer, or the 7x7 stem with its 3 channels?

# %%
from perfkit.workload.conv_sweep import resnet50_sweep, sweep_figure

sweeps = {c: resnet50_sweep(shown, gpu=shown_gpu, dtype=c.split()[0], layout=c.split()[1], batch=resnet_batch)
          for c in table_configs}
for config, rep in sweeps.items():  # what the records cover, plainly (no value of a record in it)
    print(rep.sentences()[0])
for config, rep in sweeps.items():
    meas = rep.measured()
    if len(meas):  # only layers with both records: no rows of dashes
        tab = meas[["layer", "count", "best_rung", "best_us", "cudnn_us", "x_cudnn", "weighted_best_us",
                    "weighted_cudnn_us"]].rename(columns={
            "best_rung": "best rung", "best_us": "best µs", "cudnn_us": "cuDNN µs", "x_cudnn": "cuDNN / best",
            "weighted_best_us": "count x best µs", "weighted_cudnn_us": "count x cuDNN µs"})
        display(lesson.fold(tab.style.format(precision=2).hide(axis="index"),
                            summary=f"{config} on {shown_gpu}: the {lesson.plural(len(meas), 'measured layer')} of 23"))
    text = rep.sentences()[1:] if len(meas) else rep.sentences()[1:2]  # no records: the refusals wait for them
    display(lesson.fold(lesson.paragraph(" ".join(text)), summary=f"{config}: which layers are served, in words"))
if any(len(r.measured()) for r in sweeps.values()):
    display(lesson.fold_figure(sweep_figure([r for r in sweeps.values() if len(r.measured())],
                                            title=f"ResNet-50 conv layers at batch {resnet_batch}"),
                               "each layer's share of the network's FLOPs, measured layers filled"))

# %% [markdown]
# ### What the model predicts for the whole network, before the records
#
# Where the records are missing, the model can still answer: per layer, the rung with the
# smallest estimate among those whose `supports()` takes it (`perfkit.model.estimate`, behind
# today's timer), against cuDNN as the model sees any library, its roofline plus one library
# call (the model has no model of cuDNN's own kernels, so this is a line to beat, not a
# prediction of cuDNN's time).  Issue 43's network goal is 0.4 of cuDNN in float16.  Predict
# first: which kind of layer costs the ladder the most time, and why?

# %%
from perfkit.workload.conv_sweep import predicted_sweep

pred = predicted_sweep(gpu, dtype="float16", layout="NHWC", batch=resnet_batch)
pt = pred.table.assign(weighted_gap_us=pred.table["weighted_best_us"] - pred.table["weighted_cudnn_us"])
worst = pt.sort_values("weighted_gap_us", ascending=False).iloc[0]
display(lesson.fold(
    pt[["layer", "count", "best_rung", "best_us", "cudnn_us", "x_cudnn", "bound"]].rename(columns={
        "best_rung": "best rung (model)", "best_us": "its estimate µs", "cudnn_us": "cuDNN's roofline µs",
        "x_cudnn": "roofline / estimate", "bound": "its bound"}).style.format(precision=2).hide(axis="index"),
    summary=f"float16 NHWC on {gpu}: the model's best rung per layer (estimates, nothing measured)"))
display(lesson.fold(lesson.paragraph(
    f"{pred}. The layer that costs the most time beyond the line, counted over its occurrences, is "
    f"{worst['layer']} ({int(worst['count'])}x): {worst['best_rung']} at {worst['best_us']:.1f} µs "
    f"against {worst['cudnn_us']:.1f} µs, {worst['weighted_gap_us']:.0f} µs of the network's "
    f"{float(pt['weighted_best_us'].sum() - pt['weighted_cudnn_us'].sum()):.0f} µs gap"
    + (f"; no rung takes {', '.join(pred.missing)}" if pred.missing else "") + "."),
    summary="the model's network figure, in words"))

# %% [markdown]
# ## Layout: NCHW or NHWC, and what a transpose costs
#
# The rungs read both layouts, but not equally well:
#
# * in **NCHW** a row of the image is contiguous, so the direct and halo rungs' loads of x
#   coalesce along w; the implicit GEMM's gather walks the reduction through (c, r, s), whose
#   neighbours are neighbouring columns, never 16-byte aligned in general;
# * in **NHWC** the channels of a pixel are contiguous, so the implicit GEMM's reduction (in
#   (r, s, c) order) reads 4 channels at once with one 16-byte load, and the output of a GEMM
#   (pixels x channels) *is* y: no scatter.  Direct and halo, which walk pixels, lose coalescing.
#
# A library that prefers one layout converts the other: a transpose reads and writes the tensor
# once each way, x before the convolution and y after.  The table prices that at the DRAM
# bandwidth (a copy's bound; a real transpose is a little slower) next to the model's time for
# the convolution itself (the oracle's line: FLOPs at the FP32 peak), layer by layer.

# %%
bw = roofline.published_rates(None, gpu=gpu)["dram_bw"]
rows = []
for name, p, count in conv.resnet50_layers(resnet_batch, "float32", "NHWC"):
    xb, yb = p.n * p.c * p.h * p.w * p.elem, p.n * p.k * p.p * p.q * p.elem
    conv_s = lesson.layer_estimate(conv.LADDER[0], p, gpu, table_estimator)[0]
    tr_s = 2 * (xb + yb) / bw
    rows.append({"layer": name, "count": count, "x MB": xb / 1e6, "y MB": yb / 1e6,
                 "transpose x and y, MB moved": 2 * (xb + yb) / 1e6, "transpose est ms": tr_s * 1e3,
                 "conv est ms (roofline)": conv_s * 1e3, "transpose / conv": tr_s / conv_s})
layout_table = pd.DataFrame(rows)
display(layout_table.style.format(precision=3).hide(axis="index"))
w = layout_table["count"]
print(f"whole network at batch {resnet_batch}, float32: transposes {float((layout_table['transpose est ms'] * w).sum()):.2f} ms "
      f"against {float((layout_table['conv est ms (roofline)'] * w).sum()):.2f} ms of convolution at the FP32 peak "
      "(model estimates; nothing measured)")

# %% [markdown]
# In this model (nothing here is measured) the transposes cost about as much as the convolution
# itself or more for the low-intensity 1x1 layers of stage 1 (the ratio column above, at the
# shown GPU's bandwidth), and a few percent for the late 3x3 layers
# with many channels: a layout conversion is cheap only where the arithmetic is heavy.  The
# rungs' own traffic models say the same thing from the other side: the table below gives each
# rung's modelled L2 bytes for the example layer in both layouts (the halo rung gathers one
# channel at a time, so NHWC costs it whole sectors per element; the register-blocked rung only
# vectorizes in NHWC).

# %%
from perfkit.kernels.base import UnsupportedProblem

rows, refused = [], {}
for v in conv.LADDER[1:]:
    for lay in ("NCHW", "NHWC"):
        p = conv.to_layout(EX, lay, "float16" if v.name == "tensor_core" else None)
        try:
            v.supports(p)  # a layout (or dtype) the rung refuses: no traffic of it to compare
        except UnsupportedProblem as why:
            refused.setdefault(v.label, []).append((lay, str(why)))
            continue
        t = v.traffic(p)
        row = {"rung": v.label, "layout": lay, "DRAM MB": t.dram_bytes / 1e6, "L2 MB": (t.l2_bytes or 0) / 1e6}
        if table_estimator != "roofline":  # the roofline bound would be one number for every rung
            row["est ms"] = lesson.layer_estimate(v, p, gpu, table_estimator)[0] * 1e3
        rows.append({**row, "notes": t.notes})
if refused:  # said once, with the first rung's own reason
    by = {}
    for label, why in refused.items():
        by.setdefault(" and ".join(lay for lay, _ in why), []).append(label)
    print(f"left out, refused by their rung at this layer in {EX.dtype}: "
          + "; ".join(f"{', '.join(labels)} in {lays}" for lays, labels in by.items())
          + f" (e.g. {next(iter(refused.values()))[0][1]})")
pd.DataFrame(rows).style.format(precision=3).hide(axis="index")

# %% [markdown]
# ## Summary
#
# Open these once you have made your predictions: one card per rung that runs the example layer
# (the recorded median where recorded, x the rung before, the fraction of cuDNN, the model's
# estimate), then the same as bars (measurements from real GPUs only; the model's estimates as
# ticks); then the same for the layer's float16 NHWC twin, where the tensor-core rungs run (cuDNN
# there is its float16 kernel: a factor across dtypes would compare two different problems).

# %%
view.summary(EX, title=f"Convolution ladder at {EX.label}")
TC = next(v for v in conv.LADDER if v.name == "tensor_core").example(EX)  # the float16 NHWC twin
view.summary(TC, title=f"Convolution ladder at {TC.label}")
if not shown.empty:  # every record of that GPU, by rung and problem ("*": a kernel changed since)
    display(lesson.fold(lesson.record_pivot(shown, "median_s", caption="medians recorded on "
                                            + plots.provenance(shown).removeprefix(" on ")),
                        summary=f"every convolution record of {shown_gpu}, median time by rung and problem"))

# %% [markdown]
# ## Where the ladder stands
#
# The best rung against cuDNN at every recorded layer, per dtype, layout and GPU: one bar per
# comparison (one GPU, one layer), and a paragraph written from the same numbers, which says
# whether each goal is met: the best rung at ≥ 0.7 of cuDNN in float32 and ≥ 0.5 in float16
# (issue 43).  Table, bars and paragraph lead with today's code: per layer the fastest rung of
# today's code (each rung by its newest record of today's code; older code, marked `*`, only where
# no rung of today's code was recorded), against cuDNN timed in the same run (the same GPU and
# commit; where that run timed no cuDNN, cuDNN's own median is shown and nothing is divided), and
# a record of older code that ran faster named beside it.  cuDNN's own choice of algorithm is in
# the Nsight Compute tables (`data/ncu/`: the kernels its rung-0 rows name).

# %%
st = lesson.standing("conv", every)
display(lesson.fold(lesson.standing_table(st, "cuDNN"), summary="the best rung vs cuDNN, per layer and GPU"))
display(lesson.fold_figure(lesson.standing_figure(st, "cuDNN", title="convolution: best rung / cuDNN"),
                           "the same as bars"))
display(lesson.fold(lesson.paragraph(lesson.takeaway(st, "cuDNN", goals={"float32": 0.7, "float16": 0.5})),
                    summary="where the convolution ladder stands, in words"))
for config in ("float32 NCHW", "float16 NHWC"):  # what cuDNN chose at the example layer, from its Nsight Compute rows
    p = conv.to_layout(EX, config.split()[1], config.split()[0])
    ks = lesson.ncu_kernels("conv", p.label, conv.LADDER[0].name, shown_gpu)
    print(f"cuDNN at {p.label} on {shown_gpu}: " + (", ".join(f"{k} ({lesson.fmt_seconds(t)})" for k, t in ks)
                                                       if ks else "no Nsight Compute row"))


# %% [markdown]
# ## Exercises
#
# Complete each skeleton, then run its `grade(...)`: the grader runs your kernel (simulator here,
# the GPU when there is one) against the float64 reference at awkward shapes (stride 2 with
# padding, a 1x1 filter, a filter as wide as the padded input) with NaN-poisoned outputs, then
# compiles it for an H100 and reads the anatomy.  A failed check names the shape and the first
# wrong element (for im2col: which output pixel and which filter tap it is).  `show(name)` prints
# a task; reference solutions live apart, in `perfkit/exercises/solutions/`
# (`exercise_reference = True` grades those, for CI).  Both exercises are NCHW float32.

# %%
from perfkit.exercises import grade, show
from numba import cuda, float32

# %% [markdown]
# ### Exercise 03.im2col · the im2col index math (rung 3)
#
# `col` has one row per output pixel `m = (b, p, q)` (q fastest) and one column per filter tap
# `j = (c, r, s)` (s fastest, as `w[k]` is stored).  `col[m, j]` is
# `x[b, c, p*stride - pad + r, q*stride - pad + s]`, or 0 where that falls in the padding.  One
# thread per element of `col`.

# %%
@cuda.jit
def im2col(x, col, N, C, H, W, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    CRS = C * R * S
    if i < N * P * Q * CRS:
        m = i // CRS
        j = i % CRS
        v = float32(0)  # FILL ME IN (about 10 lines): m -> (b, p, q), j -> (c, r, s), the tap's x or 0
        col[m, j] = v


grade("03.im2col", im2col, reference=exercise_reference)

# %% [markdown]
# ### Exercise 03.direct · the direct convolution (rung 1)
#
# One thread per element of `y` (NCHW, in memory order: q fastest), summing
# `x[b, c, p*stride - pad + r, q*stride - pad + s] * w[k, c, r, s]` over `(c, r, s)`; taps in the
# padding contribute nothing.

# %%
@cuda.jit
def conv_direct(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    if i < N * K * P * Q:
        q = i % Q
        p = (i // Q) % P
        k = (i // (P * Q)) % K
        b = i // (K * P * Q)
        acc = float32(0)  # FILL ME IN (about 8 lines): loops over c, r, s with the padding tests
        y[b, k, p, q] = acc


grade("03.direct", conv_direct, reference=exercise_reference)

# %% [markdown]
# ### Exercise 03.predict_bound · which leg binds the direct convolution?
#
# The direct convolution (rung 1) at ResNet-50's stage-4 3x3 layer (batch 32, 512 channels in and
# out, 7x7 images, float32 NCHW), not the example layer whose card you opened above, on an H100:
# which of the model's legs binds it?  Think about what each thread loads per output and how many
# warps an SM holds, then grade it against `perfkit.model.estimate`.

# %%
my_prediction = None  # e.g. {"bound": "dram"}
grade("03.predict_bound", my_prediction, reference=exercise_reference)
