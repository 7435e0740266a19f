"""Dynamic shared memory above 48 KiB, for kernels whose rings do not fit a static array: the
launch that opts in, the check of what a block may ask for, and a 2-D view of the 1-D dynamic
array (with its simulator twin)::

    from perfkit.kernels._dynsmem import DynamicSharedLaunch, check_dynamic_shared, shared_tile

* ``DynamicSharedLaunch(kernel, grid, block, args, shared_bytes)``: a :class:`~perfkit.kernels.
  base.Launch` that, above 48 KiB, first raises the kernel's limit (cuFuncSetAttribute(
  MAX_DYNAMIC_SHARED_SIZE_BYTES) in CUDA C++: a block may not use more than 48 KiB of dynamic
  shared memory unless its kernel opts in, and Numba never does).  The anatomy counts such a
  launch's occupancy with the opt-in.
* ``check_dynamic_shared(who, nbytes)``: refuse more than a block may opt in to (227 KiB on
  sm_90; sm_80 163 KiB and sm_86/89 99 KiB fail at launch with the driver's message).
* ``shared_tile(smem, start, rows, cols)``: a (rows, cols) C-contiguous view of the 1-D shared
  array ``smem`` (``cuda.shared.array(0, dtype)``) from element ``start``: the data pointer moved,
  shape and strides written as values.  ``smem[a:b].reshape(...)`` does the same in Numba but
  through a generic reshape (shape and strides on the stack, a loop that checks them: ~600 bytes
  of stack and thousands of instructions in the prologue of the tc_deep rung).
"""
from __future__ import annotations

from numba import cuda  # noqa: F401  (the simulator swaps it in kernels that import this module)

from .. import backend
from .base import Launch, UnsupportedProblem

__all__ = ["DynamicSharedLaunch", "OptInSharedLaunch", "check_dynamic_shared", "shared_tile", "MAX_OPT_IN_SHARED", "DEFAULT_SHARED"]

#: the most shared memory one block may opt in to (sm_90: 227 KiB); without the opt-in, 48 KiB
MAX_OPT_IN_SHARED = 227 * 1024
DEFAULT_SHARED = 48 * 1024


def check_dynamic_shared(who: str, nbytes: int, static: int = 0) -> None:
    if static + nbytes > MAX_OPT_IN_SHARED:
        raise UnsupportedProblem(f"{who}: {static + nbytes} bytes of shared memory per block > {MAX_OPT_IN_SHARED} "
                                 "(227 KiB), the most a block can opt in to (sm_90)")


class DynamicSharedLaunch(Launch):
    """A launch with dynamic shared memory that opts in above 48 KiB before it launches."""

    def __call__(self) -> None:
        if self.shared_bytes > DEFAULT_SHARED and not backend.is_simulator():
            _opt_in(self.kernel, self.args, self.shared_bytes)
        super().__call__()


class OptInSharedLaunch(DynamicSharedLaunch):
    """A launch that opts in whenever it asks for dynamic shared memory: the 48 KiB a kernel has
    without the opt-in hold its static and dynamic shared memory together (cudaFuncSetAttribute:
    static + the dynamic limit may not pass the opt-in maximum; NVIDIA's ``cuda_occupancy.h``
    charges both), so the smem_row rungs' row of exactly 48 KiB (12288 float32 columns) beside
    their reductions' static bytes fails at launch below :class:`DynamicSharedLaunch`'s threshold.
    (That class keeps its threshold: its rings sit far above 48 KiB, where both agree.)"""

    def __call__(self) -> None:
        if self.shared_bytes > 0 and not backend.is_simulator():
            # the driver call once a function and size: a timed loop launches with no host work
            # added (the limit only grows, so a smaller launch of the same kernel never lowers it)
            f = self.__dict__.get("_cufunc") or _cufunc(self.kernel, self.args)
            object.__setattr__(self, "_cufunc", f)
            key = id(f)  # the function's object: Numba's code library keeps one a context
            if _RAISED.get(key, 0) < self.shared_bytes:
                _set_limit(f, self.shared_bytes)
                _RAISED[key] = self.shared_bytes
        Launch.__call__(self)


#: the dynamic shared limit each function (by its object) was raised to by OptInSharedLaunch
_RAISED: dict = {}


def _cufunc(kernel, args):
    k = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
    return k._codelibrary.get_cufunc()


def _set_limit(f, nbytes: int) -> None:
    from numba.cuda.cudadrv import driver as drv

    attr = drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    drv.driver.cuKernelSetAttribute(attr, int(nbytes), f.handle, f.device.id)


def _opt_in(kernel, args, nbytes: int) -> None:
    from numba.cuda.cudadrv import driver as drv

    k = kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))
    f = k._codelibrary.get_cufunc()
    attr = drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    drv.driver.cuKernelSetAttribute(attr, int(nbytes), f.handle, f.device.id)


if backend.is_simulator():
    import numpy as np

    def shared_tile(smem, start, rows, cols):
        start, rows, cols = int(start), int(rows), int(cols)
        if smem.ndim != 1 or start < 0 or start + rows * cols > smem.shape[0]:
            raise RuntimeError(f"shared_tile: {rows}x{cols} elements from {start} do not fit a shared array of "
                               f"{smem.shape}: the dynamic shared memory the launch asked for is too small")
        # a view, not an access: ndarray's own slicing, which keeps perfkit.banks's recording
        # subclass (a load of the whole range by this thread, and a plain array whose accesses go
        # unrecorded, otherwise)
        return np.ndarray.__getitem__(smem, slice(start, start + rows * cols)).reshape(rows, cols)
else:
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def shared_tile(typingctx, smem, start, rows, cols):
        if not (isinstance(smem, types.Array) and smem.ndim == 1):
            return None
        retty = types.Array(smem.dtype, 2, "C")
        sig = retty(smem, start, rows, cols)

        def codegen(context, builder, signature, args):
            sty = signature.args
            src = context.make_array(sty[0])(context, builder, args[0])
            intp = context.get_value_type(types.intp)
            first = context.cast(builder, args[1], sty[1], types.intp)
            r = context.cast(builder, args[2], sty[2], types.intp)
            c = context.cast(builder, args[3], sty[3], types.intp)
            size = context.get_abi_sizeof(context.get_data_type(sty[0].dtype))
            out = context.make_array(retty)(context, builder)
            context.populate_array(out, data=builder.gep(src.data, [first], inbounds=True),
                                   shape=cgutils.pack_array(builder, [r, c]),
                                   strides=cgutils.pack_array(builder, [builder.mul(c, ir.Constant(intp, size)),
                                                                        ir.Constant(intp, size)]),
                                   itemsize=ir.Constant(intp, size), meminfo=None)
            return out._getvalue()

        return sig, codegen
