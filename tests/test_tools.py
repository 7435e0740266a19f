import importlib.util
import json
from pathlib import Path

import pytest

from perfkit import backend

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("record_gpu", ROOT / "tools" / "record_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not backend.is_simulator(), reason="the dry run is the simulator path")
def test_record_gpu_dry_run_records_nothing_and_resumes(tmp_path):
    mod = _tool()
    before = sorted((ROOT / "data" / "results").rglob("*"))
    argv = ["--out", str(tmp_path), "--parts", "tests,ceilings,timer,ops,ncu", "--ops", "saxpy", "--budget-s", "600"]
    assert mod.main(argv) == 0
    assert sorted((ROOT / "data" / "results").rglob("*")) == before
    assert not (tmp_path / "results").exists()  # simulated: nothing recorded anywhere
    log = (tmp_path / "record_gpu.log").read_text()
    assert "simulator" in log and "[tests] skipped" in log and "[ncu] skipped" in log
    assert "[ops-saxpy-0] ok" in log and "[ceilings] ok" in log and "[timer] ok" in log
    assert "03 unrolled" in (tmp_path / "logs" / "ops-saxpy-0.log").read_text()
    assert (tmp_path / "sweep_saxpy.csv").exists() and (tmp_path / "ceilings.csv").exists()
    timer = (tmp_path / "measure_vs_do_bench.csv").read_text()
    assert "empty" in timer and "02 grid_stride" in timer
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["left"] == [] and status["failed"] == []
    # run again: every unit is done, nothing runs twice
    assert mod.main(argv) == 0
    assert (tmp_path / "record_gpu.log").read_text().count("[ops-saxpy-0] done before") == 1


def test_record_gpu_respects_its_budget_and_checks_its_arguments(tmp_path):
    mod = _tool()
    assert mod.main(["--out", str(tmp_path), "--parts", "ceilings", "--budget-s", "1"]) == 3  # work left
    assert "not started" in (tmp_path / "record_gpu.log").read_text()
    assert json.loads((tmp_path / "status.json").read_text())["left"] == ["ceilings"]
    with pytest.raises(SystemExit):
        mod.main(["--out", str(tmp_path), "--parts", "warp-speed"])
    with pytest.raises(SystemExit, match="unknown op"):
        mod.main(["--out", str(tmp_path), "--parts", "ops", "--ops", "nosuchop"])


_RAW = '''==PROF== Connected to process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","gpu__time_duration.sum","launch__registers_per_thread","sm__cycles_elapsed.avg.per_second","smsp__inst_executed.sum","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
"","","","","","","","","","","","byte","nsecond","register/thread","cycle/second","inst","inst"
"0","1","python","h","perfkit::ncu_driver::perfkit_ncu_marker[abi:v1,cw51](Array<int, 1, C, mutable, aligned>)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","0","2,048","16","1,980,000,000","1","0"
"1","1","python","h","perfkit::kernels::gemm::gemm_naive[abi:v1,cw51cXTL](Array<float, 2, C, mutable, aligned>)","1","7","(32, 32, 1)","(128, 128, 1)","0","9.0","8,412,003,072","275,143,904","30","1,979,645,146","73,604,268,032","68,719,476,736"
"2","1","python","h","perfkit::ncu_driver::perfkit_ncu_marker[abi:v1,cw51](Array<int, 1, C, mutable, aligned>)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","0","2,048","16","1,980,000,000","1","0"
"3","1","python","h","sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__51_cublas","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","342,072,832","2,667,776","254","1,976,688,169","2,428,305,408","68,736,253,952"
"4","1","python","h","cupy_add(float const*)","1","7","(256, 1, 1)","(32, 1, 1)","0","9.0","1","1,000","20","1,900,000,000","10","0"
==PROF== Disconnected from process 1234
'''


def test_ncu_raw_csv_becomes_the_metrics_table():
    """Markers split the kernels into rungs (a rung may have several kernels); units become
    the table's (us, bytes, Hz); the FFMA share is FFMA thread instructions / 32 / warp instructions."""
    mod = _tool()
    manifest = [{"op": "gemm", "problem": "m=4096", "rung": "01 naive"},
                {"op": "gemm", "problem": "m=4096", "rung": "00 oracle"}]
    rows = mod.ncu_table(_RAW, manifest)
    assert [(r["rung"], r["kernel"]) for r in rows] == [
        ("01 naive", "gemm_naive"), ("00 oracle", rows[1]["kernel"]), ("00 oracle", "cupy_add")]
    assert rows[1]["kernel"].startswith("sm80_xmma_gemm_f32f32")
    naive = rows[0]
    assert naive["time_us"] == pytest.approx(275143.904)
    assert naive["dram_read_bytes"] == 8412003072 and naive["registers_per_thread"] == 30
    assert naive["sm_clock_hz"] == pytest.approx(1979645146)
    assert rows[1]["ffma_share_of_warp_instructions"] == pytest.approx(0.8845707500067471)
    assert set(mod.NCU_TABLE) >= set(mod.NCU_COLUMNS)  # every metric has its column


@pytest.mark.skipif(not backend.is_simulator(), reason="the driver runs under ncu on a GPU (record_gpu --parts ncu)")
def test_ncu_driver_marks_every_rung_it_runs(tmp_path):
    """The driver ncu runs: every rung of the op prepared, run once unprofiled, then a marker
    launch and one launch of the rung; the manifest lists them in that order (dry run, tiny size)."""
    import json as _json

    mod = _tool()
    manifest = tmp_path / "saxpy.manifest.jsonl"
    assert mod.ncu_driver("saxpy", manifest) == 0
    rows = [_json.loads(l) for l in manifest.read_text().splitlines()]
    assert [r["rung"] for r in rows] == ["00 oracle", "01 naive", "02 grid_stride", "03 unrolled"]
    assert {r["op"] for r in rows} == {"saxpy"}
    driver = mod.NCU_DRIVER.format(out=str(tmp_path), tool="/x/record_gpu.py")
    compile(driver, "ncu_driver.py", "exec")  # the script record_gpu writes is valid Python


def test_ncu_table_columns_match_the_first_h100_table():
    shared = Path("/work/shared/measurements/h100-2026-11-23/ncu_metrics_all_rungs.csv")
    if not shared.exists():
        pytest.skip("the first H100 run's table is not on this machine")
    assert shared.read_text().splitlines()[0].split(",") == _tool().NCU_TABLE
