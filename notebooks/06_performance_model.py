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
# `data/devices.yaml` (which GPU would this kernel like, and why), and (3) the check against the
# H100 measurements in `data/results/`. **Every time here is a model prediction or a recorded
# H100 measurement; nothing is timed in this notebook.**

# %% tags=["parameters"]
# Parameters (papermill overrides these; profiles in notebooks/profiles.yaml)
what_if_op = "gemm"               # op module under perfkit.kernels, e.g. gemm, saxpy, norm.softmax
what_if_rung = "double_buffer"    # rung name
what_if_size = {"m": 4096, "n": 4096, "k": 4096}  # problem fields
validate_ops = []                 # empty: every recorded op
validate_problems = []            # empty: every recorded problem
use_banks = True                  # simulate shared-memory bank conflicts (slow the first time)

# %%
import importlib

import matplotlib.pyplot as plt
import pandas as pd

import perfkit  # noqa: F401  (chooses the backend before numba)
from perfkit import model

mod = importlib.import_module(f"perfkit.kernels.{what_if_op}")
variant = next(v for v in mod.LADDER if v.name == what_if_rung)
problem = variant.example(mod.Problem(**what_if_size))
est = model.estimate(variant, problem, "h100-sxm", banks=use_banks)
print(est)

# %% [markdown]
# ## The legs of one estimate
#
# Each leg is the time one resource would need if nothing else limited the kernel; the estimate
# combines them (`max` plus a fitted part of the second largest; the module docstring states
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
# ## What if it ran on another GPU?
#
# The same rung, compiled for each device's compute capability, with that device's SM count,
# clock, bandwidth and rates. The stacked bars show the legs (their sum is not the time: the
# dot is the estimate).

# %%
wi = model.what_if(variant, problem, banks=use_banks)
display_cols = ["gpu", "seconds", "bound"] + [c for c in wi.columns if c.startswith("leg_")]
print(wi[display_cols].assign(seconds=lambda d: d["seconds"] * 1e6).rename(columns={"seconds": "model_us"})
      .round(1).to_string(index=False))
model.plot_what_if(wi.dropna(subset=["seconds"]), title=f"{variant.label}: which GPU would it like, and why (model)")
plt.show()

# %% [markdown]
# ## Checked against the H100 measurements
#
# `perfkit model validate` estimates every recorded (problem, rung) and prints the table below,
# then its summary line: the median absolute error, the worst ratio predicted / measured and how
# many rungs are within 2x (oracles and peers, library calls the model only bounds with a
# roofline, are listed but left out of the line). The per-level table compares the model's
# counts with Nsight Compute's where the shared ncu table has the rung.

# %%
table, line, levels = model.validate("h100-sxm", ops=validate_ops or None, problems=validate_problems or None,
                                     banks=use_banks)
show = table.drop(columns=[c for c in table.columns if c.startswith("_")])
show = show.assign(measured_us=show["measured_s"] * 1e6, predicted_us=show["predicted_s"] * 1e6)
print(show[["op", "problem", "rung", "measured_us", "predicted_us", "ratio", "bound"]].round(2).to_string(index=False))
print(line)

# %%
if len(levels):
    print(levels.pivot_table(index=["op", "rung"], columns="level", values="ratio").round(2).to_string())
else:
    print("no Nsight Compute table found next to this checkout (shared/measurements/*/ncu_metrics_all_rungs.csv)")

# %% [markdown]
# Where the model misses, the per-launch details in `Estimate.launches` say which leg it
# believed and why (trip rules, bank degree, waves). The known weak spot: kernels with one
# block per SM and few warps (the GEMM blocktile and warptile rungs, the tensor-core rung),
# whose time depends on stalls (scoreboard waits, barrier phases) that static counts see only
# roughly.
