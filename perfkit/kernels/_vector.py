"""128-bit loads for Numba kernels: ``load4(arr, i, j)`` reads ``arr[i, j:j+4]`` (float32) as
one ``ld.global.v4.f32`` (``LDG.E.128`` in SASS), which Numba cannot express otherwise (it has
no ``float4``).  The caller guarantees 16-byte alignment: ``j`` and the row length are
multiples of 4 (device allocations themselves are 256-byte aligned).

In the CUDA simulator the same name is a plain Python function returning the four values, so
kernels that use it run and are checked there too.
"""
from __future__ import annotations

from .. import backend

__all__ = ["load4"]

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
