"""Vector loads and stores of ``W`` consecutive elements for the normalization kernels, float32
or float16, through a float32 register buffer:

* ``vec_load(W)(arr, i, j, buf, o)``: ``buf[o + q] = float32(arr[i, j + q])`` for q < W, as ONE
  load of ``W * itemsize`` bytes (``ld.global.v4.f32`` for 4 floats, ``ld.global.v4.b32`` /
  ``LDG.E.128`` for 8 halves, ``ld.global.b32`` for a half2 pair), then ``cvt.f32.f16`` per half.
* ``vec_store(W)(arr, i, j, buf, o)``: ``arr[i, j + q] = buf[o + q]`` (rounded to the array's
  dtype) as one store of ``W * itemsize`` bytes.

Numba has no ``float4`` / ``half2`` types, so each width is an ``@intrinsic`` emitting an LLVM
vector load (``<W x float>`` / ``<W x half>``) with alignment ``W * itemsize``.  ``arr`` is a
2-D C-contiguous array (pass a 1-D parameter vector as a (1, n) view).  The caller guarantees
alignment: ``j`` and the row length are multiples of ``W`` (device allocations are 256-byte
aligned).  A vector access may not exceed 16 bytes: W in {1, 2, 4} for float32, {1, 2, 4, 8}
for float16 (:func:`widths`).

In the CUDA simulator the same names are plain Python functions that do the element copies
and check the alignment exactly as a GPU would fault on it ("misaligned address"), as
``perfkit.kernels._vector.load4`` does; so a kernel that would fault on a GPU fails here too.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ... import backend

__all__ = ["vec_load", "vec_store", "widths", "MAX_VEC_BYTES"]

MAX_VEC_BYTES = 16  # the widest global load/store a thread can issue (128 bits)


def widths(dtype) -> tuple[int, ...]:
    """Legal vector widths (elements) for ``dtype``, widest first."""
    it = np.dtype(dtype).itemsize
    return tuple(w for w in (8, 4, 2, 1) if w * it <= MAX_VEC_BYTES)


def _check_w(W: int) -> None:
    if W not in (1, 2, 4, 8):
        raise ValueError(f"vector width W={W} must be 1, 2, 4 or 8")


def check_alignment(name: str, arr, i, j, W: int) -> None:
    """What a GPU faults on: a W-element access whose byte offset is not a multiple of its size
    (the array base is 256-byte aligned), or a non-contiguous row, or more than 16 bytes."""
    it = arr.dtype.itemsize
    offset = int(i) * arr.strides[0] + int(j) * arr.strides[1]
    if W * it > MAX_VEC_BYTES:
        raise RuntimeError(f"{name}: a {W * it}-byte vector access does not exist (at most 16 bytes)")
    if arr.strides[1] != it or offset % (W * it):
        raise RuntimeError(f"{name}: misaligned {8 * W * it}-bit access at [{i}, {j}] (byte offset {offset}, "
                           f"strides {arr.strides}): a GPU would fault here")
    if int(j) + W > arr.shape[1] or int(i) >= arr.shape[0]:
        raise RuntimeError(f"{name}: [{i}, {j}:{int(j) + W}] is out of bounds for shape {arr.shape}")


if backend.is_simulator():

    @lru_cache(maxsize=None)
    def vec_load(W: int):
        _check_w(W)

        def load(arr, i, j, buf, o):
            check_alignment(f"vec_load({W})", arr, i, j, W)
            for q in range(W):
                buf[o + q] = np.float32(arr[i, j + q])

        return load

    @lru_cache(maxsize=None)
    def vec_store(W: int):
        _check_w(W)

        def store(arr, i, j, buf, o):
            check_alignment(f"vec_store({W})", arr, i, j, W)
            for q in range(W):
                arr[i, j + q] = buf[o + q]

        return store

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    def _elt(dt):
        if dt == types.float32:
            return ir.FloatType(), 4
        if dt == types.float16:
            return ir.HalfType(), 2
        return None, 0

    def _ok(arr, buf, W):
        elt, it = _elt(arr.dtype) if isinstance(arr, types.Array) else (None, 0)
        return (elt is not None and arr.ndim == 2 and W * it <= MAX_VEC_BYTES and isinstance(buf, types.Array)
                and buf.ndim == 1 and buf.dtype == types.float32)

    def _ptrs(context, builder, sig, args, W):
        aryty, ity, jty, bufty, oty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, args[1], ity, types.intp), context.cast(builder, args[2], jty, types.intp)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        elt, it = _elt(aryty.dtype)
        vty = ir.VectorType(elt, W)
        vptr = builder.bitcast(ptr, vty.as_pointer())
        buf = context.make_array(bufty)(context, builder, args[3])
        o = context.cast(builder, args[4], oty, types.intp)
        bptrs = [cgutils.get_item_pointer(context, builder, bufty, buf,
                                          [builder.add(o, ir.Constant(o.type, q))], wraparound=False)
                 for q in range(W)]
        return vptr, W * it, elt, bptrs

    @lru_cache(maxsize=None)
    def vec_load(W: int):
        _check_w(W)

        @intrinsic
        def load(typingctx, arr, i, j, buf, o):
            if not _ok(arr, buf, W):
                return None
            sig = types.none(arr, i, j, buf, o)

            def codegen(context, builder, signature, args):
                vptr, nbytes, elt, bptrs = _ptrs(context, builder, signature, args, W)
                v = builder.load(vptr, align=nbytes)
                for q in range(W):
                    e = builder.extract_element(v, ir.Constant(ir.IntType(32), q))
                    if isinstance(elt, ir.HalfType):
                        e = builder.fpext(e, ir.FloatType())
                    builder.store(e, bptrs[q])
                return context.get_dummy_value()

            return sig, codegen

        return load

    @lru_cache(maxsize=None)
    def vec_store(W: int):
        _check_w(W)

        @intrinsic
        def store(typingctx, arr, i, j, buf, o):
            if not _ok(arr, buf, W):
                return None
            sig = types.none(arr, i, j, buf, o)

            def codegen(context, builder, signature, args):
                vptr, nbytes, elt, bptrs = _ptrs(context, builder, signature, args, W)
                v = ir.Constant(vptr.type.pointee, ir.Undefined)
                for q in range(W):
                    e = builder.load(bptrs[q])
                    if isinstance(elt, ir.HalfType):
                        e = builder.fptrunc(e, elt)
                    v = builder.insert_element(v, e, ir.Constant(ir.IntType(32), q))
                builder.store(v, vptr, align=nbytes)
                return context.get_dummy_value()

            return sig, codegen

        return store
