"""Loops whose trip count the SASS computes from the kernel's scalar arguments: the launch's
parameter bytes as the constant bank holds them (:func:`param_bank`, Numba's layout), and a small
evaluator of the integer code between a constant-bank load and a loop's counter (:func:`loop_count`).

Numba passes a kernel's arguments flattened: an array as 5 + 2 x ndim 8-byte fields (meminfo,
parent, nitems, itemsize, data, shape..., strides...), a scalar as one field of its own size,
each aligned to its size, from a fixed offset of constant bank 0: 0x160 up to sm_8x, 0x210 from
sm_90 (read from the SASS of conv ``tc_ldmatrix``: ``R`` of its 16 arguments at ``c[0x0][0x2a8]``
on sm_80, ``c[0x0][0x358]`` on sm_90: after four arrays of 2, 2, 1 and 2 dimensions and eight
int64 scalars).  A pointer (meminfo, parent, data) is unknown: code that needs one declines."""
from __future__ import annotations

import re

from .branches import BRANCH


class Unknown(Exception):
    """A value the evaluator cannot know (a thread index, a memory load, an unknown opcode, a
    path that does not dominate its use): the rule declines."""


_SIZES = {"int64": 8, "uint64": 8, "float64": 8, "int32": 4, "uint32": 4, "float32": 4, "int16": 2, "uint16": 2,
          "float16": 2, "int8": 1, "uint8": 1, "bool": 1, "boolean": 1}


def param_base(cc) -> int:
    """Constant-bank offset of the first kernel parameter for compute capability ``cc``."""
    return 0x210 if tuple(cc)[0] >= 9 else 0x160


def param_bank(signature, args, cc) -> dict:
    """{byte offset: byte} of the launch's parameters in constant bank 0 (unknown bytes absent):
    ``signature`` the kernel's argument types as Numba prints them (``array(float16, 2d, C)``,
    ``int64``, ``bool``), ``args`` the launch's values (arrays: anything with shape and dtype)."""
    import numpy as np

    out: dict = {}
    off = param_base(cc)
    if len(signature) != len(args):
        return out

    def put(at, value, size, signed=True):
        v = int(value) & ((1 << (8 * size)) - 1)
        for b in range(size):
            out[at + b] = (v >> (8 * b)) & 0xFF

    for t, a in zip(signature, args):
        t = str(t)
        m = re.match(r"array\((\w+), (\d+)d, (\w)\)", t)
        if m:
            nd = int(m.group(2))
            off = -(-off // 8) * 8
            shape = tuple(int(x) for x in getattr(a, "shape", ()) or ())
            try:
                item = np.dtype(m.group(1)).itemsize
            except TypeError:
                item = None
            if len(shape) == nd and item:
                n = 1
                for s in shape:
                    n *= s
                put(off + 16, n, 8)
                put(off + 24, item, 8)
                for k, s in enumerate(shape):
                    put(off + 40 + 8 * k, s, 8)
                if m.group(3) == "C":  # contiguous: strides follow from the shape
                    st = item
                    for k in range(nd - 1, -1, -1):
                        put(off + 40 + 8 * (nd + k), st, 8)
                        st *= shape[k]
            off += 8 * (5 + 2 * nd)
            continue
        size = _SIZES.get(t)
        if size is None:
            break  # a record, tuple or other: the offsets after it are not known
        off = -(-off // size) * size
        if t.startswith(("int", "uint", "bool")) and isinstance(a, (int, bool, np.integer, np.bool_)):
            put(off, int(a), size)
        elif t.startswith("float"):
            try:
                raw = np.array([a], dtype=t).view({8: np.uint64, 4: np.uint32, 2: np.uint16}[size])[0]
                put(off, int(raw), size)
            except (TypeError, ValueError):
                pass
        off += size
    return out


# --- a small evaluator of uniform integer SASS --------------------------------------------

_M32 = 0xFFFFFFFF
_CBANK = re.compile(r"^c\[0x0\]\[(0x[0-9a-fA-F]+)\]$")


def _split(ins: str):
    """(guard, opcode, operands) of one instruction."""
    s = ins.strip().rstrip(";").strip()
    guard = None
    m = re.match(r"^@(!?)(U?P\w+)\s+(.*)$", s)
    if m:
        guard = (m.group(2), m.group(1) == "!")
        s = m.group(3)
    op, _, rest = s.partition(" ")
    ops = [o.strip().replace(".reuse", "") for o in rest.split(",")] if rest.strip() else []
    return guard, op, ops


def _is_pred(o: str) -> bool:
    return bool(re.match(r"^!?U?P(T|\d+)$", o))


_NO_DEST = ("BRA", "EXIT", "BSSY", "BSYNC", "RET", "CALL", "BAR", "NOP", "WARPSYNC", "STG", "STS", "ST", "STL",
            "RED", "REDUX", "ATOM", "ATOMS", "MEMBAR", "DEPBAR", "ERRBAR", "CCTL", "YIELD", "UTMALDG", "UTMASTG",
            "FENCE", "ELECT", "JMP", "BREAK", "KILL", "NANOSLEEP", "ARRIVES")
_PAIRS = ("ISETP", "UISETP", "FSETP", "DSETP", "HSETP2", "PLOP3", "UPLOP3")


def _writes(op: str, ops: list) -> tuple[list[str], int]:
    """(the registers and predicates an instruction writes, how many leading operands name them).
    An instruction the evaluator does not run is taken to write up to four registers from its
    first (a 128-bit load, an mma's accumulators): a use of any of them then declines."""
    base = op.split(".")[0]
    if base in _NO_DEST or not ops:
        return [], 0
    if base in _PAIRS:
        return [o for o in ops[:2] if re.match(r"^U?P\d+$", o)], 2
    n = 1
    out = [ops[0]]
    if _is_pred(ops[0]) and base in ("LOP3", "ULOP3"):
        out, n = [ops[0], ops[1]], 2
    else:
        # the carry predicates that follow the destination (IADD3 R, P0, P1, ...; LEA.HI R, P0, ...)
        while n < len(ops) - 1 and n < 3 and re.match(r"^U?P(\d+|T)$", ops[n]):
            out.append(ops[n])
            n += 1
    m = re.match(r"^(U?R)(\d+)$", out[0])
    if m:
        width = 4 if (".128" in op or base in ("HMMA", "IMMA", "LDSM", "HGMMA", "LDGSTS")) else \
            2 if (".64" in op or ".WIDE" in op) else 1
        out[0:1] = [f"{m.group(1)}{int(m.group(2)) + j}" for j in range(width)]
    return [o for o in out if o not in ("RZ", "URZ", "PT", "UPT")], n


def _lut(a: int, b: int, c: int, lut: int) -> int:
    r = 0
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return r & _M32


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _cmp(kind: str, a: int, b: int) -> bool:
    return {"EQ": a == b, "NE": a != b, "LT": a < b, "LE": a <= b, "GT": a > b, "GE": a >= b}[kind]


def _combine(op: str, x: bool, y: bool) -> bool:
    return {"AND": x and y, "OR": x or y, "XOR": x != y}[op]


class Evaluator:
    """Values of registers and predicates at an address of a kernel's SASS, found by walking back
    to the definition that reaches it (the nearest one before, which every path to the use passes:
    no branch from outside jumps between them, no routine called between them writes it) and
    evaluating it from constant-bank words and immediates.  ``bank``: :func:`param_bank`."""

    def __init__(self, lines, bank: dict, loops=()):
        self.lines = [(a, ins) for a, ins in lines]
        self.addrs = [a for a, _ in self.lines]
        self.bank = bank
        self.loops = list(loops)
        self.parsed = [_split(ins) for _, ins in self.lines]
        self.written = [set(_writes(op, ops)[0]) for _, op, ops in self.parsed]
        self.branches = []  # (from, to)
        for a, ins in self.lines:
            m = BRANCH.match(ins)
            if m:
                self.branches.append((a, int(m.group(3), 16)))
        self.calls = [(a, int(m.group(1), 16)) for a, ins in self.lines
                      for m in [re.match(r"^(?:@!?P\w+\s+)?CALL\.\S+\s+(0x[0-9a-fA-F]+)", ins.strip())] if m]
        self.memo: dict = {}

    # -- words of the constant bank
    def word(self, off: int) -> int:
        try:
            return sum(self.bank[off + b] << (8 * b) for b in range(4))
        except KeyError:
            raise Unknown(f"c[0x0][{off:#x}]") from None

    def _routine_writes(self, target: int) -> set:
        out = set()
        for (a, _), (g, op, ops), w in zip(self.lines, self.parsed, self.written):
            if a < target:
                continue
            if op.startswith("RET"):
                break
            out.update(w)
        return out

    def dominates(self, d: int, u: int, ignore=None) -> bool:
        """Whether every path to ``u`` passes ``d`` (no branch from outside [d, u] lands in (d, u]),
        branches from inside the span ``ignore`` aside."""
        for a, t in self.branches:
            if ignore and ignore[0] <= a <= ignore[1]:
                continue
            if (a < d or a > u) and d < t <= u:
                return False
        return True

    def value(self, reg: str, u: int, ignore=None):
        """The value of ``reg`` (32-bit int, or bool for a predicate) just before address ``u``."""
        if reg in ("RZ", "URZ"):
            return 0
        if reg in ("PT", "UPT"):
            return True
        key = (reg, u, ignore)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = Unknown  # a cycle declines
        try:
            v = self._value(reg, u, ignore)
        except Unknown:
            self.memo[key] = Unknown
            raise
        self.memo[key] = v
        return v

    def _value(self, reg, u, ignore):
        import bisect

        k = bisect.bisect_left(self.addrs, u) - 1
        while k >= 0:
            d = self.addrs[k]
            g, op, ops = self.parsed[k]
            if reg in self.written[k]:
                if not self.dominates(d, u, ignore):
                    raise Unknown(f"{reg} at {u:#x}: its definition at {d:#x} does not reach it on every path")
                # a definition inside a loop that does not hold the use differs by iteration
                if any(lp.start <= d <= lp.end and not (lp.start <= u <= lp.end) for lp in self.loops):
                    raise Unknown(f"{reg}: defined inside a loop")
                for a, t in self.calls:
                    if d < a < u and reg in self._routine_writes(t):
                        raise Unknown(f"{reg}: a routine called at {a:#x} writes it")
                if g is not None:
                    p = self.value(g[0], d, ignore)
                    if p is Unknown:
                        raise Unknown("guard")
                    if bool(p) == g[1]:  # not executed: the definition before it reaches the use
                        k -= 1
                        continue
                return self.execute(op, ops, lambda r, d=d: self._read(r, d, ignore))[reg]
            k -= 1
        raise Unknown(f"{reg}: no definition before {u:#x}")

    def _read(self, r, d, ignore):
        v = self.value(r, d, ignore)
        if v is Unknown:
            raise Unknown(r)
        return v

    # -- one instruction
    def execute(self, op: str, ops: list, read) -> dict:
        """{written register: value} of one unpredicated instruction, its sources from ``read``."""
        parts = op.split(".")
        base = parts[0].lstrip("U") if parts[0] not in ("UMOV",) else "MOV"
        mods = set(parts[1:])

        def src(o, notx=False):
            neg = inv = False
            if o.startswith("-"):
                neg, o = True, o[1:]
            elif o.startswith("~"):
                inv, o = True, o[1:]
            if o.startswith("|"):
                raise Unknown("abs")
            m = _CBANK.match(o)
            if neg and re.match(r"^(0x[0-9a-fA-F]+|\d+)$", o):  # a negative immediate
                return (-int(o, 0)) & _M32, False
            if m:
                v = self.word(int(m.group(1), 16))
            elif re.match(r"^U?R(\d+|Z)$", o):
                v = read(o)
            elif re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", o):
                v = int(o, 0) & _M32
            else:
                raise Unknown(o)
            if inv:
                v = ~v & _M32
            return v, neg

        def val(o):
            v, neg = src(o)
            return (-v) & _M32 if neg else v

        def pred(o):
            neg = o.startswith("!")
            p = read(o.lstrip("!"))
            return (not p) if neg else bool(p)

        if base in ("LDC",) and parts[0] in ("LDC", "ULDC"):
            m = _CBANK.match(ops[1])
            if not m:
                raise Unknown("indexed constant load")
            off = int(m.group(1), 16)
            d = ops[0]
            out = {d: self.word(off)}
            if "64" in mods:
                mm = re.match(r"^(U?R)(\d+)$", d)
                out[f"{mm.group(1)}{int(mm.group(2)) + 1}"] = self.word(off + 4)
            return out
        if base == "MOV":
            return {ops[0]: val(ops[1])}
        if base == "SEL":
            return {ops[0]: val(ops[1]) if pred(ops[3]) else val(ops[2])}
        if base == "VIADD":
            return {ops[0]: (val(ops[1]) + val(ops[2])) & _M32}
        if base == "IMAD" and not (mods & {"WIDE", "HI", "SHL"}):
            d, a, b, c = ops[0], val(ops[1]), val(ops[2]), val(ops[3])
            s = a * b + c
            if "X" in mods:
                s += int(pred(ops[4]))
            return {d: s & _M32}
        if base == "IADD3":
            d = ops[0]
            rest = ops[1:]
            outs = []
            while rest and _is_pred(rest[0]) and not rest[0].startswith("!"):
                outs.append(rest.pop(0))
                if len(outs) == 2:
                    break
            srcs, cin = rest[:3], rest[3:]
            if "X" in mods:
                tot = 0
                for o in srcs:
                    v, neg = src(o)
                    tot += (~v & _M32) if neg else v  # with carries, a minus is the complement
                tot += sum(int(pred(p)) for p in cin if p not in ("!PT",))
            else:
                if cin:
                    raise Unknown("IADD3 carry-in")
                tot = 0
                for o in srcs:
                    v, neg = src(o)
                    tot += ((~v & _M32) + 1) if neg else v
            out = {d: tot & _M32}
            for p in outs:
                out[p] = bool(tot >> 32 & 1)
            return {k: v for k, v in out.items() if k not in ("RZ", "URZ", "PT", "UPT")}
        if base == "LOP3" and "LUT" in mods:
            if _is_pred(ops[0]):
                p, d, a, b, c, lut = ops[0], ops[1], ops[2], ops[3], ops[4], ops[5]
                r = _lut(val(a), val(b), val(c), int(lut, 0))
                return {k: v for k, v in ((p, r != 0), (d, r)) if k not in ("RZ", "URZ", "PT", "UPT")}
            return {ops[0]: _lut(val(ops[1]), val(ops[2]), val(ops[3]), int(ops[4], 0))}
        if base == "SHF" and len(ops) == 4:
            d, a, sh, b = ops[0], ops[1], ops[2], ops[3]
            n = val(sh)
            if n >= 32:
                raise Unknown("shift")
            if {"R", "S32", "HI"} <= mods:
                return {d: (_s32(val(b)) >> n) & _M32}
            if {"R", "U32", "HI"} <= mods:
                return {d: val(b) >> n}
            if {"L", "U32"} <= mods and "HI" not in mods:
                return {d: (val(a) << n) & _M32}
            raise Unknown(op)
        if base == "ISETP":
            kind = next((k for k in ("EQ", "NE", "LT", "LE", "GT", "GE") if k in mods), None)
            bop = next((k for k in ("AND", "OR", "XOR") if k in mods), None)
            if kind is None or bop is None:
                raise Unknown(op)
            pd, pq, a, b, pb = ops[0], ops[1], val(ops[2]), val(ops[3]), pred(ops[4])
            if "U32" not in mods:
                a, b = _s32(a), _s32(b)
            if "EX" in mods:
                chain = pred(ops[5])
                if kind == "EQ":
                    r = a == b and chain
                elif kind == "NE":
                    r = a != b or chain
                else:
                    r = _cmp(kind.replace("E", "T") if kind in ("LE", "GE") else kind, a, b) or (a == b and chain)
            else:
                r = _cmp(kind, a, b)
            out = {pd: _combine(bop, r, pb), pq: _combine(bop, not r, pb)}
            return {k: v for k, v in out.items() if k not in ("PT", "UPT")}
        raise Unknown(op)


def _why(*a):
    import os
    if os.environ.get("PERFKIT_SCALARS_DEBUG"):
        print("scalars:", *a)


def loop_count(lines, loops, i: int, bank: dict, cap: int = 1 << 16):
    """Iterations of loop ``i`` per entry, from the kernel's scalars: its back edge's predicate
    traced to the constant bank, the counter's recurrence run until the branch falls through;
    0 where a forward branch before the loop, on a predicate of the scalars, skips it.  Returns
    (iterations, how) or None where any step is not known (a thread index, a load, an opcode the
    evaluator lacks, a test inside an if of the body, more than ``cap`` iterations)."""
    lp = loops[i]
    ev = Evaluator(lines, bank, loops)
    body = [(k, a) for k, a in enumerate(ev.addrs) if lp.start <= a <= lp.end]
    if not body:
        return None
    kl, last = body[-1]
    g, op, ops = ev.parsed[kl]
    if g is None or not op.startswith("BRA") or not ops or int(ops[0], 0) != lp.start:
        return None
    own = (lp.start, lp.end)
    # skipped: a forward branch before the loop, over all of it, whose predicate the scalars decide
    for a, t in ev.branches:
        if a < lp.start and t > lp.end and ev.dominates(a, lp.start, ignore=own):
            k = ev.addrs.index(a)
            bg = ev.parsed[k][0]
            if bg is None:
                continue
            try:
                p = ev.value(bg[0], a)
            except Unknown:
                continue
            if p is Unknown:
                continue
            if bool(p) != bg[1]:
                return 0, f"skipped by the branch at {a:#x} (a test of the kernel's scalars)"
    # the body's instructions that the back edge's predicate depends on (to a fixed point)
    need = {g[0]}
    inner = [lp2 for j, lp2 in enumerate(loops) if j != i and lp.start <= lp2.start and lp2.end <= lp.end]
    spans = [(a, t) for a, t in ev.branches if lp.start <= a < t <= lp.end]
    chosen: set = set()
    carried: set = set()
    for _ in range(4):  # back from the back edge; what is still needed at the top comes round again
        live = {g[0]} | carried
        for k, a in reversed(body[:-1]):
            gg, o, oo = ev.parsed[k]
            w, nd = _writes(o, oo)
            if not set(w) & live:
                continue
            if any(x.start <= a <= x.end for x in inner) or any(s < a < t for s, t in spans):
                _why("count updated inside an if or a nested loop", hex(a))
                return None
            chosen.add(k)
            if gg is None:
                live -= set(w)
            live |= {x.lstrip("-~!") for x in oo[nd:] + ([gg[0]] if gg else [])
                     if re.match(r"^U?(R\d+|P\d+)$", x.lstrip("-~!"))}
        if live <= carried:
            break
        carried |= live
    steps = sorted(chosen)
    state: dict = {}

    def read(r):
        if r in state:
            return state[r]
        v = ev.value(r, lp.start, ignore=own)
        if v is Unknown:
            raise Unknown(r)
        state[r] = v
        return v

    try:
        n = 0
        while True:
            n += 1
            for k in steps:
                gg, o, oo = ev.parsed[k]
                if gg is not None and bool(read(gg[0])) == gg[1]:
                    continue
                state.update(ev.execute(o, oo, read))
            if bool(read(g[0])) == g[1]:
                break
            if n >= cap:
                return None
    except Unknown as e:
        _why(f"unknown {e}", n)
        return None
    return n, f"counted from the kernel's scalars ({len(steps)} instructions of the counter run to the exit)"
