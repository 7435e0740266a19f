from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from numba import cuda

from perfkit import backend, bench
from perfkit.kernels import saxpy
from perfkit.kernels._vector import load4
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


# --- device faults ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Faults(SkipsLast):
    """Stands for a rung that faults the device (a sticky CUDA error) in this process."""
    name: ClassVar[str] = "faults"

    def plan(self, p, b):
        raise bench.DeviceFault("misaligned address (injected)")


@dataclass(frozen=True)
class DiesHard(SkipsLast):
    """Stands for a fault that kills the process before it can say anything."""
    name: ClassVar[str] = "dies"

    def plan(self, p, b):
        import os

        os._exit(3)


class _CodeError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


@pytest.mark.parametrize("exc, fault", [
    (bench.DeviceFault("x"), True),
    (_CodeError(716, "[CUresult.CUDA_ERROR_MISALIGNED_ADDRESS: 716] Call to cuMemcpyDtoH"), True),
    (RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered"), True),
    (RuntimeError("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"), True),
    (RuntimeError("CUDA error: device-side assert triggered"), True),
    (ValueError("wrapped"), False),
    (RuntimeError("boom"), False),
    (_CodeError(2, "CUDA_ERROR_OUT_OF_MEMORY"), False),  # not sticky: the context lives on
    (RuntimeError("load4: misaligned 128-bit load at [0, 1]: a GPU would fault here"), False),  # simulator
])
def test_device_faults_are_told_from_other_errors(exc, fault):
    assert bench.is_device_fault(exc) is fault


def test_a_fault_inside_a_cause_chain_counts():
    try:
        try:
            raise _CodeError(700, "CUDA_ERROR_ILLEGAL_ADDRESS")
        except _CodeError as inner:
            raise RuntimeError("copy back failed") from inner
    except RuntimeError as outer:
        assert bench.is_device_fault(outer)


@pytest.mark.skipif(not backend.is_simulator(), reason="injects faults with fake rungs; a real fault is provoked "
                    "in test_a_real_fault_is_isolated_in_a_child")
def test_rungs_after_a_device_fault_run_in_fresh_processes(tmp_path):
    p = saxpy.Problem(n=37)
    vs = [Faults(), saxpy.LADDER[1], DiesHard(), saxpy.LADDER[2]]
    with pytest.warns(RuntimeWarning, match="device fault"):
        t = bench.sweep([p], vs, record=True, results_root=tmp_path, progress=False)
    assert list(t.status) == ["device fault", "ok", "device fault", "ok"]
    assert list(t.worker) == [0, 1, 1, 2]  # a fresh process after each fault
    assert t.error[0].startswith("device fault: DeviceFault: misaligned address (injected)")
    assert "died (exit code 3)" in t.error[2]
    assert bench.last_fault == t.error[2]
    recorded = sorted(f.name for f in tmp_path.rglob("*.json"))  # the children recorded theirs
    assert len(recorded) == 2 and any("naive" in f for f in recorded) and any("grid_stride" in f for f in recorded)


_REAL_FAULT = r"""
import perfkit
from perfkit import bench
from perfkit.kernels import saxpy
import test_bench
t = bench.sweep([saxpy.Problem(n=4099)], [test_bench.RealFault(), saxpy.LADDER[1]], record=False,
                progress=False)
print("STATUS", list(t.status), list(t.worker))
print("ERROR", t.error[0])
"""


@cuda.jit
def _misaligned_probe(a, out, j):
    x0, x1, x2, x3 = load4(a, 1, j)  # j = 2: a 128-bit load 8 bytes off a 16-byte boundary
    out[0] = x0 + x1 + x2 + x3


@dataclass(frozen=True)
class RealFault(SkipsLast):
    """A 128-bit load at a misaligned address: on a GPU, CUDA_ERROR_MISALIGNED_ADDRESS."""
    name: ClassVar[str] = "real_fault"

    def plan(self, p, b):
        a = cuda.to_device(np.zeros((3, 8), np.float32))
        return [Launch(_misaligned_probe, 1, 1, (a, b["out"], 2))]


@pytest.mark.skipif(backend.is_simulator(), reason="a real device fault needs a GPU (its child process)")
def test_a_real_fault_is_isolated_in_a_child():
    """In a child (the fault must not take this test process's context): a misaligned load
    faults the GPU inside a sweep, its row says so, and the next rung still runs, fresh."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PERFKIT_BACKEND": "gpu",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", _REAL_FAULT], capture_output=True, text=True, env=env, timeout=600)
    # (its exit status is not asserted: a faulted context may complain while the process exits)
    assert "STATUS ['device fault', 'ok'] [0, 1]" in r.stdout, r.stdout + r.stderr[-3000:]
    assert "misaligned" in r.stdout.lower()


def test_sweep_makes_each_problems_inputs_and_reference_once(monkeypatch):
    """The inputs and float64 reference of a (problem, seed) are built once and shared by the
    rungs (host work that dominated a GPU sweep); each rung still gets its own NaN-poisoned
    output, and a rung that writes into its inputs cannot spoil the next rung's."""
    calls = []
    real = saxpy.Problem._reference

    def counting(self, inputs):
        calls.append(self.label)
        return real(self, inputs)

    monkeypatch.setattr(saxpy.Problem, "_reference", counting)
    probs = [saxpy.Problem(n=37), saxpy.Problem(n=53)]
    df = bench.sweep(probs, list(saxpy.LADDER) + [Wrong()], progress=False, record=False)
    assert len(calls) == 4  # 2 problems x (check seed, timing seed), not x 5 rungs
    assert list(df["status"]) == ["ok"] * 4 + ["failed check"] + ["ok"] * 4 + ["failed check"]
    same = bench.sweep(probs[0], list(saxpy.LADDER), progress=False, record=False, seed=3, check_seed=3)
    assert len(calls) == 5 and (same["status"] == "ok").all()  # one seed: one reference

    data = bench._ProblemData()
    a, _ = data.get(probs[0], 1)
    a["x"][:] = np.nan  # a rung that scribbles on its host inputs
    b, _ = data.get(probs[0], 1)
    assert not np.isnan(b["x"]).any() and data.made == 1
