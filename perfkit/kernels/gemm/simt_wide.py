"""GEMM's rung 19, aimed past cuBLAS (issue 45; its first record, on the H200, is level with rung
11 at 0.91 of cuBLAS): rung 11's warp-tiled SGEMM with a 128x256 block tile, 8x16 thread tiles,
one block an SM (launch_bounds(256, 1)) and double-buffered operands; and the autotuner's space
for it (:mod:`perfkit.kernels.gemm` has the ledger)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, int64, uint64

from .._vector import ld4, st4
from . import _common as C
from .simt import WarpTile, st2

#: the A^T tile: rows of BM + 4 words, and 8 more words after every 8 rows (rungs 9-11's layout)
_AT_PAD, _AT_SKEW = 4, 8


def _at_words(BM: int, BK: int) -> int:
    """Words of one A^T buffer: BK rows of BM + 4, skewed by 8 words every 8 rows."""
    return BK * (BM + _AT_PAD) + _AT_SKEW * ((BK - 1) // 8)


# --- rung 19: SIMT aimed past cuBLAS (issue 45) -----------------------------------------------------
@lru_cache(maxsize=None)
def _k_block_db(BK: int, BMP: int, BN: int, TM: int, TN: int, SUBM: int, SUBN: int, SKEW: int):
    """The BK k-steps of one shared tile with double-buffered operands (generated source, as
    ``_k_block``): the LDS.128 of step kk + 1 go into the other register set before the FFMAs of
    step kk, so a step's loads are in flight while the previous step multiplies."""
    body = ["def k_block(As, Bs, acc, rm, rn, abase, bbase):"]

    def loads(kk):
        s = kk % 2
        out = []
        for i4 in range(TM // 4):
            off = kk * BMP + SKEW * (kk // 8) + i4 * SUBM
            r = s * TM + 4 * i4
            out.append(f"    rm[{r}], rm[{r + 1}], rm[{r + 2}], rm[{r + 3}] = ld4(As, abase + {off})")
        for j4 in range(TN // 4):
            off = kk * BN + j4 * SUBN
            r = s * TN + 4 * j4
            out.append(f"    rn[{r}], rn[{r + 1}], rn[{r + 2}], rn[{r + 3}] = ld4(Bs, bbase + {off})")
        return out

    body += loads(0)
    for kk in range(BK):
        if kk + 1 < BK:
            body += loads(kk + 1)
        s = kk % 2
        body.append(f"    for i in range({TM}):")
        body.append(f"        for j in range({TN}):")
        body.append(f"            acc[i * {TN} + j] += rm[{s * TM} + i] * rn[{s * TN} + j]")
    ns = {"ld4": ld4}
    exec(compile("\n".join(body), f"<gemm k_block_db BK={BK} TM={TM} TN={TN}>", "exec"), ns)
    return C._jit(device=True, forceinline=True)(ns["k_block"])


@lru_cache(maxsize=None)
def _simt_wide_kernel(BM: int, BN: int, BK: int, TM: int, TN: int, LR: int, MIN_BLOCKS: int):
    """Rung 11's warp-tiled SGEMM (32-bit offsets, A^T padded and skewed, register-staged global
    loads, two shared buffers) for a wide block tile at one block per SM: ``launch_bounds(NT,
    MIN_BLOCKS)`` lets ptxas use up to 255 registers, which hold a 8x16 thread tile's 128
    accumulators, two sets of operands (``_k_block_db``) and the next tile's staged loads.

    Full k-tiles of aligned matrices take the hot loop (unchecked loads from clamped offsets);
    the rest take a second loop with checked loads and a second written-out copy of the k-steps
    (rung 11 multiplied its tail with a rolled copy, which at 128 accumulators a lane puts them
    on the stack).  Full blocks of an aligned C store with 128-bit stores and no checks."""
    i32 = int32
    LC = 32 // LR
    WM, WN = LR * TM, LC * TN
    WARPS_N = BN // WN
    NT = 32 * (BM // WM) * (BN // WN)
    BMP = BM + _AT_PAD
    SKEW = _AT_SKEW
    ABUF, BBUF = _at_words(BM, BK), BK * BN
    NA = BM * BK // 4 // NT
    NB = BK * BN // 4 // NT
    PAIR = NA % 2 == 0
    TM4, TN4 = TM // 4, TN // 4
    SUBM, SUBN = LR * 4, LC * 4
    BK4, BN4 = BK // 4, BN // 4
    ASZ, BSZ, RA, RB, TMN = 2 * ABUF, 2 * BBUF, 4 * NA, 4 * NB, TM * TN
    RM2, RN2 = 2 * TM, 2 * TN
    kblock = _k_block_db(BK, BMP, BN, TM, TN, SUBM, SUBN, SKEW)
    store_edge = _store_edge(TM, TN, SUBM, SUBN)
    dev = C._jit(device=True, forceinline=True)

    @dev
    def a_vec(t, s):
        if PAIR:
            v = i32(t + i32((s // 2) * NT))
            return i32(i32(v // i32(BK4)) * i32(2) + i32(s % 2)), i32(i32(v % i32(BK4)) * i32(4))
        v = i32(t + i32(s * NT))
        return i32(v // i32(BK4)), i32(i32(v % i32(BK4)) * i32(4))

    @dev
    def fetch_fast(a, b, ra, rb, a_off, b_off, k0, N32):
        for s in range(NA):
            ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = ld4(a, a_off[s] + k0)
        for s in range(NB):
            rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = ld4(b, b_off[s] + k0 * N32)

    @dev
    def fetch_checked(a, b, ra, rb, t, bm, bn, k0, M32, N32, K32, vec_a, vec_b):
        for s in range(NA):
            r, q = a_vec(t, s)
            r = i32(bm + r)
            q = i32(k0 + q)
            if vec_a and r < M32 and q + i32(3) < K32:
                ra[4 * s], ra[4 * s + 1], ra[4 * s + 2], ra[4 * s + 3] = ld4(a, i32(r * K32 + q))
            else:
                for e in range(4):
                    ra[4 * s + e] = a[i32(r * K32 + q + e)] if r < M32 and q + e < K32 else float32(0)
        for s in range(NB):
            v = i32(t + i32(s * NT))
            r = i32(k0 + i32(v // i32(BN4)))
            q = i32(bn + i32(v % i32(BN4)) * i32(4))
            if vec_b and r < K32 and q + i32(3) < N32:
                rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3] = ld4(b, i32(r * N32 + q))
            else:
                for e in range(4):
                    rb[4 * s + e] = b[i32(r * N32 + q + e)] if r < K32 and q + e < N32 else float32(0)

    @dev
    def stash(As, Bs, ra, rb, t, buf):
        abase = i32(buf * i32(ABUF))
        bbase = i32(buf * i32(BBUF))
        if PAIR:
            for p in range(NA // 2):
                r, q = a_vec(t, 2 * p)
                o = i32(abase + q * i32(BMP) + i32(q // i32(8)) * i32(SKEW) + r)
                for e in range(4):
                    st2(As, i32(o + i32(e * BMP)), ra[8 * p + e], ra[8 * p + 4 + e])
        else:
            for s in range(NA):
                r, q = a_vec(t, s)
                o = i32(abase + q * i32(BMP) + i32(q // i32(8)) * i32(SKEW) + r)
                for e in range(4):
                    As[uint64(o + i32(e * BMP))] = ra[4 * s + e]
        for s in range(NB):
            v = i32(t + i32(s * NT))
            r = i32(v // i32(BN4))
            q = i32(i32(v % i32(BN4)) * i32(4))
            st4(Bs, i32(bbase + r * i32(BN) + q), rb[4 * s], rb[4 * s + 1], rb[4 * s + 2], rb[4 * s + 3])

    @C._jit(launch_bounds=(NT, MIN_BLOCKS))
    def gemm_simt_wide(a, b, c, M, N, K, vec_a, vec_b, vec_c):
        As = cuda.shared.array(ASZ, float32)  # two buffers of the A^T tile, rows padded and skewed
        Bs = cuda.shared.array(BSZ, float32)
        ra = cuda.local.array(RA, float32)  # the next tile, staged in registers
        rb = cuda.local.array(RB, float32)
        a_off = cuda.local.array(NA, int32)
        b_off = cuda.local.array(NB, int32)
        acc = cuda.local.array(TMN, float32)
        rm = cuda.local.array(RM2, float32)  # two sets of operands
        rn = cuda.local.array(RN2, float32)
        M32 = i32(M)
        N32 = i32(N)
        K32 = i32(K)
        t = i32(cuda.threadIdx.x)
        bm = i32(i32(cuda.blockIdx.y) * i32(BM))
        bn = i32(i32(cuda.blockIdx.x) * i32(BN))
        warp = i32(t // i32(32))
        lane = i32(t % i32(32))
        row0 = i32(i32(warp // i32(WARPS_N)) * i32(WM) + i32(lane // i32(LC)) * i32(4))
        col0 = i32(i32(warp % i32(WARPS_N)) * i32(WN) + i32(lane % i32(LC)) * i32(4))
        for i in range(TMN):
            acc[i] = float32(0)
        for s in range(NA):
            r, q = a_vec(t, s)
            a_off[s] = i32(min(i32(bm + r), i32(M32 - i32(1))) * K32 + q)
        for s in range(NB):
            v = i32(t + i32(s * NT))
            b_off[s] = i32(i32(v // i32(BN4)) * N32 + min(i32(bn + i32(v % i32(BN4)) * i32(4)), i32(N32 - i32(4))))
        a_lane = int64(row0)
        b_lane = int64(col0)
        n_tiles = i32(i32(K32 + i32(BK - 1)) // i32(BK))
        n_fast = i32(K32 // i32(BK)) if vec_a and vec_b else i32(0)
        fetch_checked(a, b, ra, rb, t, bm, bn, i32(0), M32, N32, K32, vec_a, vec_b)
        stash(As, Bs, ra, rb, t, i32(0))
        cuda.syncthreads()
        # the hot loop: fetch tile `tile` (unchecked), multiply tile - 1, stash, one barrier
        for tile in range(i32(1), n_fast):
            fetch_fast(a, b, ra, rb, a_off, b_off, i32(tile * i32(BK)), N32)
            cur = int64(i32(tile - i32(1)) & i32(1))
            kblock(As, Bs, acc, rm, rn, cur * ABUF + a_lane, cur * BBUF + b_lane)
            stash(As, Bs, ra, rb, t, i32(tile & i32(1)))
            cuda.syncthreads()
        # the rest (a partial last tile, or every tile of unaligned matrices): checked loads,
        # the same written-out k-steps (a second copy: rolled, they would index acc at run time)
        for tile in range(max(n_fast, i32(1)), i32(n_tiles + i32(1))):
            if tile < n_tiles:
                fetch_checked(a, b, ra, rb, t, bm, bn, i32(tile * i32(BK)), M32, N32, K32, vec_a, vec_b)
            cur = int64(i32(tile - i32(1)) & i32(1))
            kblock(As, Bs, acc, rm, rn, cur * ABUF + a_lane, cur * BBUF + b_lane)
            if tile < n_tiles:
                stash(As, Bs, ra, rb, t, i32(tile & i32(1)))
            cuda.syncthreads()
        if vec_c and bm + i32(BM) <= M32 and bn + i32(BN) <= N32:  # a full block: no checks
            for i in range(TM):
                r = i32(bm + row0 + i32((i // 4) * SUBM + i % 4))
                for j4 in range(TN4):
                    q = i32(bn + col0 + i32(j4 * SUBN))
                    st4(c, i32(r * N32 + q), acc[i * TN + 4 * j4], acc[i * TN + 4 * j4 + 1],
                        acc[i * TN + 4 * j4 + 2], acc[i * TN + 4 * j4 + 3])
        else:
            store_edge(c, acc, i32(bm + row0), i32(bn + col0), M32, N32)

    return gemm_simt_wide


@lru_cache(maxsize=None)
def _store_edge(TM: int, TN: int, SUBM: int, SUBN: int):
    """An edge block's checked stores, written out (generated source): a loop of TM x TN
    checked stores is past LLVM's full-unroll threshold at 8x16, and a rolled one indexes the
    accumulators at run time, which puts all 128 on the stack."""
    body = ["def store_edge(c, acc, r0, q0, M32, N32):"]
    for i in range(TM):
        body.append(f"    r = int32(r0 + {(i // 4) * SUBM + i % 4})")
        body.append("    if r < M32:")
        for j4 in range(TN // 4):
            for e in range(4):
                body.append(f"        if q0 + {j4 * SUBN + e} < N32:")
                body.append(f"            c[int32(r * N32 + q0 + {j4 * SUBN + e})] = acc[{i * TN + 4 * j4 + e}]")
    ns = {"int32": int32}
    exec(compile("\n".join(body), f"<gemm store_edge TM={TM} TN={TN}>", "exec"), ns)
    return C._jit(device=True, forceinline=True)(ns["store_edge"])


@dataclass(frozen=True)
class SimtWide(WarpTile):
    BM: int = 128
    BN: int = 256
    BK: int = 8
    TM: int = 8
    TN: int = 16
    LR: int = 8  # 8 x 4 lanes: a 64x64 warp tile, 2 x 4 warps
    MIN_BLOCKS: int = 1  # launch_bounds(256, 1): up to 255 registers, one block an SM

    rung: ClassVar[int] = 19
    name: ClassVar[str] = "simt_wide"
    what: ClassVar[str] = (
        "A wider SIMT tile like cuBLAS's SGEMM: 128x256 block, 8x16 per thread (64x64 warp tiles, "
        "2 + 4 LDS.128 per 128 FFMAs) under launch_bounds(256, 1), room for 255 registers a "
        "thread. Operands are double-buffered in registers: step k+1's loads issue before step "
        "k's FFMAs.")

    def _kernel(self):
        return _simt_wide_kernel(self.BM, self.BN, self.BK, self.TM, self.TN, self.LR, self.MIN_BLOCKS)


def search_space_wide() -> list[SimtWide]:
    """Rung 19's configurations for the autotuner (``perfkit.autotune.search_gemm(wide=True)``):
    one block an SM under launch_bounds(NT, 1), thread tiles up to 8x16 (256 accumulators do not
    fit 255 registers), operands double-buffered; the tile constraints are WarpTile's."""
    return [v for v in (SimtWide(BM=BM, BN=BN, BK=8, TM=TM, TN=TN, LR=LR)
                        for BM, BN, TM, TN, LR in itertools.product((64, 128, 256), (128, 256), (8, 16), (8, 16),
                                                                    (4, 8)))
            if not v.constraints() and v.TM * v.TN <= 128]
