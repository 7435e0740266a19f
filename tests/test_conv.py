"""Every conv rung against an independent float64 reference on a covering set of awkward cases
(both layouts; 1x1, 3x3, 5x5, 7x7 and r != s filters; stride 1 and 2; pad 0, 1, 3; h != w;
c and k of 1, 3, 17; n = 1; float16), fresh random inputs, NaN-poisoned outputs; the reference
itself against torch in float64; every bad input; the sweep; compile checks at sm_90."""
import numpy as np
import pytest

from perfkit import anatomy, backend, banks
from perfkit.kernels import conv, peers
from perfkit.kernels.base import ProblemError, UnsupportedProblem, registry_check
from perfkit.kernels.conv import _common as C

# (n, c, h, w, k, r, s, stride, pad, dtype, layout): together they cover every item of the list
CASES = {
    "3x3_p1_c3_k17_nchw": (1, 3, 7, 5, 17, 3, 3, 1, 1, "float32", "NCHW"),
    "1x1_s2_c17_k3_nhwc": (2, 17, 6, 9, 3, 1, 1, 2, 0, "float32", "NHWC"),
    "5x5_p3_c1_nhwc": (1, 1, 6, 8, 3, 5, 5, 1, 3, "float32", "NHWC"),
    "7x7_s2_p3_k1_nchw": (2, 3, 9, 7, 1, 7, 7, 2, 3, "float32", "NCHW"),
    "3x2_s2_c4_vec_nhwc": (1, 4, 5, 6, 5, 3, 2, 2, 1, "float32", "NHWC"),
    "f16_3x3_c8_k17_nhwc": (1, 8, 5, 6, 17, 3, 3, 1, 1, "float16", "NHWC"),
    "f16_1x3_s2_nchw": (2, 3, 6, 5, 3, 1, 3, 2, 0, "float16", "NCHW"),
    "1x1_two_m_tiles": (1, 3, 9, 8, 3, 1, 1, 1, 0, "float32", "NCHW"),  # M = 72: two 64-row tiles
}
# the tensor-core rung takes float16: it runs the float16 twin of these (both layouts, 1x1 to 7x7)
# (the simulator's mma emulation is slow: reductions c*r*s of at most 27, two k-steps)
TC_CASES = ["3x3_p1_c3_k17_nchw", "1x1_s2_c17_k3_nhwc", "5x5_p3_c1_nhwc", "f16_1x3_s2_nchw", "1x1_two_m_tiles"]


def _problem(case, dtype=None):
    n, c, h, w, k, r, s, st, pd, dt, layout = CASES[case]
    return conv.Problem(n, c, h, w, k, r, s, stride=st, pad=pd, dtype=dtype or dt, layout=layout)


def _ref_torch(p, x):
    """float64 torch on the CPU, our layout converted explicitly (independent of conv.py)."""
    torch = pytest.importorskip("torch")
    xs, ws = x["x"].astype(np.float64), x["w"].astype(np.float64)
    if p.layout == "NHWC":
        xs, ws = xs.transpose(0, 3, 1, 2), ws.transpose(0, 3, 1, 2)
    y = torch.nn.functional.conv2d(torch.from_numpy(np.ascontiguousarray(xs)),
                                   torch.from_numpy(np.ascontiguousarray(ws)),
                                   stride=p.stride, padding=p.pad).numpy()
    return y.transpose(0, 2, 3, 1) if p.layout == "NHWC" else y


def _run_and_check(v, p, seed):
    x = p.make_inputs(seed)
    out = v.run(p, x)  # prepare() poisons y (and any workspace) with NaN first
    assert out.shape == p.output_specs()["y"][0] and out.dtype == np.dtype(p.out_dtype)
    res = p.check(out, p.reference(x))
    assert res.ok, f"{v.label} {p.label} seed={seed}: {res.message}"


TENSOR = [v for v in conv.LADDER if v.name == "tensor_core" or v.name.startswith("tc_")]
SIMT = [v for v in conv.LADDER if v not in TENSOR and v.name != "winograd_f4"]  # f4: below, one warp per block
RUNG = {v.name: v for v in conv.LADDER}
#: the NHWC 16-byte-chunk rungs (9 and up): c % 8 == 0.  Together: two m tiles and two n tiles
#: with partial edges (M = 72, K = 70), a channel count that leaves a partial k-tile (40 = 32 + 8),
#: stride 2 with r != s and padding on every side, n = 2; stride 3 with a padding wider than the
#: filter (1x3, pad 2: the first and last output rows see only padding, so every mask bit of
#: their A rows is 0 and y there must be written as 0), odd h
TC_NHWC_CASES = {
    "1x1_s2_c40_k70_two_tiles": (1, 40, 17, 16, 70, 1, 1, 2, 0),
    "3x2_s2_p1_c16_k9_n2": (2, 16, 5, 4, 9, 3, 2, 2, 1),
    "1x3_s3_p2_c16_k8_rows_all_padding": (2, 16, 9, 5, 8, 1, 3, 3, 2),
}
#: rungs 9-15 (c % 8 == 0); rung 16 tc_padded pads any c to whole chunks first (its own tests below)
CHUNKED = [v for v in TENSOR if v.name not in ("tensor_core", "tc_padded")]
#: the ladder's own rungs: at these small problems tc_warptile, tc_epilogue and tc_padded choose one
#: warp per block (a 64x64 tile: the least area on the busiest SM, conv.tensor.block_tile), so their
#: per-problem choice runs here too (asserted, so a change of rule does not silently move this)
CHUNKED_SIM = CHUNKED + [RUNG["tc_padded"]]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("v", SIMT, ids=lambda v: v.name)
def test_rung_is_correct(v, case, fresh_seed):
    p = _problem(case)
    if v.name.startswith("winograd") and (p.r, p.s, p.stride) != (3, 3, 1):
        with pytest.raises(UnsupportedProblem, match="3x3 filters at stride 1"):
            v.run(p, p.make_inputs(0))
        return
    _run_and_check(v, p, fresh_seed)


@pytest.mark.parametrize("case", TC_CASES)
def test_tensor_core_rung_is_correct(case, fresh_seed):
    _run_and_check(RUNG["tensor_core"], _problem(case, "float16"), fresh_seed)


@pytest.mark.parametrize("case", [(2, 5, 6, 9, 68, 3, 3, 1, 0, "float32", "NHWC"),
                                  (1, 3, 9, 7, 70, 3, 3, 1, 1, "float16", "NCHW")], ids=["vec_nhwc", "scalar_nchw"])
def test_winograd_tiled_edges(case, fresh_seed):
    """The warp-tiled batched GEMM at a small configuration (one warp: 64x32 tiles), so that the
    simulator sees two row tiles (k = 68, 70 > 64), a partial column tile, a partial k-tile (c = 3,
    5 < 8), the 16-byte path (k and the tile count t = 16 multiples of 4) and the scalar one (k = 70,
    t = 20 with 32 per tile)."""
    v = conv.WinogradTiled(WARPS_M=1, WARPS_N=1)
    _run_and_check(v, conv.Problem(*case), fresh_seed)


@pytest.mark.parametrize("case", [(1, 3, 7, 5, 17, 3, 3, 1, 1, "float32", "NCHW"),
                                  (2, 5, 9, 6, 68, 3, 3, 1, 0, "float16", "NHWC")], ids=["p1_nchw", "two_row_tiles_nhwc"])
def test_winograd_f4_is_correct(case, fresh_seed):
    """F(4x4, 3x3) on the warp-tiled GEMM at one warp per block: partial 4x4 output tiles (p, q
    not multiples of 4), padding, k = 68 over two 64-row tiles; 1x1 and stride 2 refused."""
    v = conv.WinogradF4(WARPS_M=1, WARPS_N=1)
    _run_and_check(v, conv.Problem(*case), fresh_seed)
    with pytest.raises(UnsupportedProblem, match="3x3 filters at stride 1"):
        v.supports(conv.Problem(1, 3, 7, 5, 4, 3, 3, stride=2))


def _f4_in_float32(p, x, w):
    """F(4x4, 3x3) in float32 NumPy, as the kernels do it: the transforms, then the 36 products
    summed over c one channel at a time (the GEMM's FFMA chain, in the same order), then A^T m A."""
    from perfkit.kernels.conv.winograd import _AT4, _BT4, _G4

    tp, tq = -(-p.p // 4), -(-p.q // 4)
    u = np.einsum("ar,kcrs,bs->abkc", _G4, w.astype(np.float32), _G4).astype(np.float32)
    xp = np.zeros((p.n, p.c, 4 * tp + 2, 4 * tq + 2), np.float32)  # padded, and zeros past the last tile
    hh, ww = min(p.h, 4 * tp + 2 - p.pad), min(p.w, 4 * tq + 2 - p.pad)
    xp[:, :, p.pad:p.pad + hh, p.pad:p.pad + ww] = x[:, :, :hh, :ww]
    d = np.stack([np.stack([xp[:, :, 4 * i:4 * i + 6, 4 * j:4 * j + 6] for j in range(tq)], 2) for i in range(tp)], 2)
    v = np.einsum("ai,nctqij,bj->abnctq", _BT4, d, _BT4).astype(np.float32)
    m = np.zeros((6, 6, p.k, p.n, tp, tq), np.float32)
    for c in range(p.c):
        m += u[:, :, :, c, None, None, None] * v[:, :, None, :, c]
    y = np.einsum("ia,abknpq,jb->nkpiqj", _AT4, m, _AT4).astype(np.float32)
    return y.reshape(p.n, p.k, 4 * tp, 4 * tq)[:, :, :p.p, :p.q]


def _worst_over_tolerance(p, y, ref, scale):
    """max |y - ref| / (atol + rtol |ref|) with y and ref brought back to inputs of magnitude 1
    (divided by scale**2: x and w were both scaled), so the problem's check applies as stated."""
    rtol, atol = p.tolerance()
    y, ref = y.astype(np.float64) / scale ** 2, ref / scale ** 2
    return (np.abs(y - ref) / (atol + rtol * np.abs(ref))).max()


@pytest.mark.parametrize("c, hw, k, low, scale", [
    (128, 28, 128, -1.0, 1.0),    # the ResNet-50 stage-2 3x3 layer (n = 1: 100,352 outputs)
    (512, 7, 64, 0.0, 1000.0),    # stage 4's depth, post-ReLU (non-negative) x, magnitude 1000
    (2048, 5, 32, -1.0, 1000.0),  # 4x stage 4's depth: the margin must not shrink with c
], ids=["stage2_c128", "stage4_c512_relu_x1000", "c2048_x1000"])
def test_winograd_f4_float32_error_is_inside_the_tolerance(c, hw, k, low, scale):
    """Evidence for F(4x4)'s accuracy where it is used: its float32 arithmetic (emulated in NumPy,
    the kernels' order) against the float64 reference, at the ResNet-50 layers it serves and
    beyond, with large-magnitude and non-negative inputs.  Why the tolerance holds: the
    transforms' constants (up to 8 in A^T, 5 in B^T, 1/24 in G) amplify each product's rounding
    by a fixed factor, and the c rounded partial sums add like a random walk, so the error grows
    like sqrt(c), as the problem's tolerance does (1e-5 sqrt(9c)); scaling x and w scales the
    error as the output, so magnitude changes nothing.  Measured (seeds 3, 5, 11), worst error over
    the tolerance: 0.40-0.49 at c = 128; 0.09-0.15 at c = 512 with non-negative x (larger outputs,
    so more room under rtol); 0.20-0.35 at c = 2048.  The bound asserted, 0.7, leaves 1.4x."""
    p = conv.Problem(1, c, hw, hw, k, 3, 3, 1, 1)
    g = np.random.default_rng(11)
    x = (g.uniform(low, 1, p.x_shape()) * scale).astype(np.float32)
    w = (g.uniform(-1, 1, p.w_shape()) * scale).astype(np.float32)
    worst = _worst_over_tolerance(p, _f4_in_float32(p, x, w), p.reference({"x": x, "w": w}), scale)
    assert 0.05 < worst < 0.7, worst  # above 0.05: the emulation does round like float32


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_winograd_f4_kernels_at_large_magnitude(layout):
    """The kernels themselves (simulator, one warp per block) at an awkward shape (p, q = 7, 5:
    partial 4x4 tiles; c = 5; k = 9) with x in [-1000, 3000] (a large offset: B^T's 4, -5, 1 rows
    cancel it, the hard case for the transforms) and w in [-1000, 1000], NaN-poisoned output:
    inside the tolerance, and as close to float64 as the NumPy emulation of the same arithmetic."""
    v = conv.WinogradF4(WARPS_M=1, WARPS_N=1)
    p = conv.Problem(1, 5, 7, 5, 9, 3, 3, 1, 1, "float32", layout)
    g = np.random.default_rng()
    x = {"x": g.uniform(-1000, 3000, p.x_shape()).astype(np.float32),
         "w": g.uniform(-1000, 1000, p.w_shape()).astype(np.float32)}
    ref = p.reference(x)
    y = v.run(p, x)
    worst = _worst_over_tolerance(p, y, ref, 1000.0)
    xn, wn = (x["x"].transpose(0, 3, 1, 2), x["w"].transpose(0, 3, 1, 2)) if layout == "NHWC" else (x["x"], x["w"])
    yn = _f4_in_float32(conv.to_layout(p, "NCHW"), xn, wn)
    refn = ref.transpose(0, 3, 1, 2) if layout == "NHWC" else ref
    emul = _worst_over_tolerance(p, yn, refn, 1000.0)
    assert np.isfinite(y).all() and worst < 0.7 and worst < 4 * emul + 0.05, (worst, emul)


@pytest.mark.parametrize("kw, msg", [
    (dict(r=5, s=5, pad=2), "got 5x5: use igemm_regblock"),
    (dict(s=1), "got 3x1: use igemm_regblock"),
    (dict(stride=2), "at stride 2 the 4x4 output tile.*use igemm_regblock"),
])
def test_winograd_f4_refuses_with_its_own_reason(kw, msg):
    args = dict(n=1, c=3, h=9, w=9, k=4, r=3, s=3, stride=1, pad=1)
    p = conv.Problem(**{**args, **kw})
    for v in (RUNG["winograd_f4"], conv.WinogradF4(WARPS_M=1, WARPS_N=1)):
        with pytest.raises(UnsupportedProblem, match=f"winograd_f4.*3x3 filters at stride 1.*{msg}"):
            v.supports(p)
    RUNG["winograd_f4"].supports(conv.Problem(**args))  # and it takes the 3x3 stride-1 twin


@pytest.mark.parametrize("case", TC_NHWC_CASES)
@pytest.mark.parametrize("v", CHUNKED_SIM, ids=lambda v: v.name)
def test_chunked_tensor_core_rungs_are_correct(v, case, fresh_seed):
    p = conv.Problem(*TC_NHWC_CASES[case], dtype="float16", layout="NHWC")
    if hasattr(v, "at"):
        assert (v.at(p).WARPS_M, v.at(p).WARPS_N) == (1, 1)
    _run_and_check(v, p, fresh_seed)


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_tc_warptile_block_tile_is_chosen_for_the_wave_count(gpu):
    """The block tile of rung 13 (and 15) per layer, from the GPU's SM count and occupancy
    (perfkit.specs, perfkit.occupancy): the least output area on the busiest SM."""
    from perfkit.kernels.conv.tensor import block_tile, warptile_choices

    stage2 = conv.to_layout(conv.EXAMPLE_PROBLEM, "NHWC", "float16")  # M = 25088, K = 128
    by = {(c.bm, c.bn): c for c in warptile_choices(stage2, gpu)}
    assert all(c.blocks_per_sm * c.warps_m * c.warps_n == 8 for c in by.values())  # 8 warps/SM for each
    # 128x128: 196 blocks on 132 SMs, 64 of them run two: a quarter of the GPU's time lost
    assert by[128, 128].blocks == 196 and by[128, 128].busiest == 2 and by[128, 128].loss == pytest.approx(0.2576, abs=1e-3)
    # 64x128: 392 blocks, 3 on the busiest SM (2.97 on average), and one column of blocks: A read once
    assert by[64, 128].busiest == 3 and by[64, 128].loss == pytest.approx(0.0101, abs=1e-3)
    assert block_tile(stage2, gpu) == (1, 2)
    # K = 64 (stage 1's 3x3): a 128-wide tile would be half padding
    assert block_tile(conv.Problem(32, 64, 56, 56, 64, 3, 3, 1, 1, "float16", "NHWC"), gpu) == (2, 1)
    # a small awkward layer (M = 25, K = 70): the smallest tile spreads it over 2 SMs, not 1
    small = conv.Problem(1, 16, 9, 8, 70, 3, 2, 2, 1, "float16", "NHWC")
    assert block_tile(small, gpu) == (1, 1) and warptile_choices(small, gpu)[0].blocks == 2
    # the ladder's rungs choose so at run time and in their plans (no GPU here: an H100's 132 SMs)
    for name in ("tc_warptile", "tc_epilogue"):
        v = RUNG[name]
        assert (v.WARPS_M, v.WARPS_N) == (0, 0) and (v.at(stage2).WARPS_M, v.at(stage2).WARPS_N) == (1, 2)
        assert v.grid(stage2) == (1, 392)
        (launch,) = v.plan(stage2, {k: np.zeros((1,) * len(sh), d) for k, (sh, d) in
                                    {**stage2.input_specs(), **stage2.output_specs()}.items()})
        assert tuple(launch.block) == (64,)
    with pytest.raises(UnsupportedProblem, match="WARPS_N must be an int >= 1"):
        conv.TCWarpTile(WARPS_M=1, WARPS_N=0)


def test_tc_warptile_small_twins_keep_the_block_tile():
    """The bank simulation and the compile run a shrunken twin of a layer (banks.small_problem),
    which checks only that the twin launches blocks of the same size: 64x128 and 128x64 both have
    64 threads, so the twin of every ResNet-50 layer the rung takes must choose the layer's tile."""
    v = RUNG["tc_warptile"]
    for _, p, _ in conv.resnet50_layers(32, "float16", "NHWC"):
        if p.c % 8 == 0:
            assert v.at(banks.small_problem(v, p)) == v.at(p), p.label


@pytest.mark.parametrize("warps, case", [
    ((1, 2), (2, 8, 5, 4, 9, 2, 1, 2, 1)),   # 2x1 filter, stride 2, padding, c = 8 < BK, n = 2
    ((2, 1), (1, 40, 5, 4, 70, 1, 1, 2, 0)),  # two 64-wide n tiles (K = 70), a partial k-tile (40)
    ((2, 2), (1, 8, 6, 5, 9, 1, 2, 1, 1)),  # 1x2 filter, padding, M = 42 and K = 9 partial
], ids=["64x128", "128x64", "128x128"])
def test_tc_warptile_block_tiles_are_correct(warps, case, fresh_seed):
    """Each block tile rung 13 may choose (64x64 is CHUNKED_SIM's above), at an awkward case
    each: partial tiles in m, n and k, padding, stride 2, r != s (a few seconds each here)."""
    v = conv.TCWarpTile(WARPS_M=warps[0], WARPS_N=warps[1])
    _run_and_check(v, conv.Problem(*case, dtype="float16", layout="NHWC"), fresh_seed)


@pytest.mark.parametrize("v", CHUNKED, ids=lambda v: v.name)
def test_chunked_tensor_core_rungs_refuse_with_the_reason(v):
    nchw = conv.Problem(1, 8, 5, 5, 4, 3, 3, dtype="float16")
    with pytest.raises(UnsupportedProblem, match="NHWC only"):
        v.run(nchw, nchw.make_inputs(0))
    odd = conv.Problem(1, 12, 5, 5, 4, 3, 3, dtype="float16", layout="NHWC")
    with pytest.raises(UnsupportedProblem, match="c=12 is not a multiple of 8"):
        v.run(odd, odd.make_inputs(0))
    f32 = conv.Problem(1, 8, 5, 5, 4, 3, 3, layout="NHWC")
    with pytest.raises(UnsupportedProblem, match="takes float16"):
        v.supports(f32)
    ex = v.example(conv.EXAMPLE_PROBLEM)
    assert (ex.dtype, ex.layout) == ("float16", "NHWC")
    v.supports(ex)


@pytest.mark.parametrize("case", ["3x3_p1_c3_k17_nchw", "1x1_s2_c17_k3_nhwc", "5x5_p3_c1_nhwc",
                                  "7x7_s2_p3_k1_nchw", "3x2_s2_c4_vec_nhwc"])
def test_reference_matches_torch_float64(case, fresh_seed):
    p = _problem(case)
    x = p.make_inputs(fresh_seed)
    ref = p.reference(x)
    assert ref.dtype == np.float64 and ref.shape == p.output_specs()["y"][0]
    np.testing.assert_allclose(ref, _ref_torch(p, x), rtol=1e-12, atol=1e-12)


def test_reference_sees_a_wrong_answer():
    p = _problem("3x3_p1_c3_k17_nchw")
    x = p.make_inputs(0)
    y = p.reference(x).astype(np.float32)
    assert p.check(y, p.reference(x)).ok
    y[0, 5, 3, 2] += 0.02  # one product of 0.02 too many
    assert not p.check(y, p.reference(x)).ok
    y[0, 5, 3, 2] = np.nan
    assert not p.check(y, p.reference(x)).ok


def test_shapes_flops_bytes():
    p = conv.Problem(32, 3, 224, 224, 64, 7, 7, stride=2, pad=3)
    assert (p.p, p.q) == (112, 112)
    assert p.flops == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7
    assert p.bytes == 4 * (32 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 32 * 64 * 112 * 112)
    q = conv.Problem(1, 4, 5, 6, 8, 3, 2, stride=2, pad=1, dtype="float16", layout="NHWC")
    specs = {**q.input_specs(), **q.output_specs()}
    assert specs == {"x": ((1, 5, 6, 4), "float16"), "w": ((8, 3, 2, 4), "float16"),
                     "y": ((1, 3, 4, 8), "float16")}
    assert q.bytes == 2 * (5 * 6 * 4 + 8 * 3 * 2 * 4 + 3 * 4 * 8)


@pytest.mark.parametrize("kw, msg", [
    (dict(r=9, pad=1), "filter height r=9 is larger than the padded input height h \\+ 2\\*pad = 8"),
    (dict(s=9, pad=1), "filter width s=9 is larger than the padded input width w \\+ 2\\*pad = 8"),
    (dict(stride=0), "stride must be >= 1, got 0"),
    (dict(stride=-1), "stride must be >= 1"),
    (dict(pad=-1), "pad must be >= 0, got -1"),
    (dict(layout="CHWN"), "layout must be 'NCHW' or 'NHWC', got 'CHWN'"),
    (dict(layout="nchw"), "layout must be"),
    (dict(dtype="float64"), "dtype 'float64' is not supported"),
    (dict(dtype="bfloat17"), "unknown dtype"),
    (dict(n=0), "n must be >= 1, got 0"),
    (dict(c=0), "c must be >= 1"),
    (dict(k=-2), "k must be >= 1"),
    (dict(h=0), "h must be >= 1"),
    (dict(c=3.0), "c must be an int"),
    (dict(r=True), "r must be an int"),
    (dict(pad=None), "pad must be an int"),
])
def test_bad_problems_name_the_field(kw, msg):
    args = dict(n=1, c=3, h=6, w=6, k=4, r=3, s=3, stride=1, pad=0, dtype="float32", layout="NCHW")
    with pytest.raises(ProblemError, match=msg):
        conv.Problem(**{**args, **kw})


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_bad_inputs_name_the_field(layout):
    p = conv.Problem(1, 3, 6, 5, 4, 3, 3, layout=layout)
    good = p.make_inputs(0)
    other = conv.Problem(1, 5, 6, 5, 4, 3, 3, layout=layout).make_inputs(0)
    v = conv.LADDER[1]
    cases = [
        ({**good, "w": other["w"]}, "channels do not match: x has c=3 and w has c=5"),
        ({**good, "x": other["x"]}, "channels do not match: x has c=5 and w has c=3"),
        ({**good, "x": good["x"].astype(np.float64)}, "input 'x' has dtype float64"),
        ({**good, "x": good["x"][:, :, :, :-1].copy() if layout == "NCHW" else good["x"][:, :, :-1].copy()},
         "input 'x' has shape"),
        ({**good, "w": np.asfortranarray(good["w"])}, "input 'w' is not C-contiguous"),
        ({"x": good["x"]}, r"missing \['w'\]"),
    ]
    for inputs, msg in cases:
        with pytest.raises(ProblemError, match=msg):
            v.run(p, inputs)


def test_registry_texts_and_traffic():
    registry_check(conv.LADDER)
    assert [v.name for v in conv.LADDER] == ["oracle", "direct", "direct_halo", "im2col_gemm", "igemm_naive",
                                            "igemm_smem", "igemm_regblock", "winograd", "tensor_core",
                                            "tc_vector", "tc_ldmatrix", "winograd_tiled", "tc_cp_async",
                                            "tc_warptile", "winograd_f4", "tc_epilogue", "tc_padded"]
    assert all(v.what for v in conv.LADDER)
    for v in conv.LADDER:
        p = v.example(conv.EXAMPLE_PROBLEM)
        t = v.traffic(p)
        if v.name.startswith("winograd"):  # the FLOPs it does: 16 products per 2x2 tile where direct does 36
            fewer = 36 / 144 if v.name == "winograd_f4" else 16 / 36  # F(4x4): 36 per 4x4 tile, 144 direct
            assert t.flops == pytest.approx(p.flops * fewer, rel=0.01) and t.extra["algorithmic_flops"] == p.flops
        else:
            assert t.flops == p.flops
        assert np.isfinite(t.dram_bytes) and t.dram_bytes >= p.bytes * 0.99
        assert t.l2_bytes is None or t.l2_bytes >= p.bytes * 0.99
    im2col = RUNG["im2col_gemm"]
    assert im2col.gemm_variant().name in conv.GEMM_PREFERENCE
    p = conv.EXAMPLE_PROBLEM  # the im2col buffer is ~9x x for a 3x3 stride-1 layer
    assert im2col.traffic(p).dram_bytes > 9 * p.n * p.c * p.h * p.w * 4


def test_dtype_and_layout_choices_are_explained():
    p32 = conv.Problem(1, 3, 5, 5, 4, 3, 3)
    with pytest.raises(UnsupportedProblem, match="takes float16"):
        RUNG["tensor_core"].run(p32, p32.make_inputs(0))
    tc = RUNG["tensor_core"].example(p32)
    assert (tc.dtype, tc.layout) == ("float16", "NHWC")
    rb = RUNG["igemm_regblock"]
    assert rb.vectorized(conv.Problem(1, 4, 5, 5, 4, 3, 3, layout="NHWC")) == (True, True)
    assert rb.vectorized(conv.Problem(1, 3, 5, 5, 4, 3, 3, layout="NHWC")) == (False, False)
    assert rb.vectorized(conv.Problem(1, 4, 5, 5, 4, 3, 3)) == (False, True)
    assert rb.vectorized(conv.Problem(1, 4, 5, 5, 4, 3, 3, dtype="float16", layout="NHWC")) == (False, False)


def test_gpu_sweep_is_resnet50_at_batch_32():
    assert len(conv.RESNET50) == 23 and sum(c for *_, c in conv.RESNET50) == 53  # 53 conv layers in ResNet-50
    assert len(conv.GPU_SWEEP) == 3 * 23
    assert {(p.dtype, p.layout) for p in conv.GPU_SWEEP} == {("float32", "NCHW"), ("float32", "NHWC"),
                                                             ("float16", "NHWC")}
    assert all(p.n == 32 for p in conv.GPU_SWEEP)
    stem = conv.GPU_SWEEP[0]
    assert (stem.c, stem.r, stem.stride, stem.pad, stem.p) == (3, 7, 2, 3, 112)
    assert {(p.p, p.stride) for p in conv.GPU_SWEEP if p.r == 3} >= {(56, 1), (28, 2), (28, 1), (14, 2), (7, 1)}
    # every rung can take every layer it is meant for (tile and launch limits, by arithmetic)
    for p in conv.GPU_SWEEP:
        for v in conv.LADDER[1:]:
            if (v in TENSOR and p.dtype != "float16") or (v in CHUNKED and (p.c % 8 or not p.nhwc)) or \
                    (v.name.startswith("winograd") and (p.r, p.s, p.stride) != (3, 3, 1)):
                continue
            v.supports(p)


@pytest.mark.skipif(not backend.is_simulator(), reason="checks the simulator refusal of GPU-only peers")
def test_peers_are_gpu_only_here():
    ps = peers.peers_for("conv")
    assert [q.name for q in ps] == ["torch", "triton"] and all(q.rung == -1 for q in ps)
    p = conv.Problem(1, 3, 5, 5, 4, 3, 3)
    for q in ps:
        with pytest.raises(UnsupportedProblem, match="GPU-only"):
            q.supports(p)


def test_regblock_and_tensor_core_compile_for_sm90():
    p = conv.EXAMPLE_PROBLEM
    r = anatomy.inspect(RUNG["igemm_regblock"], conv.to_layout(p, "NHWC"), cc=(9, 0))
    assert r.mix["global load 128"] >= 2 and r.spill_store_bytes == 0  # x and w: LDG.E.128
    t = anatomy.inspect(RUNG["tensor_core"], conv.to_layout(p, "NHWC", "float16"), cc=(9, 0))
    assert "HMMA.16816.F32" in t.sass and t.mix["tensor mma"] >= 4


@pytest.mark.parametrize("v", CHUNKED, ids=lambda v: v.name)
def test_chunked_tensor_core_rungs_compile_for_sm90(v):
    """16-byte loads of x and w (LDG.E.128, or LDGSTS with cp.async), no spills; ldmatrix where
    the rung says so."""
    p = v.example(conv.EXAMPLE_PROBLEM)
    r = anatomy.inspect(v, p, cc=(9, 0))
    assert "HMMA.16816.F32" in r.sass and r.spill_store_bytes == 0
    if v.STAGES > 1:
        assert "LDGSTS" in r.sass and r.mix["async copy"] >= 4 and r.mix.get("global load 128", 0) == 0
    else:
        assert r.mix["global load 128"] >= 4 and "LDGSTS" not in r.sass
    assert ("LDSM" in r.sass) == v.LDSM
    if v.name in ("tc_warptile", "tc_epilogue"):  # the block-tile choice's occupancy: 2 warps per sub-partition
        assert 128 < r.registers <= 255 and r.occupancy.active_warps == 8, (r.registers, str(r.occupancy))
    if v.EPI:  # the staging: one packed 4-byte store per row pair of each mma tile, no 2-byte ones
        assert r.mix["shared store 32"] == 2 * v.MT * v.NT8 and r.mix["shared store other"] == 0


def test_winograd_tiled_gemm_compiles_for_sm90():
    """The batched GEMM (launch 2): 128-bit shared loads feed the FFMAs, no spills, and no
    4-byte shared stores (rung 7 stored its A tile transposed, one float at a time)."""
    v = RUNG["winograd_tiled"]
    r = anatomy.inspect(v, conv.EXAMPLE_PROBLEM, cc=(9, 0), kernel=2)
    assert r.spill_store_bytes == 0 and r.mix["shared load 128"] >= 4 and r.mix["fp32 fma"] >= 64
    assert r.mix.get("shared store 32", 0) == 0 and r.mix["shared store 128"] >= 2


@pytest.mark.parametrize("cfg, case", [
    (dict(WARPS_M=1, WARPS_N=1), (1, 16, 9, 8, 64, 1, 1, 1, 0)),   # a full 64x64 block (16-byte stores), an edge one
    (dict(WARPS_M=2, WARPS_N=1), (1, 8, 16, 8, 64, 1, 1, 1, 0)),   # warp 1 stages its tile in the B ring
    (dict(WARPS_M=1, WARPS_N=2), (1, 8, 9, 8, 128, 1, 1, 1, 0)),   # 64x128 (stage 2's choice): full and edge
], ids=["one_warp", "two_warps", "64x128"])
def test_tc_epilogue_full_blocks_take_the_16_byte_path(cfg, case, fresh_seed):
    """The ladder's other cases have no block inside M and K (K = 70, 9): these do, so the staged
    16-byte epilogue is checked (NaN-poisoned y, float64 reference) beside the edge path."""
    v = conv.TCEpilogue(**cfg)
    p = conv.Problem(*case, dtype="float16", layout="NHWC")
    assert p.gemm_mnk[1] % 8 == 0 and p.gemm_mnk[0] >= v.BM
    _run_and_check(v, p, fresh_seed)


@pytest.mark.skipif(not backend.is_simulator(), reason="banks.count runs kernels in the CUDA simulator")
def test_tc_epilogue_staging_is_conflict_free():
    """The bank simulation of the epilogue's shared-memory staging, at 64x128 blocks (the
    stage-2 layer's choice: warp 0 stages in the A ring, warp 1 in the B ring), two full blocks.
    Each lane stores its two adjacent outputs as one packed 4-byte word; a store's 32 lanes span
    8 rows of 128 bytes, which unswizzled all fall on the same 4 banks per row (8 wavefronts, the
    old 2-byte stores: 1024 wavefronts for 128 ideal per warp); XOR-swizzling each row's 16-byte
    chunks by the row spreads them over all 32 banks: one wavefront each.  The 16-byte reloads read
    a row's 8 chunks per 8-lane phase, a permutation: one wavefront per phase.  (The ring's cp.async
    copies land as 16-byte stores, the LDGSTS's own width; they are not the staging.)"""
    v = conv.TCEpilogue(WARPS_M=1, WARPS_N=2)
    p = conv.Problem(1, 16, 16, 8, 128, 1, 1, 1, 0, "float16", "NHWC")  # M = K = 128: two full blocks
    rep = banks.count(v, p, cache=False)  # the first block
    stores = [s for s in rep.sites if s["kind"] == "store" and s["width"] == 4]  # only the staging stores words
    loads = [s for s in rep.sites if s["kind"] == "load" and s["width"] == 16]  # only the reload reads 16 bytes
    # 2 warps x (4 x 8 mma tiles x 2 rows) packed stores, each 128 bytes: one wavefront
    assert sum(s["accesses"] for s in stores) == 128
    assert sum(s["wavefronts"] for s in stores) == sum(s["ideal"] for s in stores) == 128
    # 2 warps x 64x64 halves / (32 lanes x 8 halves) reloads, 4 phases of 8 lanes each
    assert sum(s["accesses"] for s in loads) == 32
    assert sum(s["wavefronts"] for s in loads) == sum(s["ideal"] for s in loads) == 128


@pytest.mark.parametrize("profile", ["ci", "gpu", None])
def test_notebook_03_checks_every_rung_in_every_profile(profile):
    """Notebook 03 verifies every rung before it shows one: each rung of the ladder runs at least
    one of the profile's check cases (the notebook's own defaults for None); the tensor-core rungs
    take only float16 NHWC of whole 16-byte chunks (8 channels), so a case of that kind must be
    there (an earlier float16 case of 4 channels left five rungs unchecked in every profile)."""
    import ast

    from perfkit import workbook

    if profile is None:
        src = (workbook.NOTEBOOKS_DIR / "03_convolution.py").read_text()
        cases = next(ast.literal_eval(n.value) for n in ast.walk(ast.parse(src))
                     if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "check_cases")
    else:
        cases = workbook.profiles()[profile]["notebooks"]["03_convolution"]["check_cases"]
    problems = [conv.Problem(*c[:9], dtype=c[9], layout=c[10]) for c in cases]

    def runs(v, p):
        p = conv.to_layout(p, dtype="float16") if v.name == "tensor_core" else p  # as the notebook asks it
        try:
            v.supports(p)
            return True
        except UnsupportedProblem:
            return False

    unchecked = [v.label for v in conv.LADDER if not v.oracle and not any(runs(v, p) for p in problems)]
    assert not unchecked, f"{profile or 'default'}: {unchecked} run none of {cases}"


def test_im2col_refuses_a_gemm_rung_the_ladder_does_not_have():
    """A misspelled GEMM rung fell back to the preferred one silently: it is refused, naming the choices."""
    from perfkit.kernels.conv.im2col import Im2colGemm

    p = conv.Problem(1, 3, 6, 6, 4, 3, 3)
    with pytest.raises(UnsupportedProblem, match="gemm_rung='warptlie' is no rung of the GEMM ladder.*'warptile'"):
        Im2colGemm(gemm_rung="warptlie").supports(p)
    Im2colGemm(gemm_rung="warptile").supports(p)
    Im2colGemm().supports(p)


# --- rung 16 tc_padded: any c, by a pad pre-pass and taps packed into the k-tiles --------------------
#: (n, c, h, w, k, r, s, stride, pad) float16 NHWC, and the block tile (None: the rung's own choice,
#: one warp at these sizes).  Together: c of 1, 3, 5, 9, 12 (partial chunks: 1 or 2 a tap) and 16 (whole
#: chunks, 2 a tap: no pad launch); the stem's 7x7 stride 2 pad 3; r != s (3x2, 7x5, 2x3); a 1x1 (one
#: tap of 1 chunk: 3 of the k-tile's 4 chunks past the end, zero-filled); M not a multiple of the tile (20, 25, 50,
#: 70, 72); K not a multiple of 8 (9, 70, 3: the edge epilogue) and full blocks (M = 144 and 128, K =
#: 64 and 128: the staged 16-byte epilogue); each block tile the rung may choose; n = 2
TC_PADDED_CASES = {
    "stem_7x7_s2_p3_c3_k64": ((1, 3, 9, 8, 64, 7, 7, 2, 3), None),
    "3x2_s2_p1_c16_k9_n2": ((2, 16, 5, 4, 9, 3, 2, 2, 1), None),
    "7x5_p2_c5_k70": ((1, 5, 9, 10, 70, 7, 5, 1, 2), None),
    "1x1_c3_k64_full_blocks": ((1, 3, 16, 9, 64, 1, 1, 1, 0), None),
    "3x3_p1_c3_128x64": ((1, 3, 16, 8, 64, 3, 3, 1, 1), (2, 1)),
    "3x3_p1_c12_64x128": ((1, 12, 9, 8, 128, 3, 3, 1, 1), (1, 2)),
    "2x3_s2_p1_c1_k70_128x128": ((1, 1, 8, 9, 70, 2, 3, 2, 1), (2, 2)),
    "5x5_p2_c9_k3_n2": ((2, 9, 5, 5, 3, 5, 5, 1, 2), None),
    # c = 24: 3 chunks a tap and no pad launch; a k-tile's 4 chunks straddle taps (4 is no multiple
    # of 3), so the (r, s, chunk) counters carry chunk -> s and s -> r within one step (S = 2)
    "3x2_s2_p1_c24_k16_three_chunks_a_tap": ((1, 24, 6, 5, 16, 3, 2, 2, 1), None),
}


@pytest.mark.parametrize("case", TC_PADDED_CASES)
def test_tc_padded_is_correct(case, fresh_seed):
    """NaN-poisoned y and workspace, the float64 reference (15-20 s for all of them on 2 busy cores)."""
    shape, warps = TC_PADDED_CASES[case]
    p = conv.Problem(*shape, dtype="float16", layout="NHWC")
    v = RUNG["tc_padded"] if warps is None else conv.TCPadded(WARPS_M=warps[0], WARPS_N=warps[1])
    if warps is None:
        assert (v.at(p).WARPS_M, v.at(p).WARPS_N) == (1, 1)
    _run_and_check(v, p, fresh_seed)


def test_tc_padded_pad_writes_every_element_of_its_workspace(fresh_seed):
    """Launch 1 alone: x8 and w8 (NaN-poisoned by prepare) hold x and w in their first c channels
    and zeros after, every element written (c = 5: one partial chunk a pixel)."""
    p = conv.Problem(2, 5, 4, 3, 9, 3, 2, 1, 1, "float16", "NHWC")
    v = RUNG["tc_padded"]
    assert v.workspace(p) == {"x8": ((2, 4, 3, 8), "float16"), "w8": ((9, 3, 2, 8), "float16")}
    x = p.make_inputs(fresh_seed)
    prep = v.prepare(p, x)
    pad, main = prep.launches
    assert pad.name == "conv_pad8" and main.name == "conv_tc_padded"
    pad()
    x8, w8 = pad.args[2].copy_to_host(), pad.args[3].copy_to_host()
    for got, want in ((x8, x["x"].reshape(-1, 5)), (w8, x["w"].reshape(-1, 5))):
        assert not np.isnan(got).any()
        assert np.array_equal(got[:, :5], want) and not got[:, 5:].any()


def test_tc_padded_packs_taps_into_its_k_tiles():
    """At the stem (c = 3 -> 8, 49 taps) 13 k-tiles of 4 (tap, chunk) pairs, where rung 15 has 49
    k-tiles of 32 channels, 3 of them real; a layer of whole chunks keeps rung 15's reduction."""
    v, epi = RUNG["tc_padded"], RUNG["tc_epilogue"]
    stem = next(p for _, p, _ in conv.resnet50_layers(32, "float16", "NHWC") if p.c == 3)
    assert v.chunks(stem) == 49 and v.n_k(stem) == 13
    s2 = conv.to_layout(conv.EXAMPLE_PROBLEM, "NHWC", "float16")
    assert v.n_k(s2) == 9 * 128 // 32 and v.at(s2) == conv.TCPadded(WARPS_M=1, WARPS_N=2)
    assert v.grid(s2) == epi.grid(s2) and v.at(stem).WARPS_N == 1  # K = 64: a 128-wide tile would be half padding
    # c % 8 == 0: x and w read as they are, no pad launch and no workspace
    bufs = lambda p: {k: np.zeros((1,) * len(sh), d) for k, (sh, d) in  # noqa: E731
                      {**p.input_specs(), **p.output_specs(), **v.workspace(p)}.items()}
    assert v.workspace(s2) == {} and [l.name for l in v.plan(s2, bufs(s2))] == ["conv_tc_padded"]
    assert [l.name for l in v.plan(stem, bufs(stem))] == ["conv_pad8", "conv_tc_padded"]
    assert v.plan(stem, bufs(stem))[0].grid == (C._ceil(32 * 224 * 224 + 64 * 49, 256),)  # one row a thread
    t, te = v.traffic(stem), epi.traffic(conv.Problem(32, 8, 224, 224, 64, 7, 7, 2, 3, "float16", "NHWC"))
    assert t.flops == stem.flops and "x8 written" in t.notes and "13 k-tiles" in t.notes
    assert "no pad launch" in v.traffic(s2).notes
    x = stem.n * stem.h * stem.w * stem.c * 2
    assert t.dram_bytes > stem.bytes + 2 * x * 8 / 3  # x8 written, then read back
    assert t.smem_bytes < te.smem_bytes / 3  # 52 chunks of reduction per tile row where c = 8 padded by rung 15 reads 49 x 4


def test_tc_padded_takes_every_resnet50_layer_and_its_small_twins_keep_the_block_tile():
    """Every float16 NHWC layer, the stem (c = 3) included, and the bank simulation's shrunken twin of
    each (banks.small_problem) chooses the layer's block tile (as rung 13's test above)."""
    v = RUNG["tc_padded"]
    for _, p, _ in conv.resnet50_layers(32, "float16", "NHWC"):
        v.supports(p)
        assert v.at(banks.small_problem(v, p)) == v.at(p), p.label


@pytest.mark.parametrize("kw, msg", [
    (dict(layout="NCHW"), "NHWC only"),
    (dict(dtype="float32"), "takes float16"),
    (dict(r=32, h=40), "31 filter rows and columns; got 32x3"),
])
def test_tc_padded_refuses_with_the_reason(kw, msg):
    args = dict(n=1, c=3, h=9, w=9, k=4, r=3, s=3, stride=1, pad=1, dtype="float16", layout="NHWC")
    v = RUNG["tc_padded"]
    with pytest.raises(UnsupportedProblem, match=f"tc_padded.*{msg}"):
        v.supports(conv.Problem(**{**args, **kw}))
    v.supports(conv.Problem(**args))  # c = 3: taken (rungs 9-15 refuse it)
    with pytest.raises(UnsupportedProblem, match="c=3 is not a multiple of 8"):
        RUNG["tc_epilogue"].supports(conv.Problem(**args))
    with pytest.raises(UnsupportedProblem, match="NT8 not an even power of two"):
        conv.TCPadded(NT8=6).supports(conv.Problem(**args))


def test_tc_padded_compiles_for_sm90():
    """The stem at sm_90: the main loop (launch 2) copies by LDGSTS, reads fragments by LDSM, keeps
    rung 15's 2 warps per sub-partition and spills nothing; the pad (launch 1) stores 16 bytes a
    thread."""
    v = RUNG["tc_padded"]
    stem = next(p for _, p, _ in conv.resnet50_layers(32, "float16", "NHWC") if p.c == 3)
    r = anatomy.inspect(v, stem, cc=(9, 0), kernel=1)
    assert "HMMA.16816.F32" in r.sass and "LDSM" in r.sass and r.spill_store_bytes == 0
    assert r.mix["async copy"] >= 4 and r.mix.get("global load 128", 0) == 0
    assert 128 < r.registers <= 255 and r.occupancy.active_warps == 8, (r.registers, str(r.occupancy))
    assert r.mix["shared store 32"] == 2 * v.MT * v.NT8 and r.mix["shared store other"] == 0
    pad = anatomy.inspect(v, stem, cc=(9, 0), kernel=0)  # LDG/STG: each branch names its own arrays
    assert pad.mix["global store 128"] >= 1 and pad.mix["global load 16"] >= 8 and pad.spill_store_bytes == 0
