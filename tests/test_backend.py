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
    # a notebook's cluster workers choose the same way and say nothing (their stderr reaches the page)
    q = _python("import perfkit; print(perfkit.backend.name())", PERFKIT_BACKEND="sim", PERFKIT_QUIET_BACKEND="1")
    assert q.returncode == 0 and q.stdout.split()[0] == "sim" and "perfkit: backend" not in q.stderr, q.stderr


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


_ROW_STACK_CHILD = r"""
import numpy
if hasattr(numpy, "row_stack"):
    del numpy.row_stack                  # as NumPy 2.5 ships
import perfkit                           # the compat step runs here, before numba.cuda
from perfkit import anatomy, _npcompat
from perfkit.kernels import saxpy
v = saxpy.LADDER[1]
r = anatomy._compile_job(anatomy._job(v, v.example(saxpy.EXAMPLE_PROBLEM), (9, 0)))
assert numpy.row_stack is numpy.vstack and _npcompat.APPLIED == ["row_stack"], _npcompat.APPLIED
assert r["launches"] and "STG" in r["launches"][0]["sass"], "no kernel compiled"
print("COMPILED")
"""

_ROW_STACK_WITHOUT_SHIM = r"""
import numpy
if hasattr(numpy, "row_stack"):
    del numpy.row_stack
from numba import cuda                   # no perfkit: nothing puts the name back
def k(a):
    a[0] = 1.0
try:
    cuda.compile_ptx(k, "void(float32[:])", cc=(9, 0))
except AttributeError as exc:
    print("FAILED", exc)
else:
    print("COMPILED")
"""


def _child(code: str) -> str:
    import subprocess
    import sys

    env = {**os.environ, "PERFKIT_BACKEND": "compile", "NUMBA_ENABLE_CUDASIM": "0"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_numpy_without_row_stack_still_compiles():
    """NumPy 2.5 removed numpy.row_stack; numba-cuda 0.30.4 registers it at the first compile.
    In a child process (the name is gone for good there): without perfkit the compile fails,
    with `import perfkit` first a rung compiles for sm_90a (anatomy, no GPU)."""
    assert "FAILED module 'numpy' has no attribute 'row_stack'" in _child(_ROW_STACK_WITHOUT_SHIM)
    assert "COMPILED" in _child(_ROW_STACK_CHILD)


def test_npcompat_leaves_a_present_name_alone():
    import numpy

    from perfkit import _npcompat

    if "row_stack" not in _npcompat.APPLIED:  # this NumPy has its own row_stack: untouched
        assert numpy.row_stack is not numpy.vstack
    assert _npcompat.apply() == _npcompat.APPLIED
