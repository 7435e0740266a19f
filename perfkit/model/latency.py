"""The latency leg's per-warp part: cycles from issue to a usable result by kind of
instruction (:func:`latencies`) and an in-order scoreboard over a SASS body
(:func:`warp_cycles`)."""
from __future__ import annotations

import functools
import re


_NO_DST = ("ST", "STG", "STS", "STL", "BRA", "BAR", "EXIT", "RET", "BSYNC", "BSSY", "WARPSYNC", "DEPBAR",
           "LDGDEPBAR", "NOP", "RED", "CALL", "YIELD", "MEMBAR", "ERRBAR", "CCTL", "BPT", "BREAK", "JMP", "BRX",
           "LDGSTS", "ARRIVES", "SYNCS", "VOTEU", "NANOSLEEP", "REDG", "STSM")
_XU = ("MUFU", "I2F", "F2I", "F2F", "I2I", "FRND", "POPC", "FLO", "BREV", "I2FP", "F2IP")
_OPERAND_REG = re.compile(r"\b(U?P\d|U?PT|UR\d+|URZ|R\d+|RZ)(\.64)?\b")


def _operand_regs(text: str) -> list[str]:
    out = []
    for m in _OPERAND_REG.finditer(text):
        name = m.group(1)
        if name in ("RZ", "URZ", "PT", "UPT"):
            continue
        out.append(name)
        if m.group(2) and name[0] in "RU" and not name.startswith("UP"):
            pre = "UR" if name.startswith("UR") else "R"
            out.append(f"{pre}{int(name[len(pre):]) + 1}")
    return out


def latencies(r, miss: float, bank_degree: float = 1.0) -> dict:
    """Cycles from issue to a result a dependent instruction can use, by kind (Hopper figures
    from ``data/rates.yaml``); a global access's (atomics; loads outside a batch) is the L2 hit
    latency plus the DRAM miss rate times the difference."""
    g = r["latency_l2_clk"]["value"] + miss * (r["latency_dram_clk"]["value"] - r["latency_l2_clk"]["value"])
    return {"alu": r["latency_alu_clk"]["value"], "xu": r["latency_xu_clk"]["value"],
            "global": g, "local": r["latency_l1_clk"]["value"],
            "shared": r["latency_smem_clk"]["value"] * max(bank_degree, 1.0),
            "ldsm": r["latency_smem_clk"]["value"], "shfl": r["latency_shuffle_clk"]["value"],
            "bar": r["latency_barrier_clk"]["value"], "mma": r["latency_mma_clk"]["value"],
            "fp64": r["latency_fp64_clk"]["value"]}


@functools.lru_cache(maxsize=1 << 16)
def _decoded(ins: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """One SASS line as :func:`warp_cycles` reads it: (opcode base, the registers and predicates
    it reads, the registers it writes, a vector's or an MMA's whole range); None for a NOP.  The
    same lines come back in every pass, loop and launch: decoded once."""
    text = ins.strip().rstrip(";").strip()
    guard = []
    if text.startswith("@"):
        g, _, text = text.partition(" ")
        guard = [g.lstrip("@!")]
    op, _, rest = text.partition(" ")
    base = op.split(".")[0]
    if base == "NOP":
        return None
    ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
    writes = base not in _NO_DST and bool(ops)
    dst = _operand_regs(ops[0]) if writes else []
    srcs = guard + [x for o in (ops[1:] if writes else ops) for x in _operand_regs(o)]
    if writes and "[" in ops[0]:  # an address in the first operand is read
        srcs += dst
        dst = []
    width = 4 if ".128" in op else 2 if (".64" in op or ".WIDE" in op) else 1
    if base.endswith("MMA"):
        width = 4
    regs = list(dst)
    if dst and dst[0].startswith("R") and width > 1:
        b = int(dst[0][1:])
        regs += [f"R{b + k}" for k in range(1, width)]
    return base, tuple(srcs), tuple(regs)


def warp_cycles(body: list[str], lat: dict, *, loop: bool) -> float:
    """Cycles one warp alone needs per pass over ``body`` (SASS instructions, in order): an
    in-order scoreboard where an instruction issues one cycle after the one before, or when the
    registers and predicates it reads are ready, whichever is later; its destinations are ready
    its latency later.  A loop body is run twice and the second pass counted (the steady state,
    with the dependences an iteration carries into the next).

    Global loads (when ``lat`` has ``miss_p``): the loads in flight form a batch; the first
    instruction that reads one of them waits for the whole batch, which is back at
    ``global_hit`` (L1) after the last was issued if every load hit L1, else at ``global_miss``:
    a batch of n loads misses with probability min(1, n x ``miss_p``) (a thread's consecutive
    loads share sectors, so at most one of a run misses).  A walk along a row with four loads a
    trip waits for a miss every other trip; four rows read one after the other wait four times."""
    ready: dict = {}
    batched = "miss_p" in lat
    inflight: list = []   # (issue time, registers) of global loads not yet waited for
    inflight_regs: set = set()
    t = 0.0
    passes = 2 if loop else 1
    first = 0.0
    for p in range(passes):
        t0 = t
        for ins in body:
            dec = _decoded(ins)
            if dec is None:  # a NOP
                continue
            base, srcs, regs = dec
            if batched and inflight and any(x in inflight_regs for x in srcs):
                n = len(inflight)
                p_miss = min(1.0, n * lat["miss_p"])
                back = max(i for i, _ in inflight) + lat["global_hit"] + p_miss * (lat["global_miss"] - lat["global_hit"])
                for _, regs_ in inflight:
                    for x in regs_:
                        ready[x] = back
                inflight, inflight_regs = [], set()
            issue = max([t + 1.0] + [ready.get(x, 0.0) for x in srcs])
            if base == "BAR":
                issue += lat["bar"]
            if base in ("LDG", "LD", "ATOMG", "ATOM"):
                lt = lat["global"]
            elif base == "LDL":
                lt = lat["local"]
            elif base in ("LDS", "ATOMS"):
                lt = lat["shared"]
            elif base == "LDSM":
                lt = lat["ldsm"]
            elif base == "SHFL":
                lt = lat["shfl"]
            elif base.endswith("MMA"):
                lt = lat["mma"]
            elif base in _XU:
                lt = lat["xu"]
            elif base.startswith("D") and base[1:] in ("FMA", "ADD", "MUL", "SETP"):
                lt = lat["fp64"]
            else:
                lt = lat["alu"]
            if batched and base in ("LDG", "LD"):
                inflight.append((issue, regs))
                inflight_regs.update(regs)
                for x in regs:
                    ready.pop(x, None)
            else:
                for x in regs:
                    ready[x] = issue + lt
                    inflight_regs.discard(x)
            t = issue
        if p == 0:
            first = t - t0
    return (t - t0) if loop else first
