"""Record a GPU session's measurements through perfkit's own recorder.

On a machine with a GPU (for example the lent device machine), from the repository root:

    python tools/record_gpu.py --out "$OUT"            # ceilings, every ladder, do_bench comparison

It measures the roofline ceilings (copy bandwidth, FP32 FMA rate), sweeps every op ladder over
the op module's ``GPU_SWEEP`` problems (or its ``EXAMPLE_PROBLEM``) with its peers
(``perfkit.kernels.peers``: torch, Triton), records every result in
``data/results/`` (bench.sweep does that on a GPU), compares ``perfkit.timing.measure`` with
``triton.testing.do_bench`` on the same prepared kernels when Triton is installed, and writes
CSV tables and a log under ``--out``.  In the simulator it runs the same steps at tiny sizes
and records nothing (a dry run of the tool itself).
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perfkit  # noqa: E402  (chooses the backend first)
from perfkit import backend, bench, roofline, timing  # noqa: E402
from perfkit.kernels import peers  # noqa: E402


def ladders(only: list[str] | None):
    import perfkit.kernels as pk

    for info in pkgutil.walk_packages(pk.__path__, "perfkit.kernels."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name.endswith(".base"):
            continue
        mod = importlib.import_module(info.name)
        short = info.name.removeprefix("perfkit.kernels.")
        if getattr(mod, "LADDER", None) and (not only or short in only or short.split(".")[0] in only):
            yield short, mod


def problems_for(mod, tiny: bool):
    if tiny:
        return list(getattr(mod, "SIM_SWEEP", []))
    return list(getattr(mod, "GPU_SWEEP", [])) or [mod.EXAMPLE_PROBLEM]


def compare_with_do_bench(mod, problem, log) -> list[dict]:
    """measure() and triton.testing.do_bench on the same prepared rung."""
    try:
        from triton.testing import do_bench
    except Exception as exc:
        log(f"triton not available ({exc.__class__.__name__}); no do_bench comparison")
        return []
    rows = []
    for v in mod.LADDER:
        try:
            p = v.prepare(problem, problem.make_inputs(0))
            m = timing.measure(p, sync=p.synchronize)
            db = do_bench(p, warmup=25, rep=100, return_mode="median") / 1e3
            rows.append({"op": problem.op, "problem": problem.label, "variant": v.label,
                         "measure_median_s": m.median_s, "measure_n": m.n, "do_bench_median_s": db,
                         "ratio": m.median_s / db})
            log(f"  {v.label:22s} measure {m.median_s * 1e6:10.2f} us  do_bench {db * 1e6:10.2f} us")
        except Exception as exc:  # one rung failing must not stop the comparison
            log(f"  {v.label}: {exc.__class__.__name__}: {exc}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/record_gpu", help="folder for logs and CSV tables")
    ap.add_argument("--ops", default="", help="comma-separated op modules (default: all)")
    ap.add_argument("--no-ceilings", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "record_gpu.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    tiny = backend.is_simulator()
    log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {backend.describe()}")
    log(json.dumps(backend.device().as_dict(), default=str))
    if not args.no_ceilings:
        bw = roofline.copy_bandwidth(64 << 10 if tiny else None)
        fl = roofline.fp32_rate(8 if tiny else None)
        log(f"copy bandwidth: {bw['bytes_per_s'] / 1e9:.1f} GB/s  {bw['measurement']}  -> {bw['path']}")
        log(f"FP32 FMA rate : {fl['flops_per_s'] / 1e12:.2f} TFLOP/s  {fl['measurement']}  -> {fl['path']}")
    compare = []
    for name, mod in ladders([o for o in args.ops.split(",") if o]):
        probs = problems_for(mod, tiny)
        if not probs:
            log(f"{name}: no problems to sweep here")
            continue
        variants = mod.LADDER + peers.peers_for(probs[0].op)  # torch / Triton peers where there are any
        log(f"{name}: sweeping {len(variants)} rungs and peers x {len(probs)} problems")
        table = bench.sweep(probs, variants, progress=False)
        table.drop(columns=["config"], errors="ignore").to_csv(out / f"sweep_{name}.csv", index=False)
        for r in table.itertuples():
            rate = f"{r.tflops:8.2f} TFLOP/s {r.gbps:8.1f} GB/s" if r.tflops == r.tflops else "(simulated)"
            log(f"  {r.problem:40.40s} {r.label:22s} {r.status:12s} {rate} {r.error or ''}")
        if not tiny:
            compare += compare_with_do_bench(mod, probs[0], log)
    if compare:
        import pandas as pd

        pd.DataFrame(compare).to_csv(out / "measure_vs_do_bench.csv", index=False)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
