"""The foundation contract on the first op: inputs, float64 reference, every rung checked at
awkward sizes with fresh random inputs and NaN-poisoned outputs; bad inputs rejected."""
import numpy as np
import pytest

from perfkit.kernels import saxpy
from perfkit.kernels.base import ProblemError, registry_check

SIZES = [1, 2, 31, 257, 1000, 4099]


def test_registry():
    registry_check(saxpy.LADDER)
    assert saxpy.LADDER[0].oracle and saxpy.LADDER[0].rung == 0
    assert all(v.what for v in saxpy.LADDER)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("rung", range(len(saxpy.LADDER)), ids=lambda r: saxpy.LADDER[r].name)
def test_every_rung_matches_float64_reference(rung, n, fresh_seed):
    problem = saxpy.Problem(n=n, alpha=-1.7)
    inputs = problem.make_inputs(fresh_seed)
    out = saxpy.LADDER[rung].run(problem, inputs)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (n,)
    ref = inputs["x"].astype(np.float64) * -1.7 + inputs["y"].astype(np.float64)  # independent
    res = problem.check(out, ref)
    assert res.ok, res.message


def test_float64_rungs():
    problem = saxpy.Problem(n=77, dtype="float64", alpha=0.5)
    inputs = problem.make_inputs(3)
    for v in saxpy.LADDER:
        out = v.run(problem, inputs)
        assert out.dtype == np.float64
        np.testing.assert_allclose(out, 0.5 * inputs["x"] + inputs["y"], rtol=1e-14)


def test_reference_is_float64_and_inputs_are_seeded():
    p = saxpy.Problem(n=10)
    a, b = p.make_inputs(5), p.make_inputs(5)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(p.make_inputs(6)["x"], a["x"])
    assert p.reference(a).dtype == np.float64
    assert p.flops == 20 and p.bytes == 120


def test_check_catches_an_unwritten_element():
    p = saxpy.Problem(n=64)
    inputs = p.make_inputs(0)
    ref = p.reference(inputs)
    out = ref.astype(np.float32)
    out[17] = np.nan
    r = p.check(out, ref)
    assert not r.ok and r.n_nan == 1 and "(17,)" in r.message
    out[17] = ref[17] + 1.0
    assert not p.check(out, ref).ok


def test_check_passes_where_reference_is_nan_too():
    p = saxpy.Problem(n=4)
    ref = np.array([1.0, np.nan, np.inf, -2.0])
    assert p.check(ref.astype(np.float32), ref).ok
    assert not p.check(np.array([1.0, 0.0, np.inf, -2.0], np.float32), ref).ok


@pytest.mark.parametrize("kw, msg", [
    (dict(n=0), "n must be >= 1"),
    (dict(n=-3), "n must be >= 1"),
    (dict(n=2.5), "n must be an int"),
    (dict(n=8, dtype="int32"), "dtype 'int32' is not supported"),
    (dict(n=8, dtype="float16"), "allowed: float32, float64"),
    (dict(n=8, dtype="complex"), "not supported"),
    (dict(n=8, alpha=float("nan")), "alpha must be finite"),
])
def test_bad_problems(kw, msg):
    with pytest.raises(ProblemError, match=msg):
        saxpy.Problem(**kw)


def test_bad_inputs_are_named():
    p = saxpy.Problem(n=8)
    good = p.make_inputs(0)
    v = saxpy.LADDER[1]
    cases = [
        ({**good, "x": good["x"].astype(np.float64)}, "input 'x' has dtype float64, expected float32"),
        ({**good, "y": good["y"][:5]}, r"input 'y' has shape \(5,\), expected \(8,\)"),
        ({**good, "x": np.zeros(16, np.float32)[::2]}, "input 'x' is not C-contiguous"),
        ({"x": good["x"]}, r"missing \['y'\]"),
        ({**good, "z": good["x"]}, r"unexpected \['z'\]"),
        ({**good, "x": list(good["x"])}, "must be a NumPy array"),
    ]
    for inputs, msg in cases:
        with pytest.raises(ProblemError, match=msg):
            v.run(p, inputs)
    with pytest.raises(ProblemError, match="dict of arrays"):
        v.run(p, [good["x"], good["y"]])


def test_unrolled_rejects_bad_unroll():
    from perfkit.kernels.base import UnsupportedProblem

    with pytest.raises(UnsupportedProblem, match="unroll"):
        saxpy.Unrolled(unroll=0).run(saxpy.Problem(n=4), saxpy.Problem(n=4).make_inputs(0))


def test_traffic_models():
    p = saxpy.Problem(n=1000)
    for v in saxpy.LADDER:
        t = v.traffic(p)
        assert t.flops == p.flops and t.dram_bytes >= p.bytes and t.limiter == "dram"


@pytest.mark.parametrize("alpha", ["2", None, np.array([1.0, 2.0]), np.array(2.0), True, np.bool_(True), 1 + 2j],
                         ids=repr)
def test_alpha_must_be_a_real_number(alpha):
    with pytest.raises(ProblemError, match="alpha must be a real number"):
        saxpy.Problem(n=8, alpha=alpha)


def test_alpha_accepts_numbers_that_fit_the_dtype():
    for alpha, dtype in ((3, "float32"), (np.int64(-2), "float32"), (np.float32(0.5), "float32"),
                         (1e300, "float64")):
        saxpy.Problem(n=8, alpha=alpha, dtype=dtype)
    for alpha in (1e39, 10**400, float("-inf")):  # 1e39 overflows float32
        with pytest.raises(ProblemError, match="alpha must be finite in float32"):
            saxpy.Problem(n=8, alpha=alpha)


@pytest.mark.parametrize("cls, field, value", [
    (saxpy.Naive, "block", 0), (saxpy.GridStride, "blocks_per_sm", 0), (saxpy.GridStride, "block", -1),
    (saxpy.Unrolled, "unroll", -2), (saxpy.Naive, "block", 256.0), (saxpy.Unrolled, "blocks_per_sm", True),
])
def test_tunables_must_be_positive_ints(cls, field, value):
    from perfkit.kernels.base import UnsupportedProblem

    with pytest.raises(UnsupportedProblem, match=f"{field} must be an int >= 1, got {value!r}"):
        cls(**{field: value})


@pytest.mark.parametrize("cls", [saxpy.Naive, saxpy.GridStride, saxpy.Unrolled], ids=lambda c: c.name)
def test_supports_refuses_more_than_1024_threads_per_block(cls):
    from perfkit.kernels.base import UnsupportedProblem

    p = saxpy.Problem(n=4)
    cls(block=1024).supports(p)
    with pytest.raises(UnsupportedProblem, match="2048 threads per block .block 2048. > 1024"):
        cls(block=2048).supports(p)


def test_supports_refuses_more_than_2_31_blocks_on_grid_x():
    from perfkit.kernels.base import UnsupportedProblem

    p = saxpy.Problem(n=2**31)  # never allocated: supports() is arithmetic on the launch plan
    with pytest.raises(UnsupportedProblem, match="grid.x = 2147483648 blocks .* > 2147483647"):
        saxpy.Naive(block=1).supports(p)
    saxpy.Naive(block=2).supports(p)
    saxpy.GridStride(block=1).supports(p)  # a grid-stride grid is a few blocks per SM
    saxpy.Unrolled(block=1, unroll=1).supports(p)
