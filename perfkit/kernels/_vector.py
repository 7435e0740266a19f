"""128-bit loads for Numba kernels: ``load4(arr, i, j)`` reads ``arr[i, j:j+4]`` (float32) as
one ``ld.global.v4.f32`` (``LDG.E.128`` in SASS), which Numba cannot express otherwise (it has
no ``float4``).  The caller guarantees 16-byte alignment: ``j`` and the row length are
multiples of 4 (device allocations themselves are 256-byte aligned).

``ld4(arr, off)`` and ``st4(arr, off, x0, x1, x2, x3)`` are the flat forms for 1-D float32
arrays (global or shared): one 128-bit load or store at element ``off`` (a multiple of 4),
indexed without Numba's negative-index wraparound, so a kernel that computes its offsets in
32-bit arithmetic keeps its address math to one IMAD.WIDE (global) or an immediate (shared).

In the CUDA simulator the same name is a plain Python function returning the four values, so
kernels that use it run and are checked there too.
"""
from __future__ import annotations

from .. import backend

__all__ = ["load4", "ld4", "st4"]

if backend.is_simulator():

    def load4(arr, i, j):
        # A GPU faults ("misaligned address") on a 128-bit load whose address is not a multiple
        # of 16 bytes; check it here so the simulator catches what the GPU would.  Device
        # allocations are 256-byte aligned, so the element offset decides.
        offset = int(i) * arr.strides[0] + int(j) * arr.strides[1]
        if arr.strides[1] != 4 or offset % 16:
            raise RuntimeError(f"load4: misaligned 128-bit load at [{i}, {j}] (byte offset {offset}, "
                               f"strides {arr.strides}): a GPU would fault here")
        return arr[i, j], arr[i, j + 1], arr[i, j + 2], arr[i, j + 3]

    def _check_flat(arr, off, who):
        off = int(off)
        if arr.ndim != 1 or arr.strides[0] != 4 or off % 4 or not 0 <= off <= arr.shape[0] - 4:
            raise RuntimeError(f"{who}: 128-bit access at element {off} of a {arr.shape} array "
                               f"(strides {arr.strides}) is misaligned or out of bounds: a GPU would fault here")
        return off

    def ld4(arr, off):
        off = _check_flat(arr, off, "ld4")
        return arr[off], arr[off + 1], arr[off + 2], arr[off + 3]

    def st4(arr, off, x0, x1, x2, x3):
        off = _check_flat(arr, off, "st4")
        arr[off], arr[off + 1], arr[off + 2], arr[off + 3] = x0, x1, x2, x3

else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def load4(typingctx, arr, i, j):
        if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.dtype == types.float32):
            return None
        sig = types.UniTuple(types.float32, 4)(arr, i, j)

        def codegen(context, builder, signature, args):
            aryty, ity, jty = signature.args
            ary = context.make_array(aryty)(context, builder, args[0])
            idx = [context.cast(builder, args[1], ity, types.intp), context.cast(builder, args[2], jty, types.intp)]
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
            vec = ir.VectorType(ir.FloatType(), 4)
            v = builder.load(builder.bitcast(ptr, vec.as_pointer()), align=16)
            elems = [builder.extract_element(v, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, elems)

        return sig, codegen

    def _flat_ptr(context, builder, aryty, arg, offty, off):
        ary = context.make_array(aryty)(context, builder, arg)
        idx = [context.cast(builder, off, offty, types.intp)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        return builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer())

    @intrinsic
    def ld4(typingctx, arr, off):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.float32
                and isinstance(off, types.Integer)):
            return None
        sig = types.UniTuple(types.float32, 4)(arr, off)

        def codegen(context, builder, signature, args):
            v = builder.load(_flat_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1]),
                             align=16)
            elems = [builder.extract_element(v, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, signature.return_type, elems)

        return sig, codegen

    @intrinsic
    def st4(typingctx, arr, off, x0, x1, x2, x3):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.float32
                and isinstance(off, types.Integer)):
            return None
        sig = types.void(arr, off, x0, x1, x2, x3)

        def codegen(context, builder, signature, args):
            vec = ir.Constant(ir.VectorType(ir.FloatType(), 4), ir.Undefined)
            for k in range(4):
                x = context.cast(builder, args[2 + k], signature.args[2 + k], types.float32)
                vec = builder.insert_element(vec, x, ir.Constant(ir.IntType(32), k))
            builder.store(vec, _flat_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1]),
                          align=16)
            return context.get_dummy_value()

        return sig, codegen
