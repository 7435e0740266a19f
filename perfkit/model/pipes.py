"""SASS -> pipes: what one pass over a list of SASS instructions issues to each pipe and
memory level (:func:`pipe_counts`), the counts every leg is made from."""
from __future__ import annotations

import functools
import re


#: a named barrier with a thread count (``BAR.SYNC.DEFER_BLOCKING R23, 0x80``: one warpgroup's
#: 128 threads), not the whole block (``BAR.SYNC.DEFER_BLOCKING 0x0``)
_PART_BARRIER = re.compile(r"\bBAR\.(?:SYNC|RED|ARV)\S*\s+[^,;]+,\s*(?:0x[0-9a-fA-F]+|\d+)")


def opcode(ins: str) -> str:
    t = ins.strip()
    if t.startswith("@"):
        t = t.split(None, 1)[1] if " " in t else ""
    return t.split(None, 1)[0] if t else ""


def pipe_counts(body: list[str]) -> dict:
    """Per-iteration counts the legs need, from a list of SASS instructions (a fresh dict: the
    caller may add to it)."""
    c = _counts(tuple(body))
    return {k: dict(v) if isinstance(v, dict) else v for k, v in c.items()}


@functools.lru_cache(maxsize=4096)  # a loop's body is counted again by every pass and estimate of its rung
def _counts(body: tuple[str, ...]) -> dict:
    from ..anatomy import classify

    c = {"instr": 0, "fma": 0, "ffma": 0, "imad": 0, "alu": 0, "xu": 0, "fp64": 0, "mma": 0, "mma_flops": 0, "wgmma_flops": 0, "wgmma_smem_bytes": 0, "mma_acc": 0, "gmem": 0, "gmem_bytes": 0,
         "gload_bytes": 0, "lds": {4: 0, 8: 0, 16: 0}, "sts": {4: 0, 8: 0, 16: 0}, "ldsm": 0, "bar": 0,
         "bar_part": 0, "shfl": 0, "local": 0, "gwide": 0, "s2r_tid": 0, "gw": {}}
    accs: set = set()
    for ins in body:
        cls = classify(ins)
        op = opcode(ins)
        base = op.split(".")[0]
        if cls == "move/other" and base in ("NOP",):
            continue
        c["instr"] += 1
        if cls in ("fp32 fma", "fp32 add", "fp32 mul"):
            c["fma"] += 2 if base.endswith("2") else 1
            if cls == "fp32 fma":
                c["ffma"] += 2 if base.endswith("2") else 1
        elif cls == "integer/address":
            if base.lstrip("U") in ("IMAD", "IMUL", "IDP") and not base.startswith("U"):
                c["imad"] += 1
            elif not base.startswith("U"):
                c["alu"] += 1
        elif cls == "fp32 other":
            c["alu"] += 1
        elif cls in ("special function", "conversion"):
            c["xu"] += 1
        elif cls == "fp64":
            c["fp64"] += 1
        elif cls == "tensor mma":
            c["mma"] += 1
            shape = re.match(r"HGMMA\.(\d+)x(\d+)x(\d+)", op)
            # the accumulator elements a warp holds, each distinct destination counted once (a
            # wgmma's M x N over its warpgroup's 4 warps; mma.sync's 16 x 8)
            dest = re.match(r"\s*(?:@!?U?P\w+\s+)?\S+\s+(R\d+)", ins)
            if dest and dest.group(1) not in accs:
                accs.add(dest.group(1))
                c["mma_acc"] += int(shape.group(1)) * int(shape.group(2)) // 4 if shape else 16 * 8
            if shape:  # wgmma: a warpgroup's M x N x K product, issued by each of its 4 warps
                m, n, k = (int(x) for x in shape.groups())
                c["wgmma_flops"] += 2 * m * n * k / 4
                # its operands from shared memory through descriptors (gdesc: A and B, or B
                # alone where A comes from registers), 32-byte K rows (16 halves, 8 tf32, 32
                # fp8): read through the shared-memory pipe, a warp's quarter each
                a_regs = re.search(r"HGMMA\S*\s+R\w+,\s*R\d+", ins) is not None
                c["wgmma_smem_bytes"] += ((0 if a_regs else m) + n) * 32 / 4
            else:      # mma.sync m16n8k16 (HMMA.16816): 4096 FLOPs a warp instruction
                c["mma_flops"] += 4096
        elif cls.startswith("global"):
            w = int(cls.rsplit(" ", 1)[1]) // 8
            c["gmem"] += 1
            c["gmem_bytes"] += w
            c["gwide"] += w >= 8
            key = ("load" if "load" in cls else "store", w)
            c["gw"][key] = c["gw"].get(key, 0) + 1
            if "load" in cls:
                c["gload_bytes"] += w
        elif cls.startswith("shared"):
            kind = "lds" if "load" in cls else "sts"
            if cls.endswith("other"):
                if base == "LDSM":
                    c["ldsm"] += 1
                else:
                    c[kind][4] += 1
            else:
                c[kind][int(cls.rsplit(" ", 1)[1]) // 8] += 1
        elif cls == "barrier" and base == "BAR":
            c["bar"] += 1
            if _PART_BARRIER.search(ins):  # bar.sync id, count: only the warps of that count meet
                c["bar_part"] += 1
        elif cls == "shuffle":
            c["shfl"] += 1
        elif base == "S2R" and "SR_TID" in ins:
            c["s2r_tid"] += 1
        elif base == "LDGSTS":  # cp.async: a global load that lands in shared memory
            w = 16 if ".128" in op else 8 if ".64" in op else 4
            c["gmem"] += 1
            c["gmem_bytes"] += w
            c["gload_bytes"] += w
        elif cls == "local load/store":
            c["local"] += 1
            c["gmem"] += 1
    return c


def add_counts(a: dict, b: dict, f: float = 1.0) -> dict:
    for k, v in b.items():
        if isinstance(v, dict):
            a.setdefault(k, {})
            for kk, vv in v.items():
                a[k][kk] = a[k].get(kk, 0) + f * vv
        else:
            a[k] = a.get(k, 0) + f * v
    return a
