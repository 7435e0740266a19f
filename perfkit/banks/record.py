"""Recording in Numba's CUDA simulator: every thread's shared-memory and global-memory
accesses, with their byte addresses and source sites, while :func:`recording` is open.

Shared arrays are laid out one after another in the order a block first touches them, each
16-byte aligned (the dynamic array, ``cuda.shared.array(0, dtype)``, is one buffer for the whole
block, whatever dtype each thread views it as); a view of a shared array (a tile of the dynamic
array, :func:`perfkit.kernels._dynsmem.shared_tile`; a transposed view) is addressed inside its
buffer by its strides.  Global buffers are 256-byte aligned, as ``cudaMalloc`` gives.  A site is a
source line, a direction (load or store) and, for shared memory, the array (a view: its first byte)."""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from .. import _simfix, _simspeed


class Recorder:
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



_REC: Recorder | None = None


def _root(arr: np.ndarray) -> np.ndarray:
    """The buffer ``arr`` is a view of: its ``base`` chain followed to the end, through the
    memoryview the simulator's dynamic shared array is made from (``np.frombuffer`` of the
    block's one byte buffer), so every thread's ``cuda.shared.array(0, dtype)`` and every tile
    of it share one buffer and one base address."""
    while True:
        b = arr.base
        if isinstance(b, memoryview) and isinstance(b.obj, np.ndarray):
            b = b.obj
        if not isinstance(b, np.ndarray):
            return arr
        arr = b


def _data(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _byte_offsets(arr: np.ndarray, index) -> list[int]:
    """Byte offsets from ``arr``'s first element of the elements ``arr[index]`` touches, by its
    strides (a transposed or strided view too)."""
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) == arr.ndim and all(isinstance(i, (int, np.integer)) for i in index):
        off = 0
        for i, n, st in zip(index, arr.shape, arr.strides):
            i = int(i)
            off += (i + n if i < 0 else i) * st
        return [off]
    offs = np.zeros(arr.shape, np.int64)
    for d, (n, st) in enumerate(zip(arr.shape, arr.strides)):
        offs += (np.arange(n, dtype=np.int64) * st).reshape([n if e == d else 1 for e in range(arr.ndim)])
    return [int(x) for x in offs[index].ravel()]


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
        root = _root(self)
        # the view's first byte: the root's base plus how far into the root the view starts (a
        # tile of the dynamic array, kernels._dynsmem.shared_tile); a root's is its base
        start = rec.base_of(root) + (_data(self) - _data(root))
        caller = sys._getframe(2)
        # one site per source line, direction and shared array (or tile: its first byte): a line
        # that reads two arrays (``acc += As[ty, k] * Bs[k, tx]``) is two instructions, each
        # with its own run of addresses to merge
        site = (caller.f_code.co_filename, caller.f_lineno, kind, start)
        size = self.itemsize
        blk = tuple(t.blockIdx) if hasattr(t, "blockIdx") else (0, 0, 0)
        lst = rec.events.setdefault((blk, tid), [])
        for off in _byte_offsets(self, index):
            lst.append((site, start + off, size))

    def __getitem__(self, index):
        self._note(index, "load")
        return np.ndarray.__getitem__(self.view(np.ndarray), index)

    def __setitem__(self, index, value):
        self._note(index, "store")
        np.ndarray.__setitem__(self.view(np.ndarray), index, value)


_SHIMS = (__file__, _simspeed.__file__)


def _access_site(kind):
    """(file, line, kind) of the kernel line that made an access: the first frame outside this
    module, Numba's simulator and perfkit's faster paths through it (``_simspeed``)."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename in _SHIMS or "numba" in f.f_code.co_filename
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


def recording_arg(a):
    """A simulator device array whose element accesses are recorded (other arguments as they are)."""
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    except ImportError:  # pragma: no cover
        return a
    if isinstance(a, FakeCUDAArray) and isinstance(a._ary, np.ndarray) and a._ary.ndim > 0:
        return FakeCUDAArray(a._ary.view(_Global), a.stream)
    return a


@contextlib.contextmanager
def recording():
    """Record every access the simulator makes inside (one launch at a time: the caller holds a
    lock); yields the :class:`Recorder`."""
    global _REC
    _REC = rec = Recorder()
    try:
        yield rec
    finally:
        _REC = None


_BLOCK_BOX = None


@contextlib.contextmanager
def only_blocks(box):
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


def install():
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
