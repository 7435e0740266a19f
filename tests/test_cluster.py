"""perfkit.cluster and perfkit record --cluster on a local simulator cluster (Dask distributed):
a sweep's records come home once each, a second call measures nothing, a kind with no worker is
reported at once, a worker killed mid-unit loses nothing and leaves no process behind, and the
Slurm and Kubernetes specs build without a cluster."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfkit import backend

pytest.importorskip("distributed", reason="perfkit[cluster] is not installed (make test installs it)")

from perfkit import cluster  # noqa: E402
from perfkit.record import command, fleet  # noqa: E402
from perfkit.record.plan import Unit  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sim_only = pytest.mark.skipif(not backend.is_simulator(), reason="local-sim runs the simulator's rehearsal path")


@pytest.fixture(scope="module")
def _pool():
    with cluster.Pool() as pool:
        yield pool


@pytest.fixture
def kept(_pool):
    """The module's local clusters, kept between its tests (cluster.Pool: a start and the imports
    in its workers cost seconds); the worker-kill test, last, drops the one whose worker it kills."""
    with _pool.active():
        yield _pool


def _alive(pid: int) -> bool:
    for _ in range(40):  # a killed orphan is reaped by init a moment later
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


def test_importing_perfkit_loads_no_dask():
    code = ("import sys, perfkit, perfkit.cli, perfkit.record, perfkit.cluster; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'dask_jobqueue')]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]


def test_specs_are_checked_and_name_the_forms():
    assert cluster.parse("local-sim:2") == ("local-sim", "2")
    assert cluster.parse("tcp://10.0.0.1:8786") == ("address", "tcp://10.0.0.1:8786")
    assert cluster.parse("scheduler-file:/x/s.json") == ("scheduler-file", "/x/s.json")
    for bad in ("local-sim:0", "local-sim", "local-cuda:3", "slurm:", "mesos:1", "k8s:"):
        with pytest.raises(cluster.ClusterError, match="local-sim:N"):
            cluster.parse(bad)
    with pytest.raises(cluster.ClusterError, match="kind="):
        cluster.slurm_cluster("partition=gpu")
    with pytest.raises(cluster.ClusterError, match="not one of"):
        cluster.slurm_cluster("kind=h200,gpu=1")


@pytest.mark.parametrize("argv", [["static", "refresh"], ["workload", "gpt2"]])
def test_a_bad_cluster_spec_is_one_line_from_every_command_that_takes_one(argv, capsys):
    from perfkit import cli

    assert cli.main([*argv, "--cluster", "mesos:1"]) == 2
    err = capsys.readouterr().err
    assert f"perfkit {argv[0]}: --cluster 'mesos:1': one of local-sim:N" in err and "Traceback" not in err


def test_the_slurm_job_script_asks_for_a_gpu_and_starts_a_worker_with_its_kind():
    """dask-jobqueue's script, built with no Slurm: one GPU a job, the worker labelled with its kind."""
    pytest.importorskip("dask_jobqueue")
    c = cluster.slurm_cluster("kind=h100-sxm,partition=gpu,account=perf,walltime=00:30:00,jobs=2")
    try:
        script = c.job_script()
    finally:
        c.close()
    assert "#SBATCH --gres=gpu:1" in script and "#SBATCH -p gpu" in script and "#SBATCH -A perf" in script
    assert "#SBATCH -t 00:30:00" in script
    assert f"{sys.executable} -m distributed.cli.dask_worker" in script
    assert "--resources GPU=1,kind-h100-sxm=1" in script and "--nthreads 1" in script
    assert "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False" in script


def test_the_kubernetes_spec_asks_for_a_gpu_and_labels_the_workers():
    pytest.importorskip("dask_kubernetes")
    spec = cluster.k8s_spec("sweep,kind=h200,workers=3")
    assert spec["metadata"]["name"] == "sweep"
    worker = spec["spec"]["worker"]
    assert worker["replicas"] == 3
    [container] = worker["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    args = container["args"]
    assert args[:2] == ["dask", "worker"] and "GPU=1,kind-h200=1" in args and args[args.index("GPU=1,kind-h200=1") - 1] == "--resources"
    assert {"name": "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "value": "False"} in container["env"]


def test_perfkit_worker_starts_one_worker_per_gpu_pinned_and_cpu_workers(capsys):
    cmds = cluster.worker_commands("tcp://h:8786", [(0, "h200"), (1, "h200")], 2)
    off = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}  # Dask's profiler slows a task ~3x
    assert [env for _, env in cmds] == [{**off, "PERFKIT_GPU_INDEX": "0"}, {**off, "PERFKIT_GPU_INDEX": "1"}, off, off]
    assert [c[c.index("--resources") + 1] for c, _ in cmds] == ["GPU=1,kind-h200=1"] * 2 + ["CPU=1"] * 2
    assert all(c[1:4] == ["-m", "distributed.cli.dask_worker", "tcp://h:8786"] for c, _ in cmds)
    from perfkit.cli import main

    assert main(["worker", "tcp://h:8786", "--gpus", "none", "--cpus", "1", "--dry-run"]) == 0
    assert "--resources CPU=1" in capsys.readouterr().out


@sim_only
def test_the_dashboard_link_is_printed_at_a_terminal_only():
    """The link works while the cluster lives: at a terminal it is printed as before; in an executed
    notebook's saved output or a file (no terminal) it would be dead, so it is left out."""
    import io

    class Client:
        dashboard_link = "http://127.0.0.1:8787/status"

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert fleet.dashboard_note(Client(), Terminal()) == "; dashboard http://127.0.0.1:8787/status"
    assert fleet.dashboard_note(Client(), io.StringIO()) == ""
    closed = io.StringIO()
    closed.close()
    assert fleet.dashboard_note(Client(), closed) == ""  # a closed stream: isatty raises, no link
    assert fleet.dashboard_note(Client()) == ""  # standard output, captured by pytest: no terminal


def test_a_local_sim_sweep_brings_every_record_home_once_reports_a_missing_kind_and_resumes(tmp_path, kept, capsys):
    """local-sim:2, two ops units at tiny shapes on kind ``sim`` and a kind no worker has: the
    missing kind is reported (not waited on), the records come back simulated, one per rung; a
    second call skips every unit and writes nothing new."""
    out = tmp_path / "out"
    argv = ["--rehearse", "--cluster", "local-sim:2", "--parts", "ops", "--ops", "softmax,rmsnorm",
            "--max-rungs", "1", "--out", str(out)]
    t0 = time.monotonic()
    assert command.main(argv + ["--kinds", "sim,h200"]) == 3  # h200: no worker
    took = time.monotonic() - t0
    rows = json.loads((out / "fleet_status.json").read_text())["rows"]
    by = {(r["unit"], r["kind"]): r for r in rows}
    assert set(by) == {(u, k) for u in ("ops-softmax", "ops-rmsnorm") for k in ("sim", "h200")} and len(rows) == 4
    assert {by[(u, "h200")]["status"] for u in ("ops-softmax", "ops-rmsnorm")} == {"no worker"}
    assert {by[(u, "sim")]["status"] for u in ("ops-softmax", "ops-rmsnorm")} == {"done"}
    recs = sorted((out / "results").glob("*/*/*.json"))
    assert [p.parent.name for p in recs] == ["rmsnorm", "softmax"]
    assert all(json.loads(p.read_text())["simulated"] is True for p in recs)
    assert {p.parent.parent.name for p in recs} == {"numba-cuda-simulator"}
    assert took < 120
    said = capsys.readouterr().out
    assert "perfkit record --cluster local-sim:2: kinds ['sim', 'h200']" in said and "dashboard" not in said
    # the second call: every unit done before, nothing measured, no record added
    assert command.main(argv + ["--kinds", "sim"]) == 0
    rows2 = json.loads((out / "fleet_status.json").read_text())["rows"]
    assert {r["status"] for r in rows2} == {"skipped"} and len(rows2) == 2
    assert sorted((out / "results").glob("*/*/*.json")) == recs
    # the same plan in one process here: the same records, times and provenance aside
    alone = tmp_path / "alone"
    assert command.main(argv[:1] + argv[3:-1] + [str(alone)]) == 0
    same = ("op", "variant", "rung", "label", "problem", "params", "config", "bytes", "flops", "check_ok", "simulated")
    records = lambda paths: sorted(json.dumps({k: json.loads(p.read_text())[k] for k in same}, sort_keys=True)  # noqa: E731
                                   for p in paths)
    assert records(recs) == records((alone / "results").glob("*/*/*.json"))


@sim_only
def test_static_refresh_on_a_cluster_writes_the_store_here(tmp_path, monkeypatch, kept):
    """The static refresh with --cluster local-sim:2 on saxpy's builds (no estimates: seconds, not
    minutes): one target a task on the workers, the entries written by this process into its
    store, a build entry for every target, each answer equal to the shipped store's (but for
    ptxas' own compile time); with --ops nothing is dropped."""
    import re

    from perfkit import refresh, static

    store = tmp_path / "static"
    (store / "anatomy").mkdir(parents=True)
    (store / "anatomy" / "unused.json").write_text("{}")
    monkeypatch.setenv("PERFKIT_STATIC_DIR", str(store))
    monkeypatch.delenv("PERFKIT_STATIC_WRITE", raising=False)
    out = refresh.refresh_on_cluster("local-sim:2", ["saxpy"], gpus=(), progress=print)
    assert not out["failed"] and out["targets"] == 3 and out["dropped"] == 0
    want = {static.build_key(v, p, static.CC) for _, v, p in static.targets(["saxpy"])}
    assert want == {p.stem for p in static.entries("anatomy")} - {"unused"}
    assert (store / "anatomy" / "unused.json").exists()

    def answer(f):
        return re.sub(r"Compile time = [0-9.]+ ms", "", json.dumps(json.loads(f.read_text())["answer"]))

    shipped = [(f, static.STORE / "anatomy" / f.name) for f in store.glob("anatomy/*.json") if f.stem in want]
    for new, old in shipped:
        if old.exists():  # (a rung changed on this branch has no shipped entry until the store is refreshed)
            assert answer(new) == answer(old), new
    from perfkit.cli import main

    assert main(["static", "refresh", "--cluster", "local-sim:2", "--notebooks"]) == 2  # notebooks run here


@sim_only
def test_autotune_compiles_candidates_on_a_clusters_executor(kept):
    """search_gemm with a Dask executor: the same survivors, registers and estimates as in this
    process; search_norm times its shapes through it."""
    from perfkit import autotune
    from perfkit.kernels import gemm
    from perfkit.kernels.norm import softmax

    p = gemm.EXAMPLE_PROBLEM  # builds from the static store (notebook 02 autotunes these): no compile
    cands = [gemm.search_space()[0], gemm.WarpTile(LR=3), gemm.WarpTile(BM=64, BN=64, BK=16, TM=4, TN=4, LR=8)]
    with cluster.connect("local-sim:2") as client:
        assert client.scheduler.address == kept.clusters["local-sim:2"].scheduler_address  # kept, not started anew
        ex = client.get_executor(resources=cluster.CPU_RESOURCES)
        there = autotune.search_gemm(p, cands, cc=(9, 0), keep=1, executor=ex)
        q = softmax.Problem(64, 1000)
        timed = autotune.search_norm(softmax, q, time_fn=lambda v: 1.0 / v.shape(q).G, executor=ex)
    here = autotune.search_gemm(p, cands, cc=(9, 0), keep=1)  # (the workers' builds are in the local cache)
    key = lambda c: (repr(c.variant), c.registers, c.spills, c.rejected, c.model_s)  # noqa: E731
    assert [key(c) for c in there] == [key(c) for c in here]
    assert there[0].rejected is None and there[0].registers and there[0].model_s > 0
    local = autotune.search_norm(softmax, q, time_fn=lambda v: 1.0 / v.shape(q).G)
    assert [(repr(c.variant), c.seconds) for c in timed] == [(repr(c.variant), c.seconds) for c in local]


def test_workload_of_several_networks_one_task_each_on_a_cluster(tmp_path, capsys, kept):
    """perfkit workload NET NET --cluster local-sim:1: one network a task, the tables printed here
    in the order given, a CSV per network, the same tables as one at a time here.  The worker is a
    thread of this process (tracing needs no process of its own; a worker process would import
    torch, and the torch._dynamo its meta kernels load, a second time: about 6 s of the test)."""
    from perfkit.cli import main

    kept.keep("local-sim:1", cluster.local_sim(1, processes=False))
    argv = ["workload", "gpt2", "bert-base", "--batch", "1", "--seq", "8", "--out", str(tmp_path / "w.csv")]
    assert main(argv + ["--cluster", "local-sim:1"]) == 0  # one worker: torch imported once
    there = capsys.readouterr().out
    assert there.index("gpt2 batch 1") < there.index("bert-base batch 1")
    csvs = {p.name: p.read_text() for p in tmp_path.glob("*.csv")}
    assert set(csvs) == {"w-gpt2.csv", "w-bert-base.csv"}
    assert main(argv) == 0
    here = capsys.readouterr().out
    strip = lambda t: [l for l in t.splitlines() if "traced in" not in l and "written to" not in l]  # noqa: E731
    assert strip(there) == strip(here)
    # the same kernels with the same predictions.  Rows of no kernel (views, allocations) are left
    # out: a stray aten.detach (class view, no kernel, no time) sometimes appears in one of the
    # two traces, in the worker or here, and shifts every index after it (seen 2 runs in about 6;
    # its cause is not found: it does not appear when tracing in a fresh worker or process)
    def kernels(text):
        rows = [r.split(",", 1)[1] for r in text.splitlines()[1:]]  # without the index column
        return [r for r in rows if r.split(",")[2] != "view"]

    for name, text in {p.name: p.read_text() for p in tmp_path.glob("*.csv")}.items():
        a, b = kernels(csvs[name]), kernels(text)
        differ = [(x, y) for x, y in zip(a, b) if x != y]  # on a failure the first few, not 70 KB
        assert a == b, f"{name}: {len(differ)} kernel rows differ (cluster, here): {differ[:3]}"
    assert main(["workload", "gpt2", "--cluster", "local-sim:1", "--measure"]) == 2


@sim_only
def test_a_worker_killed_mid_unit_loses_nothing_duplicates_nothing_and_leaves_no_process(tmp_path, kept):
    """The worker running a unit is SIGKILLed mid-unit: its nanny starts it again, the scheduler
    reruns the unit once, the rerun kills the dead worker's unit group first (its grandchild too),
    and every unit finishes exactly once with every record once.  Last in the module: it runs on
    the kept local-sim:2 cluster, then drops it (a later test here, under xdist, starts a fresh one)."""
    import argparse

    from perfkit.kernels import registry
    from perfkit.record import plan

    softmax = registry.module("softmax")
    ops = Unit("ops-softmax", "ops", 120, items=[plan.item("softmax", softmax, softmax.EXAMPLE_PROBLEM,
                                                           softmax.LADDER[0], True)])
    # 3 s: the killer kills within a second of the pids file appearing, and the rerun sleeps it too
    slow = Unit("slow", "rehearsal", 120, "sleeps with a grandchild", extra={"sleep": 3})
    work = tmp_path / "work"
    args = argparse.Namespace(out=str(tmp_path / "out"), plan="quick", tiny=True, cluster="local-sim:2",
                              commit_id="abc1234", budget_s=300, force=False)
    killed = {}

    def kill_the_slow_units_worker(client, futures):
        deadline = time.monotonic() + 90
        while not list(work.glob("sim/slow/*/rehearsal-kill.pids")) and time.monotonic() < deadline:
            time.sleep(0.1)
        [pids_file] = list(work.glob("sim/slow/*/rehearsal-kill.pids"))
        killed["pids"] = [int(p) for p in pids_file.read_text().split()]
        [addr] = [a for a, keys in client.processing().items() if any("slow" in str(k) for k in keys)]
        pid = client.run(os.getpid, workers=[addr])[addr]
        os.kill(pid, signal.SIGKILL)
        killed["worker"] = pid
        time.sleep(1.0)
        client.wait_for_workers(2, timeout=60)  # its nanny starts it again
        killed["back"] = pid not in client.run(os.getpid).values()

    try:
        assert fleet.run(args, [slow, ops], ["sim"], work_root=str(work), on_submit=kill_the_slow_units_worker) == 0
    finally:
        kept.drop("local-sim:2")
    rows = json.loads((tmp_path / "out" / "fleet_status.json").read_text())["rows"]
    assert sorted((r["unit"], r["status"]) for r in rows) == [("ops-softmax", "done"), ("slow", "done")]
    assert len(list(work.glob("sim/slow/*/"))) == 2  # the killed attempt and the rerun
    assert killed["back"]
    assert killed["pids"] and not any(_alive(p) for p in killed["pids"])  # the first attempt's group is gone
    recs = list((tmp_path / "out" / "results").glob("*/*/*.json"))
    assert len(recs) == 1 and json.loads(recs[0].read_text())["variant"] == "oracle"
    assert not list((work / "groups").glob("*.json"))  # no unit group left noted on the host
