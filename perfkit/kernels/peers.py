"""Peers: other libraries' kernels for the same problems, timed beside a ladder on a GPU.

A peer keeps the ``Variant`` contract (``supports``, ``run``, ``prepare``), so ``bench.sweep``
checks it against the float64 reference before it times it, exactly like a rung; it is not a
rung (``rung`` is -1, its label starts with ``peer``) and is not in any ``LADDER``.  Peers run
only on a GPU and only where their library is installed; anywhere else ``supports`` raises
:class:`UnsupportedProblem` saying why, and ``bench.sweep`` keeps that row as ``unsupported``.

* ``TorchMatmul``: ``torch.mm`` (float32 with TF32 off; float16 inputs with a float32 output
  through ``torch.mm(a, b, torch.float32)``, PyTorch >= 2.8).
* ``TritonMatmul``: a tiled Triton GEMM written here in the style of Triton's matmul tutorial
  (grouped tile order, fp32 accumulation; IEEE fp32 products for float32 problems, no TF32).
* ``TorchConv``: ``torch.nn.functional.conv2d`` with cuDNN's autotuner on (the conv oracle
  takes cuDNN's heuristic pick); ``TritonConv``: a Triton implicit GEMM written here.
* ``TritonRows``: one Triton program per row for softmax, layernorm and rmsnorm, looping over
  the row in chunks (statistics sweep, then the write sweep).

Torch's own normalization kernels are rung 0 (the oracle) of the norm ladders, so they are not
repeated here.  ``PEERS[op]`` lists the peers of each op.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

from .base import Peer, UnsupportedProblem  # noqa: F401  (Peer: its home is base)
from .conv import torch_conv, torch_nchw

__all__ = ["Peer", "TorchMatmul", "TritonMatmul", "TritonRows", "TorchConv", "TritonConv", "PEERS", "peers_for"]


def _torch_view(arr):
    """A CuPy array as a torch tensor sharing its memory (no copy)."""
    import torch

    return torch.as_tensor(arr, device="cuda")


# --- GEMM ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TorchMatmul(Peer):
    name: ClassVar[str] = "torch"
    library: ClassVar[str] = "torch"
    ops: ClassVar[tuple[str, ...]] = ("gemm",)
    what: ClassVar[str] = ("torch.mm: cuBLAS(Lt) through PyTorch with TF32 off for float32; float16 inputs "
                           "with float32 output by torch.mm(a, b, torch.float32) (PyTorch >= 2.8).")

    def gpu(self, problem, x, out):
        import torch

        a, b, c = (_torch_view(v) for v in (x["a"], x["b"], out["c"]))
        if problem.dtype == "float32":
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            try:
                torch.mm(a, b, out=c)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old
        else:
            try:
                torch.mm(a, b, torch.float32, out=c)
            except TypeError as exc:  # older PyTorch: no out_dtype overload
                raise UnsupportedProblem(f"torch {torch.__version__} has no float16 -> float32 mm: {exc}") from exc


@functools.lru_cache(maxsize=None)
def _triton_mm():
    import triton
    import triton.language as tl

    @triton.jit
    def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  PRECISION: tl.constexpr):
        # grouped ("super-tile") order: GROUP_M row tiles share their B panels in L2
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % group_m
        pid_n = (pid % per_group) // group_m
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * s_bk + rn[None, :] * s_bn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    return mm_kernel


@dataclass(frozen=True)
class TritonMatmul(Peer):
    name: ClassVar[str] = "triton"
    library: ClassVar[str] = "triton"
    ops: ClassVar[tuple[str, ...]] = ("gemm",)
    what: ClassVar[str] = ("A tiled Triton GEMM (tl.dot, grouped tile order, float32 accumulation; "
                           "IEEE float32 products for float32, tensor cores for float16), one fixed "
                           "configuration per dtype, not autotuned.")
    BM: int = 128
    BN: int = 128
    BK: int = 32
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3

    def gpu(self, problem, x, out):
        import triton

        a, b, c = (_torch_view(v) for v in (x["a"], x["b"], out["c"]))
        m, k = a.shape
        n = b.shape[1]
        grid = (triton.cdiv(m, self.BM) * triton.cdiv(n, self.BN),)
        _triton_mm()[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                           c.stride(0), c.stride(1), BM=self.BM, BN=self.BN, BK=self.BK,
                           GROUP_M=self.GROUP_M,
                           PRECISION="ieee" if problem.dtype == "float32" else "tf32",
                           num_warps=self.num_warps, num_stages=self.num_stages)


# --- row normalizations -------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _triton_rows():
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * cols
        y_row = y_ptr + row * cols
        offs = tl.arange(0, BLOCK)
        m = tl.full((BLOCK,), float("-inf"), tl.float32)  # online max and sum, per lane
        s = tl.zeros((BLOCK,), tl.float32)
        for c0 in range(0, cols, BLOCK):
            v = tl.load(x_row + c0 + offs, mask=c0 + offs < cols, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, v)
            scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
            s = s * scale + tl.where(m_new == float("-inf"), 0.0, tl.exp(v - m_new))
            m = m_new
        row_max = tl.max(m, axis=0)
        total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
        for c0 in range(0, cols, BLOCK):
            mask = c0 + offs < cols
            v = tl.load(x_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + c0 + offs, (tl.exp(v - row_max) / total).to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def norm_rows(x_ptr, g_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, cols, eps,
                  BLOCK: tl.constexpr, CENTER: tl.constexpr):
        # CENTER: layernorm (mean and variance, two statistics sweeps); else rmsnorm
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * cols
        y_row = y_ptr + row * cols
        offs = tl.arange(0, BLOCK)
        mean = 0.0
        if CENTER:
            acc = tl.zeros((BLOCK,), tl.float32)
            for c0 in range(0, cols, BLOCK):
                acc += tl.load(x_row + c0 + offs, mask=c0 + offs < cols, other=0.0).to(tl.float32)
            mean = tl.sum(acc, axis=0) / cols
        acc2 = tl.zeros((BLOCK,), tl.float32)
        for c0 in range(0, cols, BLOCK):
            mask = c0 + offs < cols
            v = tl.load(x_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, v - mean, 0.0)
            acc2 += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / cols + eps)
        if CENTER:
            tl.store(mean_ptr + row, mean)
            tl.store(rstd_ptr + row, rstd)
        for c0 in range(0, cols, BLOCK):
            mask = c0 + offs < cols
            v = tl.load(x_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
            g = tl.load(g_ptr + c0 + offs, mask=mask, other=0.0).to(tl.float32)
            y = (v - mean) * rstd * g
            if CENTER:
                y += tl.load(b_ptr + c0 + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + c0 + offs, y.to(y_ptr.dtype.element_ty), mask=mask)

    return softmax_rows, norm_rows


@dataclass(frozen=True)
class TritonRows(Peer):
    name: ClassVar[str] = "triton"
    library: ClassVar[str] = "triton"
    ops: ClassVar[tuple[str, ...]] = ("softmax", "layernorm", "rmsnorm")
    what: ClassVar[str] = ("One Triton program per row, looping over the row in BLOCK-wide chunks: "
                           "online max/sum then the write for softmax; mean, centred variance, write for "
                           "layernorm; sum of squares, write for rmsnorm; statistics in float32.")
    block: int = 1024
    num_warps: int = 4

    def gpu(self, problem, x, out):
        import triton

        rows, cols = problem.rows, problem.cols
        block = min(self.block, triton.next_power_of_2(cols))
        softmax_rows, norm_rows = _triton_rows()
        t = {k: _torch_view(v) for k, v in {**x, **out}.items()}
        if problem.op == "softmax":
            softmax_rows[(rows,)](t["x"], t["y"], cols, BLOCK=block, num_warps=self.num_warps)
            return
        center = problem.op == "layernorm"
        mean, rstd = (t["mean"], t["rstd"]) if center else (t["y"], t["y"])  # unused pointers for rmsnorm
        norm_rows[(rows,)](t["x"], t["gamma"], t["beta"] if center else t["gamma"], t["y"], mean, rstd,
                           cols, float(problem.eps), BLOCK=block, CENTER=center, num_warps=self.num_warps)


# --- convolution: torch's autotuned choice and a Triton implicit GEMM ---------------------------
@functools.lru_cache(maxsize=None)
def _triton_conv():
    import triton
    import triton.language as tl

    @triton.jit
    def conv_igemm(x_ptr, w_ptr, y_ptr, N, C, H, W, K, R, S, P, Q, stride, pad,
                   sxn, sxc, sxh, sxw, swk, swc, swr, sws, syn, syk, syp, syq,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        M = N * P * Q
        CRS = C * R * S
        rm = pid_m * BM + tl.arange(0, BM)  # output pixels
        rn = pid_n * BN + tl.arange(0, BN)  # output channels
        b = rm // (P * Q)
        pq = rm % (P * Q)
        op = pq // Q
        oq = pq % Q
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for j0 in range(0, CRS, BK):
            rk = j0 + tl.arange(0, BK)  # taps in (r, s, c) order: c fastest
            c = rk % C
            rs = rk // C
            s = rs % S
            r = rs // S
            ih = op[:, None] * stride - pad + r[None, :]
            iw = oq[:, None] * stride - pad + s[None, :]
            amask = (rm[:, None] < M) & (rk[None, :] < CRS) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load(x_ptr + b[:, None] * sxn + c[None, :] * sxc + ih * sxh + iw * sxw, mask=amask, other=0.0)
            bmask = (rk[:, None] < CRS) & (rn[None, :] < K)
            bt = tl.load(w_ptr + rn[None, :] * swk + c[:, None] * swc + r[:, None] * swr + s[:, None] * sws,
                         mask=bmask, other=0.0)
            acc = tl.dot(a, bt, acc, input_precision=PRECISION)
        ymask = (rm[:, None] < M) & (rn[None, :] < K)
        tl.store(y_ptr + b[:, None] * syn + rn[None, :] * syk + op[:, None] * syp + oq[:, None] * syq,
                 acc.to(y_ptr.dtype.element_ty), mask=ymask)

    return conv_igemm


@dataclass(frozen=True)
class TorchConv(Peer):
    name: ClassVar[str] = "torch"
    library: ClassVar[str] = "torch"
    ops: ClassVar[tuple[str, ...]] = ("conv",)
    what: ClassVar[str] = (
        "torch.nn.functional.conv2d with torch.backends.cudnn.benchmark on: cuDNN times its "
        "algorithms for the shape once and keeps the fastest (the oracle takes cuDNN's heuristic "
        "pick). TF32 off, so the products are IEEE float32 as in the oracle.")

    def gpu(self, problem, x, out):
        return torch_conv(problem, x, benchmark=True)


@dataclass(frozen=True)
class TritonConv(Peer):
    name: ClassVar[str] = "triton"
    library: ClassVar[str] = "triton"
    ops: ClassVar[tuple[str, ...]] = ("conv",)
    what: ClassVar[str] = (
        "A Triton implicit GEMM: each program gathers a BM x BK tile of A from x (any layout, "
        "through strides; taps in (r, s, c) order) and a BK x BN tile of w, and accumulates "
        "tl.dot in float32 (IEEE products for float32, tensor cores for float16). One fixed "
        "configuration, not autotuned.")
    BM: int = 128
    BN: int = 64
    BK: int = 32
    num_warps: int = 4
    num_stages: int = 3

    def gpu(self, problem, x, out):
        import torch
        import triton

        p = problem
        xt = torch_nchw(torch.from_dlpack(x["x"]), p.nhwc)  # logical NCHW strides over our memory
        wt = torch_nchw(torch.from_dlpack(x["w"]), p.nhwc)
        yt = torch_nchw(torch.from_dlpack(out["y"]), p.nhwc)
        m = p.n * p.p * p.q
        grid = (triton.cdiv(m, self.BM), triton.cdiv(p.k, self.BN))
        _triton_conv()[grid](xt, wt, yt, p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.p, p.q, p.stride, p.pad,
                             *xt.stride(), *wt.stride(), *yt.stride(), BM=self.BM, BN=self.BN, BK=self.BK,
                             PRECISION="ieee" if p.dtype == "float32" else "tf32",
                             num_warps=self.num_warps, num_stages=self.num_stages)


PEERS: dict[str, list[Peer]] = {
    "gemm": [TorchMatmul(), TritonMatmul()],
    "conv": [TorchConv(), TritonConv()],
    "softmax": [TritonRows()],
    "layernorm": [TritonRows()],
    "rmsnorm": [TritonRows()],
}


def peers_for(op: str) -> list[Peer]:
    """The peers of an op (possibly none)."""
    return list(PEERS.get(op, []))
