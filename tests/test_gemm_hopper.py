"""The Hopper sub-ladder (issue 45): the simulator twins of wgmma against NumPy, the wgmma rung
at awkward shapes in the simulator, its sm_90a build (HGMMA, no serialization), its refusal of
older GPUs and the model's wgmma pipe; then rung 21 `tma`: the TMA and mbarrier twins against
NumPy and the PTX ISA's rules, the tensor-map encoding, the rung at awkward shapes, its sm_90a
build (UTMALDG, SYNCS, HGMMA) and its refusals."""
import os
import re

import numpy as np
import pytest

from perfkit import anatomy, backend, model
from perfkit.kernels import gemm
from numba import cuda, float32  # after perfkit (which picks the backend)
from numba.types import float16
from perfkit.kernels._ptx_hopper import (decode_desc, wgmma_commit, wgmma_desc, wgmma_fence, wgmma_m64n64k16,
                                         wgmma_wait)
from perfkit.kernels.base import UnsupportedProblem
from fragments import assert_wgmma_accumulators

WGMMA = gemm.LADDER[[v.name for v in gemm.LADDER].index("wgmma")]
SMALL = gemm.Wgmma(BN=64)  # the same kernel with m64n64k16: 64-column tiles, fewer simulated lanes


def _py(f):
    return getattr(f, "py_func", f)


def _swizzled(rows: np.ndarray) -> np.ndarray:
    """Rows of 64 halves (128 bytes) stored with the 128-byte swizzle, written from the PTX ISA's
    description (16-byte chunk c of row r at chunk c ^ (r mod 8)), independently of the twin."""
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        for c in range(8):
            out[r, 8 * (c ^ (r % 8)):8 * (c ^ (r % 8)) + 8] = rows[r, 8 * c:8 * c + 8]
    return out


@pytest.mark.skipif(not backend.is_simulator(), reason="checks the simulator's twins; a GPU runs the instruction")
def test_wgmma_twin_matches_numpy_and_defers_to_wait(fresh_seed):
    """One warpgroup, m64n64k16 over a 64-deep k (4 wgmma): A (64 x 64, K-major) and B (64 x 64,
    MN-major) stored swizzled at byte 0 and 8192, descriptors as the rung builds them; every
    thread's 32 accumulators are the PTX ISA's fragment of A @ B (row 16w + l/4 (+8), column
    8j + 2(l%4) (+1)), nothing lands before wgmma_wait, and scale_d = 0 drops the old D."""
    g = np.random.default_rng(fresh_seed)
    A = g.uniform(-1, 1, (64, 64)).astype(np.float16)
    B = g.uniform(-1, 1, (64, 64)).astype(np.float16)
    smem_host = np.concatenate([_swizzled(A).reshape(-1), _swizzled(B).reshape(-1)])

    @cuda.jit
    def probe(src, out, early, first_scale):
        smem = cuda.shared.array(0, float16)
        t = cuda.threadIdx.x
        for i in range(t, 8192, 128):
            smem[i] = src[i]
        cuda.syncthreads()
        acc = cuda.local.array(32, float32)
        for i in range(32):
            acc[i] = float32(7)  # scale_d = 0 on the first wgmma ignores this
        wgmma_fence()
        for kk in range(4):
            wgmma_m64n64k16(acc, smem, wgmma_desc(kk * 32, 16, 1024), wgmma_desc(8192 + kk * 2048, 8192, 1024),
                            1 if kk > 0 else first_scale)
        wgmma_commit()
        early[t] = acc[0]  # before the wait: untouched
        wgmma_wait(0)
        for i in range(32):
            out[t, i] = acc[i]

    out = np.full((128, 32), np.nan, np.float32)
    early = np.zeros(128, np.float32)
    probe[1, 128, 0, 16384](smem_host, out, early, 0)
    assert (early == 7).all()
    D = A.astype(np.float64) @ B.astype(np.float64)
    assert_wgmma_accumulators(out, D)
    t = np.arange(128)
    w, lane = t // 32, t % 32
    probe[1, 128, 0, 16384](smem_host, out, early, 1)  # scale_d = 1 throughout: 7 + A @ B
    np.testing.assert_allclose(out[:, 0], 7 + D[16 * w + lane // 4, 2 * (lane % 4)], rtol=1e-5, atol=1e-5)


def test_descriptor_fields_and_swizzle():
    d = int(_py(wgmma_desc)(0x12345 & ~15, 8192, 1024))
    assert decode_desc(d) == (0x12340, 8192, 1024, 1)
    from perfkit.kernels._ptx_hopper import sw128
    assert [int(_py(sw128)(a)) for a in (0, 16, 128, 128 + 16, 7 * 128 + 112)] == [0, 16, 128 + 16, 128, 7 * 128]


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (37, 41, 29), (16, 64, 200), (128, 64, 256)],
                         ids=["1x1x1", "primes", "unaligned", "ring_wraps_edge", "full_block_unchecked"])
def test_wgmma_rung_at_awkward_shapes(shape, fresh_seed):
    """In the simulator through the twins: 2-byte stores where rows are not 16-byte aligned,
    cp.async zero-fill at the m, n and k edges, 4 k-tiles through the 3-stage ring, and a full
    block through the unchecked loader."""
    m, n, k = shape
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    out = SMALL.run(p, x)
    res = p.check(out, x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, f"{shape}: {res.message}"


def test_wgmma_compiles_for_sm90a_to_hgmma_without_serialization():
    """The build check: HGMMA.64x128x16.F32 in the SASS, ptxas reports neither wgmma serialized
    (C7509, C7510: across a call, or for another reason) nor setmaxnreg ignored (C7504, C7508);
    no spills; the 97 KiB of dynamic shared memory counted with the launch's opt-in."""
    r = anatomy.inspect(WGMMA, gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))
    assert r.arch == "sm_90a"
    assert re.findall(r"\bHGMMA\.64x128x16\.F32\b", r.sass) and r.mix["tensor mma"] >= 4
    bad = [ln for ln in r.ptxas_log.splitlines() if re.search(r"C75(04|08|09|10)", ln)]
    assert not bad, bad
    assert r.spill_store_bytes == 0 and r.stack_bytes == 0
    assert r.dynamic_shared_bytes == 3 * 32768 + 1024 and r.occupancy.blocks_per_sm == 2, r.occupancy


def test_wgmma_is_refused_before_hopper():
    old = backend.DeviceInfo(name="NVIDIA A100-SXM4-80GB", simulated=False, compute_capability=(8, 0))
    with backend.planning_for(old):
        with pytest.raises(UnsupportedProblem, match=r"needs a Hopper GPU .* is sm_80"):
            WGMMA.supports(gemm.Problem(256, 256, 256, "float16"))
    h100 = backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0))
    with backend.planning_for(h100):
        WGMMA.supports(gemm.Problem(256, 256, 256, "float16"))


def test_the_model_runs_wgmma_at_the_dense_tensor_peak():
    """HGMMA.64x128x16 is 2 x 64 x 128 x 16 / 4 FLOPs a warp instruction, at the datasheet's dense
    peak (wgmma_fraction 1): the tensor leg is the FLOPs at 989.4 TFLOP/s on the H100 (mma.sync:
    0.62 of it)."""
    p = gemm.Problem(4096, 4096, 4096, "float16")
    e = model.estimate(WGMMA, p, "h100-sxm", banks=False)
    assert e.legs["tensor"] == pytest.approx(p.flops / 989.4e12, rel=0.01)
    assert e.bound == "tensor" and np.isfinite(e.seconds)


def test_pipe_counts_weigh_hgmma_by_its_shape_and_hmma_as_before():
    """HMMA.16816 stays 4096 FLOPs a warp instruction (the model's mma.sync legs and trips are
    what they were); HGMMA.64x128x16 is a warpgroup's 2 x 64 x 128 x 16, a quarter per warp."""
    c = model._pipe_counts(["HMMA.16816.F32 R0, R4, R8, R0 ;"] * 3 + ["HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0 ;"])
    assert c["mma"] == 4 and c["mma_flops"] == 3 * 4096 and c["wgmma_flops"] == 2 * 64 * 128 * 16 / 4


# --- rung 21 `tma`: the TMA and mbarrier twins, the rung ------------------------------------------
TMA = gemm.LADDER[[v.name for v in gemm.LADDER].index("tma")]
SIM = pytest.mark.skipif(not backend.is_simulator(), reason="checks the simulator's twins; a GPU runs the instruction")


@SIM
def test_mbarrier_twin_phases_arrivals_and_transaction_count():
    """PTX ISA's mbarrier: a phase completes when its count of arrivals and its expected bytes
    have both come; try_wait.parity passes for the phase of that parity once it has completed
    (right after init: parity 1, the phase 'before' phase 0); bytes that land before they are
    expected leave the count negative and the phase open."""
    from perfkit.kernels._ptx_hopper import (mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_state,
                                             mbar_try_wait, mbar_wait)
    bars = np.zeros(2, np.uint64)
    mbar_init(bars, 1, 2)
    assert mbar_state(bars[1]) == {"pending": 2, "count": 2, "tx": 0, "init": True, "phase": 0}
    assert mbar_try_wait(bars, 1, 1) == 1 and mbar_try_wait(bars, 1, 0) == 0
    mbar_arrive_expect_tx(bars, 1, 256)
    mbar_arrive(bars, 1)  # both arrived, 256 bytes still expected: the phase stays open
    assert mbar_state(bars[1])["pending"] == 0 and mbar_state(bars[1])["tx"] == 256
    assert mbar_try_wait(bars, 1, 0) == 0
    with pytest.raises(RuntimeError, match="never completes"):
        mbar_wait(bars, 1, 0)
    with pytest.raises(RuntimeError, match="more arrivals than its count"):
        mbar_arrive(bars, 1)
    with pytest.raises(RuntimeError, match="before mbar_init"):
        mbar_arrive(bars, 0)
    bars2 = np.zeros(1, np.uint64)  # arrivals complete a phase with no bytes; the parity alternates
    mbar_init(bars2, 0, 1)
    for phase in range(3):
        assert mbar_try_wait(bars2, 0, phase) == 0
        mbar_arrive(bars2, 0)
        assert mbar_try_wait(bars2, 0, phase) == 1 and mbar_try_wait(bars2, 0, phase + 1) == 0
        mbar_wait(bars2, 0, phase)


def _tile(g, c0, c1, box):
    """The box (box[1] rows x box[0] columns) at column c0, row c1 of g, zeros outside g."""
    out = np.zeros((box[1], box[0]), g.dtype)
    rows, cols = g[c1:c1 + box[1], c0:c0 + box[0]].shape
    out[:rows, :cols] = g[c1:c1 + box[1], c0:c0 + box[0]]
    return out


@SIM
def test_tma_twin_copies_a_swizzled_zero_filled_box_when_it_lands(fresh_seed):
    """A 64 x 128 box of a 100 x 72 float16 matrix at (column 64, row 0): 8 columns and 100 rows
    inside, the rest zeros; it lands at byte 2048 of the shared array with the 128-byte swizzle
    (written from the ISA's description, `_swizzled`), only when a thread waits on its barrier,
    and its 16384 bytes (zero-filled ones included) are what completes the barrier's phase."""
    from perfkit.kernels._ptx_hopper import (TensorMap2D, mbar_arrive_expect_tx, mbar_init, mbar_state,
                                             mbar_try_wait, tma_load_2d)
    g = np.random.default_rng(fresh_seed).uniform(-1, 1, (100, 72)).astype(np.float16)
    tmap = TensorMap2D(g, (72, 100), 144, (64, 128))
    smem = np.full(1024 + 8192 + 512, np.nan, np.float16)
    bars = np.zeros(1, np.uint64)
    mbar_init(bars, 0, 1)
    tma_load_2d(smem, 2048, tmap, 64, 0, bars, 0)  # byte 2048: element 1024 (1024-byte aligned)
    assert np.isnan(smem).all(), "landed before anyone waited"
    assert mbar_state(bars[0])["tx"] == 0 and mbar_state(bars[0])["pending"] == 1
    mbar_arrive_expect_tx(bars, 0, 16384)
    assert mbar_try_wait(bars, 0, 0) == 1  # lands, 16384 bytes complete, the phase flips
    assert mbar_state(bars[0]) == {"pending": 1, "count": 1, "tx": 0, "init": True, "phase": 1}
    want = _swizzled(_tile(g, 64, 0, (64, 128))).reshape(-1)
    np.testing.assert_array_equal(smem[1024:1024 + 8192], want)
    assert np.isnan(smem[:1024]).all() and np.isnan(smem[1024 + 8192:]).all()
    # bytes landing first leave the count negative, and the phase open until they are expected
    tma_load_2d(smem, 2048, tmap, 0, 96, bars, 0)  # rows 96..99 inside, 124 rows of zeros
    assert mbar_try_wait(bars, 0, 1) == 0 and mbar_state(bars[0])["tx"] == -16384
    np.testing.assert_array_equal(smem[1024:1024 + 8192], _swizzled(_tile(g, 0, 96, (64, 128))).reshape(-1))
    mbar_arrive_expect_tx(bars, 0, 16384)
    assert mbar_try_wait(bars, 0, 1) == 1


@SIM
def test_tma_twin_and_tensor_map_refuse_what_the_hardware_refuses():
    from perfkit.kernels._ptx_hopper import TensorMap2D, mbar_init, tma_load_2d
    g = np.zeros((8, 12), np.float16)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        TensorMap2D(g, (12, 8), 24, (64, 8))
    with pytest.raises(ValueError, match="128-byte box rows"):
        TensorMap2D(g, (12, 8), 32, (32, 8))
    tmap = TensorMap2D(np.zeros((8, 16), np.float16), (16, 8), 32, (64, 8))
    bars = np.zeros(1, np.uint64)
    mbar_init(bars, 0, 1)
    with pytest.raises(RuntimeError, match="not 1024-byte aligned"):
        tma_load_2d(np.zeros(4096, np.float16), 512, tmap, 0, 0, bars, 0)
    with pytest.raises(RuntimeError, match="overruns"):
        tma_load_2d(np.zeros(1535, np.float16), 2048, tmap, 0, 0, bars, 0)  # 3070 bytes: 2 short


@pytest.mark.parametrize("shape", [(1, 8, 8), (37, 40, 24), (16, 24, 200), (130, 8, 72)],
                         ids=["1x8x8", "unaligned_m_n_k", "ring_wraps", "two_block_rows"])
def test_tma_rung_at_awkward_shapes(shape, fresh_seed):
    """In the simulator through the twins (64-column tiles: fewer simulated lanes): m, n, k not
    multiples of the tile (the copies' zero fill at every edge), 4 k-tiles through the 3-stage
    ring (each barrier's second phase, parity 1), NaN-poisoned C, a float64 reference."""
    m, n, k = shape
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    out = gemm.Tma(BN=64).run(p, x)
    res = p.check(out, x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, f"{shape}: {res.message}"


def test_tma_rung_as_laddered(fresh_seed):
    """The rung as the ladder holds it (m64n128k16, 128-column tiles), two block columns."""
    p = gemm.Problem(9, 136, 16, "float16")
    x = p.make_inputs(fresh_seed)
    res = p.check(TMA.run(p, x), x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, res.message


def test_tma_is_refused_before_hopper_and_for_rows_tma_cannot_stride():
    old = backend.DeviceInfo(name="NVIDIA A100-SXM4-80GB", simulated=False, compute_capability=(8, 0))
    with backend.planning_for(old):
        with pytest.raises(UnsupportedProblem, match=r"needs a Hopper GPU \(sm_90: TMA .* is sm_80"):
            TMA.supports(gemm.Problem(256, 256, 256, "float16"))
    h100 = backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0))
    with backend.planning_for(h100):
        TMA.supports(gemm.Problem(37, 256, 256, "float16"))  # any m
        for shape, what in (((64, 64, 29), "k=29"), ((64, 41, 64), "n=41")):
            with pytest.raises(UnsupportedProblem, match=rf"multiples of 16 bytes; {what} .* use rung 20 wgmma"):
                TMA.supports(gemm.Problem(*shape, "float16"))
        with pytest.raises(UnsupportedProblem, match="float16 inputs"):
            TMA.supports(gemm.Problem(64, 64, 64))


def _assert_bounded_waits(r):
    """Every mbarrier wait of the build is mbar_wait's bounded loop: a first try_wait (the whole
    wait when the phase is done), then a retry loop timed by %globaltimer that ends in a trap
    (BPT.TRAP) after MBAR_WAIT_LIMIT_NS, so a lost arrival fails the launch instead of hanging
    it (GEMM rung 24 hung on the H200 with no message): two TRYWAIT and two timer reads a trap."""
    waits = len(re.findall(r"\bSYNCS\.PHASECHK\.TRANS64\.TRYWAIT\b", r.sass))
    traps = len(re.findall(r"\bBPT\.TRAP\b", r.sass))
    assert traps > 0 and waits == 2 * traps == len(re.findall(r"\bSR_GLOBALTIMER", r.sass)), (waits, traps)
    assert r.ptx.count("trap;") == traps and r.ptx.count("%globaltimer") == 2 * traps


def test_tma_compiles_for_sm90a_to_utmaldg_syncs_and_hgmma():
    """The build check: TMA copies (UTMALDG.2D), mbarrier operations (SYNCS: the init's EXCH, the
    expect_tx arrive, the parity wait) and HGMMA.64x128x16.F32 in the SASS; ptxas reports no
    setmaxnreg ignored (C7504, C7508) and no wgmma serialized (C7509, C7510); no spills; the
    threads issue no global loads of their own (the copy engine does)."""
    r = anatomy.inspect(TMA, gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))
    assert r.arch == "sm_90a"
    _assert_bounded_waits(r)
    assert re.findall(r"\bHGMMA\.64x128x16\.F32\b", r.sass) and r.mix["tensor mma"] >= 4
    assert re.findall(r"\bUTMALDG\.2D\b", r.sass)
    for op in ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT"):
        assert op in r.sass, op
    bad = [ln for ln in r.ptxas_log.splitlines() if re.search(r"C75(04|08|09|10)", ln)]
    assert not bad, bad
    assert r.spill_store_bytes == 0 and r.stack_bytes == 0
    assert not any(r.mix[f"global load {w}"] for w in (8, 16, 32, 64, 128, 256)), r.mix
    assert r.dynamic_shared_bytes == 3 * 32768 + 1024
    assert r.static_shared_bytes - r.reserved_shared_bytes == TMA.shared_bytes() == 32


def test_tensor_map_encoding_calls_the_driver_as_documented(monkeypatch):
    """No driver here: the binding is replaced by one that checks what cuTensorMapEncodeTiled's
    documentation asks (float16, rank 2, dims inner first, rank - 1 byte strides, the box, element
    strides 1, the 128-byte swizzle, zero fill) with the binding's own integer types, which its
    conversion demands (plain ints: TypeError), and the 16 words land in device memory."""
    from cuda.bindings import driver as drv
    from perfkit.kernels import _ptx_hopper as H
    seen = {}

    def fake(dtype, rank, addr, dims, strides, box, estrides, interleave, swizzle, l2, oob):
        assert all(isinstance(x, drv.cuuint64_t) for x in dims + strides)
        assert all(isinstance(x, drv.cuuint32_t) for x in box + estrides)
        seen.update(dtype=dtype, rank=rank, addr=addr, dims=[int(x) for x in dims], strides=[int(x) for x in strides],
                    box=[int(x) for x in box], estrides=[int(x) for x in estrides], swizzle=swizzle, oob=oob)
        return drv.CUresult.CUDA_SUCCESS, type("Map", (), {"opaque": [drv.cuuint64_t(i) for i in range(16)]})()

    monkeypatch.setattr(drv, "cuTensorMapEncodeTiled", fake)
    m = H.TensorMap2D(None, (72, 100), 144, (64, 128))
    words = H._encode(0x10000, m)
    assert seen == dict(dtype=drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank=2, addr=0x10000,
                        dims=[72, 100], strides=[144], box=[64, 128], estrides=[1, 1],
                        swizzle=drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                        oob=drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    np.testing.assert_array_equal(words.copy_to_host(), np.arange(16, dtype=np.uint64))
    with pytest.raises(ValueError, match="16-byte aligned"):
        H._encode(0x10008, m)


def test_tensor_maps_are_encoded_once_per_buffer_and_shape(monkeypatch):
    """On a GPU (the backend's answer replaced here), a map is encoded once per (buffer address,
    dims, row stride, box) and reused; host buffers (a plan compiled, never launched) get a
    zeroed uint64[16] with the kernel argument's type, and no encoding."""
    from perfkit.kernels import _ptx_hopper as H
    calls = []
    monkeypatch.setattr(H.backend, "is_simulator", lambda: False)
    monkeypatch.setattr(H, "_ENCODED", {})
    monkeypatch.setattr(H, "_encode", lambda addr, m: calls.append((addr, m.dims, m.box)) or object())

    def buf(addr):
        return type("Dev", (), {"device_ctypes_pointer": type("P", (), {"value": addr})()})()

    a, b = buf(0x1000), buf(0x2000)
    first = H.tensor_map_2d(a, (64, 128), 128, (64, 128))
    assert H.tensor_map_2d(a, (64, 128), 128, (64, 128)) is first
    H.tensor_map_2d(a, (64, 256), 128, (64, 128))
    H.tensor_map_2d(b, (64, 128), 128, (64, 128))
    assert calls == [(0x1000, (64, 128), (64, 128)), (0x1000, (64, 256), (64, 128)), (0x2000, (64, 128), (64, 128))]
    host = H.tensor_map_2d(np.zeros((1, 1), np.float16), (1, 1), 2, (64, 128))
    assert host.dtype == np.uint64 and host.shape == (16,) and not host.any() and len(calls) == 3


def test_tma_is_shown_and_swept_at_shapes_it_takes(fresh_seed):
    """The notebook checks every rung at v.example(37 x 41 x 29): tma's is 37 x 48 x 32 (float16),
    which it runs correctly; the sweeps' float16 problems are all ones it supports."""
    p = TMA.example(gemm.Problem(37, 41, 29))
    assert (p.m, p.n, p.k, p.dtype) == (37, 48, 32, "float16")
    assert TMA.example(gemm.Problem(4096, 4096, 4096)) == gemm.Problem(4096, 4096, 4096, "float16")
    x = p.make_inputs(fresh_seed)
    res = p.check(TMA.run(p, x), x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, res.message
    for q in gemm.GPU_SWEEP + gemm.SIM_SWEEP:
        if q.dtype == "float16":
            TMA.supports(q)


# --- rung 22 `warp_specialized`: a producer warpgroup, two consumers, setmaxnreg ------------------
WS = gemm.LADDER[[v.name for v in gemm.LADDER].index("warp_specialized")]


@pytest.mark.parametrize("shape", [(1, 8, 8), (100, 56, 136)], ids=["1x8x8", "both_consumers_ring_wraps"])
def test_warp_specialized_rung_at_awkward_shapes(shape, fresh_seed):
    """In the simulator through the twins (64-column tiles, 2 stages: fewer simulated lanes, the
    ring wraps sooner): the producer thread and the 256 consumer threads meet only on the full
    and empty mbarriers (a waiting thread yields to its block); 100 rows: both consumer
    warpgroups' halves, the second one cut at the m edge; 3 k-tiles through 2 stages: every
    stage refilled once the empty barrier's phase (both consumers' arrivals) completed, the last
    tile cut at k; NaN-poisoned C, a float64 reference."""
    m, n, k = shape
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    out = gemm.WarpSpecialized(BN=64, STAGES=2).run(p, x)
    res = p.check(out, x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, f"{shape}: {res.message}"


def test_warp_specialized_rung_as_laddered(fresh_seed):
    """The rung as the ladder holds it (m64n256k16, 128 x 256 tiles, 4 stages), two block columns."""
    p = gemm.Problem(9, 264, 16, "float16")
    x = p.make_inputs(fresh_seed)
    res = p.check(WS.run(p, x), x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, res.message


def test_warp_specialized_is_refused_before_hopper_and_for_rows_tma_cannot_stride():
    old = backend.DeviceInfo(name="NVIDIA A100-SXM4-80GB", simulated=False, compute_capability=(8, 0))
    with backend.planning_for(old):
        with pytest.raises(UnsupportedProblem, match=r"needs a Hopper GPU \(sm_90: TMA, .*setmaxnreg\); .* is sm_80"):
            WS.supports(gemm.Problem(256, 256, 256, "float16"))
    h100 = backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0))
    with backend.planning_for(h100):
        WS.supports(gemm.Problem(37, 256, 256, "float16"))  # any m
        for shape, what in (((64, 64, 29), "k=29"), ((64, 41, 64), "n=41")):
            with pytest.raises(UnsupportedProblem, match=rf"multiples of 16 bytes; {what} .* use rung 20 wgmma"):
                WS.supports(gemm.Problem(*shape, "float16"))
        with pytest.raises(UnsupportedProblem, match="float16 inputs"):
            WS.supports(gemm.Problem(64, 64, 64))
        with pytest.raises(UnsupportedProblem, match=r"227 KiB"):  # 5 stages of 48 KiB
            gemm.WarpSpecialized(STAGES=5).supports(gemm.Problem(64, 64, 64, "float16"))
        for q in gemm.GPU_SWEEP + gemm.SIM_SWEEP:
            if q.dtype == "float16":
                WS.supports(q)
    assert WS.example(gemm.Problem(37, 41, 29)) == gemm.Problem(37, 48, 32, "float16")


def test_the_model_runs_both_roles_of_the_warp_specialized_rung():
    """The producer/consumer split (``wg = t // 128; if wg == 0``) runs both arms
    (:func:`perfkit.model.branches.warp_role`): the consumers' k loop carries every FLOP at the
    dense peak (the tensor leg was 0 when the split was read as a zero guard and the consumers'
    ``n_k > 0`` as an if/else of two arms), the producer's arm is charged to its 4 of 12 warps,
    and the launch says which warps do what."""
    p = gemm.Problem(4096, 4096, 4096, "float16")
    e = model.estimate(WS, p, "h100-sxm", banks=False)
    # (141.1 us: rung 21's tensor leg too; 1.6% over the FLOPs at the peak)
    assert e.legs["tensor"] == pytest.approx(p.flops / 989.4e12, rel=0.02)
    assert e.bound == "tensor" and np.isfinite(e.seconds)
    L = e.launches[0]
    assert any(r.startswith("mma work") for r in L["trip_rules"])
    assert not any("not taken" in r for r in L["trip_rules"]), L["trip_rules"]
    roles = L["roles"]
    assert len(roles) == 2 and "8 of 12 warps" in roles[0] and "wgmma" in roles[0], roles
    assert "4 of 12 warps" in roles[1] and "TMA loads" in roles[1] and "wgmma" not in roles[1], roles


def test_the_model_reads_the_persistent_rungs_traffic_and_its_warpgroup_barriers():
    """Rung 23 names no array to the kernel (A, B and C reach it only through TMA tensor maps), so
    the launch's share of the rung's traffic was 0 and with it the DRAM and L2 legs; the launches
    now share it evenly.  Its epilogue's named barriers (``bar.sync 1+w, 128``: one warpgroup's
    warps) are not the block's lock step, so its legs overlap as rung 22's do."""
    from perfkit.model.pipes import pipe_counts

    c = pipe_counts(["BAR.SYNC.DEFER_BLOCKING R23, 0x80 ;", "BAR.SYNC.DEFER_BLOCKING 0x0 ;", "BAR.SYNC 0x1, 0x80 ;"])
    assert c["bar"] == 3 and c["bar_part"] == 2
    p = gemm.Problem(4096, 4096, 4096, "float16")
    e = model.estimate(PERSISTENT, p, "h100-sxm", banks=False)
    assert e.legs["dram"] >= p.bytes / 3.35e12 * 0.9 and e.legs["l2"] > 0, e.legs  # at least A, B, C once
    assert e.launches[0]["overlap"] < 1.0 and e.bound == "tensor"
    assert e.seconds <= model.estimate(WS, p, "h100-sxm", banks=False).seconds * 1.05


def test_warp_specialized_compiles_for_sm90a_with_setmaxnreg_kept():
    """The build check: HGMMA.64x256x16.F32, TMA copies (UTMALDG.2D), the mbarriers (SYNCS: the
    init's EXCH, the producer's expect_tx arrive, the consumers' plain arrive, the parity waits)
    and both register moves (USETMAXREG: the consumers' TRY_ALLOC to 232 = 0xe8, the producer's
    DEALLOC to 40 = 0x28) in the SASS; ptxas reports no setmaxnreg ignored (C7504, C7508) and no
    wgmma serialized (C7509, C7510); the entry's 168 registers (65536 / 384, pinned by the launch
    bound), no spills; 4 x 48 KiB + 1 KiB of dynamic shared memory counted with the opt-in: one
    block of 12 warps an SM."""
    r = anatomy.inspect(WS, gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))
    assert r.arch == "sm_90a"
    _assert_bounded_waits(r)
    assert re.findall(r"\bHGMMA\.64x256x16\.F32\b", r.sass) and r.mix["tensor mma"] >= 4
    assert re.findall(r"\bUTMALDG\.2D\b", r.sass)
    for op in ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "SYNCS.ARRIVE.TRANS64.A1T0", "SYNCS.PHASECHK.TRANS64.TRYWAIT"):
        assert op in r.sass, op
    assert re.search(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, 0xe8\b", r.sass), "consumers' setmaxnreg.inc 232"
    assert re.search(r"USETMAXREG\.DEALLOC\.CTAPOOL 0x28\b", r.sass), "producer's setmaxnreg.dec 40"
    bad = [ln for ln in r.ptxas_log.splitlines() if re.search(r"C75(04|08|09|10)", ln)]
    assert not bad, bad
    assert r.registers == 168 and r.spill_store_bytes == 0 and r.stack_bytes == 0
    assert not any(r.mix[f"global load {w}"] for w in (8, 16, 32, 64, 128, 256)), r.mix
    assert r.dynamic_shared_bytes == 4 * 49152 + 1024
    assert r.static_shared_bytes - r.reserved_shared_bytes == WS.shared_bytes() == 64
    assert r.occupancy.blocks_per_sm == 1 and r.occupancy.active_warps == 12, r.occupancy


# --- rung 23 `persistent`: a block an SM walking tiles, the TMA-store epilogue --------------------
PERSISTENT = gemm.LADDER[[v.name for v in gemm.LADDER].index("persistent")]


@SIM
def test_tma_store_twin_writes_the_swizzled_box_clipped_at_the_edges_when_waited_for(fresh_seed):
    """A 64 x 32 float32 box stored from byte 1024 of a shared array (128-byte swizzled, as the
    map names it) to column 32, row 40 of a 70 x 52 float32 array mapped as 70 x 50: rows 40..69
    and columns 32..49 are written, nothing else (not the 2 columns past the map's dims); nothing
    moves before the issuing thread waits for its group (cp.async.bulk.wait_group), and an
    uncommitted store is not waited for."""
    from perfkit.kernels._ptx_hopper import TensorMap2D, bulk_commit, bulk_wait, bulk_wait_read, tma_store_2d
    box = np.random.default_rng(fresh_seed).standard_normal((64, 32)).astype(np.float32)
    smem = np.zeros(1024 + 8192, np.uint8)
    smem[1024:] = _swizzled(box.view(np.float16)).reshape(-1).view(np.uint8)  # 64 rows of 128 bytes
    c = np.full((70, 52), np.nan, np.float32)
    tmap = TensorMap2D(c, (50, 70), 208, (32, 64), itemsize=4)
    tma_store_2d(tmap, 32, 40, smem.view(np.float16), 1024)
    bulk_wait(0)  # the store is in the open group: not yet committed, not waited for
    assert np.isnan(c).all()
    bulk_commit()
    tma_store_2d(tmap, 0, 0, smem.view(np.float16), 1024)
    bulk_commit()
    bulk_wait_read(1)  # the older group only
    want = np.full((70, 52), np.nan, np.float32)
    want[40:70, 32:50] = box[:30, :18]
    np.testing.assert_array_equal(c, want)
    bulk_wait(0)
    want[0:64, 0:32] = box
    np.testing.assert_array_equal(c, want)
    assert np.isnan(c[:, 50:]).all()


@pytest.mark.parametrize("shape", [(1, 8, 8), (65, 136, 72)], ids=["1x8x8", "walks_tiles_ring_runs_on"])
def test_persistent_rung_at_awkward_shapes(shape, fresh_seed, monkeypatch):
    """Two blocks on every backend (a GPU would give each of the 3 tiles an SM of its own and
    no block would walk; the grid asserted was the simulator's, which failed on the H200 with
    grid (3,)), 64-column tiles, 2 stages: 65 x 136 is 3 tiles, so block 0 walks tiles 0 and 2
    with its ring running on between them (4 k-tiles through 2 stages, the barriers' parities
    carried over) and its C boxes written again after their TMA stores, the second consumer
    warpgroup holds one row and the last tile 8 columns (the TMA store clips both), k = 72 cuts
    the last k-tile; NaN-poisoned C."""
    monkeypatch.setattr(gemm.Persistent, "sms", lambda self: 2)
    m, n, k = shape
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    v = gemm.Persistent(BN=64, STAGES=2)
    assert v.grid(p) == (min(v.tiles(p), 2),)
    out = v.run(p, x)
    res = p.check(out, x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, f"{shape}: {res.message}"


def test_persistent_rung_as_laddered(fresh_seed):
    """The rung as the ladder holds it (128 x 256 tiles, 4 stages, 8 C boxes a warpgroup: each
    box written twice), two tiles on the simulator's two blocks, the second cut at n."""
    p = gemm.Problem(9, 264, 16, "float16")
    x = p.make_inputs(fresh_seed)
    res = p.check(PERSISTENT.run(p, x), x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, res.message


def test_persistent_grid_is_one_block_an_sm_and_refusals():
    """One block an SM of the device planned for (132 where it does not say), never more blocks
    than tiles; refused before sm_90 and for rows TMA cannot stride, as rung 21."""
    p = gemm.Problem(4096, 4096, 4096, "float16")
    assert PERSISTENT.tiles(p) == 32 * 16
    for info, want in ((backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0),
                                           sm_count=132), 132),
                       (backend.DeviceInfo(name="a GPU", simulated=False, compute_capability=(9, 0), sm_count=114), 114),
                       (backend.DeviceInfo(name="compile-only", simulated=False), 132)):
        with backend.planning_for(info):
            assert PERSISTENT.grid(p) == (want,) and PERSISTENT.grid(gemm.Problem(200, 300, 64, "float16")) == (4,)
    old = backend.DeviceInfo(name="NVIDIA A100-SXM4-80GB", simulated=False, compute_capability=(8, 0))
    with backend.planning_for(old):
        with pytest.raises(UnsupportedProblem, match=r"needs a Hopper GPU \(sm_90: TMA loads and stores.* is sm_80"):
            PERSISTENT.supports(p)
    h100 = backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0), sm_count=132)
    with backend.planning_for(h100):
        PERSISTENT.supports(gemm.Problem(37, 256, 256, "float16"))
        with pytest.raises(UnsupportedProblem, match=r"multiples of 16 bytes; n=41 .* use rung 20 wgmma"):
            PERSISTENT.supports(gemm.Problem(64, 41, 64, "float16"))
        with pytest.raises(UnsupportedProblem, match=r"227 KiB"):  # 5 stages of 48 KiB
            gemm.Persistent(STAGES=5).supports(gemm.Problem(64, 64, 64, "float16"))
        for q in gemm.GPU_SWEEP + gemm.SIM_SWEEP:
            if q.dtype == "float16":
                PERSISTENT.supports(q)
    assert PERSISTENT.example(gemm.Problem(37, 41, 29)) == gemm.Problem(37, 48, 32, "float16")


def test_persistent_compiles_for_sm90a_with_tma_stores_and_named_barriers():
    """The build check: rung 22's (HGMMA.64x256x16.F32, UTMALDG.2D, SYNCS, both USETMAXREG, no
    C7504/C7508/C7509/C7510, the 168 registers, no spills) and the epilogue's TMA stores
    (UTMASTG.2D) and named barriers (BAR.SYNC with a barrier register and 128 threads); 4 x 48 KiB
    of ring, 4 x 8 KiB of C boxes and 1 KiB: one block of 12 warps an SM."""
    r = anatomy.inspect(PERSISTENT, gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))
    assert r.arch == "sm_90a"
    _assert_bounded_waits(r)
    assert re.findall(r"\bHGMMA\.64x256x16\.F32\b", r.sass)
    assert re.findall(r"\bUTMALDG\.2D\b", r.sass) and re.findall(r"\bUTMASTG\.2D\b", r.sass)
    for op in ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT"):
        assert op in r.sass, op
    assert re.search(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, 0xe8\b", r.sass)
    assert re.search(r"USETMAXREG\.DEALLOC\.CTAPOOL 0x28\b", r.sass)
    assert re.search(r"\bBAR\.SYNC(\.DEFER_BLOCKING)? R\d+, 0x80\b", r.sass), "bar.sync 1 + cw, 128"
    # the epilogue's protocol, box by box, as the SASS orders it: the store two boxes back has
    # read its box (cp.async.bulk.wait_group.read 1: DEPBAR.LE SB0, 0x1), the warpgroup meets,
    # the fragments' st.shared, each thread's fence for the async proxy (FENCE.VIEW.ASYNC.S),
    # the warpgroup meets again, then the TMA store: no box rewritten before its store read it,
    # no store issued before the writes reach the async proxy
    seq = "".join({"DEPBAR.LE": "W", "BAR.SYNC": "B", "STS": "S", "FENCE.VIEW.ASYNC.S": "F", "UTMASTG.2D": "T"}
                  .get(m.group(1).replace(".DEFER_BLOCKING", ""), "")
                  for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", r.sass))
    stores = re.findall(r"W?BS+FBT", seq)
    assert len(stores) == seq.count("T") == 8 and all(x.startswith("W") for x in stores), seq
    bad = [ln for ln in r.ptxas_log.splitlines() if re.search(r"C75(04|08|09|10)", ln)]
    assert not bad, bad
    assert r.registers == 168 and r.spill_store_bytes == 0 and r.stack_bytes == 0
    assert r.dynamic_shared_bytes == 4 * 49152 + 4 * 8192 + 1024
    assert r.static_shared_bytes - r.reserved_shared_bytes == PERSISTENT.shared_bytes() == 64
    assert r.occupancy.blocks_per_sm == 1 and r.occupancy.active_warps == 12, r.occupancy


# --- rung 24 `cluster`: 2-block clusters along m, B multicast, remote arrives ---------------------
CLUSTER = gemm.LADDER[[v.name for v in gemm.LADDER].index("cluster")]


def _cluster_probe():
    """A fresh (2, 1, 1)-cluster kernel of 32 threads a block: block r multicasts rows 8r..8r+7
    of a 16 x 64 float16 matrix (a (64, 8) box: 1 KiB) to byte 1024 r of both blocks' shared
    memory (mask 0b11) on barrier 0, which expects 2 KiB a block; thread 0 of each block then
    arrives on barrier 1 (count 2) of both blocks (mapa + remote arrive) and every thread waits
    on it; block 1 alone meets at two block barriers; a word each block writes after the copies
    (its rank + 1) shows whose memory it is."""
    from numba import uint64
    from perfkit.kernels._ptx_hopper import (cluster_ctarank, cluster_dims, cluster_sync, fence_mbarrier_init,
                                             mbar_arrive_cluster, mbar_arrive_expect_tx, mbar_init, mbar_wait,
                                             tma_load_2d_multicast)

    @cuda.jit
    def probe(tmap, out, ranks, own):
        cluster_dims(2, 1, 1)
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(2, uint64)
        t = cuda.threadIdx.x
        b = cuda.blockIdx.x
        r = cluster_ctarank()
        if t == 0:
            mbar_init(bars, 0, 1)
            mbar_init(bars, 1, 2)
            fence_mbarrier_init()
        cluster_sync()
        if t == 0:
            mbar_arrive_expect_tx(bars, 0, 2048)
            tma_load_2d_multicast(smem, 1024 * r, tmap, 0, 8 * r, bars, 0, 3)
        mbar_wait(bars, 0, 0)
        if t == 0:
            mbar_arrive_cluster(bars, 1, 0)
            mbar_arrive_cluster(bars, 1, 1)
        mbar_wait(bars, 1, 0)
        for i in range(t, 1024, 32):
            out[b, i] = smem[i]
        if r == 1:  # a block barrier is the block's own, even with the cluster's threads in one scheduler
            cuda.syncthreads()
            cuda.syncthreads()
        smem[1024 + t] = float16(r + 1)
        cluster_sync()
        own[b] = smem[1024 + t]
        ranks[b] = r
        cluster_sync()  # the peer may still be reading: neither block leaves first

    return probe


@SIM
def test_cluster_twins_multicast_to_both_blocks_and_arrive_remotely(fresh_seed):
    """The multicast copy lands in both blocks' shared memory at the offset named (128-byte
    swizzled: `_swizzled`, from the ISA's description) and counts its bytes on both blocks'
    barrier at the same offset (each barrier's 2 KiB come from two blocks' copies: a block's
    consumers could not start on its own copy alone); each block's barrier 1 completes with
    one arrival from each block; ranks are x-fastest; each block has shared memory of its own.
    A grid that is not whole clusters, or a cluster kernel not run as clusters, is refused."""
    from perfkit.kernels._ptx_hopper import TensorMap2D, clustered

    g = np.random.default_rng(fresh_seed).uniform(-1, 1, (16, 64)).astype(np.float16)
    tmap = TensorMap2D(g, (64, 16), 128, (64, 8))
    out = np.full((4, 1024), np.nan, np.float16)
    ranks = np.full(4, 9, np.uint32)
    own = np.zeros(4, np.float16)
    kern = clustered(_cluster_probe(), (2, 1, 1))
    kern[4, 32, 0, 4096](tmap, out, ranks, own)
    want = _swizzled(g).reshape(-1)
    for b in range(4):
        np.testing.assert_array_equal(out[b], want, err_msg=f"block {b}")
    assert ranks.tolist() == [0, 1, 0, 1] and own.tolist() == [1, 2, 1, 2]
    with pytest.raises(RuntimeError, match=r"not whole clusters of \(2, 1, 1\)"):
        kern[3, 32, 0, 4096](tmap, out, ranks, own)
    with pytest.raises(RuntimeError, match="ran the blocks one by one"):
        _cluster_probe()[2, 32, 0, 4096](tmap, out, ranks, own)


@SIM
def test_a_cluster_whose_threads_cannot_go_on_raises_naming_each_block():
    """Block 1 waits on a barrier no thread arrives on; block 0 waits for it at the cluster
    barrier: the scheduler (one for the cluster's blocks) says so, block by block."""
    from numba import uint64
    from perfkit._simspeed import DeadlockError
    from perfkit.kernels._ptx_hopper import cluster_ctarank, cluster_dims, cluster_sync, clustered, mbar_init, mbar_wait

    @cuda.jit
    def stuck(out):
        cluster_dims(2, 1, 1)
        bars = cuda.shared.array(1, uint64)
        if cuda.threadIdx.x == 0:
            mbar_init(bars, 0, 1)
        cluster_sync()
        if cluster_ctarank() == 1:
            mbar_wait(bars, 0, 0)
        cluster_sync()

    with pytest.raises(DeadlockError, match=r"(?s)cluster of 2 blocks.*\(block 1 of the cluster\) mbarrier bars\[0\]"
                                            r".*\(block 0 of the cluster\) barrier\.cluster \(64 threads.*32 of 64"):
        clustered(stuck, (2, 1, 1))[2, 32](np.zeros(1))


# The rung's cluster mechanisms one at a time, on any backend (a GPU runs the real PTX, a hung
# wait traps after MBAR_WAIT_LIMIT_NS): rung 24 hung on the H200 (2026-11-27) with no message, so
# which of these fails there says what the rung does wrong.  Clusters of (1, 2, 1) as the rung's.
# Which of them a GPU window runs, and how (one process each), is listed in tools/gpu_window.sh.
HOPPER_GPU = pytest.mark.skipif(not backend.is_simulator() and (backend.device().compute_capability or (0, 0)) < (9, 0),
                                reason="thread-block clusters, TMA multicast: Hopper (sm_90) and later")


def _probe_kernels():
    """Four (1, 2, 1)-cluster kernels of 32 threads a block (built once a test: the simulator's
    clustered() marks the kernel's function).  ``ranks``: each block's cluster_ctarank, after a
    cluster barrier.  ``remote``: each block's thread 0 arrives on barrier 0 (count 2) of both
    blocks (mapa + remote arrive), every thread waits.  ``multicast(late)``: block r copies rows
    32r..32r + 31 of a 64 x 64 float16 matrix (one (64, 32) box, 4 KiB) to byte 4096 r of both
    blocks' ring (1024-byte aligned at run time, as the rung's) on barrier 0, which expects 8 KiB
    a block, then copies its shared tile out; ``late``: the barrier's expect_tx comes after a
    cluster barrier that follows both copies' issue, so the peer's bytes may land before the
    bytes are expected (the transaction count below zero, which the rung's protocol allows and
    CUTLASS's relies on)."""
    from numba import uint32, uint64
    from perfkit.kernels._ptx_hopper import (cluster_ctarank, cluster_dims, cluster_sync, clustered,
                                             fence_mbarrier_init, mbar_arrive_cluster, mbar_arrive_expect_tx,
                                             mbar_init, mbar_wait, smem_addr, tma_load_2d_multicast)

    @cuda.jit
    def ranks(out):
        cluster_dims(1, 2, 1)
        cluster_sync()
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.y] = cluster_ctarank()
        cluster_sync()

    @cuda.jit
    def remote(out):
        cluster_dims(1, 2, 1)
        bars = cuda.shared.array(1, uint64)
        t = cuda.threadIdx.x
        if t == 0:
            mbar_init(bars, 0, 2)
            fence_mbarrier_init()
        cluster_sync()
        if t == 0:
            mbar_arrive_cluster(bars, 0, 0)
            mbar_arrive_cluster(bars, 0, 1)
        mbar_wait(bars, 0, 0)
        if t == 0:
            out[cuda.blockIdx.y] = cluster_ctarank() + 1
        cluster_sync()  # the peer may still arrive on this block's barrier

    def multicast(late):
        @cuda.jit
        def kern(tmap, out):
            cluster_dims(1, 2, 1)
            smem = cuda.shared.array(0, float16)
            bars = cuda.shared.array(1, uint64)
            t = cuda.threadIdx.x
            r = cluster_ctarank()
            pad = (uint32(1024) - (smem_addr(smem) & uint32(1023))) & uint32(1023)
            if t == 0:
                mbar_init(bars, 0, 1)
                fence_mbarrier_init()
            cluster_sync()
            if t == 0:
                if not late:
                    mbar_arrive_expect_tx(bars, 0, 8192)
                tma_load_2d_multicast(smem, pad + uint32(4096 * r), tmap, 0, 32 * r, bars, 0, 3)
            if late:
                cluster_sync()  # both copies issued before either block expects their bytes
                if t == 0:
                    mbar_arrive_expect_tx(bars, 0, 8192)
            mbar_wait(bars, 0, 0)
            for i in range(t, 4096, 32):
                out[cuda.blockIdx.y, i] = smem[pad // 2 + i]
            cluster_sync()
        return clustered(kern, (1, 2, 1))

    return {"ranks": clustered(ranks, (1, 2, 1)), "remote": clustered(remote, (1, 2, 1)),
            "multicast": multicast(False), "multicast_late": multicast(True)}


@HOPPER_GPU
def test_tma_probe_a_box_wholly_outside_the_array_lands_zeros_and_completes_its_bytes():
    """Rung 24's padding block, and its second half of B's last k-tile when that k-tile has 32
    rows or fewer, copy boxes that lie wholly outside A or B: the copy engine must still write
    zeros and complete the box's bytes on the barrier (else that block's consumers wait forever;
    on a GPU the bounded wait traps).  A (64, 32) box at row 64 of a 16-row matrix, over shared
    memory poisoned with NaN (fenced for the async proxy before the copy is issued)."""
    from numba import uint32, uint64
    from perfkit.kernels._ptx_hopper import (fence_mbarrier_init, fence_proxy_async, mbar_arrive_expect_tx,
                                             mbar_init, mbar_wait, smem_addr, tensor_map_2d, tma_load_2d)

    @cuda.jit
    def outside(tmap, out):
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(1, uint64)
        t = cuda.threadIdx.x
        pad = (uint32(1024) - (smem_addr(smem) & uint32(1023))) & uint32(1023)
        for i in range(t, 2048, 32):
            smem[pad // 2 + i] = float16(np.nan)
        fence_proxy_async()
        if t == 0:
            mbar_init(bars, 0, 1)
            fence_mbarrier_init()
        cuda.syncthreads()
        if t == 0:
            mbar_arrive_expect_tx(bars, 0, 4096)
            tma_load_2d(smem, pad, tmap, 0, 64, bars, 0)
        mbar_wait(bars, 0, 0)
        for i in range(t, 2048, 32):
            out[i] = smem[pad // 2 + i]

    g = np.ones((16, 64), np.float16)
    tmap = tensor_map_2d(cuda.to_device(g), (64, 16), 128, (64, 32))
    out = cuda.to_device(np.full(2048, np.nan, np.float16))
    outside[1, 32, 0, 4096 + 1024](tmap, out)
    assert (out.copy_to_host() == 0).all()


@pytest.mark.skipif(backend.is_simulator() or (backend.device().compute_capability or (0, 0)) < (9, 0),
                    reason="asks the driver of a Hopper GPU")
def test_cluster_rung_fits_the_gpu_as_clusters_of_two():
    """On a GPU: the rung's kernel, opted in to its 193 KiB of dynamic shared memory as its
    launch does, can have clusters of (1, 2, 1) blocks resident (cuOccupancyMaxActiveClusters
    through cuda.core), about one a pair of SMs: zero would mean that no cluster of this launch
    can ever start, whatever the kernel does."""
    from cuda.core import Device, LaunchConfig
    from numba.cuda.cudadrv import driver as drv

    p = gemm.Problem(4096, 4096, 4096, "float16")
    launch = CLUSTER.plan(p, CLUSTER.host_buffers(p))[0]
    k = launch.kernel.compile(tuple(launch.kernel.typeof_pyval(a) for a in launch.args))
    f = k._codelibrary.get_cufunc()
    drv.driver.cuKernelSetAttribute(drv.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    int(launch.shared_bytes), f.handle, f.device.id)
    cfg = LaunchConfig(grid=(16, 16, 1), cluster=(1, 2, 1), block=(384, 1, 1), shmem_size=int(launch.shared_bytes))
    n = f.kernel.occupancy.max_active_clusters(cfg, stream=Device().default_stream)
    sms = backend.device().sm_count or 0
    assert n >= 1, f"no cluster of two blocks fits ({sms} SMs, {launch.shared_bytes} bytes of dynamic shared memory)"
    assert 2 * n <= sms


@HOPPER_GPU
def test_cluster_probe_blocks_run_as_clusters():
    """Grid (1, 4): blocks y = 0..3 are ranks 0, 1, 0, 1 (a launch that ignored the kernel's
    .reqnctapercluster would give every block rank 0)."""
    out = cuda.to_device(np.full(4, 9, np.uint32))
    _probe_kernels()["ranks"][(1, 4), 32](out)
    assert out.copy_to_host().tolist() == [0, 1, 0, 1]


@HOPPER_GPU
def test_cluster_probe_remote_arrive_completes_both_blocks_barriers():
    out = cuda.to_device(np.zeros(4, np.uint32))
    _probe_kernels()["remote"][(1, 4), 32](out)
    assert out.copy_to_host().tolist() == [1, 2, 1, 2]


@HOPPER_GPU
@pytest.mark.parametrize("late", [False, True], ids=["expect_first", "bytes_before_expect"])
def test_cluster_probe_multicast_lands_in_both_blocks(late, fresh_seed):
    from perfkit.kernels._ptx_hopper import tensor_map_2d

    g = np.random.default_rng(fresh_seed).uniform(-1, 1, (64, 64)).astype(np.float16)
    dg = cuda.to_device(g)
    tmap = tensor_map_2d(dg, (64, 64), 128, (64, 32))
    out = cuda.to_device(np.full((4, 4096), np.nan, np.float16))
    _probe_kernels()["multicast_late" if late else "multicast"][(1, 4), 32, 0, 8192 + 1024](tmap, out)
    want = _swizzled(g).reshape(-1)
    got = out.copy_to_host()
    for b in range(4):
        np.testing.assert_array_equal(got[b], want, err_msg=f"block {b}")


# --- rung 24's hang bisected (docs/CLUSTER_HANG.md) ------------------------------------------------
# Every shape that hung (256x64x128 with 2 stages, 1x8x8, 130x40x16 with 4) has no more k-tiles than
# stages, so the producer never waits on a phase that is not already done: the only bounded waits
# that could time out are the consumers' "full" waits, and none trapped in 30 s.  So either the
# threads are stuck where nothing is bounded (the consumers' setmaxnreg.inc retry loop, the exit's
# barrier.cluster.wait, a launch that never starts) or the trap does not end the launch.  These
# probes tell which: one process each (tools/gpu_window.sh), the wait limit lowered to 1 s (set
# before the first kernel of the process is typed: mbar_wait's PTX reads it then), each launch
# watched from the host (a hang is reported, with how far each role of each block got, within
# ~7 s instead of hanging the process).  In the simulator the same kernels run to the end.
PROBE_WAIT_LIMIT_NS = 1_000_000_000
#: the rung's kernel (_cluster_kernel's switches; STAGES where not 2) at 256 x 64 x 128, BN = 64:
#: one cluster of two real blocks, 2 k-tiles, no box leaving A or B (the protocol alone); and
#: ``laddered``: the ladder's kernel (BN 256, 4 stages) at its hung test's 130 x 40 x 16 (boxes
#: partly and wholly outside A and B), traced
BISECT = {"full": {}, "no_mma": {"no_mma": True}, "no_setmaxnreg": {"no_setmaxnreg": True},
          "producer_tail": {"producer_tail": True}, "no_multicast": {"no_multicast": True},
          "ws_in_cluster": {"no_multicast": True, "no_remote": True}, "one_stage_no_opt_in": {"STAGES": 1},
          "bare": {"no_mma": True, "no_multicast": True, "no_remote": True, "no_setmaxnreg": True},
          "laddered": {"BN": 256, "STAGES": 4, "shape": (130, 40, 16)}}  # the ladder's kernel, its hung test's shape


def _watch(launch, wait_s=7.0):
    """Launch, then watch the launch from the host without blocking on it: ("done" | "trapped:
    <error>" | "hung", seconds since the launch returned).  An event recorded after the launch is
    queried (cuEventQuery: not ready, done, or the launch's error once a trap ended it); still
    not done after ``wait_s`` it is "hung", and the process will leave with os._exit(1) once
    pytest has reported (a context whose kernel still runs may not tear down).  The simulator
    runs the launch to its end (or raises) inside ``launch()``."""
    import atexit
    import os
    import time

    launch()  # compiles first, then enqueues
    t0 = time.monotonic()
    if backend.is_simulator():
        return "done", 0.0
    evt = cuda.event(timing=False)
    evt.record()
    while True:
        try:
            if evt.query():
                return "done", time.monotonic() - t0
        except Exception as e:  # the launch failed: a trap (or another fault) ended it
            return f"trapped: {type(e).__name__}: {e}", time.monotonic() - t0
        if time.monotonic() - t0 > wait_s:
            atexit.register(os._exit, 1)
            return "hung", time.monotonic() - t0
        time.sleep(0.02)


@HOPPER_GPU
def test_cluster_probe_a_lost_arrival_traps(monkeypatch):
    """Whether the bounded wait's trap ends a cluster launch at all (never seen on a GPU: no rung
    ever lost an arrival there): a (1, 2, 1) cluster whose rank-1 block waits on an mbarrier no
    one arrives on while rank 0 waits for it at the exit's cluster barrier (the rung's state if
    one block's consumers lost their stage).  On a GPU the launch must fail within ~1 s (the
    lowered limit; ~10 s if the limit was compiled before the patch): "hung" means the trap does
    not surface, and then a rung hang says nothing about where.  The simulator raises its
    DeadlockError."""
    from numba import uint64
    from perfkit.kernels import _ptx_hopper as X

    monkeypatch.setattr(X, "MBAR_WAIT_LIMIT_NS", PROBE_WAIT_LIMIT_NS)

    @cuda.jit
    def lost(out):
        X.cluster_dims(1, 2, 1)
        bars = cuda.shared.array(1, uint64)
        if cuda.threadIdx.x == 0:
            X.mbar_init(bars, 0, 1)
            X.fence_mbarrier_init()
        X.cluster_sync()
        if X.cluster_ctarank() == 1:
            X.mbar_wait(bars, 0, 0)
        out[cuda.blockIdx.y] = 1
        X.cluster_sync()

    kern = X.clustered(lost, (1, 2, 1))
    out = cuda.to_device(np.zeros(2, np.int32))
    if backend.is_simulator():
        from perfkit._simspeed import DeadlockError
        with pytest.raises(DeadlockError, match=r"mbarrier bars\[0\]"):
            kern[(1, 2), 32](out)
        return
    outcome, secs = _watch(lambda: kern[(1, 2), 32](out), wait_s=14.0)
    assert outcome.startswith("trapped"), f"{outcome} after {secs:.1f} s: a lost arrival does not end the launch"
    print(f"trapped after {secs:.1f} s: {outcome}")


@HOPPER_GPU
@pytest.mark.parametrize("variant", list(BISECT))
def test_cluster_bisect_probe(variant, fresh_seed, monkeypatch):
    """The rung's kernel with one mechanism changed (``BISECT``; ``full``: as the rung runs it),
    traced: progress words after C in mapped host memory say how far each role of each block
    got (``hopper_cluster.TRACE_SLOTS``).  Passes when the launch completes and C is right (zero for ``no_mma``);
    otherwise the failure says "trapped" (a lost arrival or lost bytes: the protocol) or "hung"
    (an unbounded wait: setmaxnreg, the cluster barrier, the launch) and prints the trace.
    What each result means: docs/CLUSTER_HANG.md."""
    from perfkit.kernels import _ptx_hopper as X
    from perfkit.kernels._dynsmem import DynamicSharedLaunch
    from perfkit.kernels.gemm import hopper_cluster as H

    monkeypatch.setattr(X, "MBAR_WAIT_LIMIT_NS", PROBE_WAIT_LIMIT_NS)
    opts = dict(BISECT[variant])
    stages, bn, (m, n, k) = opts.pop("STAGES", 2), opts.pop("BN", 64), opts.pop("shape", (256, 64, 128))
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    v = gemm.Cluster(BN=bn, STAGES=stages)
    gx, gy = v.grid(p)
    W = H.TRACE_WORDS
    c = cuda.mapped_array(m * n + W * gx * gy, np.float32)
    c[:m * n] = np.nan
    c[m * n:] = 0
    a, b = cuda.to_device(x["a"]), cuda.to_device(x["b"])
    tma = X.tensor_map_2d(a, (k, m), 2 * k, (H.BK, H.BM))
    tmb = X.tensor_map_2d(b, (n, k), 2 * n, (64, H.HALF_K))
    kern = H._cluster_kernel(bn, stages, trace=True, **opts)
    launch = DynamicSharedLaunch(kern, (gx, gy), v.threads(), (tma, tmb, c, m, n, k), v.dynamic_shared_bytes())
    trace = c[m * n:].reshape(gx * gy, W)
    outcome, secs = _watch(launch)
    got = np.array(trace)
    lines = [f"block {i}: " + ", ".join(f"{what} {got[i, s]:g}" for s, what in H.TRACE_SLOTS.items())
             for i in range(gx * gy)]
    print(f"{variant}: {outcome} after {secs:.1f} s; {v.dynamic_shared_bytes()} B dynamic shared\n" + "\n".join(lines))
    assert outcome == "done", f"{variant}: {outcome} after {secs:.1f} s\n" + "\n".join(lines)
    n_k = -(-k // H.BK)
    want = {16: 1, 17: 1, 0: 1, 1: 1, 2: n_k, 3: 1, 4: 1, 5: 1, 6: n_k, 7: n_k, 8: n_k, 9: n_k, 10: n_k, 11: n_k,
            12: 1, 13: 1, 14: 1, 15: 0}
    if opts.get("producer_tail"):
        want[15] = 1
    for s, w in want.items():
        assert (got[:, s] == w).all(), f"{variant}: {H.TRACE_SLOTS[s]} {got[:, s]} (want {w})\n" + "\n".join(lines)
    out = np.array(c[:m * n]).reshape(m, n)
    ref = np.zeros((m, n)) if opts.get("no_mma") else x["a"].astype(np.float64) @ x["b"].astype(np.float64)
    res = p.check(out, ref)
    assert res.ok, f"{variant}: {res.message}"


def test_cluster_is_not_launched_on_a_gpu_until_its_hang_is_understood(monkeypatch):
    """On a real GPU the rung's launch raises (UnsupportedProblem, which a sweep keeps as an
    'unsupported' row) instead of hanging the process with no error; the variable lets the
    GPU probes launch it; the simulator and the compiler never refuse."""
    from perfkit.kernels.gemm import hopper_cluster as H

    p = gemm.Problem(130, 40, 16, "float16")
    launch = CLUSTER.plan(p, CLUSTER.host_buffers(p))[0]
    monkeypatch.delenv(H.LAUNCH_HUNG_ENV, raising=False)
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    with pytest.raises(UnsupportedProblem, match=r"hung on the H200 .* and the H100 .*CLUSTER_HANG.md.*PERFKIT_LAUNCH_HUNG=1"):
        launch()  # raises before any driver call: this machine has no GPU
    monkeypatch.setenv(H.LAUNCH_HUNG_ENV, "1")
    launched = []
    monkeypatch.setattr(H.DynamicSharedLaunch, "__call__", lambda self: launched.append(self))
    launch()
    assert launched == [launch]


#: the full rung on a real GPU only where asked (it hung there: docs/CLUSTER_HANG.md)
CLUSTER_RUNS = pytest.mark.skipif(not backend.is_simulator() and os.environ.get("PERFKIT_LAUNCH_HUNG") != "1",
                                  reason="rung 24 hung on both GPUs: PERFKIT_LAUNCH_HUNG=1 launches it")


@CLUSTER_RUNS
@pytest.mark.parametrize("shape", [(256, 64, 128), (1, 8, 8), (100, 56, 136), (300, 56, 40)],
                         ids=["whole_tiles", "1x8x8_padding_peer", "both_consumers_ring_wraps",
                              "odd_m_tiles_two_clusters"])
def test_cluster_rung_at_awkward_shapes(shape, fresh_seed):
    """In the simulator (the two blocks of a cluster run together; 64-column tiles, 2 stages):
    256 x 64 x 128: one cluster of whole tiles, no box leaving A or B (on a GPU: the protocol
    alone, apart from the copy engine's edges); one m tile gets a padding peer past m, which
    loads its half of B for its partner and writes nothing (its boxes, and the second half of
    B's k-tile when k <= 32, lie wholly outside A and B); 100 x 56 x 136: 3 k-tiles through 2
    stages, each stage refilled only when all four consumer warpgroups of the pair released it;
    300 rows: 3 m tiles (an odd count) padded to 2 clusters, the second a real block and a
    padding one; NaN-poisoned C, a float64 reference."""
    m, n, k = shape
    p = gemm.Problem(m, n, k, "float16")
    x = p.make_inputs(fresh_seed)
    v = gemm.Cluster(BN=64, STAGES=2)
    out = v.run(p, x)
    res = p.check(out, x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, f"{shape}: {res.message}"
    assert v.grid(p)[1] % 2 == 0 and v.grid(p)[1] == 2 * -(-m // 256)


@CLUSTER_RUNS
def test_cluster_rung_as_laddered(fresh_seed):
    """The rung as the ladder holds it (m64n256k16, 128 x 256 tiles, 4 stages): one cluster."""
    p = gemm.Problem(130, 40, 16, "float16")
    x = p.make_inputs(fresh_seed)
    res = p.check(CLUSTER.run(p, x), x["a"].astype(np.float64) @ x["b"].astype(np.float64))
    assert res.ok, res.message


def test_cluster_grid_is_whole_clusters_and_refusals():
    p = gemm.Problem(4096, 4096, 4096, "float16")
    assert CLUSTER.grid(p) == (16, 32) and CLUSTER.grid(gemm.Problem(300, 264, 64, "float16")) == (2, 4)
    old = backend.DeviceInfo(name="NVIDIA A100-SXM4-80GB", simulated=False, compute_capability=(8, 0))
    with backend.planning_for(old):
        with pytest.raises(UnsupportedProblem, match=r"needs a Hopper GPU \(sm_90: thread-block clusters, TMA "
                                                     r"multicast.* is sm_80"):
            CLUSTER.supports(p)
    h100 = backend.DeviceInfo(name="NVIDIA H100", simulated=False, compute_capability=(9, 0), sm_count=132)
    with backend.planning_for(h100):
        CLUSTER.supports(gemm.Problem(37, 256, 256, "float16"))
        with pytest.raises(UnsupportedProblem, match=r"multiples of 16 bytes; n=41 .* use rung 20 wgmma"):
            CLUSTER.supports(gemm.Problem(64, 41, 64, "float16"))
        with pytest.raises(UnsupportedProblem, match="float16 inputs"):
            CLUSTER.supports(gemm.Problem(64, 64, 64))
        with pytest.raises(UnsupportedProblem, match=r"227 KiB"):
            gemm.Cluster(STAGES=5).supports(gemm.Problem(64, 64, 64, "float16"))
        for q in gemm.GPU_SWEEP + gemm.SIM_SWEEP:
            if q.dtype == "float16":
                CLUSTER.supports(q)
    assert CLUSTER.example(gemm.Problem(37, 41, 29)) == gemm.Problem(37, 48, 32, "float16")


def _cuobjdump_elf(cubin: bytes) -> str:
    import os
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        return subprocess.run([anatomy.tool_path("cuobjdump"), "-elf", f.name], capture_output=True, text=True,
                              timeout=120, check=True).stdout
    finally:
        os.unlink(f.name)


def test_cluster_compiles_for_sm90a_with_its_cluster_shape_multicast_and_cluster_barriers():
    """The build check: the kernel's PTX declares its cluster (.reqnctapercluster 1, 2, 1 and
    .explicitcluster: the annotation of this kernel alone); the SASS has the multicast TMA loads
    (UTMALDG.2D.MULTICAST), the cluster barrier (UCGABAR_ARV, UCGABAR_WAIT), the remote arrives
    (SYNCS.ARRIVE.TRANS64.RED) and rung 22's HGMMA.64x256x16.F32 and USETMAXREG; the only
    MEMBAR.ALL.GPU are the two cluster barriers' (a cluster-scope release on each remote arrive
    would put one in the loop); no C7504/C7508/C7509/C7510, 168 registers, no spills; rung 22's
    shared memory: one block of 12 warps an SM."""
    r = anatomy.inspect(CLUSTER, gemm.Problem(4096, 4096, 4096, "float16"), cc=(9, 0))
    assert r.arch == "sm_90a"
    _assert_bounded_waits(r)
    assert re.search(r"\.reqnctapercluster 1, 2, 1\b", r.ptx) and ".explicitcluster" in r.ptx
    # ... and the cubin the driver loads keeps it (past LTO and nvJitLink): the kernel attributes a
    # launch with no cluster attribute (numba-cuda's, through cuda.core's cuLaunchKernelEx) takes
    # the cluster shape from
    elf = _cuobjdump_elf(r.cubin)
    assert "EIATTR_EXPLICIT_CLUSTER" in elf and re.search(r"EIATTR_CTA_PER_CLUSTER\s+Format:\s+\S+\s+"
                                                          r"Value:\s+0x1 0x2 0x1\b", elf), elf[-2000:]
    assert re.findall(r"\bUTMALDG\.2D\.MULTICAST\b", r.sass) and re.findall(r"\bUTMALDG\.2D \[", r.sass)
    assert re.findall(r"\bHGMMA\.64x256x16\.F32\b", r.sass)
    for op in ("UCGABAR_ARV", "UCGABAR_WAIT", "SYNCS.ARRIVE.TRANS64.RED", "SYNCS.EXCH.64",
               "SYNCS.PHASECHK.TRANS64.TRYWAIT", "USETMAXREG.TRY_ALLOC.CTAPOOL", "USETMAXREG.DEALLOC.CTAPOOL"):
        assert op in r.sass, op
    assert len(re.findall(r"\bMEMBAR\.ALL\.GPU\b", r.sass)) == len(re.findall(r"\bUCGABAR_ARV\b", r.sass)) == 2
    # the cluster's protocol in the code's order: every mbarrier initialized, the inits fenced for
    # the cluster, then the cluster barrier, before the first multicast copy or remote arrive can
    # reach a peer's barriers; the last cluster barrier after the last of them (no block ends
    # while its peer may still arrive on its barriers or copy into its shared memory)
    at = [m.start() for m in re.finditer(r"mbarrier\.init", r.ptx)]
    fence, bars = r.ptx.index("fence.mbarrier_init.release.cluster"), [m.start() for m in re.finditer(
        r"barrier\.cluster\.arrive", r.ptx)]
    peer = [m.start() for m in re.finditer(r"multicast::cluster|mbarrier\.arrive\.shared::cluster", r.ptx)]
    assert max(at) < fence < bars[0] < min(peer) and max(peer) < bars[-1], (at, fence, bars, peer[:2], peer[-2:])
    ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", r.sass)]
    first_bar, last_bar = ops.index("UCGABAR_ARV"), len(ops) - 1 - ops[::-1].index("UCGABAR_WAIT")
    sass_peer = [i for i, o in enumerate(ops) if o in ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED.A1T0")]
    inits = [i for i, o in enumerate(ops) if o == "SYNCS.EXCH.64"]
    assert max(inits) < first_bar < min(sass_peer) and max(sass_peer) < last_bar
    bad = [ln for ln in r.ptxas_log.splitlines() if re.search(r"C75(04|08|09|10)", ln)]
    assert not bad, bad
    assert r.registers == 168 and r.spill_store_bytes == 0 and r.stack_bytes == 0
    assert r.dynamic_shared_bytes == 4 * 49152 + 1024
    assert r.static_shared_bytes - r.reserved_shared_bytes == CLUSTER.shared_bytes() == 64
    assert r.occupancy.blocks_per_sm == 1 and r.occupancy.active_warps == 12, r.occupancy


def test_the_model_reads_the_cluster_rungs_multicast_as_half_the_l2_traffic_of_b():
    """Rung 24's L2 -> SM bytes: A once a block, B once a cluster of two (rung 22: once a block),
    C once: at 4096^3, 0.54 + 0.54 + 0.07 GB against rung 22's 0.54 + 1.07 + 0.07; the model's L2
    leg follows and DRAM is what it was (multicast saves L2 bandwidth, not DRAM reads).  Both
    sizes on both GPUs estimate without error, tensor-bound."""
    for gpu in ("h100-sxm", "h200"):
        for s in (4096, 8192):
            p = gemm.Problem(s, s, s, "float16")
            e = model.estimate(CLUSTER, p, gpu)
            assert np.isfinite(e.seconds) and e.bound == "tensor", (gpu, s, e.legs)
            b_half = s * s * 2 * (s // 128) / 2  # B's bytes once a cluster fewer
            assert e.launches[0]["l2_bytes"] == pytest.approx(WS.traffic(p).l2_bytes - b_half, rel=1e-9)
    p = gemm.Problem(4096, 4096, 4096, "float16")
    e, ws = model.estimate(CLUSTER, p, "h100-sxm"), model.estimate(WS, p, "h100-sxm")
    assert e.legs["l2"] == pytest.approx(ws.legs["l2"] * 1.141 / 1.678, rel=1e-3)
    assert e.legs["dram"] == pytest.approx(ws.legs["dram"], rel=1e-6)
