"""Fuzz every kernel rung (GEMM, conv, norm) in the CUDA simulator at small, awkward valid
problems against the Problem's float64 reference (outputs NaN-poisoned by ``prepare``).

Exploratory and slow (minutes to hours: the simulator runs each thread as a Python thread); the
fast regressions it found live in tests/.  Usage::

    PYTHONPATH=$PWD python tools/audit_kernels.py --op conv --rungs 9-15 --per-rung 6 --seed 1
    PYTHONPATH=$PWD python tools/audit_kernels.py --op norm --rungs smem_row,persist --log /tmp/a.jsonl

For each rung it draws problems from the rung's own domain (float16 NHWC with c % 8 == 0 for the
chunked tensor-core conv rungs, 3x3 stride 1 for Winograd, ...), runs those ``supports`` takes
and checks them; refusals must be ``UnsupportedProblem`` with a reason.  Any other exception,
a NaN, or a value off the reference is a failure, printed with the problem, the rung's config
and the seed so that it replays.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback

import numpy as np

import perfkit  # noqa: F401  (picks the backend before numba.cuda is imported)
from perfkit.kernels import conv, gemm
from perfkit.kernels.base import OracleVariant, UnsupportedProblem
from perfkit.kernels.norm import _common as norm_common
from perfkit.kernels.norm import batchnorm, layernorm, layernorm_bwd, rmsnorm, softmax

NORM_OPS = {"softmax": softmax, "layernorm": layernorm, "layernorm_bwd": layernorm_bwd, "rmsnorm": rmsnorm,
            "batchnorm": batchnorm}


# --- simulator-sized configurations (as tests/ pick them) ----------------------------------------
def gemm_small(v):
    name = v.name
    if name == "tc_deep":
        return gemm.TCDeep(WARPS_M=1, WARPS_N=1, MT=1, NT8=8, GROUP_M=2)
    if name == "simt_wide":
        return gemm.SimtWide(BM=64, BN=64, BK=8, TM=8, TN=16, LR=8)
    if name == "wgmma":
        return gemm.Wgmma(BN=64)
    if name == "tma":
        return gemm.Tma(BN=64)
    if name in ("warp_specialized", "persistent", "cluster"):
        return dataclasses.replace(v, BN=64, STAGES=2)
    if name == "tc_vector":
        return gemm.TCVector(WARPS_M=1, WARPS_N=1, MT=1, NT8=2)
    if name in ("tc_ldmatrix", "tc_cp_async", "tc_warptile", "tc_epilogue"):
        return dataclasses.replace(v, WARPS_M=1, WARPS_N=1, MT=1, NT8=8)
    return v


def conv_small(v):
    if v.name in ("winograd_tiled", "winograd_f4"):
        return dataclasses.replace(v, WARPS_M=1, WARPS_N=1)
    return v  # the tensor-core rungs choose one warp a block at these sizes


def norm_small(v, G=32, R=1, V=2):
    """tests/test_norm.py's ``small`` (one home: the tests')."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_norm import small

    return small(v, G, R, V)


# --- problem draws -------------------------------------------------------------------------------
def draw_gemm(g, v, big=False):
    f16 = v.example(gemm.Problem(1, 1, 1)).dtype == "float16"
    dims = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 69]
    if big:
        dims += [127, 128, 129, 191, 255, 257, 300]
    m, n, k = (int(g.choice(dims)) for _ in range(3))
    if v.name in ("tma", "warp_specialized", "persistent", "cluster") and g.random() < 0.8:
        n, k = 8 * max(1, n // 8), 8 * max(1, k // 8)
    p = gemm.Problem(m, n, k, "float16" if f16 else "float32")
    scale = float(g.choice([1.0, 1.0, 64.0, 1 / 64]))
    return p, scale


def draw_conv(g, v, big=False):
    tc = v.name.startswith("tc_")  # float16 NHWC
    tc_chunked = tc and v.name != "tc_padded"  # and c % 8 == 0 (tc_padded takes any c)
    wino = v.name.startswith("winograd")
    for _ in range(200):
        n = int(g.choice([1, 1, 2]))
        if tc_chunked:
            c = int(g.choice([8, 16, 24]))
        else:
            c = int(g.choice([1, 2, 3, 5, 8, 9, 16, 17, 24]))
        k = int(g.choice([1, 3, 4, 8, 9, 16, 17, 24, 33, 70]))
        h, w = int(g.integers(1, 21 if big else 13)), int(g.integers(1, 21 if big else 13))
        if big and tc_chunked:
            c = int(g.choice([8, 16, 24, 32, 40, 64]))
        elif big and tc:
            c = int(g.choice([3, 5, 8, 12, 19, 40, 64]))
            k = int(g.choice([k, 64, 65, 128, 129]))
        if wino and g.random() < 0.85:
            r = s = 3
            stride = 1
        else:
            r, s = int(g.choice([1, 2, 3, 5, 7])), int(g.choice([1, 2, 3, 5, 7]))
            stride = int(g.choice([1, 1, 2, 3]))
        pad = int(g.choice([0, 1, 2, 3]))
        dtype = "float16" if (tc or v.name == "tensor_core" or g.random() < 0.4) else "float32"
        layout = "NHWC" if (tc or g.random() < 0.5) else "NCHW"
        if r > h + 2 * pad or s > w + 2 * pad:
            continue
        p = conv.Problem(n, c, h, w, k, r, s, stride, pad, dtype, layout)
        if p.gemm_mnk[0] * p.gemm_mnk[1] * p.gemm_mnk[2] > (4_000_000 if big else 400_000):  # keep the simulator's time down
            continue
        return p, float(g.choice([1.0, 1.0, 16.0]))
    raise RuntimeError("no conv problem drawn")


ROW_COLS = [1, 2, 3, 5, 7, 8, 31, 33, 64, 65, 127, 129, 255, 257, 300]
ROW_KINDS = ["normal", "normal", "offset", "tiny", "const", "large", "bigoffset", "neginf"]


def draw_row(g, mod, op, big=False):
    rows = int(g.choice([1, 1, 2, 3, 5]))
    cols = int(g.choice(ROW_COLS))
    if big:  # many rows of narrow columns: row loops, column reductions split in chunks
        rows, cols = int(g.choice([33, 130, 257, 600])), int(g.choice([1, 3, 8, 33, 65]))
    dtype = str(g.choice(["float32", "float16"]))
    kw = {}
    if op != "softmax" and g.random() < 0.3:
        kw["eps"] = float(g.choice([1e-3, 1e-8, 0.5]))
    kind = str(g.choice(ROW_KINDS if op == "softmax" else ROW_KINDS[:-1]))
    return mod.Problem(rows, cols, dtype, **kw), kind


def draw_bn(g, big=False):
    for _ in range(100):
        sizes = ([1, 2, 3], [1, 2, 3, 5, 8, 9, 17, 33], [1, 2, 3, 5], [1, 2, 3, 7])
        if big:
            sizes = ([1, 2, 4, 7], [1, 3, 8, 16, 33, 64, 65, 130], [1, 5, 16, 17], [1, 3, 16, 31])
        n, c, h, w = (int(g.choice(v)) for v in sizes)
        if n * h * w < 2:
            continue
        dtype = str(g.choice(["float32", "float16"]))
        layout = str(g.choice(["NCHW", "NHWC"]))
        mo = float(g.choice([0.1, 0.1, 0.0, 1.0, 0.37]))
        eps = float(g.choice([1e-5, 1e-5, 1e-3, 0.5]))
        return batchnorm.Problem(n, c, h, w, dtype, layout, eps, mo), str(g.choice(["normal", "offset", "tiny",
                                                                                    "const", "large"]))
    raise RuntimeError


def shape_x(g, kind, shape, dtype):
    z = np.clip(g.standard_normal(shape), -3, 3)
    big = 1e4 if dtype == "float16" else 1e6
    if kind == "offset":
        x = 20.0 + z
    elif kind == "tiny":
        # |mean| / std <= 10: past ~100 a float32 mean loses the digits the centred values
        # live in, in any float32 kernel (torch's too), and the check's tolerance would fail
        x = 1e-3 * z + (1e-2 if g.random() < 0.5 else 0.0)
    elif kind == "const":
        x = np.full(shape, float(g.choice([0.0, 1.5, -3.25])))
    elif kind == "large":
        x = big * z / 3
    elif kind == "bigoffset":
        x = big * (1 + 0.1 * z)
    elif kind == "neginf":
        x = 2 * z
        x[g.random(shape) < 0.3] = -np.inf
        x.reshape(-1)[0] = 1.0  # some row has a finite max
    else:
        x = 2 * z
    return x


def norm_inputs(g, p, kind, seed, op):
    inputs = p.make_inputs(seed)
    x = shape_x(g, kind, inputs["x"].shape, p.dtype)
    inputs["x"] = np.ascontiguousarray(x.astype(p.dtype))
    if op == "softmax" and kind == "neginf":  # rows fully -inf give NaN in the reference (torch too): avoid
        xs = inputs["x"]
        for r in range(xs.shape[0]):
            if np.isneginf(xs[r]).all():
                xs[r, 0] = 0.0
    return inputs


# --- the run -------------------------------------------------------------------------------------
def run_one(v, p, inputs, ref, scale=1.0, repeat=1):
    t0 = time.time()
    try:
        v.supports(p)
    except UnsupportedProblem as exc:
        msg = str(exc)
        return {"status": "refused" if msg.strip() else "FAIL", "msg": msg or "refusal without a reason",
                "s": time.time() - t0}
    except Exception as exc:  # supports must raise UnsupportedProblem only
        return {"status": "FAIL", "msg": f"supports raised {type(exc).__name__}: {exc}", "s": time.time() - t0}
    try:
        if repeat == 1:
            out = v.run(p, inputs)
        else:  # a timing repeats the launches on the same buffers: the last result must still be right
            prep = v.prepare(p, inputs)
            for _ in range(repeat):
                prep()
            out = prep.output()
    except Exception as exc:
        return {"status": "FAIL", "msg": f"run raised {type(exc).__name__}: {exc}",
                "tb": traceback.format_exc()[-1500:], "s": time.time() - t0}
    names = list(p.output_specs())
    if not isinstance(out, dict):
        out = {names[0]: out}
    for n, (shape, dtype) in p.output_specs().items():
        if out[n].dtype != np.dtype(dtype) or tuple(out[n].shape) != tuple(shape):
            return {"status": "FAIL", "msg": f"{n}: {out[n].dtype}{out[n].shape}, expected {dtype}{shape}",
                    "s": time.time() - t0}
    if scale != 1.0:
        out = {n: np.asarray(a, np.float64) / scale for n, a in out.items()}
        ref = {n: np.asarray(a, np.float64) / scale for n, a in ref.items()}
    c = p.check(out, ref)
    return {"status": "ok" if c.ok else "FAIL", "msg": c.message, "err": c.max_abs_err, "s": time.time() - t0}


def pick(ladder, spec):
    if not spec:
        return list(ladder)
    out = []
    for part in spec.split(","):
        if "-" in part and part.replace("-", "").isdigit():
            a, b = part.split("-")
            out += [v for v in ladder if int(a) <= v.rung <= int(b)]
        elif part.isdigit():
            out += [v for v in ladder if v.rung == int(part)]
        else:
            out += [v for v in ladder if v.name == part]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", required=True, help="gemm, conv, norm, or one norm op (softmax, ...)")
    ap.add_argument("--rungs", default="", help="numbers, ranges (9-15) or names, comma-separated")
    ap.add_argument("--per-rung", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wide", action="store_true", help="norm row ops: one 65537-column row a rung")
    ap.add_argument("--log", default="")
    ap.add_argument("--as-laddered", action="store_true", help="the ladder's own configurations, not small ones")
    ap.add_argument("--repeat", type=int, default=1, help="launch the prepared rung this many times, then check")
    ap.add_argument("--big", action="store_true", help="larger problems (GEMM dims to 300, conv h, w to 20)")
    a = ap.parse_args(argv)
    sys.setswitchinterval(2e-4)  # the simulator's barriers hand over faster (tests/test_norm.py)
    log = open(a.log, "a") if a.log else None
    g = np.random.default_rng(a.seed)
    jobs = []  # (label, variant, problem, inputs, ref, scale)
    if a.op == "gemm":
        for v in pick(gemm.LADDER, a.rungs):
            v = v if a.as_laddered else gemm_small(v)
            if v.name in ("persistent",):
                type(v).sms = lambda self: 2  # two blocks walk the tiles (tests/test_gemm_hopper.py)
            for i in range(a.per_rung):
                p, sc = draw_gemm(g, v, a.big)
                seed = int(g.integers(1 << 30))
                x = p.make_inputs(seed)
                x = {k: np.ascontiguousarray((arr.astype(np.float64) * sc).astype(arr.dtype)) for k, arr in x.items()}
                jobs.append((v, p, x, {"c": p.reference(x)}, sc * sc, seed, "scale%g" % sc))
    elif a.op == "conv":
        for v in pick(conv.LADDER, a.rungs):
            v = v if a.as_laddered else conv_small(v)
            for i in range(a.per_rung):
                p, sc = draw_conv(g, v, a.big)
                seed = int(g.integers(1 << 30))
                x = p.make_inputs(seed)
                x["x"] = np.ascontiguousarray((x["x"].astype(np.float64) * sc).astype(x["x"].dtype))
                jobs.append((v, p, x, {"y": p.reference(x)}, sc, seed, "scale%g" % sc))
    else:
        ops = list(NORM_OPS) if a.op == "norm" else a.op.split(",")
        for op in ops:
            mod = NORM_OPS[op]
            for v in pick(mod.LADDER, a.rungs):
                v = v if a.as_laddered else norm_small(v)
                for i in range(a.per_rung):
                    if op == "batchnorm":
                        p, kind = draw_bn(g, a.big)
                    else:
                        p, kind = draw_row(g, mod, op, a.big)
                    seed = int(g.integers(1 << 30))
                    x = norm_inputs(g, p, kind, seed, op)
                    ref = p.reference(x)
                    ref = ref if isinstance(ref, dict) else {list(p.output_specs())[0]: ref}
                    jobs.append((v, p, x, ref, 1.0, seed, kind))
                if a.wide and op != "batchnorm":
                    p = mod.Problem(1, 65537 if op != "layernorm_bwd" else 8193, "float16")
                    x = p.make_inputs(a.seed)
                    ref = p.reference(x)
                    ref = ref if isinstance(ref, dict) else {list(p.output_specs())[0]: ref}
                    jobs.append((v, p, x, ref, 1.0, a.seed, "wide"))
    nfail = 0
    for v, p, x, ref, sc, seed, kind in jobs:
        res = run_one(v, p, x, ref, sc, a.repeat)
        rec = {"op": p.op, "rung": v.rung, "name": v.name, "config": v.config, "problem": p.params,
               "seed": seed, "kind": kind, **res}
        nfail += res["status"] == "FAIL"
        line = f"{res['status']:7s} {p.op} {v.rung:2d} {v.name:18s} {p.label} [{kind}] {res['s']:.1f}s"
        if res["status"] != "ok":
            line += "  " + res["msg"][:300]
        print(line, flush=True)
        if log:
            log.write(json.dumps(rec, default=str) + "\n")
            log.flush()
    print(f"done: {len(jobs)} runs, {nfail} failures", flush=True)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
