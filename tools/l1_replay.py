"""One SM's L1 replayed over a rung's real problem: what reaches L2 (evidence for
docs/MODEL_NOTES.md, "Convolution L2 bytes against Nsight Compute"; not part of the model).

Runs, in Numba's CUDA simulator, the blocks SM 0 would get (0, S, 2S, ... for S SMs; ``--resident``
of them, the occupancy the anatomy reports), groups each warp's accesses into warp-wide
requests (the k-th access of each lane at a point of its program), and replays the loads of
those warps, interleaved request by request, through an LRU L1 of 128-byte lines whose 32-byte
sectors fill on demand (LDG: every load allocates; stores do not).  ``lockstep``: the resident
blocks start together (one wave); ``stagger``: at evenly spread phases of their lives (the
steady state of a grid of many waves).  Prints the missed load sectors scaled to the grid,
the bytes that go to L2 beside the stores.  Slow (the simulator: 15 s to 4 min a rung).

    PYTHONPATH=$PWD .venv/bin/python tools/l1_replay.py conv igemm_naive \\
        "n=32 c=128 h=28 w=28 k=128 r=3 s=3 stride=1 pad=1 dtype=float32 layout=NCHW" --resident 5
"""
from __future__ import annotations

import argparse
import time
from collections import OrderedDict

import numpy as np


def problem_of(mod, label: str):
    kw = {}
    for tok in label.split():
        k, _, v = tok.partition("=")
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                pass
        kw[k] = v
    return mod.Problem(**kw)


def sm_streams(variant, problem, resident: int, sms: int, launch_index: int = 0):
    """The warp-wide load requests (sets of 32-byte sectors, None for a store) of each warp of
    the ``resident`` blocks SM 0 runs, in program order; and the launch's grid size."""
    from numba.cuda.simulator import kernel as simkernel

    from perfkit.banks import record

    record.install()
    prep = variant.prepare(problem, problem.make_inputs(0))
    launch = prep.launches[launch_index]
    grid = tuple(launch.grid) if isinstance(launch.grid, (tuple, list)) else (launch.grid,)
    g3 = (grid + (1, 1, 1))[:3]
    tpb = int(np.prod(launch.block))
    nblk = int(np.prod(grid))
    want = set(range(0, nblk, sms)[:resident])
    run = simkernel.BlockManager.run

    def only(self, gp, *a):
        lin = int(gp[0]) + g3[0] * (int(gp[1]) + g3[1] * int(gp[2]))
        return run(self, gp, *a) if lin in want else None
    simkernel.BlockManager.run = only
    try:
        with record.recording() as rec:
            args = [record.recording_arg(a) for a in launch.args]
            launch.kernel[launch.grid, launch.block, 0, launch.shared_bytes](*args)
    finally:
        simkernel.BlockManager.run = run
    streams = []
    for blk in sorted({b for b, _ in rec.gevents}):
        for w0 in range(0, tpb, 32):
            lanes = [rec.gevents.get((blk, t), []) for t in range(w0, min(w0 + 32, tpb))]
            reqs = []
            for j in range(max((len(x) for x in lanes), default=0)):
                secs, kind = set(), None
                for x in lanes:
                    if j < len(x):
                        site, addr, size = x[j]
                        kind = site[2]
                        secs.update(range(addr // 32, (addr + size - 1) // 32 + 1))
                reqs.append(secs if kind == "load" else None)
            streams.append(reqs)
    return streams, tpb, nblk, len(want)


def replay(streams, tpb: int, blocks: int, capacity_bytes: int, stagger: bool) -> tuple[int, int]:
    """(requested load sectors, missed load sectors) of the interleaved streams through an LRU
    L1 of ``capacity_bytes`` in 128-byte lines."""
    n = max(len(s) for s in streams)
    if stagger:
        wpb = -(-tpb // 32)
        off = [(i // wpb) * n // blocks for i in range(len(streams))]
        streams = [st[o % max(len(st), 1):] + st[:o % max(len(st), 1)] for o, st in zip(off, streams)]
    lines = capacity_bytes // 128
    l1: OrderedDict = OrderedDict()
    asked = miss = 0
    for j in range(n):
        for st in streams:
            if j >= len(st) or not st[j]:
                continue
            for s in st[j]:
                asked += 1
                ln = s >> 2
                e = l1.get(ln)
                if e is None:
                    miss += 1
                    l1[ln] = {s}
                    if len(l1) > lines:
                        l1.popitem(last=False)
                else:
                    l1.move_to_end(ln)
                    if s not in e:
                        miss += 1
                        e.add(s)
    return asked, miss


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op")
    ap.add_argument("rung")
    ap.add_argument("problem")
    ap.add_argument("--resident", type=int, required=True, help="blocks an SM holds (the anatomy's occupancy)")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--l1-kb", default="128,192,240", help="L1 capacities to replay, KB")
    ap.add_argument("--launch", type=int, default=0)
    a = ap.parse_args(argv)
    from perfkit.kernels import registry

    mod = registry.module(a.op)
    v = next(x for x in mod.LADDER if x.name == a.rung or str(x.rung) == a.rung)
    p = problem_of(mod, a.problem)
    t0 = time.time()
    streams, tpb, nblk, nb = sm_streams(v, p, a.resident, a.sms, a.launch)
    print(f"{v.label}: {nb} blocks of {nblk} simulated in {time.time() - t0:.0f} s")
    for kb in (int(x) for x in a.l1_kb.split(",")):
        for stagger in (False, True):
            asked, miss = replay(streams, tpb, nb, kb * 1024, stagger)
            print(f"  L1 {kb:3d} KB {'stagger ' if stagger else 'lockstep'}: load sectors asked {asked * 32 / nb * nblk / 1e6:8.0f} MB,"
                  f" missed (to L2) {miss * 32 / nb * nblk / 1e6:6.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
