"""perfkit.banks: wavefronts of warp-wide shared accesses, against hand-counted answers."""
import pytest

import perfkit  # noqa: F401  (chooses the backend before numba.cuda)
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32

from perfkit import backend, banks
from perfkit.kernels.base import Launch, Problem, Variant
from fragments import assert_wgmma_accumulators


def test_stride_1_is_one_wavefront():
    assert banks.wavefronts([4 * i for i in range(32)], 4) == (1, 1)


def test_broadcast_is_one_wavefront():
    assert banks.wavefronts([0] * 32, 4) == (1, 1)


@pytest.mark.parametrize("stride,expected", [(2, 2), (4, 4), (8, 8), (32, 32), (33, 1), (3, 1)])
def test_word_stride_conflicts(stride, expected):
    # lane i reads word i*stride: gcd(stride, 32) lanes share each bank used
    wf, ideal = banks.wavefronts([4 * stride * i for i in range(32)], 4)
    assert (wf, ideal) == (expected, 1)


def test_128bit_phases():
    # 16 bytes per lane, consecutive: four phases of 8 lanes, each 128 bytes: 4 wavefronts, ideal 4
    assert banks.wavefronts([16 * i for i in range(32)], 16) == (4, 4)
    # every lane 32 bytes apart: each phase of 8 lanes spans 256 bytes -> 2 wavefronts per phase
    assert banks.wavefronts([32 * i for i in range(32)], 16) == (8, 4)


def test_128bit_half_warps_broadcast():
    # 128-bit accesses go by half-warps: a warp-uniform LDS.128 is one wavefront per half (2),
    # not one per quarter-warp (4); Nsight Compute counts ~2 for the broadcast of per-warp
    # partials in the warp-shuffle norm rungs on the H100
    assert banks.wavefronts([64] * 32, 16) == (2, 2)
    # two distinct 16-byte words per half-warp, in different banks: still one per half
    assert banks.wavefronts([0] * 8 + [16] * 8 + [32] * 8 + [48] * 8, 16) == (2, 2)
    # two distinct words per half in the same banks (128 bytes apart): two per half
    assert banks.wavefronts([0] * 8 + [128] * 8 + [0] * 16, 16) == (3, 2)


def test_64bit_phases_and_inactive_lanes():
    assert banks.wavefronts([8 * i for i in range(32)], 8) == (2, 2)
    # only the first half-warp active: one phase
    assert banks.wavefronts([8 * i for i in range(16)] + [None] * 16, 8) == (1, 1)


def test_bad_width():
    with pytest.raises(ValueError, match="width"):
        banks.wavefronts([0], 3)


@dataclass(frozen=True)
class _T32(Problem):
    n: int = 32
    op = "t32"

    def input_specs(self):
        return {"x": ((32, 32), "float32")}

    def output_specs(self):
        return {"y": ((32, 32), "float32")}

    def _make(self, g):
        return {"x": g.standard_normal((32, 32)).astype(np.float32)}

    def _reference(self, inputs):
        return inputs["x"].T.astype(np.float64)

    @property
    def flops(self):
        return 0.0


@cuda.jit
def _transpose_plain(x, y):
    tile = cuda.shared.array((32, 32), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    y[ty, tx] = tile[tx, ty]


@cuda.jit
def _transpose_padded(x, y):
    tile = cuda.shared.array((32, 33), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = x[ty, tx]
    cuda.syncthreads()
    y[ty, tx] = tile[tx, ty]


@dataclass(frozen=True)
class _Plain(Variant):
    rung = 1
    name = "transpose"

    def plan(self, problem, bufs):
        return [Launch(_transpose_plain, (1,), (32, 32), (bufs["x"], bufs["y"]))]


@dataclass(frozen=True)
class _Padded(_Plain):
    name = "transpose_padded"

    def plan(self, problem, bufs):
        return [Launch(_transpose_padded, (1,), (32, 32), (bufs["x"], bufs["y"]))]


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_count_transpose_unpadded_vs_padded():
    """A 32x32 transpose through shared memory: the column reads of the unpadded tile hit one
    bank 32 times (32 wavefronts per warp read); padding each row by one word removes them."""
    plain = banks.count(_Plain(), _T32(), cache=False)
    padded = banks.count(_Padded(), _T32(), cache=False)
    assert plain.load_accesses == 32 and plain.store_accesses == 32
    assert plain.load_wavefronts == 32 * 32 and plain.store_wavefronts == 32  # row writes are clean
    assert plain.conflicts == 32 * 31
    assert padded.wavefronts == padded.ideal == 64
    assert padded.degree == 1.0 and plain.load_degree == 32.0


@cuda.jit
def _transpose_global(x, y):
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    y[ty, tx] = x[tx, ty] + x[0, 0]  # a column of x (32 lines), a broadcast; a row of y


@dataclass(frozen=True)
class _Naive(_Plain):
    name = "transpose_global"

    def plan(self, problem, bufs):
        return [Launch(_transpose_global, (1,), (32, 32), (bufs["x"], bufs["y"]))]


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_global_coalescing_of_rows_columns_and_broadcasts():
    """The same simulation counts global requests: a warp reading a row of a float32 matrix
    touches 4 sectors of 1 line; a column, 32 sectors of 32 lines; one element for all, 1."""
    plain = banks.count(_Plain(), _T32(), cache=False).coalescing()
    assert plain["load_requests"] == plain["store_requests"] == 32
    assert plain["sectors"] == 64 * 4 and plain["lines"] == 64 and plain["efficiency"] == 1.0
    naive = banks.count(_Naive(), _T32(), cache=False)
    co = naive.coalescing(0)
    assert co["load_requests"] == 64 and co["store_requests"] == 32
    assert co["load_lines"] == 32 * 32 + 32 and co["load_sectors"] == 32 * 32 + 32
    assert co["store_lines_per_request"] == 1.0
    assert co["load_lines_per_request"] == pytest.approx(16.5)
    sites = {(s["kind"], s["requests"]): s for s in naive.gsites}
    assert sites[("store", 32)]["sectors"] == 4 * 32


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_anatomy_access_prints_conflicts_and_coalescing(capsys):
    from perfkit import anatomy
    assert anatomy.cli(["saxpy", "1", "--access"]) == 0
    out = capsys.readouterr().out
    assert "global memory:" in out and "1.00 lines per request" in out
    assert "global load" in out and "global store" in out


def test_rereads_of_streamed_rows_and_parameters():
    """The global recording tells re-read rows (streamed) from parameter vectors every block
    reads whole: a block of the fused layernorm reads its row of x three times, gamma and beta
    once each, and writes its row of y and two statistics."""
    from perfkit.kernels.norm import layernorm

    p = layernorm.Problem(rows=8, cols=40, dtype="float32")
    v = next(x for x in layernorm.LADDER if x.name == "fused")
    rep = banks.count(v, p, cache=False)
    g = rep.global_launches[0]
    row = 40 * 4
    assert g["streamed_distinct"] == row
    assert g["streamed_reread"] == 2 * row
    assert g["bytes"] == 3 * row + 2 * row + row + 8  # x 3x, gamma + beta, y, mean + rstd
    # every read of x and the stores; gamma and beta, read by every block, stay in L2
    assert g["bytes_if_rereads_miss"] == 3 * row + row + 8


def test_l1_hits_of_a_row_walk_and_a_coalesced_stream():
    """Where loads find their data: threads that each walk their own row (the naive softmax's
    max pass) touch a new 32-byte sector every 8 floats, so 1 request in 8 misses L1, and that
    one touches 32 lines (one per lane), all first touches (DRAM); saxpy's coalesced requests
    each touch one new line: every one misses, to DRAM."""
    from perfkit.kernels import saxpy
    from perfkit.kernels.norm import softmax

    naive = next(v for v in softmax.LADDER if v.name == "naive")
    rep = banks.count(naive, softmax.Problem(rows=32, cols=64, dtype="float32"), cache=False)
    g = rep.global_launches[0]  # softmax_row_max: 64 loads per thread
    assert g["l1s_load_requests_hit"] + g["l1s_load_miss_requests"] == 64
    assert g["l1s_load_miss_requests"] == 8
    assert g["l1s_load_miss_dram"] == 8
    assert g["l1s_load_miss_lines"] == 8 * 32
    s = next(v for v in saxpy.LADDER if not v.oracle)
    rep = banks.count(s, saxpy.Problem(n=4096), cache=False)
    g = rep.global_launches[0]
    assert g["l1s_load_requests_hit"] == 0
    assert g["l1s_load_miss_requests"] == g["l1s_load_miss_dram"] > 0
    assert g["l1s_load_miss_lines"] == g["l1s_load_miss_requests"]


def test_small_problem_reaches_below_the_floor_where_it_must():
    """Batchnorm's example (32x256x56x56) cannot get under the budget with every size >= 32;
    the sizes still whole are halved down to 16, and the twin launches the same kernels with the
    same blocks."""
    from perfkit.kernels.norm import batchnorm as bn

    v = next(x for x in bn.LADDER if x.name == "fused")
    p = bn.EXAMPLE_PROBLEM
    q = banks.small_problem(v, p)
    assert q.n * q.h * q.w <= p.n * p.h * p.w / 8 and q.c >= 32 and q.h * q.w * 4 % 32 == 0
    assert [b for _, b in banks.simulate.plan_shape(v, q)] == [b for _, b in banks.simulate.plan_shape(v, p)]


@cuda.jit
def _grid_stride_copy(x, y):
    # a persistent grid: each block's share of the rows follows gridDim
    tx = cuda.threadIdx.x
    for r in range(cuda.blockIdx.x, 32, cuda.gridDim.x):
        y[r, tx] = x[r, tx]


@dataclass(frozen=True)
class _GridStride(_Plain):
    name = "grid_stride_copy"

    def plan(self, problem, bufs):
        return [Launch(_grid_stride_copy, (4,), (32,), (bufs["x"], bufs["y"]))]


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_simulated_blocks_see_the_whole_grid():
    """Simulating the first block of a 4-block grid-stride launch: the block sees gridDim.x = 4
    and copies its quarter of the rows (8 of 32), as it does on the GPU; a grid shrunk to the
    simulated block would have it copy all 32."""
    one = banks.count(_GridStride(), _T32(), max_blocks=1, cache=False)
    assert one.blocks == 1
    co = one.coalescing(0)
    assert co["load_requests"] == 8 and co["store_requests"] == 8
    g = one.global_launches[0]
    assert g["launch_blocks"] == 4 and g["bytes"] == 8 * 32 * 4 * 2
    every = banks.count(_GridStride(), _T32(), max_blocks=None, cache=False).coalescing(0)
    assert every["load_requests"] == 32


@pytest.mark.skipif(not backend.is_simulator(), reason="compares the child with this process's own simulation")
def test_a_gpu_process_runs_the_access_simulation_in_a_simulator_child(monkeypatch):
    """numba.cuda is the GPU or the simulator for a whole process: where it is the GPU, count()
    answers from a child that chose the simulator, the same report as a simulator process's."""
    import dataclasses

    from perfkit.kernels.norm import softmax

    v = next(x for x in softmax.LADDER if x.name == "warp")
    p = softmax.Problem(3, 45)
    here = banks.count(v, p, cache=False)
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    child = banks.count(v, p, cache=False)
    def norm(rep):  # the order sites are first met in follows the simulator's thread schedule
        d = dataclasses.asdict(rep)
        return {k: sorted(x, key=str) if k in ("sites", "gsites") else x for k, x in d.items()}

    assert norm(child) == norm(here) and here.load_accesses > 0


# --- cp.async (LDGSTS): a thread's 16-byte copy lands in shared memory as ONE 16-byte store ----
@dataclass(frozen=True)
class _H32(Problem):
    n: int = 32
    op = "h32"

    def input_specs(self):
        return {"x": ((32, 64), "float16")}

    def output_specs(self):
        return {"y": ((32, 64), "float16")}

    def _make(self, g):
        return {"x": g.standard_normal((32, 64)).astype(np.float16)}

    def _reference(self, inputs):
        return inputs["x"].astype(np.float64)

    @property
    def flops(self):
        return 0.0


from numba.types import float16 as _f16  # noqa: E402

from perfkit.kernels._ptx import cp_async16, cp_async_commit, cp_async_wait  # noqa: E402


@cuda.jit
def _cp_async_row(x, y):
    # one warp: lane t copies 8 halves of x to byte 16 t of a (4, 64) float16 tile: the warp
    # writes 512 contiguous bytes; the last lane reads 3 halves and zero-fills the other 5
    s = cuda.shared.array((4, 64), _f16)
    t = cuda.threadIdx.x
    r, c = t // 8, (t % 8) * 8
    cp_async16(s, r, c, x, r, c, 16 if t < 31 else 6)
    cp_async_commit()
    cp_async_wait(0)
    cuda.syncthreads()
    for e in range(8):
        y[r, c + e] = s[r, c + e]


@cuda.jit
def _cp_async_column(x, y):
    # lane t writes row t of a (32, 64) tile: 128 bytes apart, every lane in banks 0-3
    s = cuda.shared.array((32, 64), _f16)
    t = cuda.threadIdx.x
    cp_async16(s, t, 0, x, t, 8, 16)
    cp_async_commit()
    cp_async_wait(0)
    cuda.syncthreads()
    for e in range(8):
        y[t, e] = s[t, e]


@dataclass(frozen=True)
class _CpRow(_Plain):
    name = "cp_async_row"

    def plan(self, problem, bufs):
        return [Launch(_cp_async_row, (1,), (32,), (bufs["x"], bufs["y"]))]


@dataclass(frozen=True)
class _CpColumn(_Plain):
    name = "cp_async_column"

    def plan(self, problem, bufs):
        return [Launch(_cp_async_column, (1,), (32,), (bufs["x"], bufs["y"]))]


@pytest.mark.skipif(not backend.is_simulator(), reason="checks the simulator's cp.async twin as perfkit.banks sees it")
@pytest.mark.parametrize("vectorize", [True, False])
def test_cp_async_is_one_16_byte_store_per_thread(vectorize):
    """LDGSTS writes a thread's 16 bytes as one 128-bit shared store: a warp copying 32 x 16
    contiguous bytes is conflict free (the 4 wavefronts 512 bytes need), a warp whose lanes land
    128 bytes apart is 8-way (32 wavefronts: each half-warp's 16 lanes share banks 0-3), whether
    or not the compiler merges runs of a thread's accesses (the instruction is 16 bytes wide
    either way).  The twin used to land a copy as eight 2-byte stores: 8 instructions of 4
    wavefronts (degree 4) for the row, 8 of 32 (degree 32) for the column."""
    row = banks.count(_CpRow(), _H32(), cache=False, vectorize=vectorize)
    stores = [s for s in row.sites if s["kind"] == "store"]
    assert [(s["width"], s["accesses"], s["wavefronts"], s["ideal"]) for s in stores] == [(16, 1, 4, 4)], stores
    assert row.store_degree == 1.0
    col = banks.count(_CpColumn(), _H32(), cache=False, vectorize=vectorize)
    assert (col.store_accesses, col.store_wavefronts, col.store_ideal) == (1, 32, 4)
    assert col.store_degree == 8.0


@pytest.mark.skipif(not backend.is_simulator(), reason="checks the simulator's cp.async twin")
def test_cp_async_twin_copies_the_same_bytes(fresh_seed):
    """The 16-byte landing copies exactly the bytes the copy reads (zero-fill past src_bytes
    included) and nothing else: the rest of the output stays as poisoned."""
    x = np.random.default_rng(fresh_seed).standard_normal((32, 64)).astype(np.float16)
    y = np.full((32, 64), np.nan, np.float16)
    _cp_async_row[1, 32](x, y)
    want = x[:4].copy()
    want[3, 59:] = 0  # lane 31: 3 halves read, 5 zero-filled
    np.testing.assert_array_equal(y[:4], want)
    assert np.isnan(y[4:]).all()
    y[:] = np.nan
    _cp_async_column[1, 32](x, y)
    np.testing.assert_array_equal(y[:, :8], x[:, 8:16])
    assert np.isnan(y[:, 8:]).all()


# --- views of the dynamic shared array (kernels._dynsmem.shared_tile) -------------------------
from perfkit.banks import record as _record  # noqa: E402
from perfkit.kernels._dynsmem import shared_tile as _shared_tile  # noqa: E402

_START = 40  # elements: the tile starts 160 bytes into the dynamic buffer


@cuda.jit
def _tile_column_row(x, y):
    # one warp; a 32x32 float32 tile of the dynamic array from element 40: lane t writes row t's
    # first word (a column: 32 lanes 128 bytes apart, one bank, 32-way), then reads word t of row
    # 1 (a row: 32 banks), then word 0 of row t through the transposed view (a column again)
    smem = cuda.shared.array(0, float32)
    tile = _shared_tile(smem, _START, 32, 32)
    t = cuda.threadIdx.x
    tile[t, 0] = x[t, 0]
    cuda.syncthreads()
    y[0, t] = tile[1, t]
    y[1, t] = tile.T[0, t]


@dataclass(frozen=True)
class _TileColumnRow(_Plain):
    name = "tile_column_row"

    def plan(self, problem, bufs):
        return [Launch(_tile_column_row, (1,), (32,), (bufs["x"], bufs["y"]), (_START + 32 * 32) * 4)]


@pytest.mark.skipif(not backend.is_simulator(), reason="records the simulator's shared accesses")
def test_accesses_through_a_shared_tile_are_recorded_at_their_byte_address():
    """A tile taken with shared_tile is a view of the block's one dynamic buffer: each access
    through it is recorded at base + 4 * (40 + 32 r + c) (the transposed view's too), taking the
    tile records nothing, and every thread sees the same buffer (one base for the block)."""
    _record.install()
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    y = np.full((32, 32), np.nan, np.float32)
    with _record.recording() as rec:
        _tile_column_row[1, 32, 0, (_START + 32 * 32) * 4](_record.recording_arg(cuda.to_device(x)),
                                                           _record.recording_arg(cuda.to_device(y)))
    assert len(rec.bases) == 1, rec.bases  # one dynamic buffer, not one per thread
    (base,) = rec.bases.values()
    for t in range(32):
        got = [(site[2], addr, size) for site, addr, size in rec.events[((0, 0, 0), t)]]
        assert got == [("store", base + 4 * (_START + 32 * t), 4),
                       ("load", base + 4 * (_START + 32 + t), 4),
                       ("load", base + 4 * (_START + 32 * t), 4)], (t, got)


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_bank_degrees_through_a_shared_tile():
    """Column store 32-way (32 wavefronts), row load clean (1), column load through the
    transposed view 32-way: 65 wavefronts of 3 conflict-free ones."""
    rep = banks.count(_TileColumnRow(), _T32(), cache=False)
    assert (rep.store_accesses, rep.store_wavefronts, rep.store_ideal) == (1, 32, 1)
    assert (rep.load_accesses, rep.load_wavefronts, rep.load_ideal) == (2, 33, 2)
    assert rep.conflicts == 31 + 31


from numba import uint64 as _u64  # noqa: E402

from perfkit.kernels._ptx_hopper import (TensorMap2D, fence_mbarrier_init, mbar_arrive_expect_tx,  # noqa: E402
                                         mbar_init, mbar_wait, tma_load_2d, wgmma_commit, wgmma_desc,
                                         wgmma_fence, wgmma_m64n64k16, wgmma_wait)


@cuda.jit
def _async_proxy(tma, tmb, out):
    # one warpgroup: thread 0 TMA-loads A (64 x 64) into a tile at byte 0 and B (16 x 64) into a
    # tile at byte 8192 of the dynamic array; every thread waits, then the warpgroup's wgmma
    # reads both from shared memory through descriptors
    smem = cuda.shared.array(0, _f16)
    full = cuda.shared.array(1, _u64)
    ta = _shared_tile(smem, 0, 64, 64)
    tb = _shared_tile(smem, 4096, 16, 64)
    t = cuda.threadIdx.x
    if t == 0:
        mbar_init(full, 0, 1)
        fence_mbarrier_init()
    cuda.syncthreads()
    if t == 0:
        mbar_arrive_expect_tx(full, 0, 8192 + 2048)
        tma_load_2d(ta, 0, tma, 0, 0, full, 0)
        tma_load_2d(tb, 0, tmb, 0, 0, full, 0)
    mbar_wait(full, 0, 0)
    acc = cuda.local.array(32, float32)
    wgmma_fence()
    wgmma_m64n64k16(acc, smem, wgmma_desc(0, 16, 1024), wgmma_desc(8192, 8192, 1024), 0)
    wgmma_commit()
    wgmma_wait(0)
    for i in range(32):
        out[t, i] = acc[i]


@pytest.mark.skipif(not backend.is_simulator(), reason="records the simulator's twins of TMA and wgmma")
def test_tma_and_wgmma_shared_accesses_are_no_thread_s_lds_or_sts(fresh_seed):
    """TMA's writes to shared memory (cp.async.bulk.tensor) and wgmma's reads of its shared
    operands are made by the async proxy (the TMA unit, the tensor core), not by a thread's
    LDS/STS, so the LSU's bank-conflict counters (Nsight Compute's
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared) do not see them: through tiles of the dynamic
    array too, the recording holds no shared access of any thread, while the product is right."""
    g = np.random.default_rng(fresh_seed)
    A = g.uniform(-1, 1, (64, 64)).astype(np.float16)
    B = g.uniform(-1, 1, (16, 64)).astype(np.float16)
    out = np.full((128, 32), np.nan, np.float32)
    _record.install()
    with _record.recording() as rec:
        _async_proxy[1, 128, 0, 8192 + 2048](TensorMap2D(A, (64, 64), 128, (64, 64)),
                                             TensorMap2D(B, (64, 16), 128, (64, 16)), out)
    assert not any(rec.events.values()), {k: v[:3] for k, v in rec.events.items() if v}
    D = A[:, :16].astype(np.float64) @ B.astype(np.float64)
    assert_wgmma_accumulators(out, D)
