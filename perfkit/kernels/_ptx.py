"""Tensor-core and asynchronous-copy instructions for Numba kernels, through inline PTX, each
with an exact twin for Numba's CUDA simulator (which cannot run PTX), so kernels built on them
are checked without a GPU.  Shared by the GEMM and convolution ladders::

    from perfkit.kernels._ptx import (frag_a, frag_b, frag_c, mma_16816, mma_16816_u32,
                                      ldmatrix_x4, ldmatrix_x4_trans, cp_async16,
                                      cp_async_commit, cp_async_wait, pack_h2, unpack_h2)

What each one is (PTX ISA 8.x; sm_80 and later):

* ``mma_16816(a0..a7, b0..b3, c0..c3, scr_a, scr_b)``: ``mma.sync.aligned.m16n8k16.row.col
  .f32.f16.f16.f32`` on float16 fragment values (a_i, b_i as the ``frag_a``/``frag_b`` maps
  place them), returning the four float32 accumulators (``frag_c``).  ``scr_a`` (float32,
  (warps, 32, 8)) and ``scr_b`` (float32, (warps, 32, 4)) are shared scratch used only by the
  simulator's twin; on a GPU the compiler drops them.
* ``mma_16816_u32(a0..a3, b0, b1, c0..c3, scr_a, scr_b)``: the same instruction on packed
  registers (two float16 in one uint32, the first in the low half), as ``ldmatrix`` returns them.
* ``ldmatrix_x4(smem, row, col, scr)`` / ``ldmatrix_x4_trans``: ``ldmatrix.sync.aligned.m8n8.x4
  [.trans].shared.b16``.  ``smem`` is a 2-D float16 shared array; lane ``l`` gives the address
  ``smem[row, col]`` of row ``l % 8`` of 8x8 matrix ``l // 8`` (8 consecutive halves, 16-byte
  aligned); it receives register ``i`` = the halves (``r = l // 4``, columns ``2 * (l % 4)``,
  ``+1``) of matrix ``i`` (with ``.trans``: rows ``2 * (l % 4)``, ``+1`` of column ``l // 4``).
  ``scr`` (int32, (warps, 32, 2) shared) is the simulator twin's address exchange.
* ``cp_async16(smem, srow, scol, gmem, grow, gcol, src_bytes)``: ``cp.async.cg.shared.global``
  of 16 bytes from ``gmem[grow, gcol:]`` to ``smem[srow, scol:]``; only the first ``src_bytes``
  (0..16) are read, the rest of the 16 are zero-filled (``src_bytes = 0`` reads nothing: give an
  in-bounds address anyway).  Both addresses must be 16-byte aligned.
  ``cp_async_commit()`` closes a group of copies (``cp.async.commit_group``);
  ``cp_async_wait(n)`` (``n`` a compile-time constant) waits until at most ``n`` groups are
  pending (``cp.async.wait_group n``).  A copy is visible to other threads only after the wait
  and a barrier.  The simulator's twin really defers each copy until the wait that retires its
  group, so a kernel that reads a stage too early reads stale data there too; it lands each copy
  as one 16-byte shared store, the LDGSTS's width, so that :mod:`perfkit.banks` counts a warp's
  copies as one 128-bit access (Nsight Compute's ``l1tex__data_pipe_lsu_wavefronts_mem_shared``
  leaves LDGSTS out, and so does the model: LDGSTS is a global request there).
* ``pack_h2(lo, hi) -> uint32``, ``unpack_h2(u) -> (lo, hi)``: float16 pairs <-> one register.
* ``shfl_xor(val, lanemask, scr)``: ``cuda.shfl_xor_sync(0xffffffff, val, lanemask)`` for a
  float32 ``val`` (SHFL.BFLY); Numba's simulator has no shuffles, so its twin trades values
  through ``scr`` (float32 shared, (warps, 32, >= 1)), which the GPU version ignores.
* ``ld16_u32(arr, i, j) -> (u0, u1, u2, u3)`` and ``st16_u32(arr, i, j, u0, u1, u2, u3)``: one
  16-byte load or store at ``arr[i, j]`` of a 2-D float16 array (global or shared; 8 halves as
  four packed registers), ``LDG.E.128``/``STS.128``; the address must be 16-byte aligned.
* Flat-offset forms for hot loops, ``off`` an element offset (an ``int32``: 32-bit address
  arithmetic) into the C-ordered storage of a C-contiguous 2-D float16 array, so that a kernel
  computes a thread's offsets once and advances them by a constant:
  ``ldmatrix_x4_off(smem, off, scr)``, ``ldmatrix_x4_trans_off(smem, off, scr)`` (``off``: lane
  ``l``'s row address, as ``row * cols + col`` above), ``cp_async16_off(smem, soff, gmem, goff)``
  (all 16 bytes, no zero-fill: for tiles known to be inside the matrix),
  ``ld16_u32_off(arr, off)`` and ``st16_u32_off(arr, off, u0, u1, u2, u3)``.  On a GPU the shared
  address is the array's 32-bit ``.shared`` address plus ``2 * off`` (no generic-to-shared
  conversion, no 64-bit math); the global one is the data pointer plus ``off``.  Their twins
  turn the offset back into ``[row, col]`` and run the 2-D twins (same checks).

Fragment maps (``frag_*``) are the PTX ISA's tables "Matrix Fragments for mma.m16n8k16 with
floating point type" (lane = 4 * group + thread-in-group); tests check them against an
independent transcription.

The twins' scratch arrays stand in for the register exchange inside a warp (mma operands,
ldmatrix row addresses, shuffles): a GPU makes no shared-memory access there, so the twins
touch them through a plain ndarray view that :mod:`perfkit.banks` does not record (its
bank-conflict counts hold the kernel's own shared accesses and the data the twins read).
"""
from __future__ import annotations

import threading

import numpy as np
from numba import cuda, float32

from .. import backend

__all__ = ["frag_a", "frag_b", "frag_c", "mma_16816", "mma_16816_u32", "ldmatrix_x4", "ldmatrix_x4_trans",
           "cp_async16", "cp_async_commit", "cp_async_wait", "pack_h2", "unpack_h2", "ld16_u32", "st16_u32", "shfl_xor",
           "ldmatrix_x4_off", "ldmatrix_x4_trans_off", "cp_async16_off", "ld16_u32_off", "st16_u32_off"]


@cuda.jit(device=True)
def frag_a(lane, i):
    """(row, col) in the 16x16 A tile of register a_i (i < 8) of ``lane``."""
    group = lane // 4
    tig = lane % 4
    row = group + 8 * ((i // 2) % 2)
    col = tig * 2 + (i % 2) + 8 * (i // 4)
    return row, col


@cuda.jit(device=True)
def frag_b(lane, i):
    """(row, col) in the 16x8 B tile of register b_i (i < 4) of ``lane``."""
    return (lane % 4) * 2 + (i % 2) + 8 * (i // 2), lane // 4


@cuda.jit(device=True)
def frag_c(lane, i):
    """(row, col) in the 16x8 C/D tile of register c_i (i < 4) of ``lane``."""
    return lane // 4 + 8 * (i // 2), (lane % 4) * 2 + (i % 2)


if backend.is_simulator():
    # --- simulator twins ------------------------------------------------------------------
    def _bits(h) -> int:
        return int(np.float16(h).view(np.uint16))

    def _half(u) -> np.float16:
        return np.uint16(int(u) & 0xFFFF).view(np.float16)

    def _exchange(scr):
        """The scratch as a plain ndarray: a twin's register exchange is no shared access."""
        return np.ndarray.view(scr, np.ndarray) if isinstance(scr, np.ndarray) else scr

    def pack_h2(lo, hi):
        return np.uint32(_bits(lo) | (_bits(hi) << 16))

    def unpack_h2(u):
        u = int(u)
        return _half(u), _half(u >> 16)

    # where each lane's registers sit in the A (16x16), B (16x8) and C (16x8) tiles: the frag_*
    # maps as index tables, so a twin places a warp's fragments with one NumPy assignment
    _FA = np.array([[frag_a.py_func(s, i) for i in range(8)] for s in range(32)])  # (32, 8, 2)
    _FB = np.array([[frag_b.py_func(s, i) for i in range(4)] for s in range(32)])  # (32, 4, 2)
    _FC = np.array([[frag_c.py_func(s, i) for i in range(4)] for s in range(32)])  # (32, 4, 2)

    @cuda.jit(device=True)
    def mma_16816(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, c0, c1, c2, c3, scr_a, scr_b):
        """The simulator's mma.sync: every lane publishes its fragments, then computes its own
        accumulators from the whole warp's, placing every value with the same frag_* maps
        (as tables) and summing k in order in float32, as the scalar loop it replaces did."""
        lane = cuda.threadIdx.x % 32
        w = cuda.threadIdx.x // 32
        scr_a, scr_b = _exchange(scr_a), _exchange(scr_b)
        scr_a[w, lane, :8] = np.array((a0, a1, a2, a3, a4, a5, a6, a7), dtype=np.float32)
        scr_b[w, lane, :4] = np.array((b0, b1, b2, b3), dtype=np.float32)
        cuda.syncthreads()
        A = np.empty((16, 16), np.float32)
        B = np.empty((16, 8), np.float32)
        A[_FA[..., 0], _FA[..., 1]] = scr_a[w, :, :8]
        B[_FB[..., 0], _FB[..., 1]] = scr_b[w, :, :4]
        Ar = A[_FC[lane, :, 0]]            # the 4 rows of A this lane's accumulators take
        Bc = B[:, _FC[lane, :, 1]].T       # and the 4 columns of B
        d = np.array((c0, c1, c2, c3), dtype=np.float32)
        for kk in range(16):
            d += Ar[:, kk] * Bc[:, kk]
        cuda.syncthreads()  # the scratch is reused by the next call
        return d[0], d[1], d[2], d[3]

    @cuda.jit(device=True)
    def mma_16816_u32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3, scr_a, scr_b):
        x0, x1 = unpack_h2(a0)
        x2, x3 = unpack_h2(a1)
        x4, x5 = unpack_h2(a2)
        x6, x7 = unpack_h2(a3)
        y0, y1 = unpack_h2(b0)
        y2, y3 = unpack_h2(b1)
        return mma_16816(x0, x1, x2, x3, x4, x5, x6, x7, y0, y1, y2, y3, c0, c1, c2, c3, scr_a, scr_b)

    def _check_ldmatrix_address(smem, row, col):
        if smem.dtype != np.float16 or smem.ndim != 2:
            raise TypeError(f"ldmatrix: a 2-D float16 shared array is needed, got {smem.dtype} {smem.ndim}-D")
        off = (int(row) * smem.strides[0] + int(col) * smem.strides[1])
        if off % 16 or not (0 <= int(row) < smem.shape[0] and 0 <= int(col) and int(col) + 8 <= smem.shape[1]):
            raise RuntimeError(f"ldmatrix: row address [{row}, {col}] is misaligned (byte offset {off}) or "
                               f"outside the {smem.shape} tile: a GPU would fault or read garbage")

    @cuda.jit(device=True)
    def _ldmatrix_sim(smem, row, col, scr, trans):
        lane = cuda.threadIdx.x % 32
        w = cuda.threadIdx.x // 32
        _check_ldmatrix_address(smem, row, col)
        scr = _exchange(scr)
        scr[w, lane, 0] = row
        scr[w, lane, 1] = col
        cuda.syncthreads()
        g = lane // 4
        t = lane % 4
        out = [np.uint32(0)] * 4
        for i in range(4):
            if trans:  # column g of matrix i, rows 2t and 2t+1
                lo = smem[scr[w, 8 * i + 2 * t, 0], scr[w, 8 * i + 2 * t, 1] + g]
                hi = smem[scr[w, 8 * i + 2 * t + 1, 0], scr[w, 8 * i + 2 * t + 1, 1] + g]
            else:  # row g of matrix i, columns 2t and 2t+1
                lo = smem[scr[w, 8 * i + g, 0], scr[w, 8 * i + g, 1] + 2 * t]
                hi = smem[scr[w, 8 * i + g, 0], scr[w, 8 * i + g, 1] + 2 * t + 1]
            out[i] = pack_h2(lo, hi)
        cuda.syncthreads()  # the scratch is reused by the next call
        return out[0], out[1], out[2], out[3]

    @cuda.jit(device=True)
    def ldmatrix_x4(smem, row, col, scr):
        return _ldmatrix_sim(smem, row, col, scr, False)

    @cuda.jit(device=True)
    def ldmatrix_x4_trans(smem, row, col, scr):
        return _ldmatrix_sim(smem, row, col, scr, True)

    def _check16(arr, i, j, who):
        if arr.ndim != 2 or arr.dtype != np.float16:
            raise TypeError(f"{who}: a 2-D float16 array is needed, got {arr.dtype} {arr.ndim}-D")
        off = int(i) * arr.strides[0] + int(j) * arr.strides[1]
        if off % 16 or arr.strides[1] != 2 or not (0 <= int(i) < arr.shape[0] and 0 <= int(j) <= arr.shape[1] - 8):
            raise RuntimeError(f"{who}: 16-byte access at [{i}, {j}] (byte offset {off}) of a {arr.shape} array "
                               "is misaligned or out of bounds: a GPU would fault here")

    def _words(arr):
        """A shared (ndarray) tile seen as 4-byte words, so that a 16-byte access is four
        consecutive words, as perfkit.banks merges them into one 128-bit access (the SASS's
        LDS.128/STS.128), not eight 2-byte ones; None for global arrays."""
        return arr.view(np.uint32) if isinstance(arr, np.ndarray) and arr.shape[1] % 2 == 0 else None

    def ld16_u32(arr, i, j):
        _check16(arr, i, j, "ld16_u32")
        i, j = int(i), int(j)
        w = _words(arr)
        if w is not None:
            return tuple(np.uint32(w[i, j // 2 + q]) for q in range(4))
        return tuple(pack_h2(arr[i, j + 2 * q], arr[i, j + 2 * q + 1]) for q in range(4))

    def st16_u32(arr, i, j, u0, u1, u2, u3):
        _check16(arr, i, j, "st16_u32")
        i, j = int(i), int(j)
        w = _words(arr)
        for q, u in enumerate((u0, u1, u2, u3)):
            if w is not None:
                w[i, j // 2 + q] = np.uint32(u)
            else:
                arr[i, j + 2 * q], arr[i, j + 2 * q + 1] = unpack_h2(u)

    @cuda.jit(device=True)
    def shfl_xor(val, lanemask, scr):
        lane = cuda.threadIdx.x % 32
        w = cuda.threadIdx.x // 32
        scr = _exchange(scr)
        scr[w, lane, 0] = val
        cuda.syncthreads()
        got = scr[w, lane ^ lanemask, 0]
        cuda.syncthreads()
        return float32(got)

    def _groups():  # kept on the simulator's object for this CUDA thread: one list per thread and block
        t = threading.current_thread()
        if not hasattr(t, "pk_cp_async"):
            t.pk_cp_async = [[]]  # the last list is the open (uncommitted) group
        return t.pk_cp_async

    def cp_async16(smem, srow, scol, gmem, grow, gcol, src_bytes):
        size = gmem.dtype.itemsize
        if smem.dtype != gmem.dtype:
            raise TypeError(f"cp_async16: shared {smem.dtype} and global {gmem.dtype} differ")
        src_bytes = int(src_bytes)
        if not 0 <= src_bytes <= 16 or src_bytes % size:
            raise ValueError(f"cp_async16: src_bytes={src_bytes} must be 0..16 in whole {size}-byte elements")
        n = 16 // size
        goff = int(grow) * gmem.strides[0] + int(gcol) * gmem.strides[1]
        soff = int(srow) * smem.strides[0] + int(scol) * smem.strides[1]
        if goff % 16 or soff % 16:
            raise RuntimeError(f"cp_async16: misaligned 16-byte copy (global [{grow}, {gcol}] byte offset {goff}, "
                               f"shared [{srow}, {scol}] byte offset {soff}): a GPU would fault here")
        if not (0 <= int(grow) < gmem.shape[0] and 0 <= int(gcol) < gmem.shape[1]):
            raise RuntimeError(f"cp_async16: global address [{grow}, {gcol}] outside {gmem.shape}")
        if int(gcol) + src_bytes // size > gmem.shape[1]:
            raise RuntimeError(f"cp_async16: reads {src_bytes} bytes past the end of row {grow} at column {gcol}")
        vals = [gmem[int(grow), int(gcol) + e] if e < src_bytes // size else 0 for e in range(n)]
        _groups()[-1].append((smem, int(srow), int(scol), vals))

    def cp_async_commit():
        _groups().append([])

    def _chunks16(arr):
        """A shared (ndarray) tile seen as one flat run of 16-byte chunks, so that a cp.async
        lands as ONE 16-byte store per thread, as the LDGSTS writes it, and perfkit.banks
        counts the warp's copies as one 128-bit access (4 wavefronts for 512 contiguous
        bytes), not as eight 2-byte stores (8 accesses of 4 wavefronts: a false degree of 4);
        None where the tile is not whole C-contiguous chunks (then element by element)."""
        if isinstance(arr, np.ndarray) and arr.flags.c_contiguous and arr.nbytes % 16 == 0:
            return arr.reshape(-1).view(np.dtype((np.void, 16)))
        return None

    def _land(smem, r, q, vals):
        """One copy's 16 bytes (read and zero-filled at the issue) into ``smem[r, q:]``."""
        chunks = _chunks16(smem)
        if chunks is None:
            for e, v in enumerate(vals):
                smem[r, q + e] = v
            return
        # cp_async16 checked that the shared address is 16-byte aligned
        chunks[(r * smem.strides[0] + q * smem.strides[1]) // 16] = np.array(vals, smem.dtype).view(chunks.dtype)[0]

    def cp_async_wait(n):
        groups = _groups()
        closed = groups[:-1]
        for g in closed[:max(len(closed) - int(n), 0)]:
            for smem, r, q, vals in g:
                _land(smem, r, q, vals)
        threading.current_thread().pk_cp_async = closed[max(len(closed) - int(n), 0):] + [groups[-1]]

    def _rowcol(arr, off, who):
        """Element offset ``off`` of a C-contiguous 2-D array -> (row, col), as a GPU would
        address it (data pointer + off): refused where that is not ``arr[row, col]``."""
        if arr.ndim != 2:
            raise TypeError(f"{who}: a 2-D array is needed, got {arr.ndim}-D")
        item = arr.dtype.itemsize
        if arr.strides[1] != item or arr.strides[0] != arr.shape[1] * item:
            raise RuntimeError(f"{who}: the array (shape {arr.shape}, strides {arr.strides}) is not C-contiguous: "
                               "a flat offset does not address [row, col]")
        off = int(off)
        if not 0 <= off < arr.shape[0] * arr.shape[1]:
            raise RuntimeError(f"{who}: element offset {off} is outside the {arr.shape} array: a GPU would "
                               "fault or touch another buffer here")
        return divmod(off, arr.shape[1])

    @cuda.jit(device=True)
    def ldmatrix_x4_off(smem, off, scr):
        row, col = _rowcol(smem, off, "ldmatrix")
        return _ldmatrix_sim(smem, row, col, scr, False)

    @cuda.jit(device=True)
    def ldmatrix_x4_trans_off(smem, off, scr):
        row, col = _rowcol(smem, off, "ldmatrix")
        return _ldmatrix_sim(smem, row, col, scr, True)

    def cp_async16_off(smem, soff, gmem, goff):
        srow, scol = _rowcol(smem, soff, "cp_async16_off")
        grow, gcol = _rowcol(gmem, goff, "cp_async16_off")
        if gcol + 16 // gmem.dtype.itemsize > gmem.shape[1]:
            raise RuntimeError(f"cp_async16_off: 16 bytes at [{grow}, {gcol}] run past the end of a row of "
                               f"{gmem.shape}: the fast path is for chunks inside the matrix")
        cp_async16(smem, srow, scol, gmem, grow, gcol, 16)

    def ld16_u32_off(arr, off):
        return ld16_u32(arr, *_rowcol(arr, off, "ld16_u32_off"))

    def st16_u32_off(arr, off, u0, u1, u2, u3):
        st16_u32(arr, *_rowcol(arr, off, "st16_u32_off"), u0, u1, u2, u3)

else:
    # --- inline PTX -------------------------------------------------------------------------
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    _i16, _i32, _i64, _f32 = ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()

    def _half_bits(builder, h):  # Numba keeps float16 values as i16 bit patterns (or half)
        return h if h.type == _i16 else builder.bitcast(h, _i16)

    def _pack(builder, lo, hi):  # two halves in one .b32 register, the first in the low bits
        return builder.or_(builder.zext(_half_bits(builder, lo), _i32),
                           builder.shl(builder.zext(_half_bits(builder, hi), _i32), ir.Constant(_i32, 16)))

    def _mma(builder, a, b, c):
        fnty = ir.FunctionType(ir.LiteralStructType([_f32] * 4), [_i32] * 6 + [_f32] * 4)
        asm = ir.InlineAsm(fnty, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                           "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};",
                           "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", side_effect=True)
        res = builder.call(asm, list(a) + list(b) + list(c))
        return [builder.extract_value(res, i) for i in range(4)]

    @intrinsic
    def mma_16816(typingctx, a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, c0, c1, c2, c3, scr_a, scr_b):
        """mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (inline PTX; scratch unused)."""
        sig = types.UniTuple(types.float32, 4)(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3,
                                               c0, c1, c2, c3, scr_a, scr_b)

        def codegen(context, builder, signature, args):
            a = [_pack(builder, args[2 * i], args[2 * i + 1]) for i in range(4)]
            b = [_pack(builder, args[8 + 2 * i], args[8 + 2 * i + 1]) for i in range(2)]
            c = [context.cast(builder, args[12 + i], signature.args[12 + i], types.float32) for i in range(4)]
            return context.make_tuple(builder, signature.return_type, _mma(builder, a, b, c))

        return sig, codegen

    @intrinsic
    def mma_16816_u32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3, scr_a, scr_b):
        """The same instruction on packed uint32 registers (scratch unused)."""
        sig = types.UniTuple(types.float32, 4)(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3, scr_a, scr_b)

        def codegen(context, builder, signature, args):
            regs = [context.cast(builder, args[i], signature.args[i], types.uint32) for i in range(6)]
            c = [context.cast(builder, args[6 + i], signature.args[6 + i], types.float32) for i in range(4)]
            return context.make_tuple(builder, signature.return_type, _mma(builder, regs[:4], regs[4:], c))

        return sig, codegen

    @intrinsic
    def pack_h2(typingctx, lo, hi):
        sig = types.uint32(lo, hi)

        def codegen(context, builder, signature, args):
            return _pack(builder, *args)

        return sig, codegen

    @intrinsic
    def unpack_h2(typingctx, u):
        sig = types.UniTuple(types.float16, 2)(u)

        def codegen(context, builder, signature, args):
            v = context.cast(builder, args[0], signature.args[0], types.uint32)
            lo = builder.trunc(v, _i16)
            hi = builder.trunc(builder.lshr(v, ir.Constant(_i32, 16)), _i16)
            ty = context.get_value_type(types.float16)
            if ty != _i16:
                lo, hi = builder.bitcast(lo, ty), builder.bitcast(hi, ty)
            return context.make_tuple(builder, signature.return_type, [lo, hi])

        return sig, codegen

    def _item_ptr(context, builder, aryty, ary_val, idx_vals, idx_tys):
        ary = context.make_array(aryty)(context, builder, ary_val)
        idx = [context.cast(builder, v, t, types.intp) for v, t in zip(idx_vals, idx_tys)]
        return cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)

    def _shared_addr(builder, ptr):
        """A generic pointer into shared memory -> the 32-bit .shared address PTX wants."""
        cvta = ir.InlineAsm(ir.FunctionType(_i64, [_i64]), "cvta.to.shared.u64 $0, $1;", "=l,l")
        return builder.trunc(builder.call(cvta, [builder.ptrtoint(ptr, _i64)]), _i32)

    def _emit_ldmatrix(context, builder, signature, addr, trans: bool):
        """ldmatrix.x4 (optionally .trans) from a 32-bit shared address: a tuple of 4 uint32."""
        fnty = ir.FunctionType(ir.LiteralStructType([_i32] * 4), [_i32])
        asm = ir.InlineAsm(fnty, f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 "
                           "{$0,$1,$2,$3}, [$4];", "=r,=r,=r,=r,r,~{memory}", side_effect=True)
        res = builder.call(asm, [addr])
        return context.make_tuple(builder, signature.return_type, [builder.extract_value(res, i) for i in range(4)])

    def _ldmatrix(trans: bool):
        def typer(typingctx, smem, row, col, scr):
            if not (isinstance(smem, types.Array) and smem.ndim == 2 and smem.dtype == types.float16):
                return None
            sig = types.UniTuple(types.uint32, 4)(smem, row, col, scr)

            def codegen(context, builder, signature, args):
                ptr = _item_ptr(context, builder, signature.args[0], args[0], args[1:3], signature.args[1:3])
                return _emit_ldmatrix(context, builder, signature, _shared_addr(builder, ptr), trans)

            return sig, codegen
        return typer

    ldmatrix_x4 = intrinsic(_ldmatrix(False))
    ldmatrix_x4_trans = intrinsic(_ldmatrix(True))

    @intrinsic
    def cp_async16(typingctx, smem, srow, scol, gmem, grow, gcol, src_bytes):
        if not (isinstance(smem, types.Array) and isinstance(gmem, types.Array) and smem.ndim == gmem.ndim == 2):
            return None
        sig = types.void(smem, srow, scol, gmem, grow, gcol, src_bytes)

        def codegen(context, builder, signature, args):
            sty = signature.args
            dst = _shared_addr(builder, _item_ptr(context, builder, sty[0], args[0], args[1:3], sty[1:3]))
            src = builder.ptrtoint(_item_ptr(context, builder, sty[3], args[3], args[4:6], sty[4:6]), _i64)
            nbytes = context.cast(builder, args[6], sty[6], types.int32)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [_i32, _i64, _i32]),
                               "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", side_effect=True)
            builder.call(asm, [dst, src, nbytes])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_commit(typingctx):
        sig = types.void()

        def codegen(context, builder, signature, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "cp.async.commit_group;", "~{memory}",
                               side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def cp_async_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None  # Numba retries with the literal type; a run-time value cannot be waited on
        count = int(n.literal_value)
        sig = types.void(n)

        def codegen(context, builder, signature, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), f"cp.async.wait_group {count};", "~{memory}",
                               side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return sig, codegen

    @cuda.jit(device=True, forceinline=True)
    def shfl_xor(val, lanemask, scr):
        return cuda.shfl_xor_sync(0xFFFFFFFF, val, lanemask)

    def _vec_ptr(context, builder, aryty, ary_val, idx_vals, idx_tys):
        ptr = _item_ptr(context, builder, aryty, ary_val, idx_vals, idx_tys)
        return builder.bitcast(ptr, ir.VectorType(_i32, 4).as_pointer())

    @intrinsic
    def ld16_u32(typingctx, arr, i, j):
        if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.dtype == types.float16):
            return None
        sig = types.UniTuple(types.uint32, 4)(arr, i, j)

        def codegen(context, builder, signature, args):
            v = builder.load(_vec_ptr(context, builder, signature.args[0], args[0], args[1:3], signature.args[1:3]),
                             align=16)
            return context.make_tuple(builder, signature.return_type,
                                      [builder.extract_element(v, ir.Constant(_i32, q)) for q in range(4)])

        return sig, codegen

    @intrinsic
    def st16_u32(typingctx, arr, i, j, u0, u1, u2, u3):
        if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.dtype == types.float16):
            return None
        sig = types.void(arr, i, j, u0, u1, u2, u3)

        def codegen(context, builder, signature, args):
            vec = ir.Constant(ir.VectorType(_i32, 4), ir.Undefined)
            for q in range(4):
                x = context.cast(builder, args[3 + q], signature.args[3 + q], types.uint32)
                vec = builder.insert_element(vec, x, ir.Constant(_i32, q))
            builder.store(vec, _vec_ptr(context, builder, signature.args[0], args[0], args[1:3], signature.args[1:3]),
                          align=16)
            return context.get_dummy_value()

        return sig, codegen


    def _flat_ptr(context, builder, aryty, ary_val, off, offty):
        """&arr.flat[off] (the data pointer + off elements; C-contiguous arrays only)."""
        data = context.make_array(aryty)(context, builder, ary_val).data
        return builder.gep(data, [context.cast(builder, off, offty, types.int64)], inbounds=True)

    def _shared_off(context, builder, aryty, ary_val, off, offty):
        """The 32-bit .shared address of element ``off`` of a shared array: its base (a
        constant: the array's symbol) plus off * itemsize, in 32-bit arithmetic."""
        data = context.make_array(aryty)(context, builder, ary_val).data
        base = builder.ptrtoint(builder.addrspacecast(data, ir.PointerType(data.type.pointee, 3)), _i32)
        size = context.get_abi_sizeof(context.get_data_type(aryty.dtype))
        o = context.cast(builder, off, offty, types.int32)
        return builder.add(base, builder.mul(o, ir.Constant(_i32, size)))

    def _c2d_f16(ty):
        return isinstance(ty, types.Array) and ty.ndim == 2 and ty.dtype == types.float16 and ty.layout == "C"

    def _ldmatrix_off(trans: bool):
        def typer(typingctx, smem, off, scr):
            if not (_c2d_f16(smem) and isinstance(off, types.Integer)):
                return None
            sig = types.UniTuple(types.uint32, 4)(smem, off, scr)

            def codegen(context, builder, signature, args):
                addr = _shared_off(context, builder, signature.args[0], args[0], args[1], signature.args[1])
                return _emit_ldmatrix(context, builder, signature, addr, trans)

            return sig, codegen
        return typer

    ldmatrix_x4_off = intrinsic(_ldmatrix_off(False))
    ldmatrix_x4_trans_off = intrinsic(_ldmatrix_off(True))

    @intrinsic
    def cp_async16_off(typingctx, smem, soff, gmem, goff):
        if not (_c2d_f16(smem) and _c2d_f16(gmem) and isinstance(soff, types.Integer)
                and isinstance(goff, types.Integer)):
            return None
        sig = types.void(smem, soff, gmem, goff)

        def codegen(context, builder, signature, args):
            sty = signature.args
            dst = _shared_off(context, builder, sty[0], args[0], args[1], sty[1])
            src = builder.ptrtoint(_flat_ptr(context, builder, sty[2], args[2], args[3], sty[3]), _i64)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [_i32, _i64]),
                               "cp.async.cg.shared.global [$0], [$1], 16;", "r,l,~{memory}", side_effect=True)
            builder.call(asm, [dst, src])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def ld16_u32_off(typingctx, arr, off):
        if not (_c2d_f16(arr) and isinstance(off, types.Integer)):
            return None
        sig = types.UniTuple(types.uint32, 4)(arr, off)

        def codegen(context, builder, signature, args):
            ptr = _flat_ptr(context, builder, signature.args[0], args[0], args[1], signature.args[1])
            v = builder.load(builder.bitcast(ptr, ir.VectorType(_i32, 4).as_pointer()), align=16)
            return context.make_tuple(builder, signature.return_type,
                                      [builder.extract_element(v, ir.Constant(_i32, q)) for q in range(4)])

        return sig, codegen

    @intrinsic
    def st16_u32_off(typingctx, arr, off, u0, u1, u2, u3):
        if not (_c2d_f16(arr) and isinstance(off, types.Integer)):
            return None
        sig = types.void(arr, off, u0, u1, u2, u3)

        def codegen(context, builder, signature, args):
            vec = ir.Constant(ir.VectorType(_i32, 4), ir.Undefined)
            for q in range(4):
                x = context.cast(builder, args[2 + q], signature.args[2 + q], types.uint32)
                vec = builder.insert_element(vec, x, ir.Constant(_i32, q))
            ptr = _flat_ptr(context, builder, signature.args[0], args[0], args[1], signature.args[1])
            builder.store(vec, builder.bitcast(ptr, ir.VectorType(_i32, 4).as_pointer()), align=16)
            return context.get_dummy_value()

        return sig, codegen


# --- added for the conv ladder (issue 43): a flat-offset cp.async with zero-fill ----------------
# ``cp_async16_off_zfill(smem, soff, gmem, goff, src_bytes)``: ``cp_async16_off`` whose copy reads
# only the first ``src_bytes`` (0..16) of the 16 and zero-fills the rest, as ``cp_async16`` does:
# padding and rows past the end of a gathered operand become zeros by the copy itself (give an
# in-bounds ``goff`` where ``src_bytes`` is 0).
__all__ += ["cp_async16_off_zfill"]

if backend.is_simulator():

    def cp_async16_off_zfill(smem, soff, gmem, goff, src_bytes):
        srow, scol = _rowcol(smem, soff, "cp_async16_off_zfill")
        grow, gcol = _rowcol(gmem, goff, "cp_async16_off_zfill")
        cp_async16(smem, srow, scol, gmem, grow, gcol, src_bytes)

else:

    @intrinsic
    def cp_async16_off_zfill(typingctx, smem, soff, gmem, goff, src_bytes):
        if not (_c2d_f16(smem) and _c2d_f16(gmem) and isinstance(soff, types.Integer)
                and isinstance(goff, types.Integer) and isinstance(src_bytes, types.Integer)):
            return None
        sig = types.void(smem, soff, gmem, goff, src_bytes)

        def codegen(context, builder, signature, args):
            sty = signature.args
            dst = _shared_off(context, builder, sty[0], args[0], args[1], sty[1])
            src = builder.ptrtoint(_flat_ptr(context, builder, sty[2], args[2], args[3], sty[3]), _i64)
            nbytes = context.cast(builder, args[4], sty[4], types.int32)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [_i32, _i64, _i32]),
                               "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", side_effect=True)
            builder.call(asm, [dst, src, nbytes])
            return context.get_dummy_value()

        return sig, codegen


# --- added for the conv ladder's epilogue (issue 43): a 4-byte store of two packed halves --------
# ``st_u32_off(arr, off, u)``: the 32-bit word ``u`` (two halves packed by ``pack_h2``, the first
# in the low bits) stored at element ``off`` (even) of a C-contiguous 2-D float16 array: one STS.32
# where two 2-byte stores would be, so a lane's two adjacent accumulators leave in one store.
__all__ += ["st_u32_off"]

if backend.is_simulator():

    def st_u32_off(arr, off, u):
        row, col = _rowcol(arr, off, "st_u32_off")
        if arr.dtype != np.float16 or col % 2:
            raise RuntimeError(f"st_u32_off: a 4-byte store at element {int(off)} of a {arr.dtype} array: "
                               "a float16 array and an even offset are needed (a GPU would fault)")
        w = _words(arr)  # as a word, so that perfkit.banks counts one 4-byte access
        if w is not None:
            w[row, col // 2] = np.uint32(u)
        else:
            arr[row, col], arr[row, col + 1] = unpack_h2(u)

else:

    @intrinsic
    def st_u32_off(typingctx, arr, off, u):
        if not (_c2d_f16(arr) and isinstance(off, types.Integer) and isinstance(u, types.Integer)):
            return None
        sig = types.void(arr, off, u)

        def codegen(context, builder, signature, args):
            x = context.cast(builder, args[2], signature.args[2], types.uint32)
            ptr = _flat_ptr(context, builder, signature.args[0], args[0], args[1], signature.args[1])
            builder.store(x, builder.bitcast(ptr, _i32.as_pointer()), align=4)
            return context.get_dummy_value()

        return sig, codegen
