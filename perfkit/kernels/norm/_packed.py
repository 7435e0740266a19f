"""The ``packed`` rungs (softmax, layernorm, rmsnorm): float16 rows held in registers as they
came from memory, two halves a 32-bit register, so that a thread's share of its row is chosen by
**bytes**, not elements.

The tuned rungs hold 16 elements of a row a thread, converted to float32: 64 bytes of a float32
row in flight, but only 32 bytes of a float16 one (issue 44: fp16 at 0.11-0.38 of the copy
ceiling).  Holding 32 float16 elements as float32 would take 32 registers and halve the blocks an
SM keeps; held packed (a half2 per register: ``LDG.E.128`` fills four), 32 halves take 16
registers, the float32 row's budget, and every thread has 64 bytes in flight at either dtype.
Every element is converted to float32 when it is used (``HADD2.F32`` / ``cvt.f32.f16``); the
sums, the max and the statistics stay float32; results are rounded to float16 two at a time and
stored packed.

What the three rungs share lives here:

* :class:`PackedShape`: the launch shape (``threads_per_row`` x ``rows_per_block``, 0 = the rule
  of :func:`packed_shape`), the refusals (float32: the tuned rung already holds 64 bytes a
  thread; shapes :func:`_common.check_shape` refuses) and the compiled kernel's constants;
* :func:`load_chunk` / :func:`store_chunk`: 8 halves (a chunk, 4 registers) at ``[r, j]`` as one
  16-byte access (``ld16_u32`` / ``st16_u32`` of :mod:`perfkit.kernels._ptx`) when every row
  starts 16-byte aligned (``cols % 8 == 0``), else as 8 scalar accesses (a row of other widths
  starts unaligned: a vector access there would fault), each guarded by the row's end;
* :func:`halves` / :func:`pack2`: a register's two halves as float32, and two float32 rounded
  into one register; :func:`cvt_halves`: :func:`halves` by a conversion the compiler may not
  merge with an earlier one of the same register (for kernels that convert their packed
  registers in several passes).
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from numba import cuda, float32
from numba.types import float16

from ... import backend
from .._ptx import ld16_u32, pack_h2, st16_u32, unpack_h2
from ..base import UnsupportedProblem
from . import _common as C

__all__ = ["CHUNK", "WORDS", "PackedShape", "packed_shape", "packed_chunks", "load_chunk", "store_chunk",
           "halves", "cvt_halves", "pack2", "BYTES_PER_THREAD"]

CHUNK = 8  # halves a chunk: one 16-byte access
WORDS = 4  # 32-bit registers a chunk
#: bytes of its row a thread holds (and has in flight): what the tuned rule gives float32 rows
#: (``TUNED_ELEMS_PER_THREAD`` floats), here whatever the dtype
BYTES_PER_THREAD = 4 * C.TUNED_ELEMS_PER_THREAD


def packed_shape(cols: int) -> C.Shape:
    """threads_per_row = cols / (``BYTES_PER_THREAD`` / 2 halves) rounded up to a power of two,
    32..``TUNED_MAX_G``; rows per block filling ``TUNED_BLOCK`` threads (the tuned rule, by bytes).
    ``V`` is unused (one chunk a trip past the register cache)."""
    per = BYTES_PER_THREAD // 2
    G = min(C.TUNED_MAX_G, max(32, C.next_pow2(-(-cols // per))))
    return C.Shape(G, max(1, C.TUNED_BLOCK // G), 1)


def packed_chunks(cols: int, G: int, block: int) -> int:
    """Chunks of 8 halves a thread keeps in registers: its whole share of the row when the
    register budget (:func:`_common.cache_floats`, counted in registers) takes it."""
    need = -(-cols // (G * CHUNK))
    return max(1, min(need, C.cache_floats(block) // WORDS))


class PackedShape:
    """Launch shape of the packed rungs: fields ``threads_per_row`` and ``rows_per_block``
    (0 = the rule of :func:`packed_shape`) and a class attribute ``instead``, the rung named for
    float32 problems."""

    instead = "the tuned rung"

    def shape(self, problem) -> C.Shape:
        st = packed_shape(problem.cols)
        return C.Shape(self.threads_per_row or st.G, self.rows_per_block or st.R, 1)

    def example(self, problem):
        """The float16 twin of the op's example (the rung takes float16 only)."""
        return problem if problem.dtype == "float16" else dataclasses.replace(problem, dtype="float16")

    def supports(self, problem):
        if problem.dtype != "float16":
            raise UnsupportedProblem(
                f"{self.label}: holds float16 rows packed two halves a register; a {problem.dtype} row "
                f"already has {BYTES_PER_THREAD} bytes a thread in flight in {self.instead}: use it instead")
        s = self.shape(problem)
        bad = C.check_shape(s.G, s.R, 1)
        if bad:
            raise UnsupportedProblem(f"{self.label}: " + "; ".join(bad))

    def kernel_params(self, problem) -> tuple[int, int, int, bool, bool]:
        """(G, R, NC, VEC, TAIL): threads a row, rows a block, chunks a thread in registers,
        whether rows are 16-byte aligned (vector accesses), whether the row is wider than the
        register cache (a tail swept twice)."""
        s = self.shape(problem)
        NC = packed_chunks(problem.cols, s.G, s.block)
        return s.G, s.R, NC, problem.cols % CHUNK == 0, s.G * CHUNK * NC < problem.cols

    def kept_cols(self, problem) -> int:
        G, R, NC, VEC, TAIL = self.kernel_params(problem)
        return min(problem.cols, G * CHUNK * NC)


@cuda.jit(device=True)
def halves(u):
    """The two halves of register ``u`` (the lower column first) as float32."""
    lo, hi = unpack_h2(u)
    return float32(lo), float32(hi)


# ``cvt_halves(u)`` converts by ``cvt.f32.f16`` in a volatile asm block.  ``halves`` is plain LLVM,
# so a kernel that converts the same packed registers in several passes (the sums, the centred
# sums, the write) has the conversions merged into the first pass and every float32 value held
# across the passes' barriers: twice the registers (layernorm_bwd's packed rung spilled 60-92
# bytes at 64 registers).  Here each pass converts again (one instruction a half) and the
# registers between passes stay packed.  (Kept here, not in ``_ptx``, whose edits re-key the
# static store's GEMM and convolution entries.)
if backend.is_simulator():
    cvt_halves = halves
else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def cvt_halves(typingctx, u):
        if not isinstance(u, types.Integer):
            return None
        sig = types.UniTuple(types.float32, 2)(u)

        def codegen(context, builder, signature, args):
            v = context.cast(builder, args[0], signature.args[0], types.uint32)
            f32 = ir.FloatType()
            asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32, f32]), [ir.IntType(32)]),
                               "{.reg .f16 lo, hi; mov.b32 {lo, hi}, $2; cvt.f32.f16 $0, lo; cvt.f32.f16 $1, hi;}",
                               "=f,=f,r", side_effect=True)
            r = builder.call(asm, [v])
            return context.make_tuple(builder, signature.return_type,
                                      [builder.extract_value(r, 0), builder.extract_value(r, 1)])

        return sig, codegen


@cuda.jit(device=True)
def pack2(a, b):
    """float32 ``a`` and ``b`` rounded to float16 in one register (``a`` in the low half)."""
    return pack_h2(float16(a), float16(b))


@lru_cache(maxsize=None)
def load_chunk(VEC: bool):
    """``load(x, r, j, n, pad, w, o)``: halves ``x[r, j:j + 8]`` into registers ``w[o:o + 4]``;
    columns at or past ``n`` hold ``pad`` (a float32: -inf for a max, 0 for a sum).  VEC: one
    16-byte load (the caller guarantees ``j`` and the row are 16-byte aligned and the chunk is
    whole or wholly past ``n``); else eight 2-byte loads, each guarded."""
    if VEC:
        @cuda.jit(device=True)
        def load(x, r, j, n, pad, w, o):
            if j < n:
                u0, u1, u2, u3 = ld16_u32(x, r, j)
                w[o] = u0
                w[o + 1] = u1
                w[o + 2] = u2
                w[o + 3] = u3
            else:
                p = pack2(pad, pad)
                for q in range(WORDS):
                    w[o + q] = p
        return load

    @cuda.jit(device=True)
    def load(x, r, j, n, pad, w, o):
        ph = float16(pad)
        for q in range(WORDS):
            k = j + 2 * q
            lo = x[r, k] if k < n else ph
            hi = x[r, k + 1] if k + 1 < n else ph
            w[o + q] = pack_h2(lo, hi)
    return load


@lru_cache(maxsize=None)
def store_chunk(VEC: bool):
    """``store(y, r, j, n, w, o)``: registers ``w[o:o + 4]`` into ``y[r, j:j + 8]``, columns
    before ``n`` only; one 16-byte store with VEC, else up to eight 2-byte stores."""
    if VEC:
        @cuda.jit(device=True)
        def store(y, r, j, n, w, o):
            if j < n:
                st16_u32(y, r, j, w[o], w[o + 1], w[o + 2], w[o + 3])
        return store

    @cuda.jit(device=True)
    def store(y, r, j, n, w, o):
        for q in range(WORDS):
            k = j + 2 * q
            lo, hi = unpack_h2(w[o + q])
            if k < n:
                y[r, k] = lo
            if k + 1 < n:
                y[r, k + 1] = hi
    return store
