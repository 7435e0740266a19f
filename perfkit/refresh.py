"""``perfkit static refresh [--ops OP,...] [--notebooks]``: bring the static store up to date.

Computes (or takes from the local cache) what the store must cover (:func:`perfkit.static.targets`:
every rung at its example problem, for sm_90) the way its readers ask for it: ``anatomy.inspect``,
then ``model.estimate`` for the GPUs the records come from (which compiles and simulates what the
model reads), and, with ``--notebooks``, runs the notebooks in the ``ci`` profile so that every
build and simulation they show is stored too.  Entries nothing asked for are dropped (with
``--ops``: none are dropped).  Sits above the model: it drives the readers, it adds no analysis.

``--cluster SPEC`` (:mod:`perfkit.cluster`) computes one target a task on CPU workers, after
checking that every worker has the same compiler tools as this process; each task works on a
scratch store (a refresh recomputes, it never reads the store) and returns the entries it wrote; this process writes
the store and drops unused entries only when every task succeeded."""
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


def refresh_target(op: str, rung: str, gpus=GPUS) -> dict:
    """A cluster task: one target's build and estimates, written (as a refresh writes, never
    reading the store) into a scratch store; the entries it touched and their text."""
    import shutil
    import tempfile
    from pathlib import Path

    from . import anatomy, model, static

    scratch = Path(tempfile.mkdtemp(prefix="perfkit-refresh-"))
    t0 = time.time()
    saved = {k: os.environ.get(k) for k in ("PERFKIT_STATIC_DIR", "PERFKIT_STATIC_WRITE")}
    try:
        os.environ.update(PERFKIT_STATIC_DIR=str(scratch), PERFKIT_STATIC_WRITE="1")
        before = static.used()
        [(v, p)] = [(v, p) for _, v, p in static.targets([op]) if v.name == rung]
        error = None
        try:
            anatomy.inspect(v, p, static.CC)
            for g in gpus:
                model.estimate(v, p, g)
        except Exception as exc:  # noqa: BLE001  (said, and the rest goes on)
            error = f"{op} {v.label}: {exc.__class__.__name__}: {str(exc)[:200]}"
        written = {f"{f.parent.name}/{f.name}": f.read_text() for f in sorted(scratch.glob("*/*.json"))}
        return {"target": f"{op} {v.label} @ {p.label}", "error": error, "used": sorted(static.used() - before),
                "written": written, "seconds": time.time() - t0}
    finally:
        for k, val in saved.items():
            if val is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = val
        shutil.rmtree(scratch, ignore_errors=True)


def refresh_on_cluster(spec: str, ops=None, *, gpus=GPUS, progress=print) -> dict:
    """``refresh`` with one target a task on the cluster ``spec``'s CPU workers."""
    from . import cluster, static
    from .anatomy import target

    todo = [(op, v.name) for op, v, _ in static.targets(ops)]
    before = {k: {p.stem for p in static.entries(k)} for k in static.KINDS}
    t0 = time.monotonic()
    with cluster.connect(spec) as client:
        mine = target.versions()
        theirs = client.run(target.versions)
        differ = {w: v for w, v in theirs.items() if v != mine}
        if differ:
            raise cluster.ClusterError(f"workers with other compiler tools than this process ({mine}): {differ}")
        futures = [client.submit(refresh_target, op, rung, gpus, resources=cluster.CPU_RESOURCES, pure=False)
                   for op, rung in todo]
        results = []
        for i, fut in enumerate(cluster.distributed().as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            for rel, text in r["written"].items():  # the store is written here, by the client
                kind, name = rel.split("/")
                _write(static.store_dir() / kind / name, text)
            progress(f"[{i}/{len(todo)}] {r['target']}: {r['seconds']:.1f} s on a worker")
    failed = [r["error"] for r in results if r["error"]]
    used = {(k, key) for r in results for k, key in r["used"]}
    dropped = 0
    if not ops and not failed:
        for k in static.KINDS:
            for p in static.entries(k):
                if (k, p.stem) not in used:
                    p.unlink()
                    dropped += 1
    after = {k: {p.stem for p in static.entries(k)} for k in static.KINDS}
    return {"targets": len(todo), "added": sum(len(after[k] - before[k]) for k in static.KINDS),
            "dropped": dropped, "failed": failed, "entries": sum(len(v) for v in after.values()),
            "seconds": time.monotonic() - t0, "written": sum(len(r["written"]) for r in results)}


def _write(path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


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
    r.add_argument("--cluster", default=None, metavar="SPEC",
                   help="one target a task on a Dask cluster's CPU workers (perfkit.cluster; perfkit[cluster])")
    args = ap.parse_args(argv)
    from .kernels import registry

    ops = [o.strip() for o in args.ops.split(",") if o.strip()] or None
    bad = [o for o in ops or [] if not registry.has(o)]
    if bad:
        print(f"perfkit static refresh: no op {', '.join(bad)}: one of {', '.join(registry.OPS)}", file=sys.stderr)
        return 2
    say = lambda s: print(s, flush=True)  # noqa: E731
    if args.cluster and args.notebooks:
        print("perfkit static refresh: --notebooks runs here, not on a cluster", file=sys.stderr)
        return 2
    out = refresh_on_cluster(args.cluster, ops, progress=say) if args.cluster else \
        refresh(ops, notebooks=args.notebooks, progress=say)
    print(f"static store: {out['entries']} entries ({out['added']} new, {out['dropped']} dropped) over "
          f"{out['targets']} rungs in {out['seconds']:.0f} s")
    for f in out["failed"]:
        print(f"  failed: {f}", file=sys.stderr)
    return 1 if out["failed"] else 0
