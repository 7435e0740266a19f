"""Units of work on many machines, through Dask distributed (``pip install 'perfkit[cluster]'``).

Dask does the scheduling, the routing by worker resources and the rescheduling of a lost
worker's task; this module only names clusters and workers the perfkit way:

=========================  =====================================================================
``--cluster SPEC``         what it connects to
=========================  =====================================================================
``local-sim:N``            N local workers on the CUDA simulator (tests, laptops): GPU kind ``sim``
``local-cuda``             one local worker per visible GPU, each labelled with its GPU's kind
``tcp://HOST:PORT``        a running scheduler (workers started with ``perfkit worker``)
``scheduler-file:PATH``    the same, by the scheduler's file
``slurm:K=V,...``          dask-jobqueue's SLURMCluster, one GPU a job (``perfkit[slurm]``):
                           ``kind=h100-sxm,jobs=4,partition=gpu,account=A,walltime=01:00:00,
                           cores=8,memory=64GB``
``k8s:NAME[,K=V...]``      dask-kubernetes' operator cluster NAME (``perfkit[k8s]``):
                           ``kind=h100-sxm,workers=2,image=...``
=========================  =====================================================================

A GPU worker advertises the resources ``GPU=1`` and ``kind-<key>=1`` (its device's key in
``devices.yaml``); a CPU worker ``CPU=1``.  Resources are labels: which GPU a unit runs on is
``PERFKIT_GPU_INDEX`` of its worker, which the unit's runner turns into ``CUDA_VISIBLE_DEVICES``
of the unit's child before the child starts (Numba reads it when its driver starts).  Under Slurm
the job's own ``CUDA_VISIBLE_DEVICES`` is kept.

A :class:`Pool` keeps the local clusters (``local-sim:N``, ``local-cuda``) between ``connect``
calls, for a session of many short runs (tests, a notebook); without one every ``connect`` starts
and closes its own.

Dask is imported only here and only when a cluster is asked for: ``import perfkit`` never loads it.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

KIND_PREFIX = "kind-"
SIM_KIND = "sim"
#: how many times the scheduler reruns a task whose worker died: a lost worker's unit is retried
#: once (a timeout or a device fault is the unit's status, never a retry)
ALLOWED_FAILURES = 1
#: the environment variable that pins a worker's units to one local GPU
GPU_INDEX_ENV = "PERFKIT_GPU_INDEX"
#: Dask settings of the clusters ``connect`` starts here (local ones: their nannies give them to
#: their workers; a worker started elsewhere keeps its own Dask config).  Dask's
#: statistical profiler samples a worker's task thread every 10 ms and walks its whole stack with
#: the GIL held: on the deep stacks of a Numba compile or a torch trace that made a task about 3x
#: slower (tracing gpt2 in a worker: 9.2 s with it, 2.8 s without).  A unit's own time is in its
#: child process, which the profiler never saw; the dashboard's Profile page is what is lost.
CLUSTER_CONFIG = {"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                  "distributed.worker.profile.enabled": False}
#: the same for workers started elsewhere (``perfkit worker``, Slurm jobs, Kubernetes pods), which
#: read their Dask config from the environment
WORKER_ENV = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
SPEC_FORMS = ("local-sim:N", "local-cuda", "tcp://HOST:PORT", "scheduler-file:PATH", "slurm:K=V,...", "k8s:NAME")


class ClusterError(RuntimeError):
    """A bad cluster spec, Dask missing, or no worker for a GPU kind; the message says what is allowed."""


def distributed():
    """The ``distributed`` package, or a ClusterError that says how to install it."""
    try:
        import distributed as dd
    except ImportError as exc:
        raise ClusterError("a cluster needs Dask distributed: pip install 'perfkit[cluster]'") from exc
    return dd


def kind_resource(kind: str) -> str:
    return KIND_PREFIX + kind


def gpu_resources(kind: str) -> dict:
    return {"GPU": 1, kind_resource(kind): 1}


CPU_RESOURCES = {"CPU": 1}


def resource_arg(resources: dict) -> str:
    """``{"GPU": 1, "kind-h200": 1}`` -> ``GPU=1,kind-h200=1`` (dask worker's ``--resources``)."""
    return ",".join(f"{k}={v}" for k, v in resources.items())


def local_gpus() -> list[tuple[int, str]]:
    """(index, devices.yaml key) of every GPU this machine has (NVML; none without a driver)."""
    try:
        import pynvml
    except ImportError:
        return []
    from perfkit import specs

    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  (no driver: no GPU)
        return []
    found = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            name = name.decode() if isinstance(name, bytes) else name
            try:
                key = specs.get(name).key
            except Exception:  # noqa: BLE001  (a GPU devices.yaml does not list: its name as a key)
                key = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            found.append((i, key))
    finally:
        pynvml.nvmlShutdown()
    return found


def _options(text: str, allowed: tuple[str, ...], what: str) -> dict:
    opts = {}
    for part in [p for p in text.split(",") if p]:
        k, eq, v = part.partition("=")
        if not eq or k not in allowed:
            raise ClusterError(f"{what}: {part!r} is not one of {', '.join(a + '=...' for a in allowed)}")
        opts[k] = v
    return opts


SLURM_OPTIONS = ("kind", "jobs", "gpus", "partition", "account", "walltime", "cores", "memory")


def slurm_cluster(text: str):
    """dask-jobqueue's SLURMCluster for ``slurm:`` options: one worker a job, each with one GPU
    (``--gres=gpu:1``) and that GPU's kind as a resource.  Building it submits nothing (its job
    script is ``.job_script()``); scale it to submit jobs."""
    opts = _options(text, SLURM_OPTIONS, "slurm")
    if "kind" not in opts:
        raise ClusterError("slurm: needs kind=<devices.yaml key> (the GPU kind its jobs get)")
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as exc:
        raise ClusterError("slurm: needs dask-jobqueue: pip install 'perfkit[slurm]'") from exc
    return SLURMCluster(queue=opts.get("partition"), account=opts.get("account"), cores=int(opts.get("cores", 4)),
                        processes=1, memory=opts.get("memory", "32GB"), walltime=opts.get("walltime", "01:00:00"),
                        job_extra_directives=[f"--gres=gpu:{opts.get('gpus', 1)}"], python=sys.executable,
                        job_script_prologue=[f"export {k}={v}" for k, v in WORKER_ENV.items()],
                        worker_extra_args=["--nthreads", "1", "--resources", resource_arg(gpu_resources(opts["kind"]))])


K8S_OPTIONS = ("kind", "workers", "image")


def k8s_spec(text: str) -> dict:
    """The DaskCluster resource for ``k8s:NAME,kind=...,workers=N,image=...``: workers with one
    ``nvidia.com/gpu`` each and the kind as a resource.  A dict: nothing is created."""
    name, _, rest = text.partition(",")
    if not name:
        raise ClusterError("k8s: needs a cluster name, k8s:NAME[,kind=...,workers=N,image=...]")
    opts = _options(rest, K8S_OPTIONS, "k8s")
    if "kind" not in opts:
        raise ClusterError("k8s: needs kind=<devices.yaml key> (the GPU kind of its workers)")
    try:
        from dask_kubernetes.operator import make_cluster_spec
    except ImportError as exc:
        raise ClusterError("k8s: needs dask-kubernetes: pip install 'perfkit[k8s]'") from exc
    command = f"dask worker --nthreads 1 --resources {resource_arg(gpu_resources(opts['kind']))}"
    return make_cluster_spec(name=name, image=opts.get("image", "ghcr.io/dask/dask:latest"),
                             n_workers=int(opts.get("workers", 1)), resources={"limits": {"nvidia.com/gpu": "1"}},
                             env=dict(WORKER_ENV), worker_command=command)


def parse(spec: str) -> tuple[str, str]:
    """(form, argument) of a ``--cluster`` spec; a bad one raises ClusterError naming the forms."""
    if spec.startswith("tcp://") or spec.startswith("tls://"):
        return "address", spec
    form, _, arg = spec.partition(":")
    if form == "local-sim" and arg.isdigit() and int(arg) >= 1:
        return form, arg
    if form == "local-cuda" and not arg:
        return form, arg
    if form in ("scheduler-file", "slurm", "k8s") and arg:
        return form, arg
    raise ClusterError(f"--cluster {spec!r}: one of {', '.join(SPEC_FORMS)}")


def _scheduler_options() -> dict:
    import importlib.util

    return {"dashboard_address": ":0" if importlib.util.find_spec("bokeh") else None}


def local_sim(n: int, processes: bool = True):
    """``local-sim:N``'s cluster: N simulator workers of one thread each, labelled GPU kind ``sim``
    and CPU.  ``processes=False`` makes them threads of this process, with its backend and its
    imports: only for work that needs no process of its own (a test tracing networks, where a
    worker process would import torch a second time); a unit's child process is isolation enough
    for the recorder, but a task that edits ``os.environ`` (refresh_target) needs processes."""
    import dask

    dd = distributed()
    env = {"env": {"PERFKIT_BACKEND": "sim", "PERFKIT_QUIET_BACKEND": "1"}} if processes else {}
    with dask.config.set(CLUSTER_CONFIG):
        return dd.LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                               resources={**gpu_resources(SIM_KIND), **CPU_RESOURCES}, **env, **_scheduler_options())


def _start(form: str, arg: str, dd):
    """The cluster ``connect`` starts for ``form`` (None for a running one it only connects to)."""
    if form == "local-sim":
        return local_sim(int(arg))
    if form == "local-cuda":
        gpus = local_gpus()
        if not gpus:
            raise ClusterError("local-cuda: no GPU here (NVML finds none); local-sim:N runs the simulator")
        workers = {f"gpu{i}-{key}": {"cls": dd.Nanny, "options": {
            "nthreads": 1, "resources": gpu_resources(key), "env": {GPU_INDEX_ENV: str(i)}}} for i, key in gpus}
        return dd.SpecCluster(workers=workers, scheduler={"cls": dd.Scheduler, "options": _scheduler_options()})
    if form == "slurm":
        cluster = slurm_cluster(arg)
        cluster.scale(jobs=int(_options(arg, SLURM_OPTIONS, "slurm").get("jobs", 1)))
        return cluster
    if form == "k8s":
        from dask_kubernetes.operator import KubeCluster

        return KubeCluster(custom_cluster_spec=k8s_spec(arg))
    return None


#: the forms a Pool keeps: clusters of this machine's processes, nothing submitted anywhere
POOLED_FORMS = ("local-sim", "local-cuda")
_active_pool: "Pool | None" = None


class Pool:
    """Local clusters kept between ``connect`` calls: inside ``with pool.active():`` a
    ``connect("local-sim:N")`` (or ``local-cuda``) takes the pool's cluster for that spec,
    starting it the first time, and leaves it running; ``pool.close()`` (or the end of
    ``with Pool() as pool``) closes them.  Other specs, and a connect outside ``active()``,
    start and close their own cluster as always.

    For a session of many short runs (the tests, a notebook): each start costs seconds (the
    worker processes, then perfkit, Numba or torch imported in each).  A kept cluster's workers
    have run the earlier runs' tasks (their imports, caches, a worker restarted after a kill):
    a run that needs fresh worker processes connects outside ``active()``, and one that kills a
    worker drops the cluster after it (``drop``)."""

    def __init__(self):
        self.clusters: dict[str, object] = {}

    @contextlib.contextmanager
    def active(self):
        global _active_pool
        before, _active_pool = _active_pool, self
        try:
            yield self
        finally:
            _active_pool = before

    def keep(self, spec: str, cluster) -> None:
        """Use ``cluster`` for ``spec`` from now on (a test's ``local_sim(1, processes=False)``)."""
        self.drop(spec)
        self.clusters[spec] = cluster

    def drop(self, spec: str) -> None:
        """Close the pool's cluster for ``spec`` (if any): the next connect starts a fresh one."""
        cluster = self.clusters.pop(spec, None)
        if cluster is not None:
            cluster.close()

    def close(self) -> None:
        while self.clusters:
            self.clusters.popitem()[1].close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def connect(spec: str):
    """A Dask ``Client`` on the cluster ``spec`` names (closed, with any cluster it started, at
    the end; a cluster of an active :class:`Pool` is left running)."""
    form, arg = parse(spec)
    dd = distributed()
    import dask

    with dask.config.set(CLUSTER_CONFIG):
        pool = _active_pool if form in POOLED_FORMS else None
        if pool is not None:
            if spec not in pool.clusters:
                pool.clusters[spec] = _start(form, arg, dd)
            cluster, owned = pool.clusters[spec], False
        else:
            cluster = _start(form, arg, dd)
            owned = cluster is not None
        try:
            if cluster is not None:
                client = dd.Client(cluster)
            elif form == "scheduler-file":
                client = dd.Client(scheduler_file=arg)
            else:
                client = dd.Client(arg)
            try:
                yield client
            finally:
                client.close()
        finally:
            if owned:
                cluster.close()


def kinds_present(client) -> dict[str, int]:
    """GPU kind -> how many workers advertise it, as the scheduler sees them now."""
    found: dict[str, int] = {}
    for w in client.scheduler_info(n_workers=-1)["workers"].values():
        for r in w.get("resources", {}):
            if r.startswith(KIND_PREFIX):
                found[r[len(KIND_PREFIX):]] = found.get(r[len(KIND_PREFIX):], 0) + 1
    return found


def dashboard(client) -> str | None:
    return getattr(client, "dashboard_link", None)


# --- perfkit worker SCHEDULER [--gpus all|0,1|none] [--cpus N] ---------------------------------------
def worker_commands(scheduler: str, gpus: list[tuple[int, str]], cpus: int) -> list[tuple[list[str], dict]]:
    """(command, extra environment) of each worker process: one per GPU (its kind as a
    resource, pinned by PERFKIT_GPU_INDEX), and ``cpus`` CPU workers."""
    base = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nthreads", "1", "--nworkers", "1"]
    out = [(base + ["--resources", resource_arg(gpu_resources(key)), "--name", f"gpu{i}-{key}"],
            {**WORKER_ENV, GPU_INDEX_ENV: str(i)}) for i, key in gpus]
    out += [(base + ["--resources", resource_arg(CPU_RESOURCES), "--name", f"cpu{k}"], dict(WORKER_ENV))
            for k in range(cpus)]
    return out


def worker_cli(argv: list[str] | None = None) -> int:
    """``perfkit worker SCHEDULER``: this machine's workers for a running scheduler, until stopped."""
    import argparse

    ap = argparse.ArgumentParser(prog="perfkit worker", description=worker_cli.__doc__)
    ap.add_argument("scheduler", help="tcp://HOST:PORT, or a scheduler file")
    ap.add_argument("--gpus", default="all", help="all (default), none, or comma-separated indices")
    ap.add_argument("--cpus", type=int, default=0, help="CPU workers (static refresh, compiles)")
    ap.add_argument("--dry-run", action="store_true", help="print the worker commands and exit")
    args = ap.parse_args(argv)
    gpus = [] if args.gpus == "none" else local_gpus()
    if args.gpus not in ("all", "none"):
        wanted = {int(x) for x in args.gpus.split(",")}
        gpus = [(i, k) for i, k in gpus if i in wanted]
    if not gpus and args.cpus < 1:
        ap.error("no GPU found and no --cpus: nothing to start")
    sched = args.scheduler if "://" in args.scheduler else f"--scheduler-file={args.scheduler}"
    cmds = worker_commands(sched, gpus, args.cpus)
    if args.dry_run:
        for cmd, env in cmds:
            print(" ".join(f"{k}={v}" for k, v in env.items()), " ".join(cmd))
        return 0
    distributed()  # a clear error before any process starts
    procs = [subprocess.Popen(cmd, env={**os.environ, **env}) for cmd, env in cmds]
    try:
        return max(p.wait() for p in procs)
    except KeyboardInterrupt:
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
