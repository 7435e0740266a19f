"""Branch rules: which instructions of a SASS body run.  Each if/else counts one arm
(:func:`one_path`, which asks :func:`zero_guard` and :func:`data_guard` what the branch
tests); blocks the SASS branches around without an else (:func:`guarded`) run only for the
warps that take them; :func:`bodies` cuts a listing into each loop's own body and the
straight-line code."""
from __future__ import annotations

import bisect
import functools
import re

from .pipes import opcode

#: A branch as cuobjdump prints it, the one reader of the model's path and scalar walks: BRA 0x1f0;
#: @!P0 BRA 0x1f0; BRA.U.ANY 0x1f0; a predicate operand instead of (or beside) the guard: BRA !P3,
#: 0x3030, sm_100's uniform back edges BRA.U UP0, 0x730.  Groups: 1 the guard (with its @), 2 the
#: predicate operand (with its comma), 3 the target.  (anatomy.sass's loop finder, a layer below,
#: keeps its own: its edits rebuild every stored anatomy.)
BRANCH = re.compile(r"^\s*(@!?U?P\w+\s+)?BRA(?:\.\w+)*\s+(!?U?P\w+\s*,\s*)?(?:`\()?(0x[0-9a-fA-F]+)")


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


def zero_guard(full: list[tuple[int, str]], at: int, guard: str, entry: list[tuple[int, str]] | None = None) -> int:
    """Whether the conditional branch at address ``at`` (guard ``@P0`` / ``@!P0``) tests a value
    against zero (``ISETP.NE ... RZ``, the compiler's specialisation for a zero divisor or an
    empty range): +1 when the branch is taken for a nonzero value (the fall-through arm is the
    zero case), -1 when it is taken for zero, 0 when it is not such a test.  With ``entry`` (the
    listing from the kernel's entry), a size held in registers (``ISETP.GT.AND.EX P0, PT, R5,
    RZ, PT, P0``: a 64-bit trip count) counts as one when every value the test reads comes from
    kernel parameters and constants (:func:`_lane_kind`: the same in every thread; rung 22's
    consumers test ``n_k > 0`` so)."""
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
    if not m and entry is not None:
        m = _ISETP_SIZE_REG.match(setter[0])
        if m and _lane_kind(entry, at, pred)[0] != _SAME:  # None (never written): per lane
            m = None
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
#: the same test on registers (their values checked to come from parameters by zero_guard)
_ISETP_SIZE_REG = re.compile(r"^ISETP\.(LT|GT|GE|LE|EQ)\.(U32\.)?AND(?:\.EX)?\s+P\w+\s*,\s*PT\s*,\s*"
                             r"(RZ|R\d+)\s*,\s*(RZ|R\d+)\s*,\s*(?:PT|!?P\w+)(?:\s*,\s*!?P\w+)?$")
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


#: registers and predicates as operands (a modifier or sign stripped by :func:`_regs`)
_REG = re.compile(r"^[-~!|]*(U?R\d+|U?P\d+)(?:\.\w+)*\|?$")
_IMM = re.compile(r"^-?0x[0-9a-fA-F]+$|^-?\d+$")
_LOADS = ("LD", "LDG", "LDS", "LDSM", "LDL", "ATOM", "ATOMS", "ATOMG", "RED", "SHFL", "VOTE", "MATCH", "REDUX")


@functools.lru_cache(maxsize=1 << 16)
def _regs(op: str) -> str | None:
    m = _REG.match(op.strip())
    return m.group(1) if m else None


@functools.lru_cache(maxsize=1 << 16)  # the same lines in every listing, loop and problem
def _split(text: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(opcode, destinations, sources) of one unguarded instruction: the first operand and the
    predicates right after it (a carry out, ISETP's second predicate) are written, the rest read;
    a ``.64``/``.WIDE`` result also writes the next register."""
    parts = text.split(None, 1)
    op = parts[0]
    args = [x.strip() for x in parts[1].split(",")] if len(parts) == 2 else []
    if not args:
        return op, (), ()
    n = 1
    while n < len(args) and re.match(r"^U?P(\d+|T)$", args[n]) and not op.startswith(("SEL", "FSEL", "PLOP3")):
        n += 1
    dst = [d for d in (_regs(a) for a in args[:n]) if d]
    if dst and dst[0].lstrip("U").startswith("R") and (".64" in op or ".WIDE" in op):
        r = dst[0]
        pre = "UR" if r.startswith("UR") else "R"
        dst.append(f"{pre}{int(r[len(pre):]) + 1}")
    return op, tuple(dst), tuple(args[n:])


#: what a value may be across the lanes of one warp, for :func:`warp_role`: the same in every
#: thread (parameters, constants, the block's index), the same in each aligned group of 32
#: threads (the thread index shifted right by 5 or more), the thread index and arithmetic on it,
#: anything (a load, a shuffle, another per-lane register)
_SAME, _WARP, _TID, _LANE = 0, 1, 2, 3


def warp_role(full: list[tuple[int, str]], at: int, guard: str) -> tuple[bool, int | None]:
    """Whether the predicate of the branch at ``at`` is uniform per warp and depends on the
    warp's index in the block (the role split of a warp-specialized kernel: ``if t // 128 == 0:
    producer else: consumer``): followed forward from the top of ``full`` (which must start at
    the kernel's entry), ``S2R SR_TID.X`` varies by lane; a right shift of it by 5 or more
    (``SHF.R``, ``LEA.HI``'s shifted operand, an AND that clears the low 5 bits) is the same in
    each warp; a comparison of it with an immediate multiple of 32 is too; any other value read
    by lane (another thread register, a load, a shuffle) keeps the test per lane.  Returns
    (whether, the threads of the group tested against zero: 2^shift, when the test is
    ``group == 0`` / ``!= 0`` on a shifted thread index, else None)."""
    g = guard.rstrip(",").strip().lstrip("@").lstrip("!")
    if not g or g in ("PT", "UPT"):
        return False, None
    kind, unit = _lane_kind(full, at, g)
    ok = kind == _WARP
    return ok, (unit if ok else None)


def _lane_kind(full: list[tuple[int, str]], at: int, reg: str) -> tuple[int | None, int | None]:
    """Register or predicate ``reg``'s kind (:data:`_SAME` ... :data:`_LANE`; None: never
    written) just before address ``at``, followed forward in address order from the top of
    ``full`` (control flow not followed: the last write before ``at`` counts; a guarded write
    keeps the worse of old and new); and for a per-warp value the threads of a group (2^shift)
    where known.  One pass a listing (:func:`_lane_writes`), then a lookup a branch: the kernel's
    every branch asks of the same listing."""
    addrs, ordered, hist = _lane_writes(tuple(full))
    if ordered:
        p = bisect.bisect_left(addrs, at)
    else:  # the walk stops at the first instruction at or past ``at``
        p = next((i for i, a in enumerate(addrs) if a >= at), len(addrs))
    idx, vals = hist.get(reg, ((), ()))
    j = bisect.bisect_left(idx, p) - 1
    return vals[j] if j >= 0 else (None, None)


@functools.lru_cache(maxsize=64)
def _lane_writes(full: tuple) -> tuple[list[int], bool, dict]:
    """The rules of :func:`_lane_kind` run once over the whole listing: the instructions'
    addresses, whether they are in order, and for each register the indices of the instructions
    that write it with its (kind, unit) after each write."""
    kind: dict = {}
    unit: dict = {}  # for a per-warp value: the threads of one group (2^shift)
    param: set = set()  # registers holding values derived from the kernel's parameters
    hist: dict = {}
    addrs = [a for a, _ in full]
    for i, (a, ins) in enumerate(full):
        text = ins.strip().rstrip(";").strip()
        guarded_by = None
        if text.startswith("@"):
            guarded_by, text = text.split(None, 1)
        op, dst, src = _split(text)
        base = op.split(".")[0]
        srcs = [r for r in (_regs(x) for x in src) if r and r not in ("RZ", "URZ", "PT", "UPT")]
        if guarded_by:
            srcs.append(guarded_by.lstrip("@!"))
        k = max((kind.get(r, _SAME) for r in srcs), default=_SAME)
        u = min((unit[r] for r in srcs if kind.get(r) == _WARP and r in unit), default=None)
        # a value read from the kernel's parameters (a size, an address) and what it reaches
        from_param = base in ("LDC", "ULDC", "S2UR") or "c[" in text or any(r in param for r in srcs)
        if base in ("S2R", "CS2R"):
            k = _TID if "SR_TID.X" in text else _LANE if any(
                x in text for x in ("SR_TID", "SR_LANEID", "SR_CLOCK", "SR_GLOBALTIMER")) else _SAME
        elif base in ("LDC", "ULDC"):  # a kernel parameter or constant: per lane only if indexed so
            pass
        elif base in _LOADS or base.startswith(("LD", "ATOM")):
            k = _LANE
        elif base in ("SHF", "USHF") and ".R." in op and len(src) >= 3 and _IMM.match(src[1]) \
                and int(src[1], 0) >= 5 and k == _TID:
            # t >> s: the warp's group for 5 <= s <= 9; 0 in every thread past that (t < 1024:
            # a sign or a high word)
            sh = int(src[1], 0)
            k, u = (_WARP, 1 << sh) if sh <= 9 else (_SAME, None)
        elif base in ("LEA", "ULEA") and ".HI" in op and len(src) >= 3:
            # LEA.HI d, a, b, s: b + (a >> (32 - s)): a is shifted right by 32 - s
            imms = [x for x in src[2:] if _IMM.match(x)]
            sh = 32 - int(imms[0], 0) if imms else 0
            ka, kb = kind.get(_regs(src[0]) or "", _SAME), kind.get(_regs(src[1]) or "", _SAME)
            rest = [kind.get(r, _SAME) for r in srcs if r not in (_regs(src[0]), _regs(src[1]))]
            ka = _WARP if ka == _TID and 5 <= sh <= 9 else _SAME if ka == _TID and sh > 9 else ka
            k = max([ka, kb] + rest)
        elif base in ("LOP3", "ULOP3") and len(src) >= 4 and k == _TID and ".LUT" in op \
                and src[3].lower() == "0xc0" and _IMM.match(src[1]) and not int(src[1], 0) & 31 \
                and kind.get(_regs(src[0]) or "", _SAME) == _TID:
            # an AND with a mask that clears the low 5 bits (t & ~127)
            mask = int(src[1], 0) & 0xFFFFFFFF
            low = (mask & -mask) or None
            k, u = (_WARP, low) if low and low <= 512 else (_SAME, None)
        if base in ("ISETP", "UISETP") and k == _WARP and any(
                not _IMM.match(x) and x not in ("RZ", "URZ") and kind.get(_regs(x) or "", _SAME) == _SAME
                for x in src[0:2]):
            # a per-warp value against a parameter (a row index against M: a bounds check), not a
            # role: kept out of the rule
            k, u = _LANE, None
        elif base in ("ISETP", "UISETP") and k == _TID:
            # the thread index compared with an immediate multiple of 32 is the same in each warp
            ops = src[0:2]
            if len(ops) == 2 and any(_IMM.match(x) and int(x, 0) % 32 == 0 and int(x, 0) for x in ops) \
                    and sum(1 for x in ops if kind.get(_regs(x) or "", _SAME) == _TID) == 1:
                k, u = _WARP, None
        if k == _WARP and from_param:
            # the warp's index mixed with a parameter (a row against M, the high words of a 64-bit
            # division's operands): a size or an address per warp, a bounds or fast-path test,
            # not a role
            k, u = _LANE, None
        for d in dst:
            if d in ("RZ", "URZ", "PT", "UPT"):
                continue
            if from_param:
                param.add(d)
            else:
                param.discard(d)
            if guarded_by:  # a conditional write: the value may be the old one
                k2 = max(k, kind.get(d, _SAME))
                kind[d] = k2
            else:
                kind[d] = k
            if k == _WARP and u is not None:
                unit[d] = u
            else:
                unit.pop(d, None)
            idx, vals = hist.setdefault(d, ([], []))
            if idx and idx[-1] == i:  # written twice by one instruction: the last write stands
                vals[-1] = (kind[d], unit.get(d))
            else:
                idx.append(i)
                vals.append((kind[d], unit.get(d)))
    return addrs, all(x <= y for x, y in zip(addrs, addrs[1:])), hist


def one_path(body: list[tuple[int, str]], full: list[tuple[int, str]] | None = None,
              dropped: list | None = None, divergent: list | None = None, roles: list | None = None,
              entry: list[tuple[int, str]] | None = None) -> list[tuple[int, str]]:
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

    Where the test is uniform per warp and depends on the warp's index in the block
    (:func:`warp_role`: the producer/consumer split of a warp-specialized kernel), both arms
    run, each in the warps of its role, at once: both are kept, and ``roles`` receives
    ``(start, end, split, group)`` for each arm (``split`` the branch's address; ``group``
    ``("first", n)`` for the arm of the n threads whose group index is 0, ``("rest", n)`` for the
    other, None where the SASS does not say which warps take it).  This rule comes before the
    zero test (``wg == 0`` is a comparison with zero too, but no arm of it is "not taken").

    ``full``: the whole listing of the range (nested loops included), used to size the arms;
    ``dropped`` receives the (start, end) address ranges left out, so that a nested loop inside
    a dropped arm can be told it does not run; ``divergent`` the two arms of each branch kept
    whole (a warp issues both, each thread runs one); ``entry``: the listing from the kernel's
    entry (default ``full``), where :func:`warp_role` follows the thread index."""
    import bisect

    full = full or body
    faddrs = [a for a, _ in full]
    ranges: list = []
    arms_here: list = []

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
        m = BRANCH.match(ins.strip())
        if not m or not (m.group(1) or m.group(2)):  # conditional: a guard or a predicate operand
            continue
        t = int(m.group(3), 16)
        if t <= a or not faddrs or t > faddrs[-1]:
            continue
        j = bisect.bisect_left(faddrs, t) - 1  # the instruction just before the branch target
        if j < 0 or faddrs[j] <= a:
            continue
        guard = (m.group(1) or m.group(2) or "").strip()
        # a size held in registers is read inside a role's arm only (rung 22's consumers); it
        # would hold elsewhere too, but there it changed the estimate of a recorded rung
        # (layernorm_bwd's lnb_col_params at 7c7b2e0), which waits for its record to be widened
        z = zero_guard(full, a, guard, (entry or full) if any(lo <= a < hi for lo, hi in arms_here) else None)
        prev = full[j][1].strip().rstrip(";").strip()
        m2 = BRANCH.match(full[j][1].strip())
        if prev == "EXIT" or (m2 and not (m2.group(1) or m2.group(2)) and int(m2.group(3), 16) > t):
            # warps of different roles (a warp-specialized kernel's producer and consumers) hold
            # the same SM's schedulers and pipes at once: both arms run, each in its warps
            role, n = warp_role(entry or full, a, guard)
            if role:
                if prev == "EXIT":
                    ends = [fa for fa, fi in full if fa >= t and fi.strip().rstrip(";").strip() == "EXIT"]
                    e = (ends[0] + 1) if ends else faddrs[-1] + 1
                else:
                    e = int(m2.group(3), 16)
                # which arm the group of index 0 takes: the one a test against zero selects for zero
                first = (t, e) if z < 0 else (a + 1, t) if z > 0 else None
                for arm in ((a + 1, t), (t, e)):
                    arms_here.append(arm)
                    grp = None if first is None or n is None else ("first" if arm == first else "rest", n)
                    if roles is not None:
                        roles.append((arm[0], arm[1], a, grp))
                continue
        if z and prev == "EXIT":
            # the arm before the target ends the kernel: the other runs from the target to the
            # next EXIT
            ends = [fa for fa, fi in full if fa >= t and fi.strip().rstrip(";").strip() == "EXIT"]
            e = (ends[0] + 1) if ends else faddrs[-1] + 1
            ranges.append((a + 1, t) if z > 0 else (t, e))
            continue
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
        m = BRANCH.match(ins.strip())
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


def bodies(lines, loops, dropped: list | None = None, divergent: list | None = None, roles: list | None = None):
    """Each loop's own body (its nested loops' bodies left out) and the straight-line code, as
    (address, instruction) lists, each if/else reduced to one arm (:func:`one_path`);
    ``dropped`` receives the address ranges of the arms left out, ``divergent`` those of the
    data-dependent if/else kept whole, ``roles`` those of the warp-role splits (both arms run)."""
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
                             full, dropped, divergent, roles, lines))
    straight = one_path([(a, ins) for a, ins in lines if a not in in_loop], lines, dropped, divergent, roles, lines)
    return own, straight


#: a test of a register against zero, ``ISETP.NE.AND P1, PT, R0, RZ, PT`` (or ``.EQ``), and an
#: ISETP that folds another predicate in (``ISETP.GE.OR.EX P0, PT, R11, R6, P1, P0``: P0 =
#: (R11 >= R6) OR P1; in the ``.EX`` form the last predicate is the low half's carry)
_ISETP_REG_ZERO = re.compile(r"^ISETP\.(NE|EQ)\.(?:U32\.)?AND\s+P\d+\s*,\s*PT\s*,\s*(R\d+)\s*,\s*RZ\s*,\s*PT$")
_ISETP_FOLD = re.compile(r"^ISETP\.\w+(?:\.U32)?\.(AND|OR)(\.EX)?\s+P\d+\s*,\s*PT\s*,\s*([^,]+),\s*([^,]+),\s*(!?P\w+)"
                         r"(?:\s*,\s*!?P\w+)?$")


def _last_write(full: list[tuple[int, str]], at: int, reg: str) -> tuple[int, str] | None:
    """The last unguarded instruction before ``at`` whose first operand is ``reg``, walking back in
    address order; where the code just before a branch target cannot fall through to it (an EXIT
    or an unconditional branch: the other arm of a warp-role split), the walk goes on from the
    forward branch that jumps there."""
    addrs = [a for a, _ in full]
    into: dict = {}
    for a, ins in full:
        m = BRANCH.match(ins.strip())
        if m and (m.group(1) or m.group(2)) and int(m.group(3), 16) > a:
            into.setdefault(int(m.group(3), 16), a)
    def cannot_fall_through(j):  # the instruction at index j ends its path
        prev = full[j][1].strip().rstrip(";").strip()
        m2 = BRANCH.match(prev)
        return prev == "EXIT" or bool(m2 and not (m2.group(1) or m2.group(2)))

    i = bisect.bisect_left(addrs, at)  # the walk comes from index i (``at``) to i - 1
    while i > 0:
        nxt = addrs[i] if i < len(addrs) else at
        if nxt in into and into[nxt] < nxt and cannot_fall_through(i - 1):
            i = bisect.bisect_left(addrs, into[nxt])  # on from the branch (it reads, does not write)
            continue
        i -= 1
        a, ins = full[i]
        text = ins.strip().rstrip(";").strip()
        if not text.startswith("@"):
            ops = text.split(None, 1)
            if len(ops) == 2 and ops[1].split(",")[0].strip() == reg:
                return a, text
    return None


def _true_off_thread0(full: list[tuple[int, str]], at: int, pred: str, value: bool, depth: int = 0) -> bool:
    """Whether predicate ``pred`` (as read at ``at``) equals ``value`` in every thread whose x
    index is not 0: set by ``ISETP.NE ... R, RZ`` (true there) or ``.EQ`` (false there) on the
    thread index straight from ``S2R SR_TID.X``, or an ISETP that ORs in (for true) or ANDs in
    (for false) such a predicate."""
    if depth > 4 or pred in ("PT", "UPT"):
        return False
    if pred.startswith("!"):
        return _true_off_thread0(full, at, pred[1:], not value, depth + 1)
    hit = _last_write(full, at, pred)
    if hit is None:
        return False
    a, text = hit
    m = _PLOP3_COPY.match(text)
    if m:
        return _true_off_thread0(full, a, m.group(1), value, depth + 1)
    m = _ISETP_REG_ZERO.match(text)
    if m and (m.group(1) == "NE") == value:
        src = _last_write(full, a, m.group(2))
        return bool(src) and re.match(r"^S2R\s+R\d+\s*,\s*SR_TID\.X$", src[1]) is not None
    m = _ISETP_FOLD.match(text)
    if m and (m.group(1) == "OR") == value:
        return _true_off_thread0(full, a, m.group(5), value, depth + 1)
    return False


def one_thread_arms(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """The blocks the SASS branches around in every thread but thread x == 0 (``if t == 0:``
    without an else: ``ISETP.NE.AND P1, PT, R0, RZ, PT`` on the thread index, ``@P1 BRA`` past
    the block, or a test folded into that predicate, ``if t == 0 and kt + 2 < n_k``), as (start,
    end) address ranges.  Only the warps holding such a thread enter them (one a block, for a
    block of one dimension); the others jump over the whole block, nested loops included.  A
    conditional EXIT of every thread but thread 0 (``@P1 EXIT``) leaves thread 0 alone up to
    the next EXIT."""
    addrs = [a for a, _ in lines]
    out = []
    for a, ins in lines:
        # ``if t != 0: return`` (``@P1 EXIT``): thread 0 alone runs on, to the next EXIT (rung 22's
        # producer: one thread of its warpgroup issues the copies)
        mx = re.match(r"^@(!?P\d+)\s+EXIT\s*;?$", ins.strip())
        if mx and _true_off_thread0(lines, a, mx.group(1), True):
            ends = [b for b, i2 in lines if b > a and i2.strip().rstrip(";").strip() == "EXIT"]
            if ends:
                out.append((a + 1, ends[0] + 1))
            continue
        m = BRANCH.match(ins.strip())
        if not m or not (m.group(1) or m.group(2)):
            continue
        t = int(m.group(3), 16)
        if t <= a:
            continue
        j = bisect.bisect_left(addrs, t) - 1
        if j < 0 or addrs[j] <= a:
            continue
        prev = lines[j][1].strip().rstrip(";").strip()
        m2 = BRANCH.match(lines[j][1].strip())
        if prev == "EXIT" or (m2 and not (m2.group(1) or m2.group(2)) and int(m2.group(3), 16) > t):
            continue  # an if/else: both arms run somewhere (one_path's business)
        guard = (m.group(1) or m.group(2) or "").strip().rstrip(",").strip().lstrip("@")
        if _true_off_thread0(lines, a, guard, True):
            out.append((a + 1, t))
    return out
