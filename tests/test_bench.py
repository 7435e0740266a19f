from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from numba import cuda

from perfkit import bench
from perfkit.kernels import saxpy
from perfkit.kernels.base import Launch, UnsupportedProblem, Variant


@cuda.jit
def _skips_last(out, x, y, alpha, n):
    i = cuda.grid(1)
    if i < n - 1:  # bug: the last element is never written
        out[i] = alpha * x[i] + y[i]


@cuda.jit
def _wrong(out, x, y, alpha, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = alpha * x[i] - y[i]


@dataclass(frozen=True)
class SkipsLast(Variant):
    rung: ClassVar[int] = 7
    name: ClassVar[str] = "skips_last"

    def plan(self, p, b):
        return [Launch(_skips_last, -(-p.n // 64), 64, (b["out"], b["x"], b["y"], np.float32(p.alpha), p.n))]


@dataclass(frozen=True)
class Wrong(SkipsLast):
    name: ClassVar[str] = "wrong"

    def plan(self, p, b):
        return [Launch(_wrong, -(-p.n // 64), 64, (b["out"], b["x"], b["y"], np.float32(p.alpha), p.n))]


@dataclass(frozen=True)
class Raises(SkipsLast):
    name: ClassVar[str] = "raises"

    def plan(self, p, b):
        raise RuntimeError("boom")


@dataclass(frozen=True)
class Picky(SkipsLast):
    name: ClassVar[str] = "picky"

    def supports(self, p):
        raise UnsupportedProblem("n must be a multiple of 1024")


def test_sweep_checks_then_times_and_keeps_failures():
    problems = [saxpy.Problem(n=1), saxpy.Problem(n=130)]
    variants = [saxpy.LADDER[1], SkipsLast(), Wrong(), Raises(), Picky()]
    t = bench.sweep(problems, variants, progress=False)
    assert len(t) == 10
    by = {(r.n, r.variant): r for r in t.itertuples()}
    good = by[(130, "naive")]
    assert good.check_ok and good.status == "ok" and good.median_s > 0 and good.n_samples >= 1
    # the NaN poison shows the unwritten last element: failing, never timed
    bad = by[(130, "skips_last")]
    assert not bad.check_ok and "check failed" in bad.error and np.isnan(bad.median_s)
    assert "(129,)" in bad.error
    assert not by[(130, "wrong")].check_ok and np.isnan(by[(130, "wrong")].median_s)
    assert by[(130, "raises")].status.startswith("error") and "boom" in by[(130, "raises")].error
    assert by[(130, "picky")].status == "unsupported" and "multiple of 1024" in by[(130, "picky")].error
    for col in ("op", "problem", "rung", "variant", "check_ok", "error", "median_s", "min_s", "iqr_s",
                "cv", "n_samples", "simulated", "flops", "bytes", "tflops", "gbps", "model_s",
                "model_limiter", "n", "dtype"):
        assert col in t.columns, col
    if t["simulated"].all():
        assert t["gbps"].isna().all() and t["tflops"].isna().all()  # a simulated time is no speed


def test_sweep_uses_fresh_check_inputs_each_time():
    a = bench.sweep(saxpy.Problem(n=4), saxpy.LADDER[1], progress=False)
    b = bench.sweep(saxpy.Problem(n=4), saxpy.LADDER[1], progress=False)
    assert a["check_seed"][0] != b["check_seed"][0]


def test_sweep_records_each_result(tmp_path):
    t = bench.sweep([saxpy.Problem(n=5)], saxpy.LADDER[:2], record=True, results_root=tmp_path, progress=False)
    assert t["path"].notna().all()
    from perfkit import results

    assert len(results.load(root=tmp_path)) == 2


@pytest.mark.parametrize("args, exc", [
    (([], saxpy.LADDER), ValueError),
    (([saxpy.Problem(n=3)], []), ValueError),
    ((["n=3"], saxpy.LADDER), TypeError),
    (([saxpy.Problem(n=3)], ["naive"]), TypeError),
])
def test_sweep_rejects_bad_arguments(args, exc):
    with pytest.raises(exc):
        bench.sweep(*args, progress=False)


def test_oracle_gpu_path_takes_library_owned_outputs(monkeypatch):
    """On a GPU an oracle may return the library's own output buffers (torch tensors, CuPy
    arrays, views) instead of copying into ours, so its timing holds only the library's
    kernels.  Exercised here with NumPy standing in for CuPy and a minimal tensor stand-in."""
    import sys
    import types

    from perfkit import backend
    from perfkit.kernels.norm import layernorm

    class FakeTensor:  # what fetch needs of a torch tensor: detach().cpu().numpy()
        def __init__(self, a):
            self.a = a

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    fake_cp = types.SimpleNamespace(
        asarray=np.asarray, full=np.full, asnumpy=np.asarray,
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cp)
    monkeypatch.setattr(backend, "is_simulator", lambda: False)

    class LibOracle(layernorm.Oracle):
        def gpu(self, problem, x, out):
            r = self.host(problem, x)
            # mean as torch returns it, (rows, 1); y as a transposed-back view; rstd in our buffer
            out["rstd"][...] = r["rstd"]
            return {"y": FakeTensor(np.asfortranarray(r["y"])), "mean": FakeTensor(r["mean"][:, None])}

    p = layernorm.Problem(5, 7)
    x = p.make_inputs(3)
    prep = LibOracle().prepare(p, x)
    prep()
    got = prep.output()
    assert set(got) == {"y", "mean", "rstd"} and got["mean"].shape == (5,)
    assert all(a.flags.c_contiguous for a in got.values())
    assert p.check(got, p.reference(x)).ok


def test_check_names_a_wrong_output_dtype_and_nan_error_is_infinite():
    from perfkit.kernels import saxpy

    p = saxpy.Problem(5, alpha=2.0)
    x = p.make_inputs(1)
    ref = p.reference(x)
    assert p.check(ref, ref).ok                       # a float64 reference is accepted
    assert p.check(ref.astype(np.float32), ref).ok    # the problem's own dtype
    bad = p.check(ref.astype(np.float16), ref)
    assert not bad.ok and "dtype float16, expected float32" in bad.message
    poisoned = ref.astype(np.float32)
    poisoned[3] = np.nan
    r = p.check(poisoned, ref)
    assert not r.ok and r.n_nan == 1 and r.max_abs_err == np.inf
