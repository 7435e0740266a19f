import json
import threading
from pathlib import Path

import pytest

from perfkit import backend, results


def _entry(**kw):
    e = {"op": "saxpy", "problem": "n=8", "params": {"n": 8}, "rung": 1, "variant": "naive",
         "flops": 16.0, "bytes": 96.0, "timing": {"median_s": 1e-6, "samples": [1e-6, 2e-6], "n": 2},
         "check": {"ok": True, "max_abs_err": 0.0}, "check_ok": True}
    e.update(kw)
    return e


def test_record_writes_provenance_and_load_reads_it(tmp_path):
    path = results.record(_entry(simulated=False), root=tmp_path)
    doc = json.loads(path.read_text())
    prov = doc["provenance"]
    for key in ("gpu", "compute_capability", "driver_version", "runtime_version", "packages",
                "git_commit", "git_dirty", "utc", "host", "python"):
        assert key in prov
    assert "numba" in prov["packages"] and prov["utc"].endswith("+00:00")
    assert doc["timing"]["samples"] == [1e-6, 2e-6] and doc["check"]["ok"] is True
    df = results.load(root=tmp_path)
    assert len(df) == 1
    row = df.iloc[0]
    assert row["op"] == "saxpy" and row["n"] == 8 and row["median_s"] == 1e-6
    assert row["gbps"] == pytest.approx(96.0 / 1e-6 / 1e9)
    assert results.load(op="gemm", root=tmp_path).empty
    assert results.load(gpu="no-such-gpu", root=tmp_path).empty


def test_record_never_overwrites_and_is_atomic(tmp_path):
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(results.record(_entry(simulated=False), root=tmp_path)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 8
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 8 and not list(tmp_path.rglob(".tmp-*"))
    assert len(results.load(root=tmp_path, latest=False)) == 8
    assert len(results.load(root=tmp_path)) == 1  # latest per (gpu, op, problem, rung, variant)


@pytest.mark.skipif(not backend.is_simulator(), reason="simulator behaviour")
def test_simulated_results_never_go_to_data_results(tmp_path):
    with pytest.raises(results.ResultsError, match="never written"):
        results.record(_entry(simulated=True), root=results.RESULTS_DIR)
    with pytest.raises(results.ResultsError, match="never written"):
        results.record(_entry(simulated=True), root=results.RESULTS_DIR / "sub")
    p = results.record(_entry(simulated=True), root=tmp_path)
    assert json.loads(p.read_text())["simulated"] is True


def test_load_of_an_empty_or_missing_folder(tmp_path):
    df = results.load(root=tmp_path / "nothing")
    assert df.empty and list(df.columns) == results.COLUMNS
    assert df[df["op"] == "gemm"].empty  # filtering an empty result works like a full one


@pytest.mark.skipif(not backend.is_simulator(), reason="simulator behaviour")
def test_a_simulator_run_cannot_be_relabelled_real(tmp_path):
    p = results.record(_entry(simulated=False), root=tmp_path)
    assert json.loads(p.read_text())["simulated"] is True
    with pytest.raises(results.ResultsError, match="never written"):
        results.record(_entry(simulated=False), root=results.RESULTS_DIR)


def test_numpy_nan_and_inf_become_plain_json(tmp_path):
    import numpy as np

    e = _entry(timing={"median_s": np.float32(1e-6), "samples": np.array([1e-6, 2e-6]), "n": np.int64(2)},
               check={"ok": np.bool_(False), "max_abs_err": float("nan"), "rel": np.inf}, where=tmp_path)
    doc = json.loads(results.record(e, root=tmp_path).read_text())
    assert doc["timing"]["samples"] == [1e-6, 2e-6] and doc["timing"]["n"] == 2
    assert doc["check"] == {"ok": False, "max_abs_err": None, "rel": None} and doc["where"] == str(tmp_path)


def test_a_file_that_is_not_a_result_is_named(tmp_path):
    bad = tmp_path / "gpu" / "saxpy" / "y.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("[1, 2]")
    with pytest.raises(results.ResultsError, match="y.json.*list"):
        results.load(root=tmp_path)


def test_unreadable_file_is_named(tmp_path):
    bad = tmp_path / "gpu" / "saxpy" / "x.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(results.ResultsError, match="x.json"):
        results.load(root=tmp_path)


def test_recorded_results_in_the_repo_have_provenance():
    """Every file under data/results must come from a real GPU run with full provenance."""
    for path in results.RESULTS_DIR.glob("*/*/*.json"):
        doc = json.loads(path.read_text())
        prov = doc["provenance"]
        assert doc.get("simulated") is False and prov["simulated"] is False, path
        assert prov["gpu"] and prov["driver_version"] and prov["git_commit"] and prov["utc"], path
        assert doc["timing"]["samples"], path


def test_keys_that_collide_as_text_are_refused(tmp_path):
    with pytest.raises(results.ResultsError, match="collide"):
        results.record(_entry(params={1: "a", "1": "b"}), root=tmp_path)


def test_the_suite_records_into_a_temporary_folder():
    """conftest points real records with no root away from data/results/ for the whole run."""
    import os

    where = Path(os.environ[results.RECORD_DIR_ENV]).resolve()
    assert where.exists() and results.RESULTS_DIR.resolve() not in [where, *where.parents]


def test_the_data_results_guard_sees_every_kind_of_change(tmp_path):
    from conftest import results_changes, snapshot_results

    (tmp_path / "gpu" / "op").mkdir(parents=True)
    a, b = tmp_path / "gpu" / "op" / "a.json", tmp_path / "gpu" / "op" / "b.json"
    a.write_text("{}")
    b.write_text("{}")
    before = snapshot_results(tmp_path)
    assert results_changes(before, snapshot_results(tmp_path)) == []
    (tmp_path / "gpu" / "op" / "c.json").write_text("{}")
    a.write_text('{"x": 1}')
    b.unlink()
    assert results_changes(before, snapshot_results(tmp_path)) == [
        "appeared: gpu/op/c.json", "vanished: gpu/op/b.json", "changed: gpu/op/a.json"]
