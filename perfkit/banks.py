"""Shared-memory bank conflicts counted with no GPU: run a rung in Numba's CUDA simulator,
record every thread's shared-memory address at every access, and count the wavefronts each
warp-wide access needs, as the hardware does.

Public API (other modules build on it; keep it stable)::

    rep = banks.count(variant, problem)          # BankReport of the launches of one run
    rep.wavefronts, rep.ideal, rep.conflicts     # totals over the simulated blocks
    rep.degree                                   # wavefronts / ideal (1.0: conflict free)
    rep.load_degree, rep.store_degree            # the same for loads and for stores
    rep.sites                                    # per source line: accesses, wavefronts, ideal
    rep.scaled(f)                                # every count times f (e.g. to a full grid)
    banks.wavefronts(addresses, width)           # one warp-wide access: (wavefronts, ideal)
    rep.coalescing(launch=None)                  # global memory, same simulation: requests,
                                                 # sectors and lines per request, efficiency
    rep.gsites                                   # per source line: requests, sectors, lines
    banks.small_problem(variant, problem)        # a shrunken twin of problem to simulate

The rule (NVIDIA's shared memory: 32 banks, 4 bytes wide, one wavefront serves each bank once):

* a warp-wide access of 4 bytes (or less) per thread is served in one phase of 32 threads;
  64-bit and 128-bit accesses in two phases of 16 threads (half-warps);
* within a phase, the wavefronts needed are the largest number of DISTINCT 4-byte words any
  one bank holds among the addresses of the active threads (threads reading the same word
  are served together: a broadcast).  A half-warp of distinct 128-bit accesses holds 64 words,
  two in every bank: 2 wavefronts, so a conflict-free ``LDS.128`` costs 4, as the quarter-warp
  phases of the CUDA C++ Best Practices Guide ("Shared Memory and Memory Banks") also give.
  Where lanes share 16-byte words the half-warp rule gives fewer: a warp-uniform ``LDS.128``
  costs 2 (one per half), not 4.  Nsight Compute on the H100 (the shared ncu table at
  7c7b2e0) says so: the warp-shuffle norm rungs, whose only 128-bit loads are broadcasts of
  the per-warp partials, and GEMM rungs 07/08, whose ``LDS.128`` lanes read two distinct
  16-byte words per half-warp, are within 4% of the model's count under the half-warp rule,
  and were 25-34% below it under the quarter-warp one;
* ``ideal`` is, per phase with an active thread, the distinct words over 32 (at least 1);
  ``conflicts = wavefronts - ideal`` (what ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``
  counts).

How accesses are grouped into warp-wide instructions: an access site is a source line and a
direction (load or store); the k-th access of a thread at a site belongs with the k-th access
of the other threads of its warp at that site (true for non-divergent code, which is what
kernels with shared memory and barriers are).  The compiler turns runs of a thread's
consecutive accesses to adjacent words at one site (``reg[j] = S[r, c + j]`` for j in 0..3)
into one 64- or 128-bit instruction when the run's start is aligned to its size; the same
merge is applied here, so an unrolled ``LDS.128`` is counted as one.  Shared arrays are laid
out one after another in the order a block first touches them, each 16-byte aligned.

Global memory (coalescing) is recorded in the same run: every element a thread reads or
writes in a kernel argument, with its byte address (each buffer 256-byte aligned, as
``cudaMalloc`` gives); the k-th access of each lane at a site is one warp-wide request, which
touches some 32-byte sectors and 128-byte lines.  Lines per request is what the L1 spends on
it (1 for a coalesced 4-byte warp access; 32 when every thread walks its own row, as in the
naive GEMM, whose H100 time 275 ms is its 33 lines per k-step at one line per clock per SM).

Cost: the simulator runs every thread as a Python thread, so simulate a small problem
(:func:`small_problem`) and at most ``max_blocks`` blocks of each launch; the conflict DEGREE
per access site does not depend on the size, and :mod:`perfkit.model` multiplies it by the
number of shared-memory instructions the compiled kernel executes at the real size.  Results
are cached on disk next to the anatomy cache.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _simfix, cache, static

__all__ = ["BankReport", "count", "wavefronts", "small_problem", "BankError"]

BANKS = 32
WORD = 4


class BankError(RuntimeError):
    """The rung cannot be simulated for bank counting (the message says why)."""


def wavefronts(addresses, width: int = 4) -> tuple[int, int]:
    """Wavefronts and the ideal number for ONE warp-wide shared access.

    ``addresses``: the byte address of each active thread, in lane order (``None`` or a
    missing lane: inactive), ``width``: bytes per thread (1, 2, 4, 8 or 16).
    """
    lanes = list(addresses)
    width = int(width)
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"width must be 1, 2, 4, 8 or 16 bytes, got {width}")
    per_phase = 32 if width <= 4 else 16
    total = ideal = 0
    for p0 in range(0, max(len(lanes), 1), per_phase):
        words_by_bank: dict[int, set] = {}
        active = False
        for a in lanes[p0:p0 + per_phase]:
            if a is None:
                continue
            active = True
            first = int(a) // WORD
            last = (int(a) + max(width, 1) - 1) // WORD
            for w in range(first, last + 1):
                words_by_bank.setdefault(w % BANKS, set()).add(w)
        if active:
            ideal += max(1, -(-sum(len(s) for s in words_by_bank.values()) // BANKS))
            total += max(len(s) for s in words_by_bank.values())
    return total, ideal


@dataclass
class BankReport:
    """Shared-memory accesses of the simulated blocks, as warp-wide instructions."""

    variant: str
    problem: str
    blocks: int                   # blocks simulated (over all launches)
    accesses: int = 0             # warp-wide shared instructions
    wavefronts: int = 0
    ideal: int = 0
    load_accesses: int = 0
    load_wavefronts: int = 0
    load_ideal: int = 0
    store_accesses: int = 0
    store_wavefronts: int = 0
    store_ideal: int = 0
    sites: list = field(default_factory=list)  # dicts: file, line, kind, width, accesses, wavefronts, ideal
    # global memory, from the same simulation: per launch, warp-wide requests and the 32-byte
    # sectors and 128-byte lines they touch (``gsites``: the same per source line)
    global_launches: list = field(default_factory=list)  # dicts: requests, sectors, lines, ideal_sectors (load_/store_)
    gsites: list = field(default_factory=list)           # dicts: file, line, kind, width, requests, sectors, lines

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal

    @property
    def degree(self) -> float:
        return self.wavefronts / self.ideal if self.ideal else 1.0

    @property
    def load_degree(self) -> float:
        return self.load_wavefronts / self.load_ideal if self.load_ideal else 1.0

    @property
    def store_degree(self) -> float:
        return self.store_wavefronts / self.store_ideal if self.store_ideal else 1.0

    def coalescing(self, launch: int | None = None) -> dict:
        """Global-memory requests of the simulated blocks (one launch, or all): ``requests``,
        ``sectors`` and ``lines`` touched, ``sectors_per_request``, ``lines_per_request`` (1-4 for
        a coalesced warp, up to 32 when every thread has its own line) and ``efficiency``
        (ideal sectors / sectors: 1.0 when no byte of a fetched sector goes unused)."""
        ls = self.global_launches if launch is None else self.global_launches[launch:launch + 1]
        out = {}
        for pre in ("", "load_", "store_"):
            for k in ("requests", "sectors", "lines", "ideal_sectors"):
                out[pre + k] = sum(d.get(pre + k, 0) for d in ls)
        r = max(out["requests"], 1)
        out["sectors_per_request"] = out["sectors"] / r
        out["lines_per_request"] = out["lines"] / r
        out["load_lines_per_request"] = out["load_lines"] / max(out["load_requests"], 1)
        out["store_lines_per_request"] = out["store_lines"] / max(out["store_requests"], 1)
        out["efficiency"] = out["ideal_sectors"] / out["sectors"] if out["sectors"] else 1.0
        return out

    def table(self) -> str:
        """Per source line, the shared accesses (wavefronts per access: 1 is conflict free) and
        the global requests (sectors and 128-byte lines per request), as text."""
        out = [str(self)]
        if self.global_launches:
            co = self.coalescing()
            out.append(f"global memory: {co['requests']:g} warp requests, {co['sectors_per_request']:.2f} sectors "
                       f"and {co['lines_per_request']:.2f} lines per request (loads {co['load_lines_per_request']:.2f}, "
                       f"stores {co['store_lines_per_request']:.2f}), sector efficiency {co['efficiency']:.2f}")
        rows = [(s["file"], s["line"], "shared " + s["kind"], s["width"], s["accesses"],
                 f"{s['wavefronts'] / max(s['accesses'], 1):.2f} wavefronts/access") for s in self.sites]
        rows += [(s["file"], s["line"], "global " + s["kind"], s["width"], s["requests"],
                  f"{s['sectors'] / max(s['requests'], 1):.2f} sectors, {s['lines'] / max(s['requests'], 1):.2f} lines/request")
                 for s in self.gsites]
        for f, ln, kind, w, n, what in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
            out.append(f"  {f}:{ln:<5d} {kind:13s} {w:>2d} B x {n:>7g}  {what}")
        return "\n".join(out)

    def scaled(self, factor: float) -> "BankReport":
        """Every count multiplied by ``factor`` (sites too), e.g. blocks in the grid / blocks run."""
        d = dataclasses.asdict(self)
        for k in ("accesses", "wavefronts", "ideal", "load_accesses", "load_wavefronts", "load_ideal",
                  "store_accesses", "store_wavefronts", "store_ideal"):
            d[k] = d[k] * factor
        d["sites"] = [{**s, **{k: s[k] * factor for k in ("accesses", "wavefronts", "ideal")}} for s in self.sites]
        d["global_launches"] = [{k: v * factor for k, v in g.items()} for g in self.global_launches]
        d["gsites"] = [{**s, **{k: s[k] * factor for k in ("requests", "sectors", "lines")}} for s in self.gsites]
        return BankReport(**d)

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "conflicts": self.conflicts, "degree": self.degree}

    def __str__(self) -> str:
        return (f"shared memory of {self.variant} at {self.problem} ({self.blocks} block(s) simulated): "
                f"{self.accesses:g} warp accesses, {self.wavefronts:g} wavefronts, ideal {self.ideal:g}, "
                f"conflicts {self.conflicts:g} (degree {self.degree:.2f}; loads {self.load_degree:.2f}, "
                f"stores {self.store_degree:.2f})")


# --- recording --------------------------------------------------------------------------------
class _Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.bases: dict[int, int] = {}     # id(shared array buffer) -> byte base
        self.keep: list = []                # keep arrays alive so ids stay unique
        self.next_base = 0
        self.events: dict = {}              # (block, thread) -> list of (site, addr, size)
        self.gevents: dict = {}             # the same for global memory
        self.gbases: dict[int, int] = {}    # id(root buffer of a global array) -> a 256-byte aligned base
        self.gsizes: dict[int, int] = {}    # that base -> the buffer's bytes
        self.next_gbase = 1 << 30

    def _place(self, bases: dict, arr: np.ndarray, next_attr: str, nbytes: int, align: int) -> int:
        """``arr``'s base address in one address space, given once: checked again under the
        lock, because the simulator's threads race to place the same array."""
        key = id(arr)
        b = bases.get(key)
        if b is None:
            with self.lock:
                b = bases.get(key)
                if b is None:
                    b = bases[key] = getattr(self, next_attr)
                    self.keep.append(arr)
                    setattr(self, next_attr, -(-(b + nbytes) // align) * align)
        return b

    def gbase_of(self, root: np.ndarray) -> int:
        # cudaMalloc aligns to 256 bytes; a byte past the end keeps two buffers from touching
        b = self._place(self.gbases, root, "next_gbase", root.nbytes + 1, 256)
        self.gsizes.setdefault(b, int(root.nbytes))
        return b

    def base_of(self, arr: np.ndarray) -> int:
        return self._place(self.bases, arr, "next_base", arr.nbytes, 16)


_REC: _Recorder | None = None


def _offsets(arr: np.ndarray, index) -> list[int]:
    """Element offsets (C order) that ``arr[index]`` touches."""
    if not isinstance(index, tuple):
        index = (index,)
    try:
        if len(index) == arr.ndim and all(isinstance(i, (int, np.integer)) for i in index):
            flat = 0
            for i, n in zip(index, arr.shape):
                i = int(i)
                if i < 0:
                    i += n
                flat = flat * n + i
            return [flat]
    except TypeError:
        pass
    return [int(x) for x in np.arange(arr.size).reshape(arr.shape)[index].ravel()]


class _Shared(np.ndarray):
    """A simulator shared array that reports its accesses to the recorder."""

    def _note(self, index, kind):
        rec = _REC
        if rec is None:
            return
        t = threading.current_thread()
        tid = getattr(t, "thread_id", None)
        if tid is None:
            return
        base_arr = self.base if isinstance(self.base, np.ndarray) and self.base is not None else self
        while isinstance(base_arr.base, np.ndarray):
            base_arr = base_arr.base
        base = rec.base_of(base_arr)
        caller = sys._getframe(2)
        # one site per source line, direction and shared array: a line that reads two arrays
        # (``acc += As[ty, k] * Bs[k, tx]``) is two instructions, each with its own run of
        # addresses to merge
        site = (caller.f_code.co_filename, caller.f_lineno, kind, base)
        size = self.itemsize
        blk = tuple(t.blockIdx) if hasattr(t, "blockIdx") else (0, 0, 0)
        lst = rec.events.setdefault((blk, tid), [])
        for off in _offsets(self, index):
            lst.append((site, base + off * size, size))

    def __getitem__(self, index):
        self._note(index, "load")
        return np.ndarray.__getitem__(self.view(np.ndarray), index)

    def __setitem__(self, index, value):
        self._note(index, "store")
        np.ndarray.__setitem__(self.view(np.ndarray), index, value)


def _access_site(kind):
    """(file, line, kind) of the kernel line that made an access: the first frame outside this
    module and Numba's simulator."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__ or "numba" in f.f_code.co_filename
                             and "simulator" in f.f_code.co_filename):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno, kind) if f is not None else ("?", 0, kind)


class _Global(np.ndarray):
    """A kernel argument's buffer in the simulator that reports each element access (not the
    taking of a view) with its byte address."""

    def _note(self, index, kind):
        rec = _REC
        if rec is None:
            return
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != self.ndim or not all(isinstance(i, (int, np.integer)) for i in index):
            return  # a view (x[r]) or a slice: its elements are noted when they are read
        t = threading.current_thread()
        tid = getattr(t, "thread_id", None)
        if tid is None:
            return
        root = self
        while isinstance(root.base, np.ndarray):
            root = root.base
        addr = rec.gbase_of(root) + (self.__array_interface__["data"][0] - root.__array_interface__["data"][0])
        for i, n, st in zip(index, self.shape, self.strides):
            i = int(i)
            addr += (i + n if i < 0 else i) * st
        blk = tuple(t.blockIdx) if hasattr(t, "blockIdx") else (0, 0, 0)
        rec.gevents.setdefault((blk, tid), []).append((_access_site(kind), addr, self.itemsize))

    def __getitem__(self, index):
        self._note(index, "load")
        out = np.ndarray.__getitem__(self, index)
        return out

    def __setitem__(self, index, value):
        self._note(index, "store")
        np.ndarray.__setitem__(self.view(np.ndarray), index, value)


def _recording_arg(a):
    """A simulator device array whose element accesses are recorded (other arguments as they are)."""
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    except ImportError:  # pragma: no cover
        return a
    if isinstance(a, FakeCUDAArray) and isinstance(a._ary, np.ndarray) and a._ary.ndim > 0:
        return FakeCUDAArray(a._ary.view(_Global), a.stream)
    return a


def _warp_accesses(events: dict, threads_per_block: int, vectorize: bool = True):
    """Warp-wide instructions of recorded per-thread accesses: (site, addresses of the 32 lanes
    (None for a lane with no k-th access at the site), width), the k-th access of each lane at a
    site making one instruction, runs merged into 64/128-bit accesses when ``vectorize``."""
    by_block: dict = {}
    for (blk, tid), evs in events.items():
        per_site: dict = {}
        for site, addr, size in evs:
            per_site.setdefault(site, []).append((addr, size))
        by_block.setdefault(blk, {})[tid] = {s: (_merge(v) if vectorize else v) for s, v in per_site.items()}
    for blk, threads in by_block.items():
        for site in {s for th in threads.values() for s in th}:
            for w0 in range(0, threads_per_block, 32):
                lanes = [threads.get(t, {}).get(site, []) for t in range(w0, min(w0 + 32, threads_per_block))]
                n = max((len(x) for x in lanes), default=0)
                for k in range(n):
                    addrs, width = [], 1
                    for x in lanes:
                        if k < len(x):
                            addrs.append(x[k][0])
                            width = max(width, x[k][1])
                        else:
                            addrs.append(None)
                    yield site, addrs, width


def _sectors_lines(addrs, width) -> tuple[int, int, int]:
    """(32-byte sectors, 128-byte lines, ideal sectors) of one warp-wide global access."""
    sec, lines = set(), set()
    distinct = {a for a in addrs if a is not None}
    for a in distinct:
        for b in range(a // 32, (a + width - 1) // 32 + 1):
            sec.add(b)
            lines.add(b // 4)
    return len(sec), len(lines), -(-len(distinct) * width // 32)


def _gtally(rec: _Recorder, threads_per_block: int, report: "BankReport", vectorize: bool = True,
            shared: dict | None = None) -> None:
    per_launch = {k: 0 for p in ("", "load_", "store_") for k in
                  (p + "requests", p + "sectors", p + "lines", p + "ideal_sectors")}
    sites: dict = {}
    for site, addrs, width in _warp_accesses(rec.gevents, threads_per_block, vectorize):
        ns, nl, ni = _sectors_lines(addrs, width)
        s = sites.setdefault(site, {"file": os.path.basename(site[0]), "line": site[1], "kind": site[2],
                                    "width": width, "requests": 0, "sectors": 0, "lines": 0})
        s["requests"] += 1
        s["sectors"] += ns
        s["lines"] += nl
        for p in ("", site[2] + "_"):
            per_launch[p + "requests"] += 1
            per_launch[p + "sectors"] += ns
            per_launch[p + "lines"] += nl
            per_launch[p + "ideal_sectors"] += ni
    per_launch.update(shared if shared is not None else {**_rereads(rec), **_l1_hits(rec, threads_per_block)})
    report.gsites.extend(sites.values())
    report.global_launches.append(per_launch)


# a thread's sector counts as an L1 hit when it is among the last 4 distinct sectors the thread
# touched: reuse that the access pattern fixes whatever the size (a walk along a row within a
# sector, a warp-uniform parameter read for the next rows); reuse at a distance that grows with
# the problem (a second sweep over a row) is left to the rung's L2 bytes, since the simulated
# twin of the problem is far smaller than the problem
L1_REUSE_WINDOW = 4


def _l1_hits(rec: _Recorder, threads_per_block: int) -> dict:
    """Where the warp-wide global loads of the simulated block find their data.  A lane's
    access hits L1 when each of its 32-byte sectors is among the last ``L1_REUSE_WINDOW``
    distinct sectors the thread touched (a walk along a row, a warp-uniform parameter read for
    the next rows; not a re-sweep of a row, nor reuse across threads); a request hits when all
    its lanes do.  A request that misses goes to DRAM when
    one of its lanes touches a sector for the first time in the block (a parameter vector that
    every block reads is counted so too, though later blocks find it in L2: in a batch of loads
    it is waited for with the row's own loads, which do go to DRAM); else it finds its data in L2.
    ``load_requests_hit``, ``load_miss_requests``, ``load_miss_dram`` and ``load_miss_lines``
    (the 128-byte lines the missing requests touch), prefixed ``l1s_`` with every element
    access its own request and ``l1v_`` with runs of a thread's accesses merged into 64/128-bit
    requests (as :func:`_warp_accesses` does with ``vectorize``)."""
    from collections import OrderedDict

    # per thread and site, in order: (address, size, L1 hit, first touch of a sector in the
    # block); threads are walked one after another, so which lane of a request touches a shared
    # sector first is arbitrary, but not whether the request holds a first touch
    seen_block: set = set()
    flags: dict = {}
    order = sorted(rec.gevents)
    for key in order:
        recent: OrderedDict = OrderedDict()
        per_site: dict = {}
        for site, addr, size in rec.gevents[key]:
            secs = range(addr // 32, (addr + max(size, 1) - 1) // 32 + 1)
            if site[2] == "load":
                first = any(b not in seen_block for b in secs)
                per_site.setdefault(site, []).append((addr, size, all(b in recent for b in secs), first))
            for b in secs:
                recent.pop(b, None)
                recent[b] = True
                if len(recent) > L1_REUSE_WINDOW:
                    recent.popitem(last=False)
                seen_block.add(b)
        flags.setdefault(key[0], {})[key[1]] = per_site
    out = {}
    for pre, vec in (("l1s_", False), ("l1v_", True)):
        out.update({pre + k: v for k, v in _l1_requests(flags, threads_per_block, vec).items()})
    return out


def _l1_requests(flags: dict, threads_per_block: int, vectorize: bool) -> dict:
    out = {"load_requests_hit": 0, "load_miss_requests": 0, "load_miss_dram": 0, "load_miss_lines": 0}
    for blk, threads in flags.items():
        if vectorize:
            # runs merged into one wide access: it hits when all its elements did
            threads = {t: {st: _merge_flags(v) for st, v in ps.items()} for t, ps in threads.items()}
        for site in {s for th in threads.values() for s in th}:
            for w0 in range(0, threads_per_block, 32):
                lanes = [threads.get(t, {}).get(site, []) for t in range(w0, min(w0 + 32, threads_per_block))]
                for k in range(max((len(x) for x in lanes), default=0)):
                    acc = [x[k] for x in lanes if k < len(x)]
                    if all(a[2] for a in acc):
                        out["load_requests_hit"] += 1
                        continue
                    out["load_miss_requests"] += 1
                    out["load_miss_dram"] += any(a[3] for a in acc)
                    out["load_miss_lines"] += _sectors_lines([a[0] for a in acc], max(a[1] for a in acc))[1]
    return out


def _merge_flags(v: list) -> list:
    res, i = [], 0
    for a, z in _merge([(a, z) for a, z, _, _ in v]):
        n, hit, first = 0, True, False
        while i < len(v) and n < z:
            hit, first = hit and v[i][2], first or v[i][3]
            n += v[i][1]
            i += 1
        res.append((a, z, hit, first))
    return res


def _rereads(rec: _Recorder) -> dict:
    """What the simulated blocks read again: ``bytes`` (every element a thread read or wrote),
    and for the *streamed* arrays (those the blocks read less than half of: rows, channels,
    tiles, not a parameter vector every block reads whole) ``streamed_distinct`` (bytes read at
    least once) and ``streamed_reread`` (bytes read again after the first time);
    ``bytes_if_rereads_miss``: the stores and every read of a streamed array (what DRAM moves
    when no re-read of a row finds it in cache; the other arrays, read by every block, stay
    in L2 and are left out)."""
    import bisect

    bases = sorted(rec.gsizes)
    loaded: dict = {}   # base -> [bytes read, {address: element size}]
    touched: dict = {}  # base -> {address: element size}, loads and stores
    stored: dict = {}   # base -> {address: element size}, stores
    total = 0
    for evs in rec.gevents.values():
        for site, addr, size in evs:
            total += size
            i = bisect.bisect_right(bases, addr) - 1
            if i >= 0:
                touched.setdefault(bases[i], {}).setdefault(addr, size)
                if site[2] == "store":
                    stored.setdefault(bases[i], {}).setdefault(addr, size)
            if site[2] != "load" or i < 0:
                continue
            d = loaded.setdefault(bases[i], [0, {}])
            d[0] += size
            d[1].setdefault(addr, size)
    distinct = reread = 0
    miss = total - sum(d[0] for d in loaded.values())  # stores
    for b, (nread, addrs) in loaded.items():
        uniq = sum(addrs.values())
        if uniq < 0.5 * rec.gsizes[b]:
            distinct += uniq
            reread += nread - uniq
            miss += nread
    # how much of each 32-byte sector the blocks' own elements fill, over the arrays they touch
    # less than half of (rows, channels, tiles: not a parameter vector every block reads):
    # 1 where a block owns its sectors, 1/8 where it takes one float of each and seven other
    # blocks the rest (NHWC batchnorm: a channel per block, C floats apart)
    def fill(arrays):
        own = secs = 0
        for b, addrs in arrays.items():
            uniq = sum(addrs.values())
            if uniq < 0.5 * rec.gsizes[b]:
                own += uniq
                secs += 32 * len({a // 32 for a in addrs})
        return own / secs if secs else 1.0

    return {"bytes": total, "streamed_distinct": distinct, "streamed_reread": reread, "bytes_if_rereads_miss": miss,
            "sector_fill": fill(touched), "store_fill": fill(stored),
            "store_bytes": sum(sum(a.values()) for a in stored.values())}


_BLOCK_BOX = None


@contextlib.contextmanager
def _only_blocks(box):
    """Within the block, the simulator runs only the blocks whose index lies inside ``box``
    (a tuple of sizes along x, y, z; None: every block) while the kernel still sees its launch's
    whole grid (``gridDim``)."""
    global _BLOCK_BOX
    from numba.cuda.simulator import kernel as simkernel

    run = simkernel.BlockManager.run
    if not getattr(run, "_perfkit_box", False):
        def boxed(self, grid_point, *args):
            b = _BLOCK_BOX
            if b is not None and any(int(i) >= n for i, n in zip(grid_point, b)):
                return None
            return run(self, grid_point, *args)

        boxed._perfkit_box = True
        simkernel.BlockManager.run = boxed
    prev, _BLOCK_BOX = _BLOCK_BOX, (tuple(box) + (1, 1, 1))[:3] if box is not None else None
    try:
        yield
    finally:
        _BLOCK_BOX = prev


def _install():
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array
    if getattr(original, "_perfkit_banks", False):
        return original

    def array(self, shape, dtype, alignment=None):
        if _REC is None or alignment is not None or (isinstance(shape, int) and shape == 0):
            if alignment is None and not (isinstance(shape, int) and shape == 0):
                return _simfix.shared_alloc(self, shape, dtype, sys._getframe(1))
            res = original(self, shape, dtype, alignment)
        else:
            res = _simfix.shared_alloc(self, shape, dtype, sys._getframe(1))
        return res.view(_Shared) if _REC is not None and isinstance(res, np.ndarray) else res

    array._perfkit_banks = True
    array._original = original
    kernelapi.FakeCUDAShared.array = array
    return original


def _merge(seq: list) -> list:
    """A thread's accesses at one site -> (address, width) after the compiler's vector merge:
    a run of 2 or 4 consecutive 4-byte words starting at an address aligned to the run's size
    becomes one 64- or 128-bit access."""
    out = []
    i = 0
    while i < len(seq):
        addr, size = seq[i]
        step = 1
        if size == 4:
            for w in (16, 8):
                n = w // 4
                if addr % w == 0 and i + n <= len(seq) and all(seq[i + m] == (addr + 4 * m, 4) for m in range(n)):
                    size, step = w, n
                    break
        out.append((addr, size))
        i += step
    return out


def _tally(rec: _Recorder, threads_per_block: int, report: BankReport, vectorize: bool = True) -> None:
    sites: dict = {}
    for site, addrs, width in _warp_accesses(rec.events, threads_per_block, vectorize):
        wf, ideal = wavefronts(addrs, width)
        s = sites.setdefault(site, {"file": os.path.basename(site[0]), "line": site[1], "kind": site[2],
                                    "width": width, "accesses": 0, "wavefronts": 0, "ideal": 0})
        s["accesses"] += 1
        s["wavefronts"] += wf
        s["ideal"] += ideal
    for s in sites.values():
        report.sites.append(s)
        report.accesses += s["accesses"]
        report.wavefronts += s["wavefronts"]
        report.ideal += s["ideal"]
        k = s["kind"]
        setattr(report, f"{k}_accesses", getattr(report, f"{k}_accesses") + s["accesses"])
        setattr(report, f"{k}_wavefronts", getattr(report, f"{k}_wavefronts") + s["wavefronts"])
        setattr(report, f"{k}_ideal", getattr(report, f"{k}_ideal") + s["ideal"])


# --- the problem to simulate -----------------------------------------------------------------
def _plan_shape(variant, problem):
    launches = variant.plan(problem, variant.host_buffers(problem))
    return [(getattr(l.kernel, "py_func", l.kernel), tuple(l.block)) for l in launches]


def small_problem(variant, problem, budget_bytes: float = 96 * 1024, floor: int = 32):
    """A twin of ``problem`` with its integer sizes halved (largest first) while the rung
    still supports it, launches the same kernels with the same block shapes, every size
    stays >= ``floor`` (or its own value when smaller), and until ``problem.bytes`` is under
    ``budget_bytes``; where that cannot reach the budget, the sizes still whole are halved
    down to 16.  Conflicts per access depend on the index arithmetic, not the size."""
    from .kernels.base import ProblemError, UnsupportedProblem

    try:
        shape0 = _plan_shape(variant, problem)
    except Exception:
        shape0 = None
    fields = [f.name for f in dataclasses.fields(problem)
              if isinstance(getattr(problem, f.name), (int, np.integer)) and not isinstance(getattr(problem, f.name), bool)]
    cur = problem
    frozen: set = set()
    low = min(floor, 16)
    while cur.bytes > budget_bytes:
        cands = [f for f in fields if f not in frozen and getattr(cur, f) // 2 >= min(floor, getattr(problem, f))
                 and getattr(cur, f) > 1]
        if not cands:
            # still too big with every size at the floor (batchnorm: n=32, h=w=56): halve the
            # sizes not halved yet down to 16 (a channel of n x h x w values stays far longer
            # than a block, and a plane of 28 x 28 floats is still a whole number of 32-byte
            # sectors, as 56 x 56 is, so the lanes of a warp cross sectors together; the sizes a
            # kernel tiles keep the floor)
            cands = [f for f in fields if f not in frozen and getattr(cur, f) == getattr(problem, f)
                     and getattr(cur, f) // 2 >= low]
            cands = cands or [f for f in fields if f not in frozen and getattr(cur, f) // 2 >= low
                              and getattr(cur, f) < getattr(problem, f) and getattr(cur, f) < floor]
        if not cands:
            break
        f = max(cands, key=lambda f: getattr(cur, f))
        try:
            nxt = dataclasses.replace(cur, **{f: getattr(cur, f) // 2})
            variant.supports(nxt)
            if shape0 is not None:
                s = _plan_shape(variant, nxt)
                if [b for _, b in s] != [b for _, b in shape0] or len(s) != len(shape0):
                    raise UnsupportedProblem("plan changed")
        except (ProblemError, UnsupportedProblem, ValueError):
            frozen.add(f)
            continue
        cur = nxt
    return cur


def _cache_key(variant, problem, max_blocks, vectorize=True) -> str:
    """Local cache and static store key of one simulation (path-independent: the source closure
    is hashed by package paths)."""
    return static.key({"v": type(variant).__module__ + "." + type(variant).__qualname__, "config": variant.config,
                       "problem": type(problem).__qualname__, "params": problem.params, "max_blocks": max_blocks,
                       "vectorize": vectorize, "source": static.source_hash(variant),
                       "code": static.producer_version("banks")})


def _cache_path(variant, problem, max_blocks, vectorize=True) -> Path:
    return cache.root() / "banks" / f"{_cache_key(variant, problem, max_blocks, vectorize)}.json"


def count(variant, problem, *, max_blocks: int | None = 1, seed: int = 0, cache: bool = True,
          vectorize: bool = True) -> BankReport:
    """Simulate ``variant`` on ``problem`` (in Numba's CUDA simulator) and count the wavefronts of
    its shared-memory accesses, launch by launch, for the first ``max_blocks`` blocks of each
    launch (``None``: every block).  Counts are for the simulated blocks; ``scaled`` them to a
    grid.  Works only in a process that runs the simulator (``PERFKIT_BACKEND=sim`` or no GPU);
    on a GPU, ask Nsight Compute.  Pass a small problem (:func:`small_problem`).
    ``vectorize=False`` counts every element access as its own instruction (what the SASS does
    where the compiler did not merge a run of accesses into one 64/128-bit access)."""
    global _REC
    from . import backend

    if variant.oracle:
        raise BankError(f"{variant.label} is a library call: no kernel of ours to simulate")
    path = _cache_path(variant, problem, max_blocks, vectorize) if cache else None
    if path is not None and path.exists():
        try:
            d = json.loads(path.read_text())
            if static.writing():
                static.put("banks", path.stem, d, what=f"{variant.label} @ {problem.label}")
            return BankReport(**d)
        except (OSError, ValueError, TypeError):
            pass
    if path is not None and not static.writing():
        d = static.get("banks", path.stem)
        if d is not None:
            return BankReport(**d)
    if not backend.is_simulator():
        # a GPU process cannot also run the simulator (numba.cuda is one or the other per
        # process): the simulation runs in a child that chose the simulator, so a notebook on a
        # GPU shows the same access counts (and estimates) as one on a laptop
        return _count_in_child(variant, problem, max_blocks, seed, path, vectorize)
    _install()
    variant.supports(problem)
    inputs = problem.make_inputs(seed)
    prepared = variant.prepare(problem, inputs)
    # one simulation run serves both settings of ``vectorize`` (the run is the cost; the
    # grouping of its recorded accesses into instructions is cheap): both are cached
    reports = {vec: BankReport(variant=variant.label, problem=problem.label, blocks=0)
               for vec in ((vectorize, not vectorize) if path is not None else (vectorize,))}
    with _LOCK:
        for launch in prepared.launches:
            grid = launch.grid
            if max_blocks is not None:
                keep, g = max_blocks, []
                for d in (tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)):
                    take = max(1, min(int(d), keep))  # first blocks along x, then y, then z
                    g.append(take)
                    keep = max(1, keep // take)
                grid = tuple(g)
            _REC = _Recorder()
            try:
                args = [_recording_arg(a) for a in launch.args]
                # the launch keeps its grid (a persistent kernel sizes its work by gridDim: one
                # block of a 16-block grid handles a sixteenth of the rows, not all of them);
                # only the blocks inside ``grid`` run
                with _only_blocks(grid if max_blocks is not None else None):
                    launch.kernel[launch.grid, launch.block, 0, launch.shared_bytes](*args)
                rec = _REC
            finally:
                _REC = None
            tpb = int(np.prod(launch.block))
            both = {**_rereads(rec), **_l1_hits(rec, tpb)}
            for vec, rep in reports.items():
                rep.blocks += int(np.prod(grid))
                before = (rep.load_accesses, rep.store_accesses)
                _tally(rec, tpb, rep, vec)
                _gtally(rec, tpb, rep, vec, both)
                # this launch's warp-wide shared accesses (the totals add up every launch)
                rep.global_launches[-1]["smem_load_accesses"] = rep.load_accesses - before[0]
                rep.global_launches[-1]["smem_store_accesses"] = rep.store_accesses - before[1]
                rep.global_launches[-1]["blocks"] = int(np.prod(grid))
                # the launch's whole grid and the bytes of the arrays it is passed (to scale the
                # simulated blocks' accesses to the launch)
                rep.global_launches[-1]["launch_blocks"] = int(np.prod(launch.grid))
                rep.global_launches[-1]["arg_bytes"] = int(sum(getattr(a, "nbytes", 0) for a in launch.args
                                                              if getattr(a, "ndim", 0) > 0))
    if path is not None:
        for vec, rep in reports.items():
            pth = path if vec == vectorize else _cache_path(variant, problem, max_blocks, vec)
            pth.parent.mkdir(parents=True, exist_ok=True)
            tmp = pth.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(dataclasses.asdict(rep)))
            os.replace(tmp, pth)
            static.put("banks", pth.stem, dataclasses.asdict(rep), what=f"{variant.label} @ {problem.label}")
    return reports[vectorize]


_LOCK = threading.Lock()


def _count_in_child(variant, problem, max_blocks, seed, path, vectorize) -> BankReport:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        jp, op = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jp.write_text(json.dumps({**static.job(variant, problem, ()), "max_blocks": max_blocks, "seed": seed,
                                  "cache": path is not None, "vectorize": vectorize}, default=str))
        env = {**os.environ, "PERFKIT_BACKEND": "sim", "NUMBA_ENABLE_CUDASIM": "1"}
        r = subprocess.run([sys.executable, "-m", "perfkit.banks", "--worker", str(jp), str(op)],
                           capture_output=True, text=True, env=env, timeout=1800)
        if r.returncode != 0 or not op.exists():
            raise BankError(f"the simulator process for {variant.label} failed: {r.stderr.strip()[-2000:]}")
        d = json.loads(op.read_text())
    if "error" in d:
        raise BankError(d["error"])
    return BankReport(**d)


def _worker_main(job_path: str, out_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        variant, problem = static.rebuild(job)
        rep = count(variant, problem, max_blocks=job["max_blocks"], seed=job["seed"], cache=job["cache"],
                    vectorize=job["vectorize"])
        out = dataclasses.asdict(rep)
    except Exception as exc:  # the parent raises BankError with the message
        out = {"error": f"{exc.__class__.__name__}: {exc}"}
    Path(out_path).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        import perfkit  # noqa: F401  (PERFKIT_BACKEND=sim: the simulator, chosen before numba.cuda)

        sys.exit(_worker_main(sys.argv[2], sys.argv[3]))
    sys.exit("usage: python -m perfkit.banks --worker JOB OUT (the command is perfkit anatomy --access)")
