"""Rung 3: an explicit im2col buffer, then the GEMM ladder's best SIMT rung on it."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32

from ..base import Launch, UnsupportedProblem, Variant
from . import _common as C


@lru_cache(maxsize=None)
def _im2col_kernel(NHWC: bool):
    @cuda.jit
    def conv_im2col(x, col, N, C, H, W, R, S, P, Q, stride, pad):
        i = cuda.grid(1)
        CRS = C * R * S
        if i >= N * P * Q * CRS:
            return
        j = i % CRS  # column of the buffer: (r, s, c) for NHWC, (c, r, s) for NCHW, as w is stored
        m = i // CRS  # row: one output pixel
        q = m % Q
        t = m // Q
        p = t % P
        b = t // P
        if NHWC:
            c = j % C
            t2 = j // C
            s = t2 % S
            r = t2 // S
        else:
            s = j % S
            t2 = j // S
            r = t2 % R
            c = t2 // R
        ih = p * stride - pad + r
        iw = q * stride - pad + s
        v = float32(0)
        if ih >= 0 and ih < H and iw >= 0 and iw < W:
            if NHWC:
                v = float32(x[b, ih, iw, c])
            else:
                v = float32(x[b, c, ih, iw])
        col[m, j] = v

    return conv_im2col


@cuda.jit
def conv_weights_t(w2, wt, K, CRS):
    """wt (CRS, K) = w2 (K, CRS) transposed, as float32: the GEMM's B operand."""
    i = cuda.grid(1)
    if i < K * CRS:
        n = i % K
        j = i // K
        wt[j, n] = float32(w2[n, j])


@lru_cache(maxsize=None)
def _scatter_kernel(NHWC: bool):
    @cuda.jit
    def conv_gemm_to_y(yg, y, N, K, P, Q):
        """y (in its layout and dtype) from the GEMM's (N*P*Q, K) float32 result."""
        i = cuda.grid(1)
        if i >= N * K * P * Q:
            return
        if NHWC:
            k = i % K
            m = i // K
            y[m // (P * Q), (m // Q) % P, m % Q, k] = yg[m, k]
        else:
            q = i % Q
            t = i // Q
            p = t % P
            t = t // P
            k = t % K
            b = t // K
            y[b, k, p, q] = yg[(b * P + p) * Q + q, k]

    return conv_gemm_to_y


#: GEMM rungs to run on the im2col buffer, best first; the first one the ladder has is used
GEMM_PREFERENCE = ("autotuned", "warptile", "double_buffer", "no_bank_conflicts", "vectorized",
                   "blocktile_2d", "smem_tiling")


def _gemm_rung(name: str):
    from .. import gemm

    by_name = {v.name: v for v in gemm.LADDER}
    for cand in ((name,) if name != "best" else ()) + GEMM_PREFERENCE:
        if cand in by_name and not by_name[cand].oracle:
            return by_name[cand]
    raise UnsupportedProblem(f"im2col_gemm: the GEMM ladder has none of {(name,) + GEMM_PREFERENCE}; "
                             f"it has {sorted(by_name)}")


@dataclass(frozen=True)
class Im2colGemm(Variant):
    gemm_rung: str = "best"  # a name in gemm.LADDER, or "best": the first of GEMM_PREFERENCE it has
    block: int = 256

    rung: ClassVar[int] = 3
    name: ClassVar[str] = "im2col_gemm"
    what: ClassVar[str] = (
        "Caffe's recipe: copy every receptive field into a row of an explicit (N*P*Q) x (C*R*S) "
        "buffer, transpose w, and run the GEMM ladder's best SIMT rung on them unchanged. The "
        "buffer is R*S/stride^2 times the size of x, written once and read back by every column "
        "of GEMM tiles.")

    def gemm_variant(self):
        return _gemm_rung(self.gemm_rung)

    def gemm_problem(self, p):
        from .. import gemm

        m, n, k = p.gemm_mnk
        return gemm.Problem(m, n, k, "float32")

    def direct_out(self, p) -> bool:
        return p.nhwc and p.out_dtype == "float32"  # y is the GEMM's C itself

    def workspace(self, p):
        m, n, k = p.gemm_mnk
        ws = {"col": ((m, k), "float32"), "wt": ((k, n), "float32")}
        if not self.direct_out(p):
            ws["yg"] = ((m, n), "float32")
        return ws

    def supports(self, problem):
        from .. import gemm

        names = [v.name for v in gemm.LADDER if not v.oracle]
        if self.gemm_rung != "best" and self.gemm_rung not in names:  # a typo never falls back silently
            raise UnsupportedProblem(f"{self.label}: gemm_rung={self.gemm_rung!r} is no rung of the GEMM ladder; "
                                     f"one of {names}, or 'best'")
        m, n, k = problem.gemm_mnk
        if m * k >= 2**31:
            raise UnsupportedProblem(f"{self.label}: the im2col buffer would have {m * k} elements (>= 2**31)")
        self.gemm_variant().supports(self.gemm_problem(problem))
        C._check(self, problem, C._ceil(m * k, self.block), self.block)

    def plan(self, problem, bufs):
        p = problem
        m, n, k = p.gemm_mnk
        w2 = C._view2d(bufs["w"], n, k)
        c_out = C._view2d(bufs["y"], m, n) if self.direct_out(p) else bufs["yg"]
        g = self.gemm_variant()
        launches = [
            Launch(_im2col_kernel(p.nhwc), C._ceil(m * k, self.block), self.block,
                   (bufs["x"], bufs["col"], p.n, p.c, p.h, p.w, p.r, p.s, p.p, p.q, p.stride, p.pad)),
            Launch(conv_weights_t, C._ceil(n * k, self.block), self.block, (w2, bufs["wt"], n, k)),
        ]
        launches += g.plan(self.gemm_problem(p), {"a": bufs["col"], "b": bufs["wt"], "c": c_out})
        if not self.direct_out(p):
            launches.append(Launch(_scatter_kernel(p.nhwc), C._ceil(m * n, self.block), self.block,
                                   (bufs["yg"], bufs["y"], p.n, p.k, p.p, p.q)))
        return launches

    def traffic(self, p):
        m, n, k = p.gemm_mnk
        e = p.elem
        col = m * k * 4.0
        gt = self.gemm_variant().traffic(self.gemm_problem(p))
        extra_y = 0.0 if self.direct_out(p) else 2 * m * n * 4.0  # write yg, read it back
        im2col = p.n * p.c * p.h * p.w * e + col  # read x, write the buffer
        dram = im2col + gt.dram_bytes + extra_y + n * k * (e + 4) \
            + (0 if self.direct_out(p) else p.n * p.k * p.p * p.q * e)
        l2 = im2col + (gt.l2_bytes or gt.dram_bytes) + extra_y + n * k * (e + 4)
        return C._traffic(p, l2, gt.smem_bytes, gt.limiter or "fma",
                        f"im2col buffer {col / 1e6:.1f} MB ({col / max(1, p.n * p.c * p.h * p.w * e):.1f}x the input x), "
                        f"written then read by the GEMM ({self.gemm_variant().label}); "
                        + ("" if self.direct_out(p) else "plus a scatter pass into y"), dram=dram)


