"""Branch rules: which instructions of a SASS body run.  Each if/else counts one arm
(:func:`one_path`, which asks :func:`zero_guard` and :func:`data_guard` what the branch
tests); blocks the SASS branches around without an else (:func:`guarded`) run only for the
warps that take them; :func:`bodies` cuts a listing into each loop's own body and the
straight-line code."""
from __future__ import annotations

import re

from .pipes import opcode


_BRA = re.compile(r"^(@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+(!?U?P\w+\s*,\s*)?(?:`\()?(0x[0-9a-fA-F]+)")


_MEM_OP = re.compile(r"\b(LDG|STG|LDS|STS|LDGSTS|LD|ST)\b")
_MEM_WIDTH = re.compile(r"\b(?:LDG|STG|LDS|STS|LDGSTS|LD|ST)(?:\.\w+)*?\.(128|64)\b")


#: a test of a value against zero: in a register, a uniform register, or (sm_80/86/89, where a
#: kernel parameter is compared in place) the constant bank, ``c[0x0][0x284]``; sm_100 tests a
#: kernel parameter with the uniform datapath (``UISETP ... UP0``, branched on by ``BRA.U UP0``)
_ISETP_NE_ZERO = re.compile(r"^U?ISETP\.NE\.(?:U32\.)?AND(?:\.EX)?\s+(U?P\w+)\s*,\s*U?PT\s*,\s*"
                            r"(?:U?RZ\s*,\s*(?:U?R\w+\b|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])"
                            r"|(?:U?R\w+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*U?RZ\b)")


#: a predicate copied from another (``PLOP3.LUT P3, PT, PT, PT, UP0, 0x80, 0x0``: P3 = UP0, as
#: sm_89 moves a uniform test into a predicate register before branching on it)
_PLOP3_COPY = re.compile(r"^PLOP3\.LUT\s+U?P\w+\s*,\s*U?PT\s*,\s*U?PT\s*,\s*U?PT\s*,\s*(!?U?P\w+)\s*,\s*0x80\s*,\s*0x0$")


def _predicate_setter(full: list[tuple[int, str]], at: int, pred: str) -> tuple[str, list[str], bool] | None:
    """The last unguarded instruction before address ``at`` whose first operand is ``pred``
    (the instruction that set a branch's predicate), followed through predicate copies
    (:data:`_PLOP3_COPY`): (text, operands, negated), ``negated`` where a copy inverted it; or
    None."""
    neg = False
    for _ in range(4):
        hit = None
        for a, ins in reversed(full):
            if a >= at:
                continue
            text = ins.strip().rstrip(";").strip()
            if text.startswith("@"):
                continue
            ops = text.split(None, 1)
            if len(ops) == 2 and ops[1].split(",")[0].strip() == pred:
                hit = (a, text, [x.strip() for x in ops[1].split(",")])
                break
        if hit is None:
            return None
        m = _PLOP3_COPY.match(hit[1])
        if not m:
            return hit[1], hit[2], neg
        src = m.group(1)
        neg ^= src.startswith("!")
        pred, at = src.lstrip("!"), hit[0]
    return None


def zero_guard(full: list[tuple[int, str]], at: int, guard: str) -> int:
    """Whether the conditional branch at address ``at`` (guard ``@P0`` / ``@!P0``) tests a value
    against zero (``ISETP.NE ... RZ``, the compiler's specialisation for a zero divisor or an
    empty range): +1 when the branch is taken for a nonzero value (the fall-through arm is the
    zero case), -1 when it is taken for zero, 0 when it is not such a test."""
    g = guard.rstrip(",").strip().lstrip("@")
    neg = g.startswith("!")
    pred = g.lstrip("!")
    if not pred or pred in ("PT", "UPT"):
        return 0
    setter = _predicate_setter(full, at, pred)
    if setter is None:
        return 0
    if _ISETP_NE_ZERO.match(setter[0]):
        return -1 if neg ^ setter[2] else 1
    m = _ISETP_SIZE.match(setter[0])
    if not m:
        return 0
    cmp, a, b = m.group(1), m.group(3).strip(), m.group(4).strip()
    sign = _SIZE_TESTS.get((cmp, a in ("RZ", "URZ"), b in ("RZ", "URZ")), 0)  # one side zero
    if not sign:
        return 0
    return -sign if neg ^ setter[2] else sign


#: a size (a kernel parameter or a uniform value: a uniform register or the constant bank)
#: compared with zero: ``0 < n`` / ``n > 0`` (+1: true for a nonempty range), ``0 >= n`` /
#: ``n <= 0`` / ``n == 0`` (-1: true for an empty one); the tensor-core GEMMs' "no k tiles" test
_ISETP_SIZE = re.compile(r"^U?ISETP\.(LT|GT|GE|LE|EQ)\.(U32\.)?AND(?:\.EX)?\s+U?P\w+\s*,\s*U?PT\s*,\s*"
                         r"(U?RZ|UR\d+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*"
                         r"(U?RZ|UR\d+|c\[0x[0-9a-fA-F]+\]\[0x[0-9a-fA-F]+\])\s*,\s*(?:U?PT|!?U?P\w+)(?:\s*,\s*!?U?P\w+)?$")
_SIZE_TESTS = {("LT", True, False): 1, ("GT", False, True): 1, ("GE", True, False): -1,
               ("LE", False, True): -1, ("EQ", True, False): -1, ("EQ", False, True): -1}


_REG_OPERAND = re.compile(r"^-?\|?R\d+\|?(?:\.\w+)*$")


def data_guard(full: list[tuple[int, str]], at: int, guard: str) -> str | None:
    """What sets the predicate of the conditional branch at ``at``: ``"data"`` for a float
    comparison of two registers (``FSETP.GT.AND P1, PT, R11, R16, PT``: a loaded value against
    a running max: the lanes of a warp hold different values, so the warp diverges and runs
    both arms), ``"special"`` for a float comparison with a constant (``R4`` against ``-INF``:
    a special value, whose arm is the short one that returns a constant or calls a slow
    path), None otherwise."""
    g = guard.rstrip(",").strip().lstrip("@").lstrip("!")
    if not g or g in ("PT", "UPT"):
        return None
    setter = _predicate_setter(full, at, g)
    if setter is None or not setter[0].startswith("FSETP"):
        return None
    args = setter[1]
    regs = len(args) >= 4 and all(_REG_OPERAND.match(x) and x.strip("-|") != "RZ" for x in args[2:4])
    return "data" if regs else "special"


def one_path(body: list[tuple[int, str]], full: list[tuple[int, str]] | None = None,
              dropped: list | None = None, divergent: list | None = None) -> list[tuple[int, str]]:
    """A body with each if/else of the SASS reduced to one arm: a conditional forward branch
    whose skipped block ends in an unconditional forward branch over a second block (the
    compiler's if/else) runs one of the two blocks, not both.  The arm kept is the fast path a
    full tile takes: the one whose memory instructions are wider (16-byte vectors rather than an
    element-by-element edge path), else the shorter; an arm holding a CALL is never preferred
    (the called routine's instructions are not in the listing).  Where the branch tests a value
    against zero (:func:`zero_guard`), the zero case is the arm left out, whatever its size:
    the compiler's copy of a loop for a zero divisor or an empty range (an arm that ends in
    EXIT counts as one of the two here).  Where it compares two float registers
    (:func:`data_guard`: online softmax's new-max test), both arms are kept: the warp diverges;
    where it compares a float with a constant (``x != -inf``), the longer arm is kept.

    ``full``: the whole listing of the range (nested loops included), used to size the arms;
    ``dropped`` receives the (start, end) address ranges left out, so that a nested loop inside
    a dropped arm can be told it does not run; ``divergent`` the two arms of each branch kept
    whole (a warp issues both, each thread runs one)."""
    import bisect

    full = full or body
    faddrs = [a for a, _ in full]
    ranges: list = []

    def gone(a: int) -> bool:
        return any(lo <= a < hi for lo, hi in ranges)

    def size(lo: int, hi: int) -> tuple:
        """(calls, -bytes per memory instruction, instructions): smaller is the arm taken."""
        arm = [ins for a, ins in full if lo <= a < hi and not gone(a)]
        if any("CALL" in ins for ins in arm):
            return (1, 0.0, float("inf"))
        n = float(sum(1 for ins in arm if not ins.strip().startswith("NOP")))
        mem = [_MEM_WIDTH.search(ins) for ins in arm if _MEM_OP.search(ins)]
        widths = [int(m.group(1)) // 8 if m else 4 for m in mem]
        per = sum(widths) / len(widths) if widths else 0.0
        return (0, -per, n)

    for a, ins in body:
        if gone(a):
            continue
        m = _BRA.match(ins.strip())
        if not m or not (m.group(1) or m.group(2)):  # conditional: a guard or a predicate operand
            continue
        t = int(m.group(3), 16)
        if t <= a or not faddrs or t > faddrs[-1]:
            continue
        j = bisect.bisect_left(faddrs, t) - 1  # the instruction just before the branch target
        if j < 0 or faddrs[j] <= a:
            continue
        z = zero_guard(full, a, (m.group(1) or m.group(2) or "").strip())
        prev = full[j][1].strip().rstrip(";").strip()
        if z and prev == "EXIT":
            # the arm before the target ends the kernel: the other runs from the target to the
            # next EXIT
            ends = [fa for fa, fi in full if fa >= t and fi.strip().rstrip(";").strip() == "EXIT"]
            e = (ends[0] + 1) if ends else faddrs[-1] + 1
            ranges.append((a + 1, t) if z > 0 else (t, e))
            continue
        m2 = _BRA.match(full[j][1].strip())
        if not m2 or m2.group(1) or m2.group(2):
            continue
        e = int(m2.group(3), 16)
        if z > 0 and a < e < t:
            # the zero case falls through into a copy that ends in a loop's unconditional back
            # edge (its exit jumps past the other arm: sm_100's conv k loop for C == 0); the
            # branch, taken for a nonzero value, skips it
            ranges.append((a + 1, t))
            continue
        if e <= t:
            continue
        fcmp = data_guard(full, a, (m.group(1) or m.group(2) or "").strip())
        if fcmp == "data":
            # lanes disagree: the warp runs both arms, each lane one of them
            if divergent is not None:
                divergent.extend([(a + 1, t), (t, e)])
            continue
        a_arm, b_arm = (a + 1, t), (t, e)
        if z:  # one arm is the case of a value equal to zero (a divisor, a size): the other runs
            ranges.append(a_arm if z > 0 else b_arm)
            continue
        sa, sb = size(*a_arm), size(*b_arm)
        if sa[0] and sb[0]:
            continue
        if fcmp == "special" and not (sa[0] or sb[0]):
            # a special value's arm is the short one: the common case is the longer
            ranges.append(a_arm if sa[2] < sb[2] else b_arm)
            continue
        ranges.append(a_arm if sa > sb else b_arm)
    if dropped is not None:
        dropped.extend(ranges)
    return [(a, ins) for a, ins in body if not gone(a)]


def forward_spans(pairs: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(branch address, target) of each conditional forward branch in ``pairs``."""
    spans = []
    for a, ins in pairs:
        m = _BRA.match(ins.strip())
        if m and (m.group(1) or m.group(2)):
            t = int(m.group(3), 16)
            if t > a:
                spans.append((a, t))
    return spans


def guarded(pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The instructions of ``pairs`` that a conditional forward branch of ``pairs`` jumps over
    (the body of an ``if`` without ``else`` that the compiler branched around, rather than
    predicated): a warp whose threads all fail the test skips them."""
    spans = forward_spans(pairs)
    # a predicated EXIT before shared accesses (``if grp == 0:`` after a barrier, compiled as
    # ``@P0 EXIT``: batchnorm split's merge of the groups' partials): the warps whose threads
    # all leave there skip the rest of the code
    for a, ins in pairs:
        if re.match(r"@!?U?P\d+\s+EXIT\b", ins.strip()) and any(
                b > a and opcode(i).split(".")[0] in ("LDS", "STS", "LDSM") for b, i in pairs):
            spans.append((a, float("inf")))
    return [(a, ins) for a, ins in pairs if any(lo < a < hi for lo, hi in spans)]


def bodies(lines, loops, dropped: list | None = None, divergent: list | None = None):
    """Each loop's own body (its nested loops' bodies left out) and the straight-line code, as
    (address, instruction) lists, each if/else reduced to one arm (:func:`one_path`);
    ``dropped`` receives the address ranges of the arms left out, ``divergent`` those of the
    data-dependent if/else kept whole."""
    in_loop = set()
    for lp in loops:
        for a, _ in lines:
            if lp.start <= a <= lp.end:
                in_loop.add(a)
    own = []
    for i, lp in enumerate(loops):
        kids = [o for o in loops if o.parent == i]
        full = [(a, ins) for a, ins in lines if lp.start <= a <= lp.end]
        own.append(one_path([(a, ins) for a, ins in full if not any(k.start <= a <= k.end for k in kids)],
                             full, dropped, divergent))
    straight = one_path([(a, ins) for a, ins in lines if a not in in_loop], lines, dropped, divergent)
    return own, straight
