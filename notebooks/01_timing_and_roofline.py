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
# # 01 · Timing and the roofline
#
# Before we optimise anything we need a stopwatch we can trust, and a ceiling to compare against.
# In this notebook you will learn:
#
# 1. why a host clock around a kernel launch measures the *launch*, not the kernel;
# 2. why the first calls are slow (warm-up) and how to skip them;
# 3. why a kernel timed right after itself looks faster than it is (a hot L2), and how to flush it;
# 4. what a kernel launch costs by itself;
# 5. how many samples are enough: noise, the median's confidence interval and a stopping rule;
# 6. how to check a kernel *before* timing it;
# 7. how fast the memory really is (measured vs published bandwidth), and the roofline that
#    tells you which ceiling a kernel is under;
# 8. what the compiler made of each kernel (its *anatomy*), with no GPU needed.
#
# Everything here runs on a laptop with no GPU, in Numba's CUDA simulator, at small sizes.
# There, times come from the host clock around a CPU simulation: **they say nothing about GPU
# speed** and are labelled `simulated`; no figure plots them as speed.  Where `data/results/`
# holds measurements recorded on real GPUs, the notebook shows those instead, with their provenance.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
n_elements = 4099          # saxpy length for the timing experiments
sizes = [1000, 4099]       # saxpy lengths for the checked sweep
seed = 0                   # inputs for timing (the check uses fresh random inputs)
gpu = None                 # GPU whose published ceilings to draw (None: the one in use, else the newest recorded)
cc = (9, 0)                # compile target for the anatomy view
record = "auto"            # record GPU measurements into data/results/ ("auto": only on a real GPU)
exercise_reference = False # True: the exercises grade the reference solutions, for CI
cluster_spec = "local-sim:2"          # section 11: where the sweep's units run (perfkit.cluster's --cluster SPEC)
cluster_ops = ["softmax", "rmsnorm"]  # section 11: the ops units of that sweep

# %%
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from IPython.display import display

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import backend, timing, bench, results, roofline, plots, anatomy, lesson
from perfkit.kernels import saxpy

SIM = backend.is_simulator()        # (the backend is announced once, on import)
# the device's facts this backend knows (the simulator knows few: the rest are left out, not shown as None)
{k: v for k, v in backend.device().as_dict().items() if v not in (None, {})}

# %% [markdown]
# ## The op: SAXPY
#
# `out = alpha * x + y` reads two arrays and writes one: 12 bytes and 2 FLOPs per float32 element.
# Its speed is set by memory bandwidth alone, which makes it the right kernel to learn timing on.
# The ladder lives in `perfkit/kernels/saxpy.py`; rung 0 is the oracle (the library's own kernel).

# %%
pd.DataFrame([{"rung": v.rung, "name": v.name, "what changed and why": v.what} for v in saxpy.LADDER])

# %% [markdown]
# ## 1 · Host clocks lie about asynchronous launches
#
# A CUDA launch only *queues* the kernel and returns.  A host timer stopped right after the
# launch measures the queueing; the kernel may not even have started.  To time the GPU with a host
# clock you must wait for it (`synchronize`), and then you also time the wait's own overhead.
# CUDA **events** are recorded *on the stream*, so the GPU stamps the start and end itself.
#
# **What an event window holds.**  The GPU stamps an event when it *reaches* it in the stream.
# If the GPU is idle when the host records the start event, the start is stamped at once, and
# the GPU then waits for the host to launch the kernel: the window holds the host's launch time
# too (tens of microseconds through Numba with several array arguments).  The first H100 run
# (2026-11-23, commit 7c7b2e0, before the spin kernel; `data/timer/h100-sxm-2026-11-23.csv`, shown
# below) read the short rungs well above `triton.testing.do_bench`.  So `measure()` first queues a one-thread **spin kernel** that keeps
# the GPU busy for longer than the host needs to launch (measured during warm-up), then the start
# event, the kernel(s), the end event.  The launches queue up behind the spin, and the window
# holds only the GPU's work: the kernels and the GPU's own gaps between them.  Each measurement
# keeps the spin length and the host's enqueue time per sample in `extra`.
#
# In the simulator, a launch runs the kernel to completion on the CPU before returning, so the
# "launch only" and "with synchronize" numbers coincide; on a GPU the first is far smaller.
# Simulated times are host times of a CPU simulation and show none of this.

# %%
problem = saxpy.Problem(n=n_elements)
inputs = problem.make_inputs(seed)
rung = saxpy.LADDER[1]
run = rung.prepare(problem, inputs)
run(); run.synchronize()                       # compile and load first

if SIM:  # a simulated launch runs to completion before it returns: its times would teach the opposite
    print("simulator: a launch here runs the kernel on the CPU before returning, so host clock and events "
          "cannot differ as they do on a GPU; no simulated time is shown.")
    # recorded on real GPUs: the same rungs timed by events around the launch and by triton's do_bench,
    # in the first timer's run (before the spin kernel), then in each GPU's newest run (behind it)
    for sentence, times in lesson.timer_vs_do_bench():
        print(sentence)  # measure / do_bench, from the lowest to the highest
        if times is not None:  # folded: the times answer predictions further on (saxpy's below, softmax's in 04)
            display(times)
else:
    t0 = time.perf_counter(); run(); t_launch = time.perf_counter() - t0
    run.synchronize(); t_synced = time.perf_counter() - t0
    ev = timing.measure(run, l2="hot", min_samples=3, max_samples=5, warmup_s=0, max_time_s=30)
    print(f"host clock, launch only    : {t_launch * 1e6:10.1f} us")
    print(f"host clock, + synchronize  : {t_synced * 1e6:10.1f} us")
    print(f"{ev.clock:27s}: {ev.median_s * 1e6:10.1f} us")
    print(f"the window sat behind a {ev.extra['spin_s'] * 1e6:.0f} us spin; the host took "
          f"{np.median(ev.extra['host_enqueue_s']) * 1e6:.1f} us (median) to enqueue the events and the kernel, "
          f"{lesson.plural(ev.extra['host_exceeded_spin'], 'sample')} where it outlasted the spin")

# %% [markdown]
# ## 2 · Warm-up
#
# The first call of a Numba kernel compiles it (Python → LLVM IR → PTX → cubin) and loads the
# module: milliseconds to seconds.  Later calls also start with cold clocks and TLBs.
# `measure()` calls the function until a warm-up budget (`warmup_s`) is spent, then samples.

# %%
if SIM:
    # The simulator compiles nothing (the kernel runs as Python threads), so a first and second
    # call differ only by noise: timing them here would teach the wrong lesson.
    print("simulator: no compile step, so no warm-up to see; on a GPU this cell times the first call "
          "(compile + module load) against the second (the kernel alone); perfkit records no run of it.")
else:
    fresh = saxpy.Unrolled(unroll=3)           # a configuration not compiled yet
    p = fresh.prepare(problem, inputs)
    t0 = time.perf_counter(); p(); p.synchronize(); first = time.perf_counter() - t0
    t0 = time.perf_counter(); p(); p.synchronize(); second = time.perf_counter() - t0
    print(f"first call {first * 1e3:.1f} ms (compile + load + run), second call {second * 1e3:.3f} ms")

# %% [markdown]
# ## 3 · Cold versus hot L2
#
# A GPU's L2 cache holds tens of megabytes (50 MB on an H100 SXM).  Time a kernel twice in a
# row on inputs that fit, and the second run reads them from L2, not DRAM.  Real workloads rarely
# find their inputs in L2, so `measure()` writes a buffer of at least **twice the L2 size**
# before every sample (`l2="cold"`, the default).  `l2="hot"` skips the flush, to show the effect.
# The flush is outside the timed region (queued before the spin kernel and the start event).
#
# The effect shows only when the data *fits* in L2: here a 16-byte copy whose source and
# destination together take half the L2 (on a GPU; a tiny copy in the simulator).  Hot must then
# come out no slower than cold; a hot run slower than a cold one means the window holds something
# other than the kernel (the host's launch, before the spin kernel existed).

# %%
from numba import cuda

l2_bytes = backend.device().l2_bytes or 0
n_fit = max(1024, l2_bytes // 4 // 4) if not SIM else 1024   # floats: src + dst = half the L2
src_fit, dst_fit = cuda.to_device(np.ones(n_fit, np.float32)), cuda.device_array(n_fit, np.float32)
copy_fit = roofline.copy_launcher(dst_fit, src_fit)
if not SIM:
    cold = timing.measure(copy_fit, l2="cold", max_time_s=1.0)
    hot = timing.measure(copy_fit, l2="hot", max_time_s=1.0)
    print(f"copy of {n_fit * 4 * 2 / 2**20:.1f} MiB (src + dst) against an L2 of {l2_bytes / 2**20:.0f} MiB")
    print("cold:", cold)
    print("hot: ", hot)
    print(f"flush buffer: {cold.flush_bytes / 2**20:.0f} MiB")
    verdict = "as it must" if hot.median_s <= cold.median_s * 1.02 else "WRONG: the window holds more than the kernel"
    print(f"hot / cold = {hot.median_s / cold.median_s:.2f} ({verdict})")
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.hist(np.array(cold.samples) * 1e6, bins=40, alpha=0.6, label="cold L2")
    ax.hist(np.array(hot.samples) * 1e6, bins=40, alpha=0.6, label="hot L2")
    ax.set_xlabel("kernel time (us)"); ax.legend(); ax.set_title(f"16-byte copy, {n_fit * 8 / 2**20:.0f} MiB moved")
else:
    copy_fit(); cuda.synchronize()   # the copy runs and is checked here; its simulated time is not shown
    assert np.array_equal(dst_fit.copy_to_host(), np.ones(n_fit, np.float32))
    print("The simulator has no L2: a simulated hot/cold pair says nothing (it can even come out reversed), "
          "so none is shown. Recorded with this timer (tools/record_gpu.py --parts timer):")
    for line in lesson.hot_cold_lines():  # each GPU's newest timer check: one copy, hot and cold
        print(line)

# %% [markdown]
# ## 4 · Launch overhead
#
# An empty kernel still costs a launch: microseconds from Python through Numba's dispatcher
# and the driver, of which the GPU sees only a part.  The event window (behind the spin kernel)
# shows the GPU's part; the host clock around launch + synchronize shows the whole round trip.
# A kernel shorter than the round trip is, from Python, mostly launch: batch such work or fuse it.

# %%
@cuda.jit
def empty_kernel():
    pass

launch = lambda: empty_kernel[1, 32]()
if SIM:  # the simulator's launch is a Python call: its time is no launch overhead
    launch(); cuda.synchronize()
    print("simulator: the empty kernel ran; its host time is a Python call, not a launch, so none is shown.")
    for line in lesson.empty_kernel_lines():  # each GPU's newest timer check: the empty kernel, by events
        print(line)
else:
    host = []
    for _ in range(200):
        t0 = time.perf_counter(); launch(); cuda.synchronize(); host.append(time.perf_counter() - t0)
    empty = timing.measure(launch, l2="hot", max_time_s=0.5)
    print(f"empty kernel, events      : {empty.median_s * 1e6:.2f} us")
    print(f"empty kernel, host + sync : {np.median(host) * 1e6:.2f} us")

# %% [markdown]
# ## 5 · Noise and the stopping rule
#
# Timings vary from run to run: clocks change, other work interferes.  The median is robust to
# the occasional outlier; the interquartile range (IQR) and the coefficient of variation (CV)
# describe the spread.  How many samples?  `measure()` keeps sampling until the 95 % confidence
# interval of the median (computed from order statistics, no normal distribution assumed) is
# narrower than `rel_ci` (2 %) of the median, once it has a minimum number of samples and of summed
# sample time (`min_samples`, `min_time_s`), and stops at a cap on samples (`max_samples`) or on
# wall-clock time (`max_time_s`).  The raw samples are kept, and NVML's SM clock and throttle reasons are read
# before and after, so a throttled run shows.

# %%
if SIM:  # a simulated run has a few host-clock samples: the rule is shown on a recorded GPU run instead
    run(); run.synchronize()
    rec = results.load(op="softmax")
    rec = rec[(rec.variant == "fused") & (rec.problem == "rows=4096 cols=4096 dtype=float32 axis=-1")]
    doc = json.loads(Path(rec.path.iloc[-1]).read_text())["timing"] if len(rec) else None
    if doc is None:
        print("no recorded GPU run to show the stopping rule on")
    else:
        samples = np.array(doc["samples"])
        lo, hi = timing.median_ci(samples)
        short = doc["stop_reason"] == "max_samples" and samples.sum() < doc["settings"]["min_time_s"]
        # the rule, unfolded; the times folded: softmax's times answer notebook 04's predictions
        print(f"softmax fused at 4096x4096 on {rec.gpu.iloc[-1]} ({rec.utc.iloc[-1][:10]}, commit {rec.commit.iloc[-1][:7]}): "
              f"{len(samples)} samples, the 95% CI of the median {(hi - lo) / np.median(samples):.2%} of it wide "
              f"(the rule asked for {doc['settings']['rel_ci']:.0%}), stopped by {doc['stop_reason']}"
              # the interval met the rule early, but the rule also asks for min_time_s of samples
              + (f" (the samples' GPU time fell short of the rule's min_time_s of "
                 f"{doc['settings']['min_time_s'] * 1e3:.0f} ms, so the sample cap ended it)" if short else "")
              + "; SM clock "
              f"{doc['nvml_before']['sm_clock_mhz']} -> {doc['nvml_after']['sm_clock_mhz']} MHz")
        fig, ax = plt.subplots(figsize=(7, 2.5))
        ax.plot(samples * 1e6, ".", ms=3, label="samples")
        ax.axhline(np.median(samples) * 1e6, color="k", lw=0.8, label="median")
        ax.axhspan(lo * 1e6, hi * 1e6, color="k", alpha=0.15, label="95% CI of the median")
        ax.set_xlabel("sample"); ax.set_ylabel("us"); ax.legend(fontsize=8, loc="upper right")
        ax.set_title("a recorded GPU measurement: raw samples, median and its interval")
        display(lesson.fold(
            lesson.paragraph(f"median {np.median(samples) * 1e6:.2f} us, 95% CI of the median [{lo * 1e6:.2f}, "
                             f"{hi * 1e6:.2f}] us; the {len(samples)} samples took {samples.sum() * 1e3:.0f} ms of GPU time"),
            lesson.fold_figure(ax, "the samples, their median and its interval", open_=True),
            summary="this measurement's median, interval and samples in us (softmax fused's time: open after "
                    "notebook 04's predictions)"))
else:
    m = timing.measure(run, rel_ci=0.02, max_time_s=2.0)
    lo, hi = m.ci_low_s, m.ci_high_s
    print(m)
    print(f"95% CI of the median: [{lo * 1e6:.2f}, {hi * 1e6:.2f}] us, relative width {m.rel_ci:.2%}")
    print("NVML before:", m.nvml_before, "\nNVML after: ", m.nvml_after)
    fig, ax = plt.subplots(figsize=(7, 2.5))
    ax.plot(np.array(m.samples) * 1e6, ".", ms=3); ax.axhline(m.median_s * 1e6, color="k", lw=0.8)
    ax.set_xlabel("sample"); ax.set_ylabel("us"); ax.set_title("raw samples and their median")

# %% [markdown]
# ## 6 · Check, then time
#
# `bench.sweep` checks every rung on **fresh random inputs** against a float64 NumPy reference,
# with the output poisoned with NaN first (an element the kernel forgot to write shows as NaN,
# and NaN never passes).  Only a rung that passes is timed.  On a GPU each result is recorded at
# once in `data/results/` with its provenance.  In the simulator, the time columns are host
# times of the simulation, and the rate columns (`gbps`, `tflops`) are left empty on purpose.

# %%
problems = [saxpy.Problem(n=s) for s in sizes]
# a bar while it runs (a widget: the browser test checks it renders), one line once it is done
table = bench.sweep(problems, saxpy.LADDER, seed=seed, record=record, progress=lesson.progress)
shown_sweep = lesson.sweep_table(table, metric="gbps")  # in the simulator the time reads "simulated": no speed shown
# on a GPU its saxpy times answer exercise 01.predict_saxpy (at the end): folded until then
shown_sweep if SIM else lesson.fold(shown_sweep, summary=f"the {len(shown_sweep)} checked and timed rows "
                                                         "(open after exercise 01.predict_saxpy)")

# %% [markdown]
# ## 7 · Measured versus published bandwidth, and the roofline
#
# A datasheet's bandwidth is a peak no kernel reaches; a simple copy kernel shows what is
# attainable (the cell below says what share of the published bandwidth perfkit's copy kernel
# reached on each GPU, from the newest records in `data/results/<gpu>/roofline/`, listed in its
# table; the model still applies 70%, the first copy kernel's figure: `dram_efficiency` in
# `data/rates.yaml` says why).  Likewise a chain of
# independent FMAs shows the attainable FP32 rate.  On a GPU we measure both here and record them;
# without one we show what was recorded on real GPUs, if anything.

# %%
if not SIM:
    bw = roofline.copy_bandwidth(record=record != False)
    fl = roofline.fp32_rate(record=record != False)
    print(f"measured copy bandwidth: {bw['bytes_per_s'] / 1e12:.2f} TB/s   ({bw['measurement']})")
    print(f"measured FP32 FMA rate : {fl['flops_per_s'] / 1e12:.1f} TFLOP/s ({fl['measurement']})")
else:
    bw = roofline.copy_bandwidth()          # runs and is checked, but a simulated time is no bandwidth
    print("simulator: the copy kernel ran and its output is checked; its simulated time is no bandwidth, "
          "so none is shown")

recorded_ceilings = results.load(op="roofline")
if recorded_ceilings.empty:
    print("No measured ceilings in data/results/ here: the roofline below draws the published ones only.")
else:  # each ceiling in its own unit: a copy moves bytes, the FMA kernel does FLOPs
    display(pd.DataFrame({
        "gpu": recorded_ceilings["gpu"],
        "ceiling": recorded_ceilings["variant"].map({"copy": "copy bandwidth", "fma": "FP32 FMA rate"}),
        "measured": [f"{r.gbps / 1e3:.2f} TB/s" if r.variant == "copy" else f"{r.tflops:.1f} TFLOP/s"
                     for r in recorded_ceilings.itertuples()],
        "date": recorded_ceilings["utc"].astype(str).str[:10],
        "commit": recorded_ceilings["commit"].astype(str).str[:7]}))
    print(lesson.copy_sentence())  # each GPU's newest copy record, against its datasheet

# %%
ceil = roofline.ceilings(gpu)
display(pd.DataFrame([{"ceiling": c.name, "value": f"{c.value / 1e12:.2f} TB/s" if c.kind == "memory"
                       else f"{c.value / 1e12:.1f} TFLOP/s", "origin": c.origin, "source": c.source}
                      for c in ceil]).style.hide(axis="index"))
recorded = results.load(op="saxpy")
points = recorded if not recorded.empty else table
ax = roofline.plot(points, ceil, title=f"saxpy on the roofline ({ceil[0].name.removesuffix(' FP32')} ceilings)"
                   + (" (recorded GPU results)" if not recorded.empty else ""))
if recorded.empty:
    print("No saxpy records in data/results/ yet (the timer check above timed its rungs on real GPUs, "
          "data/timer/, but records none): the roofline shows the ceilings only.")
    # what *is* recorded: the softmax ladder (notebook 04), a memory-bound op like saxpy
    sm = results.load(op="softmax", latest=False)
    sm = sm[sm["problem"].astype(str).str.startswith("rows=4096 cols=4096 dtype=float32")]
    if not sm.empty:  # one GPU's records under that GPU's ceilings (the newest GPU), each rung's chosen by code
        sm = lesson.chosen_records(sm[sm["gpu"] == sm.sort_values("utc")["gpu"].iloc[-1]], "softmax")
        sm = sm.assign(label=sm["rung"].map(lambda r: "peer" if int(r) < 0 else f"{int(r):02d}")  # peers: rung -1
                       + " " + sm["variant"].astype(str))
        plt.show()  # saxpy's roofline above; the softmax one folded: notebook 04 asks for its best rung first
        sm_ax = roofline.plot(sm, roofline.ceilings(sm["gpu"].iloc[0]), title="recorded: softmax 4096x4096 fp32"
                              + plots.provenance(sm) + " (its ceilings)")
        display(lesson.fold_figure(sm_ax, "recorded instead: the softmax ladder on the roofline "
                                          "(open after notebook 04's prediction of its best rung)"))

# %% [markdown]
# The ridge point (where the slanted memory roof meets the flat compute roof) sits at tens of
# FLOP/byte on current GPUs; saxpy's 1/6 FLOP/byte is far to its left, so only bandwidth
# matters, and the best a saxpy can do is the copy bandwidth times 1/6 FLOP/byte.
#
# ## 8 · What the compiler made of it
#
# The anatomy view compiles each rung for a target GPU (`cc`) with no GPU present, as Numba builds a launch (NVVM → LTO-IR,
# nvJitLink -lto → cubin) and reads back registers, shared memory, spills, theoretical occupancy and
# the SASS instruction mix.  The diff shows what one step of the ladder changed.

# %%
reports = {v.rung: anatomy.inspect(v, problem, cc=cc) for v in saxpy.LADDER[1:]}
display(reports[1])
display(anatomy.diff(reports[1], reports[3]))
lesson.source_diff(saxpy.LADDER[2], saxpy.LADDER[3], problem)

# %% [markdown]
# ## 9 · Recorded GPU results
#
# Measurements recorded on real GPUs (each with GPU, driver, package versions, commit, time,
# timer settings and raw samples) are the only speeds this notebook plots.

# %%
if recorded.empty:
    print("No saxpy records in data/results/ yet (only the timer check's times, data/timer/). Run this "
          "notebook on a GPU (`make run` picks the gpu profile) to record them.")
    plots.ladder(table, metric="gbps", title="saxpy ladder")   # draws a labelled placeholder
else:
    cols = ["gpu", "problem", "label", "gbps", "median_s", "n_samples", "commit", "utc"]
    display(recorded[[c for c in cols if c in recorded]])
    plots.ladder(recorded, metric="gbps", title="saxpy ladder (recorded)")

# %% [markdown]
# ## 10 · Slower, or noise?  Comparing two sets of records
#
# A change to a kernel is judged against a baseline, as library teams do (NVBench's
# `nvbench_compare.py` is the model here): per rung, both medians, their ratio, an interval for
# the ratio from the raw samples (a bootstrap: resample each side's samples, take the ratio of
# the medians, keep the middle 95%), and a verdict: **slower** or **faster** only when the whole
# interval lies on one side of 1 and the change exceeds 2%, else **same within noise**.
# `perfkit compare BASE NEW` does it from the command line (a commit, a GPU, a date, a time range
# or a folder of records on each side; exit status 1 when a rung is slower by more than 5%).
#
# The H100 records of 2026-11-23 hold the rmsnorm rungs twice, run a few minutes apart on the
# same commit: a comparison where nothing changed but the moment.

# %%
from perfkit import compare

# None, and a sentence, where this copy of data/results/ lacks those records
c = lesson.comparison("gpu=h100,before=2026-11-23T10:24", "gpu=h100,commit=7c7b2e0,after=2026-11-23T10:24")
if c is not None:
    # both sides' medians, folded: they are times of rungs whose speed later notebooks ask for first
    display(lesson.fold(str(c), summary=f"both runs' medians per rung and their ratio ({len(c.table)} pairs)"))
    compare.plot(c)
    plt.show()
    for word in ("slower", "faster", "same within noise"):
        g = c.table[c.table.verdict == word]
        if len(g):
            print(f"{word}: {len(g)} ({', '.join(g.variant + ' x' + g.ratio.round(2).astype(str))})")
    print("kernel code between the two sides:", ", ".join(sorted(set(c.table.code))))

# %% [markdown]
# How to read it.  The code was the same (`code` says so), yet several rungs came out slower or
# faster on the second run (the lines above say which, and by how much), with intervals far from
# 1: this is the machine and the timer, not the kernel.  The interval only knows the spread
# *within* one run, and these runs differ by more than that.  Those records were taken with the
# first timer, before the spin kernel, whose window held part of the host's launch (section 1).
#
# The same comparison with today's timer: the H100 records of 2026-11-26 (commit 6bbc424) hold the
# rungs of the softmax, layernorm (forward and backward) and batchnorm ladders twice, run a few
# minutes apart.  Predict first: will today's timer agree with itself better, and by how much?

# %%
today_timer = lesson.comparison("gpu=h100,commit=6bbc424,after=2026-11-26T15:28,before=2026-11-26T15:34",
                                "gpu=h100,commit=6bbc424,after=2026-11-26T15:34")
lines = []  # the answer, folded with its table (the prompt above asks for it)
for name, x in (("the first timer (7c7b2e0, 2026-11-23)", c), ("today's timer (6bbc424, 2026-11-26)", today_timer)):
    if x is None:  # not in this copy of data/results/ (said above)
        continue
    t = x.table[x.table.code == "same"]
    beyond = int(((t.ratio - 1).abs() > compare.FAIL_ABOVE).sum())
    failed = int(((t.verdict == "slower") & (t.ratio > 1 + compare.FAIL_ABOVE)).sum())  # as Comparison.failed
    lines.append(lesson.paragraph(
        f"{name}: {len(t)} rungs of the same code measured twice, ratio {t.ratio.min():.3f} to {t.ratio.max():.3f}; "
        f"{beyond} apart by more than {compare.FAIL_ABOVE:.0%} either way, {failed} of them slower beyond noise: "
        "what a regression gate (perfkit compare's exit status) fails on"))
if lines:
    tab = ([today_timer.table[["op", "variant", "base_median_s", "new_median_s", "ratio", "ci_low", "ci_high", "verdict",
                               "code"]].round(6)] if today_timer is not None else [])
    display(lesson.fold(*lines, *tab, summary="today's timer: the same rungs measured twice (open once you have predicted)"))

# %% [markdown]
# A verdict is only as good as its baseline: a regression gate can trust a timer whose repeated
# runs of unchanged code agree well inside the gate's threshold (the folded line above with none apart
# by more), and only runs taken the same way (same machine, clocks, timer).  Repeat a run that
# says "slower" before believing it.

# %% [markdown]
# ### Across GPUs: the H100 and the H200
#
# The same ladders are recorded on more than one GPU (`data/results/<gpu>/`; the cell below lists
# each GPU's runs, from the records).  Across two machines the noise of one says nothing about the other, so there is no
# verdict, only ratios. Where a rung's kernel code is the same on both sides (`code` is `same`),
# the ratio is the machines' difference alone.  Per `data/devices.yaml` the H200 has the H100 SXM's
# SM count and FP32 rate with faster memory: a rung bound by arithmetic or latency should take
# about as long; one bound by DRAM bandwidth should shrink by the ratio of the two bandwidths if
# both runs reach the same share of their ceiling.  A ratio below that says the H100 run reached a
# smaller share of its ceiling than the H200 run.  Each side takes its newest record of a rung,
# timed the same way (`tools/record_gpu.py`, the timer's spin kernel), but on two machines on two
# occasions, and the comparison above found two runs on one machine apart by more than their
# noise.  Read the ratios below as a lead, not a verdict.

# %%
from perfkit import specs

print(lesson.runs_sentence(sorted(set(results.load()["op"].dropna()))))  # each GPU's runs, from the records
h100, h200 = specs.get("h100-sxm"), specs.get("h200")
print(f"published: SMs {h100.sm_count} vs {h200.sm_count}, FP32 {h100.fp32_flops / 1e12:.1f} vs "
      f"{h200.fp32_flops / 1e12:.1f} TFLOP/s, DRAM {h100.dram_bw / 1e12:.2f} vs {h200.dram_bw / 1e12:.2f} TB/s "
      f"(a DRAM-bound kernel at the same share of each: x{h100.dram_bw / h200.dram_bw:.2f})")
x = lesson.comparison("gpu=h100", "gpu=h200")  # None, and a sentence, where one GPU has no records here
same = x.table[x.table.code == "same"].copy() if x is not None else pd.DataFrame()
if len(same):
    same["metric"] = same.op.map(lesson.metric_for)
    same["H100 us"], same["H200 us"] = same.base_median_s * 1e6, same.new_median_s * 1e6
    # folded: each rung's time on each GPU answers the predictions of notebooks 02-04
    display(lesson.fold(same[["op", "problem", "variant", "H100 us", "H200 us", "ratio"]].round(3).reset_index(drop=True),
                        summary=f"the {len(same)} rungs' medians on both GPUs and their ratio (open after the "
                                "ladders' predictions in notebooks 02-04)"))
    for metric, g in same.groupby("metric"):
        # a rung recorded at several problems is named with its problem (lesson.problem_words)
        many = g.groupby(["op", "variant"])["problem"].transform("nunique") > 1
        words = [lesson.problem_words(p, among=g.problem[(g.op == o) & (g.variant == v)])
                 for p, o, v in zip(g.problem, g.op, g.variant)]
        who = g.op + " " + g.variant + np.where(many, " (" + pd.Series(words, index=g.index) + ")", "")
        print(f"{metric}: same code on both, ratio x{g.ratio.min():.2f} to x{g.ratio.max():.2f} "
              f"({', '.join(who + ' x' + g.ratio.map('{:.2f}'.format))})")
elif x is not None:
    print("No rung has records of the same kernel code on both GPUs here: no ratio is the machines' alone.")

# %% [markdown]
# ## 11 · Many GPUs: the same sweep on a cluster
#
# A team keeps a baseline for every GPU kind it ships on, so a sweep outgrows one machine.
# `perfkit record --cluster SPEC --kinds A,B` hands each unit of the plan (the units `perfkit
# record --list` shows) to a [Dask](https://distributed.dask.org) cluster, once per GPU kind:
# Dask routes a unit to a worker that advertises that kind, reruns it once if its worker dies,
# and this process writes every record as it comes home, under a content key, so a repeated unit
# never duplicates one and a second call measures only what is missing.  The unit itself runs as
# on one machine: a child process in its own process group, capped, killed with everything it
# started at its cap, and killed too if its worker dies.  `SPEC` is `local-sim:N` here (N workers
# on the simulator: the rehearsal, records marked simulated), `local-cuda` on a multi-GPU node,
# `slurm:kind=h100-sxm,jobs=4,...` or `k8s:NAME` for a fleet; `docs/RECORDING.md` has the recipes.
#
# Below, two ops units at tiny shapes on two simulator workers (`perfkit[cluster]` installs Dask).
# At a terminal the command also prints the link to Dask's dashboard, which works while the cluster
# lives; here the cluster ends with the cell, so the link is left out.

# %%
import importlib.util
import tempfile

from perfkit.record import command

if importlib.util.find_spec("distributed") is None:
    print("Dask distributed is not installed here: pip install 'perfkit[cluster]' to run this section")
else:
    fleet_out = Path(tempfile.mkdtemp(prefix="perfkit-fleet-"))
    argv = ["--rehearse", "--cluster", cluster_spec, "--kinds", "sim", "--parts", "ops", "--ops", ",".join(cluster_ops),
            "--max-rungs", "2", "--out", str(fleet_out)]
    print("perfkit record " + " ".join(argv[:-1]) + " OUT")
    fleet_rc = command.main(argv)
    display(pd.read_csv(fleet_out / "fleet_summary.csv"))
    gathered = [json.loads(p.read_text()) for p in sorted((fleet_out / "results").glob("*/*/*.json"))]
    display(pd.DataFrame([{"op": r["op"], "rung": r["label"], "problem": r["problem"], "checked": r["check_ok"],
                           "simulated": r["simulated"]} for r in gathered]))
    print(f"exit status {fleet_rc}; {len(gathered)} records gathered from the workers (simulated: a time taken "
          "in the simulator means nothing, so none is shown)")

# %% [markdown]
# ## What to take away
#
# * Time GPU work with events on the stream, after a warm-up, with a cold L2, until the median is
#   known to the precision you need, and keep the raw samples.
# * A launch costs microseconds: a kernel shorter than that is measuring the launch.
# * Check before you time.  A fast wrong kernel is worth nothing; NaN-poisoned outputs catch the
#   elements a kernel forgot.
# * Compare with a *measured* ceiling: it is what is attainable on this device.

# %% [markdown]
# ## Exercises
#
# Your turn.  Each exercise gives a skeleton to complete in the cell below it; `grade(...)` runs
# your answer (in the simulator here, on the GPU when there is one) against the float64
# reference at awkward sizes with outputs poisoned with NaN, then compiles it for an H100 and
# checks what the anatomy shows (registers, local memory, 16-byte loads, occupancy).  It never
# raises: a failed check says which size failed, where the first wrong element is, or which
# property is missing.  `show(name)` prints a task in full.  Reference solutions live apart, in
# `perfkit/exercises/solutions/`: try first.  (`exercise_reference = True` grades those instead,
# for CI.)

# %%
from perfkit.exercises import grade, show, load4
from numba import cuda

# %% [markdown]
# ### Exercise 01.grid_stride · a grid-stride saxpy
#
# The grader launches your kernel with a *fixed* grid of 3 blocks of 64 threads, whatever `n` is
# (up to 1000 here).  The skeleton is rung 1 (one element per thread): make every thread stride
# through the array with step `cuda.gridsize(1)`, as rung 2 does.

# %%
@cuda.jit
def saxpy_grid_stride(out, x, y, alpha, n):
    i = cuda.grid(1)
    if i < n:  # FILL ME IN: a loop over i, i + stride, ... instead of one element
        out[i] = alpha * x[i] + y[i]


grade("01.grid_stride", saxpy_grid_stride, reference=exercise_reference)

# %% [markdown]
# ### Exercise 01.launch · choose the launch
#
# Pick `block` (threads per block) and `blocks_per_sm` for the grid-stride rung so that, on an
# H100 (132 SMs, 64 resident warps and 32 resident blocks per SM, 64 K registers), every block is
# whole warps, the SM is fully occupied, and the grid is exactly one wave of resident blocks.
# The grader compiles the kernel for sm_90a to learn its registers per thread.

# %%
launch = dict(block=100, blocks_per_sm=4)  # FILL ME IN

grade("01.launch", launch, reference=exercise_reference)

# %% [markdown]
# ### Exercise 01.vec_copy · a copy with 16-byte loads
#
# Copy a float32 `(rows, cols)` array, `cols` a multiple of 4, one thread per 4 consecutive
# elements of a row.  Read the four with `load4(src, r, c)`: one 128-bit load (`LDG.E.128` in
# SASS), which Numba cannot spell otherwise.  The grader checks the SASS holds 16-byte loads and
# no 4-byte ones.

# %%
@cuda.jit
def copy4(dst, src, rows, cols):
    t = cuda.grid(1)
    per_row = cols // 4
    if t < rows * per_row:
        r = t // per_row
        c = (t % per_row) * 4
        pass  # FILL ME IN (5 lines): one load4 of src[r, c:c + 4], four stores into dst


grade("01.vec_copy", copy4, reference=exercise_reference)

# %% [markdown]
# ### Exercise 01.predict_saxpy · predict a time from bytes
#
# Before any GPU runs it: how long does saxpy's grid-stride rung take at n = 2**26 (float32) on an
# H100 SXM?  Count the bytes it moves, divide by the bandwidth (`perfkit.specs.get("h100-sxm")`),
# write the number down, then grade it: the grader compares it with the kernel time Nsight
# Compute measured on an H100 (`data/ncu/`).

# %%
my_prediction = None  # e.g. {"us": 123.0}
grade("01.predict_saxpy", my_prediction, reference=exercise_reference)
