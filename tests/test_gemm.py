"""Every GEMM rung against float64 NumPy at awkward shapes, fresh random inputs, NaN-poisoned
outputs; bad inputs; the tensor-core fragment layout; static compile checks."""
import re

import numpy as np
import pytest

from perfkit import anatomy, autotune
from perfkit.kernels import _ptx, gemm
from numba import cuda  # after perfkit (which picks the backend); a global, so the simulator swaps it
from perfkit.kernels.base import ProblemError, UnsupportedProblem, registry_check

AWKWARD = {  # every category the issue names
    "1x1x1": (1, 1, 1), "primes": (7, 13, 5), "primes2": (37, 41, 29), "odd": (65, 33, 17),
    "tall_skinny": (97, 3, 8), "k1": (5, 6, 1), "vec_aligned": (36, 44, 28),
}
# just above one block tile in every dimension, per rung (the tile sizes differ)
ABOVE_TILE = {"naive": (33, 34, 35), "coalesced": (33, 34, 35), "smem_tiling": (33, 34, 35),
              "blocktile_1d": (65, 66, 9), "blocktile_2d": (129, 131, 9), "vectorized": (129, 132, 12),
              "no_bank_conflicts": (129, 132, 12), "double_buffer": (129, 132, 12),
              "index32": (129, 132, 20), "warptile": (129, 132, 20), "autotuned": (129, 132, 20),
              "tensor_core": (65, 65, 17)}
RUNGS = list(range(len(gemm.LADDER)))
BY_NAME = {v.name: v for v in gemm.LADDER}
# The simulator runs the mma/ldmatrix twins slowly (two barriers per instruction, every lane a
# Python thread): the sub-ladder after rung 12 is checked at awkward shapes through one-warp
# instances of the same kernels (same code, smaller compile-time tiles: TC_SMALL below), and at
# its default tiles once, with every warp of a block writing a partial tile (TC_MULTIWARP).


def _dtype(v):
    return v.example(gemm.Problem(1, 1, 1)).dtype


def _check(v, shape, seed):
    m, n, k = shape
    p = gemm.Problem(m, n, k, _dtype(v))
    x = p.make_inputs(seed)
    out = v.run(p, x)
    assert out.shape == (m, n) and out.dtype == np.float32
    ref = x["a"].astype(np.float64) @ x["b"].astype(np.float64)  # independent of the op's code
    res = p.check(out, ref)
    assert res.ok, f"{v.label} {shape} seed={seed}: {res.message}"


_TC0 = BY_NAME["tensor_core"].rung
_CASES = [(r, s) for r in RUNGS for s in AWKWARD if gemm.LADDER[r].rung <= _TC0]
# (a one-warp tc_warptile is tc_cp_async's kernel at the same constants, so it is left out)
TC_SMALL = [gemm.TCVector(WARPS_M=1, WARPS_N=1, MT=1, NT8=2)] + [
    cls(WARPS_M=1, WARPS_N=1, MT=1, NT8=8) for cls in (gemm.TCLdmatrix, gemm.TCPipeline, gemm.TCEpilogue)]
TC_SHAPES = {"1x1x1": (1, 1, 1), "primes": (7, 13, 5), "k1": (5, 6, 1), "above_tile": (17, 65, 9),
             "aligned": (16, 64, 8)}  # aligned: 16-byte loads / cp.async and the 16-byte epilogue
TC_MULTIWARP = (63, 61, 8)


@pytest.mark.parametrize("rung, shape", _CASES, ids=[f"{gemm.LADDER[r].name}-{s}" for r, s in _CASES])
def test_rung_at_awkward_shapes(rung, shape, fresh_seed):
    _check(gemm.LADDER[rung], AWKWARD[shape], fresh_seed)


@pytest.mark.parametrize("shape", TC_SHAPES.values(), ids=TC_SHAPES.keys())
@pytest.mark.parametrize("v", TC_SMALL, ids=lambda v: v.name)
def test_tensor_core_kernels_at_awkward_shapes_one_warp(v, shape, fresh_seed):
    _check(v, shape, fresh_seed)


@pytest.mark.parametrize("v", [TC_SMALL[0], TC_SMALL[1], TC_SMALL[3]], ids=lambda v: v.name)
def test_tensor_core_unchecked_path_hands_over_to_the_checked_one(v, fresh_seed):
    """k and n multiples of 8: blocks inside m and n take the unchecked loader (hoisted 32-bit
    offsets) for their two full k-tiles and the checked one for the last (k = 72 = 2 * 32 + 8);
    the blocks at the m edge take the checked loader throughout."""
    _check(v, (17, 64, 72), fresh_seed)


def test_cp_async_ring_wraps_in_the_simulator(fresh_seed):
    """Four k-tiles through a 3-stage ring: each stage is refilled while the others are read."""
    _check(gemm.TCPipeline(WARPS_M=1, WARPS_N=1, MT=1, NT8=8), (16, 64, 104), fresh_seed)


@pytest.mark.parametrize("name", ["tc_vector", "tc_ldmatrix", "tc_cp_async"])
def test_tensor_core_rungs_with_every_warp_at_an_edge(name, fresh_seed):
    """The default tiles (2x2 warps): every warp's tile is partial at (63, 61, 8).  tc_warptile
    and tc_epilogue (64x64 warp tiles) take minutes per launch here; their code is the
    tc_cp_async kernel with larger constants, checked at one warp above."""
    _check(BY_NAME[name], TC_MULTIWARP, fresh_seed)


_ABOVE = [r for r in RUNGS[1:] if gemm.LADDER[r].rung <= _TC0]  # the sub-ladder: one-warp tests


@pytest.mark.parametrize("rung", _ABOVE, ids=[gemm.LADDER[r].name for r in _ABOVE])
def test_rung_just_above_one_block_tile(rung, fresh_seed):
    v = gemm.LADDER[rung]
    _check(v, ABOVE_TILE[v.name], fresh_seed)


def test_oracle_in_float16_accumulates_in_float32(fresh_seed):
    _check(gemm.LADDER[0], (9, 10, 300), fresh_seed)
    p = gemm.Problem(9, 10, 300, "float16")
    out = gemm.LADDER[0].run(p, p.make_inputs(fresh_seed))
    assert out.dtype == np.float32


def test_registry_and_texts():
    registry_check(gemm.LADDER)
    assert len(gemm.LADDER) >= 13 and gemm.LADDER[9].name == "index32"
    assert all(v.what for v in gemm.LADDER)
    # SIMT (float32) rungs 1-11 first, then the tensor cores 12-18; rungs after those (issue 45)
    # were appended so that existing labels keep their meaning
    kinds = [_dtype(v) for v in gemm.LADDER[1:] if v.rung <= 18]
    assert kinds == sorted(kinds, key=lambda d: d == "float16") and kinds[-1] == "float16"


@pytest.mark.parametrize("v", gemm.LADDER, ids=lambda v: v.name)
def test_traffic_models_are_sane(v):
    p = v.example(gemm.Problem(512, 384, 256))
    t = v.traffic(p)
    assert t.flops == p.flops and np.isfinite(t.dram_bytes) and t.dram_bytes >= p.bytes
    if t.l2_bytes is not None:
        assert t.l2_bytes >= p.bytes * 0.99


@pytest.mark.parametrize("kw, msg", [
    (dict(m=0, n=3, k=3), "m must be >= 1"),
    (dict(m=3, n=3, k=-1), "k must be >= 1"),
    (dict(m=3.0, n=3, k=3), "m must be an int"),
    (dict(m=3, n=3, k=3, dtype="float64"), "dtype 'float64' is not supported"),
    (dict(m=3, n=3, k=3, dtype="int8"), "allowed: float32, float16"),
])
def test_bad_problems(kw, msg):
    with pytest.raises(ProblemError, match=msg):
        gemm.Problem(**kw)


def test_bad_inputs():
    p = gemm.Problem(4, 5, 6)
    good = p.make_inputs(0)
    v = gemm.LADDER[3]
    cases = [
        ({**good, "a": good["a"].astype(np.float64)}, "input 'a' has dtype float64"),
        ({**good, "b": np.zeros((7, 5), np.float32)}, r"input 'b' has shape \(7, 5\), expected \(6, 5\)"),
        ({**good, "a": np.asfortranarray(good["a"])}, "input 'a' is not C-contiguous"),
        ({**good, "a": np.zeros((4, 0), np.float32)}, r"shape \(4, 0\)"),
        ({"a": good["a"], "B": good["b"]}, r"missing \['b'\]"),
    ]
    for inputs, msg in cases:
        with pytest.raises(ProblemError, match=msg):
            v.run(p, inputs)


def test_dtype_rung_mismatch_is_explained():
    p16, p32 = gemm.Problem(4, 4, 4, "float16"), gemm.Problem(4, 4, 4)
    with pytest.raises(UnsupportedProblem, match="float32 .SIMT. rung"):
        gemm.LADDER[5].run(p16, p16.make_inputs(0))
    with pytest.raises(UnsupportedProblem, match="takes float16"):
        BY_NAME["tensor_core"].run(p32, p32.make_inputs(0))


def test_warptile_constraints_are_checks():
    assert gemm.WarpTile().constraints() == [] and gemm.Autotuned().constraints() == []
    bad = gemm.WarpTile(LR=3)
    assert any("warp" in b for b in bad.constraints())
    with pytest.raises(UnsupportedProblem, match="LR=3 lanes along rows must divide"):
        bad.supports(gemm.Problem(8, 8, 8))
    with pytest.raises(UnsupportedProblem, match="must divide the block tile"):
        gemm.WarpTile(BM=64, TM=16).supports(gemm.Problem(8, 8, 8))
    assert all(not v.constraints() for v in gemm.search_space())


# --- the tensor-core fragment layout ---------------------------------------------------------
# An independent transcription of the PTX ISA's tables for mma.m16n8k16 (.f16 A/B, .f32 C/D).
def ptx_a(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def ptx_b(lane, i):
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def ptx_c(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def _py(f):
    return getattr(f, "py_func", f)


def test_fragment_maps_match_the_ptx_isa_and_cover_each_tile_once():
    for fn, ref, n_reg, shape in ((_ptx.frag_a, ptx_a, 8, (16, 16)), (_ptx.frag_b, ptx_b, 4, (16, 8)),
                                  (_ptx.frag_c, ptx_c, 4, (16, 8))):
        seen = set()
        for lane in range(32):
            for i in range(n_reg):
                rc = tuple(int(x) for x in _py(fn)(lane, i))
                assert rc == ref(lane, i), (fn, lane, i)
                seen.add(rc)
        assert len(seen) == shape[0] * shape[1]


def test_tensor_core_rung_compiles_to_hmma():
    # the static store's problem: the sm_90 build is stored (the PTX is built again here); the
    # sm_80 assembly of the same mma.sync is test_tensor_core_sub_ladder_assembles's fresh build
    p = gemm.Problem(4096, 4096, 4096, "float16")
    r = anatomy.inspect(BY_NAME["tensor_core"], p, cc=(9, 0))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in r.ptx
    assert "HMMA.16816.F32" in r.sass and r.mix["tensor mma"] >= 4


def test_vectorized_rungs_issue_128_bit_loads():
    r = anatomy.inspect(gemm.LADDER[6], gemm.EXAMPLE_PROBLEM, cc=(9, 0))  # stored: no compile
    assert r.mix["global load 128"] >= 2


def test_autotune_search_prunes_and_ranks():
    # the first two configurations of the space at the example problem: notebook 02 autotunes
    # them, so their builds come from the static store (a fresh compile each is ~10 s here)
    p = gemm.EXAMPLE_PROBLEM
    cands = gemm.search_space()[:2] + [gemm.WarpTile(LR=3), gemm.WarpTile(BM=64, BN=64, BK=16, TM=4, TN=4, LR=8)]
    out = autotune.search_gemm(p, cands, cc=(9, 0), keep=2)
    assert len(out) == 4
    assert any(c.rejected and "LR=3" in c.rejected for c in out)
    assert any(c.rejected and "pruned by the model" in c.rejected for c in out)
    ok = [c for c in out if c.rejected is None]
    assert len(ok) == 2 and all(c.registers and c.spills == 0 and c.estimate_s > 0 for c in ok)
    # ranked by the compiled model's estimate, 10 us apart or more (closer is a tie the shared
    # chunks break): these two tie, and the one with fewer chunks leads
    assert ok == sorted(ok, key=lambda c: (round(c.model_s * 1e5), autotune.warp_chunks(c.variant)))
    est = {c.variant: autotune.gemm_static_estimate(c.variant, p)["seconds"] for c in out if c.estimate_s}
    assert min(est, key=est.get) in [c.variant for c in ok]  # the model's favourite survives the prune
    timed = autotune.search_gemm(p, cands[:2], cc=(9, 0), compile=False,
                        time_fn=lambda v: 1.0 if v.LR == 4 else 0.5)
    assert timed[0].variant.LR == 8 and timed[0].seconds == 0.5


def test_the_model_prefers_the_bigger_register_tile_at_4096():
    p = gemm.EXAMPLE_PROBLEM
    big = autotune.gemm_static_estimate(gemm.WarpTile(), p)
    small = autotune.gemm_static_estimate(gemm.WarpTile(BM=64, BN=64, BK=16, TM=4, TN=4, LR=8), p)
    assert big["ffma_share"] > small["ffma_share"] and big["seconds"] < small["seconds"]


def test_tolerance_admits_float32_rounding_at_large_k_but_not_a_wrong_element():
    # a thread's sequential float32 sum over k (what the SIMT rungs do), rows of C as a batch
    p = gemm.Problem(4000, 1, 4096)
    g = np.random.default_rng(7)
    a = g.uniform(-1, 1, (p.m, p.k)).astype(np.float32)
    b = g.uniform(-1, 1, (p.k, 1)).astype(np.float32)
    acc = np.zeros(p.m, np.float32)
    for i in range(p.k):
        acc = acc + a[:, i] * b[i, 0]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = acc.reshape(p.m, 1)
    assert p.check(out, ref).ok
    out[123, 0] += 0.05  # one product term of size 0.05 too many
    assert not p.check(out, ref).ok


_LOAD4_FAULT_CHILD = r"""
import sys
import numpy as np
import perfkit
from numba import cuda
from perfkit.kernels._vector import load4

@cuda.jit
def probe(a, out, j):
    x0, x1, x2, x3 = load4(a, 1, j)
    out[0] = x0 + x1 + x2 + x3

a = cuda.to_device(np.arange(24, dtype=np.float32).reshape(3, 8))
out = cuda.device_array(1, np.float32)
probe[1, 1](a, out, 4)
print("ALIGNED", float(out.copy_to_host()[0]), flush=True)
try:
    probe[1, 1](a, out, 2)
    cuda.synchronize()
except Exception as exc:
    print("FAULT", exc, flush=True)
    sys.exit(0)
print("NO FAULT", flush=True)
"""


def test_load4_misaligned_faults_on_a_gpu_in_a_child():
    """On a GPU, a misaligned 128-bit load faults the device: that kills the process's CUDA
    context, so it runs in a child process (PERFKIT_BACKEND=gpu), never in the test process."""
    import os
    import subprocess
    import sys

    from perfkit import backend

    if backend.is_simulator():
        pytest.skip("a real misaligned-address fault needs a GPU (the simulator case is the next test)")
    r = subprocess.run([sys.executable, "-c", _LOAD4_FAULT_CHILD], capture_output=True, text=True,
                       env={**os.environ, "PERFKIT_BACKEND": "gpu"}, timeout=300)
    out = r.stdout + r.stderr
    assert "ALIGNED 54.0" in r.stdout, out[-3000:]
    assert "NO FAULT" not in r.stdout and "misaligned" in out.lower(), out[-3000:]


def test_simulated_load4_faults_where_a_gpu_would():
    """A 128-bit load must be 16-byte aligned; the simulator's load4 refuses what a GPU faults on."""
    from perfkit import backend

    if not backend.is_simulator():
        pytest.skip("on a GPU the fault would take this process's CUDA context: see the child-process test above")
    from numba import cuda

    from perfkit.kernels._vector import load4

    @cuda.jit
    def probe(a, out, j):
        x0, x1, x2, x3 = load4(a, 1, j)
        out[0] = x0 + x1 + x2 + x3

    a = np.arange(24, dtype=np.float32).reshape(3, 8)
    out = np.zeros(1, np.float32)
    probe[1, 1](a, out, 4)
    assert out[0] == 12 + 13 + 14 + 15
    with pytest.raises(RuntimeError, match="misaligned"):
        probe[1, 1](a, out, 2)
    with pytest.raises(RuntimeError, match="misaligned"):  # row length 6: row 1 starts at byte 24
        probe[1, 1](np.zeros((3, 6), np.float32), out, 0)


# --- launches no GPU can run are refused by supports(), before any compile or allocation -------
NON_ORACLE = gemm.LADDER[1:]


@pytest.mark.parametrize("v", NON_ORACLE, ids=lambda v: v.name)
def test_supports_refuses_more_than_65535_blocks_on_grid_y(v):
    big = 20_000_000  # the m (naive: n) tiles of every rung land on grid.y, past 65535 blocks (256-wide: too)
    d = _dtype(v)
    tall, wide = gemm.Problem(big, 8, 8, d), gemm.Problem(8, big, 8, d)  # 8: TMA's rows are 16-byte multiples
    if v.name == "naive":  # threadIdx.x and blockIdx.x walk rows: m goes on grid.x
        tall, wide = wide, tall
    (launch,) = v.plan(tall, v.host_buffers(tall))
    if v.name == "persistent":  # one block an SM walking the tiles, whatever the shape: nothing to refuse
        assert len(launch.grid) == 1 and launch.grid[0] <= 132, launch.grid
        v.supports(tall)
        v.supports(wide)
        return
    assert launch.grid[1] > 65535
    with pytest.raises(UnsupportedProblem, match=rf"grid\.y = {launch.grid[1]} blocks for .* > 65535"):
        v.supports(tall)
    (launch,) = v.plan(wide, v.host_buffers(wide))
    assert launch.grid[0] > 65535
    v.supports(wide)  # grid.x takes up to 2**31 - 1 blocks


def test_supports_refuses_the_reported_grid_y_overflows():
    p = gemm.Problem(2_100_000, 1, 1)
    for v in gemm.LADDER[2:4]:  # 32-row tiles: 65625 blocks along grid.y
        with pytest.raises(UnsupportedProblem, match="grid.y = 65625 blocks .* > 65535"):
            v.supports(p)
    gemm.LADDER[1].supports(p)  # naive puts m on grid.x
    with pytest.raises(UnsupportedProblem, match="grid.y = 78125 blocks .* > 65535"):
        BY_NAME["tensor_core"].supports(gemm.Problem(5_000_000, 1, 1, "float16"))


def test_the_sweeps_stay_supported():
    for v in NON_ORACLE:
        for p in gemm.GPU_SWEEP + gemm.SIM_SWEEP:
            if p.dtype == _dtype(v):
                v.supports(p)


@pytest.mark.parametrize("cls, field, value", [
    (gemm.Naive, "block", 0), (gemm.Coalesced, "block", -32), (gemm.SmemTiling, "tile", 0),
    (gemm.Blocktile1D, "TM", 0), (gemm.Blocktile2D, "TN", -8), (gemm.Vectorized, "BK", 0),
    (gemm.NoBankConflicts, "BN", 0), (gemm.DoubleBuffer, "BM", 0), (gemm.WarpTile, "LR", 0),
    (gemm.Autotuned, "BK", 0), (gemm.Index32, "MIN_BLOCKS", 0), (gemm.TensorCore, "NTILES", 0), (gemm.SmemTiling, "tile", 32.0),
    (gemm.Naive, "block", True),
])
def test_tunables_must_be_positive_ints(cls, field, value):
    with pytest.raises(UnsupportedProblem, match=re.escape(f"{field} must be an int >= 1, got {value!r}")):
        cls(**{field: value})


@pytest.mark.parametrize("v, threads", [
    (gemm.Naive(block=33), 1089), (gemm.Coalesced(block=64), 4096), (gemm.SmemTiling(tile=33), 1089),
    (gemm.Blocktile1D(BM=128, BN=128, TM=8), 2048), (gemm.Blocktile2D(TM=2, TN=4), 2048),
    (gemm.Vectorized(TM=2, TN=4), 2048), (gemm.DoubleBuffer(TM=4, TN=2), 2048),
    (gemm.WarpTile(BM=256, BN=256, TM=4, TN=4), 4096), (gemm.Index32(TM=2, TN=4), 2048),
    (gemm.TensorCore(WARPS_M=8, WARPS_N=8), 2048),
], ids=lambda x: getattr(x, "name", str(x)))
def test_supports_refuses_more_than_1024_threads_per_block(v, threads):
    with pytest.raises(UnsupportedProblem, match=rf"{threads} threads per block|NT={threads} > 1024"):
        v.supports(v.example(gemm.Problem(8, 8, 8)))


@pytest.mark.parametrize("v, smem", [
    (gemm.Blocktile1D(BK=128), 65536), (gemm.Blocktile2D(BK=64), 65536), (gemm.Vectorized(BK=52), 53248),
    (gemm.NoBankConflicts(BK=48), 56064), (gemm.DoubleBuffer(BK=32), 74752), (gemm.Index32(BK=32), 74944),  # B rows padded
        (gemm.WarpTile(BK=32), 66752),  # +8 words a buffer: the A^T skew
    (gemm.TensorCore(WARPS_M=1, WARPS_N=1, NTILES=192), 49664),
], ids=lambda x: getattr(x, "name", str(x)))
def test_supports_refuses_more_than_48_kib_of_static_shared_memory(v, smem):
    assert v.shared_bytes() == smem
    with pytest.raises(UnsupportedProblem, match=f"{smem} bytes of static shared memory per block > 49152"):
        v.supports(v.example(gemm.Problem(8, 8, 8)))


def test_shared_memory_limit_is_inclusive_and_counts_the_padding():
    p = gemm.Problem(8, 8, 8)
    assert gemm.Vectorized(BK=48).shared_bytes() == 49152
    gemm.Vectorized(BK=48).supports(p)  # exactly 48 KiB: fine
    with pytest.raises(UnsupportedProblem, match="56064 bytes"):  # the same tiles + the padding of A^T and B
        gemm.NoBankConflicts(BK=48).supports(p)


@pytest.mark.parametrize("v", [v for v in gemm.LADDER[3:] if v.name != "autotuned"], ids=lambda v: v.name)
def test_shared_bytes_is_what_the_compiler_allocates(v):
    # the sm_90 build the store holds (less the system's 1 KiB reservation that cubin carries)
    # (sm_80 has no reservation: checked on the one fresh sm_80 build of the tensor-core test below)
    r = anatomy.inspect(v, v.example(gemm.EXAMPLE_PROBLEM), cc=(9, 0))
    assert r.static_shared_bytes - r.reserved_shared_bytes == v.shared_bytes()


@pytest.mark.parametrize("v, shape", [
    (BY_NAME["autotuned"], (37, 44, 52)),  # 64-bit transposing stores into skewed A^T rows
    (gemm.WarpTile(BM=64, BN=128, BK=16, TM=8, TN=4), (67, 36, 40)),  # one A vector a thread: scalar stores, skewed
    (BY_NAME["warptile"], (37, 44, 28)),
], ids=["autotuned", "warptile-bk16-scalar-stores", "warptile"])
def test_simt_rungs_through_the_unchecked_loop(v, shape, fresh_seed):
    """k and n multiples of 4 and several full k-tiles: the unchecked hot loop (hoisted, clamped
    offsets) runs and hands over to the checked tail, which the awkward shapes alone never reach
    at BK = 16."""
    _check(v, shape, fresh_seed)


# --- the static goals of issue 14 and the tensor-core sub-ladder's instructions -----------------
def test_last_simt_rung_hot_loop_is_ffma_and_conflict_free():
    """Issue 14's static goals: the last SIMT rung's hot loop is >= 85% FFMA (sm_90a SASS) and
    its shared-memory accesses are conflict-free by the bank-conflict counter."""
    from perfkit import backend, banks

    v = BY_NAME["autotuned"]
    r = anatomy.inspect(v, gemm.EXAMPLE_PROBLEM, cc=(9, 0))
    mix = r.hot_loop.mix
    assert mix["fp32 fma"] / sum(mix.values()) >= 0.85, str(r.hot_loop)
    assert r.spill_store_bytes == 0 and r.registers <= 128
    # every shared store of the hot loop is 64- or 128-bit (STS.64 transposing A, STS.128 for B),
    # so counting merged accesses (banks' vectorize=True, as perfkit.model then does) is the SASS's
    assert mix.get("shared store 32", 0) == 0 and mix["shared store 64"] >= 2, str(r.hot_loop)
    assert mix.get("shared load 32", 0) == 0 and mix["shared load 128"] > 0, str(r.hot_loop)
    if backend.is_simulator():  # loads and stores conflict-free (stores were 2-way before the skew)
        rep = banks.count(v, gemm.Problem(128, 128, 32), max_blocks=1)
        assert rep.load_wavefronts > 0 and rep.store_wavefronts > 0, rep
        assert rep.load_degree == 1.0 and rep.store_degree == 1.0 and rep.conflicts == 0, rep
        assert {s["width"] for s in rep.sites if s["kind"] == "store"} == {8, 16}, rep.sites
        rep = banks.count(BY_NAME["warptile"], gemm.Problem(64, 128, 32), max_blocks=1)
        assert rep.wavefronts > 0 and rep.conflicts == 0, rep


@pytest.mark.parametrize("name", ["no_bank_conflicts", "double_buffer", "index32"])
def test_padded_swizzle_rungs_are_conflict_free_by_the_counter(name):
    """Rung 7's idea (and rungs 8, 9, which keep its layout): B swizzled with 4 words after each
    run, A^T rows padded: loads and stores without conflicts (scalar and merged counting alike)."""
    from perfkit import backend, banks

    if not backend.is_simulator():
        pytest.skip("the bank-conflict counter runs in the simulator; on a GPU ask Nsight Compute")
    for vec in (True, False):
        rep = banks.count(BY_NAME[name], gemm.Problem(32, 128, 16), max_blocks=1, vectorize=vec)
        assert rep.load_wavefronts > 0 and rep.store_wavefronts > 0, rep
        assert rep.load_degree == 1.0 and rep.store_degree == 1.0 and rep.conflicts == 0, rep


@pytest.mark.parametrize("shape", [(37, 20, 29), (70, 36, 48)], ids=["two-tiles-scalar", "three-tiles-vector"])
def test_double_buffer_with_two_columns_a_thread(shape, fresh_seed):
    """Rung 8 with TN = 2: a 4-vector of B spans two runs of the swizzle, so the stores take
    the per-element offsets (TN % 4 == 0 takes base + e * SB); an even and an odd number of
    k-tiles (the k-loop is unrolled by 2), scalar and 128-bit global loads."""
    _check(gemm.DoubleBuffer(BM=64, BN=16, BK=16, TM=8, TN=2), shape, fresh_seed)


def test_double_buffering_is_cheap_and_the_model_predicts_the_climb():
    """Issue 14, compile only (sm_90a, ~15 s uncached): rung 8 keeps rung 7's k-step (64 FFMA;
    here a 32-bit counter and shared offsets advanced by a row: <= 84 instructions, it was 90)
    and buffers cheaply: the k-loop unrolled by 2 (two barriers and two 8-store stashes a pass,
    into buffers named at compile time, offsets hoisted) spends <= 200 integer instructions a
    k-tile outside the k-steps (it was 397 with a computed buffer index).  The model predicts
    rung 7 < 8 < 9 at 1024^3 and 4096^3 (it had rung 8 slower than rung 7 at 4096^3)."""
    from perfkit import model

    r = anatomy.inspect(BY_NAME["double_buffer"], gemm.EXAMPLE_PROBLEM, cc=(9, 0))
    hot = r.hot_loop
    assert hot.mix["fp32 fma"] == 64 and sum(hot.mix.values()) <= 84, str(hot)
    assert r.spill_store_bytes == 0 and r.registers <= 128
    outer = r.loops[hot.parent].own_mix
    assert outer["barrier"] == 2 and outer["shared store 32"] == 16, outer
    assert outer["integer/address"] / outer["barrier"] <= 200, outer
    for n in (1024, 4096):
        p = gemm.Problem(n, n, n)
        t = [model.estimate(BY_NAME[k], p, banks=False).seconds
             for k in ("no_bank_conflicts", "double_buffer", "index32")]
        assert t[0] > t[1] > t[2], (n, t)


@pytest.mark.parametrize("name, hmma, ldsm, ldgsts, targets", [("tc_ldmatrix", 16, 8, 0, ((9, 0),)),
                                                            ("tc_epilogue", 32, 8, 1, ((8, 0), (9, 0)))])
def test_tensor_core_sub_ladder_assembles(name, hmma, ldsm, ldgsts, targets):
    """The inline PTX (mma.sync, ldmatrix, cp.async) assembles for sm_90a and (rung 17, which
    holds every one of them: one fresh ~20 s build) sm_80, and the instructions land in the
    SASS: HMMA, LDSM, LDGSTS (counts of the kernel body, static)."""
    v = BY_NAME[name]
    p = gemm.Problem(4096, 4096, 4096, "float16")  # the static store's problem: its sm_90 build is stored
    for cc in targets:
        r = anatomy.inspect(v, p, cc=cc)
        if cc == (8, 0):  # Ampere reserves no shared memory for the system; sm_90 reserves 1 KiB
            assert r.reserved_shared_bytes == 0 and r.static_shared_bytes == v.shared_bytes()
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx
        assert len(re.findall(r"\bHMMA\.16816\.F32\b", r.sass)) >= hmma
        assert len(re.findall(r"\bLDSM\.16\.M88\.4\b", r.sass)) >= ldsm // 2
        assert len(re.findall(r"\bLDSM\.16\.MT88\.4\b", r.sass)) >= ldsm // 2
        assert len(re.findall(r"\bLDGSTS\b", r.sass)) >= ldgsts
        assert r.spill_store_bytes == 0 or name != "tc_epilogue"


def test_vectorized_epilogue_keeps_the_accumulators_in_registers():
    """Issue 14, compile only (sm_90a; the same build as the test above): rung 17's epilogue
    chooses what a lane sends and keeps on values (selp), not by a ternary on acc[...], which
    the compiler had made a load from a computed address: the 128 accumulators went through a
    512-byte stack (64 STL.128, 62 LDL in a rolled loop).  Now no stack and no local memory;
    full blocks write C with one STG.128 and two SHFL.BFLY per mma tile (32 tiles a lane),
    edge blocks with rung 16's scalar stores (4 per tile)."""
    p = gemm.Problem(4096, 4096, 4096, "float16")
    r = anatomy.inspect(BY_NAME["tc_epilogue"], p, cc=(9, 0))
    assert r.stack_bytes == 0 and r.spill_store_bytes == 0, (r.stack_bytes, r.spill_store_bytes)
    assert r.mix.get("local load/store", 0) == 0, r.mix
    assert r.mix["global store 128"] == 32 and r.mix["shuffle"] == 64, r.mix
    assert r.mix["global store 32"] == 128, r.mix
    assert len(re.findall(r"\bSTG\.E\.128\b", r.sass)) == 32


def test_simulated_cp_async_lands_only_at_its_wait():
    """The simulator's cp.async twin defers each copy until the wait that retires its group (as a
    GPU may), zero-fills past src_bytes, and refuses a misaligned source."""
    from numba import float32 as f32
    from numba.types import float16 as f16

    from perfkit.kernels._ptx import cp_async16, cp_async_commit, cp_async_wait

    @cuda.jit
    def probe(g, out, col, nbytes):
        s = cuda.shared.array((2, 8), f16)
        for e in range(8):
            s[0, e] = f16(-1)
            s[1, e] = f16(-1)
        cp_async16(s, 0, 0, g, 0, col, nbytes)
        cp_async_commit()
        cp_async16(s, 1, 0, g, 1, col, nbytes)
        cp_async_commit()
        out[0] = f32(s[0, 0])  # nothing has landed yet
        cp_async_wait(1)       # the first group, not the second
        out[1] = f32(s[0, 0])
        out[2] = f32(s[1, 0])
        cp_async_wait(0)
        for e in range(8):
            out[3 + e] = f32(s[1, e])

    from perfkit import backend
    if not backend.is_simulator():
        pytest.skip("checks the simulator's twin; on a GPU the instruction itself runs")
    g = np.arange(32, dtype=np.float16).reshape(2, 16)
    out = np.zeros(11, np.float32)
    probe[1, 1](g, out, 8, 12)
    assert out[0] == -1 and out[1] == 8 and out[2] == -1
    assert list(out[3:]) == [24, 25, 26, 27, 28, 29, 0, 0]  # 6 halves read, 2 zero-filled
    with pytest.raises(RuntimeError, match="misaligned"):
        probe[1, 1](g, out, 4, 16)


def test_both_searches_return_candidates_best_first():
    from perfkit.kernels.norm import softmax

    p = softmax.Problem(64, 1000)
    ranked = autotune.search_norm(softmax, p)
    assert ranked and all(isinstance(c, autotune.Candidate) and c.seconds is None for c in ranked)
    assert ranked[0].variant.shape(p) == softmax.Tuned().shape(p)  # the rule's shape first
    timed = autotune.search_norm(softmax, p, time_fn=lambda v: 1.0 / v.shape(p).G)
    assert [c.seconds for c in timed] == sorted(c.seconds for c in timed)


# --- issue 45: rung 18 (mma.sync to its ceiling) -------------------------------------------------
# one warp, the default 64-deep k-tiles and 3 stages; GROUP_M=2 so that a 3x3 grid has a short group
TC_DEEP_SMALL = gemm.TCDeep(WARPS_M=1, WARPS_N=1, MT=1, NT8=8, GROUP_M=2)


@pytest.mark.parametrize("shape", list(TC_SHAPES.values()) + [(16, 64, 200), (40, 65, 8)],
                         ids=list(TC_SHAPES) + ["ring_wraps", "grouped_3x2"])
def test_tc_deep_at_awkward_shapes_one_warp(shape, fresh_seed):
    """(16, 64, 200): four k-tiles through the 3-stage ring (the unchecked loader, then the checked
    tail), each fragment buffer reused across tiles; (40, 65, 8): a 2x3 grid of blocks in groups
    of 2 block rows (the last group one row), edge blocks in m and n."""
    _check(TC_DEEP_SMALL, shape, fresh_seed)


def test_grouped_rasterization_covers_every_tile_once():
    """The kernel's block -> tile map (Triton's grouped ordering), replayed: a permutation of the
    tiles, walking down GROUP_M rows first; and the model's panel count sees fewer DRAM reads."""
    from perfkit.model import panel_reads

    for gx, gy, G in ((5, 7, 3), (64, 64, 8), (3, 3, 2), (4, 1, 8)):
        pid = np.arange(gx * gy)
        first = (pid // (G * gx)) * G
        gm = np.minimum(gy - first, G)
        row, col = first + (pid % (G * gx)) % gm, (pid % (G * gx)) // gm
        assert len(set(zip(row.tolist(), col.tolist()))) == gx * gy and row.max() == gy - 1 and col.max() == gx - 1
    p = gemm.Problem(8192, 8192, 8192, "float16")
    flat = panel_reads(p, (64, 64), 2, 132)
    grouped = panel_reads(p, (64, 64), 2, 132, group_m=8)
    assert grouped["compulsory"] == flat["compulsory"] and grouped["reads"] < 0.7 * flat["reads"], (flat, grouped)


def test_tc_deep_compiles_with_double_buffered_fragments_and_no_spills():
    """sm_90a: 4 k-steps x 32 mma a k-tile in the hot loop (fully unrolled: the fragment
    buffers are registers), one barrier a k-tile, no spills and no stack; 96 KiB of dynamic
    shared memory that the anatomy counts with the launch's opt-in (2 blocks an SM on sm_90)."""
    v = BY_NAME["tc_deep"]
    p = gemm.Problem(4096, 4096, 4096, "float16")
    assert v.dynamic_shared_bytes() == 96 * 1024
    for cc in ((9, 0),):  # the store's build (an sm_80 build of this code: tc_epilogue's test above)
        r = anatomy.inspect(v, p, cc=cc)
        assert r.spill_store_bytes == 0 and r.stack_bytes == 0 and r.mix.get("local load/store", 0) == 0, r.mix
        assert r.dynamic_shared_bytes == 96 * 1024
        hot = r.hot_loop.mix
        assert hot["tensor mma"] == 128 and hot["barrier"] == 1, hot
        assert len(re.findall(r"\bLDSM\.16\.MT88\.4\b", r.sass)) >= 16
    assert r.occupancy.blocks_per_sm == 2, r.occupancy  # sm_90: registers bind, not shared memory


def test_dynamic_shared_memory_over_the_opt_in_limit_is_refused():
    v = gemm.TCDeep(STAGES=8)  # 8 x 32 KiB
    with pytest.raises(UnsupportedProblem, match=r"262144 bytes of shared memory per block > 232448"):
        v.supports(gemm.Problem(64, 64, 64, "float16"))
    BY_NAME["tc_deep"].supports(gemm.Problem(8192, 8192, 8192, "float16"))


# --- issue 45: rung 19 (SIMT past cuBLAS) ---------------------------------------------------------
# one warp of the same kernel: a 64x64 warp tile (8 x 4 lanes of 8x16 thread tiles)
SIMT_WIDE_SMALL = gemm.SimtWide(BM=64, BN=64, BK=8, TM=8, TN=16, LR=8)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (37, 70, 29), (36, 68, 28), (65, 132, 40)],
                         ids=["1x1x1", "primes", "unaligned", "aligned_hot_loop", "four_blocks"])
def test_simt_wide_at_awkward_shapes_one_warp(shape, fresh_seed):
    """Unaligned k (checked loads for every tile), aligned k = 28 (three full tiles through the
    unchecked hot loop, then the checked tail), edge blocks in m and n (checked stores) and
    a full block (128-bit stores)."""
    _check(SIMT_WIDE_SMALL, shape, fresh_seed)


def test_simt_wide_compiles_to_255_registers_without_spills_or_stack():
    """sm_90a: launch_bounds(256, 1) lets ptxas keep 128 accumulators, two operand sets and the
    staged loads in registers (no spills, no stack: the tail and the edge stores are written out);
    the hot loop (the unchecked one: the shorter of the two 1024-FFMA loops) is >= 90% FFMA."""
    r = anatomy.inspect(BY_NAME["simt_wide"], gemm.EXAMPLE_PROBLEM, cc=(9, 0))
    assert r.spill_store_bytes == 0 and r.stack_bytes == 0 and 128 < r.registers <= 255, r.registers
    assert r.occupancy.blocks_per_sm == 1
    hot = min((lp for lp in r.loops if lp.mix.get("fp32 fma", 0) == 1024), key=lambda lp: lp.instructions)
    assert hot.mix["fp32 fma"] / sum(hot.mix.values()) >= 0.9, hot.mix
    assert hot.mix["shared load 128"] == 48 and hot.mix.get("shared load 32", 0) == 0, hot.mix


def test_autotuner_searches_the_wide_space():
    wide = gemm.search_space_wide()
    assert BY_NAME["simt_wide"] in wide and all(not v.constraints() and v.MIN_BLOCKS == 1 for v in wide)
    out = autotune.search_gemm(gemm.EXAMPLE_PROBLEM, compile=False, wide=True)
    assert {type(c.variant).__name__ for c in out} == {"WarpTile", "SimtWide"}
    assert len(out) == len(gemm.search_space()) + len(wide)


def test_tc_deep_space_holds_the_rung_first_and_only_configurations_it_supports():
    space = autotune.tc_deep_space()
    assert space[0] == BY_NAME["tc_deep"] and len(set(space)) == len(space) > 20
    p = gemm.Problem(4096, 4096, 4096, "float16")
    for v in space:
        v.supports(p)  # none past the opt-in shared memory or the rung's own rules
        assert v.dynamic_shared_bytes() <= 227 * 1024 and v.threads() in (128, 256)
    # CUTLASS's Ampere default block: 128x256, 8 warps of 64x64, 32-deep k-tiles, 3 stages
    assert any((v.BM, v.BN, v.threads(), v.BK, v.STAGES) == (128, 256, 256, 32, 3) for v in space)


def test_tc_deep_search_refuses_what_the_problem_cannot_take_and_ranks_by_time():
    p = gemm.Problem(4096, 4096, 4096, "float16")
    space = autotune.tc_deep_space()[:4]
    bad = gemm.TCDeep(BK=48)  # not 32 or 64
    out = autotune.search_tc_deep(p, space + [bad], compile=False, keep=3,
                                  time_fn=lambda v: 1.0 / (v.BK * v.STAGES))
    assert [c.rejected is None for c in out] == [True, True, True, False, False]
    assert "BK 32 or 64" in out[-1].rejected and "best 3" in out[-2].rejected
    secs = [c.seconds for c in out[:3]]
    assert secs == sorted(secs) and out[0].variant.BK * out[0].variant.STAGES == max(v.BK * v.STAGES for v in space[:3])
    f32 = autotune.search_tc_deep(gemm.Problem(64, 64, 64), space[:1], compile=False)
    assert f32[0].rejected and "float16" in f32[0].rejected
