"""perfkit record (perfkit/record/, tools/record_gpu.py its shim): the plan, the rung filters, the
kill, the rehearsal and resume, Nsight Compute's table, the importer."""
import csv
import json
import os
from pathlib import Path

import pytest

from perfkit import backend
from perfkit.record import command, importer, ncu, plan, supervise
from perfkit.kernels.base import UnsupportedProblem

ROOT = Path(__file__).resolve().parent.parent


QUICK_ORDER = ["ceilings", "timer", "ops-gemm-float16", "ops-gemm-float16-8192", "ops-gemm-float32", "ops-softmax", "ops-layernorm",
               "ops-rmsnorm", "ops-layernorm_bwd", "ops-batchnorm", "ops-conv-float32-nchw", "ops-conv-float16-nhwc"]


def _plan(tmp_path, *extra):
    assert command.main(["--out", str(tmp_path), "--list", *extra]) == 0
    return json.loads((tmp_path / "plan.json").read_text())


@pytest.mark.skipif(not backend.is_simulator(), reason="which rungs are new for Nsight Compute depends on the GPU's own table; this is a no-GPU machine's plan")
def test_quick_plan_lists_its_units_in_order_with_caps_within_the_budget(tmp_path):
    plan = _plan(tmp_path)  # at full size (listing needs no GPU)
    names = [u["name"] for u in plan["units"]]
    assert names[:len(QUICK_ORDER)] == QUICK_ORDER
    assert names[len(QUICK_ORDER):] and all(n.startswith("ncu-") for n in names[len(QUICK_ORDER):])
    caps = [u["cap_s"] for u in plan["units"] if u["cap_s"] is not None]
    assert plan["budget_s"] == 420 and 0 < sum(caps) <= 420
    assert all(u["cap_s"] is None for u in plan["units"] if u["part"] == "ncu")  # what is left
    units = {u["name"]: u for u in plan["units"]}
    # float16-only rungs are planned at their own (float16) problem, in the timer and in ncu
    tc = [i for i in units["timer"]["items"] if i["rung"] == "12 tensor_core"]
    assert tc and tc[0]["problem"]["dtype"] == "float16" and tc[0]["problem"]["m"] == 4096
    ncu16 = [i for u in plan["units"] if u["part"] == "ncu" for i in u["items"] if i["problem"].get("dtype") == "float16"]
    assert {"13 tc_vector", "17 tc_epilogue"} <= {i["rung"] for i in ncu16}
    g16 = {i["rung"] for i in units["ops-gemm-float16"]["items"]}
    assert "00 oracle" in g16 and "12 tensor_core" in g16 and "01 naive" not in g16
    assert {"peer torch", "peer triton"} <= g16
    big = units["ops-gemm-float16-8192"]["items"]  # cuBLAS, then the newest rungs first
    assert {i["problem"]["m"] for i in big} == {8192} and big[0]["rung"] == "00 oracle"
    assert "18 tc_deep" in [i["rung"] for i in big] and "17 tc_epilogue" not in [i["rung"] for i in big]
    assert [int(i["rung"][:2]) for i in big[1:]] == sorted((int(i["rung"][:2]) for i in big[1:]), reverse=True)
    # a unit cut by its cap has measured the newest rungs: oracle, rungs newest first, peers
    for name in ("ops-gemm-float16", "ops-conv-float16-nhwc", "ops-batchnorm"):
        order = [i["rung"] for i in units[name]["items"]]
        nums = [int(r.split()[0]) for r in order if not r.startswith("peer")]
        assert nums[0] == 0 and nums[1:] == sorted(nums[1:], reverse=True) and len(nums) > 3, order
        assert all(r.startswith("peer") for r in order[len(nums):]), order
    assert "12 tensor_core" not in {i["rung"] for i in units["ops-gemm-float32"]["items"]}
    assert units["ops-conv-float16-nhwc"]["items"][0]["problem"]["layout"] == "NHWC"
    # the caps scale with the budget; --ops/--problems pick and order
    half = _plan(tmp_path, "--budget-s", "210")
    assert sum(u["cap_s"] for u in half["units"] if u["cap_s"]) == pytest.approx(sum(caps) / 2)
    picked = _plan(tmp_path, "--ops", "conv,gemm", "--problems", "float16", "--parts", "ops")
    assert [u["name"] for u in picked["units"]] == ["ops-conv-float16-nhwc", "ops-gemm-float16", "ops-gemm-float16-8192"]


@pytest.mark.skipif(not backend.is_simulator(), reason="which rungs are new for Nsight Compute depends on the GPU's own table; this is a no-GPU machine's plan")
def test_ncu_targets_put_new_rungs_first_and_skip_unchanged_library_kernels(monkeypatch):
    from perfkit import history
    from perfkit.kernels import gemm

    tiers = plan.ncu_targets("gemm", gemm, gemm.EXAMPLE_PROBLEM)
    new = [v.label for v, _ in tiers["new"]]
    assert "09 index32" in new and "17 tc_epilogue" in new and "01 naive" not in new
    from perfkit.kernels.base import OracleVariant

    # cuBLAS, torch and Triton are in the last table, and no commit of ours changes them
    assert all(not isinstance(v, OracleVariant) for n, t in tiers.items() if n != "library" for v, _ in t)
    assert not tiers["library"]  # the table has cuBLAS at float32 and float16 both
    monkeypatch.setattr(history, "source_changed_since", lambda v, c: None)  # a copy with no git
    blind = plan.ncu_targets("gemm", gemm, gemm.EXAMPLE_PROBLEM)
    assert [v.label for v, _ in blind["new"]] == new and not blind["changed"]
    assert "01 naive" in [v.label for v, _ in blind["unknown"]]
    assert all(not isinstance(v, OracleVariant) for v, _ in blind["unknown"])


def test_the_library_is_profiled_at_each_dtype_its_ladder_runs(tmp_path, monkeypatch):
    """cuDNN at the float32 layer (an FFT) is not cuDNN at the float16 NHWC one (an implicit GEMM):
    a table with only the first gives the ladder's float16 cards no library counters, so the
    oracle is planned again at the float16 twin, after the new rungs and before the untimed."""
    from perfkit.kernels import conv

    (tmp_path / "t.csv").write_text("op,problem,rung,kernel\n"
                                    f"conv,{conv.EXAMPLE_PROBLEM.label},00 oracle,fft2d_r2c\n")
    monkeypatch.setattr(plan, "ncu_tables_for", lambda gpu: [(tmp_path / "t.csv", "aaa")])
    lib = plan.ncu_targets("conv", conv, conv.EXAMPLE_PROBLEM)["library"]
    assert [(v.name, p.dtype, p.layout) for v, _, p in lib] == [("oracle", "float16", "NHWC")]
    assert "no float16 row" in lib[0][1]
    monkeypatch.setattr(plan, "profiled_anywhere", lambda: set())
    monkeypatch.setattr(plan, "recorded_anywhere", lambda: {("conv", v.name) for v in conv.LADDER[:-1]})
    units = plan.ncu_units([("conv", conv)], tiny=False)
    picked = [(u.name, i["variant"], i["problem"]["dtype"]) for u in units for i in u.items if i["variant"] == "oracle"]
    assert picked == [("ncu-conv-library-1", "oracle", "float16")]
    order = [u.name.rsplit("-", 2)[1] for u in units]
    assert max(i for i, t in enumerate(order) if t == "unseen") < order.index("library") < order.index("untimed")
    # a table with both dtypes plans no library unit
    (tmp_path / "t.csv").write_text("op,problem,rung,kernel\n"
                                    f"conv,{conv.EXAMPLE_PROBLEM.label},00 oracle,fft2d_r2c\n"
                                    f"conv,{lib[0][2].label},00 oracle,sm90_xmma_fprop\n")
    assert not plan.ncu_targets("conv", conv, conv.EXAMPLE_PROBLEM)["library"]


def test_a_rung_profiled_only_at_another_problem_than_its_cards_is_new_again(tmp_path, monkeypatch):
    """A rung with rows only at another problem than the one it is planned (and carded) at looked
    profiled by name, and no plan gave its card a row (conv's rows of one layout, a card of the other)."""
    from perfkit.kernels import conv

    p = conv.EXAMPLE_PROBLEM
    nhwc = conv.to_layout(p, "NHWC", "float32")
    (tmp_path / "t.csv").write_text("op,problem,rung,kernel\n"
                                    f"conv,{nhwc.label},05 igemm_smem,k\nconv,{p.label},02 direct_halo,k\n")
    monkeypatch.setattr(plan, "ncu_tables_for", lambda gpu: [(tmp_path / "t.csv", "aaa")])
    smem = next(v for v in conv.LADDER if v.name == "igemm_smem")
    assert smem.example(p) == p  # planned at the NCHW layer, profiled only at NHWC
    tiers = plan.ncu_targets("conv", conv, p)
    new = {v.name: why for v, why in tiers["new"]}
    assert new["igemm_smem"] == f"no row at {p.label} in any table of this GPU"
    assert "direct_halo" not in new and new["direct"] == "in no table of this GPU"


def test_ncu_rungs_count_as_profiled_in_any_table_of_the_gpu_with_the_newest_tables_commit(tmp_path):
    """A session that profiled a few rungs writes a table of those alone: the rungs of every
    older table are still profiled (not "new" again), and "changed since" is told against the
    commit of the newest table that has the rung."""
    head = "op,problem,rung,kernel\n"
    (tmp_path / "new.csv").write_text(head + "gemm,m=1,09 index32,k\ngemm,m=1,01 naive,k\n")
    (tmp_path / "old.csv").write_text(head + "gemm,m=1,01 naive,k\ngemm,m=1,02 coalesced,k\n")
    have = plan.last_ncu_table([(tmp_path / "new.csv", "bbb"), (tmp_path / "old.csv", "aaa"), (tmp_path / "gone.csv", "ccc")])
    assert have == {("gemm", "index32"): "bbb", ("gemm", "naive"): "bbb", ("gemm", "coalesced"): "aaa"}


def test_a_unit_past_its_limit_is_killed_with_its_children(tmp_path):
    import os
    import sys

    pids = tmp_path / "pids"
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pids)!r}, 'w').write(str(c.pid)); time.sleep(60)")
    rc = supervise.run_child([sys.executable, "-c", code], dict(os.environ), tmp_path / "log", timeout=3)
    assert rc is None  # killed at the limit
    grandchild = int(pids.read_text())
    assert not _alive(grandchild)


def test_a_units_child_and_its_children_die_when_the_parent_is_killed(tmp_path):
    """The parent (a cluster worker, say) is SIGKILLed while its unit runs: the unit's child and
    grandchild, in their own process group, go too (perfkit.record.orphan), not at the next unit."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pids, seen = tmp_path / "pids", tmp_path / "seen"
    grandchild = f"import os, time; open({str(seen)!r}, 'w').write(str(os.environ.get('PERFKIT_UNIT_PARENT'))); time.sleep(60)"
    child = ("from perfkit.record import orphan; import os, subprocess, sys, time; "
             f"armed = orphan.die_with_parent(); c = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
             f"open({str(pids)!r}, 'w').write(f'{{armed}} {{os.getpid()}} {{c.pid}}'); time.sleep(60)")
    parent = ("import os, sys; from pathlib import Path; from perfkit.record import supervise; "
              f"supervise.run_child([sys.executable, '-c', {child!r}], dict(os.environ), Path({str(tmp_path / 'log')!r}), "
              "timeout=60)")
    p = subprocess.Popen([sys.executable, "-c", parent])
    t0 = time.monotonic()
    while not (seen.exists() and seen.read_text() and pids.exists() and len(pids.read_text().split()) == 3):
        assert time.monotonic() - t0 < 60 and p.poll() is None, "the unit's child never started"
        time.sleep(0.05)
    armed, kid, grandkid = pids.read_text().split()
    assert armed == "True" and seen.read_text() == "None"  # the grandchild never sees the variable
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert not _alive(int(kid)) and not _alive(int(grandkid))


def _alive(pid: int) -> bool:
    import time

    for _ in range(40):  # an orphan killed is reaped by init a moment later
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not backend.is_simulator(), reason="the rehearsal is the simulator path")
def test_quick_plan_rehearsal_plans_the_kill_runs_records_simulated_and_resumes(tmp_path):
    """The quick plan in the simulator at tiny shapes, a rung per (part, op, problem).  Planned
    whole (``--list``): the sleeping unit first (to show the kill), then every unit in order, the
    ncu units last.  Run: every unit of its ceilings, timer and ops parts in order, records marked
    simulated under OUT (none in data/results), a float16 rung timed; a second call that carries
    the first one's output skips what it measured; a third runs GEMM's ncu unit (a float16 rung
    among its rungs).  The other ncu units are the same code for other rungs, a child of ~3 s
    each, and the kill of a unit with its grandchild is ``test_a_unit_past_its_limit_is_killed_
    with_its_children``'s: the suite's slowest test lost ~25 s of repeats."""
    import os
    import subprocess
    import sys

    before = sorted((ROOT / "data" / "results").rglob("*"))
    out = tmp_path / "first"
    # caps scaled up from the GPU's (a busy 2-core machine must not time a unit out); the plan is the same
    plan = [sys.executable, str(ROOT / "tools" / "record_gpu.py"), "--plan", "quick", "--rehearse",
            "--max-rungs", "1", "--budget-s", "1200"]
    env = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    r0 = subprocess.run(plan + ["--list", "--out", str(tmp_path / "plan")], env=env, capture_output=True, text=True,
                        timeout=120)
    assert r0.returncode == 0, r0.stdout[-3000:] + r0.stderr[-3000:]
    planned = [u["name"] for u in json.loads((tmp_path / "plan" / "plan.json").read_text())["units"]]
    assert planned[0] == "rehearsal-kill" and planned[1:1 + len(QUICK_ORDER)] == QUICK_ORDER
    ncu_units = planned[1 + len(QUICK_ORDER):]
    assert ncu_units and all(n.startswith("ncu-") for n in ncu_units) and "ncu-gemm-new-1" in ncu_units
    cmd = plan + ["--parts", "ceilings,timer,ops", "--out", str(out)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=480)  # a guard: ~45 s on an idle machine
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {row["unit"]: row for row in json.loads((out / "status.json").read_text())["rows"]}
    assert list(rows) == QUICK_ORDER
    assert all(rows[n]["status"] == "done" for n in QUICK_ORDER), {n: rows[n] for n in QUICK_ORDER}
    assert "compile+check" in rows["ops-conv-float32-nchw"]["stages"]  # where an ops unit's seconds went
    assert "start gemm 12 tensor_core" in (out / "logs" / "timer.log").read_text()  # an item at a time
    # records: under OUT, the simulator's folder, every one simulated; data/results untouched
    recs = sorted((out / "results").glob("*/*/*.json"))
    assert recs and {p.parent.parent.name for p in recs} == {"numba-cuda-simulator"}
    assert all(json.loads(p.read_text())["simulated"] is True for p in recs)
    assert {p.parent.name for p in recs} >= {"gemm", "softmax", "batchnorm", "conv"}
    assert sorted((ROOT / "data" / "results").rglob("*")) == before
    timer = (out / "measure_vs_do_bench.csv").read_text()
    assert "12 tensor_core" in timer and "dtype=float16" in timer and "empty" in timer
    # resume: a second call carrying the first call's output measures nothing again
    out2 = tmp_path / "second"
    r2 = subprocess.run(cmd[:-1] + [str(out2), "--resume-from", str(out), "--parts", "ceilings,timer,ops"],
                        env=env, capture_output=True, text=True, timeout=240)
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    rows2 = {row["unit"]: row for row in json.loads((out2 / "status.json").read_text())["rows"]}
    assert all(rows2[n]["status"] == "skipped" for n in QUICK_ORDER if n != "timer"), rows2
    assert "measured for this commit already" in (out2 / "logs" / "timer.log").read_text()
    assert not (out2 / "results").exists()
    # the plan's ncu part, for GEMM: its unit runs and writes the table's rows
    out3 = tmp_path / "third"
    r3 = subprocess.run(cmd[:-3] + ["ncu", "--ops", "gemm", "--out", str(out3)], env=env, capture_output=True,
                        text=True, timeout=240)
    assert r3.returncode == 0, r3.stdout[-3000:] + r3.stderr[-3000:]
    rows3 = {row["unit"]: row for row in json.loads((out3 / "status.json").read_text())["rows"]}
    assert any(n.startswith("ncu-gemm") and row["status"] == "done" for n, row in rows3.items()), rows3
    ncu_log = next(p for p in (out3 / "logs").glob("ncu-gemm-*.log")).read_text()
    assert "start gemm" in ncu_log and "end   gemm" in ncu_log and ": profiled" in ncu_log
    assert "dtype=float16" in (out3 / "ncu_metrics_all_rungs.csv").read_text()


@pytest.mark.skipif(not backend.is_simulator(), reason="a rehearsal runs in the simulator (record_gpu refuses --rehearse on a GPU)")
def test_record_gpu_respects_its_budget_and_checks_its_arguments(tmp_path, capsys):
    mod = command
    assert mod.main(["--out", str(tmp_path), "--rehearse", "--parts", "ceilings", "--budget-s", "0.5"]) == 3
    assert "not started" in (tmp_path / "record_gpu.log").read_text()
    assert json.loads((tmp_path / "status.json").read_text())["left"] == ["ceilings"]
    with pytest.raises(SystemExit):
        mod.main(["--out", str(tmp_path), "--parts", "warp-speed", "--list"])
    with pytest.raises(SystemExit):
        mod.main(["--out", str(tmp_path), "--parts", "ops", "--ops", "nosuchop", "--list"])
    assert "unknown op" in capsys.readouterr().err
    if backend.is_simulator():
        with pytest.raises(SystemExit):  # no GPU: only a rehearsal runs here
            mod.main(["--out", str(tmp_path)])


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
    mod = ncu
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
    """The driver ncu runs: every planned rung prepared at its own problem, run once unprofiled,
    then a marker launch and one launch of the rung; the manifest lists them in that order."""
    import json as _json

    from perfkit.kernels import saxpy

    mod = ncu
    p = saxpy.SIM_SWEEP[0]
    items = [plan.item("saxpy", saxpy, p, v, True) for v in saxpy.LADDER]
    manifest = tmp_path / "saxpy.manifest.jsonl"
    assert mod.ncu_driver(items, manifest) == 0
    rows = [_json.loads(l) for l in manifest.read_text().splitlines()]
    assert [r["rung"] for r in rows] == ["00 oracle", "01 naive", "02 grid_stride", "03 unrolled"]
    assert {r["op"] for r in rows} == {"saxpy"} and {r["problem"] for r in rows} == {p.label}
    driver = mod.NCU_DRIVER.format(out=str(tmp_path), root=str(ncu.package_parent()))
    compile(driver, "ncu_driver.py", "exec")  # the script perfkit.record writes is valid Python


def test_ncu_table_columns_match_the_first_h100_table():
    table = ROOT / "data" / "ncu" / "h100-sxm-2026-11-23.csv"
    assert table.read_text().splitlines()[0].split(",") == ncu.NCU_TABLE
    meta = json.loads(table.with_suffix(".json").read_text())
    assert meta["commit"] == "7c7b2e0" and "H100" in meta["gpu"] and "not locked" in meta["clocks"]
    assert ncu.NCU_CLOCK_CONTROL == "none"  # new tables are taken with the clocks as the first


def _fake_run(tmp_path, simulated=False):
    """A record_gpu --out with two real H200 records, an ncu table and a summary."""
    import shutil

    run = tmp_path / "out"
    recs = sorted((ROOT / "data" / "results" / "nvidia-h200" / "softmax").glob("*.json"))[:2]
    (run / "results" / "nvidia-h200" / "softmax").mkdir(parents=True)
    for r in recs:
        d = json.loads(r.read_text())
        if simulated:
            d["simulated"] = True
        (run / "results" / "nvidia-h200" / "softmax" / r.name).write_text(json.dumps(d))
    shutil.copy(ROOT / "data" / "ncu" / "h200-2026-11-26.csv", run / "ncu_metrics_all_rungs.csv")
    (run / "summary.md").write_text("# record_gpu\n")
    (run / "plan.json").write_text("{}")
    return run, recs


def test_a_packed_run_imports_into_data_with_provenance_and_again_changes_nothing(tmp_path):
    run, recs = _fake_run(tmp_path)
    supervise.pack(run, tmp_path / "rec.tgz")
    imp = importer
    data, docs = tmp_path / "data", tmp_path / "docs"
    args = [str(tmp_path / "rec.tgz"), "--data", str(data), "--docs", str(docs)]
    assert imp.main(args) == 0
    for r in recs:
        assert (data / "results" / "nvidia-h200" / "softmax" / r.name).read_bytes() == \
            (run / "results" / "nvidia-h200" / "softmax" / r.name).read_bytes()
    meta = json.loads((data / "ncu" / "h200-2026-11-26.json").read_text())
    assert meta["gpu"] == "NVIDIA H200" and meta["date"] == "2026-11-26" and meta["table"] == "h200-2026-11-26.csv"
    assert meta["commit"] and meta["packages"]["numba-cuda"]
    assert (docs / "2026-11-26-h200-summary.md").exists() and not (data / "timer").exists()
    assert imp.main(args) == 0  # the same run again: records already there are left alone
    assert sorted(p.name for p in docs.iterdir()) == ["2026-11-26-h200-summary.md"]
    # another run the same day keeps the first run's summary and writes its own beside it
    (run / "summary.md").write_text("# record_gpu, a second run\n")
    supervise.pack(run, tmp_path / "rec2.tgz")
    assert imp.main([str(tmp_path / "rec2.tgz"), "--data", str(data), "--docs", str(docs)]) == 0
    assert (docs / "2026-11-26-h200-summary.md").read_text() == "# record_gpu\n"
    assert (docs / "2026-11-26-h200-2-summary.md").read_text() == "# record_gpu, a second run\n"
    # a record of the same name with other content stops the import before anything is written
    victim = data / "results" / "nvidia-h200" / "softmax" / recs[0].name
    victim.write_text("{}")
    (data / "ncu" / "h200-2026-11-26.csv").unlink()
    assert imp.main(args) == 2 and not (data / "ncu" / "h200-2026-11-26.csv").exists()


def test_a_rehearsal_or_simulated_record_is_never_imported(tmp_path, capsys):
    run, _ = _fake_run(tmp_path, simulated=True)
    imp = importer
    assert imp.main([str(run), "--data", str(tmp_path / "data"), "--docs", str(tmp_path / "docs")]) == 2
    assert "simulated" in capsys.readouterr().err and not (tmp_path / "data").exists()
    run2, _ = _fake_run(tmp_path / "b")
    (run2 / "REHEARSAL.txt").write_text("sim")
    assert imp.main([str(run2), "--data", str(tmp_path / "data")]) == 2
    assert imp.main([str(tmp_path / "nowhere")]) == 2


def _items(plan_json, unit):
    return [i["rung"] for u in plan_json["units"] if u["name"] == unit for i in u["items"]]


def test_rungs_filter_keeps_the_named_rungs_by_name_or_number_with_the_oracle(tmp_path, capsys):
    """``--rungs`` (issue 44): only the named rungs and peers, by name or number, plus the oracle;
    a unit with none of them goes (never the oracle alone); a name in no unit is an error."""
    from perfkit.cli import main as perfkit_main
    from perfkit.kernels import registry

    softmax = registry.ladder("softmax")
    tuned = next(v for v in softmax if v.name == "tuned")
    assert perfkit_main(["record", "--out", str(tmp_path), "--list", "--parts", "ops",
                         "--rungs", f"{tuned.rung},triton"]) == 0
    by_number = json.loads((tmp_path / "plan.json").read_text())
    assert _items(by_number, "ops-softmax") == ["00 oracle", tuned.label, "peer triton"]
    assert perfkit_main(["record", "--out", str(tmp_path), "--list", "--parts", "ops", "--rungs", "tuned"]) == 0
    by_name = json.loads((tmp_path / "plan.json").read_text())
    assert _items(by_name, "ops-softmax") == ["00 oracle", tuned.label]
    for u in by_name["units"]:  # every kept unit has a tuned rung; none is left with the oracle alone
        assert any(i["variant"] == "tuned" for i in u["items"]), u["name"]
    assert "ops-gemm-float32" not in {u["name"] for u in by_name["units"]}  # gemm has no "tuned"
    with pytest.raises(SystemExit):
        command.main(["--out", str(tmp_path), "--list", "--rungs", "no_such_rung"])
    assert "no_such_rung" in capsys.readouterr().err


def test_best_keeps_the_fastest_recorded_rung_the_last_rung_the_oracle_and_peers(tmp_path):
    """``--best``: per problem, the rung whose newest record on this GPU is fastest, plus the
    ladder's last rung (no record yet), the oracle and the peers."""
    from perfkit.kernels import registry

    mod = registry.module("softmax")
    p = mod.EXAMPLE_PROBLEM
    ladder = list(mod.LADDER)
    fast, slow = ladder[2], ladder[3]
    folder = tmp_path / "fake-gpu" / "softmax"
    folder.mkdir(parents=True)
    # the slow rung's newest record is slower than the fast one's; its older record was faster
    for k, (v, t, utc) in enumerate([(fast, 2e-3, "2026-01-02"), (slow, 1e-3, "2026-01-01"), (slow, 3e-3, "2026-01-03")]):
        doc = {"op": "softmax", "problem": p.label, "rung": v.rung, "variant": v.name, "timing": {"median_s": t},
               "provenance": {"gpu": "Fake GPU", "gpu_slug": "fake-gpu", "utc": utc}}
        (folder / f"{k}.json").write_text(json.dumps(doc))
    best = plan.best_rungs("Fake GPU", results_root=tmp_path)
    assert best[("softmax", p.label)] == {fast.name}
    units = plan.select(plan.plan_quick(420, False), parts=["ops"], best=best)
    kept = {i["variant"] for u in units if u.name == "ops-softmax" for i in u.items}
    peers = {v.name for v in plan.variants_for(mod, p)[len(ladder):]}
    assert kept == {"oracle", fast.name, ladder[-1].name} | peers
    other = {i["variant"] for u in units if u.name == "ops-layernorm" for i in u.items}
    assert other == {"oracle", registry.ladder("layernorm")[-1].name} | {
        v.name for v in plan.variants_for(registry.module("layernorm"), registry.module("layernorm").EXAMPLE_PROBLEM)
        if v.label.startswith("peer")}


def test_an_ops_units_seconds_are_told_by_stage_with_the_peers_apart():
    """bench.sweep's rows carry each rung's seconds by stage, handed over one at a time as they
    come; a unit sums its rungs' and its peers' from its progress."""
    from perfkit import bench
    from perfkit.kernels import saxpy
    from perfkit.record import progress, units

    seen = []
    table = bench.sweep([saxpy.SIM_SWEEP[0]], saxpy.LADDER[:2], record=False, progress=False,
                        timer=units.REHEARSAL_TIMER, on_row=lambda r: seen.append(dict(r)))
    assert (table[["inputs_s", "check_s", "time_s"]] >= 0).all().all()
    assert [r["variant"] for r in seen] == list(table["variant"]) and all(r["worker"] == 0 for r in seen)
    rows = [{"inputs_s": 1.0, "check_s": 0.5, "time_s": 3.0, "record_s": 0.0},
            {"inputs_s": 2.0, "check_s": 0.25, "time_s": float("nan"), "record_s": 0.0},  # failed its check
            {"inputs_s": 4.0, "check_s": 8.0, "time_s": 16.0, "record_s": 1.0}]
    done = [{"stages": progress.row_stages(r), "peer": k == 2} for k, r in enumerate(rows)]
    assert progress.stages(done) == {"inputs": 3.0, "compile+check": 0.75, "timing": 3.0, "recheck+record": 0.0,
                                     "peers": 29.0}


def test_retry_hung_and_force_bring_back_the_items_that_hung_before():
    """What ``--resume-from`` skips: the measured items, and the hung ones unless asked again."""
    from perfkit.record import resume

    items = [{"op": "gemm", "label": "m=1", "variant": v, "rung": r} for v, r in
             (("oracle", "00 oracle"), ("cluster", "24 cluster"), ("tma", "22 tma"))]
    unit = plan.Unit("ops-gemm-float16", "ops", 10.0, items=items)
    done = {"ops": {("gemm", "m=1", "oracle")}, "hung": {"ops": {("gemm", "m=1", "cluster")}}}
    assert [i["variant"] for i in resume.remaining(unit, done)] == ["tma"]
    assert [i["variant"] for i in resume.remaining(unit, done, retry_hung=True)] == ["cluster", "tma"]
    assert supervise.stall_limit(None, 60) == 20 and supervise.stall_limit(None, 18) == supervise.STALL_MIN_S
    assert supervise.stall_limit(0, 60) is None and supervise.stall_limit(7, 60) == 7


def test_a_kernel_that_hung_when_timed_is_not_profiled():
    """An ops item that hung (in this call or one resumed from) is left out of the ncu units: on the
    H100 on 2026-11-28 the cluster rung hung in its ops unit, then held an ncu unit for 128 s."""
    from perfkit.record import resume

    hung = [{"op": "gemm", "label": "m=1", "variant": "cluster", "rung": "24 cluster", "seconds": 12.0}]
    ncu_items = [{"op": "gemm", "label": "m=1", "variant": v, "rung": r} for v, r in
                 (("cluster", "24 cluster"), ("tma", "21 tma"))]
    done = {"ops": set(), "ncu": set(), "hung": {}}
    resume.note_hung(done, "ops", hung)
    unit = plan.Unit("ncu-gemm-new-1", "ncu", None, items=ncu_items)
    assert [i["variant"] for i in resume.remaining(unit, done)] == ["tma"]
    assert [i["variant"] for i in resume.remaining(unit, done, retry_hung=True)] == ["cluster", "tma"]
    # whatever problem it hung at: ncu profiles the rung at its own example problem
    other = plan.Unit("ncu-gemm-new-2", "ncu", None, items=[{**i, "label": "m=9"} for i in ncu_items])
    assert [i["variant"] for i in resume.remaining(other, done)] == ["tma"]
    only = plan.Unit("ncu-gemm-new-3", "ncu", None, items=ncu_items[:1])
    args = type("A", (), {"tiny": True, "force": False, "retry_hung": False})()
    why, todo = supervise.skip_reason(args, only, {**done, "units": set(), "ceilings": set()})
    assert todo == [] and why.startswith("not profiled: 24 cluster hung when timed"), why
    done2 = {"ops": set(), "ncu": set(), "hung": {}}
    resume.note_hung(done2, "ncu", [{**hung[0], "rung": "21 tma", "variant": "tma"}])  # an ncu hang stays in ncu
    assert done2["hung"] == {"ncu": {("gemm", "m=1", "21 tma")}} and "hung_kernels" not in done2


def test_a_second_run_of_the_day_brings_its_own_ncu_table_beside_the_first(tmp_path):
    """A short --parts ncu call after the window records nothing: its table comes in (attributed by
    its plan and log) as <gpu>-<date>b.csv, the first day's table kept; importing it again changes
    nothing; validate and the plan read the later table first."""
    from perfkit import model

    data, docs = tmp_path / "data", tmp_path / "docs"
    header = "op,problem,rung,kernel,time_us,gpu,commit\n"
    for k, rung in enumerate(("18 tc_deep", "15 tc_epilogue")):
        run = tmp_path / f"run{k}"
        run.mkdir()
        (run / "plan.json").write_text(json.dumps({"plan": "quick", "gpu": "NVIDIA H100 80GB HBM3", "commit": "abc",
                                                   "units": []}))
        (run / "record_gpu.log").write_text("2026-11-28 06:38:31 record_gpu --plan quick: ...\n"
                                            '{"name": "NVIDIA H100 80GB HBM3", "driver_version": "13.0", '
                                            '"runtime_version": "13.0"}\n')
        (run / "ncu_metrics_all_rungs.csv").write_text(header + f"gemm,m=1,{rung},k,1.0,NVIDIA H100 80GB HBM3,abc\n")
        supervise.pack(run, tmp_path / f"ncu{k}.tgz")
        assert importer.main([str(tmp_path / f"ncu{k}.tgz"), "--data", str(data), "--docs", str(docs)]) == 0
    assert "18 tc_deep" in (data / "ncu" / "h100-sxm-2026-11-28.csv").read_text()
    assert "15 tc_epilogue" in (data / "ncu" / "h100-sxm-2026-11-28b.csv").read_text()
    meta = json.loads((data / "ncu" / "h100-sxm-2026-11-28b.json").read_text())
    assert meta["table"] == "h100-sxm-2026-11-28b.csv" and meta["cuda_driver"] == "13.0" and meta["commit"] == "abc"
    assert importer.main([str(tmp_path / "ncu1.tgz"), "--data", str(data), "--docs", str(docs)]) == 0
    assert sorted(p.name for p in (data / "ncu").glob("*.csv")) == ["h100-sxm-2026-11-28.csv", "h100-sxm-2026-11-28b.csv"]
    import unittest.mock as um
    with um.patch.object(model.inputs, "NCU_PATH", data / "ncu" / "x.csv"):
        assert [p.name for p, _ in model.inputs.ncu_tables("h100-sxm")] == ["h100-sxm-2026-11-28b.csv",
                                                                            "h100-sxm-2026-11-28.csv"]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "plan.json").write_text("{}")
    assert importer.main([str(empty), "--data", str(data)]) == 2


@pytest.mark.skipif(not backend.is_simulator(), reason="a rehearsal runs in the simulator (record_gpu refuses --rehearse on a GPU)")
def test_a_hung_item_costs_the_stall_limit_the_unit_goes_on_and_a_resume_skips_it(tmp_path):
    """A rehearsal whose second item (softmax's newest rung) sleeps, as GEMM's cluster rung hung on
    the H200: the log says each item as it starts and ends; past the stall limit the item is
    marked hung (summary, status.json, summary.csv, with its seconds), never recorded, and a fresh
    child measures the item after it.  A call resuming from that one skips the hung item; its
    last item hangs, with no stall limit: the unit is killed at its cap and its note names the
    item it was on (``--retry-hung``: test_retry_hung_and_force_bring_back_the_items_that_hung_before)."""
    import os
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    base = [sys.executable, str(ROOT / "tools" / "record_gpu.py"), "--rehearse", "--parts", "ops", "--ops", "softmax",
            "--max-rungs", "4"]

    def call(out, *extra):
        r = subprocess.run(base + ["--out", str(out), *extra], env=env, capture_output=True, text=True, timeout=240)
        status = json.loads((out / "status.json").read_text())
        return r, status, status["rows"][0]

    first = tmp_path / "first"
    r, status, row = call(first, "--budget-s", "1200", "--hang", "split_row", "--stall-s", "4")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    items = [i["variant"] for i in json.loads((first / "plan.json").read_text())["units"][0]["items"]]
    assert items == ["oracle", "split_row", "persist", "packed"]  # the hung one second: the unit must go on after it
    assert row["status"] == "done" and re.search(r"softmax 10 split_row hung \(\d+ s, past the stall limit of 4 s", row["note"]), row
    assert "hung 4." in row["stages"] and "compile+check" in row["stages"]  # from the progress written
    assert [(h["unit"], h["variant"]) for h in status["hung"]] == [("ops-softmax", "split_row")]
    assert 4 <= status["hung"][0]["seconds"] < 10
    assert json.loads(row["hung"])[0]["rung"] == "10 split_row" and "split_row" in (first / "summary.csv").read_text()
    log = (first / "logs" / "ops-softmax.log").read_text()
    for line in ("start softmax 00 oracle", "end   softmax 00 oracle: ok", "start softmax 10 split_row",
                 "softmax 10 split_row hung", "start softmax 09 persist", "end   softmax 09 persist"):
        assert line in log, log
    assert log.index("softmax 10 split_row hung") < log.index("start softmax 09 persist")
    recorded = {json.loads(p.read_text())["variant"] for p in (first / "results").glob("*/*/*.json")}
    assert "oracle" in recorded and "split_row" not in recorded
    sweep = (first / "sweep_softmax.csv").read_text()  # a row each, appended as it came, over both children
    assert ",oracle," in sweep and ",persist," in sweep and ",split_row," not in sweep
    # a call resuming from that one: the hung item is not tried again (nor the oracle, measured); the
    # item left (packed: float16 only, unsupported here, so never measured) hangs with no stall limit, so the unit's cap (at a 150 s budget, 10 s) kills
    # it, and the note names the item in flight and how long it had run
    second = tmp_path / "second"
    r, status, row = call(second, "--budget-s", "150", "--resume-from", str(first), "--hang", "packed",
                          "--stall-s", "0")
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert "1 to measure, 2 measured before, 1 hung before" in row["note"], row
    assert "split_row" not in (second / "logs" / "ops-softmax.log").read_text()
    assert row["status"] == "timed out" and "at its cap (10 s) while on softmax 08 packed (" in row["note"], row
    assert "in flight" in row["stages"] and not status["hung"]


def test_an_ops_unit_tells_each_item_as_it_starts_and_ends_and_no_stall_limit_after_a_device_fault(tmp_path, monkeypatch,
                                                                                                  capsys):
    """The child's side, in this process, bench.sweep replaced by one that hands over its rows: the
    item in flight is each item in turn (watched), its end line and sweep row written as it ends;
    after a device fault the rest runs in bench's fresh process, whose rows come at its end, so
    what is in flight there is not watched (no item to blame)."""
    from perfkit import bench
    from perfkit.kernels import saxpy
    from perfkit.record import progress, units

    p = saxpy.SIM_SWEEP[0]
    items = [plan.item("saxpy", saxpy, p, v, True) for v in saxpy.LADDER]
    seen = []

    def fake_sweep(problems, variants, on_row=None, **kw):
        for k, v in enumerate(variants):
            seen.append(progress.read(tmp_path, "ops-saxpy")["in_flight"])
            on_row({"op": "saxpy", "problem": p.label, "variant": v.name, "label": v.label, "rung": v.rung,
                    "status": bench.FAULT_STATUS if k == 1 else "ok", "simulated": True, "flops": p.flops,
                    "bytes": p.bytes, "error": None, "median_s": 1e-3, "inputs_s": 0.5, "check_s": 0.25 * k,
                    "time_s": 1.0, "record_s": 0.0})

    monkeypatch.setattr(bench, "sweep", fake_sweep)
    spec = {"name": "ops-saxpy", "items": items, "commit": "abc", "gpu": "sim", "attempt": 1, "hang": None}
    assert units.unit_ops(tmp_path, spec, tiny=True) == ncu.EXIT_FAULT
    assert [(f["label"], f["watch"]) for f in seen[:2]] == [(progress.label(items[0]), True),
                                                            (progress.label(items[1]), True)]
    assert all(f["ident"] is None and not f["watch"] for f in seen[2:]) and len(seen) == len(items)
    doc = progress.read(tmp_path, "ops-saxpy")
    assert doc["in_flight"] is None and [d["status"] for d in doc["done"]] == ["ok", bench.FAULT_STATUS, "ok", "ok"]
    assert progress.stages(doc["done"])["compile+check"] == pytest.approx(0.25 * (0 + 1 + 2 + 3))
    out = capsys.readouterr().out
    assert out.index(f"start {progress.label(items[0])}") < out.index(f"end   {progress.label(items[0])}: ok") \
        < out.index(f"start {progress.label(items[1])}")
    assert len((tmp_path / "sweeps" / "sweep_saxpy.csv").read_text().strip().splitlines()) == 1 + len(items)


def test_new_keeps_the_rungs_and_peers_no_record_of_the_gpu_has_with_the_oracle():
    """``--new``: an ops unit keeps, beside its oracle, only the items no record of this GPU has
    at the problem (any commit) and that serve it (a rung refusing the problem is never recorded
    there); a unit left with its oracle alone goes; the other parts keep
    their own choice.  Checked against the H200's committed records, whatever they are by then."""
    gpu = "NVIDIA H200"
    rec = plan.recorded_rungs(gpu)
    assert rec and ("gemm", "m=4096 n=4096 k=4096 dtype=float32", "autotuned") in rec
    units = plan.make("quick", 420, False, None)
    kept = plan.select(units, None, None, None, None, None, None, rec)
    every = {(u.name, i["op"], i["planned"], i["variant"]) for u in units if u.part == "ops" for i in u.items}
    left = {(u.name, i["op"], i["planned"], i["variant"]) for u in kept if u.part == "ops" for i in u.items}
    refused = set()
    for u in units:
        for i in u.items:
            _, p, v = plan.rebuild(i)
            try:
                v.supports(p)
            except UnsupportedProblem:
                refused.add((u.name, i["op"], i["planned"], i["variant"]))
    # a float16-only rung planned in a float32 unit is refused there, so never new
    assert any(op in ("layernorm", "rmsnorm", "softmax") and "float32" in prob for _, op, prob, _ in refused)
    for name, op, prob, var in every:
        oracle = var == "oracle"
        has = (op, prob, var) in rec
        unit_kept = any(u.name == name for u in kept)
        new = not has and (name, op, prob, var) not in refused
        assert ((name, op, prob, var) in left) == (unit_kept and (oracle or new)), (name, op, var)
    assert all(any(i["variant"] != "oracle" for i in u.items) for u in kept if u.part == "ops")
    assert [u.name for u in kept if u.part != "ops"] == [u.name for u in units if u.part != "ops"]
    assert plan.recorded_rungs(None) == set()


@pytest.mark.skipif(not backend.is_simulator(), reason="a no-GPU machine's plan (the ncu units depend on the GPU's table)")
def test_tune_units_come_only_when_asked_with_the_oracle_and_the_rung_as_items(tmp_path):
    quick = _plan(tmp_path)
    assert not [u for u in quick["units"] if u["part"] == "tune"]
    tune = _plan(tmp_path, "--parts", "tune")
    assert [u["name"] for u in tune["units"]] == ["tune-gemm-float16", "tune-gemm-float32"]
    for u, rung, dtype in zip(tune["units"], ("tc_deep", "simt_wide"), ("float16", "float32")):
        assert u["cap_s"] == plan.QUICK_CAPS["tune"] and u["extra"]["rung"] == rung
        assert [i["variant"] for i in u["items"]] == ["oracle", rung]
        assert u["extra"]["problem"]["dtype"] == dtype and u["extra"]["problem"]["m"] == 4096
    assert [u["name"] for u in _plan(tmp_path, "--parts", "tune", "--rungs", "tc_deep")["units"]] == ["tune-gemm-float16"]
    full = plan.plan_full(tiny=True, ncu=False)
    assert [u.name for u in full if u.part == "tune"] == ["tune-gemm-float16", "tune-gemm-float32"]
    # a rehearsal's unit times the tiny twin; the model ranks at the planned problem
    reh = plan.tune_units(tiny=True, cap=10.0)[0]
    assert reh.items[0]["problem"]["m"] < 4096 and reh.extra["problem"]["m"] == 4096


def test_a_tune_unit_times_the_rung_first_then_the_models_order_a_row_at_a_time(tmp_path, monkeypatch, capsys):
    """The child's side in this process: compiles replaced by fixed builds (one spills), the sweep
    by one that hands over rows. tune.csv gets the rejected configuration with its reason, then
    the oracle-relative time of each configuration in the order timed: the rung's own first,
    the rest by the model's estimate."""
    import csv

    from perfkit import autotune, bench
    from perfkit.kernels import gemm
    from perfkit.record import units

    space = autotune.tc_deep_space()[:4]
    est = {space[0]: 300e-6, space[1]: 250e-6, space[2]: None, space[3]: 280e-6}

    def fake_compiled(v, problem, cc, gpu="h100-sxm"):
        if est[v] is None:
            return {"registers": 255, "spills": 64, "occupancy": 0.125, "model_s": None}
        return {"registers": 200, "spills": 0, "occupancy": 0.125, "model_s": est[v]}

    order = []

    def fake_sweep(problems, variants, on_row=None, **kw):
        for k, v in enumerate(variants):
            order.append(v)
            on_row({"status": "ok", "simulated": False, "median_s": 100e-6 * (k + 1), "iqr_s": 1e-6,
                    "n_samples": 20, "max_abs_err": 0.0, "error": None})

    monkeypatch.setattr(autotune, "compiled", fake_compiled)
    monkeypatch.setattr(autotune, "tc_deep_space", lambda problem=None: space)
    monkeypatch.setattr(units, "TUNE_REHEARSAL_KEEP", 4)
    monkeypatch.setattr(bench, "sweep", fake_sweep)
    u = plan.tune_units(tiny=True, cap=10.0)[0]
    spec = {"name": u.name, "items": u.items, "extra": u.extra, "commit": "abc", "gpu": "sim", "attempt": 1}
    assert units.unit_tune(tmp_path, spec, tiny=True) == 0
    assert order[0].oracle and order[1:] == [space[0], space[1], space[3]]
    rows = list(csv.DictReader(open(tmp_path / "tune.csv")))
    assert list(rows[0]) == units.TUNE_COLUMNS
    assert rows[0]["rejected"].startswith("spills 64") and rows[0]["median_us"] == ""
    timed = rows[1:]
    assert [json.loads(r["config"]) for r in timed] == [space[0].config, space[1].config, space[3].config]
    assert [r["default"] for r in timed] == ["True", "False", "False"]
    assert [float(r["model_rank"]) for r in timed] == [3, 1, 2]
    p = gemm.Problem(**u.items[0]["problem"])  # the timed problem (a rehearsal's twin); the model's is 4096^3
    for k, r in enumerate(timed, start=2):
        assert float(r["median_us"]) == pytest.approx(100.0 * k) and float(r["oracle_us"]) == pytest.approx(100.0)
        assert float(r["x_oracle"]) == pytest.approx(1 / k) and float(r["tflops"]) == pytest.approx(p.flops / (1e-4 * k) / 1e12)
    assert "x0.50 of the oracle" in capsys.readouterr().out


def test_a_runs_tune_table_is_imported_beside_the_ncu_table(tmp_path):
    run, _ = _fake_run(tmp_path)
    (run / "tune.csv").write_text("unit,rung,config,median_us\ntune-gemm-float16,18 tc_deep,{},300\n")
    data, docs = tmp_path / "data", tmp_path / "docs"
    assert importer.main([str(run), "--data", str(data), "--docs", str(docs)]) == 0
    assert (data / "tuning" / "h200-2026-11-26.csv").read_text() == (run / "tune.csv").read_text()
    meta = json.loads((data / "tuning" / "h200-2026-11-26.json").read_text())
    assert meta["gpu"] == "NVIDIA H200" and "model_us" in meta["what"]


def test_a_tune_unit_whose_builds_all_fail_still_times_every_configuration(tmp_path, monkeypatch):
    """No compiler for the model (a device image without cuobjdump): nothing to rank by, but the
    GPU still times each configuration, the rung's own first, with no estimate beside it."""
    import csv

    from perfkit import autotune, bench
    from perfkit.record import units

    space = autotune.tc_deep_space()[:3]
    timed = []
    monkeypatch.setattr(autotune, "compiled", lambda v, problem, cc, gpu="h100-sxm": {"error": "AnatomyError: cuobjdump not found"})
    monkeypatch.setattr(autotune, "tc_deep_space", lambda problem=None: space)
    monkeypatch.setattr(bench, "sweep", lambda problems, variants, on_row=None, **kw: [
        (timed.append(v), on_row({"status": "ok", "simulated": True, "median_s": 1e-3})) for v in variants])
    u = plan.tune_units(tiny=True, cap=10.0)[0]
    spec = {"name": u.name, "items": u.items, "extra": u.extra, "commit": "abc", "gpu": "sim", "attempt": 1}
    assert units.unit_tune(tmp_path, spec, tiny=True) == 0
    assert timed[1:] == space
    rows = list(csv.DictReader(open(tmp_path / "tune.csv")))
    assert [json.loads(r["config"]) for r in rows] == [v.config for v in space]
    assert all(r["rejected"] == "" and r["model_us"] == "" and r["status"] == "ok" for r in rows)


def test_a_tune_only_run_imports_its_table_dated_by_its_plan_and_log(tmp_path):
    """--parts tune records nothing: no results/ folder, yet its table comes in, attributed to the
    plan's GPU and commit and dated by its log; a simulated row is refused."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"plan": "quick", "gpu": "NVIDIA H200", "commit": "abc123", "units": []}))
    (run / "record_gpu.log").write_text("2026-11-29 03:00:00 record_gpu --plan quick: ...\n")
    (run / "tune.csv").write_text("unit,rung,config,median_us,simulated\ntune-gemm-float16,18 tc_deep,{},300,False\n")
    (run / "summary.md").write_text("# tune\n")
    supervise.pack(run, tmp_path / "tune.tgz")
    data, docs = tmp_path / "data", tmp_path / "docs"
    assert importer.main([str(tmp_path / "tune.tgz"), "--data", str(data), "--docs", str(docs)]) == 0
    assert (data / "tuning" / "h200-2026-11-29.csv").read_text() == (run / "tune.csv").read_text()
    meta = json.loads((data / "tuning" / "h200-2026-11-29.json").read_text())
    assert meta["commit"] == "abc123" and meta["gpu"] == "NVIDIA H200" and meta["date"] == "2026-11-29"
    assert (docs / "2026-11-29-h200-summary.md").exists() and not (data / "results").exists()
    (run / "tune.csv").write_text("unit,rung,config,median_us,simulated\ntune-gemm-float16,18 tc_deep,{},300,True\n")
    assert importer.main([str(run), "--data", str(tmp_path / "d2"), "--docs", str(docs)]) == 2


def test_a_tune_units_model_compiles_stop_at_their_share_of_the_limit(tmp_path, monkeypatch):
    """A build still running at 40% of the unit's limit is left out with the reason, and the
    configurations built in time are checked and timed."""
    import csv
    import time as _time

    from perfkit import autotune, bench
    from perfkit.record import units

    space = autotune.tc_deep_space()[:3]
    slow = space[2]

    def fake_compiled(v, problem, cc, gpu="h100-sxm"):
        if v == slow:
            _time.sleep(1.5)
        return {"registers": 200, "spills": 0, "occupancy": 0.125, "model_s": 1e-4}

    timed = []
    monkeypatch.setattr(autotune, "compiled", fake_compiled)
    monkeypatch.setattr(autotune, "tc_deep_space", lambda problem=None: space)
    monkeypatch.setattr(bench, "sweep", lambda problems, variants, on_row=None, **kw: [
        (timed.append(v), on_row({"status": "ok", "simulated": True, "median_s": 1e-3})) for v in variants])
    u = plan.tune_units(tiny=True, cap=10.0)[0]
    spec = {"name": u.name, "items": u.items, "extra": u.extra, "commit": "abc", "gpu": "sim", "attempt": 1,
            "limit_s": 2.0}  # 0.8 s for the model's compiles
    assert units.unit_tune(tmp_path, spec, tiny=True) == 0
    assert timed[1:] == space[:2]
    rows = {json.dumps(json.loads(r["config"]), sort_keys=True): r for r in csv.DictReader(open(tmp_path / "tune.csv"))}
    assert "not built within" in rows[json.dumps(slow.config, sort_keys=True)]["rejected"]


def test_a_fleet_runs_tables_are_merged_then_imported_a_table_per_gpu(tmp_path):
    """A fleet's units send their tables back under OUT/fleet/<kind>/<unit>/: merged at OUT's top,
    then imported split by their gpu column, each GPU's rows under its own name, dated and
    attributed by that GPU's records."""
    import csv
    import shutil

    from perfkit.record import fleet

    run = tmp_path / "out"
    for slug in ("nvidia-h200", "nvidia-h100-80gb-hbm3"):
        rec = sorted((ROOT / "data" / "results" / slug / "softmax").glob("*.json"))[0]
        (run / "results" / slug / "softmax").mkdir(parents=True)
        shutil.copy(rec, run / "results" / slug / "softmax" / rec.name)
    cols = ["unit", "rung", "config", "median_us", "simulated", "gpu"]
    for kind in ("h200", "h100-sxm"):
        d = run / "fleet" / kind / "tune-gemm-float16"
        d.mkdir(parents=True)
        with open(d / "tune.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerow({"unit": "tune-gemm-float16", "rung": "18 tc_deep", "config": "{}", "median_us": 300,
                        "simulated": False, "gpu": kind})
    (run / "plan.json").write_text("{}")
    fleet.merge_tables(run)
    assert len(list(csv.DictReader(open(run / "tune.csv")))) == 2
    data, docs = tmp_path / "data", tmp_path / "docs"
    assert importer.main([str(run), "--data", str(data), "--docs", str(docs)]) == 0
    tables = sorted(p.name for p in (data / "tuning").glob("*.csv"))
    assert len(tables) == 2 and tables[0].startswith("h100-sxm-") and tables[1].startswith("h200-"), tables
    with open(run / "tune.csv", "a", newline="") as f:  # a row of a GPU devices.yaml does not know
        csv.DictWriter(f, fieldnames=plan.TUNE_COLUMNS).writerow({"rung": "18 tc_deep", "gpu": "nosuchgpu"})
    assert importer.main([str(run), "--data", str(tmp_path / "d2"), "--docs", str(docs)]) == 2  # refused, not a traceback
    for t in tables:
        rows = list(csv.DictReader(open(data / "tuning" / t)))
        assert len(rows) == 1 and t.startswith(rows[0]["gpu"])
        meta = json.loads((data / "tuning" / t).with_suffix(".json").read_text())
        assert meta["gpu"].startswith("NVIDIA H") and meta["commit"] and t.endswith(f"-{meta['date']}.csv")


def test_the_tune_deadline_cancels_the_queued_builds_and_leaves_the_running_one_late():
    """Past its time, a build still queued is cancelled and one still running is left to finish
    unwatched (kept in ``late``); both come back as errors, never as an exception."""
    import concurrent.futures as cf
    import time as _time

    from perfkit.record import units

    pool = cf.ThreadPoolExecutor(1)
    d = units._Deadline(pool, 0.2)
    out = d.map(lambda x: (_time.sleep(0.6), {"x": x})[1], [1, 2, 3])
    assert [o.get("error") for o in out] == ["not built within the unit's compile time"] * 3
    assert len(d.late) == 1
    pool.shutdown(wait=True)
    d2 = units._Deadline(cf.ThreadPoolExecutor(2), 5.0)
    assert d2.map(lambda x: 1 // x, [1, 0]) == [1, {"error": "ZeroDivisionError: integer division or modulo by zero"}]


def test_a_device_fault_ends_a_tune_unit_with_the_rest_said_not_run(tmp_path, monkeypatch):
    import csv

    from perfkit import autotune, bench
    from perfkit.record import units

    space = autotune.tc_deep_space()[:4]
    monkeypatch.setattr(autotune, "compiled", lambda v, problem, cc, gpu="h100-sxm": {
        "registers": 200, "spills": 0, "occupancy": 0.125, "model_s": 1e-4 * (1 + space.index(v))})
    monkeypatch.setattr(autotune, "tc_deep_space", lambda problem=None: space)
    monkeypatch.setattr(units, "TUNE_REHEARSAL_KEEP", 4)

    def fake_sweep(problems, variants, on_row=None, **kw):
        for k, v in enumerate(variants):
            on_row({"status": bench.FAULT_STATUS if k == 2 else "ok", "simulated": False, "median_s": 1e-4,
                    "iqr_s": 0.0, "error": "illegal address" if k == 2 else None})
        raise AssertionError("the sweep should have been stopped at the fault")

    monkeypatch.setattr(bench, "sweep", fake_sweep)
    u = plan.tune_units(tiny=True, cap=10.0)[0]
    spec = {"name": u.name, "items": u.items, "extra": u.extra, "commit": "abc", "gpu": "sim", "attempt": 1}
    assert units.unit_tune(tmp_path, spec, tiny=True) == ncu.EXIT_FAULT
    rows = list(csv.DictReader(open(tmp_path / "tune.csv")))
    assert [r["status"] for r in rows] == ["ok", bench.FAULT_STATUS, "not run", "not run"]
    assert rows[0]["iqr_us"] == "0.0" and "earlier configuration" in rows[2]["error"]


def test_picking_ops_or_problems_keeps_a_tune_units_rung(tmp_path):
    units_ = _plan(tmp_path, "--parts", "tune", "--ops", "gemm", "--problems", "float16")["units"]
    assert [u["name"] for u in units_] == ["tune-gemm-float16"] and units_[0]["extra"]["rung"] == "tc_deep"


def test_every_probe_of_the_gpu_window_selects_a_test():
    """tools/gpu_window.sh runs each probe as ``pytest tests/test_gemm_hopper.py -k EXPR``: a
    probe renamed in the tests would select nothing and pass silently in a GPU window."""
    import re
    import subprocess
    import sys

    script = (ROOT / "tools" / "gpu_window.sh").read_text()
    exprs = re.findall(r'"([^"]+)"', re.search(r"probes=\(([^)]*)\)", script).group(1))
    assert "lost_arrival_traps" in exprs and len(exprs) >= 5
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "test_gemm_hopper.py")], capture_output=True, text=True, timeout=300)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert ids, out.stdout[-2000:] + out.stderr[-2000:]
    for e in exprs:  # -k "a and b": every word a substring of the test's id
        words = [w for w in e.split(" and ")]
        assert any(all(w in i for w in words) for i in ids), f"gpu_window.sh's probe {e!r} selects no test"


def test_ncu_units_give_counters_first_to_cards_that_have_none(monkeypatch):
    """Rungs in no Nsight Compute table of any GPU come before those only this GPU lacks, and a
    rung no GPU has timed (no card yet; maybe one that hangs, and an ncu unit has no stall
    limit) comes after both."""
    from perfkit.kernels import gemm
    from perfkit.kernels.norm import softmax

    by = {v.name: v for v in [*gemm.LADDER, *softmax.LADDER]}
    tiers = {"gemm": ["index32", "cluster"], "softmax": ["smem_row", "packed"]}
    monkeypatch.setattr(plan, "ncu_targets", lambda op, mod, p: {
        "new": [(by[n], "in no table of this GPU") for n in tiers[op]], "changed": [], "unknown": []})
    monkeypatch.setattr(plan, "profiled_anywhere", lambda: {("gemm", "index32")})
    monkeypatch.setattr(plan, "recorded_anywhere", lambda: {("gemm", "index32"), ("softmax", "smem_row"), ("softmax", "packed")})
    units = plan.ncu_units([("gemm", gemm), ("softmax", softmax)], tiny=True)
    assert [(u.name, [i["variant"] for i in u.items]) for u in units] == [
        ("ncu-softmax-unseen-1", ["smem_row", "packed"]),
        ("ncu-gemm-new-1", ["index32"]),
        ("ncu-gemm-untimed-1", ["cluster"])]


def test_profiled_anywhere_reads_every_gpus_tables():
    seen = plan.profiled_anywhere()
    assert ("gemm", "naive") in seen and ("conv", "tc_epilogue") in seen and ("gemm", "cluster") not in seen


_FAKE_NCU = r'''#!/usr/bin/env python3
"""A stand-in for ncu: logs each --metrics, refuses stall metrics when FAKE_NCU_REFUSE is set,
writes the manifest the driver would, and prints a raw CSV with the metrics it was asked for."""
import json, os, sys
a = sys.argv[1:]
log = os.environ["FAKE_NCU_LOG"]
if "--import" in a:
    metrics = open(log).read().splitlines()[-1].split(",")
    print('"ID","Kernel Name",' + ",".join(f'"{m}"' for m in metrics))
    print('"",""' + ',"nsecond"' + ',""' * (len(metrics) - 1))
    print('"0","perfkit_ncu_marker"' + ',"1"' * len(metrics))
    print('"1","saxpy_naive"' + ',"2,000"' + ',"0.5"' * (len(metrics) - 1))
    sys.exit(0)
metrics = a[a.index("--metrics") + 1]
open(log, "a").write(metrics + "\n")
if os.environ.get("FAKE_NCU_REFUSE") and "issue_stalled" in metrics:
    print("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_drain_per_issue_active.ratio")
    sys.exit(1)
spec = json.load(open(a[-1]))
with open(spec["manifest"], "w") as f:
    for it in spec["items"]:
        f.write(json.dumps({"op": it["op"], "problem": it["label"], "rung": it["rung"]}) + "\n")
open(a[a.index("-o") + 1] + ".ncu-rep", "w").write("report")
'''


@pytest.mark.parametrize("refuse", [False, True])
def test_ncu_unit_asks_for_the_stall_metrics_and_drops_them_once_ncu_refuses(tmp_path, monkeypatch, refuse):
    """The stall reasons are asked for beside the table's metrics and land in their columns after
    NCU_EXTRA; an ncu that refuses one is run again without them, and the next unit does not ask."""
    from perfkit.kernels import saxpy

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ncu").write_text(_FAKE_NCU)
    (bin_ / "ncu").chmod(0o755)
    log = tmp_path / "metrics.log"
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    if refuse:
        monkeypatch.setenv("FAKE_NCU_REFUSE", "1")
    items = [plan.item("saxpy", saxpy, saxpy.SIM_SWEEP[0], saxpy.LADDER[1], True)]
    for name in ("ncu-saxpy-new-1", "ncu-saxpy-new-2"):
        spec = {"name": name, "items": items, "commit": "abc1234", "gpu": "NVIDIA H200"}
        assert ncu.unit_ncu(tmp_path, spec, tiny=False) == 0
    asked = log.read_text().splitlines()
    with_stalls = ["issue_stalled" in m for m in asked]
    assert with_stalls == ([True, False, False] if refuse else [True, True])
    with open(tmp_path / "ncu" / "ncu-saxpy-new-2.metrics.csv") as f:
        header = f.readline().strip().split(",")
        row = next(csv.DictReader([",".join(header)] + f.read().splitlines()))
    assert header == ncu.NCU_WRITTEN and header[:len(ncu.NCU_TABLE)] == ncu.NCU_TABLE
    assert row["rung"] == "01 naive" and float(row["time_us"]) == pytest.approx(2.0)
    assert (row["stall_long_scoreboard"] == "nan") if refuse else float(row["stall_long_scoreboard"]) == 0.5
