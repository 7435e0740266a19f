"""``perfkit workload NETWORK [--batch B] [--seq S] [--mode infer|train] [--dtype D] [--attention eager|sdpa]
[--gpu KEY] [--out FILE.csv] [--ladders off|top|best] [--tf32 torch|on|off] [--measure]``

Prints the per-class table of one network's step on a device (class, kernels, GFLOP, GB,
predicted ms, share of the step, share of the FLOPs, step speedup if that class were 2x faster)
and, with ``--out``, writes the per-op table as CSV.  ``--measure`` profiles the same step on
the GPU (torch.profiler) and records it; without a GPU it says why and exits 3.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    from .networks import NETWORKS

    ap = argparse.ArgumentParser(prog="perfkit workload",
                                 description="where a network's step spends its time: per-op FLOPs, bytes, "
                                             "predicted time per op class (traced on the meta device)")
    ap.add_argument("network", help=f"one of: {', '.join(NETWORKS)}")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: the network's)")
    ap.add_argument("--seq", type=int, default=None, help="sequence length (bert-base: 128, gpt2: 1024)")
    ap.add_argument("--mode", default="infer", choices=["infer", "train"],
                    help="inference, or a training step (forward + backward)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--attention", default="eager", choices=["eager", "sdpa"],
                    help="transformers: eager attention (separate kernels) or one fused SDPA kernel")
    ap.add_argument("--gpu", default="h100-sxm", help="a device of data/devices.yaml (key or name)")
    ap.add_argument("--out", default=None, metavar="FILE.csv", help="write the per-op table as CSV")
    ap.add_argument("--ladders", default="off", choices=["off", "top", "best"],
                    help="time ops a perfkit ladder stands for by perfkit.model.estimate of its top rung or "
                         "of every rung (compiles each rung: seconds per unique problem); default: roofline")
    ap.add_argument("--tf32", default="torch", choices=["torch", "on", "off"],
                    help="float32 matmul/conv on TF32 tensor cores: torch's defaults (conv on, matmul off)")
    ap.add_argument("--measure", action="store_true", help="also profile the step on the GPU and record it")
    return ap


def main(argv: list[str] | None = None) -> int:
    from . import WorkloadError, by_class, characterize, format_table, predict
    from .. import specs

    args = parser().parse_args(argv)
    tf32 = {"torch": None, "on": True, "off": False}[args.tf32]
    try:
        spec = specs.get(args.gpu)
        w = characterize(args.network, batch=args.batch, seq=args.seq, mode=args.mode, dtype=args.dtype,
                         attention=args.attention)
    except (WorkloadError, ValueError) as exc:  # SpecError is a ValueError
        print(f"perfkit workload: {exc}", file=sys.stderr)
        return 2
    ops = predict(w, spec.key, ladders=args.ladders, tf32=tf32)
    table = by_class(ops)
    kernels = int((ops["class"] != "view").sum())
    methods = ops.loc[ops["class"] != "view", "method"].value_counts()
    print(f"{w.label} on {spec.name} ({spec.key}): {w.params:,} parameters, {len(ops)} aten ops "
          f"({kernels} kernels, {len(ops) - kernels} views/allocations), traced in {w.trace_s:.2f} s")
    print(format_table(table))
    total_ms = table["predicted_ms"].sum()
    top = table.sort_values("share", ascending=False).iloc[0]
    print(f"predicted step: {total_ms:.3f} ms (a model prediction: "
          + ", ".join(f"{n} ops by {m}" for m, n in methods.items()) + ")")
    print(f"Amdahl: {top['class']} takes {top['share']:.1%} of the step; 2x faster kernels there make the step "
          f"{top['step_speedup_2x']:.2f}x faster (notebook {top['notebook']})")
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        ops.to_csv(path, index=False)
        print(f"per-op table ({len(ops)} rows) written to {path}")
    if args.measure:
        from . import measure

        reason = measure.unavailable()
        if reason:
            print(f"perfkit workload: --measure skipped: {reason}", file=sys.stderr)
            return 3
        res = measure.profile(w.network, batch=w.batch, seq=w.seq, mode=w.mode, dtype=w.dtype, gpu=spec.key,
                              attention=args.attention)
        print(res["per_class"].to_string(index=False))
        print(f"measured kernels {res['kernel_ms']:.3f} ms/step, predicted {res['predicted_ms']:.3f} ms; "
              f"recorded: {res['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
