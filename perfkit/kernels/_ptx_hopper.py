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

Trap found compiling (../shared/reference/hopper-sm90a): with N float outputs tied to N inputs,
the descriptors are inline-asm operands ``$2N`` and ``$2N+1``.  wgmma across a non-inlined call
is serialized by ptxas (C7509/C7510): kernels call these only from forceinline device functions.
"""
from __future__ import annotations

import threading

import numpy as np
from numba import cuda, uint64

from .. import backend

__all__ = ["smem_addr", "wgmma_desc", "sw128", "wgmma_m64n64k16", "wgmma_m64n128k16", "wgmma_m64n256k16",
           "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "decode_desc"]


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

    def _execute(acc, smem, da, db, scale_d, n, tid):
        a0, _, a_sbo, swa = decode_desc(da)
        b0, b_lbo, b_sbo, swb = decode_desc(db)
        if swa != 1 or swb != 1:
            raise RuntimeError(f"wgmma twin: only the 128-byte swizzle is modelled (descriptor modes {swa}, {swb})")
        t = tid % 128
        w, lane = t // 32, t % 32
        rows = np.array([16 * w + lane // 4, 16 * w + lane // 4 + 8])[:, None]
        k = np.arange(16)[None, :]
        A = _halves(smem, a0 + (rows // 8) * a_sbo + (rows % 8) * 128 + k * 2).astype(np.float32)  # (2, 16)
        kk, nn = np.arange(16)[:, None], np.arange(n)[None, :]
        B = _halves(smem, b0 + (nn // 64) * b_lbo + (kk // 8) * b_sbo + (kk % 8) * 128 + (nn % 64) * 2
                    ).astype(np.float32)  # (16, n)
        D = np.zeros((2, n), np.float32)
        for q in range(16):  # k in order, float32 sums (products of float16 are exact in float32)
            D += A[:, q:q + 1] * B[q:q + 1, :]
        c = 8 * np.arange(n // 8) + 2 * (lane % 4)
        frag = np.stack([D[0, c], D[0, c + 1], D[1, c], D[1, c + 1]], axis=-1).reshape(-1)
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

else:
    # --- inline PTX -------------------------------------------------------------------------
    from llvmlite import ir
    from numba import types
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
