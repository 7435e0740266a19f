"""perfkit.anatomy's hot loop is the innermost loop doing the arithmetic work, also where that
work is not in an innermost loop (a tensor-core k-loop whose tile loads are nested loops)."""
import pytest

from perfkit import anatomy
from perfkit.kernels import gemm

BY_NAME = {v.name: v for v in gemm.LADDER}

_OUTER_MMA = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   IADD3 R9, R9, 0x10, RZ ;
        /*0030*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0040*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0050*/                   STS [R0], R2 ;
        /*0060*/               @P0 BRA 0x30 ;
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0080*/                   LDSM.16.M88.4 R8, [R3] ;
        /*0090*/                   HMMA.16816.F32 R12, R8, R6, R12 ;
        /*00a0*/                   HMMA.16816.F32 R16, R8, R7, R16 ;
        /*00b0*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*00c0*/                   STS [R0], R2 ;
        /*00d0*/               @P1 BRA 0xb0 ;
        /*00e0*/               @P2 BRA 0x20 ;
        /*00f0*/                   EXIT ;
        /*0100*/                   BRA 0x100;
"""


def test_the_loop_with_the_mma_wins_over_innermost_load_loops():
    loops = anatomy.find_loops(_OUTER_MMA)
    assert [(lp.start, lp.end) for lp in loops] == [(0x20, 0xe0), (0x30, 0x60), (0xb0, 0xd0)]
    outer = loops[0]
    assert not outer.innermost and outer.own_mix["tensor mma"] == 2
    assert all(lp.innermost and "tensor mma" not in lp.mix for lp in loops[1:])
    hot = anatomy.hot_loop_of(loops)
    assert hot is outer and hot.mix["tensor mma"] == 2


def test_an_innermost_loop_with_the_math_still_wins():
    # the innermost loop has the FFMA: it stays the hot loop though its parent's own body has more
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   FFMA R3, R2, R2, R3 ;
        /*0020*/                   FFMA R4, R2, R2, R4 ;
        /*0030*/                   FFMA R5, R2, R2, R5 ;
        /*0040*/                   FFMA R6, R5, R5, R6 ;
        /*0050*/               @P0 BRA 0x40 ;
        /*0060*/               @P1 BRA 0x10 ;
        /*0070*/                   EXIT ;
    """
    loops = anatomy.find_loops(sass)
    assert anatomy.hot_loop_of(loops) is loops[1] and loops[1].innermost


def test_outer_math_wins_over_innermost_loops_without_any():
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   IADD3 R9, R9, 0x10, RZ ;
        /*0020*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0030*/               @P0 BRA 0x20 ;
        /*0040*/                   FFMA R3, R2, R2, R3 ;
        /*0050*/               @P1 BRA 0x10 ;
        /*0060*/                   EXIT ;
    """
    loops = anatomy.find_loops(sass)
    assert [(lp.start, lp.end) for lp in loops] == [(0x10, 0x50), (0x20, 0x30)]
    assert anatomy.hot_loop_of(loops) is loops[0]
    assert anatomy.hot_loop_of([]) is None


@pytest.mark.parametrize("name", ["tc_ldmatrix", "tc_cp_async"])
def test_tensor_core_rungs_hot_loop_holds_their_mma(name):
    """Compile only (sm_90a, no simulator): the k-loop of rungs 14 and 15 issues the HMMAs while
    its tile-loading loops (innermost, no mma) are nested in it; the hot loop is the k-loop."""
    r = anatomy.inspect(BY_NAME[name], gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))  # stored
    hot = r.hot_loop
    assert hot is not None and hot.mix.get("tensor mma", 0) >= 16, str(hot)
    assert hot.own_mix["tensor mma"] == hot.mix["tensor mma"]
    # no loop nested inside it issues mma: it is the innermost loop doing the tensor work
    assert not [lp for lp in r.loops if hot.start <= lp.start and lp.end <= hot.end and lp is not hot
                and lp.mix.get("tensor mma", 0)]


@pytest.mark.parametrize("name, copies", [("tc_cp_async", 4), ("tc_epilogue", 8)])
def test_tensor_core_unchecked_tile_copies_are_cheap(name, copies):
    """Issue 14, compile only (sm_90a): the k-loop's unchecked loader issues one LDGSTS without
    zero-fill per 16-byte chunk of a thread (LA + LB a k-tile), its offsets hoisted out of the
    loop: the arm that issues them (from the branch before the first copy to the last copy)
    takes at most 10 instructions per copy (it was ~110 with per-chunk int64 index math)."""
    import re

    r = anatomy.inspect(BY_NAME[name], gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))  # stored
    body = r.hot_loop.body
    idx = [i for i, ins in enumerate(body) if "LDGSTS" in ins and "ZFILL" not in ins]
    assert len(idx) == copies, [body[i] for i in idx]
    start = max(i for i in range(idx[0]) if re.search(r"\bBRA\b", body[i]))
    assert idx[-1] - start <= 10 * copies, "\n".join(body[start:idx[-1] + 1])
