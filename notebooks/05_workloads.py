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
# # 05 · Which kernels matter: where a network's step spends its time
#
# Notebooks 01-04 make single kernels fast.  A performance engineer handed a network asks first
# *which* kernels to make fast: where does a training step of ResNet-50, BERT or GPT-2 spend its
# time on a given GPU, and what would a 2x better kernel of each kind buy the whole step?
#
# You will learn to
#
# 1. **trace** every aten operation of a step (forward and backward) with its shapes, on PyTorch's
#    `meta` device: no weights downloaded, no memory allocated, no GPU;
# 2. **count** each op's FLOPs and its minimal DRAM bytes (inputs read once, outputs written once),
#    and check the FLOP counts against the published figures;
# 3. **class** the ops (gemm, conv, attention, normalization, softmax, elementwise, reduction, data
#    movement) and **predict** each one's time on a device of `data/devices.yaml`;
# 4. read the **Amdahl view**: a class's share of the step bounds what any kernel of that class can
#    buy.
#
# The point to take away: normalization and elementwise ops carry a tiny share of the FLOPs and a
# large share of the time.  Ivanov et al. ("Data Movement Is All You Need", MLSys 2021) measured
# BERT training in PyTorch and found tensor contractions at 99.80% of the FLOPs but 61.0% of the
# runtime, statistical normalizations (softmax, LayerNorm) at 0.17% of the FLOPs and 25.5% of the
# runtime, and elementwise ops at 0.03% and 13.5%.
#
# **Everything timed in this notebook is a model prediction** (the roofline bound of each op, or
# `perfkit.model.estimate` of a ladder's best rung where a perfkit ladder stands for the op), unless
# a section says it shows a measurement recorded on a GPU.

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
exercise_reference = False    # True: the exercises grade the reference answers, for CI
networks = ["resnet50", "bert-base", "gpt2"]
batch = 8                     # images (ResNet-50) or sequences (BERT, GPT-2) per step
bert_seq = 128                # BERT-base sequence length (128 or 512 in the papers)
gpt2_seq = 1024               # GPT-2 small context
mode = "train"                # "train": forward + backward; "infer": forward only
dtype = "bfloat16"            # float32, float16 or bfloat16 (mixed-precision training runs GEMMs in 16 bits)
gpu = "h100-sxm"              # device of data/devices.yaml for the predictions
what_if_gpus = ["h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "l40s", "rtx-4090", "b200"]
ladders = "off"               # "top"/"best": perfkit.model.estimate of the ladder rung standing for an op (compiles rungs: slow)
measure = False               # on a GPU: profile each step with torch.profiler and record it

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

import perfkit                      # decides GPU or simulator before numba.cuda loads
from perfkit import backend, lesson, results, specs, workload
from perfkit.workload import measure as wmeasure

# (the backend is announced once, on import)
SEQ = {"resnet50": None, "bert-base": bert_seq, "gpt2": gpt2_seq}

# %% [markdown]
# ## 1 · Tracing a step on the meta device
#
# A tensor on the `meta` device has a shape, strides and a dtype but no storage: every op runs its
# shape function only.  A `TorchDispatchMode` sees each aten op *after* autograd has expanded the
# Python model into ops, so the backward pass shows up as its own ops (`convolution_backward`,
# `native_layer_norm_backward`, two `mm` per `addmm`...).  For each op perfkit keeps:
#
# * **FLOPs**: `torch.utils.flop_counter`'s formula where it has one (matmuls, convolutions,
#   attention); perfkit's own count where it leaves an op at zero: normalizations and softmax as the
#   ladders of notebook 04 count them (LayerNorm 8 per element, softmax 5), one per output element
#   for elementwise ops, one per input element for reductions;
# * **bytes**: every distinct input element read once, every output element written once (a
#   broadcast operand counts its distinct elements; views, allocations and `detach` move nothing);
# * the **class**, and the perfkit **Problem** that stands for it where a ladder exists
#   (`gemm.Problem(m, n, k)` per matrix of a batched matmul, `norm.layernorm.Problem(rows, cols)`...).
#
# The networks are built from their definitions (`perfkit/workload/networks.py`): torchvision's
# ResNet-50 v1.5, and BERT-base and GPT-2 small as `transformers` runs them with eager attention
# (the attention matmuls, scale, mask, softmax and dropout as separate kernels).  Dropout is traced
# as the single fused kernel a GPU runs.

# %%
traced = {}
for net in networks:
    t0 = time.perf_counter()
    traced[net] = workload.characterize(net, batch=batch, seq=SEQ[net], mode=mode, dtype=dtype)
    w = traced[net]
    n_kernels = sum(r.cls != "view" for r in w.records)
    print(f"{w.label}: {w.params:,} parameters, {len(w.records)} aten ops ({n_kernels} kernels), "
          f"characterized in {time.perf_counter() - t0:.1f} s")
# the first kernels of the first network's step, as perfkit keeps them (the scalar bookkeeping,
# BatchNorm's int64 num_batches_tracked += 1, left out: section 7 counts it)
first = traced[networks[0]].table()
first = first[(first["class"] != "view") & first["dtype"].str.contains("float", na=False)
              & (first["shapes"].str.strip() != "()")]
notes = sorted(set(first["note"].fillna("")) - {""})
print(f"the first 8 of {traced[networks[0]].label}'s kernels" + "".join(f"; {n}" for n in notes) + ":")
(first.head(8).assign(MFLOP=first["flops"] / 1e6, MB=first["bytes"] / 1e6)
 [["phase", "op", "class", "shapes", "MFLOP", "MB", "problem"]]
 .style.format({"MFLOP": "{:.1f}", "MB": "{:.2f}"}).hide(axis="index"))

# %% [markdown]
# ## 2 · FLOP counts against the published figures
#
# * **ResNet-50** at 224x224: 4.1 GMAC per image, i.e. 8.2 GFLOP (torchvision lists 4.09 "GFLOPS",
#   which are multiply-accumulates; He et al. give 3.8e9 for the original v1).
# * **Transformers** (Kaplan et al. 2020, Table 1): each weight of a matmul costs 2 FLOPs per token,
#   and eager attention computes the full $S \times S$ score matrix, $QK^\top$ and $AV$ being
#   $2 \cdot S \cdot d$ FLOPs each per token and layer:
#
#   $$F_\text{forward} = 2 \, N \, T + 4 \, L \, S \, d \, T, \qquad T = B \cdot S \text{ tokens}$$
#
#   with $N$ the weights that multiply activations.  GPT-2 small: $N$ = all 124,439,808 parameters
#   (its LM head *is* the token embedding, $2 d V$ per token; position embeddings and LayerNorm
#   weights, 0.6%, are not matmuls).  BERT-base: $N$ = the 12 encoder layers, $12 (4 d^2 + 8 d^2)$
#   = 84.9 M (its 23.8 M embedding weights are lookups), plus the pooler, $2 d^2$ per sequence.
#   $L = 12$, $d = 768$.
#
# The trace counts the forward pass of each network (inference mode, same batch) with
# `flop_counter`'s formulas; the published figure is computed from the formula above.

# %%
rows = []
for net in networks:
    w = workload.characterize(net, batch=batch, seq=SEQ[net], mode="infer", dtype=dtype)
    pub = workload.published_flops(net, batch=batch, seq=SEQ[net])
    rows.append({"network": w.label, "traced GFLOP (matmuls)": w.matmul_flops() / 1e9,
                 "published GFLOP": pub["flops"] / 1e9, "error": w.matmul_flops() / pub["flops"] - 1,
                 "formula": pub["formula"]})
pd.DataFrame(rows).style.format({"traced GFLOP (matmuls)": "{:.1f}", "published GFLOP": "{:.1f}",
                                 "error": "{:+.2%}"})

# %% [markdown]
# ## 3 · The three networks side by side (predicted, one step)
#
# Each op's predicted time on the chosen GPU: the roofline bound, the slower of `flops / peak` and
# `bytes / DRAM bandwidth` (published figures: tensor-core rates for 16-bit matmuls and
# convolutions, the FP32 rate for everything else) with a floor of a couple of microseconds per
# kernel.  With `ladders = "top"` (or `"best"`), ops that a perfkit ladder stands for are timed
# instead by `perfkit.model.estimate` of the ladder's top rung (or its fastest): what perfkit's own
# kernel would take, GPU time only.  Each estimate compiles a rung, so that is slow on a laptop.  Kernels run one after another on one stream, so the step is
# their sum and a class's **share** is its time over the step.  **step_speedup_2x** is Amdahl's
# law: the step's speedup if that class's kernels were twice as fast, $1 / (1 - s + s/2)$.
#
# **Predict before you open the tables** (exercise 05.predict_share grades it at the end): which op
# class takes the largest share of ResNet-50's training step?  Of BERT's?  Count the FLOPs of a
# convolution against the bytes of a batch norm before you look.

# %%
ops = {net: traced[net].predict(gpu, ladders=ladders) for net in networks}
tables = {net: workload.by_class(ops[net]) for net in networks}
for net in networks:
    used = ops[net].loc[ops[net]["class"] != "view", "method"].value_counts()
    display(lesson.fold(workload.format_table(tables[net]),
                        "methods: " + ", ".join(f"{n} ops by {m}" for m, n in used.items()),
                        summary=f"{traced[net].label} on {specs.get(gpu).name}, predicted per class "
                                "(open once you have predicted)"))

# %% [markdown]
# ## 4 · FLOPs are not time
#
# Per class, its share of the FLOPs (light) beside its share of the predicted time (dark).  The
# matmul classes hold nearly all FLOPs; the memory-bound classes, with a few FLOPs per byte, take
# a share of the time out of all proportion to their FLOPs.

# %%
classes = [c for c in workload.CLASSES if c != "view"]
fig, axes = plt.subplots(1, len(networks), figsize=(5 * len(networks), 4), sharey=True)
axes = np.atleast_1d(axes)
for ax, net in zip(axes, networks):
    t = tables[net].set_index("class")[["flop_share", "share"]].reindex(classes).fillna(0.0)
    x = np.arange(len(classes))
    ax.bar(x - 0.2, 100 * t["flop_share"], 0.4, label="share of FLOPs", color="#9ecae1")
    ax.bar(x + 0.2, 100 * t["share"], 0.4, label="share of time (predicted)", color="#08519c")
    ax.set_xticks(x, classes, rotation=45, ha="right")
    ax.set_title(traced[net].label, fontsize=9)
axes[0].set_ylabel("% of the step")
axes[0].legend()
fig.suptitle(f"FLOPs vs predicted time per op class, {specs.get(gpu).name} (model prediction)")
fig.tight_layout()
display(lesson.fold_figure(fig, "share of FLOPs against share of predicted time, per class (open once you have predicted)"))

# %% [markdown]
# ### BERT against Ivanov et al.
#
# Their measurement (PyTorch, BERT-large-like encoder layer, mixed precision, V100) put statistical
# normalizations (softmax + LayerNorm) at 0.17% of the FLOPs and 25.5% of the runtime.  The same
# classes in our BERT-base prediction, on the GPU above:

# %%
if "bert-base" in tables:
    t = tables["bert-base"].set_index("class")
    norm = [c for c in ("normalization", "softmax") if c in t.index]
    ew = [c for c in ("elementwise",) if c in t.index]
    mm = [c for c in ("gemm", "attention") if c in t.index]
    display(lesson.fold(pd.DataFrame({
        "class (Ivanov et al.)": ["tensor contractions", "statistical normalizations", "element-wise"],
        "their FLOP share": ["99.80%", "0.17%", "0.03%"], "their runtime share (measured)": ["61.0%", "25.5%", "13.5%"],
        "our FLOP share": [f"{t.loc[c, 'flop_share'].sum():.2%}" for c in (mm, norm, ew)],
        "our time share (predicted)": [f"{t.loc[c, 'share'].sum():.1%}" for c in (mm, norm, ew)],
    }), summary="BERT-base's shares beside Ivanov et al.'s (open once you have predicted)"))
    display(Markdown(
        "Our FLOP shares agree in kind with theirs.  The time shares are a **model prediction** on a "
        "different GPU (a roofline bound per op, which assumes every memory-bound kernel streams at the full "
        "DRAM bandwidth and every matmul runs at its peak); they are not a measurement, and the two GPUs' "
        "ratios of FLOP rate to bandwidth differ, so the split differs too.  The data movement class "
        "(the `clone` of eager attention's head transposes, embedding gathers) is counted apart here."))

# %% [markdown]
# ## 5 · The Amdahl view: what would a 2x faster kernel buy?

# %%
amdahl = pd.DataFrame({net: tables[net].set_index("class")["step_speedup_2x"] for net in networks}).reindex(classes)
share = pd.DataFrame({net: tables[net].set_index("class")["share"] for net in networks}).reindex(classes)
display(lesson.fold(pd.concat({"share of step": share, "step speedup if 2x faster": amdahl}, axis=1)
                    .style.format("{:.3f}", na_rep="").format("{:.1%}", subset=["share of step"], na_rep=""),
                    summary="each class's share of the step and the step's speedup if it ran 2x faster "
                            "(open once you have predicted)"))

# %% [markdown]
# ### What a fused attention kernel buys
#
# Eager attention writes the $S \times S$ scores, reads them back to scale, mask, softmax and drop
# out, and keeps them for the backward pass: elementwise and softmax kernels over $B \cdot H \cdot
# S^2$ elements.  `F.scaled_dot_product_attention` (`attention="sdpa"`, what `transformers` runs by
# default today) does the same matmuls in one fused kernel (flash attention in 16 bits,
# memory-efficient attention in float32) that never writes the scores to DRAM.  Same FLOPs, far
# fewer bytes; predicted per class:

# %%
for net in [n for n in networks if n != "resnet50"]:
    fused = workload.characterize(net, batch=batch, seq=SEQ[net], mode=mode, dtype=dtype, attention="sdpa")
    both = pd.DataFrame({"eager ms": tables[net].set_index("class")["predicted_ms"],
                         "sdpa ms": workload.by_class(fused.predict(gpu, ladders=ladders)).set_index("class")["predicted_ms"]})
    both = both.reindex([c for c in classes if c in both.index]).fillna(0.0)
    both.loc["step"] = both.sum()
    display(Markdown(f"**{fused.label}** vs eager (predicted): the step "
                     f"{both.loc['step', 'eager ms'] / both.loc['step', 'sdpa ms']:.2f}x faster with the fused kernel"))
    display(lesson.fold(both.style.format("{:.3f}"), summary=f"{fused.label} vs eager, per class (predicted ms)"))

# %% [markdown]
# ## 6 · What if: the same steps on every device
#
# The same ops, predicted on each GPU of `data/devices.yaml`.  A device with more FLOP/s per byte
# of bandwidth (the ridge point of its roofline) makes the memory-bound classes a larger share.

# %%
gpus = [g for g in what_if_gpus if g in specs.names()]
fig, axes = plt.subplots(1, len(networks), figsize=(5 * len(networks), 4))
axes = np.atleast_1d(axes)
colors = dict(zip(classes, plt.cm.tab10.colors))
for ax, net in zip(axes, networks):
    cmp = workload.compare_devices(traced[net], gpus, ladders=ladders).drop(index="total")
    bottom = np.zeros(len(gpus))
    for c in cmp.index:
        ax.bar(gpus, cmp.loc[c].values, bottom=bottom, label=c, color=colors.get(c))
        bottom += cmp.loc[c].values
    ax.set_title(traced[net].label, fontsize=9)
    ax.set_ylabel("predicted ms per step")
    ax.tick_params(axis="x", rotation=45)
axes[-1].legend(fontsize=8)
fig.suptitle("Predicted step time per class across devices (model prediction)")
fig.tight_layout()
display(lesson.fold_figure(fig, "the predicted step per class on every device (open once you have predicted)"))

# %% [markdown]
# ## 7 · From a class to a kernel to read
#
# | class | the notebook that teaches its kernel |
# |---|---|
# | gemm | [02 · GEMM](02_gemm.ipynb): from a naive loop to tensor cores |
# | conv | [03 · Convolution](03_convolution.ipynb): direct, im2col and implicit GEMM |
# | attention | its parts: the matmuls ([02](02_gemm.ipynb)) and the softmax ([04](04_normalization.ipynb)) |
# | normalization, softmax | [04 · Normalization](04_normalization.ipynb): at the memory-bandwidth limit |
# | elementwise, reduction, data movement | [01 · Timing and roofline](01_timing_and_roofline.ipynb): the copy bandwidth is their ceiling |
#
# And the costliest op shapes of each network, with the ladder Problem that stands for each where
# one exists: these are the shapes worth sweeping in the ladder notebooks.

# %%
for net in networks:
    k = ops[net][ops[net]["class"] != "view"]
    # bookkeeping on scalars (BatchNorm's int64 num_batches_tracked += 1, once a layer) costs a launch
    # each but is no kernel worth a ladder: only ops on floating-point tensors are ranked
    tensor = k["dtype"].astype(str).str.contains("float") & (k["shapes"].astype(str).str.strip() != "()")
    if (~tensor).any():
        print(f"{traced[net].label}: {int((~tensor).sum())} scalar or integer ops left out "
              f"({', '.join(sorted(set(k.loc[~tensor, 'op'])))[:120]})")
    k = k[tensor]
    top = (k.groupby(["class", "op", "shapes", "problem"], dropna=False)
           .agg(n=("op", "size"), GFLOP=("flops", "sum"), predicted_ms=("predicted_s", "sum"))
           .sort_values("predicted_ms", ascending=False).head(8).reset_index())
    top["GFLOP"] /= 1e9
    top["predicted_ms"] *= 1e3
    display(lesson.fold(top.style.format({"GFLOP": "{:.3g}", "predicted_ms": "{:.3f}"}).hide(axis="index"),
                        summary=f"{traced[net].label}: the 8 costliest op shapes, predicted"))

# %% [markdown]
# ## 8 · Measured on a GPU
#
# On a GPU, `perfkit.workload.measure.profile` runs the same step with random weights, times each
# kernel with `torch.profiler` (charged to the aten op that launched it), and records the per-class
# times with their provenance under `data/results/`.  Here they sit beside the prediction.  In the
# simulator there is nothing to profile; recorded profiles, if any, are shown instead, each class's
# measured time beside the prediction the record stored and today's prediction of the same step.

# %%
reason = wmeasure.unavailable()
if measure and reason is None:
    for net in networks:
        res = wmeasure.profile(net, batch=batch, seq=SEQ[net], mode=mode, dtype=dtype, gpu=gpu)
        display(Markdown(f"**{res['workload']}**: measured kernels {res['kernel_ms']:.2f} ms per step, "
                         f"step wall time {np.median(res['step_ms']):.2f} ms, predicted {res['predicted_ms']:.2f} ms; "
                         f"recorded in `{res['path']}`"))
        display(res["per_class"])
else:
    print(f"not profiled here: {reason or 'measure=False'}")
    measured = lesson.measured_classes(results.load(op="workload"), {traced[n].label: tables[n] for n in networks})
    if measured.empty:
        print("No workload profile has been recorded on a GPU yet (data/results/ holds none): every time in "
              "this notebook is a model prediction, and no class share above has been checked against a "
              "measurement.  On a GPU, `measure=True` (the gpu profile) records one per network.")
    else:  # each recorded class: its measured ms beside the prediction then and today's
        display(lesson.fold(measured.style.format(precision=3, na_rep="—").hide(axis="index"),
                            summary="measured per class on real GPUs beside the predictions (open once you have predicted)"))

# %% [markdown]
# ## Exercise
#
# Write your prediction down before you grade it: the grader checks it against a record or
# the performance model and, when it is off, says what to reconsider (never the answer).

# %%
from perfkit.exercises import grade

# %% [markdown]
# ### Exercise 05.predict_share · where does ResNet-50's step go?
#
# You predicted this before opening the tables above: which op class takes the largest predicted share of
# ResNet-50's training step on an H100?  Graded against `perfkit.workload`'s prediction at this
# notebook's batch and dtype.

# %%
my_prediction = None  # e.g. {"class": "conv"}
grade("05.predict_share", my_prediction, reference=exercise_reference, batch=batch, dtype=dtype)
