"""The ``perfkit`` command.

  perfkit run [NOTEBOOK...] [--profile auto|ci|gpu] [-p NAME=VALUE ...] [--out DIR] [-j N|auto]
  perfkit anatomy OP RUNG [--cc 9.0] [--size k=v ...] [--diff RUNG2]
  perfkit workload NETWORK... [--batch B] [--seq S] [--mode infer|train] [--gpu KEY] [--out FILE.csv] [--cluster SPEC]
  perfkit model validate [--gpu SLUG]
  perfkit compare [BASE NEW] [--results DIR] [--fail-above 0.05] [--out FILE.csv] [--plot FILE.png]
  perfkit static refresh [--ops OP,...] [--notebooks | --cluster SPEC]
  perfkit record [--plan quick|full] [--rehearse] [--parts ...] [--ops ...] [--rungs ...|--best] [--out DIR]
                 [--cluster SPEC --kinds KIND,...] ...
  perfkit record import RUN
  perfkit worker SCHEDULER [--gpus all|none|0,1] [--cpus N]
  perfkit info
"""
from __future__ import annotations

import time

_T0 = time.monotonic()  # perfkit record's budget counts from here

import argparse  # noqa: E402
import sys  # noqa: E402


def _run(args) -> int:
    from . import workbook

    try:
        params = workbook.parse_params(args.param)
        runs = workbook.run(args.notebooks or None, profile=args.profile, params=params,
                            out_dir=args.out, progress=not args.quiet, jobs=args.jobs)
    except workbook.WorkbookError as exc:
        print(f"perfkit run: {exc}", file=sys.stderr)
        return 2
    print(workbook.summary(runs, workbook.resolve_profile(args.profile)))
    return 0 if all(r.status == "ok" for r in runs) else 1


def _info(args) -> int:
    from . import backend

    backend.choose(verbose=False)
    print(backend.describe())
    for k, v in backend.device().as_dict().items():
        print(f"  {k}: {v}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except Exception as exc:
        from .cluster import ClusterError

        if not isinstance(exc, ClusterError):
            raise
        # a --cluster SPEC that cannot be read, or Dask not installed: said in a line, not a traceback
        print(f"perfkit {argv[0]}: {exc}", file=sys.stderr)
        return 2


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "anatomy":  # its own argument parser lives with the tool
        from . import anatomy

        return anatomy.cli(argv[1:])
    if argv and argv[0] == "model":  # perfkit model validate [--gpu SLUG]
        from . import model

        return model.validate_cli(argv[1:])
    if argv and argv[0] == "compare":  # perfkit compare BASE NEW (perfkit/compare.py)
        from . import compare

        return compare.cli(argv[1:])
    if argv and argv[0] == "static":  # perfkit static refresh (perfkit/refresh.py)
        from . import refresh

        return refresh.cli(argv[1:])
    if argv and argv[0] == "workload":  # its parser lives with the tool (perfkit/workload/cli.py)
        from .workload import cli as workload_cli

        return workload_cli.main(argv[1:])
    if argv and argv[0] == "record":  # perfkit record ... / perfkit record import RUN (perfkit/record/)
        if argv[1:2] == ["import"]:
            from .record import importer

            return importer.main(argv[2:])
        from .record import command

        return command.main(argv[1:], t0=_T0)
    if argv and argv[0] == "worker":  # Dask workers for a running scheduler (perfkit/cluster.py)
        from . import cluster

        return cluster.worker_cli(argv[1:])
    ap = argparse.ArgumentParser(prog="perfkit", description="GPU performance-engineering workbook")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run notebooks headless through papermill")
    r.add_argument("notebooks", nargs="*", help="names or stems (default: all)")
    r.add_argument("--profile", default="auto", choices=["auto", "ci", "gpu"])
    r.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="override a parameter")
    r.add_argument("--out", default=None, help="folder for executed copies (default runs/<timestamp>)")
    r.add_argument("-q", "--quiet", action="store_true", help="no per-cell progress bars")
    r.add_argument("-j", "--jobs", default=None, help="notebooks at once: N or auto (default: the profile's; "
                                                      "ci: auto, one per core; gpu: 1)")
    r.set_defaults(func=_run)
    sub.add_parser("anatomy", help="what the compiler made of a rung (perfkit anatomy -h)")
    sub.add_parser("model", help="the performance model: perfkit model validate [--gpu SLUG]")
    sub.add_parser("workload", help="where a network's step spends its time (perfkit workload -h)")
    sub.add_parser("compare", help="two sets of GPU records, pair by pair, with noise (perfkit compare -h)")
    sub.add_parser("static", help="the static store in data/static/: perfkit static refresh")
    sub.add_parser("record", help="a GPU session as a plan of units; perfkit record import RUN (perfkit record -h)")
    sub.add_parser("worker", help="this machine's Dask workers for a running scheduler (perfkit worker -h)")
    i = sub.add_parser("info", help="backend and device facts")
    i.set_defaults(func=_info)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
