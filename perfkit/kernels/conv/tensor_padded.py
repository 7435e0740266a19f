"""Rung 16: the tensor-core implicit GEMM for any channel count, by a pad pre-pass and taps packed
into the k-tiles (issue 43: ResNet-50's 7x7 stem, c = 3, which rungs 9-15 refuse)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from numba import cuda, float32, int32, uint32
from numba.types import float16

from .._ptx import (cp_async16_off_zfill, cp_async_commit, cp_async_wait, ld16_u32_off, ldmatrix_x4_off,  # and their
                    mma_16816_u32, pack_h2, st16_u32_off, st_u32_off)  # simulator twins
from ..base import Launch, UnsupportedProblem
from . import _common as C
from .tensor import TCEpilogue

#: threads per block of the pad launch
PAD_BLOCK = 256
#: its most blocks: past that the grid-stride loop takes the rest (the stem: 6,285 blocks, one row a thread)
PAD_MAX_BLOCKS = 65535


def c8(c: int) -> int:
    """The channels padded to whole 16-byte chunks: ceil(c / 8) * 8."""
    return C._ceil(c, 8) * 8


@lru_cache(maxsize=None)
def _pad_kernel():
    """Launch 1: x (rows NX = N*H*W, C) and w (rows NW = K*R*S, C), both row-major with a row
    per pixel or filter tap, into x8 (NX, C8) and w8 (NW, C8), zeros in channels C..C8-1.  The
    two pads are the same transform on rows, so one launch serves both (w's is small: 25,088
    halves at the stem, not worth a launch of its own): one thread a row, grid-stride over the
    rows of x then those of w, each row's CC = C8 / 8 chunks in turn (no division).  Every
    element of x8 and w8 is written.  Reads are 2-byte loads (a row of C halves need not be
    16-byte aligned; a warp reads 32 consecutive rows), writes one 16-byte store a chunk (a
    warp's 32 stores consecutive where CC = 1)."""
    dev = C._jit(device=True, forceinline=True)

    @dev
    def get(src, i, c, Ci):  # channel c of the row starting at element i, or 0 past its C channels
        return src[i + uint32(c)] if c < Ci else float16(0)

    @dev
    def pad_row(src, dst, rr, Ci, CC):
        i = uint32(rr * Ci)  # the row's channel 0 (unsigned: no negative-index wrap in the loads)
        o = int32(rr * (CC * 8))
        for cc in range(CC):
            c0 = int32(cc * 8)
            st16_u32_off(dst, int32(o + c0),
                         pack_h2(get(src, i, c0, Ci), get(src, i, c0 + 1, Ci)),
                         pack_h2(get(src, i, c0 + 2, Ci), get(src, i, c0 + 3, Ci)),
                         pack_h2(get(src, i, c0 + 4, Ci), get(src, i, c0 + 5, Ci)),
                         pack_h2(get(src, i, c0 + 6, Ci), get(src, i, c0 + 7, Ci)))

    @cuda.jit
    def conv_pad8(x1, w1, x8, w8, NX, NW, Cc, CCc):
        Ci = int32(Cc)
        CC = int32(CCc)
        nx = int32(NX)
        tot = int32(nx + int32(NW))
        row = int32(cuda.grid(1))
        step = int32(cuda.gridsize(1))
        while row < tot:  # (the arrays are not chosen by a select: that would make the accesses generic, LD/ST)
            if row < nx:
                pad_row(x1, x8, row, Ci, CC)
            else:
                pad_row(w1, w8, int32(row - nx), Ci, CC)
            row = int32(row + step)

    return conv_pad8


@lru_cache(maxsize=None)
def _tc_padded_kernel(WARPS_M: int, WARPS_N: int, MT: int, NT8: int, BK: int, STAGES: int):
    """Launch 2: rung 15's main loop (``tensor._tc_conv_kernel`` with ldmatrix, the cp.async ring
    and the staged epilogue) on x8 and w8, the reduction over the FLATTENED chunk index
    f = (r * S + s) * CC + cc (CC = C8 / 8 chunks a tap): a k-tile is CPR = BK / 8 consecutive
    chunks of that sequence, so at C8 = 8 one k-tile holds CPR taps where rung 15 gives each tap
    its own k-tiles of BK channels (at c = 3: 29 of every 32 columns zeros).

    A thread owns chunk column ca of LA rows of the A tile (RA apart) and LB rows of the B tile,
    so at k-tile kt its chunk is f = kt * CPR + ca, the same tap (r, s) and chunk cc for all its
    rows: each thread keeps its own (r, s, cc) counters and the offset of that chunk from the
    row's tap-(0, 0) pixel, toff = (r * W + s) * C8 + cc * 8, advanced by CPR chunks a k-tile with
    two carries (the steps dcc, ds, dr of CPR chunks are divided out once, before the loop; no
    division in it); its row predicates are one AND of the per-row mask bits at (r, s), and a
    chunk past the end (f >= R*S*CC, i.e. r >= R) copies 0 bytes (zero-fill).  B is w8 viewed
    (K, R*S*C8), row-contiguous: chunk f of row n at n * R*S*C8 + 8 f, a k-tile BK elements on."""
    i32 = int32
    BM, BN = 16 * MT * WARPS_M, 8 * NT8 * WARPS_N
    NT = 32 * WARPS_M * WARPS_N
    WARPS = WARPS_M * WARPS_N
    KS = BK // 16
    CPR = BK // 8  # 16-byte chunks per tile row (A and B alike)
    RPL = max(8 // CPR, 1)  # tile rows per 128-byte line
    LA, LB = BM * CPR // NT, BN * CPR // NT  # chunks per thread (supports: whole rows of threads)
    RA = NT // CPR  # rows between a thread's chunks
    NACC = MT * NT8 * 4
    NRA, NRB = MT * 4, NT8 * 2
    NBP = max(NT8 // 2, 1)
    NBO = KS * NBP  # B ldmatrix addresses: one per k-step and pair of n8 tiles
    ASH, BSH = STAGES * BM, STAGES * BN  # rows of the A and B rings
    ASTAGE, BSTAGE = BM * BK, BN * BK  # elements of one stage
    WAIT = max(STAGES - 2, 0)
    WT = 16 * MT * 8 * NT8  # halves of one warp's tile of y
    WCPR = NT8  # its 16-byte chunks per row (8 * NT8 halves)
    WCH = WT // 8 // 32  # chunks per lane
    HALF = max(WARPS // 2, 1)
    dev = C._jit(device=True, forceinline=True)

    @dev
    def phys(r, ch):  # physical chunk of logical chunk ch of tile row r (XOR swizzle)
        return i32(ch ^ i32(i32(r // RPL) % CPR))

    @dev
    def compute(As, Bs, acc, ra, rb, aoff, boff, scr_a, scr_b, scr_l, stage):
        sta = i32(stage * ASTAGE)
        stb = i32(stage * BSTAGE)
        for ks in range(KS):
            for mt in range(MT):
                ra[mt * 4], ra[mt * 4 + 1], ra[mt * 4 + 2], ra[mt * 4 + 3] = ldmatrix_x4_off(
                    As, i32(i32(sta + aoff[ks]) + i32(mt * (16 * BK))), scr_l)
            for np_ in range(NBP):  # two n8 tiles per ldmatrix.x4
                rb[np_ * 4], rb[np_ * 4 + 1], rb[np_ * 4 + 2], rb[np_ * 4 + 3] = ldmatrix_x4_off(
                    Bs, i32(stb + boff[ks * NBP + np_]), scr_l)
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    q = (nt // 2) * 4 + (nt % 2) * 2
                    acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = mma_16816_u32(
                        ra[mt * 4], ra[mt * 4 + 1], ra[mt * 4 + 2], ra[mt * 4 + 3], rb[q], rb[q + 1],
                        acc[o], acc[o + 1], acc[o + 2], acc[o + 3], scr_a, scr_b)

    @dev
    def tap_rows(mh, mw, r, s, Ri):  # bit i: this thread's A row i sees the input at tap (r, s)
        pa = i32(0)
        if r < Ri:  # else the chunk is past the end of the reduction: no row reads
            for i in range(LA):
                pa |= i32(i32(i32(mh[i] >> r) & i32(mw[i] >> s) & 1) << i)
        return pa

    @dev
    def load_async(x2, w2, As, Bs, stage, xoff, toff, jb, pa, pb, sa0, goff_b, RSC):
        """cp.async of this thread's chunks of one k-tile into ``stage``: 16 bytes where the chunk
        is inside x8 (w8), 0 (zero-filled, from an in-bounds address) where it is not."""
        for i in range(LA):
            ok = (pa >> i) & 1
            cp_async16_off_zfill(As, i32(i32(stage * ASTAGE) + i32(sa0 + i * (RA * BK))), x2,
                                 i32(xoff[i] + toff) if ok else i32(0), 16 if ok else 0)
        for i in range(LB):
            ok = (pb >> i) & 1
            cp_async16_off_zfill(Bs, i32(i32(stage * BSTAGE) + i32(sa0 + i * (RA * BK))), w2,
                                 i32(goff_b + i32(i * RA) * RSC + jb) if ok else i32(0), 16 if ok else 0)

    @dev
    def advance(r, s, cc, toff, jb, CC, Si, dcc, ds, dr, inc_t, inc_r):
        """The next k-tile's chunk of this thread: CPR chunks on (pointer increments, two carries)."""
        cc = i32(cc + dcc)
        s = i32(s + ds)
        r = i32(r + dr)
        toff = i32(toff + inc_t)
        jb = i32(jb + BK)
        if cc >= CC:  # the next tap, same pixel offset: (s + 1) * C8 + (cc - CC) * 8 = s * C8 + cc * 8
            cc = i32(cc - CC)
            s = i32(s + 1)
        if s >= Si:  # the next filter row: (W - S) * C8 further on
            s = i32(s - Si)
            r = i32(r + 1)
            toff = i32(toff + inc_r)
        return r, s, cc, toff, jb

    @C._jit(launch_bounds=NT)
    def conv_tc_padded(x2, w2, y1, y2, M, K, C8, H, W, P, Q, R, S, stride, pad, vec_y):
        As = cuda.shared.array((ASH, BK), float16)  # STAGES x (BM, BK): pixels x chunks of taps
        Bs = cuda.shared.array((BSH, BK), float16)  # STAGES x (BN, BK): output channels x the same
        scr_a = cuda.shared.array((WARPS, 32, 8), float32)  # used by the simulator's twins only
        scr_b = cuda.shared.array((WARPS, 32, 4), float32)
        scr_l = cuda.shared.array((WARPS, 32, 2), int32)
        acc = cuda.local.array(NACC, float32)
        ra = cuda.local.array(NRA, uint32)
        rb = cuda.local.array(NRB, uint32)
        xoff = cuda.local.array(LA, int32)  # each A row's tap-(0, 0) pixel, as an element offset of x8
        mh = cuda.local.array(LA, int32)    # bit r: that row's input row is inside x at filter row r
        mw = cuda.local.array(LA, int32)    # bit s: likewise its input column at filter column s
        aoff = cuda.local.array(KS, int32)
        boff = cuda.local.array(NBO, int32)
        Mi, Ki, C8i, Hi, Wi = i32(M), i32(K), i32(C8), i32(H), i32(W)
        Ri, Si = i32(R), i32(S)
        PQ = i32(i32(P) * i32(Q))
        t = i32(cuda.threadIdx.x)
        lane = i32(t % 32)
        warp = i32(t // 32)
        wm = i32(i32(warp // WARPS_N) * (16 * MT))
        wn = i32(i32(warp % WARPS_N) * (8 * NT8))
        bm = i32(i32(cuda.blockIdx.y) * BM)
        bn = i32(i32(cuda.blockIdx.x) * BN)
        for i in range(NACC):
            acc[i] = float32(0)
        # this lane's ldmatrix row addresses (tile rows of a lane keep its swizzle: see phys)
        l16 = i32(lane % 16)
        hi = i32(lane // 16)
        l8 = i32(lane % 8)
        for ks in range(KS):
            aoff[ks] = i32(i32(i32(wm + l16) * BK) + i32(phys(l16, i32(ks * 2 + hi)) * 8))
            for np_ in range(NBP):
                brow = i32(i32(wn + np_ * 16) + i32(hi * 8 + l8))
                bch = i32(ks * 2 + i32(i32(lane // 8) % 2))
                boff[ks * NBP + np_] = i32(i32(brow * BK) + i32(phys(l8, bch) * 8))
        # this thread's chunks: column ca of rows ra0 + i * RA (A) and rb0 + i * RA (B)
        ra0 = i32(t // CPR)
        ca = i32(t % CPR)
        sa0 = i32(i32(ra0 * BK) + i32(phys(ra0, ca) * 8))  # the rows RA apart share the swizzle
        for i in range(LA):
            m = i32(bm + i32(ra0 + i * RA))
            b = i32(m // PQ)
            pq = i32(m - b * PQ)
            op = i32(pq // i32(Q))
            hb = i32(i32(op * i32(stride)) - i32(pad))
            wb = i32(i32(i32(pq - op * i32(Q)) * i32(stride)) - i32(pad))
            xoff[i] = i32(i32(i32(i32(b * Hi) + hb) * Wi + wb) * C8i)
            bits_h = i32(0)
            bits_w = i32(0)
            if m < Mi:
                for r in range(R):
                    if hb + r >= 0 and hb + r < Hi:
                        bits_h |= i32(1 << r)
                for s in range(S):
                    if wb + s >= 0 and wb + s < Wi:
                        bits_w |= i32(1 << s)
            mh[i] = bits_h
            mw[i] = bits_w
        CC = i32(C8i // 8)  # chunks a tap
        RSC = i32(i32(Ri * Si) * C8i)  # a row of w8 viewed (K, R*S*C8)
        goff_b = i32(i32(i32(bn + ra0) * RSC) + ca * 8)  # B chunk ca: row bn + ra0 of w8
        pbr = i32(0)  # bit i: B row bn + ra0 + i * RA is an output channel
        for i in range(LB):
            if bn + ra0 + i * RA < Ki:
                pbr |= i32(1 << i)
        # the thread's chunk at k-tile 0, f = ca, and the step of CPR chunks, as (r, s, cc): the
        # only divisions, once
        cc = i32(ca % CC)
        s = i32(i32(ca // CC) % Si)
        r = i32(i32(ca // CC) // Si)
        dcc = i32(CPR % CC)
        ds = i32(i32(CPR // CC) % Si)
        dr = i32(i32(CPR // CC) // Si)
        toff = i32(i32(i32(r * Wi + s) * C8i) + cc * 8)  # the chunk's offset from the row's tap-(0, 0) pixel
        inc_t = i32(i32(dcc * 8) + i32(i32(ds + dr * Wi) * C8i))
        inc_r = i32(i32(Wi - Si) * C8i)  # from (r, S, cc) to (r + 1, 0, cc)
        jb = i32(0)  # the k-tile's first column of w8 (goff_b has the thread's ca * 8)
        n_k = i32(i32(i32(Ri * Si) * CC + (CPR - 1)) // CPR)
        kt = i32(0)
        for st in range(STAGES - 1):  # prologue: STAGES - 1 k-tiles in flight
            if st < n_k:
                pa = tap_rows(mh, mw, r, s, Ri)
                load_async(x2, w2, As, Bs, st, xoff, toff, jb, pa, pbr if r < Ri else i32(0), sa0, goff_b, RSC)
                r, s, cc, toff, jb = advance(r, s, cc, toff, jb, CC, Si, dcc, ds, dr, inc_t, inc_r)
            cp_async_commit()
        rs = i32(0)           # the stage read this k-tile
        ws = i32(STAGES - 1)  # the stage written (k-tile kt + STAGES - 1)
        while kt < n_k:
            cp_async_wait(WAIT)  # k-tile kt has landed (this thread's copies) ...
            cuda.syncthreads()   # ... and everyone's; the stage read at kt - 1 is free
            if kt + (STAGES - 1) < n_k:
                pa = tap_rows(mh, mw, r, s, Ri)
                load_async(x2, w2, As, Bs, ws, xoff, toff, jb, pa, pbr if r < Ri else i32(0), sa0, goff_b, RSC)
                r, s, cc, toff, jb = advance(r, s, cc, toff, jb, CC, Si, dcc, ds, dr, inc_t, inc_r)
            cp_async_commit()
            compute(As, Bs, acc, ra, rb, aoff, boff, scr_a, scr_b, scr_l, rs)
            rs = i32(rs + 1)
            if rs == STAGES:
                rs = i32(0)
            ws = i32(ws + 1)
            if ws == STAGES:
                ws = i32(0)
            kt = i32(kt + 1)
        cp_async_wait(0)
        g = lane // 4
        t4 = lane % 4
        if vec_y and bm + BM <= Mi and bn + BN <= Ki:  # uniform across the block: rung 15's staged epilogue
            cuda.syncthreads()  # every warp is done reading the rings
            in_a = warp < HALF
            base = i32(i32(warp if in_a else warp - HALF) * WT)  # this warp's (16 MT, 8 NT8) tile
            for mt in range(MT):  # packed 4-byte stores, chunk c of row r at c ^ (r % WCPR): no conflicts
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    for h in range(2):  # rows g and g + 8 of the mma tile
                        rr = i32(mt * 16 + g + 8 * h)
                        e = i32(i32(base + rr * (8 * NT8)) + i32(i32(i32(nt ^ i32(rr % WCPR)) * 8) + 2 * t4))
                        u = pack_h2(float16(acc[o + 2 * h]), float16(acc[o + 2 * h + 1]))
                        if in_a:
                            st_u32_off(As, e, u)
                        else:
                            st_u32_off(Bs, e, u)
            cuda.syncthreads()
            for j in range(WCH):  # 16 bytes a store: 8 output channels of one pixel
                ch = i32(lane + j * 32)
                rr = i32(ch // WCPR)
                c_ = i32(ch % WCPR)
                soff = i32(i32(base + rr * (8 * NT8)) + i32(c_ ^ i32(rr % WCPR)) * 8)
                if in_a:
                    u0, u1, u2, u3 = ld16_u32_off(As, soff)
                else:
                    u0, u1, u2, u3 = ld16_u32_off(Bs, soff)
                st16_u32_off(y2, i32(i32(i32(bm + wm + rr) * Ki) + i32(bn + wn + c_ * 8)), u0, u1, u2, u3)
        else:  # an edge block, or K % 8 != 0: one half at a time
            for mt in range(MT):
                for nt in range(NT8):
                    o = (mt * NT8 + nt) * 4
                    row = bm + wm + mt * 16 + g
                    col = bn + wn + nt * 8 + 2 * t4
                    for i in range(4):
                        rr = row + 8 * (i // 2)
                        q = col + (i % 2)
                        if rr < Mi and q < Ki:
                            y1[i32(i32(rr * Ki) + q)] = float16(acc[o + i])

    return conv_tc_padded


@dataclass(frozen=True)
class TCPadded(TCEpilogue):
    """Rung 15's tile, block-tile choice per problem (``at``), grid and shared ring, inherited; its
    own pad launch, reduction order, refusals and traffic."""
    STAGES: ClassVar[int] = 3
    rung: ClassVar[int] = 16
    name: ClassVar[str] = "tc_padded"
    what: ClassVar[str] = (
        "Any channel count on rung 15's loop: a first launch pads x and w to c rounded up to 8 "
        "(zeros after c; none where c % 8 == 0). The k-tiles take consecutive (tap, 16-byte chunk) "
        "pairs, so at the 7x7 stem (c = 3) a 32-deep k-tile holds 4 taps, not 3 channels and 29 zeros.")

    def chunks(self, p) -> int:
        """Chunks of the reduction, R * S * C8 / 8, and the k-tiles that cover them: n_k."""
        return p.r * p.s * c8(p.c) // 8

    def n_k(self, p) -> int:
        return C._ceil(self.chunks(p), self.BK // 8)

    def padded(self, p) -> bool:
        """Whether x and w need the pad launch: c not a multiple of 8 (else they are read as they are)."""
        return p.c % 8 != 0

    def pad_grid(self, p) -> int:
        return min(C._ceil(p.n * p.h * p.w + p.k * p.r * p.s, PAD_BLOCK), PAD_MAX_BLOCKS)

    def workspace(self, p):
        if not self.padded(p):
            return {}
        return {"x8": ((p.n, p.h, p.w, c8(p.c)), "float16"), "w8": ((p.k, p.r, p.s, c8(p.c)), "float16")}

    def supports(self, problem):
        p = problem
        if p.dtype != "float16":
            raise UnsupportedProblem(f"{self.label} takes float16 inputs (float32 accumulate) on mma.m16n8k16; "
                                     f"got {p.dtype}")
        if not p.nhwc:
            raise UnsupportedProblem(f"{self.label} reads 8 channels of one pixel as one 16-byte chunk of the "
                                     "padded x: NHWC only (rung 8 takes NCHW)")
        if p.r > 31 or p.s > 31:
            raise UnsupportedProblem(f"{self.label}: the per-row validity masks hold 31 filter rows and columns; "
                                     f"got {p.r}x{p.s}")
        v = self.at(p)
        cpr = v.BK // 8
        if v.BK % 16 or v.BK > 64 or (v.BM * cpr) % v.threads() or (v.BN * cpr) % v.threads() \
                or v.threads() % cpr or v.NT8 % 2 or v.NT8 & (v.NT8 - 1):
            raise UnsupportedProblem(f"{self.label}: tile {v.BM}x{v.BN}x{v.BK} does not split into whole rows of "
                                     f"16-byte chunks over {v.threads()} threads (or NT8 not an even power of two: "
                                     "ldmatrix pairs and the epilogue's XOR swizzle)")
        m, n, _ = p.gemm_mnk
        cc = c8(p.c) // 8
        for what, size in (("x8", (p.n + 1) * p.h * p.w * 8 * cc), ("w8", n * p.r * p.s * 8 * cc), ("y", m * n),
                           ("the pad's rows", p.n * p.h * p.w + n * p.r * p.s + PAD_BLOCK * PAD_MAX_BLOCKS)):
            if size + 64 > 2**31 - 1:
                raise UnsupportedProblem(f"{self.label}: {what} has {size} elements; this rung's offsets are 32-bit")
        C._check(self, p, self.pad_grid(p), PAD_BLOCK)
        C._check(self, p, v.grid(p), v.threads(), v.shared_bytes())

    def plan(self, problem, bufs):
        p = problem
        v = self.at(p)
        m, n, _ = p.gemm_mnk
        cp8 = c8(p.c)
        nx, nw = p.n * p.h * p.w, n * p.r * p.s
        xs, ws = ("x8", "w8") if self.padded(p) else ("x", "w")  # c % 8 == 0: no copy to make
        x8 = C._view2d(bufs[xs], nx, cp8)
        kern = _tc_padded_kernel(v.WARPS_M, v.WARPS_N, v.MT, v.NT8, v.BK, v.STAGES)
        main = Launch(kern, v.grid(p), v.threads(),
                      (x8, C._view2d(bufs[ws], n, p.r * p.s * cp8), bufs["y"].reshape(-1),
                       C._view2d(bufs["y"], m, n), m, n, cp8, p.h, p.w, p.p, p.q, p.r, p.s, p.stride, p.pad,
                       n % 8 == 0))
        if not self.padded(p):
            return [main]
        return [Launch(_pad_kernel(), self.pad_grid(p), PAD_BLOCK,
                       (bufs["x"].reshape(-1), bufs["w"].reshape(-1), x8, C._view2d(bufs["w8"], nw, cp8), nx, nw,
                        p.c, cp8 // 8)), main]

    def traffic(self, p):
        v = self.at(p)
        m, n, _ = p.gemm_mnk
        cp8 = c8(p.c)
        x, w, y = p.n * p.h * p.w * p.c * 2, n * p.r * p.s * p.c * 2, m * n * 2
        x8, w8 = (x * cp8 // p.c, w * cp8 // p.c) if self.padded(p) else (0, 0)  # no pad launch at c % 8 == 0
        kp = self.n_k(p) * v.BK  # the reduction as the k-tiles cover it: R*S*C8 rounded up to BK
        tiles = (m * kp * C._ceil(n, v.BN) + kp * n * C._ceil(m, v.BM)) * 2  # cp.async bypasses L1: each tile load
        l2 = (x + w if x8 else 0) + (x8 + w8) + tiles + y  # pad: read x, w, write x8, w8; main: tile loads, y
        dram = x + w + 2 * (x8 + w8) + y  # x8 written by the pad and read back once (L2 may keep part of it)
        pad = (f"pad launch: x and w to {cp8} channels ({x8 / 1e6:.1f} MB x8 written, then read by the main loop); "
               if x8 else "c % 8 == 0: x and w read as they are (no pad launch); ")
        return C._traffic(p, l2, float(tiles) * 2, "l2/smem",
                          f"{pad}{v.BM}x{v.BN}x{v.BK} block tile, {v.STAGES} stages, {self.n_k(p)} k-tiles of "
                          f"{v.BK // 8} chunks over {self.chunks(p)} (tap, chunk) pairs; every tile byte stored once "
                          "in shared memory and read once by ldmatrix", dram=dram, peak="tensor.fp16")
