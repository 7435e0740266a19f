import importlib.util
from pathlib import Path

import pytest

from perfkit import backend

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not backend.is_simulator(), reason="the dry run is the simulator path")
def test_record_gpu_dry_run_records_nothing(tmp_path):
    spec = importlib.util.spec_from_file_location("record_gpu", ROOT / "tools" / "record_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    before = sorted((ROOT / "data" / "results").rglob("*.json"))
    assert mod.main(["--out", str(tmp_path), "--ops", "saxpy"]) == 0
    assert sorted((ROOT / "data" / "results").rglob("*.json")) == before
    log = (tmp_path / "record_gpu.log").read_text()
    assert "simulator" in log and "03 unrolled" in log and "done" in log
    assert (tmp_path / "sweep_saxpy.csv").exists()
