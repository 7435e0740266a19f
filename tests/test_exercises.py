"""The exercise graders: every reference solution passes; a wrong answer per exercise fails with
the specific message (the shape, the first wrong element, or the property); the notebook cells
are runnable without a learner (no answer: "not yet solved").

Shapes are tiny and the anatomy compiles are cached, so this file stays cheap in the simulator."""
import math

import numpy as np
import pytest

import perfkit  # noqa: F401  (picks the backend before numba.cuda)
from numba import cuda, float32

from perfkit import exercises
from perfkit.exercises import _core, grade, load4, shfl_down

NOTEBOOK_PREFIXES = ("01", "02", "03", "04")


def _failed(g, check_prefix: str, *fragments: str):
    """The grade failed, at the check named ``check_prefix...``, with every fragment in its message."""
    assert not g.passed, str(g)
    f = g.failures[0]
    assert f.name.startswith(check_prefix), str(g)
    for frag in fragments:
        assert frag in f.message, f"{frag!r} not in {f.message!r}\n{g}"
    return f


# --- wrong answers -------------------------------------------------------------------------------
@cuda.jit
def saxpy_one_per_thread(out, x, y, alpha, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = alpha * x[i] + y[i]


@cuda.jit
def copy_scalar(dst, src, rows, cols):
    t = cuda.grid(1)
    per_row = cols // 4
    if t < rows * per_row:
        r = t // per_row
        c = (t % per_row) * 4
        for j in range(4):
            dst[r, c + j] = src[r, c + j]


@cuda.jit
def copy_misaligned(dst, src, rows, cols):
    t = cuda.grid(1)
    per_row = cols // 4
    if t < rows * per_row:
        r = t // per_row
        c = (t % per_row) * 4 + 1  # off by one element: not 16-byte aligned
        v0, v1, v2, v3 = load4(src, r, c)
        dst[r, c] = v0


@cuda.jit
def gemm_no_shared(a, b, c, M, N, K):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < M and col < N:
        acc = float32(0)
        for i in range(K):
            acc += a[row, i] * b[i, col]
        c[row, col] = acc


TILE = 16


@cuda.jit
def gemm_tiled_short_k(a, b, c, M, N, K):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, K - TILE + 1, TILE):  # drops the last, partial tile of k
        As[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
        Bs[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc


@cuda.jit
def transpose_unpadded(out, inp, rows, cols):
    tile = cuda.shared.array((32, 32), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    r0 = cuda.blockIdx.y * 32
    c0 = cuda.blockIdx.x * 32
    for j in range(0, 32, 8):
        r = r0 + ty + j
        if r < rows and c0 + tx < cols:
            tile[ty + j, tx] = inp[r, c0 + tx]
    cuda.syncthreads()
    for j in range(0, 32, 8):
        r = c0 + ty + j
        if r < cols and r0 + tx < rows:
            out[r, r0 + tx] = tile[tx, ty + j]


WARPS = 4


@cuda.jit
def row_sum_missing_last_step(out, x, rows, cols):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    v = float32(0)
    if row < rows:
        for j in range(lane, cols, 32):
            v += x[row, j]
    off = 16
    while off > 1:  # stops before off = 1: lane 0 misses lane 1's partial
        v += shfl_down(v, off)
        off //= 2
    if lane == 0 and row < rows:
        out[row] = v


@cuda.jit
def row_sum_serial(out, x, rows, cols):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if lane == 0 and row < rows:
        v = float32(0)
        for j in range(cols):
            v += x[row, j]
        out[row] = v


@cuda.jit(device=True)
def online_update_no_guard(m, s, x):
    m_new = max(m, x)
    return m_new, s * math.exp(m - m_new) + math.exp(x - m_new)


@cuda.jit(device=True)
def online_update_no_max(m, s, x):
    return float32(0), s + math.exp(x)


@cuda.jit
def im2col_taps_transposed(x, col, N, C, H, W, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    CRS = C * R * S
    if i < N * P * Q * CRS:
        j = i % CRS
        m = i // CRS
        q = m % Q
        p = (m // Q) % P
        b = m // (P * Q)
        r = j % R            # r and s swapped: right only when R == S
        s = (j // R) % S
        c = j // (R * S)
        ih = p * stride - pad + r
        iw = q * stride - pad + s
        v = float32(0)
        if ih >= 0 and ih < H and iw >= 0 and iw < W:
            v = x[b, c, ih, iw]
        col[m, j] = v


@cuda.jit
def conv_direct_no_padding_test(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    if i < N * K * P * Q:
        q = i % Q
        p = (i // Q) % P
        k = (i // (P * Q)) % K
        b = i // (K * P * Q)
        acc = float32(0)
        for c in range(C):
            for r in range(R):
                for s in range(S):
                    ih = min(max(p * stride - pad + r, 0), H - 1)  # clamps instead of reading zero
                    iw = min(max(q * stride - pad + s, 0), W - 1)
                    acc += x[b, c, ih, iw] * w[k, c, r, s]
        y[b, k, p, q] = acc


def plain_python(out, x, y, alpha, n):
    pass


# --- the registry ------------------------------------------------------------------------------
def test_at_least_two_exercises_per_notebook():
    for nb in NOTEBOOK_PREFIXES:
        assert len(exercises.names(nb)) >= 2, nb
    for name, ex in exercises.EXERCISES.items():
        assert name.startswith(ex.notebook[:2] + "."), name
        assert ex.checks and ex.task and ex.solution


def test_no_answer_is_not_yet_solved_and_never_raises():
    g = grade("01.grid_stride", None, progress=False)
    assert g.status == "not yet solved" and not g and all(c.ok is None for c in g.checks)
    assert "NOT YET SOLVED" in str(g) and "not yet solved" in g._repr_html_()


def test_unknown_exercise_names_the_ones_there_are():
    with pytest.raises(KeyError, match="01.grid_stride"):
        grade("01.nope", None)


def test_wrong_kind_of_answer():
    _failed(grade("01.grid_stride", plain_python, progress=False), "a kernel", "@cuda.jit")
    _failed(grade("01.grid_stride", online_update_no_guard, progress=False), "a kernel", "device function")
    _failed(grade("04.online_softmax", saxpy_one_per_thread, progress=False), "a device function", "kernel")


def test_carry_writes_an_importable_module_with_the_globals(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path))
    module, name = _core.carry(gemm_tiled_short_k)
    assert name == "gemm_tiled_short_k"
    text = (tmp_path / "exercises" / (module.rsplit(".", 1)[1] + ".py")).read_text()
    assert "TILE = 16" in text and "float32 = _nbt.float32" in text and "@cuda.jit\ndef gemm_tiled_short_k" in text
    assert _core.resolve(module, name) is gemm_tiled_short_k


def test_carry_refuses_what_it_cannot_write_out():
    table = [1, 2]

    @cuda.jit
    def uses_a_list(out):
        out[0] = table[0]

    with pytest.raises(_core.CarryError, match="table"):
        _core.carry(uses_a_list)


# --- every reference solution passes -------------------------------------------------------------
@pytest.mark.parametrize("name", list(exercises.EXERCISES))
def test_reference_solution_passes(name):
    opts = {"tile": 16} if name == "02.smem_tile" else {}
    g = grade(name, reference=True, progress=False, **opts)
    assert g.passed, str(g)
    assert all(c.ok for c in g.checks if c.ok is not None)
    assert g.message == "" and "passed" in g._repr_html_()


# --- and a wrong answer fails with the specific message -------------------------------------------
def test_grid_stride_one_element_per_thread():
    f = _failed(grade("01.grid_stride", saxpy_one_per_thread, progress=False), "correct at n=193",
                "n=193", "first at (192,)", "never written", "cuda.gridsize(1)")
    assert "got nan" in f.message


def test_launch_partial_warps_and_low_occupancy():
    _failed(grade("01.launch", dict(block=100, blocks_per_sm=8), progress=False), "whole warps", "4 threads")
    _failed(grade("01.launch", dict(block=32, blocks_per_sm=8), progress=False), "100% theoretical occupancy",
            "50%", "blocks")
    _failed(grade("01.launch", dict(block=2048, blocks_per_sm=1), progress=False), "a launch the GPU can run", "1024")
    _failed(grade("01.launch", dict(threads=256), progress=False), "a launch", "block and blocks_per_sm")


def test_vec_copy_scalar_loads_and_misalignment():
    _failed(grade("01.vec_copy", copy_scalar, progress=False), "16-byte loads", "0 16-byte loads", "load4")
    if perfkit.backend.is_simulator():  # the simulator's load4 names the misaligned load
        _failed(grade("01.vec_copy", copy_misaligned, progress=False), "correct at 1x4", "misaligned")
    else:  # a GPU gives no such message (the H200 run raised no fault): the float64 check catches it
        _failed(grade("01.vec_copy", copy_misaligned, progress=False), "correct at 1x4")


def test_smem_tile_without_shared_memory_and_short_k():
    _failed(grade("02.smem_tile", gemm_no_shared, tile=16, progress=False), "stages tiles in shared memory",
            "0 B of shared memory")
    f = _failed(grade("02.smem_tile", gemm_tiled_short_k, tile=16, progress=False), "correct at m, n, k = 1, 1, 1",
                "m=1 n=1 k=1")
    assert "first at (0, 0)" in f.message


def test_pad_unpadded_tile_has_32_way_conflicts():
    f = _failed(grade("02.pad", transpose_unpadded, progress=False), "no bank conflicts",
                "32-way bank conflicts", "tile[tx, ty + j]", "word index mod 32")
    assert "32 + 1" not in f.message and "pad" not in f.message  # the cause, not the answer


def test_pad_counts_in_a_simulator_child_as_on_a_gpu():
    """A process on a GPU counts bank conflicts in a child that runs the simulator, on the
    kernel carry() wrote out; forced here."""
    from perfkit.exercises import _core, nb02

    module, name = _core.carry(transpose_unpadded)
    sites, counter = nb02.count_bank_conflicts(nb02.LearnerTranspose(module=module, kernel=name),
                                               nb02.Transpose(32, 64), seed=0, child=True)
    assert "simulator process" in counter
    worst = max(sites, key=lambda s: s.degree)
    assert worst.kind == "load" and round(worst.degree) == 32 and "tile[tx, ty + j]" in worst.source


def test_pad_direct_transpose_skips_shared_memory():
    _failed(grade("02.pad", gemm_no_shared, progress=False), "correct at 1x1", "raised")


def test_warp_sum_wrong_offsets_and_no_shuffles():
    # 1x1 passes (only lane 0 holds a value); 5x37 does not: lane 1's partial never reaches lane 0
    _failed(grade("04.warp_sum", row_sum_missing_last_step, progress=False), "correct at 5x37",
            "rows=5 cols=37", "5/5 elements off, first at (0,)")
    _failed(grade("04.warp_sum", row_sum_serial, progress=False), "reduces with warp shuffles", "0 SHFL", "shfl_down")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the simulator's -inf - -inf
def test_online_softmax_masked_row_and_overflow():
    _failed(grade("04.online_softmax", online_update_no_guard, progress=False), "correct at 3x37",
            "row 2", "-inf", "NaN")
    _failed(grade("04.online_softmax", online_update_no_max, progress=False), "correct at", "row")


def test_grade_reports_its_seed_and_reproduces():
    a = grade("01.grid_stride", saxpy_one_per_thread, seed=123, progress=False)
    b = grade("01.grid_stride", saxpy_one_per_thread, seed=123, progress=False)
    assert a.seed == b.seed == 123 and a.message == b.message


@pytest.mark.skipif(not perfkit.backend.is_simulator(), reason="the bank counter records the simulator's accesses")
def test_bank_counter_counts_a_known_pattern():
    """32 lanes reading one column of a 32-wide float32 tile: 32 wavefronts; a row: 1."""
    from perfkit.exercises import _smem

    @cuda.jit
    def column_and_row(out):
        sh = cuda.shared.array((32, 32), float32)
        t = cuda.threadIdx.x
        for i in range(32):
            sh[t, i] = t
        cuda.syncthreads()
        out[t] = sh[t, 0] + sh[0, t]

    with _smem.record() as rec:
        column_and_row[1, 32](np.zeros(32, np.float32))
    by_kind = {(s.kind, s.worst) for s in rec.lines()}
    assert ("store", 32) in by_kind      # sh[t, i]: lane t at word 32 t + i, all in bank i
    assert ("load", 32) in by_kind       # the load line has one access of each kind: worst is 32
    assert any(s.accesses == 32 for s in rec.lines() if s.kind == "store")


def test_im2col_swapped_taps_named_by_pixel_and_tap():
    g = grade("03.im2col", im2col_taps_transposed, progress=False)
    _failed(g, "correct at x 2x3x7x5", "stride 2, pad 1", "first at (")
    idx = next(c for c in g.checks if c.name == "index math")
    assert idx.ok is False and "output pixel (b, p, q)" in idx.message and "tap (c, r, s)" in idx.message


def test_direct_conv_clamped_padding():
    _failed(grade("03.direct", conv_direct_no_padding_test, progress=False), "correct at x 2x3x7x5",
            "elements off", "padding contributes zeros")


# --- prediction exercises: one per notebook, graded against a record or the model -----------------
def test_a_prediction_exercise_in_every_notebook():
    for nb in ("01", "02", "03", "04", "05", "06"):
        assert any(exercises.EXERCISES[n].answer_kind == "prediction" for n in exercises.names(nb)), nb


@pytest.mark.parametrize("name, answer, check, fragment", [
    ("01.predict_saxpy", {"us": 2900.0}, "within 30%", "Count the bytes"),
    ("01.predict_saxpy", {"us": -1}, "a time", "positive number"),
    ("02.predict_order", {"faster": "no_bank_conflicts", "x": 1.3}, "the faster rung", "anatomy"),
    ("02.predict_order", {"faster": "warptile", "x": 3.0}, "the factor", "25%"),
    ("02.predict_order", {"faster": "cublas", "x": 1.3}, "a rung and a factor", "faster must be"),
    ("03.predict_bound", {"bound": "dram"}, "the leg the model says", "warps"),
    ("04.predict_softmax", {"us": 500.0, "beats_oracle": True}, "within 30%", "bytes"),
    ("04.predict_softmax", {"us": 60.0, "beats_oracle": False}, "whether the best rung", "of oracle"),
    ("05.predict_share", {"class": "conv"}, "the class with the largest", "bytes"),
    ("06.predict_gpu", {"faster": "a100-sxm-80gb", "bound": "dram"}, "the GPU the model", "devices.yaml"),
    ("06.predict_gpu", {"faster": "h100-sxm", "bound": "fp32"}, "the leg that binds", "bytes per FLOP"),
])
def test_a_wrong_prediction_says_what_to_reconsider_not_the_answer(name, answer, check, fragment):
    from perfkit.exercises import solution

    g = grade(name, answer, progress=False)
    f = _failed(g, check, fragment)
    right = solution(name)
    if f is g.checks[0]:  # a malformed answer: the message lists the choices
        return
    for k, v in right.items():  # a wrong one: the message does not give the reference answer away
        if isinstance(v, str) and answer.get(k) != v:
            assert v not in f.message, f.message


# --- the graders' shared helpers -------------------------------------------------------------------
def test_answer_error_names_the_kind_wanted():
    want = {"kernel": "@cuda.jit", "device function": "@cuda.jit(device=True)"}
    assert _core.answer_error(saxpy_one_per_thread, "kernel") is None
    assert _core.answer_error(online_update_no_guard, "device function") is None
    assert _core.answer_error(3, "config") is None
    assert _core.answer_error(online_update_no_guard, "kernel") == \
        "this is a device function (cuda.jit(device=True)); the exercise wants a kernel: @cuda.jit"
    assert _core.answer_error(saxpy_one_per_thread, "device function") == \
        "this is a kernel (@cuda.jit); the exercise wants a device function: @cuda.jit(device=True)"
    for kind, deco in want.items():
        assert _core.answer_error(plain_python, kind) == \
            f"'plain_python' is a plain Python function: decorate it with {deco}"
    assert _core.answer_error(3, "kernel") == "expected a @cuda.jit kernel, got int"
    assert _core.answer_error(3, "device function") == "expected a @cuda.jit(device=True) function, got int"


def test_register_budget_stops_at_a_failed_compile(monkeypatch):
    monkeypatch.setattr(_core, "inspect_rung", lambda v, p, cc: "could not compile for sm_90")
    assert [(c.name, c.ok, c.message) for c in _core.register_budget(None, None, (9, 0), 40)] == \
        [("registers <= 40", False, "could not compile for sm_90")]

    class Report:
        registers, stack_bytes, spill_store_bytes, spill_load_bytes = 48, 0, 0, 8

    monkeypatch.setattr(_core, "inspect_rung", lambda v, p, cc: Report())
    checks = list(_core.register_budget(None, None, (8, 0), 40, "fewer", name_cc=True, local="no spills"))
    assert [(c.name, c.ok, c.message) for c in checks] == [
        ("registers <= 40", False, "48 registers per thread at sm_80: fewer"),
        ("no spills", False, "0 B stack, 8 B spills")]
    assert [c.name for c in _core.register_budget(None, None, (9, 0), 64, local=None)] == ["registers <= 64"]


def test_the_bound_exercise_asks_about_a_layer_no_card_above_it_answers():
    """03.predict_bound asked which leg binds rung 1 at the example layer, which rung 1's card
    (cell 10 of notebook 03) had already answered.  It asks at another layer; a leg within 2% of
    the binding one (direct's latency and issue legs are equal) is graded as binding, any other fails."""
    from perfkit import model
    from perfkit.exercises.predict import _TIE, conv_bound_problem
    from perfkit.kernels import conv

    p = conv_bound_problem()
    assert p.label != conv.EXAMPLE_PROBLEM.label and (p.c, p.h) == (512, 7)
    assert all(p.label != conv.to_layout(conv.EXAMPLE_PROBLEM, lay).label for lay in ("NCHW", "NHWC"))
    v = next(x for x in conv.LADDER if x.name == "direct")
    e = model.estimate(v, p, "h100-sxm", banks=False)
    top = e.legs[e.bound]
    for leg, s in e.legs.items():
        if not s:
            continue
        g = grade("03.predict_bound", {"bound": leg}, progress=False)
        assert g.checks[-1].ok == (s >= (1 - _TIE) * top), (leg, s, top)
