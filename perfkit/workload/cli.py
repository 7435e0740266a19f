"""``perfkit workload NETWORK... [--cluster SPEC] [--batch B] [--seq S] [--mode infer|train] [--dtype D] [--attention eager|sdpa]
[--gpu KEY] [--out FILE.csv] [--ladders off|top|best] [--tf32 torch|on|off] [--measure]``

Prints the per-class table of one network's step on a device (class, kernels, GFLOP, GB,
predicted ms, share of the step, share of the FLOPs, step speedup if that class were 2x faster)
and, with ``--out``, writes the per-op table as CSV.  ``--measure`` profiles the same step on
the GPU (torch.profiler) and records it; without a GPU it says why and exits 3.  Several networks
are characterized one after the other, or with ``--cluster SPEC`` (:mod:`perfkit.cluster`) one a
task on the cluster's CPU workers, the tables printed here in the order given (``--out`` then
writes ``FILE-<network>.csv``).
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
    ap.add_argument("network", nargs="+", help=f"one or more of: {', '.join(NETWORKS)}")
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
    ap.add_argument("--cluster", default=None, metavar="SPEC",
                    help="one network a task on a Dask cluster's CPU workers (perfkit.cluster; perfkit[cluster])")
    return ap


def report(network: str, args) -> tuple[int, str, object, dict]:
    """One network's table as text, its per-op frame (None on a bad input) and the step it traced
    (network, batch, seq, mode, dtype): a cluster task."""
    from . import WorkloadError, by_class, characterize, format_table, predict
    from .. import specs

    tf32 = {"torch": None, "on": True, "off": False}[args.tf32]
    try:
        spec = specs.get(args.gpu)
        w = characterize(network, batch=args.batch, seq=args.seq, mode=args.mode, dtype=args.dtype,
                         attention=args.attention)
    except (WorkloadError, ValueError) as exc:  # SpecError is a ValueError
        return 2, f"perfkit workload: {exc}", None, {}
    ops = predict(w, spec.key, ladders=args.ladders, tf32=tf32)
    table = by_class(ops)
    kernels = int((ops["class"] != "view").sum())
    methods = ops.loc[ops["class"] != "view", "method"].value_counts()
    total_ms = table["predicted_ms"].sum()
    top = table.sort_values("share", ascending=False).iloc[0]
    text = "\n".join([
        f"{w.label} on {spec.name} ({spec.key}): {w.params:,} parameters, {len(ops)} aten ops "
        f"({kernels} kernels, {len(ops) - kernels} views/allocations), traced in {w.trace_s:.2f} s",
        format_table(table),
        f"predicted step: {total_ms:.3f} ms (a model prediction: "
        + ", ".join(f"{n} ops by {m}" for m, n in methods.items()) + ")",
        f"Amdahl: {top['class']} takes {top['share']:.1%} of the step; 2x faster kernels there make the step "
        f"{top['step_speedup_2x']:.2f}x faster (notebook {top['notebook']})"])
    step = {"network": w.network, "batch": w.batch, "seq": w.seq, "mode": w.mode, "dtype": w.dtype}
    return 0, text, ops, step


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    nets = args.network
    if args.cluster and args.measure:
        print("perfkit workload: --measure profiles on this machine's GPU, not on a cluster", file=sys.stderr)
        return 2
    if args.cluster:
        from .. import cluster

        with cluster.connect(args.cluster) as client:
            futures = [client.submit(report, n, args, resources=cluster.CPU_RESOURCES, pure=False) for n in nets]
            answers = client.gather(futures)
    else:
        answers = [report(n, args) for n in nets]
    rc = 0
    for net, (code, text, ops, _) in zip(nets, answers):
        if code:
            print(text, file=sys.stderr)
            rc = max(rc, code)
            continue
        print(text)
        if args.out:
            path = Path(args.out)
            if len(nets) > 1:
                path = path.with_name(f"{path.stem}-{net}{path.suffix}")
            path.parent.mkdir(parents=True, exist_ok=True)
            ops.to_csv(path, index=False)
            print(f"per-op table ({len(ops)} rows) written to {path}")
    if rc or not args.measure:
        return rc
    from . import measure
    from .. import specs

    reason = measure.unavailable()
    if reason:
        print(f"perfkit workload: --measure skipped: {reason}", file=sys.stderr)
        return 3
    spec = specs.get(args.gpu)
    for _, _, _, w in answers:
        res = measure.profile(w["network"], batch=w["batch"], seq=w["seq"], mode=w["mode"], dtype=w["dtype"],
                              gpu=spec.key, attention=args.attention)
        print(res["per_class"].to_string(index=False))
        print(f"measured kernels {res['kernel_ms']:.3f} ms/step, predicted {res['predicted_ms']:.3f} ms; "
              f"recorded: {res['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
