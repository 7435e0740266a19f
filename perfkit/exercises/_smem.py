"""Shared-memory bank conflicts of one simulated launch, counted from the addresses each warp
touches (the way GPU-Puzzles scores memory access), for the graders when ``perfkit.banks`` is
not there.

While :func:`record` runs, every ``cuda.shared.array`` the simulator hands out is a view that
logs each element access: the thread (block, warp, lane), the kernel source line and how many
times that thread has run that line.  Lanes of one warp that run the same line for the same
time form one warp-wide access (true for kernels without divergence around shared accesses,
which is why graders count on full tiles).  A warp-wide access to 4-byte words costs as many
wavefronts as the most distinct words that fall in one of the 32 banks (lanes reading the same
word share it: a broadcast); every wavefront beyond the first is a bank conflict.
"""
from __future__ import annotations

import linecache
import sys
import threading
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

BANKS = 32
WORD = 4

_state = threading.local()
_LOCK = threading.Lock()
_active: "_Recorder | None" = None


@dataclass
class LineStats:
    """Warp-wide accesses of one source line and kind ('load' or 'store')."""

    filename: str
    lineno: int
    kind: str
    accesses: int = 0
    wavefronts: int = 0
    worst: int = 0  # most wavefronts of a single warp-wide access

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.accesses

    @property
    def source(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()


class _Recorder:
    def __init__(self):
        self.groups: dict = defaultdict(lambda: defaultdict(set))  # key -> {lane: {byte offsets}}
        self.counts: dict = defaultdict(int)

    def log(self, arr, idx, kind: str) -> None:
        t = threading.current_thread()
        tid = getattr(t, "thread_id", None)
        if tid is None:
            return
        frame = sys._getframe(2)
        line = (frame.f_code.co_filename, frame.f_lineno)
        try:
            flat = _flat_index(arr, idx)
        except Exception:
            return
        if flat is None:
            return
        base = arr.__array_interface__["data"][0]
        byte = base + flat * arr.itemsize
        block = tuple(t.blockIdx)
        with _LOCK:
            n_key = (block, tid, line, kind)
            n = self.counts[n_key]
            self.counts[n_key] = n + 1
            self.groups[(block, tid // 32, line, kind, n)][tid % 32].add(byte)

    def lines(self) -> list[LineStats]:
        out: dict = {}
        for (block, warp, line, kind, n), lanes in self.groups.items():
            words = {b // WORD for offs in lanes.values() for b in offs}
            per_bank = defaultdict(int)
            for w in words:
                per_bank[w % BANKS] += 1
            wf = max(per_bank.values()) if per_bank else 1
            s = out.setdefault((line, kind), LineStats(line[0], line[1], kind))
            s.accesses += 1
            s.wavefronts += wf
            s.worst = max(s.worst, wf)
        return sorted(out.values(), key=lambda s: (s.filename, s.lineno, s.kind))


def _flat_index(arr, idx) -> int | None:
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) != arr.ndim or not all(isinstance(i, (int, np.integer)) for i in idx):
        return None  # a slice or a partial index: not a single element
    idx = tuple(int(i) + (arr.shape[d] if int(i) < 0 else 0) for d, i in enumerate(idx))
    return int(np.ravel_multi_index(idx, arr.shape))


class _Logged(np.ndarray):
    def __getitem__(self, idx):
        if _active is not None:
            _active.log(self, idx, "load")
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx, value):
        if _active is not None:
            _active.log(self, idx, "store")
        np.ndarray.__setitem__(self, idx, value)


@contextmanager
def record():
    """Count bank conflicts of the simulated launches inside the block::

        with record() as rec:
            kernel[grid, block](...)
        rec.lines()  # [LineStats, ...]
    """
    global _active
    from numba.cuda.simulator import kernelapi

    rec = _Recorder()
    original = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        a = original(self, shape, dtype, alignment)
        return a.view(_Logged) if isinstance(a, np.ndarray) else a

    kernelapi.FakeCUDAShared.array = array
    _active = rec
    try:
        yield rec
    finally:
        _active = None
        kernelapi.FakeCUDAShared.array = original
