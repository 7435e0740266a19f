"""An ops unit's rungs compiled in worker processes before the sweep (perfkit.record.precompile).

Here (no GPU) the workers build for a named target and the "unit's process" is a child with the
real numba.cuda whose current device is faked to that target, as the anatomy's compiler child
does: everything up to the driver's load of the cubin is the code a GPU runs.  The load and the
launch themselves need a GPU: ``test_precompiled_rungs_check_on_the_gpu_without_compiling``."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit import backend

ROOT = Path(__file__).resolve().parent.parent

#: the child's start: the real numba.cuda, a launch that records its kernel instead of calling the
#: driver (and a compile that does not load it), and a count of every kernel Numba builds
#: (``_Kernel.__init__``: what a compile makes)
PRELUDE = """
import base64, json, sys
import perfkit
import numba.cuda.dispatcher as cd
from perfkit import static
from perfkit.kernels import registry
from perfkit.kernels.base import Launch
from perfkit.record import precompile as pc

built, launched, lines = [0], [], []
_init = cd._Kernel.__init__
def counting_init(self, *a, **k):
    built[0] += 1
    return _init(self, *a, **k)
cd._Kernel.__init__ = counting_init
cd._Kernel.launch = lambda self, args, griddim, blockdim, stream=0, sharedmem=0: launched.append(self)
cd._Kernel.bind = lambda self: None  # a compile's load into the device's context

def rung(op, name, **params):
    mod = registry.module(op)
    return next(v for v in mod.LADDER if v.name == name), mod.Problem(**params)
"""


def run_child(tmp_path, body: str, timeout: float = 240) -> dict:
    """Run PRELUDE + body in a compile-only child; its last stdout line is a JSON dict."""
    env = {**os.environ, "PERFKIT_BACKEND": "compile", "PERFKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", PRELUDE + body], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# sm_90a: the H100 and H200 the records come from (sm_80 builds by the same path, at the suite's cost)
@pytest.mark.parametrize("cc", [(9, 0)], ids=["sm_90a"])
def test_workers_build_a_rungs_kernels_and_its_launches_find_them_without_compiling(tmp_path, cc):
    """Two workers build two saxpy rungs (sm_80), or a saxpy rung and a Hopper GEMM rung (TMA and
    wgmma, sm_90a), for the target (the oracle has no kernel of ours); the kernels come back pickled with their cubin and go into the
    dispatchers the rung's plan launches: every launch of the plan, through Numba's own launch path
    (configure, the C dispatcher's lookup by argument types), gets the inserted kernel, and neither
    the launches nor ``dispatcher.compile(sig)`` build one; each cubin's code is the anatomy's (its
    bytes too where Numba numbered the kernel alike in both processes)."""
    body = f"""
cc = {cc!r}
key = pc.target_key(cc)
third = rung("gemm", "tma", m=4096, n=4096, k=4096, dtype="float16") if cc >= (9, 0) else \\
        rung("saxpy", "grid_stride", n=1000)
pairs = [rung("saxpy", "naive", n=1000), rung("saxpy", "oracle", n=1000), third]
res = pc.precompile(pairs, cc=cc, workers=2, timeout_s=200, log=lines.append)
after_precompile = built[0]
found, same = [], []
with pc.building_for(cc):
    for n, (v, p) in enumerate(pairs):
        for launch in v.plan(p, v.host_buffers(p)):
            launched.clear()
            Launch.__call__(launch)  # the base launch: a DynamicSharedLaunch's opt-in calls the driver
            d = launch.kernel
            sig = tuple(d.typeof_pyval(a) for a in launch.args)
            found.append(launched[0] is d.overloads[sig] and d.compile(sig) is d.overloads[sig])
anatomy, same_bytes = [], []
import os, re, subprocess, tempfile
from perfkit.anatomy import compile_job, tool_path  # last: compile_job fakes the device for good here

def sass(cubin):
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    text = subprocess.run([tool_path("cuobjdump"), "-sass", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    # Numba numbers each function it compiles in a process (the "v<N>" of a mangled name): a worker
    # that compiled other rungs first names a factory's kernel otherwise; the code is what counts
    return re.sub(r"_Z\\w+", "SYMBOL", text)

for n, given in res.given.items():
    v, p = pairs[n]
    ref = compile_job(static.job(v, p, cc))["launches"]
    for i, d, sig in pc.plan_kernels(v, p):
        mine = bytes(d.overloads[sig]._codelibrary._cubin_cache[key].code)
        theirs = base64.b64decode(ref[i]["cubin_b64"])
        same_bytes.append(mine == theirs)
        anatomy.append("Function : SYMBOL" in sass(mine) and sass(mine) == sass(theirs))
print(json.dumps({{"given": sorted(res.given), "kernels": res.kernels, "fallback": res.fallback,
                  "built_here": after_precompile, "built_after": built[0] - after_precompile,
                  "found": found, "anatomy": anatomy, "same_bytes": same_bytes, "lines": lines,
                  "workers": res.workers}}))
"""
    r = run_child(tmp_path, body)
    assert r["fallback"] == {} and r["given"] == [0, 2] and r["workers"] == 2, r["lines"]
    assert r["built_here"] == 0  # the unit's process compiled nothing: the workers did
    assert r["found"] and all(r["found"]) and len(r["found"]) >= 2
    assert r["built_after"] - len(r["anatomy"]) == 0  # only the anatomy's own builds, after the checks
    assert r["anatomy"] and all(r["anatomy"]), "a precompiled kernel's SASS differs from the anatomy's build"
    assert r["same_bytes"][0], "saxpy's cubin (the first kernel compiled in both processes) differs in its bytes"
    arch = "sm_90a" if cc >= (9, 0) else "sm_80"
    assert any(f"2 of 2 rungs ({r['kernels']} kernels, {arch})" in ln for ln in r["lines"]), r["lines"]


def test_a_pair_that_fails_falls_back_to_numbas_compile_and_is_logged(tmp_path):
    """A rung its worker cannot build (defined where the worker cannot import it, as in a
    notebook cell), a worker that dies holding a rung, a rung past the time limit: each is left to
    Numba's compile at its first launch, with a line saying why, and the rest still go in (the
    launch then builds the kernel, as without a precompile)."""
    body = """
from dataclasses import dataclass
from perfkit.kernels import saxpy

@dataclass(frozen=True)
class HereOnly(saxpy.Naive):  # its module is this script: a worker's rebuild cannot find it
    pass

ok, bad = rung("saxpy", "grid_stride", n=1000), (HereOnly(), saxpy.Problem(n=1000))
res = pc.precompile([ok, bad], cc=(8, 0), workers=2, timeout_s=200, log=lines.append)
failed = dict(res.fallback)
pc.WORKER = ("import os, sys; os.close(os.open(os.path.join(sys.argv[2], '0.claim'), os.O_CREAT)); "
             "print('worker gave up'); sys.exit(3)")
died = pc.precompile([rung("saxpy", "unrolled", n=1000)], cc=(8, 0), workers=1, log=lines.append)
pc.WORKER = "import time; time.sleep(60)"
late = pc.precompile([rung("saxpy", "naive", n=1000)], cc=(8, 0), workers=1, timeout_s=0.5, log=lines.append)
v, p = ok
with pc.building_for((8, 0)):
    launch = v.plan(p, v.host_buffers(p))[0]
    before = built[0]
    Launch.__call__(launch)
    ok_built = built[0] - before
    v, p = rung("saxpy", "unrolled", n=1000)
    before = built[0]
    Launch.__call__(v.plan(p, v.host_buffers(p))[0])
    fallback_built = built[0] - before
print(json.dumps({"given": sorted(res.given), "failed": failed, "died": died.fallback, "late": late.fallback,
                  "ok_built": ok_built, "fallback_built": fallback_built, "lines": lines}))
"""
    r = run_child(tmp_path, body)
    assert r["given"] == [0] and list(r["failed"]) == ["1"]
    assert r["failed"]["1"].startswith("ValueError: build failed"), r["failed"]
    assert "its worker died" in r["died"]["0"] and "worker gave up" in r["died"]["0"]
    assert "not built within" in r["late"]["0"]
    assert r["ok_built"] == 0 and r["fallback_built"] == 1  # the fallen-back rung compiles at its launch
    text = "\n".join(r["lines"])
    assert "01 naive: compiled at its first launch instead (ValueError: build failed: AttributeError" in text
    assert "02 grid_stride: compiled at its first launch" not in text
    assert "1 of 2 rungs" in text and "0 of 1 rungs" in text


def test_in_the_simulator_there_is_nothing_to_compile_and_precompile_says_so():
    from perfkit.kernels import saxpy
    from perfkit.record import precompile

    if not backend.is_simulator():
        pytest.skip("the simulator's no-op")
    lines = []
    res = precompile.precompile([(v, saxpy.SIM_SWEEP[0]) for v in saxpy.LADDER], workers=4, log=lines.append)
    assert res.given == {} and res.fallback == {} and res.workers == 0 and res.seconds == 0.0
    assert lines == ["precompile: nothing to compile in the simulator (kernels run as Python); no-op"]


def test_every_rung_launches_the_dispatchers_its_plan_names():
    """The kernels go into the dispatchers ``plan()`` names with host stand-ins; the sweep's
    ``prepare`` calls ``plan()`` again: every rung of the quick plan's ops units, and of every
    ladder at every ``GPU_SWEEP`` problem (the full plan), gives the same dispatcher objects each
    time (its kernel factories are cached per configuration)."""
    from perfkit.kernels import registry
    from perfkit.record import plan
    from perfkit.record.plan import is_peer, rebuild

    pairs = [rebuild(it)[1:] for u in plan.make("quick", 420, False, ["ops"]) if u.part == "ops"
             for it in u.items if not is_peer(it)]
    quick = len(pairs)
    pairs += [(p, v) for op in registry.OPS for p in registry.module(op).GPU_SWEEP for v in registry.module(op).LADDER]
    seen = [0, 0]
    for n, (p, v) in enumerate(pairs):
        try:
            v.supports(p)
        except Exception:
            continue
        a, b = v.plan(p, v.host_buffers(p)), v.plan(p, v.host_buffers(p))
        assert len(a) == len(b) and all(x.kernel is y.kernel for x, y in zip(a, b)), f"{v.label} at {p.label}"
        seen[n >= quick] += bool(a)
    assert seen[0] >= 80 and seen[1] >= 1000, seen


def test_an_ops_unit_counts_its_precompile_apart_and_a_precompiled_rungs_check_as_load(tmp_path, monkeypatch, capsys):
    """The unit's child, bench.sweep and the precompile replaced: the precompile's seconds are the
    unit's ``precompile`` phase, a rung it gave kernels and that compiled none at launch has its
    check_s as ``load+check``, one Numba compiled anyway (or that was left to it) keeps
    ``compile+check``, and the sweep's rows say which."""
    from collections import Counter
    from types import SimpleNamespace

    from perfkit import bench
    from perfkit.kernels import saxpy
    from perfkit.record import plan, precompile, progress, supervise, units

    p = saxpy.SIM_SWEEP[0]
    items = [plan.item("saxpy", saxpy, p, v, True) for v in saxpy.LADDER]
    disp = [SimpleNamespace(stats=SimpleNamespace(cache_misses=Counter())) for _ in range(3)]
    got = {}

    def fake_precompile(pairs, workers=None, timeout_s=60.0, log=print):
        got.update(workers=workers, timeout_s=timeout_s, n=len(pairs))
        log("precompile: 2 of 3 rungs")
        return precompile.Precompiled(seconds=4.0, workers=3, given={1: [disp[0]], 2: [disp[1]]},
                                      fallback={3: "its worker died"},
                                      planned={1: [disp[0]], 2: [disp[1]], 3: [disp[2]]})

    def fake_sweep(problems, variants, on_row=None, **kw):
        for k, v in enumerate(variants):
            if k == 2:  # rung 2 launched with other types than its plan's: Numba compiled one
                disp[1].stats.cache_misses["sig"] += 1
            if k == 3:
                disp[2].stats.cache_misses["sig"] += 1
            on_row({"op": "saxpy", "problem": p.label, "variant": v.name, "label": v.label, "rung": v.rung,
                    "status": "ok", "simulated": False, "flops": p.flops, "bytes": p.bytes, "error": None,
                    "median_s": 1e-3, "inputs_s": 0.5, "check_s": 1.0, "time_s": 1.0, "record_s": 0.0})

    for it in items:  # the kernel modules imported while this is the simulator (they choose their twins once)
        plan.rebuild(it)
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    monkeypatch.setattr(precompile, "precompile", fake_precompile)
    monkeypatch.setattr(bench, "sweep", fake_sweep)
    spec = {"name": "ops-saxpy", "items": items, "commit": "abc", "gpu": "h200", "attempt": 1, "hang": None,
            "cap_s": 40.0, "limit_s": 30.0, "precompile": 7}
    assert units.unit_ops(tmp_path, spec, tiny=False) == 0
    assert got == {"workers": 7, "timeout_s": 15.0, "n": len(items)}
    doc = progress.read(tmp_path, "ops-saxpy")
    assert doc["phases"] == {"precompile": 4.0}
    assert progress.stages(doc["done"], doc["phases"]) == {
        "precompile": 4.0, "inputs": 2.0, "compile+check": 3.0, "load+check": 1.0, "timing": 4.0,
        "recheck+record": 0.0, "peers": 0.0}
    rows = __import__("pandas").read_csv(tmp_path / "sweeps" / "sweep_saxpy.csv")
    assert list(rows["precompiled"].fillna(-1)) == [-1, 1, 1, 0] and list(rows["compiled"].fillna(-1)) == [-1, 0, 1, 1]
    out = capsys.readouterr().out
    assert "start precompile of 4 rungs and peers" in out and "precompile: 2 of 3 rungs" in out
    assert "precompiled, 0 compiled at launch" in out and "1 kernels compiled at launch" in out
    assert progress.stages_text(progress.stages(doc["done"], doc["phases"])).startswith("precompile 4.0, inputs 2.0")
    # a precompile that fails outright costs its seconds, not the unit
    monkeypatch.setattr(precompile, "precompile", lambda *a, **k: 1 / 0)
    assert units.unit_ops(tmp_path, {**spec, "name": "ops-saxpy-2"}, tiny=False) == 0
    assert "precompile: failed (ZeroDivisionError" in capsys.readouterr().out
    assert [d["status"] for d in progress.read(tmp_path, "ops-saxpy-2")["done"]] == ["ok"] * len(items)
    # --precompile K reaches the unit's child through its spec
    unit = plan.Unit("ops-saxpy", "ops", 30.0, items=items)
    spec_path = supervise.write_spec(tmp_path, unit, items, False, "abc", "h200", [], precompile=3, limit_s=12.5)
    assert {k: json.loads(spec_path.read_text())[k] for k in ("precompile", "limit_s")} == {"precompile": 3, "limit_s": 12.5}


@pytest.mark.gpu
@pytest.mark.skipif(backend.is_simulator(), reason="the cubin's load and launch need a GPU")
def test_precompiled_rungs_check_on_the_gpu_without_compiling():
    """The one check only a GPU can make (docs/RECORDING.md: run it first with a GPU): three rungs
    precompiled for this device, then run and checked against their float64 reference; no kernel
    is built in this process and Numba compiles none at launch."""
    import numba.cuda.dispatcher as cd
    from numba import cuda

    from perfkit.kernels import registry
    from perfkit.record import precompile

    cc = cuda.get_current_device().compute_capability

    def rung(op, name, **params):
        mod = registry.module(op)
        return next(v for v in mod.LADDER if v.name == name), mod.Problem(**params)

    pairs = [rung("saxpy", "unrolled", n=100_003), rung("softmax", "tuned", rows=257, cols=1000)]
    if cc >= (9, 0):
        pairs.append(rung("gemm", "tma", m=512, n=384, k=256, dtype="float16"))
    else:
        pairs.append(rung("gemm", "tc_warptile", m=512, n=384, k=256, dtype="float16"))
    res = precompile.precompile(pairs, workers=len(pairs), timeout_s=120)
    assert res.fallback == {} and sorted(res.given) == list(range(len(pairs))), res.lines
    built = []
    init = cd._Kernel.__init__

    def counting(self, *a, **k):
        built.append(a[0].__name__ if a else "?")
        return init(self, *a, **k)

    cd._Kernel.__init__ = counting
    try:
        for n, (v, p) in enumerate(pairs):
            inputs = p.make_inputs(1)
            check = p.check(v.run(p, inputs), p.reference(inputs))
            assert check.ok, f"{v.label}: {check.message}"
            assert precompile.compiles(res.planned[n]) == 0, f"{v.label}: Numba compiled at launch"
    finally:
        cd._Kernel.__init__ = init
    assert built == [], f"kernels compiled in the unit's process: {built}"


def test_a_kernel_with_linked_files_pickles_with_its_cubin_and_gets_its_files_back(tmp_path):
    """Numba refuses to pickle a library with linked files; the cubin for the target holds them
    already, so the worker sends their paths apart and the unit's process puts them back."""
    (tmp_path / "twice.cu").write_text('extern "C" __device__ int twice(float *ret, float x) { *ret = 2 * x; return 0; }\n')
    body = f"""
import pickle
from numba import cuda, float32
twice = cuda.declare_device("twice", float32(float32))

@cuda.jit(link=[{str(tmp_path / "twice.cu")!r}])
def k(x):
    x[0] = twice(x[0])

import numpy as np
sig = (k.typeof_pyval(np.zeros(1, np.float32)),)
with pc.building_for((8, 0)) as key:
    kernel = cd._Kernel(k.py_func, sig, **k.targetoptions)
    kernel._codelibrary.get_cubin()
try:
    pickle.dumps(kernel)
    refused = False
except Exception as exc:
    refused = "linking files" in str(exc)
blob, files = pc.dump_kernel(kernel)
back = pc.load_kernel({{"kernel": blob, "files": files}})
print(json.dumps({{"refused": refused, "files": files, "back": sorted(back._codelibrary._linking_files),
                  "cubin": bytes(back._codelibrary._cubin_cache[key].code) == bytes(kernel._codelibrary._cubin_cache[key].code),
                  "kept": sorted(kernel._codelibrary._linking_files)}}))
"""
    r = run_child(tmp_path, body)
    cu = str(tmp_path / "twice.cu")
    assert r["refused"] and r["files"] == [cu] and r["back"] == [cu] and r["kept"] == [cu] and r["cubin"]
