import os
import subprocess
import sys

import pytest

from perfkit import backend

HAS_GPU = not backend.is_simulator()


def _python(code: str, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_choice_is_announced_in_one_line_and_made_before_numba_cuda():
    r = _python("import perfkit; from numba import cuda; from numba.core import config;"
                "print(perfkit.backend.name(), config.ENABLE_CUDASIM)")
    assert r.returncode == 0, r.stderr
    announced = [l for l in r.stderr.splitlines() if l.startswith("perfkit: backend")]
    assert len(announced) == 1
    name, sim = r.stdout.split()
    assert (name == "sim") == (sim == "1")


def test_forced_simulator():
    r = _python("import perfkit; from numba import cuda; print(perfkit.backend.name(), cuda.simulator_enabled if hasattr(cuda, 'simulator_enabled') else '')",
                PERFKIT_BACKEND="sim")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "sim"
    assert "simulator" in r.stderr


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_forcing_gpu_without_one_is_a_clear_error():
    r = _python("import perfkit", PERFKIT_BACKEND="gpu")
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "PERFKIT_BACKEND=gpu" in r.stderr and "no usable GPU" in r.stderr


def test_invalid_backend_value_is_rejected():
    r = _python("import perfkit", PERFKIT_BACKEND="tpu")
    assert r.returncode != 0
    assert "PERFKIT_BACKEND='tpu' is not valid" in r.stderr


def test_conflict_with_numba_already_imported_is_named():
    r = _python("import os; os.environ['NUMBA_ENABLE_CUDASIM']='1'; from numba import cuda;"
                "os.environ['PERFKIT_BACKEND']='gpu'; import perfkit")
    assert r.returncode != 0
    assert "already imported" in r.stderr


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_numba_cuda_imported_first_without_a_gpu_says_import_perfkit_first():
    r = _python("from numba import cuda; import perfkit")
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "import perfkit first" in r.stderr
    r = _python("import os; os.environ['NUMBA_ENABLE_CUDASIM']='1'; from numba import cuda; import perfkit;"
                "print(perfkit.backend.name())")
    assert r.returncode == 0 and r.stdout.strip() == "sim", r.stderr


def test_device_facts():
    d = backend.device()
    assert d.simulated == backend.is_simulator()
    if d.simulated:
        assert "simulator" in d.name.lower()
    else:
        assert d.sm_count > 0 and d.l2_bytes > 0 and d.compute_capability[0] >= 7
        assert d.driver_version and d.runtime_version
    assert d.slug and "/" not in d.slug
