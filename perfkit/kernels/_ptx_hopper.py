"""Hopper (sm_90a) instructions for Numba kernels through inline PTX, each with an exact twin for
Numba's CUDA simulator (the mechanism of :mod:`perfkit.kernels._ptx`, which holds the sm_80
instructions: mma.sync, ldmatrix, cp.async)::

    from perfkit.kernels._ptx_hopper import (smem_addr, wgmma_desc, wgmma_m64n128k16, wgmma_fence,
                                             wgmma_commit, wgmma_wait, fence_proxy_async, sw128)

What each one is (PTX ISA 8.x, sm_90a; none of it runs before Hopper):

* ``wgmma_m64n{64,128,256}k16(acc, smem, desc_a, desc_b, scale_d)``: ``wgmma.mma_async.sync
  .aligned.m64nNk16.f32.f16.f16``, issued by a whole warpgroup (128 threads, 4 warps): the
  warpgroup's 64xN float32 tile D (+)= A (64x16, float16, K-major: k contiguous) @ B (16xN,
  float16, MN-major: n contiguous, the instruction's ``imm-trans-b = 1``), both read from shared
  memory through 64-bit descriptors.  ``acc``: the thread's N/2 accumulators (a local float32
  array, updated in place): thread t of the warpgroup (warp w = t // 32, lane l) holds, for
  j < N/8, ``acc[4j .. 4j+3]`` = D[r, c], D[r, c+1], D[r+8, c], D[r+8, c+1] with
  r = 16 w + l // 4, c = 8 j + 2 (l % 4).  ``scale_d`` 0 ignores the old D.  ``smem``: the shared
  array the descriptors point into (the twin reads it; the GPU version ignores it).  The result
  is asynchronous: it is defined only after ``wgmma_commit()`` closed its group and
  ``wgmma_wait(n)`` left at most n groups pending; the twin defers it to that wait, so a kernel
  that reads acc too early reads stale values there too.  ``wgmma_fence()`` (``wgmma.fence``)
  orders earlier register and shared accesses before the next wgmma.
* ``wgmma_desc(addr, lbo, sbo)``: the shared-memory matrix descriptor with the 128-byte swizzle
  (bits 0-13: addr >> 4, 16-29: lbo >> 4, 32-45: sbo >> 4, 62-63: 1 = 128-byte swizzle).
  ``addr``: the 32-bit shared address of the matrix (tiles whose swizzle pattern starts at a
  1024-byte aligned address; a k-step inside a row adds 32 bytes).  K-major (A): 8-row groups
  ``sbo`` bytes apart (1024: 8 rows of 128 bytes), ``lbo`` unused.  MN-major (B): 64-element
  (128-byte) column blocks ``lbo`` bytes apart, 8-row groups of k ``sbo`` apart.
* ``sw128(addr)``: the 128-byte swizzle of a byte address (bits 4-6 ^= bits 7-9): where the
  hardware reads the 16-byte chunk a descriptor names; kernels store their tiles through it.
* ``smem_addr(arr)``: the 32-bit shared address of a shared array's first element (the twin:
  0, the simulator's shared arrays being their own address spaces).
* ``fence_proxy_async()``: ``fence.proxy.async.shared::cta``: a thread's shared-memory writes
  through the generic proxy (st.shared, cp.async) become visible to the async proxy (wgmma)
  that reads them after the next barrier.  No-op twin.

TMA and mbarriers (rung 21 ``tma``)::

    from perfkit.kernels._ptx_hopper import (tensor_map_2d, tensormap_acquire, tma_load_2d, mbar_init,
                                             fence_mbarrier_init, mbar_arrive_expect_tx, mbar_arrive,
                                             mbar_try_wait, mbar_wait)

* ``tensor_map_2d(buf, dims, row_bytes, box)``: the host side of a TMA copy, the tensor map of a
  row-major 2-D array (``dims`` = (inner, outer) elements, ``row_bytes`` between rows, ``box`` =
  (inner, outer) elements a copy moves, the 128-byte swizzle; zeros where a box leaves the
  array).  On a GPU, ``cuda.bindings.driver.cuTensorMapEncodeTiled`` encodes it (128 bytes) into
  global memory, once per (buffer address, dims, box): numba-cuda has no ``__grid_constant__``
  parameter, so the kernel receives a uint64[16] array and acquires it with
  ``tensormap_acquire``.  In the simulator (no driver) it is a :class:`TensorMap2D`, a host
  mirror of the same fields, which the twin copies through.  Planning with host buffers (the
  anatomy, no driver either): a zeroed uint64[16] with the kernel argument's type.
* ``tensormap_acquire(tmap)``: ``fence.proxy.tensormap::generic.acquire.sys`` on the map's 128
  bytes (written by the generic proxy: the host copy), then ``prefetch.tensormap``; one thread of
  a block, before its first copy.  No-op twin.
* ``tma_load_2d(dst, dst_off, tmap, c0, c1, bars, i)``: ``cp.async.bulk.tensor.2d.shared::
  cluster.global.tile.mbarrier::complete_tx::bytes``: the box whose first element is (inner c0,
  outer c1) lands in shared memory at byte ``dst_off`` of the shared array ``dst`` (1024-byte
  aligned: the swizzle is a function of the address), each 128-byte row r with its 16-byte chunk
  c at chunk c ^ (r % 8) (the swizzle ``sw128`` and the wgmma descriptors name); when it has
  landed, it completes the box's bytes (all of them, zero-filled ones too) on mbarrier
  ``bars[i]``.  One thread issues it.  The twin reads global memory when the copy is issued and
  writes shared memory when it lands: when a thread waits on (``mbar_try_wait``) that barrier,
  so a kernel that reads the tile without waiting reads stale shared memory there too.
* ``mbar_init(bars, i, count)``: ``mbarrier.init.shared::cta.b64``: ``bars`` a shared uint64
  array, barrier i expects ``count`` arrivals a phase; its phase 0 is under way.
  ``fence_mbarrier_init()`` (``fence.mbarrier_init.release.cluster``) makes the inits visible to
  the async proxy (TMA's complete_tx), then a block barrier to the other threads.
* ``mbar_arrive_expect_tx(bars, i, nbytes)``: raise the phase's transaction count by nbytes, then
  arrive; ``mbar_arrive(bars, i)``: arrive.  A phase completes (the barrier's phase parity flips,
  its arrivals and transaction count reset) when all ``count`` threads have arrived and as many
  bytes have landed as were expected.
* ``mbar_try_wait(bars, i, parity)``: ``mbarrier.try_wait.parity``: 1 when the phase of that
  parity has completed, i.e. the phase under way has the other parity (so right after init a
  wait on parity 1 passes: CUTLASS's producer start), else 0 (a GPU suspends the thread for a
  while first).  ``mbar_wait(bars, i, parity)``: the try_wait loop (a PTX loop in one asm block),
  bounded: a GPU thread still waiting after ``MBAR_WAIT_LIMIT_NS`` (10 s of %globaltimer, read
  only once the first try_wait has failed) executes ``trap``, so a lost arrival fails the launch
  instead of hanging it.
  Their twins cannot spin (the simulator runs a block's threads one at a time): a thread whose
  phase has not completed yields to the block's other threads
  (``perfkit._simspeed.yield_to_block``) until it has, so a producer warp and its consumers
  (warp specialization) take turns as on a GPU; a block where every live thread waits on
  something no thread can complete raises, naming each barrier, where a GPU would hang.  Called
  from the host (no block), try_wait answers at once and a wait that cannot pass raises.

Warp specialization (rung 22 ``warp_specialized``) and TMA stores (rung 23 ``persistent``)::

    from perfkit.kernels._ptx_hopper import (bar_sync, setmaxnreg_inc, setmaxnreg_dec, tma_store_2d,
                                             bulk_commit, bulk_wait, bulk_wait_read)

* ``bar_sync(id, nthreads)``: ``bar.sync id, nthreads``: wait until ``nthreads`` threads (whole
  warps) of the block have arrived at named barrier ``id`` (1..15; 0 is ``syncthreads``'), so
  that a group of warps (a consumer warpgroup, both of them) meets without the others.  The
  count is a literal; the id may be a run-time value (ptxas then reserves all 16 barriers).
  The twin counts arrivals per block and yields while it waits.
* ``setmaxnreg_inc(n)``, ``setmaxnreg_dec(n)``: ``setmaxnreg.{inc,dec}.sync.aligned.u32 n``: a
  warpgroup asks for (or returns to the block's pool) registers, to n a thread (24..256, a
  multiple of 8): producers give theirs to the consumers.  ptxas drops it (C7504/C7508) unless
  the kernel is linked with LTO and its entry register count is pinned (``launch_bounds`` or
  ``max_registers``).  No-op twins (they check n).
* ``tma_store_2d(tmap, c0, c1, src, src_off)``: ``cp.async.bulk.tensor.2d.global.shared::cta.tile
  .bulk_group``: the box at byte ``src_off`` of shared array ``src`` (1024-byte aligned, 128-byte
  swizzled as the map names it) to the box of the map's array whose first element is (inner c0,
  outer c1), clipped at the map's dims.  One thread issues it; ``bulk_commit()``
  (``cp.async.bulk.commit_group``) closes the thread's group of stores, ``bulk_wait_read(n)``
  (``cp.async.bulk.wait_group.read n``) waits until at most n groups may still read shared
  memory (the box may be written again), ``bulk_wait(n)`` until at most n are incomplete (their
  writes done).  The writer threads fence their st.shared for the async proxy
  (``fence_proxy_async``) and meet before the store is issued.  Twins: the store happens when
  the issuing thread waits for its group, so a box overwritten too early or never waited for
  shows in C.  ``tensor_map_2d(..., itemsize=4)``: a float32 map (C).
* A wgmma completes for its whole warpgroup at once: the twin of ``wgmma_wait`` returns only
  when all 128 threads of the warpgroup have reached it (their fragments computed), so that one
  thread of the warpgroup may release the shared stage the wgmma read, as on a GPU.

Clusters (rung 24 ``cluster``)::

    from perfkit.kernels._ptx_hopper import (clustered, cluster_dims, cluster_ctarank, cluster_sync,
                                             mbar_arrive_cluster, tma_load_2d_multicast)

* ``cluster_dims(x, y, z)`` (literals), the first statement of a kernel's own body (not a
  device function's): the kernel's thread-block cluster shape, CUDA C++'s ``__cluster_dims__``.
  It emits no instruction: it annotates the kernel it is compiled into (NVVM's
  ``cluster_dim_x/y/z``, the PTX directives ``.reqnctapercluster x, y, z`` and
  ``.explicitcluster``), so that the shape belongs to that kernel alone and a plain launch
  (cuLaunchKernel) runs its blocks as clusters; the grid must be whole clusters.  The kernel
  factory returns ``clustered(kernel, (x, y, z))``, which gives the simulator the same shape
  (the twin of ``cluster_dims`` checks that the simulated blocks ran in such clusters).
* ``cluster_ctarank()``: ``%cluster_ctarank``, the block's rank in its cluster (x fastest).
* ``cluster_sync()``: ``barrier.cluster.arrive.release.aligned`` then ``barrier.cluster.wait
  .acquire.aligned``: every thread of every block of the cluster meets (a block barrier too).
  After the mbarriers are initialized (before a peer's copies or arrivals reach them) and before
  a block exits (while a peer may still write into its shared memory or arrive on its
  barriers).
* ``mbar_arrive_cluster(bars, i, cta)``: ``mapa.shared::cluster`` (barrier i's address in block
  ``cta`` of the cluster, the same offset) then ``mbarrier.arrive.shared::cluster``: arrive on
  that block's barrier (this block's own when ``cta`` is its rank).  The arrive's default
  semantics (release at CTA scope), as CUTLASS's ``ClusterBarrier::arrive(cta_id)``: with
  ``.release.cluster`` ptxas puts a MEMBAR.ALL.GPU before every arrive, and what the arrival
  releases (the wgmma's reads of the stage) is complete already.
* ``tma_load_2d_multicast(dst, dst_off, tmap, c0, c1, bars, i, mask)``: ``cp.async.bulk.tensor
  .2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster``: the box
  read once from global memory (L2) lands at byte ``dst_off`` of the shared memory of every
  block of the cluster whose rank's bit is set in ``mask``, and completes its bytes on the
  mbarrier at the same offset in each of them.

The simulator runs the blocks of a cluster together, their threads in one scheduler, each
block with its own shared memory (:mod:`perfkit._simspeed`), so that a thread can wait on a
barrier its peer block completes; the twins reach a peer block's shared array at the same
offset as the given one.

The twins keep a barrier's whole state in its 64-bit shared word (the GPU's layout is opaque):
bits 0-19 arrivals pending, 20-39 the count, 40-61 the transaction count + 2**21, 62 set by
init, 63 the phase parity.

Trap found compiling (../shared/reference/hopper-sm90a): with N float outputs tied to N inputs,
the descriptors are inline-asm operands ``$2N`` and ``$2N+1``.  wgmma across a non-inlined call
is serialized by ptxas (C7509/C7510): kernels call these only from forceinline device functions.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
import weakref
from dataclasses import dataclass

import numpy as np
from numba import cuda, uint64

from .. import backend

__all__ = ["smem_addr", "wgmma_desc", "sw128", "wgmma_m64n64k16", "wgmma_m64n128k16", "wgmma_m64n256k16",
           "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "decode_desc",
           "TensorMap2D", "tensor_map_2d", "tensormap_acquire", "tma_load_2d", "mbar_init", "fence_mbarrier_init",
           "mbar_arrive_expect_tx", "mbar_arrive", "mbar_try_wait", "mbar_wait", "MBAR_WAIT_LIMIT_NS", "mbar_state", "bar_sync",
           "setmaxnreg_inc", "setmaxnreg_dec", "tma_store_2d", "bulk_commit", "bulk_wait", "bulk_wait_read",
           "clustered", "cluster_dims", "cluster_ctarank", "cluster_sync", "mbar_arrive_cluster",
           "tma_load_2d_multicast"]


@cuda.jit(device=True)
def wgmma_desc(addr, lbo, sbo):
    """64-bit shared-memory matrix descriptor, 128-byte swizzle."""
    return (uint64((addr & 0x3FFFF) >> 4) | (uint64(lbo >> 4) << uint64(16))
            | (uint64(sbo >> 4) << uint64(32)) | (uint64(1) << uint64(62)))


@cuda.jit(device=True)
def sw128(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def decode_desc(d) -> tuple[int, int, int, int]:
    """(start address, leading byte offset, stride byte offset, swizzle mode) of a descriptor."""
    d = int(d)
    return (d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, (d >> 62) & 3


# --- TMA's tensor maps (host) ------------------------------------------------------------------
@dataclass(frozen=True)
class TensorMap2D:
    """What a 2-D tiled tensor map holds (the driver's encoding is opaque): the array, its
    (inner, outer) extent in elements, the bytes between rows, the box a copy moves and the
    swizzle span in bytes.  The simulator's twin copies through it."""
    array: object
    dims: tuple[int, int]
    row_bytes: int
    box: tuple[int, int]
    swizzle: int = 128
    itemsize: int = 2

    def __post_init__(self):
        inner, outer = self.dims
        if not (1 <= inner <= 2**32 and 1 <= outer <= 2**32):
            raise ValueError(f"tensor map: dims {self.dims} must be 1..2**32")
        if self.row_bytes % 16 or not (0 < self.row_bytes < 2**40):
            raise ValueError(f"tensor map: the row stride ({self.row_bytes} bytes) must be a multiple of 16 bytes")
        if not all(1 <= b <= 256 for b in self.box):
            raise ValueError(f"tensor map: box {self.box} must be 1..256 a dimension")
        if self.itemsize not in (2, 4):
            raise ValueError(f"tensor map: {self.itemsize}-byte elements; float16 (2) and float32 (4) are modelled")
        if self.swizzle != 128 or self.box[0] * self.itemsize != 128:
            raise ValueError(f"tensor map: only the 128-byte swizzle with 128-byte box rows is modelled "
                             f"(box {self.box}, {self.itemsize}-byte elements, swizzle {self.swizzle})")

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * self.itemsize


_ENCODED: dict = {}  # (address, dims, row bytes, box) -> the encoded map in device memory


def tensor_map_2d(buf, dims, row_bytes, box, itemsize=2):
    """A float16 (``itemsize`` 2) or float32 (4) tensor map for kernel arguments: the GPU's
    encoded map (uint64[16], device memory, cached per buffer address and shape), the
    simulator's :class:`TensorMap2D`, or, for host buffers (compiling a plan), a zeroed
    uint64[16] of the same type."""
    if isinstance(buf, np.ndarray):  # host buffers: a plan compiled, never launched (supports() refuses later)
        return np.zeros(16, np.uint64)
    m = TensorMap2D(buf, tuple(int(d) for d in dims), int(row_bytes), tuple(int(b) for b in box), itemsize=itemsize)
    if backend.is_simulator():
        return m
    addr = int(buf.device_ctypes_pointer.value)
    key = (addr, m.dims, m.row_bytes, m.box, m.itemsize)
    if key not in _ENCODED:
        _ENCODED[key] = _encode(addr, m)
    return _ENCODED[key]


_DTYPES = {2: lambda drv: drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
           4: lambda drv: drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}


def _encode(addr: int, m: TensorMap2D):
    from cuda.bindings import driver as drv
    from numba import cuda as _cuda

    if addr % 16:
        raise ValueError(f"tensor map: global address {addr:#x} is not 16-byte aligned")
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t  # the binding takes no plain ints for these arrays
    err, tmap = drv.cuTensorMapEncodeTiled(
        _DTYPES[m.itemsize](drv), 2, addr, [u64(d) for d in m.dims],
        [u64(m.row_bytes)], [u32(b) for b in m.box], [u32(1), u32(1)],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)  # NONE: out-of-bounds reads zeros
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled({m.dims}, row {m.row_bytes} B, box {m.box}): {err}")
    return _cuda.to_device(np.array([int(w) for w in tmap.opaque], np.uint64))


#: how long a GPU thread waits on one mbarrier phase (``mbar_wait``) before it traps: the waits of
#: rungs 21-24 last microseconds (a whole 4096^3 GEMM is a fraction of a millisecond), so a phase
#: not done after 10 s lost an arrival or a copy's bytes, and the launch fails ("unspecified launch
#: failure") instead of hanging the process; the simulator raises its DeadlockError instead
MBAR_WAIT_LIMIT_NS = 10_000_000_000


def clustered(kernel, dims):
    """The kernel (a ``cuda.jit`` kernel whose body starts with ``cluster_dims(*dims)``), its
    blocks to be run in clusters of ``dims`` (x, y, z) by the simulator, whatever launches it (a
    rung's launch, the bank-conflict simulation): the simulator's scheduler reads the shape from
    the kernel's function before any block runs (``pk_cluster_dims``), as a GPU reads it from
    the kernel's compiled attributes.  On a GPU: the kernel, unchanged."""
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if len(dims) != 3 or not all(d >= 1 for d in dims) or not 1 <= math.prod(dims) <= 8:
        raise ValueError(f"clustered: a cluster shape is 1 to 3 sizes >= 1 of at most 8 blocks (portable), got {dims}")
    if backend.is_simulator():
        kernel.fn.pk_cluster_dims = dims
    return kernel


def mbar_state(word) -> dict:
    """The simulator's mbarrier word, decoded (see the module's docstring)."""
    w = int(word)
    return {"pending": w & 0xFFFFF, "count": (w >> 20) & 0xFFFFF, "tx": ((w >> 40) & 0x3FFFFF) - 2**21,
            "init": bool((w >> 62) & 1), "phase": (w >> 63) & 1}


def _mbar_word(pending: int, count: int, tx: int, phase: int) -> int:
    return pending | (count << 20) | ((tx + 2**21) << 40) | (1 << 62) | (phase << 63)


if backend.is_simulator():
    # --- simulator twins ------------------------------------------------------------------
    def smem_addr(arr):
        return np.uint32(0)

    def fence_proxy_async():
        pass

    def wgmma_fence():
        pass

    def _groups():  # kept on the simulator's object for this CUDA thread: one list per thread and block
        t = threading.current_thread()
        if not hasattr(t, "pk_wgmma"):
            t.pk_wgmma = [[]]  # the last list is the open (uncommitted) group
        return t.pk_wgmma

    def _halves(smem, byte_addr):
        """float16 values at (unswizzled) byte addresses, read where the 128-byte swizzle puts them."""
        if smem.ndim != 1 or smem.dtype != np.float16:
            raise TypeError(f"wgmma: the twin reads a 1-D float16 shared array, got {smem.dtype} {smem.ndim}-D")
        phys = byte_addr ^ (((byte_addr >> 7) & 7) << 4)
        if phys.min() < 0 or phys.max() + 2 > smem.shape[0] * 2 or (phys % 2).any():
            raise RuntimeError(f"wgmma: a descriptor addresses bytes {phys.min()}..{phys.max() + 1} outside the "
                               f"{smem.shape[0] * 2}-byte shared array: a GPU would read garbage")
        return np.ndarray.view(smem, np.ndarray)[phys // 2]  # no shared access recorded: the async proxy

    @functools.lru_cache(maxsize=None)
    def _offsets(n, t, a_sbo, b_lbo, b_sbo):
        """Byte offsets from the descriptors' start addresses of what thread t of the warpgroup
        reads: A's rows 16w + l/4 and 8 below (2 x 16 k), B's columns 8j + 2(l % 4) and the next
        for j < n/8, in fragment order (16 k x n/4)."""
        w, lane = t // 32, t % 32
        rows = np.array([16 * w + lane // 4, 16 * w + lane // 4 + 8])[:, None]
        offa = (rows // 8) * a_sbo + (rows % 8) * 128 + np.arange(16)[None, :] * 2
        nn = (8 * np.arange(n // 8)[:, None] + 2 * (lane % 4) + np.arange(2)[None, :]).reshape(1, -1)
        kk = np.arange(16)[:, None]
        offb = (nn // 64) * b_lbo + (kk // 8) * b_sbo + (kk % 8) * 128 + (nn % 64) * 2
        return offa, offb

    def _execute(acc, smem, da, db, scale_d, n, tid):
        a0, _, a_sbo, swa = decode_desc(da)
        b0, b_lbo, b_sbo, swb = decode_desc(db)
        if swa != 1 or swb != 1:
            raise RuntimeError(f"wgmma twin: only the 128-byte swizzle is modelled (descriptor modes {swa}, {swb})")
        offa, offb = _offsets(n, tid % 128, a_sbo, b_lbo, b_sbo)
        A = _halves(smem, a0 + offa).astype(np.float32)  # (2, 16)
        B = _halves(smem, b0 + offb).astype(np.float32)  # (16, n/4): the thread's columns only
        # k in order, float32 sums (add.accumulate is sequential; products of float16 are exact in float32)
        D = np.add.accumulate(A[:, :, None] * B[None, :, :], axis=1)[:, -1, :]  # (2, n/4)
        frag = D.reshape(2, n // 8, 2).transpose(1, 0, 2).reshape(-1)  # D[r, c], D[r, c+1], D[r+8, c], D[r+8, c+1]
        if scale_d:
            acc[:n // 2] += frag
        else:
            acc[:n // 2] = frag

    @cuda.jit(device=True)
    def _thread():  # a device function: the simulator gives it this CUDA thread's threadIdx
        return cuda.threadIdx.x

    def _issue(acc, smem, desc_a, desc_b, scale_d, n):
        if acc.shape[0] < n // 2:
            raise RuntimeError(f"wgmma m64n{n}k16: acc holds {acc.shape[0]} floats, a thread needs {n // 2}")
        _groups()[-1].append((acc, smem, int(desc_a), int(desc_b), int(scale_d), n, int(_thread())))

    def wgmma_m64n64k16(acc, smem, desc_a, desc_b, scale_d):
        _issue(acc, smem, desc_a, desc_b, scale_d, 64)

    def wgmma_m64n128k16(acc, smem, desc_a, desc_b, scale_d):
        _issue(acc, smem, desc_a, desc_b, scale_d, 128)

    def wgmma_m64n256k16(acc, smem, desc_a, desc_b, scale_d):
        _issue(acc, smem, desc_a, desc_b, scale_d, 256)

    def wgmma_commit():
        _groups().append([])

    def wgmma_wait(n):
        groups = _groups()
        closed = groups[:-1]
        done = max(len(closed) - int(n), 0)
        for g in closed[:done]:
            for op in g:
                _execute(*op)
        threading.current_thread().pk_wgmma = closed[done:] + [groups[-1]]
        # a wgmma is one operation of the whole warpgroup: when any of its threads sees it
        # complete, all 128 fragments have been computed (their shared reads done), which a
        # kernel relies on when one thread of the warpgroup releases the stage
        wg = int(_thread()) // 128
        _cta_barrier(("wgmma.wait_group", wg), 128, lambda: f"wgmma.wait_group of warpgroup {wg}")

    def _park(ready, what):
        """Let the block's other threads run until ready() (perfkit._simspeed.yield_to_block, a
        method of the simulated thread: imported from nowhere, so that the scheduler's text stays
        out of the rungs' store keys); False on the host, where nothing else runs."""
        park = getattr(threading.current_thread(), "park", None)
        return park is not None and park(ready, what)

    def _cta_barrier(key, count, label):
        """Wait until ``count`` threads of the block have arrived at barrier ``key`` (a generation
        counter in the block's state, perfkit._simspeed.block_local); a no-op on the host."""
        state = getattr(threading.current_thread(), "block_state", None)
        local = None if state is None else state()
        if local is not None:
            _barrier(local, key, count, label)

    def _barrier(local, key, count, label):
        """The barrier of :func:`_cta_barrier` over the state dict ``local`` (a block's, a cluster's)."""
        with _LOCK:
            st = local.setdefault(key, [0, 0, count])  # arrived, generation, count
            if st[2] != count:
                raise RuntimeError(f"{label()}: threads arrive with {count} and {st[2]} as the thread count")
            st[0] += 1
            gen = st[1]
            if st[0] == count:  # the last one: the barrier completes, everyone goes on
                st[0], st[1] = 0, gen + 1
                return
        while st[1] == gen:
            _park(lambda: st[1] != gen, lambda: f"{label()}: {st[0]} of {count} threads arrived")

    def bar_sync(bar_id, nthreads):
        b, n = int(bar_id), int(nthreads)
        if not 1 <= b < 16 or n < 32 or n % 32:
            raise RuntimeError(f"bar_sync({b}, {n}): barriers 1..15 (0 is syncthreads'), a thread count that is a "
                               "positive multiple of 32 (whole warps arrive)")
        _cta_barrier(("bar.sync", b), n, lambda: f"bar.sync {b}, {n}")

    def setmaxnreg_inc(n):
        _check_maxnreg(n)

    def setmaxnreg_dec(n):
        _check_maxnreg(n)

    def _check_maxnreg(n):
        if not 24 <= int(n) <= 256 or int(n) % 8:
            raise RuntimeError(f"setmaxnreg {n}: the count must be a multiple of 8 in 24..256")


    # --- mbarrier and TMA twins -----------------------------------------------------------
    _LOCK = threading.Lock()  # a barrier's read-modify-write under the simulator's OS threads (greenlets
    # never switch inside one; nothing here yields while holding it)

    def _word(bars, i):
        raw = np.ndarray.view(bars, np.ndarray)  # no shared access recorded: the barrier unit
        if raw.dtype != np.uint64 or raw.ndim != 1 or not 0 <= int(i) < raw.shape[0]:
            raise TypeError(f"mbarrier: barrier {i} of a {raw.dtype} array of shape {raw.shape}; "
                            "barriers are a 1-D shared uint64 array")
        return raw

    def _read(bars, i, what):
        st = mbar_state(_word(bars, i)[int(i)])
        if not st["init"]:
            raise RuntimeError(f"mbarrier {i}: {what} before mbar_init")
        return st

    def _write(bars, i, st):
        if st["pending"] == 0 and st["tx"] == 0:  # the phase completes: the next one starts
            st = {**st, "pending": st["count"], "phase": st["phase"] ^ 1}
        if abs(st["tx"]) >= 2**20:
            raise RuntimeError(f"mbarrier {i}: transaction count {st['tx']} out of the range a phase can hold")
        _word(bars, i)[int(i)] = np.uint64(_mbar_word(st["pending"], st["count"], st["tx"], st["phase"]))

    _INFLIGHT: dict = {}  # barrier word address -> (weakref to its array, [copies not yet landed])

    def _inflight(bars, i):
        raw = _word(bars, i)
        owner = raw
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        key = raw.__array_interface__["data"][0] + 8 * int(i)
        ref, copies = _INFLIGHT.get(key, (None, None))
        if ref is None or ref() is not owner:  # a block's barrier at an address an ended block used
            ref, copies = weakref.ref(owner, lambda _, k=key: _INFLIGHT.pop(k, None)), []  # gone with the block
            _INFLIGHT[key] = (ref, copies)
        return copies

    def mbar_init(bars, i, count):
        if not 1 <= int(count) < 2**20:
            raise RuntimeError(f"mbar_init: count {count} outside 1..2**20 - 1")
        with _LOCK:
            _inflight(bars, i).clear()
            _word(bars, i)[int(i)] = np.uint64(_mbar_word(int(count), int(count), 0, 0))

    def fence_mbarrier_init():
        pass

    def _arrive(bars, i, st):
        if st["pending"] == 0:
            raise RuntimeError(f"mbarrier {i}: more arrivals than its count ({st['count']}) in one phase")
        _write(bars, i, {**st, "pending": st["pending"] - 1})

    def mbar_arrive(bars, i):
        with _LOCK:
            _arrive(bars, i, _read(bars, i, "arrive"))

    def mbar_arrive_expect_tx(bars, i, nbytes):
        with _LOCK:
            st = _read(bars, i, "arrive.expect_tx")
            _arrive(bars, i, {**st, "tx": st["tx"] + int(nbytes)})

    def _land(bars, i):
        copies = _inflight(bars, i)
        while copies:
            dst, phys, data, nbytes = copies.pop(0)
            dst[phys] = data
            st = _read(bars, i, "complete_tx")
            _write(bars, i, {**st, "tx": st["tx"] - nbytes})

    def _phase_done(bars, i, parity):
        with _LOCK:
            _land(bars, i)  # every copy issued so far has arrived by now
            return _read(bars, i, "try_wait")["phase"] != (int(parity) & 1)

    def _waiting_on(bars, i, parity, frame):
        """What a thread waits for, named as the kernel names the barrier array (for the
        scheduler's deadlock error; evaluated only then)."""
        def what():
            st = mbar_state(_word(bars, i)[int(i)])
            return (f"mbarrier {_name_of(bars, frame)}[{int(i)}], the phase of parity {int(parity) & 1} (phase "
                    f"{st['phase']} under way: {st['pending']} of {st['count']} arrivals and {st['tx']} bytes "
                    "outstanding, every issued copy landed)")
        return what

    def _name_of(arr, frame, depth=12):
        name = "?"
        while frame is not None and depth:  # the outermost name: the kernel's, not a device function's
            name = next((k for k, v in frame.f_locals.items() if v is arr), name)
            frame, depth = frame.f_back, depth - 1
        return name

    def mbar_try_wait(bars, i, parity):
        # a GPU's try_wait suspends the thread until the phase completes or a time limit passes:
        # here the block's other threads run meanwhile (_simspeed.yield_to_block)
        if _phase_done(bars, i, parity):
            return np.int32(1)
        _park(lambda: _phase_done(bars, i, parity), _waiting_on(bars, i, parity, sys._getframe(1)))
        return np.int32(_phase_done(bars, i, parity))

    def mbar_wait(bars, i, parity):
        what = _waiting_on(bars, i, parity, sys._getframe(1))
        while not _phase_done(bars, i, parity):
            if not _park(lambda: _phase_done(bars, i, parity), what):
                raise RuntimeError(f"mbar_wait: {what()} never completes here (no thread of a block to wait for): "
                                   "on a GPU this thread would hang")

    def tensormap_acquire(tmap):
        if not isinstance(tmap, TensorMap2D):
            raise TypeError(f"tensormap_acquire: the simulator passes a TensorMap2D, got {type(tmap).__name__}")

    def _box(tmap, c0, c1, who):
        """The global array as element bits (a view: the simulator's device array wraps a NumPy
        array), which of the box's elements lie inside the map's dims, and their flat indices."""
        src = np.asarray(getattr(tmap.array, "_ary", tmap.array))
        if not src.flags.c_contiguous:
            raise RuntimeError(f"{who}: the simulator's twin takes a C-contiguous global array")
        flat = src.reshape(-1).view(np.uint8).view({2: np.uint16, 4: np.uint32}[tmap.itemsize])
        (bi, bo), (di, do) = tmap.box, tmap.dims
        x = int(c0) + np.arange(bi)[None, :]
        y = int(c1) + np.arange(bo)[:, None]
        inside = (x >= 0) & (x < di) & (y >= 0) & (y < do)
        idx = np.where(inside, y * (tmap.row_bytes // tmap.itemsize) + x, 0)
        if idx.max() >= flat.shape[0]:
            raise RuntimeError(f"{who}: the map's dims {tmap.dims} and row stride {tmap.row_bytes} reach past "
                               f"the {flat.shape[0]}-element array")
        return flat, inside, idx

    def tma_load_2d(dst, dst_off, tmap, c0, c1, bars, i):
        if not isinstance(tmap, TensorMap2D):
            raise TypeError(f"tma_load_2d: the simulator passes a TensorMap2D, got {type(tmap).__name__}")
        _read(bars, i, "a copy completing on it")
        off = int(dst_off)
        if off % 1024:
            raise RuntimeError(f"tma_load_2d: destination byte {off} is not 1024-byte aligned (the 128-byte "
                               "swizzle's pattern spans 8 rows of 128 bytes)")
        raw = np.ndarray.view(dst, np.ndarray).reshape(-1).view(np.uint8)
        if off + tmap.box_bytes > raw.shape[0]:
            raise RuntimeError(f"tma_load_2d: a {tmap.box_bytes}-byte box at byte {off} overruns the "
                               f"{raw.shape[0]}-byte shared array")
        flat, inside, idx = _box(tmap, c0, c1, "tma_load_2d")
        tile = np.where(inside, flat[idx], 0).astype(flat.dtype)  # out of bounds: zeros
        addr = off + np.arange(tmap.box_bytes)
        phys = addr ^ (((addr >> 7) & 7) << 4)
        with _LOCK:
            _inflight(bars, i).append((raw, phys, tile.reshape(-1).view(np.uint8), tmap.box_bytes))

    def _bulk():  # this CUDA thread's bulk-async groups (TMA stores), as _groups() for wgmma
        t = threading.current_thread()
        if not hasattr(t, "pk_bulk"):
            t.pk_bulk = [[]]
        return t.pk_bulk

    def tma_store_2d(tmap, c0, c1, src, src_off):
        if not isinstance(tmap, TensorMap2D):
            raise TypeError(f"tma_store_2d: the simulator passes a TensorMap2D, got {type(tmap).__name__}")
        off = int(src_off)
        if off % 1024:
            raise RuntimeError(f"tma_store_2d: source byte {off} is not 1024-byte aligned (the 128-byte swizzle)")
        raw = np.ndarray.view(src, np.ndarray).reshape(-1).view(np.uint8)
        if off + tmap.box_bytes > raw.shape[0]:
            raise RuntimeError(f"tma_store_2d: a {tmap.box_bytes}-byte box at byte {off} overruns the "
                               f"{raw.shape[0]}-byte shared array")
        _bulk()[-1].append((tmap, int(c0), int(c1), raw, off))

    def _store(tmap, c0, c1, raw, off):
        flat, inside, idx = _box(tmap, c0, c1, "tma_store_2d")
        addr = off + np.arange(tmap.box_bytes)
        tile = raw[addr ^ (((addr >> 7) & 7) << 4)].view(flat.dtype).reshape(tmap.box[1], tmap.box[0])
        flat[idx[inside]] = tile[inside]  # past the map's dims: not written

    def bulk_commit():
        _bulk().append([])

    def bulk_wait(n):
        groups = _bulk()
        closed = groups[:-1]
        done = max(len(closed) - int(n), 0)
        for g in closed[:done]:
            for op in g:
                _store(*op)
        threading.current_thread().pk_bulk = closed[done:] + [groups[-1]]

    bulk_wait_read = bulk_wait


    # --- cluster twins ------------------------------------------------------------------------
    def cluster_dims(x, y, z):
        t = threading.current_thread()
        got = getattr(t, "cluster_dims", None)
        if got is not None and got != (int(x), int(y), int(z)):
            raise RuntimeError(f"cluster_dims{(int(x), int(y), int(z))}: the simulator ran this kernel's blocks in "
                               f"clusters of {got} (clustered(kernel, dims) names another shape)")
        if got is None and (int(x), int(y), int(z)) != (1, 1, 1) and hasattr(t, "block_state"):
            raise RuntimeError(f"cluster_dims{(int(x), int(y), int(z))}: the simulator ran the blocks one by one (a "
                               "GPU runs them in clusters all the same): return the kernel as clustered(kernel, dims)")

    def cluster_ctarank():
        return np.uint32(getattr(threading.current_thread(), "cluster_rank", 0))

    def _cluster():
        """(this thread's rank, the cluster's state: 'dims', 'shared' (each block's simulated
        shared memory by rank), 'threads' a block), or None outside a cluster launch."""
        t = threading.current_thread()
        cl = getattr(t, "cluster_local", None)
        return None if cl is None else (t.cluster_rank, cl)

    def cluster_sync():
        c = _cluster()
        if c is None:  # a 1-block cluster: the block barrier
            _cta_barrier(("barrier.cluster",), _block_threads(), lambda: "barrier.cluster (one block)")
            return
        _, cl = c
        n = cl["threads"] * len(cl["shared"])
        _barrier(cl, ("barrier.cluster",), n, lambda: f"barrier.cluster ({n} threads of the cluster)")

    def _block_threads():
        t = threading.current_thread()
        bd = getattr(getattr(t, "_manager", None), "_block_dim", (1,))
        return int(np.prod(bd))

    def _peer(arr, rank, who):
        """The shared array of block ``rank`` of this cluster at the offset ``arr`` has in this
        block's shared memory (mapa): same shape, dtype and strides."""
        raw = np.ndarray.view(arr, np.ndarray)
        c = _cluster()
        if c is None:
            if int(rank) != 0:
                raise RuntimeError(f"{who}: block {rank} of a cluster of one (launched without clusters)")
            return raw
        me, cl = c
        if not 0 <= int(rank) < len(cl["shared"]):
            raise RuntimeError(f"{who}: block {rank} of a cluster of {len(cl['shared'])}")
        if int(rank) == me:
            return raw
        addr = raw.__array_interface__["data"][0]
        mine, theirs = cl["shared"][me], cl["shared"][int(rank)]
        for key, owner in [("dyn", mine._dynshared)] + list(mine._allocations.items()):
            base = owner.__array_interface__["data"][0]
            if base <= addr < base + owner.nbytes:
                peer = theirs._dynshared if key == "dyn" else theirs._allocations.get(key)
                if peer is None:
                    raise RuntimeError(f"{who}: block {rank} has not made this shared array yet")
                return np.ndarray(raw.shape, raw.dtype, buffer=peer, offset=addr - base, strides=raw.strides)
        raise RuntimeError(f"{who}: the array is not in this block's shared memory")

    def mbar_arrive_cluster(bars, i, cta):
        mbar_arrive(_peer(bars, cta, "mbar_arrive_cluster"), i)

    def tma_load_2d_multicast(dst, dst_off, tmap, c0, c1, bars, i, mask):
        m = int(mask)
        if not 0 < m < 2**16:
            raise RuntimeError(f"tma_load_2d_multicast: mask {m:#x} names no block (a 16-bit mask of cluster ranks)")
        for rank in range(16):
            if m >> rank & 1:
                tma_load_2d(_peer(dst, rank, "tma_load_2d_multicast"), dst_off, tmap, c0, c1,
                            _peer(bars, rank, "tma_load_2d_multicast"), i)

else:
    # --- inline PTX -------------------------------------------------------------------------
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    _i32, _i64, _f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()

    def _asm(builder, text, cons, args=(), ret=ir.VoidType()):
        fnty = ir.FunctionType(ret, [a.type for a in args])
        return builder.call(ir.InlineAsm(fnty, text, cons, side_effect=True), list(args))

    def _noarg(text):
        @intrinsic
        def f(typingctx):
            def codegen(context, builder, sig, args):
                _asm(builder, text, "~{memory}")
                return context.get_dummy_value()
            return types.void(), codegen
        return f

    wgmma_fence = _noarg("wgmma.fence.sync.aligned;")
    wgmma_commit = _noarg("wgmma.commit_group.sync.aligned;")
    fence_proxy_async = _noarg("fence.proxy.async.shared::cta;")

    @intrinsic
    def wgmma_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None  # Numba retries with the literal type; a run-time count cannot be waited on
        k = int(n.literal_value)

        def codegen(context, builder, sig, args):
            _asm(builder, f"wgmma.wait_group.sync.aligned {k};", "~{memory}")
            return context.get_dummy_value()
        return types.void(n), codegen

    @intrinsic
    def smem_addr(typingctx, arr):
        if not isinstance(arr, types.Array):
            return None

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            return builder.ptrtoint(builder.addrspacecast(data, ir.PointerType(data.type.pointee, 3)), _i32)
        return types.uint32(arr), codegen

    def _wgmma(n: int):
        nacc = n // 2
        outs = ",".join(f"${i}" for i in range(nacc))
        # the descriptors are operands $2N, $2N+1 (N outputs tied to N inputs before them)
        text = ("{\n\t.reg .pred p;\n\t"
                f"setp.ne.b32 p, ${2 * nacc + 2}, 0;\n\t"
                f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 "
                f"{{{outs}}}, ${2 * nacc}, ${2 * nacc + 1}, p, 1, 1, 0, 1;\n\t}}")
        cons = ",".join(["=f"] * nacc + [str(i) for i in range(nacc)] + ["l", "l", "r"]) + ",~{memory}"

        @intrinsic
        def wgmma(typingctx, acc, smem, desc_a, desc_b, scale_d):
            if not (isinstance(acc, types.Array) and acc.dtype == types.float32):
                return None

            def codegen(context, builder, sig, args):
                data = context.make_array(sig.args[0])(context, builder, args[0]).data
                ptrs = [builder.gep(data, [ir.Constant(_i32, i)]) for i in range(nacc)]
                vals = [builder.load(p) for p in ptrs]
                da = context.cast(builder, args[2], sig.args[2], types.uint64)
                db = context.cast(builder, args[3], sig.args[3], types.uint64)
                sd = context.cast(builder, args[4], sig.args[4], types.int32)
                fnty = ir.FunctionType(ir.LiteralStructType([_f32] * nacc), [_f32] * nacc + [_i64, _i64, _i32])
                res = builder.call(ir.InlineAsm(fnty, text, cons, side_effect=True), vals + [da, db, sd])
                for i, p in enumerate(ptrs):
                    builder.store(builder.extract_value(res, i), p)
                return context.get_dummy_value()
            return types.void(acc, smem, desc_a, desc_b, scale_d), codegen
        return wgmma

    wgmma_m64n64k16, wgmma_m64n128k16, wgmma_m64n256k16 = _wgmma(64), _wgmma(128), _wgmma(256)


    # --- mbarrier and TMA -------------------------------------------------------------------
    fence_mbarrier_init = _noarg("fence.mbarrier_init.release.cluster;")

    def _shared32(context, builder, aryty, ary):
        data = context.make_array(aryty)(context, builder, ary).data
        return builder.ptrtoint(builder.addrspacecast(data, ir.PointerType(data.type.pointee, 3)), _i32)

    def _bar(context, builder, sig, args, k=0):
        return builder.add(_shared32(context, builder, sig.args[k], args[k]),
                           builder.mul(context.cast(builder, args[k + 1], sig.args[k + 1], types.int32),
                                       ir.Constant(_i32, 8)))

    @intrinsic
    def mbar_init(typingctx, bars, i, count):
        def codegen(context, builder, sig, args):
            _asm(builder, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
                 [_bar(context, builder, sig, args), context.cast(builder, args[2], sig.args[2], types.int32)])
            return context.get_dummy_value()
        return types.void(bars, i, count), codegen

    @intrinsic
    def mbar_arrive_expect_tx(typingctx, bars, i, nbytes):
        def codegen(context, builder, sig, args):
            _asm(builder, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}",
                 [_bar(context, builder, sig, args), context.cast(builder, args[2], sig.args[2], types.int32)])
            return context.get_dummy_value()
        return types.void(bars, i, nbytes), codegen

    @intrinsic
    def mbar_arrive(typingctx, bars, i):
        def codegen(context, builder, sig, args):
            _asm(builder, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", [_bar(context, builder, sig, args)])
            return context.get_dummy_value()
        return types.void(bars, i), codegen

    @intrinsic
    def mbar_try_wait(typingctx, bars, i, parity):
        def codegen(context, builder, sig, args):
            return _asm(builder, "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n\t"
                                 "selp.u32 $0, 1, 0, p;\n\t}", "=r,r,r,~{memory}",
                        [_bar(context, builder, sig, args), context.cast(builder, args[2], sig.args[2], types.int32)],
                        ret=_i32)
        return types.int32(bars, i, parity), codegen

    @intrinsic
    def mbar_wait(typingctx, bars, i, parity):
        # the loop inside one asm block: PTX labels are local to their { } scope, so inlined copies
        # do not clash (CUTLASS's ClusterBarrier::wait).  The first try_wait is the whole wait when
        # the phase is done; only a thread that must retry reads %globaltimer, and it traps (the
        # launch fails) after MBAR_WAIT_LIMIT_NS instead of spinning forever on a lost arrival
        text = ("{\n\t.reg .pred p;\n\t.reg .b64 t0, t1;\n\t"
                "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n\t@p bra DONE;\n\t"
                "mov.u64 t0, %globaltimer;\n\tWAIT:\n\t"
                "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n\t@p bra DONE;\n\t"
                "mov.u64 t1, %globaltimer;\n\tsub.u64 t1, t1, t0;\n\t"
                f"setp.lt.u64 p, t1, {MBAR_WAIT_LIMIT_NS};\n\t@p bra WAIT;\n\ttrap;\n\tDONE:\n\t}}")

        def codegen(context, builder, sig, args):
            _asm(builder, text, "r,r,~{memory}",
                 [_bar(context, builder, sig, args), context.cast(builder, args[2], sig.args[2], types.int32)])
            return context.get_dummy_value()
        return types.void(bars, i, parity), codegen

    @intrinsic
    def tensormap_acquire(typingctx, tmap):
        def codegen(context, builder, sig, args):
            p = builder.ptrtoint(context.make_array(sig.args[0])(context, builder, args[0]).data, _i64)
            _asm(builder, "fence.proxy.tensormap::generic.acquire.sys [$0], 128;\n\tprefetch.tensormap [$0];",
                 "l,~{memory}", [p])
            return context.get_dummy_value()
        return types.void(tmap), codegen

    def _tma_load_operands(context, builder, sig, args):
        """(dst, dst_off, tmap, c0, c1, bars, i) as the copy's operands: the destination's shared
        address, the map's generic address, the coordinates, the barrier's shared address."""
        s = sig.args
        d = builder.add(_shared32(context, builder, s[0], args[0]), context.cast(builder, args[1], s[1], types.int32))
        t = builder.ptrtoint(context.make_array(s[2])(context, builder, args[2]).data, _i64)
        x = context.cast(builder, args[3], s[3], types.int32)
        y = context.cast(builder, args[4], s[4], types.int32)
        return [d, t, x, y, _bar(context, builder, sig, args, 5)]

    @intrinsic
    def tma_load_2d(typingctx, dst, dst_off, tmap, c0, c1, bars, i):
        def codegen(context, builder, sig, args):
            _asm(builder, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                          "[$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r,~{memory}",
                 _tma_load_operands(context, builder, sig, args))
            return context.get_dummy_value()
        return types.void(dst, dst_off, tmap, c0, c1, bars, i), codegen


    # --- warp specialization: named barriers, setmaxnreg ----------------------------------------
    def _literal(n):
        if not isinstance(n, types.IntegerLiteral):
            return None  # Numba retries with the literal type; the instruction takes an immediate
        return int(n.literal_value)

    @intrinsic
    def bar_sync(typingctx, bar_id, nthreads):
        n = _literal(nthreads)
        if n is None or not isinstance(bar_id, types.Integer):
            return None

        def codegen(context, builder, sig, args):  # the barrier: an immediate or a register
            _asm(builder, f"bar.sync $0, {n};", "r,~{memory}", [context.cast(builder, args[0], sig.args[0], types.int32)])
            return context.get_dummy_value()
        return types.void(bar_id, nthreads), codegen

    def _setmaxnreg(kind):
        @intrinsic
        def f(typingctx, n):
            k = _literal(n)
            if k is None:
                return None

            def codegen(context, builder, sig, args):
                _asm(builder, f"setmaxnreg.{kind}.sync.aligned.u32 {k};", "~{memory}")
                return context.get_dummy_value()
            return types.void(n), codegen
        return f

    setmaxnreg_inc, setmaxnreg_dec = _setmaxnreg("inc"), _setmaxnreg("dec")


    # --- TMA stores ---------------------------------------------------------------------------
    @intrinsic
    def tma_store_2d(typingctx, tmap, c0, c1, src, src_off):
        def codegen(context, builder, sig, args):
            s = sig.args
            t = builder.ptrtoint(context.make_array(s[0])(context, builder, args[0]).data, _i64)
            x = context.cast(builder, args[1], s[1], types.int32)
            y = context.cast(builder, args[2], s[2], types.int32)
            d = builder.add(_shared32(context, builder, s[3], args[3]), context.cast(builder, args[4], s[4], types.int32))
            _asm(builder, "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [$0, {$1, $2}], [$3];",
                 "l,r,r,r,~{memory}", [t, x, y, d])
            return context.get_dummy_value()
        return types.void(tmap, c0, c1, src, src_off), codegen

    bulk_commit = _noarg("cp.async.bulk.commit_group;")

    def _bulk_wait(suffix):
        @intrinsic
        def f(typingctx, n):
            k = _literal(n)
            if k is None:
                return None

            def codegen(context, builder, sig, args):
                _asm(builder, f"cp.async.bulk.wait_group{suffix} {k};", "~{memory}")
                return context.get_dummy_value()
            return types.void(n), codegen
        return f

    bulk_wait, bulk_wait_read = _bulk_wait(""), _bulk_wait(".read")


    # --- clusters -------------------------------------------------------------------------------
    @intrinsic
    def cluster_dims(typingctx, x, y, z):
        dims = [_literal(d) for d in (x, y, z)]
        if None in dims:
            return None

        def codegen(context, builder, sig, args):
            # NVVM's kernel annotations (as numba's own launch bounds): the function being built
            # is the kernel when this is called from its body
            fn, mod = builder.function, builder.module
            nmd = cgutils.get_or_insert_named_metadata(mod, "nvvm.annotations")
            for prop, v in zip(("cluster_dim_x", "cluster_dim_y", "cluster_dim_z"), dims):
                nmd.add(mod.add_metadata((fn, ir.MetaDataString(mod, prop), ir.Constant(_i32, v))))
            return context.get_dummy_value()
        return types.void(x, y, z), codegen

    @intrinsic
    def cluster_ctarank(typingctx):
        def codegen(context, builder, sig, args):
            return _asm(builder, "mov.u32 $0, %cluster_ctarank;", "=r", ret=_i32)
        return types.uint32(), codegen

    cluster_sync = _noarg("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;")

    @intrinsic
    def mbar_arrive_cluster(typingctx, bars, i, cta):
        def codegen(context, builder, sig, args):
            _asm(builder, "{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, $0, $1;\n\t"
                          "mbarrier.arrive.shared::cluster.b64 _, [ra];\n\t}", "r,r,~{memory}",
                 [_bar(context, builder, sig, args), context.cast(builder, args[2], sig.args[2], types.int32)])
            return context.get_dummy_value()
        return types.void(bars, i, cta), codegen

    @intrinsic
    def tma_load_2d_multicast(typingctx, dst, dst_off, tmap, c0, c1, bars, i, mask):
        def codegen(context, builder, sig, args):
            m = builder.trunc(context.cast(builder, args[7], sig.args[7], types.int32), ir.IntType(16))  # a 16-bit mask
            _asm(builder, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                          ".multicast::cluster [$0], [$1, {$2, $3}], [$4], $5;", "r,l,r,r,r,h,~{memory}",
                 _tma_load_operands(context, builder, sig, args) + [m])
            return context.get_dummy_value()
        return types.void(dst, dst_off, tmap, c0, c1, bars, i, mask), codegen
