"""Every op perfkit has a ladder for, and where it lives: the one op -> module table.

``module("softmax")`` and ``module("norm.softmax")`` are the same module; an op that is not here
(a ceiling record's ``roofline``, a typo) raises :class:`LookupError` naming those that are."""
from __future__ import annotations

import importlib

#: op -> module under ``perfkit.kernels``, in the order the notebooks teach them
OPS = {
    "saxpy": "saxpy",
    "gemm": "gemm",
    "conv": "conv",
    "softmax": "norm.softmax",
    "layernorm": "norm.layernorm",
    "rmsnorm": "norm.rmsnorm",
    "layernorm_bwd": "norm.layernorm_bwd",
    "batchnorm": "norm.batchnorm",
}


def op_name(op: str) -> str:
    """``norm.softmax`` -> ``softmax``; an unknown op raises LookupError."""
    short = op.split(".", 1)[1] if op.startswith("norm.") else op
    if short not in OPS:
        raise LookupError(f"no op {op!r}: one of {', '.join(OPS)}")
    return short


def has(op: str) -> bool:
    try:
        op_name(op)
    except LookupError:
        return False
    return True


def module_name(op: str, package: str = "perfkit.kernels") -> str:
    """Dotted module of ``op`` under ``package`` (another package: an older commit's kernels)."""
    return f"{package}.{OPS[op_name(op)]}"


def module(op: str):
    return importlib.import_module(module_name(op))


def ladder(op: str) -> list:
    return list(module(op).LADDER)
