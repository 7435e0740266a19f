"""Reading the compiler's output: ``cuobjdump -res-usage`` and ptxas's report, the SASS's
instruction classes and static mix, and its loops (the hot loop the model reads)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .target import AnatomyError


# --- parsing -------------------------------------------------------------------------------
def parse_res_usage(text: str) -> dict[str, dict]:
    """``cuobjdump -res-usage``: {function: {REG, STACK, SHARED, LOCAL, ...}}."""
    funcs, current = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            funcs[current] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            current = None
    return funcs


def entry_name(ptx: str) -> str:
    m = re.search(r"\.entry\s+([\w$.]+)\s*\(", ptx)
    if not m:
        raise AnatomyError("no .entry in the PTX")
    return m.group(1)


def parse_ptxas(log: str, entry: str | None = None) -> dict:
    """Registers, stack and spills from ptxas's report, for the entry function when named
    (the log also reports every called device function)."""
    if entry is not None:
        i = log.find(f"Compiling entry function '{entry}'")
        if i >= 0:
            j = log.find("Compiling ", i + 10)
            log = log[i:j if j > 0 else None]
    out = {}
    m = re.search(r"Used (\d+) registers", log)
    if m:
        out["registers"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        out["stack_bytes"], out["spill_store_bytes"], out["spill_load_bytes"] = map(int, m.groups())
    m = re.search(r"Used \d+ registers.*?(\d+) bytes smem", log)
    out["static_shared_bytes"] = int(m.group(1)) if m else 0
    return out


#: instruction classes of the mix, in display order
MIX_CLASSES = [
    "fp32 fma", "fp32 add", "fp32 mul", "fp32 other", "fp64", "fp16/bf16", "tensor mma",
    "global load 8", "global load 16", "global load 32", "global load 64", "global load 128", "global load 256",
    "global store 8", "global store 16", "global store 32", "global store 64", "global store 128",
    "global store 256",
    "shared load 32", "shared load 64", "shared load 128", "shared load other",
    "shared store 32", "shared store 64", "shared store 128", "shared store other",
    "async copy", "local load/store", "shuffle", "atomic", "barrier", "branch/control",
    "integer/address", "conversion", "special function", "move/other",
]
_INT = {"IMAD", "IADD3", "IADD", "LEA", "SHF", "LOP3", "ISETP", "IMNMX", "SEL", "IABS", "SHL", "SHR",
        "LOP", "IMUL", "XMAD", "FLO", "POPC", "BREV", "PRMT", "BMSK", "SGXT", "IDP", "UIADD3", "UIMAD",
        "ULEA", "USHF", "ULOP3", "UISETP", "USEL", "UPRMT", "ULDC", "VIADD", "VIMNMX", "IMNMX3", "R2UR"}
_CONTROL = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "BPT",
            "YIELD", "NANOSLEEP", "BMOV", "BREAK", "KILL", "ACQBULK", "ELECT", "PLOP3", "PSETP"}


def _width(mods: list[str]) -> int:
    for m in mods:
        if m in ("256", "128", "64", "32"):
            return int(m)
        if m in ("U8", "S8"):
            return 8
        if m in ("U16", "S16"):
            return 16
    return 32


@functools.lru_cache(maxsize=1 << 16)  # the model classifies the same lines in every pass
def classify(instr: str) -> str:
    """Class of one SASS instruction, e.g. ``@P0 LDG.E.128 R4, desc[UR4][R2.64] ;``."""
    text = instr.strip()
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else ""
    opcode = text.split(None, 1)[0].rstrip(";") if text else ""
    base, *mods = opcode.split(".")
    # FFMA2/FADD2/FMUL2 (sm_100+): two fp32 operations in one instruction, counted once here
    if base in ("FFMA", "FFMA2"):
        return "fp32 fma"
    if base in ("FADD", "FADD2"):
        return "fp32 add"
    if base in ("FMUL", "FMUL2"):
        return "fp32 mul"
    if base in ("FSETP", "FMNMX", "FSEL", "FCHK", "FSET", "FSWZADD", "FMNMX3"):
        return "fp32 other"
    if base in ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"):
        return "fp64"
    if base.startswith(("HADD", "HFMA", "HMUL", "HSET", "HMNMX")):
        ops = [o.strip() for o in text.split(None, 1)[1].split(",")] if " " in text else []
        if base == "HFMA2" and ops[1:3] == ["-RZ", "RZ"]:
            # -0 * 0 + (imm, imm): ptxas's idiom for loading a 32-bit constant, not fp16 math
            return "move/other"
        return "fp16/bf16"
    if base.endswith("MMA") or base in ("HGMMA", "QGMMA", "IGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA"):
        return "tensor mma"
    if base in ("LDG", "STG"):
        return f"global {'load' if base == 'LDG' else 'store'} {_width(mods)}"
    if base in ("LDS", "STS"):
        w = _width(mods)
        kind = "load" if base == "LDS" else "store"
        return f"shared {kind} {w}" if w in (32, 64, 128) else f"shared {kind} other"
    if base in ("LDSM", "STSM"):
        return "shared load other" if base == "LDSM" else "shared store other"
    if base in ("LDGSTS", "LDGDEPBAR", "DEPBAR", "UBLKCP", "UTMALDG", "UTMASTG", "SYNCS"):
        return "async copy"
    if base in ("LDL", "STL"):
        return "local load/store"
    if base == "SHFL":
        return "shuffle"
    if base in ("ATOM", "ATOMS", "ATOMG", "RED", "REDUX"):
        return "atomic"
    if base in ("BAR", "MEMBAR", "ERRBAR", "CCTL", "FENCE"):
        return "barrier"
    if base in _CONTROL:
        return "branch/control"
    if base in _INT or base.startswith("U") and base[1:] in _INT:
        return "integer/address"
    if base in ("F2F", "I2F", "F2I", "I2I", "F2FP", "I2FP", "F2IP", "FRND"):
        return "conversion"
    if base == "MUFU":
        return "special function"
    return "move/other"


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def instruction_mix(sass: str) -> dict[str, int]:
    """Static count of SASS instructions by class (NOPs left out)."""
    mix = dict.fromkeys(MIX_CLASSES, 0)
    for m in _SASS_LINE.finditer(sass):
        instr = m.group(1)
        if re.match(r"(@!?U?P\w+\s+)?NOP\b", instr):
            continue
        mix[classify(instr)] += 1
    return mix


# --- loops ----------------------------------------------------------------------------------
_SASS_ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass_lines(sass: str) -> list[tuple[int, str]]:
    """(address, instruction) for every SASS instruction of the listing, NOPs included."""
    return list(_parsed_lines(sass))


@functools.lru_cache(maxsize=256)  # one listing is walked by every estimate of its rung
def _parsed_lines(sass: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(m.group(1), 16), m.group(2)) for m in _SASS_ADDR.finditer(sass))


@dataclass
class Loop:
    """A loop of the SASS, found from its back edge (a branch to an earlier address).

    ``mix``: instructions per iteration by class (the whole body, nested loops included, NOPs
    left out); ``own_mix``: the body minus the nested loops' bodies; ``depth``: 0 for an
    outermost loop; ``parent``: index of the enclosing loop in ``Report.loops`` (or None);
    ``innermost``: no loop inside.  ``trips`` is filled by :func:`perfkit.model.dynamic_mix`
    (warp-iterations over the whole launch) when a problem is known.
    """

    start: int
    end: int
    mix: dict
    own_mix: dict
    depth: int = 0
    parent: int | None = None
    innermost: bool = True
    body: list = field(default_factory=list, repr=False)  # the instructions, in order

    @property
    def instructions(self) -> int:
        return sum(self.mix.values())

    def __str__(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in sorted(self.mix.items(), key=lambda kv: -kv[1]) if v)
        return f"loop 0x{self.start:04x}-0x{self.end:04x} (depth {self.depth}): {self.instructions} instr/iter: {top}"


_BRA = re.compile(r"(?:@!?U?P\w+\s+)?BRA(?:\.\S+)?\s+(?:!?U?P\w+\s*,\s*)?(?:`\(\S+\)\s*)?(0x[0-9a-f]+)")


def _branch_target(instr: str) -> int | None:
    """The target of a BRA.  The predicate may be a guard (@P0 BRA) or an operand (BRA.U UP0,
    0x730: sm_100's uniform back edges; @!P1 BRA !P3, 0x3030)."""
    m = _BRA.match(instr)
    return int(m.group(1), 16) if m else None


def _stub_return(addr: int, instr: str, target: int, branch: dict, before: dict) -> bool:
    """An out-of-line slow path's way back, not a loop: ptxas moves a rarely taken block (an
    mbarrier wait's retry, say) past the kernel's EXIT, enters it by a forward branch and ends it
    with an unconditional BRA to the instruction right after that branch.  The backward BRA then
    spans everything between, but no path from its target reaches it again except through the
    forward branch, which lies before the target.  So: an unpredicated BRA whose target follows
    a branch that jumps forward into the block holding this BRA (between the target and it)."""
    if instr.startswith("@") or target not in before:
        return False
    entry = branch.get(before[target])
    return entry is not None and target < entry <= addr


def find_loops(sass: str) -> list[Loop]:
    """Every loop of a SASS listing (one per back edge; several back edges to one header
    are one loop), outermost first.  A branch to itself (the trap after EXIT) is not a loop."""
    lines = sass_lines(sass)
    spans: dict[int, int] = {}
    branch = {a: _branch_target(ins) for a, ins in lines}
    before = {b: a for (a, _), (b, _) in zip(lines, lines[1:])}  # address -> the instruction's before it
    for addr, instr in lines:
        target = branch[addr]
        if target is not None and target < addr and not _stub_return(addr, instr, target, branch, before):
            spans[target] = max(spans.get(target, 0), addr)
    ordered = sorted(spans.items(), key=lambda se: (se[0], -se[1]))
    loops: list[Loop] = []
    for start, end in ordered:
        body = [ins for a, ins in lines if start <= a <= end and not re.match(r"(@!?U?P\w+\s+)?NOP\b", ins)]
        mix = {}
        for ins in body:
            c = classify(ins)
            mix[c] = mix.get(c, 0) + 1
        loops.append(Loop(start=start, end=end, mix=mix, own_mix=dict(mix), body=body))
    for i, lp in enumerate(loops):  # nesting: the tightest enclosing loop is the parent
        encl = [j for j, o in enumerate(loops) if j != i and o.start <= lp.start and lp.end <= o.end
                and (o.start, o.end) != (lp.start, lp.end)]
        if encl:
            lp.parent = min(encl, key=lambda j: loops[j].end - loops[j].start)
    for i, lp in enumerate(loops):
        d, p = 0, lp.parent
        while p is not None:
            d, p = d + 1, loops[p].parent
        lp.depth = d
        kids = [o for o in loops if o.parent == i]
        lp.innermost = not kids
        for k in kids:
            for c, n in k.mix.items():
                lp.own_mix[c] = lp.own_mix.get(c, 0) - n
    return loops


def _math(m: dict) -> int:
    return sum(v for k, v in m.items() if k.startswith(("fp32", "fp16", "fp64")))


def _mem(m: dict) -> int:
    return sum(v for k, v in m.items() if k.startswith(("global", "shared")))


def hot_loop_of(loops: list[Loop]) -> Loop | None:
    """The hot loop: the innermost loop doing the arithmetic work.

    Among the innermost loops, the one doing the most arithmetic (tensor mma, then
    fp32/fp16/fp64 math), then the one moving the most memory, then the largest body.  But the
    work may sit in a loop that is not innermost: a tensor-core k-loop whose tile loads are
    loops of their own (nested, innermost, with no mma).  So, kind by kind (tensor mma first,
    then the float math): if the best innermost loop does none of that kind while some loop's
    OWN body (its nested loops' bodies left out) does, the hot loop is the deepest such loop
    (then the most of that kind, the most memory, the largest body).  ``mix`` stays the whole
    body per iteration, nested loops included."""
    inner = [lp for lp in loops if lp.innermost]
    if not inner:
        return None

    def weight(lp):
        m = lp.mix
        return (m.get("tensor mma", 0), _math(m), _mem(m), lp.instructions)

    best = max(inner, key=weight)
    for score in (lambda m: m.get("tensor mma", 0), _math):
        if score(best.mix) > 0:
            return best
        doing = [lp for lp in loops if score(lp.own_mix) > 0]
        if doing:
            return max(doing, key=lambda lp: (lp.depth, score(lp.own_mix), _mem(lp.own_mix), lp.instructions))
    return best

