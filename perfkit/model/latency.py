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
    return {"pipe_interval": pipe_intervals(r),
            "alu": r["latency_alu_clk"]["value"], "xu": r["latency_xu_clk"]["value"],
            "global": g, "local": r["latency_l1_clk"]["value"],
            "shared": r["latency_smem_clk"]["value"] * max(bank_degree, 1.0),
            "ldsm": r["latency_smem_clk"]["value"], "shfl": r["latency_shuffle_clk"]["value"],
            "bar": r["latency_barrier_clk"]["value"], "mma": r["latency_mma_clk"]["value"],
            "fp64": r["latency_fp64_clk"]["value"]}


def pipe_intervals(r) -> dict:
    """Cycles between two warp instructions one scheduler can dispatch to the same pipe (the
    pipe's width: a warp instruction of 32 threads on a pipe of n lanes a sub-partition takes
    32 / n cycles), from the same rates as the resource legs (:func:`perfkit.model.equations.resource_legs`),
    an SM being ``issue_per_sm_per_clk`` (4) schedulers: ``alu`` integer/logic/compare and other
    FP32 (2 warp instructions an SM a clock: 2 cycles), ``fma2`` IMAD (counted twice in the fp32
    leg: 2 x 32 / (fp32 lanes / 4), 2 cycles on Hopper), ``fma`` FFMA/FADD/FMUL (1 cycle with 128
    lanes an SM, 2 with 64), ``xu`` conversions and MUFU (4 ALU slots: 8 cycles), ``tensor`` an
    mma.sync m16n8k16 (4096 FLOPs at the sub-partition's share of the dense tensor peak x
    ``mma_sync_fraction``: 6.98 cycles on the H100/H200 at 1.98 GHz).  Source: the CUDA C
    programming guide's arithmetic-instruction throughputs (results per clock per SM) and Nsight
    Compute's warp stall reason "math pipe throttle" (a warp waits for its pipe to be free)."""
    v = {k: (r[k]["value"] if k in r else None) for k in ("sm_count", "clock_hz", "issue_per_sm_per_clk",
                                                          "fp32_lanes_per_sm", "tensor_fp16_flops", "mma_sync_fraction")}
    sched = v["issue_per_sm_per_clk"] or 4
    out = {"alu": sched / 2.0, "xu": 4 * sched / 2.0}
    if v["fp32_lanes_per_sm"]:
        out["fma"] = 32.0 * sched / v["fp32_lanes_per_sm"]
        out["fma2"] = 2 * out["fma"]
    if v["tensor_fp16_flops"] and v["sm_count"] and v["clock_hz"] and v["mma_sync_fraction"]:
        per_sched = v["tensor_fp16_flops"] * v["mma_sync_fraction"] / (v["sm_count"] * v["clock_hz"] * sched)
        out["tensor"] = 4096.0 / per_sched
    return out


@functools.lru_cache(maxsize=1 << 16)
def _pipe(ins: str) -> str | None:
    """The pipe of :func:`pipe_intervals` one SASS line dispatches to (None: one not limited
    here: memory, branches, uniform datapath, wgmma, which runs asynchronously)."""
    from ..anatomy import classify

    cls = classify(ins)
    t = ins.strip()
    if t.startswith("@"):
        t = t.split(None, 1)[1] if " " in t else ""
    base = t.split(None, 1)[0].split(".")[0] if t else ""
    if cls == "tensor mma":
        return "tensor" if base == "HMMA" else None
    if cls == "integer/address":
        if base.startswith("U"):
            return None
        return "fma2" if base in ("IMAD", "IMUL", "IDP") else "alu"
    if cls in ("fp32 fma", "fp32 add", "fp32 mul"):
        return "fma"
    if cls == "fp32 other":
        return "alu"
    if cls in ("special function", "conversion"):
        return "xu"
    return None


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
    trip waits for a miss every other trip; four rows read one after the other wait four times.

    Pipes (when ``lat`` has ``pipe_interval``, :func:`pipe_intervals`): an instruction also waits
    until its pipe takes another of this warp's (math pipe throttle): 64 independent mma.sync
    m16n8k16 take 64 x 6.98 cycles on Hopper, not 64; 10 independent IADD3 take 20.  Test
    ``test_scoreboard_waits_for_the_pipe``; evidence (2026-11-27, H200): the conv tensor-core
    rungs 13 and 15 (1.5 warps a scheduler: one warp's address math, ldmatrix and 64 mmas a
    k-tile in order) go from 0.60 and 0.65 of their measured times to 0.70 and 0.81, the GEMM
    tc rungs 14-17 by +0.02-0.04 on both GPUs; validate's headlines unchanged."""
    ready: dict = {}
    iv = lat.get("pipe_interval") or {}
    free: dict = {}  # pipe -> the cycle it takes this warp's next instruction
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
            pipe = _pipe(ins) if iv else None
            if pipe in iv:
                issue = max(issue, free.get(pipe, 0.0))
                free[pipe] = issue + iv[pipe]
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
