"""``perfkit anatomy OP RUNG ...``: the anatomy's command line."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from .report import diff, inspect
from .target import AnatomyError


# --- command line ---------------------------------------------------------------------------
def _find_rung(ladder, rung: str):
    for v in ladder:
        if rung == str(v.rung) or rung == v.name or rung == v.label:
            return v
    raise AnatomyError(f"no rung {rung!r}; have: {', '.join(v.label for v in ladder)}")


def op_module(op: str):
    """``perfkit.kernels.<op>``, or ``perfkit.kernels.norm.<op>`` for the normalization ops
    (``softmax`` as well as ``norm.softmax``); an unknown op says which exist."""
    from ..kernels import registry

    try:
        return registry.module(op)
    except LookupError as exc:
        raise AnatomyError(str(exc)) from None


def cli(argv: list[str] | None = None) -> int:
    """``perfkit anatomy OP RUNG [--cc 9.0] [--size k=v ...] [--launch N] [--diff RUNG2] [--sass]``."""
    ap = argparse.ArgumentParser(prog="perfkit anatomy", description="what the compiler made of a rung")
    ap.add_argument("op", help="op module under perfkit.kernels, e.g. saxpy, gemm, softmax (= norm.softmax)")
    ap.add_argument("rung", help="rung number or name")
    ap.add_argument("--cc", default="9.0", help="target compute capability (default 9.0)")
    ap.add_argument("--size", action="append", default=[], metavar="K=V", help="problem field override")
    ap.add_argument("--launch", type=int, default=0, metavar="N",
                    help="which launch of a rung of several to report (0: the first; the report lists them all)")
    ap.add_argument("--diff", metavar="RUNG2", help="compare with another rung")
    ap.add_argument("--diff-cc", metavar="CC", help="compare with the same rung at another target")
    ap.add_argument("--sass", action="store_true", help="print the SASS too")
    ap.add_argument("--access", action="store_true",
                    help="simulate one block of a small twin of the problem and print its shared-memory bank "
                         "conflicts and global coalescing per source line (perfkit.banks; no GPU needed)")
    args = ap.parse_args(argv)
    try:
        mod = op_module(args.op)
        ladder = getattr(mod, "LADDER")
        problem = getattr(mod, "EXAMPLE_PROBLEM", None)
        if args.size:
            import yaml

            kw = {}
            for s in args.size:
                if "=" not in s:
                    raise AnatomyError(f"--size {s!r} must look like FIELD=VALUE, e.g. --size n=2048")
                k, v = s.split("=", 1)
                kw[k.strip()] = yaml.safe_load(v)
            fields = [f.name for f in dataclasses.fields(mod.Problem)] if dataclasses.is_dataclass(mod.Problem) else None
            unknown = sorted(set(kw) - set(fields or kw))
            if unknown:
                raise AnatomyError(f"{args.op}'s problem has no field {', '.join(map(repr, unknown))}; "
                                   f"its fields: {', '.join(fields)}")
            problem = dataclasses.replace(problem, **kw) if problem is not None else mod.Problem(**kw)
        if problem is None:
            raise AnatomyError(f"{args.op} has no EXAMPLE_PROBLEM: give its fields with --size k=v")
        v = _find_rung(ladder, args.rung)
        problem = v.example(problem)
        rep = inspect(v, problem, cc=args.cc, kernel=args.launch)
        print(rep)
        if args.diff or args.diff_cc:
            w = _find_rung(ladder, args.diff) if args.diff else v
            # the same launch of the same rung at another target; another rung's first launch
            other = inspect(w, w.example(problem), cc=args.diff_cc or args.cc, kernel=args.launch if w is v else 0)
            print(diff(rep, other))
        if args.sass:
            print(rep.sass)
        if args.access:
            from .. import banks

            small = banks.small_problem(v, problem)
            try:
                print(banks.count(v, small).table())
            except banks.BankError as exc:
                print(f"perfkit anatomy --access: {exc}", file=sys.stderr)
                return 2
    except (AnatomyError, ModuleNotFoundError, AttributeError, TypeError, ValueError) as exc:
        print(f"perfkit anatomy: {exc}", file=sys.stderr)
        return 2
    return 0

