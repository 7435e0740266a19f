"""``perfkit static refresh [--ops OP,...] [--notebooks]``: bring the static store up to date.

Computes (or takes from the local cache) what the store must cover (:func:`perfkit.static.targets`:
every rung at its example problem, for sm_90) the way its readers ask for it: ``anatomy.inspect``,
then ``model.estimate`` for the GPUs the records come from (which compiles and simulates what the
model reads), and, with ``--notebooks``, runs the notebooks in the ``ci`` profile so that every
build and simulation they show is stored too.  Entries nothing asked for are dropped (with
``--ops``: none are dropped).  Sits above the model: it drives the readers, it adds no analysis."""
from __future__ import annotations

import argparse
import os
import sys
import time

#: the GPUs whose estimates the notebooks show beside records
GPUS = ("h100-sxm", "h200")


def refresh(ops=None, *, notebooks: bool = False, gpus=GPUS, progress=print) -> dict:
    os.environ["PERFKIT_STATIC_WRITE"] = "1"
    from . import anatomy, model, static

    before = {k: {p.stem for p in static.entries(k)} for k in static.KINDS}
    todo = static.targets(ops)
    failed = []
    t0 = time.monotonic()
    for i, (op, v, p) in enumerate(todo, 1):
        t = time.monotonic()
        try:
            anatomy.inspect(v, p, static.CC)
            for g in gpus:
                model.estimate(v, p, g)
        except Exception as exc:  # noqa: BLE001  (said, and the rest goes on)
            failed.append(f"{op} {v.label}: {exc.__class__.__name__}: {str(exc)[:200]}")
        progress(f"[{i}/{len(todo)}] {op} {v.label} @ {p.label}: {time.monotonic() - t:.1f} s")
    if notebooks:
        from . import workbook

        runs = workbook.run(None, profile="ci", params={}, out_dir=None, progress=False)
        failed += [f"notebook {r.name}: {r.status}" for r in runs if r.status != "ok"]
    used = {k: {key for kind, key in static.used() if kind == k} for k in static.KINDS}
    dropped = 0
    if not ops and not failed:
        for k in static.KINDS:
            for p in static.entries(k):
                if p.stem not in used[k] and not notebooks_touched(k, p.stem):
                    p.unlink()
                    dropped += 1
    after = {k: {p.stem for p in static.entries(k)} for k in static.KINDS}
    added = sum(len(after[k] - before[k]) for k in static.KINDS)
    return {"targets": len(todo), "added": added, "dropped": dropped, "failed": failed,
            "entries": sum(len(v) for v in after.values()), "seconds": time.monotonic() - t0}


def notebooks_touched(kind: str, key: str) -> bool:
    """Entries written by a notebook run in a child process (what they used is not in this process): kept when
    written during this refresh."""
    from . import static

    p = static.store_dir() / kind / f"{key}.json"
    return p.exists() and p.stat().st_mtime >= _START


_START = time.time()


def cli(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="perfkit static", description="the static store (data/static/)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("refresh", help="recompute stale entries, drop unused ones")
    r.add_argument("--ops", default="", help="comma-separated ops (default: all; then unused entries are dropped)")
    r.add_argument("--notebooks", action="store_true", help="also run the notebooks (ci profile) and store what they build")
    args = ap.parse_args(argv)
    from .kernels import registry

    ops = [o.strip() for o in args.ops.split(",") if o.strip()] or None
    bad = [o for o in ops or [] if not registry.has(o)]
    if bad:
        print(f"perfkit static refresh: no op {', '.join(bad)}: one of {', '.join(registry.OPS)}", file=sys.stderr)
        return 2
    out = refresh(ops, notebooks=args.notebooks, progress=lambda s: print(s, flush=True))
    print(f"static store: {out['entries']} entries ({out['added']} new, {out['dropped']} dropped) over "
          f"{out['targets']} rungs in {out['seconds']:.0f} s")
    for f in out["failed"]:
        print(f"  failed: {f}", file=sys.stderr)
    return 1 if out["failed"] else 0
