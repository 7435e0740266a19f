"""perfkit.model.estimate: every rung of every ladder gets a finite, positive estimate with a
named bound; the validate summary line keeps its format.  Compiles are cached on disk; the
full sweep over every compiled rung is opt-in (PERFKIT_SLOW=1) to keep CI cheap."""
import math
import os
import re
from pathlib import Path

import pytest

import perfkit  # noqa: F401
from perfkit import model
from perfkit.kernels import gemm, saxpy
from perfkit.kernels import peers as peers_mod
from perfkit.kernels.norm import batchnorm, layernorm, layernorm_bwd, rmsnorm, softmax

LADDERS = {"saxpy": saxpy, "gemm": gemm, "softmax": softmax, "layernorm": layernorm,
           "layernorm_bwd": layernorm_bwd, "rmsnorm": rmsnorm, "batchnorm": batchnorm}
try:
    from perfkit.kernels import conv
    LADDERS["conv"] = conv
except Exception:  # noqa: BLE001  (the conv ladder is being written)
    pass


def _check(e):
    assert math.isfinite(e.seconds) and e.seconds > 0
    assert isinstance(e.bound, str) and e.bound
    assert e.bound in e.legs or e.bound == "library (roofline)"
    assert all(math.isfinite(v) and v >= 0 for v in e.legs.values())
    assert e.inputs and all("value" in v and "source" in v for v in e.inputs.values())


def _example(mod, v):
    p = mod.EXAMPLE_PROBLEM
    return v.example(p)


@pytest.mark.parametrize("op", sorted(LADDERS))
def test_oracles_and_peers(op):
    mod = LADDERS[op]
    vs = [mod.LADDER[0]] + list(getattr(mod, "PEERS", []) or []) + list(peers_mod.PEERS.get(op, []))
    for v in vs:
        e = model.estimate(v, _example(mod, v) if not v.oracle else mod.EXAMPLE_PROBLEM)
        _check(e)
        assert e.bound == "library (roofline)"


CHEAP = [("saxpy", 1), ("saxpy", 2), ("softmax", 1), ("softmax", 3)]


def _all_rungs():
    for op, mod in LADDERS.items():
        for v in mod.LADDER[1:]:
            yield op, v.rung


@pytest.mark.parametrize("op,rung", CHEAP if not os.environ.get("PERFKIT_SLOW") else list(_all_rungs()))
def test_every_rung(op, rung):
    mod = LADDERS[op]
    v = [x for x in mod.LADDER if x.rung == rung][0]
    e = model.estimate(v, _example(mod, v), banks=False)
    _check(e)
    assert e.launches and all(l["warp_instructions"] > 0 for l in e.launches)
    # a multi-kernel rung sums its launches
    assert len(e.launches) == len(v.plan(_example(mod, v), v.host_buffers(_example(mod, v))))


def test_multi_kernel_rung_sums_launches():
    v = softmax.LADDER[1]
    e = model.estimate(v, softmax.Problem(4096, 1024), banks=False)
    assert len(e.launches) == 3
    assert e.seconds >= sum(l["seconds"] for l in e.launches)


def test_unknown_gpu_and_bad_args():
    from perfkit import specs

    with pytest.raises(specs.SpecError, match="unknown device"):
        model.estimate(saxpy.LADDER[1], saxpy.EXAMPLE_PROBLEM, gpu="no-such-gpu")
    with pytest.raises(TypeError, match="Variant and Problem"):
        model.estimate("naive", saxpy.EXAMPLE_PROBLEM)


def test_estimate_other_devices_and_what_if():
    df = model.what_if(saxpy.LADDER[2], saxpy.EXAMPLE_PROBLEM, gpus=["h100-sxm", "a100-sxm-80gb", "rtx-4090"])
    assert list(df["gpu"]) == ["h100-sxm", "a100-sxm-80gb", "rtx-4090"]
    assert (df["seconds"] > 0).all()
    # a streaming kernel: less DRAM bandwidth, slower
    s = dict(zip(df["gpu"], df["seconds"]))
    assert s["rtx-4090"] > s["h100-sxm"]


def test_summary_line_format():
    line = model.summary_line([1.1, 0.9, 2.5, float("nan"), 1.0])
    assert re.fullmatch(r"median abs error \d+% over \d+; worst ratio \d+\.\d\d; within 2x: \d+/\d+", line)
    assert line == "median abs error 10% over 4; worst ratio 2.50; within 2x: 3/4"


def test_traffic_old_names_still_work():
    t = model.Traffic(flops=2.0, dram_bytes=8.0, l2_bytes=16.0)
    p = model.predict(t, peak_flops=1.0, dram_bw=4.0, l2_bw=4.0)
    assert p.limiter == "l2" and p.seconds == 4.0
    assert t.smem_wavefronts is None and t.local_bytes is None


# --- the latency leg: one warp's cycles per iteration from an in-order scoreboard ------------
_LAT = {"alu": 4, "xu": 16, "global": 500, "local": 33, "shared": 30, "ldsm": 30, "shfl": 25, "bar": 20,
        "mma": 32, "fp64": 8}


def test_scoreboard_waits_for_the_pipe():
    """A warp dispatches to a pipe no faster than the pipe takes its instructions (math pipe
    throttle, latency.pipe_intervals): 64 independent mma.sync on Hopper take 64 x 6.98 cycles, 10
    independent IADD3 20; without pipe intervals (the lat of older callers) one a cycle, as before."""
    r = model.rates("h100-sxm")
    iv = model.latency.pipe_intervals(r)
    assert iv["alu"] == 2.0 and iv["xu"] == 8.0 and iv["fma"] == 1.0 and iv["fma2"] == 2.0
    # 989.4 TFLOP/s x 0.62 over 132 SMs x 4 schedulers at 1.98 GHz: 587 FLOP a cycle, 6.98 cycles an m16n8k16
    assert iv["tensor"] == pytest.approx(4096 / (989.4e12 * 0.62 / (132 * 1.98e9 * 4)), rel=1e-3)
    mmas = [f"HMMA.16816.F32 R{8 + 4 * i}, R4, R6, R{8 + 4 * i} ;" for i in range(64)]
    adds = [f"IADD3 R{8 + i}, R2, R3, RZ ;" for i in range(10)]
    lat = dict(_LAT, pipe_interval=iv)
    assert model._warp_cycles(mmas, _LAT, loop=False) == pytest.approx(64, abs=1)
    assert model._warp_cycles(mmas, lat, loop=False) == pytest.approx(63 * iv["tensor"] + 1, abs=1)
    assert model._warp_cycles(adds, lat, loop=False) == pytest.approx(19, abs=1)
    # different pipes still issue one a cycle: an IADD3 between two HMMAs does not wait
    mixed = [mmas[0], adds[0], mmas[1]]
    assert model._warp_cycles(mixed, lat, loop=False) == pytest.approx(1 + iv["tensor"], abs=1)
    # the estimate's latencies carry them
    assert model.latency.latencies(r, 0.5)["pipe_interval"] == iv


def test_scoreboard_independent_vs_dependent_chains():
    indep = ["FFMA R1, R2, R3, R1 ;", "FFMA R4, R2, R3, R4 ;", "FFMA R5, R2, R3, R5 ;", "FFMA R6, R2, R3, R6 ;"]
    dep = ["FFMA R1, R2, R3, R1 ;", "FFMA R1, R2, R3, R1 ;", "FFMA R1, R2, R3, R1 ;", "FFMA R1, R2, R3, R1 ;"]
    # four independent accumulators issue back to back; one accumulator waits 4 cycles each time
    assert model._warp_cycles(indep, _LAT, loop=True) == 4
    assert model._warp_cycles(dep, _LAT, loop=True) == 16


def test_scoreboard_exposes_load_latency_until_first_use():
    used_at_once = ["LDG.E R4, desc[UR4][R2.64] ;", "FADD R5, R4, R5 ;", "IADD3 R2, R2, 0x80, RZ ;"]
    hidden = ["LDG.E R4, desc[UR4][R2.64] ;", "IADD3 R2, R2, 0x80, RZ ;", "FADD R5, R8, R5 ;"]
    two_loads = ["LDG.E R4, desc[UR4][R2.64] ;", "LDG.E R6, desc[UR4][R2.64+0x4] ;", "FADD R5, R4, R5 ;",
                 "FADD R5, R6, R5 ;", "IADD3 R2, R2, 0x80, RZ ;"]
    c1 = model._warp_cycles(used_at_once, _LAT, loop=True)
    assert 500 <= c1 <= 510  # the FADD waits for the load; the address update feeds the next load
    assert model._warp_cycles(hidden, _LAT, loop=True) < 20  # the load result is never waited for
    # two independent loads overlap: one latency, not two
    c2 = model._warp_cycles(two_loads, _LAT, loop=True)
    assert c2 < 1.2 * c1
    # a predicated instruction reads its guard
    guarded = ["ISETP.GE.AND P0, PT, R1, R2, PT ;", "@P0 LDG.E R4, desc[UR4][R2.64] ;", "FADD R5, R4, R5 ;"]
    assert model._warp_cycles(guarded, _LAT, loop=False) >= 4 + 500


def test_scoreboard_waits_for_a_batch_of_loads():
    """With L1 hit/miss latencies, the loads in flight are waited for together: four loads then
    their uses wait once, missing with probability 4 x miss_p; four load-use pairs in a chain
    wait four times, each missing with miss_p (a walk along a row: 1 load in 8 misses)."""
    lat = dict(_LAT, global_hit=33.0, global_miss=1033.0, miss_p=0.125)
    batch = ["LDG.E R4, desc[UR4][R2.64] ;", "LDG.E R5, desc[UR4][R12.64] ;", "LDG.E R6, desc[UR4][R14.64] ;",
             "LDG.E R7, desc[UR4][R16.64] ;", "FADD R9, R4, R9 ;", "FADD R9, R5, R9 ;", "FADD R9, R6, R9 ;",
             "FADD R9, R7, R9 ;"]
    c = model._warp_cycles(batch, lat, loop=False)
    assert c == pytest.approx(3 + 33 + 0.5 * 1000 + 3 * 4, abs=1)
    chain = ["LDG.E R4, desc[UR4][R2.64] ;", "FADD R9, R4, R9 ;"] * 4
    c = model._warp_cycles(chain, lat, loop=False)
    assert c == pytest.approx(4 * (33 + 0.125 * 1000) + 4, abs=4)
    # a batch that surely misses (col walk: every row new) waits the full miss latency
    lat1 = dict(lat, miss_p=1.0)
    assert model._warp_cycles(batch, lat1, loop=False) == pytest.approx(3 + 1033 + 12, abs=1)


def test_shared_wavefronts_count_shuffles_and_thread_index_reads():
    """Nsight Compute counts a shuffle as a shared wavefront and one more per read of the
    thread index (``S2R SR_TID``): the naive softmax has no shared accesses and no shuffles
    and reads threadIdx.x once (one per warp), the naive GEMM's 2-D block reads .x and .y
    (two per warp: 1048576 for its 524288 warps at 4096^3), the warp rung's shuffle reductions
    add 10 per warp (max and sum, 5 butterfly steps each)."""
    naive = next(v for v in softmax.LADDER if v.name == "naive")
    p = softmax.Problem(rows=4096, cols=4096, dtype="float32")
    for L in model.estimate(naive, p, "h100-sxm").launches:
        assert L["smem_wavefronts"] == pytest.approx(L["warps"])
        assert L["smem_conflicts"] == pytest.approx(0.0)
    g = next(v for v in gemm.LADDER if v.name == "naive")
    L = model.estimate(g, gemm.Problem(m=96, n=64, k=40), "h100-sxm").launches[0]
    assert L["smem_wavefronts"] == pytest.approx(2 * L["warps"])
    warp = next(v for v in softmax.LADDER if v.name == "warp")
    L = model.estimate(warp, p, "h100-sxm").launches[0]
    # 10 shuffles and 1 per warp, plus the partials parked in shared memory and read back
    assert L["smem_wavefronts"] > 11 * L["warps"] and L["smem_conflicts"] >= 0


def test_scoreboard_register_pairs_and_vectors():
    # a 128-bit load writes R4..R7: a use of R7 waits for it
    body = ["LDS.128 R4, [R2] ;", "FADD R9, R7, R9 ;"]
    assert model._warp_cycles(body, _LAT, loop=False) >= 30
    # an address pair R2.64 is read as R2 and R3
    body = ["IMAD.WIDE R2, R0, 0x4, R8 ;", "LDG.E R4, desc[UR4][R2.64] ;"]
    assert model._warp_cycles(body, _LAT, loop=False) >= 1 + 4


def test_planning_for_a_target_device():
    from perfkit import backend

    before = backend.device()
    info = backend.DeviceInfo(name="target", simulated=False, compute_capability=(9, 0), sm_count=132)
    with backend.planning_for(info):
        assert backend.device().sm_count == 132
    assert backend.device() == before


def test_model_plans_what_a_gpu_runs():
    """A plan made for a target GPU (the model's) is the GPU's plan, not the simulator's: the
    layernorm backward's column reduction runs 32-thread blocks over at most 32 tiles in the
    simulator, 256-thread blocks over every tile on a GPU (the SASS the anatomy compiles)."""
    from perfkit import backend

    v = layernorm_bwd.LADDER[2]
    p = layernorm_bwd.Problem(rows=300, cols=4100, dtype="float32")
    col = lambda ls: [l for l in ls if l.name in ("lnb_col_partials", "lnb_sum_partials")]  # noqa: E731
    gpu = col(model._plan_launches(v, p, model.rates("h100-sxm")))
    assert gpu and all(l.threads_per_block == 256 for l in gpu) and gpu[0].grid[0] == -(-4100 // 32)
    if backend.is_simulator():
        here = col(model._plan_launches(v, p))
        assert here and all(l.threads_per_block == 32 for l in here) and here[0].grid[0] == 32


def test_stand_in_buffers_reshape_like_arrays():
    v = layernorm.LADDER[2]
    p = layernorm.Problem(rows=37, cols=129, dtype="float32")
    launches = model._plan_launches(v, p)
    sizes = [model._array_bytes(l.args)[2] for l in launches]
    assert sum(sizes) >= 2 * 37 * 129 * 4  # x in and y out at their real sizes, not 1-element stand-ins


def _history_ok():
    import subprocess

    from perfkit import history

    r = subprocess.run(["git", "cat-file", "-e", "7c7b2e0^{commit}"], cwd=history._repo_root(), capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _history_ok(), reason="commit 7c7b2e0 (the H100 records' code) is not in this clone's history")
def test_history_rebuilds_a_rung_as_recorded():
    from perfkit import history
    from perfkit.kernels.base import Variant

    v, mod = history.variant_at("7c7b2e0", "softmax", "multirow", {})
    assert v is not None, history.why_not("7c7b2e0")
    assert isinstance(v, Variant) and type(v).__module__.startswith("perfkit_at_7c7b2e0")
    p = mod.Problem(rows=4096, cols=1024, dtype="float32")
    e = model.estimate(v, p)
    _check(e)
    # the old rung's code differs from today's, and validate says which code it estimated
    assert type(v) is not type(softmax.LADDER[5])
    table, line, _ = model.validate("h100-sxm", ops=["softmax"], problems=["rows=4096 cols=1024 dtype=float32 axis=-1"])
    codes = set(table[table["kind"] == "rung"]["code"])
    assert any(c.startswith("at 7c7b2e0") for c in codes) and "today" in codes
    assert re.fullmatch(r"median abs error \d+% over \d+; worst ratio [\d.]+; within 2x: \d+/\d+", line)


def test_history_unknown_commit_says_why():
    from perfkit import history

    v, mod = history.variant_at("0" * 40, "softmax", "multirow", {})
    assert v is None and "not in this repository" in history.why_not("0" * 40)


def test_one_path_keeps_the_shorter_arm_of_an_if_else():
    body = [(0x00, "ISETP.GE.AND P0, PT, R1, R2, PT ;"),
            (0x10, "@P0 BRA 0x60 ;"),                      # if (!P0): the long edge path
            (0x20, "LDG.E.U16 R4, desc[UR4][R2.64] ;"),
            (0x30, "LDG.E.U16 R5, desc[UR4][R2.64+0x2] ;"),
            (0x40, "LDG.E.U16 R6, desc[UR4][R2.64+0x4] ;"),
            (0x50, "BRA 0x70 ;"),
            (0x60, "LDG.E.128 R4, desc[UR4][R2.64] ;"),    # else: one vector load
            (0x70, "HMMA.16816.F32 R8, R4, R6, R8 ;")]
    kept = [a for a, _ in model._one_path(body)]
    assert kept == [0x00, 0x10, 0x60, 0x70]
    # an arm that calls a routine (its body is elsewhere) is the longer one
    body2 = [(0x00, "@!P0 BRA 0x40 ;"), (0x10, "MOV R4, R2 ;"), (0x20, "CALL.REL.NOINC 0x200 ;"), (0x30, "BRA 0x80 ;"),
             (0x40, "I2F.U32.RP R5, R3 ;"), (0x50, "MUFU.RCP R5, R5 ;"), (0x60, "F2I.FTZ.U32.TRUNC R5, R5 ;"),
             (0x70, "IMAD R5, R5, R3, RZ ;"), (0x80, "FADD R1, R5, R1 ;")]
    kept2 = [a for a, _ in model._one_path(body2)]
    assert 0x20 not in kept2 and 0x50 in kept2
    # a plain forward skip (no else) keeps everything
    body3 = [(0x00, "@P0 BRA 0x30 ;"), (0x10, "STG.E desc[UR4][R2.64], R4 ;"), (0x20, "IADD3 R1, R1, 0x1, RZ ;"),
             (0x30, "EXIT ;")]
    assert len(model._one_path(body3)) == 4


def _fake_report(instrs):
    from types import SimpleNamespace

    from perfkit.anatomy import find_loops
    sass = "\n".join(f"        /*{a:04x}*/                   {t} ;" for a, t in instrs)
    return SimpleNamespace(sass=sass, loops=find_loops(sass))


def test_sweep_trips_nested_and_unswitched_loops():
    """A grid-stride loop over columns around a walk down the rows (layernorm_bwd's column
    reduction): the inner loop carries the bytes, the outer runs about once per warp, and the
    compiler's store-only copy of the outer loop for an empty inner range does not run."""
    from types import SimpleNamespace
    instrs = [(0x00, "ISETP.GE.AND P0, PT, R1, RZ, PT"),
              (0x10, "@P0 BRA 0x60"),
              (0x20, "STG.E desc[UR4][R2.64], RZ"),          # unswitched copy: rows <= 0
              (0x30, "IADD3 R2, R2, 0x4, RZ"),
              (0x40, "@P1 BRA 0x20"),
              (0x50, "EXIT"),
              (0x60, "MOV R5, RZ"),                           # outer: over columns
              (0x70, "LDG.E R6, desc[UR4][R8.64]"),          # inner: down the rows
              (0x80, "LDG.E R7, desc[UR4][R10.64]"),
              (0x90, "FFMA R5, R6, R7, R5"),
              (0xa0, "@P2 BRA 0x70"),
              (0xb0, "STG.E desc[UR4][R2.64], R5"),
              (0xc0, "@P3 BRA 0x60"),
              (0xd0, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    u, o, i = starts.index(0x20), starts.index(0x60), starts.index(0x70)
    assert rep.loops[i].parent == o
    warps = 128
    nbytes = 64e6
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=0.0, bytes=nbytes), launch_bytes=nbytes, dense=False,
                            warps=warps, threads_per_block=128)
    trips = dyn["trips"]
    assert trips[u] == 0.0 and "unswitched" in dyn["rules"][u]
    assert trips[o] == warps
    assert trips[i] == pytest.approx((nbytes - warps * 32 * 4) / (32 * 8))


def test_panel_reads_of_a_tiled_matrix_product():
    """DRAM reads of A and B panels per wave of resident blocks; the H100 Nsight Compute counts
    at 4096^3 fp32 with 128x128 tiles were 619 MB (one block per SM, rungs 05 and 08)."""
    from types import SimpleNamespace
    p = SimpleNamespace(m=4, n=4, k=4, dtype="float32")
    one = model._panel_reads(p, (2, 2), 1, 1)        # a block per wave: 2x4 + 4x2 floats each
    assert one["reads"] == 4 * 64 and one["waves"] == 4
    all_ = model._panel_reads(p, (2, 2), 1, 4)       # one wave: A and B once
    assert all_["reads"] == all_["compulsory"] == 2 * 16 * 4
    big = SimpleNamespace(m=4096, n=4096, k=4096, dtype="float32")
    assert model._panel_reads(big, (32, 32), 1, 132)["reads"] == pytest.approx(618.65984e6)
    assert model._panel_reads(big, (32, 32), 2, 132)["reads"] == pytest.approx(341.835776e6)
    assert model._panel_reads(big, (1024,), 1, 132) is None          # a 1-D grid is not a tiling
    assert model._panel_reads(big, (8192, 2), 1, 132) is None        # more blocks than columns
    assert model._panel_reads(SimpleNamespace(rows=4, cols=4), (2, 2), 1, 1) is None


def test_arithmetic_tail_loop_runs_once_per_warp():
    """A k-loop over full tiles (4 FFMA per iteration) and its checked tail (1 FFMA): the main
    loop carries the FLOPs, the tail runs about once per warp."""
    from types import SimpleNamespace
    instrs = [(0x00, "FFMA R1, R2, R3, R1"), (0x10, "FFMA R4, R2, R3, R4"), (0x20, "FFMA R5, R2, R3, R5"),
              (0x30, "FFMA R6, R2, R3, R6"), (0x40, "@P0 BRA 0x0"),
              (0x50, "FFMA R1, R2, R3, R1"), (0x60, "@P1 BRA 0x50"), (0x70, "EXIT")]
    rep = _fake_report(instrs)
    warps = 64
    flops = 2.0 * 32 * 4 * 1000 * warps  # 1000 main iterations per warp
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=flops, bytes=1.0), launch_bytes=0.0, dense=True,
                            warps=warps, threads_per_block=128)
    main, tail = dyn["trips"]
    assert tail == warps and "tail" in dyn["rules"][1]
    assert main == pytest.approx((flops / 64 - warps) / 4)


def test_a_loop_around_the_k_loop_runs_once_per_output_tile():
    """A persistent GEMM's tile loop (rung 23): its own body holds the k loop's first step, peeled
    to start the accumulators from zero (HGMMA ..., RZ), and the epilogue's stores; the k loop
    inside it the rest.  The tile loop runs once per tile of the accumulators a warp holds
    (outputs / (64 x 256 / 4) warp-iterations), the k loop the FLOPs left: each used to get the
    FLOPs / (work of both) trips, the tile loop ~21x too many at 4096^3 (its STS and warp
    instructions 2.25x Nsight Compute's)."""
    from types import SimpleNamespace

    from perfkit.kernels import gemm
    instrs = [(0x00, "MOV R2, RZ"),                                            # tile loop
              (0x10, "HGMMA.64x256x16.F32 R24, gdesc[UR4].tnspB, RZ, !UPT"),   # the first k step
              (0x20, "HGMMA.64x256x16.F32 R24, gdesc[UR8].tnspB, R24"),        # k loop, two steps
              (0x30, "HGMMA.64x256x16.F32 R24, gdesc[UR8].tnspB, R24"),
              (0x40, "@P0 BRA 0x20"),
              (0x50, "STS [R3], R24"),                                          # the epilogue
              (0x60, "STS [R3+0x4], R25"),
              (0x70, "@P1 BRA 0x00"),
              (0x80, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    tile, k = starts.index(0x00), starts.index(0x20)
    assert rep.loops[k].parent == tile
    p = gemm.Problem(m=512, n=512, k=1024, dtype="float16")
    dyn = model.dynamic_mix(rep, p, launch_bytes=0.0, dense=True, warps=16, threads_per_block=384)
    tiles = 512 * 512 / (64 * 256 / 4)  # 64 warp-iterations, each 1024 / 16 k steps
    assert dyn["trips"][tile] == pytest.approx(tiles)
    assert dyn["trips"][k] == pytest.approx(tiles * (1024 // 16 - 1) / 2)
    assert dyn["counts"]["sts"][4] == pytest.approx(2 * tiles)
    # mma.sync: a warp's 16 x 8 accumulator each distinct destination
    two = model.pipe_counts(["HMMA.16816.F32 R8, R4, R6, R8 ;", "HMMA.16816.F32 R12, R4, R6, R12 ;",
                             "HMMA.16816.F32 R8, R5, R7, R8 ;"])
    assert two["mma_acc"] == 2 * 16 * 8
    # a problem that names no outputs keeps the old rule
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=p.flops, bytes=1.0), launch_bytes=0.0, dense=True,
                            warps=16, threads_per_block=384)
    assert dyn["trips"][tile] == dyn["trips"][k]


def test_code_only_thread_0_runs_counts_in_the_warp_that_holds_it():
    """``if t == 0:`` without an else (``ISETP.NE.AND P1, PT, R0, RZ`` on SR_TID.X, ``@P1 BRA``
    past the block, or folded into another test: ``if t == 0 and kt + 2 < n_k``) is issued by
    one warp of a 1-D block; the ELECT waterfall around a TMA copy inside it runs once per entry
    (GEMM rung 21 ``tma``: thread 0 fills a stage in the k loop's body).  A conditional EXIT of
    every other thread (rung 22's producer) leaves thread 0 alone up to the next EXIT."""
    from types import SimpleNamespace

    from perfkit.model.branches import one_thread_arms
    instrs = [(0x00, "S2R R0, SR_TID.X"),
              (0x10, "ISETP.NE.AND P1, PT, R0, RZ, PT"),
              (0x20, "@P1 BRA 0x50"),                            # if t == 0: (straight)
              (0x30, "SYNCS.EXCH.64 URZ, [UR4], UR6"),
              (0x40, "FENCE.VIEW.ASYNC.S"),
              (0x50, "ISETP.GE.OR P0, PT, R5, R6, P1"),          # k loop: if t == 0 and kt < n:
              (0x60, "@P0 BRA 0xc0"),
              (0x70, "PLOP3.LUT P2, PT, PT, PT, PT, 0x80, 0x0"),
              (0x80, "@P2 ELECT P3, URZ, PT"),                   # the copy's ELECT waterfall
              (0x90, "UTMALDG.2D [UR16], [UR30]"),
              (0xa0, "@P3 PLOP3.LUT P2, PT, P3, PT, PT, 0x8, 0x0"),
              (0xb0, "@P2 BRA.U.ANY 0x80"),
              (0xc0, "HMMA.16816.F32 R8, R4, R6, R8"),
              (0xd0, "IADD3 R5, R5, 0x1, RZ"),
              (0xe0, "@P4 BRA 0x50"),
              (0xf0, "EXIT")]
    rep = _fake_report(instrs)
    from perfkit.anatomy import sass_lines
    assert one_thread_arms(sass_lines(rep.sass)) == [(0x21, 0x50), (0x61, 0xc0)]
    warps, k_trips = 64, 640  # 8 blocks of 256 threads; 10 k steps a warp
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=4096.0 * k_trips, bytes=1.0), launch_bytes=0.0,
                            dense=True, warps=warps, threads_per_block=256)
    starts = [lp.start for lp in rep.loops]
    k, elect = starts.index(0x50), starts.index(0x80)
    assert dyn["trips"][k] == pytest.approx(k_trips)
    assert dyn["trips"][elect] == pytest.approx(k_trips / 8)  # once per entry, in thread 0's warp
    # straight 4 a warp + its arm 2 a block; the k loop 5 a warp-iteration + 1 in its arm; ELECT 4
    want = 4 * warps + 2 * warps / 8 + 5 * k_trips + 1 * k_trips / 8 + 4 * k_trips / 8
    assert dyn["counts"]["instr"] == pytest.approx(want)
    # a test against zero of a loaded value, or of the thread index against 128, is no such arm
    other = [(0x00, "LDG.E R0, desc[UR4][R2.64]"), (0x10, "ISETP.NE.AND P1, PT, R0, RZ, PT"),
             (0x20, "@P1 BRA 0x40"), (0x30, "IADD3 R5, R5, 0x1, RZ"), (0x40, "EXIT")]
    assert one_thread_arms(other) == []
    wide = [(0x00, "S2R R0, SR_TID.X"), (0x10, "ISETP.GT.U32.AND P1, PT, R0, 0x7f, PT"),
            (0x20, "@P1 BRA 0x40"), (0x30, "IADD3 R5, R5, 0x1, RZ"), (0x40, "EXIT")]
    assert one_thread_arms(wide) == []
    # ``if t != 0: return`` past a warp-role split: the predicate is read back over the other
    # role's arm (it ends in EXIT, so it cannot fall through to the producer's code)
    ws = [(0x00, "S2R R0, SR_TID.X"), (0x10, "ISETP.NE.AND P1, PT, R0, RZ, PT"),
          (0x20, "@!P0 BRA 0x60"),
          (0x30, "ISETP.GE.AND P1, PT, R7, R8, PT"),             # the consumers' own use of P1
          (0x40, "IADD3 R5, R5, 0x1, RZ"), (0x50, "EXIT"),
          (0x60, "@P1 EXIT"), (0x70, "UTMALDG.2D [UR16], [UR30]"), (0x80, "EXIT")]
    assert one_thread_arms(ws) == [(0x61, 0x81)]


def test_a_loop_counted_from_a_kernel_scalar_runs_as_the_scalar_says():
    """``for r in range(R)`` unrolled x4 (a counter ``R - (R & 3)`` from the constant bank, step
    -4, behind a guard ``R >= 4``): rule ``scalar count`` (:func:`perfkit.model.trips.rule_scalar_count`)
    reads R from the launch's arguments in Numba's parameter layout and runs the counter:
    floor(R / 4) per entry, 0 when R < 4, where the fallback gave log2(threads) a warp.  A loop
    whose exit tests the thread index keeps the fallback."""
    from types import SimpleNamespace

    import numpy as np

    from perfkit.model.scalars import param_bank
    # an array of one dimension (7 fields of 8 bytes from 0x210 on sm_90), then R (int64) at 0x248
    instrs = [(0x00, "S2R R0, SR_TID.X"),
              (0x10, "ULDC.64 UR4, c[0x0][0x248]"),
              (0x20, "UISETP.GT.U32.AND UP0, UPT, UR4, URZ, UPT"),
              (0x30, "UISETP.GT.AND.EX UP0, UPT, UR5, URZ, UPT, UP0"),
              (0x40, "USEL UR6, UR4, URZ, UP0"),                  # max(R, 0), 64-bit
              (0x50, "USEL UR7, UR5, URZ, UP0"),
              (0x60, "IMAD.U32 R6, RZ, RZ, UR6"),
              (0x70, "IMAD.U32 R7, RZ, RZ, UR7"),
              (0x80, "ISETP.GE.U32.AND P0, PT, R6, 0x4, PT"),
              (0x90, "ISETP.GE.AND.EX P0, PT, R7, RZ, PT, P0"),
              (0xa0, "@!P0 BRA 0x160"),                           # the x4 loop's guard
              (0xb0, "LOP3.LUT R8, R6, 0x3, RZ, 0xc0, !PT"),
              (0xc0, "IADD3 R9, P1, -R8, R6, RZ"),                # counter R - (R & 3)
              (0xd0, "IADD3.X R10, R7, -0x1, RZ, P1, !PT"),
              (0xe0, "ISETP.GE.AND P2, PT, R0, 0x7, PT"),         # the body: integer tests only
              (0xf0, "@P2 LOP3.LUT R11, R11, 0x1, RZ, 0xfc, !PT"),
              (0x100, "IADD3 R9, P3, R9, -0x4, RZ"),
              (0x110, "IADD3.X R10, R10, -0x1, RZ, P3, !PT"),
              (0x120, "ISETP.NE.U32.AND P4, PT, R9, RZ, PT"),
              (0x130, "ISETP.NE.AND.EX P4, PT, R10, RZ, PT, P4"),
              (0x140, "@P4 BRA 0xe0"),
              (0x150, "NOP"),
              (0x160, "IADD3 R12, R12, 0x1, RZ"),                 # a loop up to the thread index
              (0x170, "ISETP.NE.AND P5, PT, R12, R0, PT"),
              (0x180, "@P5 BRA 0x160"),
              (0x190, "EXIT")]
    rep = _fake_report(instrs)
    rep.signature, rep.cc = ["array(float32, 1d, C)", "int64"], (9, 0)
    starts = [lp.start for lp in rep.loops]
    x4, tid = starts.index(0xe0), starts.index(0x160)
    buf = SimpleNamespace(shape=(1000,), dtype=np.dtype("float32"))
    warps = 64
    for r, per_warp in ((3, 0), (4, 1), (7, 1), (10, 2), (16, 4), (0, 0), (-5, 0)):
        dyn = model.dynamic_mix(rep, SimpleNamespace(flops=0.0, bytes=1.0), launch_bytes=0.0, dense=False,
                                warps=warps, threads_per_block=128, args=(buf, r), cc=(9, 0))
        assert dyn["trips"][x4] == pytest.approx(per_warp * warps), r
        assert dyn["rules"][x4].startswith("scalar count")
        assert dyn["rules"][tid].startswith("other:")  # declined: the thread index
    # without the launch's arguments: the fallback, as before
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=0.0, bytes=1.0), launch_bytes=0.0, dense=False,
                            warps=warps, threads_per_block=128)
    assert dyn["trips"][x4] == pytest.approx(7 * warps)
    # the layout, checked against real SASS: conv tc_ldmatrix's 16 arguments (arrays of 2, 2, 1
    # and 2 dimensions, eleven int64, a bool) put R at c[0x0][0x358] on sm_90, 0x2a8 on sm_80
    sig = ["array(float16, 2d, C)"] * 2 + ["array(float16, 1d, C)", "array(float16, 2d, C)"] + ["int64"] * 11 + ["bool"]
    arrs = [SimpleNamespace(shape=s, dtype=np.dtype("float16")) for s in ((8, 4), (4, 9), (32,), (8, 4))]
    args = arrs + [1, 2, 3, 4, 5, 6, 7, 333, 444, 1, 1, True]
    for cc, at in (((9, 0), 0x358), ((8, 0), 0x2a8)):
        bank = param_bank(sig, args, cc)
        assert sum(bank[at + b] << (8 * b) for b in range(8)) == 333
        assert sum(bank[at + 8 + b] << (8 * b) for b in range(8)) == 444


def test_conv_tap_mask_loops_run_floor_r_over_4_per_entry():
    """The real case: the conv tensor-core rungs' tap masks (``for r in range(R)``, ``for s in
    range(S)``, unrolled x4 by ptxas from the int64 kernel scalars): 0 trips at R = S = 3 (the
    fallback gave 7 a warp: tc_ldmatrix's warp instructions 1.56 of Nsight Compute on the H100),
    floor(R / 4) per entry above."""
    from perfkit.anatomy import sass_lines
    from perfkit.kernels import conv
    from perfkit.model.plans import inspect_launch, plan_launches
    from perfkit.model.scalars import loop_count, param_bank

    p = conv.Problem(n=32, c=128, h=28, w=28, k=128, r=3, s=3, stride=1, pad=1, dtype="float16", layout="NHWC")
    v = next(x for x in conv.LADDER if x.label.endswith("tc_ldmatrix") or getattr(x, "name", "") == "tc_ldmatrix")
    rep = inspect_launch(v, p, (9, 0), 0)
    lines = sass_lines(rep.sass)
    args = list(plan_launches(v, p)[0].args)
    r_at = rep.signature.index("int64") + 7  # M, K, C, H, W, P, Q, R
    taps = None
    for r, want in ((3, 0), (5, 1), (8, 2), (11, 2)):
        args[r_at] = args[r_at + 1] = r
        bank = param_bank(rep.signature, args, (9, 0))
        got = [loop_count(lines, rep.loops, i, bank) for i in range(len(rep.loops))]
        if taps is None:
            taps = [i for i, g in enumerate(got) if g is not None]
            assert len(taps) >= 2
        assert [got[i][0] for i in taps] == [want] * len(taps), r


def test_one_path_drops_the_zero_divisor_specialisation():
    """The compiler's copy of a loop for a zero divisor (i // nb with nb == 0) is not the path
    taken, though it is the shorter and the other arm calls the slow division routine."""
    body = [(0x00, "ISETP.NE.U32.AND P1, PT, R19, RZ, PT ;"),
            (0x10, "ISETP.NE.AND.EX P1, PT, R17, RZ, PT, P1 ;"),
            (0x20, "@P1 BRA 0x60 ;"),
            (0x30, "LDG.E R4, desc[UR4][R2.64] ;"),             # nb == 0: no division
            (0x40, "FADD R1, R4, R1 ;"),
            (0x50, "BRA 0xa0 ;"),
            (0x60, "CALL.REL.NOINC 0x200 ;"),                  # nb != 0: divide, then load
            (0x70, "LDG.E R4, desc[UR4][R2.64] ;"),
            (0x80, "FADD R1, R4, R1 ;"),
            (0x90, "NOP ;"),
            (0xa0, "EXIT ;")]
    kept = [a for a, _ in model._one_path(body)]
    assert 0x30 not in kept and 0x60 in kept and 0x70 in kept
    # the same test with the arms swapped (@!P1: the branch is the zero case), ending in EXIT
    body2 = [(0x00, "ISETP.NE.U32.AND P1, PT, RZ, UR4, PT ;"), (0x10, "@!P1 BRA 0x40 ;"),
             (0x20, "STG.E desc[UR4][R2.64], R5 ;"), (0x30, "EXIT ;"),
             (0x40, "STG.E desc[UR4][R2.64], RZ ;"), (0x50, "EXIT ;")]
    kept2 = [a for a, _ in model._one_path(body2)]
    assert kept2 == [0x00, 0x10, 0x20, 0x30]
    # a comparison of two registers is not a zero test
    assert model._zero_guard([(0x0, "ISETP.NE.AND P0, PT, R2, R3, PT ;")], 0x10, "@P0") == 0
    # sm_80 compares a 64-bit kernel parameter in the constant bank (the implicit-GEMM conv's
    # channel count C, before its j // C, j % C loop): taken for zero, the branch target is the
    # copy for C == 0; a parameter against a register is not a zero test
    cb = [(0x00, "ISETP.NE.U32.AND P0, PT, RZ, c[0x0][0x280], PT ;"),
          (0x10, "ISETP.NE.AND.EX P0, PT, RZ, c[0x0][0x284], PT, P0 ;")]
    assert model._zero_guard(cb, 0x20, "@!P0") == -1 and model._zero_guard(cb, 0x20, "@P0") == 1
    assert model._zero_guard([(0x0, "ISETP.NE.U32.AND P1, PT, R5, c[0x0][0x2b8], PT ;")], 0x10, "@P1") == 0
    # sm_100: the uniform datapath tests the parameter and branches on a uniform predicate; the
    # zero case falls through into its own loop, which ends in an unconditional back edge (its
    # exit jumps past the other arm)
    body3 = [(0x00, "UISETP.NE.U32.AND UP0, UPT, UR14, URZ, UPT ;"),
             (0x10, "UISETP.NE.U32.AND.EX UP0, UPT, UR15, URZ, UPT, UP0 ;"),
             (0x20, "BRA.U UP0, 0x80 ;"),
             (0x30, "LDG.E R4, desc[UR4][R2.64] ;"),           # C == 0: a loop with no division
             (0x40, "FFMA R1, R4, R5, R1 ;"),
             (0x50, "@P2 BRA 0xd0 ;"),
             (0x60, "NOP ;"),
             (0x70, "BRA 0x30 ;"),
             (0x80, "CALL.REL.NOINC 0x200 ;"),                 # C != 0: divide, load, FMA
             (0x90, "LDG.E R4, desc[UR4][R2.64] ;"),
             (0xa0, "FFMA R1, R4, R5, R1 ;"),
             (0xb0, "@P3 BRA 0x80 ;"),
             (0xc0, "NOP ;"),
             (0xd0, "EXIT ;")]
    kept3 = [a for a, _ in model._one_path(body3)]
    assert 0x30 not in kept3 and 0x40 not in kept3 and 0x90 in kept3 and 0xa0 in kept3
    # sm_89 copies the uniform test into a predicate register (PLOP3.LUT P3 = UP0) before the
    # branch: the zero test is followed through the copy (the tensor-core GEMM's k-tile count:
    # its short arm, for no k tiles, once made the estimate drop the whole k loop on the L40S)
    cp = [(0x00, "UISETP.NE.U32.AND UP0, UPT, UR6, URZ, UPT ;"),
          (0x10, "UISETP.NE.AND.EX UP0, UPT, UR4, URZ, UPT, UP0 ;"),
          (0x20, "PLOP3.LUT P3, PT, PT, PT, UP0, 0x80, 0x0 ;"),
          (0x30, "PLOP3.LUT P4, PT, PT, PT, !UP0, 0x80, 0x0 ;")]
    assert model._zero_guard(cp, 0x40, "@P3") == 1 and model._zero_guard(cp, 0x40, "@!P3") == -1
    assert model._zero_guard(cp, 0x40, "@P4") == -1
    # a size compared with zero by order (sm_80's tc_vector GEMM: 0 < k tiles): nonempty is the
    # taken case; the same order test of a per-thread register (a sign, not a size) is not
    assert model._zero_guard([(0x0, "ISETP.LT.AND P1, PT, RZ, UR11, PT ;")], 0x10, "@P1") == 1
    assert model._zero_guard([(0x0, "ISETP.GE.AND P1, PT, RZ, UR11, PT ;")], 0x10, "@P1") == -1
    assert model._zero_guard([(0x0, "ISETP.GT.U32.AND P0, PT, UR4, RZ, PT ;"),
                              (0x10, "ISETP.GT.AND.EX P0, PT, UR5, RZ, PT, P0 ;")], 0x20, "@!P0") == -1
    assert model._zero_guard([(0x0, "ISETP.GE.AND P3, PT, R6, RZ, PT ;")], 0x10, "@P3") == 0


def test_conv_estimate_takes_the_same_path_on_every_architecture():
    """The implicit-GEMM conv's k loop decodes j with j // C and j % C; the compiler keeps a
    copy of the loop for C == 0 (no division, unrolled 4x). Its sm_80 SASS tests C in the
    constant bank, its sm_90 SASS in a uniform register, its sm_100 SASS with a uniform
    predicate: all must drop that copy, so the warp instructions of one launch agree across
    GPUs (they once differed 6.6x)."""
    from perfkit.kernels import conv

    p = conv.Problem(n=3, c=17, h=13, w=11, k=19, r=3, s=3, stride=2, pad=1, dtype="float32", layout="NHWC")
    v = [x for x in conv.LADDER if x.rung == 4][0]
    counts = {g: model.estimate(v, p, g, banks=False).launches[0] for g in ("h100-sxm", "a100-sxm-80gb", "b200")}
    a, h, b = counts["a100-sxm-80gb"], counts["h100-sxm"], counts["b200"]
    assert a["warp_instructions"] == pytest.approx(h["warp_instructions"], rel=0.1)
    assert 0.6 * h["warp_instructions"] < b["warp_instructions"] < 1.1 * h["warp_instructions"]  # sm_100: a shorter loop
    # one FFMA per k step per output: 126 pixels x 19 channels x 153 steps (C R S)
    assert a["ffma"] == pytest.approx(126 * 19 * 153, rel=0.01)


def test_l2_requests_after_l1_and_the_partition_fabric():
    """The rungs' L2 bytes are what misses L1 (re-sweeps of a row that fits in L1, a naive
    GEMM's block-shared rows and columns, scattered one-sector stores), and L2 tag traffic
    adds the far-partition first touches on an H100 (Nsight Compute's lts__t_bytes)."""
    from perfkit.kernels.norm import _common as C

    e16 = 4096 * 4096 * 4.0
    assert C.sweep_l2(4096, 4096, "float32", 3) == e16  # 7 rows of 16 KB per SM fit in L1
    assert C.sweep_l2(4096, 16384, "float32", 3) == 3 * 4 * e16  # 7 x 64 KB do not
    assert C.sweep_dram(4096, 4096, "float32", 3) == e16
    assert C.scattered_store_l2(100.0, "float32") == 800.0
    assert C.scattered_store_l2(100.0, "float16") == 1600.0
    p = softmax.Problem(rows=4096, cols=4096, dtype="float32")
    fused = next(v for v in softmax.LADDER if v.name == "fused")
    t = fused.traffic(p)
    assert t.l2_bytes == pytest.approx(2 * e16) and t.l1_bytes == pytest.approx(4 * e16)
    L = model.estimate(fused, p, "h100-sxm", banks=False).launches[0]
    assert L["l2_tag_bytes"] == pytest.approx(1.5 * L["l2_bytes"])
    L = model.estimate(fused, p, "a100-sxm-80gb", banks=False).launches[0]
    assert L["l2_tag_bytes"] == pytest.approx(L["l2_bytes"])  # fabric not measured there
    # naive GEMM: 32x32 blocks fetch 32 rows of A and 32 columns of B per k through L1;
    # Nsight Compute on the H100 at 4096^3 counted 22.2 GB (naive) and 19.1 GB (coalesced)
    g = gemm.Problem(m=4096, n=4096, k=4096, dtype="float32")
    for name, ncu in (("naive", 22.23e9), ("coalesced", 19.06e9)):
        v = next(x for x in gemm.LADDER if x.name == name)
        tag = sum(q["l2_tag_bytes"] for q in model.estimate(v, g, "h100-sxm", banks=False).launches)
        assert 0.75 < tag / ncu < 1.25, (name, tag / ncu)
    # an odd shape keeps the formula honest: ceil over partial tiles
    from perfkit.kernels.gemm import _common as gemm_common

    assert gemm_common._l1_tiled_l2(33, 65, 7, 32) == (33 * 7 * 3 + 7 * 65 * 2) * 4.0


def test_sectors_blocks_share_cross_the_fabric_once():
    """NHWC batchnorm (a block per channel, a float of each 32-byte sector, seven other blocks
    the rest): the simulated block fills 1/8 of the sectors it touches, NCHW's blocks own
    theirs; the far-partition fabric is counted on the requests times that fill, as Nsight
    Compute's 3457 MB of L2 for 3289 MB of requests at 32x256x56x56 NHWC (1.5x: 4933)."""
    from perfkit import banks

    fused = next(v for v in batchnorm.LADDER if v.name == "fused")
    fills = {}
    for layout, h, w in (("NHWC", 5, 7), ("NCHW", 8, 8)):  # NCHW: a channel's 64-float runs fill their sectors
        p = batchnorm.Problem(n=3, c=40, h=h, w=w, layout=layout)
        g = banks.count(fused, p).global_launches[0]
        fills[layout] = g["sector_fill"]
        L = model.estimate(fused, p, "h100-sxm").launches[0]
        assert L["l2_tag_bytes"] == pytest.approx(L["l2_bytes"] * (1 + 0.5 * g["sector_fill"]))
    assert fills["NHWC"] == pytest.approx(1 / 8, rel=0.1)
    assert fills["NCHW"] > 0.9


def test_outer_walk_holding_an_unrolled_inner_loops_remainder():
    """Batchnorm's naive rung walks x viewed as (A, C, B) with two loops, the inner one over B
    unrolled 4 times and its 1-3 leftover elements peeled into the outer body, each branched
    to the same exit.  NCHW: B = H*W, so at 5x7 each thread runs N outer trips of 8 inner
    ones and all 3 leftovers; NHWC: B = 1, the inner loop never runs and each element costs
    an outer trip with one leftover.  At 32x256x56x56 NHWC Nsight Compute counted 44.96M,
    44.16M and 78.68M warp instructions for the three kernels (7c7b2e0's kernels, unchanged
    since); sizing the inner loop from the bytes alone gave 0.39 of that."""
    body = [(0x10, "@!P0 BRA 0x60 ;"), (0x20, "LDG.E R1, desc[UR4][R2.64] ;"), (0x30, "@!P1 BRA 0x60 ;"),
            (0x40, "LDG.E R3, desc[UR4][R2.64+0x4] ;"), (0x50, "@P2 LDG.E R4, desc[UR4][R2.64+0x8] ;"),
            (0x60, "IADD3 R5, R5, 0x1, RZ ;")]
    assert model._remainder_blocks(body) == [(0x10, 0x30, 1), (0x30, 0x60, 2)]
    four = {"gw": {("load", 4): 4, ("store", 4): 4}}
    assert model._remainder_factor(four, {"gw": {("load", 4): 3, ("store", 4): 3}}) == 4
    assert model._remainder_factor(four, {"gw": {("load", 4): 3}}) is None
    naive = next(v for v in batchnorm.LADDER if v.name == "naive")
    for layout, outer, inner in (("NHWC", 3 * 5 * 7, 0), ("NCHW", 3, 3 * 8)):
        p = batchnorm.Problem(n=3, c=64, h=5, w=7, layout=layout)  # 64 channels: two full warps
        L = model.estimate(naive, p, "h100-sxm").launches[0]
        assert L["kernel"] == "bn_chan_mean" and L["warps"] == 2
        assert L["trips"][0] == pytest.approx(2 * outer, rel=0.05), layout
        assert L["trips"][1] == pytest.approx(2 * inner, rel=0.05, abs=1e-9), layout
    p = batchnorm.Problem(n=32, c=256, h=56, w=56, layout="NHWC")
    got = [q["warp_instructions"] for q in model.estimate(naive, p, "h100-sxm", banks=False).launches]
    for g, ncu in zip(got, (44.96e6, 44.16e6, 78.68e6)):
        assert 0.95 < g / ncu < 1.05


def test_partly_written_sectors_are_completed_from_dram():
    """NHWC batchnorm's blocks each write a float of every 32-byte sector of y, seven other
    blocks the rest: over more than L2 keeps, a sector leaves L2 before all eight parts arrive
    and L2 completes it from DRAM (Nsight Compute at 32x256x56x56: 72 MB read and 45 MB
    written beyond x and y).  The model reads the unfilled 7/8 of y; NCHW's blocks fill their
    sectors, and a small NHWC y stays in L2."""
    fused = next(v for v in batchnorm.LADDER if v.name == "fused")
    extra = {}
    for layout, n in (("NHWC", 32), ("NCHW", 32), ("NHWC", 4)):
        p = batchnorm.Problem(n=n, c=256, h=36, w=36, layout=layout)
        L = model.estimate(fused, p, "h100-sxm").launches[0]
        m = re.search(r"\+ (\d+) MB completing partly written sectors \(store fill ([\d.]+)\)", L["dram_source"])
        extra[(layout, n)] = (float(m.group(1)) * 1e6, float(m.group(2))) if m else None
    y = 32 * 256 * 36 * 36 * 4.0
    mb, fill = extra[("NHWC", 32)]
    assert fill == pytest.approx(1 / 8, abs=0.01) and mb == pytest.approx(y * 7 / 8, rel=0.05)
    assert extra[("NCHW", 32)] is None and extra[("NHWC", 4)] is None


def test_levels_and_repeat_lines():
    import pandas as pd

    levels = pd.DataFrame([
        {"op": "a", "rung": "01", "level": "dram_bytes", "ncu": 100.0, "model": 120.0, "ratio": 1.2},
        {"op": "a", "rung": "02", "level": "dram_bytes", "ncu": 100.0, "model": 130.0, "ratio": 1.3},
        {"op": "a", "rung": "01", "level": "shared_wavefronts", "ncu": 0.0, "model": 0.0, "ratio": float("nan")},
    ])
    assert model.levels_line(levels) == ("per-level within 25% of Nsight Compute: dram_bytes 1/2, "
                                         "shared_wavefronts 1/1")
    table = pd.DataFrame([
        {"op": "s", "problem": "p", "rung": "02 fused", "code": "today", "kind": "rung", "measured_s": 1.0},
        {"op": "s", "problem": "p", "rung": "02 fused", "code": "today", "kind": "rung", "measured_s": 1.5},
        {"op": "s", "problem": "p", "rung": "03 warp", "code": "today", "kind": "rung", "measured_s": 2.0},
        {"op": "s", "problem": "p", "rung": "00 oracle", "code": "today", "kind": "oracle/peer", "measured_s": 1.0},
        {"op": "s", "problem": "p", "rung": "00 oracle", "code": "today", "kind": "oracle/peer", "measured_s": 9.0},
    ])
    assert model.repeat_line(table) == "repeated records: median spread 50% over 1 pairs (max 50%)"
    assert model.repeat_line(table.iloc[2:]) == "repeated records: none"


def test_rereads_miss_l2_when_the_resident_rows_do_not_fit(monkeypatch):
    """A second sweep over a row hits L2 while the rows the resident blocks hold fit in what
    L2 keeps for re-reads: the rows of 16 KB the resident blocks hold (13 MB of x) fit in 32 MB,
    and the fused softmax reads x from DRAM once; with an L2 of 10 MB keeping 5, all three sweeps
    go to DRAM; with the 50 MB L2 keeping 5, the re-reads miss in proportion: (13 - 5) / (50 - 5)."""
    fused = next(v for v in softmax.LADDER if v.name == "fused")
    p = softmax.Problem(rows=4096, cols=4096, dtype="float32")
    e = 4096 * 4096 * 4.0
    L = model.estimate(fused, p, "h100-sxm").launches[0]
    assert not L["dram_source"].startswith("re-reads")
    assert L["dram_bytes"] == pytest.approx(2 * e, rel=0.02)
    real = model.rates

    def small_l2(size):
        def rates(gpu="h100-sxm"):
            r = real(gpu)
            r.put("l2_reuse_fraction", 5e6 / size, "test")
            r.put("l2_size_bytes", size, "test")
            return r
        return rates

    monkeypatch.setattr(model, "rates", small_l2(10e6))
    L = model.estimate(fused, p, "h100-sxm").launches[0]
    assert L["dram_source"].startswith("re-reads miss L2"), L["dram_source"]
    assert L["dram_bytes"] == pytest.approx(4 * e, rel=0.02)  # x three times, y once
    monkeypatch.setattr(model, "rates", small_l2(50e6))
    L = model.estimate(fused, p, "h100-sxm").launches[0]
    m = re.search(r"work on (\d+) MB at once.*; ([0-9.]+) of the simulated", L["dram_source"])
    assert m, L["dram_source"]
    frac = (float(m.group(1)) * 1e6 - 5e6) / (50e6 - 5e6)
    assert 0 < frac < 1 and float(m.group(2)) == pytest.approx(frac, abs=0.02)
    assert L["dram_bytes"] == pytest.approx(2 * e + frac * 2 * e, rel=0.03), L["dram_source"]


def test_writes_still_dirty_in_l2_at_a_launchs_end_escape_nsight_computes_count():
    """Write-back L2 (memory.dirty_at_end): what a launch writes stays in L2, dirty, until other
    traffic evicts it; at its end L2 holds its latest traffic, ``l2_reuse_fraction`` of L2 kept,
    written bytes in their share of what crossed DRAM.  So a launch whose traffic fits keeps all
    its writes, a streaming one a share, and one that writes nothing none."""
    r = model.rates("h100-sxm")
    keep = r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]
    assert model.dirty_at_end(12.8e6, 26e6, r) == pytest.approx(12.8e6)          # conv at the R50 layer
    assert model.dirty_at_end(67e6, 134e6, r) == pytest.approx(keep / 2)          # a 4096^2 row norm
    assert model.dirty_at_end(67e6, 409e6, r) == pytest.approx(keep * 67 / 409)   # SIMT GEMM's C
    assert model.dirty_at_end(0.0, 134e6, r) == 0.0
    assert model.dirty_at_end(67e6, 30e6, r) == pytest.approx(30e6)               # never more than crossed
    # in an estimate: the count compared with Nsight Compute's leaves the kept writes out; the
    # DRAM leg of the timed window does not (its flush's dirty lines are written back instead)
    conv_rung = next(v for v in conv.LADDER if v.name == "igemm_regblock")
    p = conv.Problem(n=32, c=128, h=28, w=28, k=128, r=3, s=3, stride=1, pad=1, layout="NHWC")
    L = model.estimate(conv_rung, p, "h100-sxm", banks=False).launches[0]
    y = 32 * 128 * 28 * 28 * 4.0
    assert L["dram_bytes"] - L["dram_bytes_profiled"] == pytest.approx(y, rel=0.01)
    assert L["legs"]["dram"] == pytest.approx(L["dram_bytes"] / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"]))


def test_nsight_compute_sees_writes_kept_in_l2():
    """The rule's evidence beyond any timing: Nsight Compute's DRAM write bytes, every table in
    data/ncu (both GPUs).  Every one-kernel convolution at the R50 layer (12.8 MB out in float32,
    6.4 MB in float16; its traffic fits in L2) writes at most 0.54 of its output to DRAM in its
    time, the median 0.06; every launch that writes a 4096^2 row norm's or GEMM's output
    (67 MB float32) writes 0.85-1.1 of what the rule leaves, written - keep x written / (read +
    written), against 1.0-1.6 of it if nothing stayed in L2 (the rule keeps 10-20% less than
    the counters show: 16 MB of a norm's y on the H100, 17-18 counted)."""
    import pandas as pd

    conv_share, fits = [], 0
    for table in sorted((Path(__file__).parent.parent / "data" / "ncu").glob("*.csv")):
        r = model.rates("h200" if table.stem.startswith("h200") else "h100-sxm")
        keep = r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]
        t = pd.read_csv(table)
        launches = t.groupby(["op", "problem", "rung"])["kernel"].transform("size")
        for (_, row), n in zip(t.iterrows(), launches):
            kv = dict(tok.split("=", 1) for tok in str(row["problem"]).split())
            size = 4 if kv.get("dtype") == "float32" else 2
            read, wrote = float(row["dram_read_bytes"]), float(row["dram_write_bytes"])
            if row["op"] == "conv" and n == 1:  # one kernel: reads x and w, writes y
                out = int(kv["n"]) * int(kv["k"]) * int(kv["h"]) * int(kv["w"]) * size
                assert wrote < 0.6 * out, (table.stem, row["rung"], wrote)
                conv_share.append(wrote / out)
            elif row["op"] in ("softmax", "layernorm", "rmsnorm", "gemm") and kv.get("rows", kv.get("m")) == "4096":
                out = 4096 * 4096 * (4 if row["op"] == "gemm" else size)
                if not 0.5 * out < wrote <= out:  # a statistics launch, or partial sectors written again
                    continue
                left = out - keep * out / (read + out)
                assert 0.85 <= wrote / left <= 1.1, (table.stem, row["op"], row["rung"], wrote / 1e6, left / 1e6)
                fits += 1
    assert len(conv_share) >= 20 and sorted(conv_share)[len(conv_share) // 2] < 0.1 and fits >= 60, (conv_share, fits)


def test_unrolled_sweep_and_remainder_from_elements_per_thread():
    """An unrolled-by-4 sweep with its remainder loop: when the bytes give each thread a whole
    number of elements per pass (16 for a 4096-column row on 256 threads), the unrolled loop
    runs n // 4 and the remainder n % 4 times per warp; a fractional n keeps the average rule."""
    from types import SimpleNamespace
    instrs = [(0x00, "LDG.E R4, desc[UR4][R2.64]"),          # remainder: one element
              (0x10, "STG.E desc[UR4][R6.64], R4"),
              (0x20, "@P0 BRA 0x00"),
              (0x30, "LDG.E R4, desc[UR4][R2.64]"),          # unrolled x4
              (0x40, "LDG.E R5, desc[UR4][R2.64+0x4]"),
              (0x50, "LDG.E R8, desc[UR4][R2.64+0x8]"),
              (0x60, "LDG.E R9, desc[UR4][R2.64+0xc]"),
              (0x70, "STG.E desc[UR4][R6.64], R4"),
              (0x80, "STG.E desc[UR4][R6.64+0x4], R5"),
              (0x90, "STG.E desc[UR4][R6.64+0x8], R8"),
              (0xa0, "STG.E desc[UR4][R6.64+0xc], R9"),
              (0xb0, "@P1 BRA 0x30"),
              (0xc0, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    rem, main = starts.index(0x00), starts.index(0x30)
    warps = 1000
    for n, want_main, want_rem in ((16, 4, 0), (7, 1, 3), (4, 1, 0)):
        nbytes = n * warps * 32 * 8.0  # 4 bytes read + 4 written per element
        dyn = model.dynamic_mix(rep, SimpleNamespace(flops=0.0, bytes=nbytes), launch_bytes=nbytes, dense=False,
                                warps=warps, threads_per_block=256)
        assert dyn["trips"][main] == warps * want_main, (n, dyn["rules"])
        assert dyn["trips"][rem] == warps * want_rem, (n, dyn["rules"])
    nbytes = 6.5 * warps * 32 * 8.0
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=0.0, bytes=nbytes), launch_bytes=nbytes, dense=False,
                            warps=warps, threads_per_block=256)
    assert dyn["trips"][rem] == warps * 1.5 and "(k - 1) / 2" in dyn["rules"][rem]
    # the problem's shape decides where the rung's declared bytes are off (within 4x): 16
    # float32 elements a thread, though the bytes say 6.5
    prob = SimpleNamespace(flops=0.0, bytes=nbytes, dtype="float32", elem_bytes=16 * warps * 32 * 4.0)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=256)
    assert dyn["trips"][main] == warps * 4 and dyn["trips"][rem] == 0
    # a launch that moves far fewer bytes than the problem's array (partial sums) keeps its bytes
    prob = SimpleNamespace(flops=0.0, bytes=nbytes, dtype="float32", elem_bytes=1000 * warps * 32 * 4.0)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=256)
    assert dyn["trips"][rem] == warps * 1.5


def test_dram_bound_launch_hides_pipe_work_but_not_latency():
    """Where DRAM is the slowest leg, the pipes' work hides under it (the roofline's max); where
    the second leg is exposed latency, half of it shows (the fitted overlap)."""
    from perfkit.kernels.norm import rmsnorm

    p = rmsnorm.Problem(rows=4096, cols=4096, dtype="float32")
    for v in rmsnorm.LADDER:
        if v.oracle:
            continue
        for L in model.estimate(v, v.example(p), "h100-sxm").launches:  # packed: float16 only
            # ordered as equations.combine orders them (a tie, e.g. latency = issue, by name)
            legs = sorted(L["legs"].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            if legs[0][0] != "dram" or L["overlap"] == 1.0:
                continue
            if legs[1][0] == "latency":
                assert L["seconds"] == pytest.approx(legs[0][1] + 0.5 * legs[1][1])
            else:
                assert L["seconds"] == pytest.approx(legs[0][1])


def test_launch_weights_follow_what_each_launch_accesses():
    """Layernorm backward's tuned rung: the row kernel reads x and dy more than once per
    element (its weight exceeds the bytes of its arrays), the kernels that add the partial sums
    read each once; with the bytes of the arrays alone their shares were too large."""
    from perfkit.kernels.norm import layernorm_bwd as lb

    v = next(x for x in lb.LADDER if x.name == "tuned")
    p = lb.Problem(rows=4096, cols=4096, dtype="float32")
    launches = model._plan_launches(v, p, model.rates("h100-sxm"))
    sizes = [model._array_bytes(l.args) for l in launches]
    w = model._launch_weights(v, p, sizes)
    assert w is not None and len(w) == len(sizes) >= 2
    assert w[0] > 1.1 * sizes[0][2]
    for k in range(1, len(w)):
        assert w[k] == pytest.approx(sizes[k][2], rel=0.05)
    # one launch: no split to make
    assert model._launch_weights(v, p, sizes[:1]) is None


def test_guarded_blocks_count_only_the_warps_that_take_them():
    """A tree reduction the compiler branched around (``@P1 BRA`` over ``LDS; LDS; STS``):
    at step s only the warps with a thread below s take it.  RMSNorm's fused rung (256
    threads, 8 warps): 8 stores, 12 warp-steps of 3 accesses (4 + 2 + 1 warps at s = 128, 64,
    32, then 1 warp for each of s = 16..1), 8 loads of the sum, and one S2R SR_TID a warp:
    60 wavefronts per block, as Nsight Compute's 72.5 per block at 4096x4096 (0.83), where
    counting every warp at every step gave 216 (2.98)."""
    body = [(0x10, "@P1 BRA 0x50 ;"), (0x20, "LDS R0, [R3] ;"), (0x30, "STS [R3], R0 ;"),
            (0x40, "BAR.SYNC.DEFER_BLOCKING 0x0 ;"), (0x50, "LDS R1, [UR4] ;")]
    assert [a for a, _ in model._guarded(body)] == [0x20, 0x30, 0x40]
    fused = next(v for v in rmsnorm.LADDER if v.name == "fused")
    p = rmsnorm.Problem(rows=96, cols=512, dtype="float32")
    L = model.estimate(fused, p, "h100-sxm").launches[0]
    assert L["blocks"] == 96 and L["smem_wavefronts"] == pytest.approx(60 * 96)


def test_code_after_a_predicated_exit_counts_only_the_warps_that_stay():
    """``if grp == 0:`` after a barrier, compiled as ``@P0 EXIT`` before the shared loads of
    the groups' partials: only the warps with a thread that stays issue them.  Batchnorm
    split (NHWC: 32 channels x 8 groups a block): every warp stores 3 partials, warp 0 alone
    loads 7 x 3 back, each warp reads its thread index twice: 8 x 5 + 21 = 61 wavefronts a
    block (Nsight Compute at 7c7b2e0, NHWC 32x256x56x56: 32737 over 528 blocks = 62), where
    every warp counted gave 96.  An EXIT with no shared access after it guards nothing."""
    body = [(0x10, "STS [R3], R0 ;"), (0x20, "BAR.SYNC.DEFER_BLOCKING 0x0 ;"), (0x30, "@P0 EXIT ;"),
            (0x40, "LDS R1, [R8+0x80] ;"), (0x50, "STG.E desc[UR4][R2.64], R1 ;")]
    assert [a for a, _ in model._guarded(body)] == [0x40, 0x50]
    assert model._guarded([(0x10, "@!P0 EXIT ;"), (0x20, "LDG.E R1, desc[UR4][R2.64] ;")]) == []
    split = next(v for v in batchnorm.LADDER if v.name == "split")
    p = batchnorm.Problem(n=4, c=64, h=9, w=7, layout="NHWC")
    L = model.estimate(split, p, "h100-sxm").launches[0]
    assert L["kernel"] == "bn_split_stats" and L["block"] == (256,)
    assert L["smem_wavefronts"] == pytest.approx(61 * L["blocks"])


def test_sweeps_over_the_same_elements_split_trips_by_stride():
    """Two passes over a row, one unrolled twice as far as the other (rmsnorm multirow at
    7c7b2e0: 8 LDG.128 of x for the sum of squares, 4 beside the scalar gamma loads and y
    stores for the write): each covers every element, so the first runs half as often.  Its
    FFMA count against Nsight Compute went 1.70 -> 1.14 with this rule."""
    p = rmsnorm.Problem(rows=64, cols=256)
    a = model._pipe_counts(["LDG.E.128 R4, desc[UR4][R2.64] ;"] * 8)
    b = model._pipe_counts(["LDG.E.128 R4, desc[UR4][R2.64] ;"] * 4 + ["LDG.E R9, desc[UR4][R6.64] ;"] * 32
                           + ["STG.E desc[UR4][R2.64], R9 ;"] * 16)
    assert model._elements_per_iteration(a, p) == 32 and model._elements_per_iteration(b, p) == 16
    assert model._elements_per_iteration(a, rmsnorm.Problem(rows=64, cols=256, dtype="float16")) == 64


def test_float_compare_branches_divergent_or_special():
    """An if/else on a float comparison of two registers (online softmax's ``v > m``) runs
    both arms in a warp (lanes disagree), each thread one; one on a comparison with a constant
    (``v != -inf``) keeps the longer arm (the special value's arm is the short one)."""
    full = [(0x00, "LDG.E R11, desc[UR8][R10.64] ;"), (0x10, "FSETP.GT.AND P1, PT, R11, R16, PT ;"),
            (0x20, "@P1 BRA 0x60 ;"), (0x30, "FFMA R17, R10, R17, 1 ;"), (0x40, "NOP ;"),
            (0x50, "BRA 0x90 ;"), (0x60, "FFMA R21, R10, R21, R3 ;"), (0x70, "FFMA R21, R10, R21, R3 ;"),
            (0x80, "FMUL R10, R10, R21 ;"), (0x90, "EXIT ;")]
    div: list = []
    assert model._one_path(full, full, [], div) == full and div == [(0x21, 0x60), (0x60, 0x90)]
    special = [(a, ins.replace("R11, R16", "R11, -INF")) for a, ins in full]
    kept = [a for a, _ in model._one_path(special, special)]
    assert 0x60 in kept and 0x30 not in kept  # the longer arm


def test_outer_row_loop_with_a_warp_reduction():
    """An outer loop around a row's sweeps whose body reduces across a warp by shuffles and no
    barrier (layernorm backward's multirow rung at 7c7b2e0: one warp a row, 25 shuffles an
    iteration): one row per warp-iteration, so rows warp-iterations, not as many as its inner
    sweep (Nsight Compute's shared wavefronts, which count the shuffles: 20.9x -> 0.97x)."""
    from types import SimpleNamespace
    instrs = [(0x00, "MOV R5, RZ"),                                   # outer: over rows
              (0x10, "LDG.E R6, desc[UR4][R8.64]"),                  # inner: along the row
              (0x20, "FADD R5, R6, R5"),
              (0x30, "@P2 BRA 0x10"),
              (0x40, "SHFL.BFLY PT, R7, R5, 0x10, 0x1f"),
              (0x50, "SHFL.BFLY PT, R7, R5, 0x8, 0x1f"),
              (0x60, "SHFL.BFLY PT, R7, R5, 0x4, 0x1f"),
              (0x70, "SHFL.BFLY PT, R7, R5, 0x2, 0x1f"),
              (0x80, "SHFL.BFLY PT, R7, R5, 0x1, 0x1f"),
              (0x90, "@P3 BRA 0x00"),
              (0xa0, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    o, i = starts.index(0x00), starts.index(0x10)
    nbytes, warps = 64e6, 256
    prob = SimpleNamespace(flops=0.0, bytes=nbytes, rows=4096, cols=4096, dtype="float32")
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=128)
    assert dyn["trips"][o] == 4096 and "row per 32 lanes" in dyn["rules"][o]
    assert dyn["trips"][i] == pytest.approx(nbytes / (32 * 4))
    # four butterfly steps: 16 lanes a row, two rows per warp-iteration
    rep2 = _fake_report([x for x in instrs if "0x10, 0x1f" not in x[1]])
    dyn2 = model.dynamic_mix(rep2, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=128)
    assert dyn2["trips"][o] == 2048


def test_work_loop_prologue_of_a_nested_loader_does_not_run():
    """A k-loop whose tile loader is an unrolled nested loop with its peeled remainder in front
    (the tensor-core rung at 7c7b2e0: 4 elements a thread per tile, unrolled by 4): the
    branch that skips the loader also skips the peeled copies, which run n % 4 = 0 times, so
    the loader carries all of the tile's bytes (that rung's warp instructions: 0.71 -> 0.97 of
    Nsight Compute)."""
    from types import SimpleNamespace
    instrs = [(0x00, "MOV R9, RZ"),                                  # k-loop
              (0x10, "@!P0 BRA 0x90"),                               # skip the loader
              (0x20, "@P1 LDG.E R4, desc[UR4][R2.64]"),              # peeled remainder copy
              (0x30, "STS [R5], R4"),
              (0x40, "LDG.E R6, desc[UR4][R2.64]"),                  # loader, unrolled x2
              (0x50, "LDG.E R8, desc[UR4][R2.64]"),
              (0x60, "STS.64 [R7], R6"),
              (0x70, "@P2 BRA 0x40"),
              (0x80, "NOP"),
              (0x90, "BAR.SYNC.DEFER_BLOCKING 0x0"),
              (0xa0, "FFMA R10, R11, R12, R10"),
              (0xb0, "FFMA R13, R11, R12, R13"),
              (0xc0, "@P3 BRA 0x00"),
              (0xd0, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    k, ld = starts.index(0x00), starts.index(0x40)
    warps, nbytes, flops = 64, 1 << 22, 2.0 * 32 * 2 * 1000 * 64
    dyn = model.dynamic_mix(rep, SimpleNamespace(flops=flops, bytes=1.0), launch_bytes=nbytes, dense=True,
                            warps=warps, threads_per_block=256)
    assert dyn["trips"][k] == pytest.approx(1000 * warps)
    assert dyn["own"][k]["gmem"] == 0 and dyn["own"][k]["sts"][4] == 0
    assert dyn["trips"][ld] == pytest.approx(nbytes / (32 * 8))


def test_unrolled_sweep_with_a_peeled_remainder_block():
    """A sweep unrolled twice whose odd iteration the compiler peeled into straight code after
    the loop, branched around (rmsnorm tuned at 7c7b2e0, 4096 columns on 256 threads: 16
    elements a thread, 16 per peeled block: the loop never runs, the block once).  Each thread's
    source iterations s = elements / elements per block: the loop runs s // 2 times a warp and
    the block s % 2 (its FFMA taken back where it does not run).  Nsight Compute's FFMA count
    of that rung against the model went 1.76 -> 1.12 with this rule."""
    from types import SimpleNamespace
    body = ["LDG.E.128 R8, desc[UR4][R2.64]", "FFMA R1, R8, R8, R1", "FFMA R1, R9, R9, R1",
            "FFMA R1, R10, R10, R1", "FFMA R1, R11, R11, R1"]
    instrs, a = [], 0
    for ins in ["ISETP.GE.AND P0, PT, R1, RZ, PT"] + body + body + ["@P1 BRA 0x10"]:
        instrs.append((a, ins))
        a += 0x10
    loop_end = a - 0x10
    instrs.append((a, "@!P4 BRA 0x%x" % (a + 0x10 * (len(body) + 1))))  # around the peeled block
    a += 0x10
    for ins in body:
        instrs.append((a, ins))
        a += 0x10
    instrs += [(a, "SHFL.BFLY PT, R2, R1, 0x10, 0x1f"), (a + 0x10, "EXIT")]
    rep = _fake_report(instrs)
    assert [lp.end for lp in rep.loops] == [loop_end]
    warps = 1000
    for s, want_loop, want_block in ((1, 0, 1), (2, 1, 0), (5, 2, 1)):
        n = 4 * s  # elements a thread per pass, 4 per block (one float32 LDG.128)
        prob = SimpleNamespace(flops=0.0, bytes=n * warps * 32 * 4.0, dtype="float32",
                               elem_bytes=n * warps * 32 * 4.0)
        dyn = model.dynamic_mix(rep, prob, launch_bytes=prob.bytes, dense=False, warps=warps,
                                threads_per_block=256)
        assert dyn["trips"][0] == warps * want_loop, (s, dyn["rules"])
        assert "peeled" in dyn["rules"][0]
        # every thread squares each of its n elements once: 4 FFMA per block, 8 per iteration
        assert dyn["counts"]["ffma"] == pytest.approx(warps * n), s
    # not a whole number of source iterations: the block runs (k - 1) / 2 = half the time
    prob = SimpleNamespace(flops=0.0, bytes=1.0, dtype="float32", elem_bytes=4 * 2.5 * warps * 32 * 4.0)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=prob.bytes, dense=False, warps=warps, threads_per_block=256)
    assert dyn["trips"][0] == pytest.approx(warps * 1.0) and "not whole" in dyn["rules"][0]


def test_traffic_is_evaluated_for_the_target_device():
    """A persistent grid sizes its partial-sum slots from the SM count: the model asks the
    rung's traffic for the target GPU (132 SMs on an H100 SXM, 108 on an A100), as its launch
    plan does, not for the 4-SM simulator it runs in."""
    v = layernorm_bwd.MultiRow()
    p = layernorm_bwd.Problem(rows=4096, cols=4096)
    for gpu, sms in (("h100-sxm", 132), ("a100-sxm-80gb", 108)):
        r = model.rates(gpu)
        assert r["sm_count"]["value"] == sms
        t = model._traffic_for(v, p, r)
        assert f"of {sms * 2 * v.rows_per_block} slots" in t.notes, t.notes


def test_uncoalesced_layout_moves_bytes_not_instructions():
    """batchnorm's fused rung at 7c7b2e0 runs the same kernel on NCHW and NHWC; Nsight Compute
    counted the same warp instructions for both (189.66e6 at 32x256x56x56) while NHWC's L2
    bytes were 5.5x NCHW's (one useful float per 32-byte sector).  Its traffic model gives L2
    bytes only, so the model sizes the loops from the bytes the instructions ask for (the
    simulated twin's), not from those sectors: the same instruction count for both layouts,
    and NHWC slower (measured 1157 vs 675 us) with DRAM bytes near ncu's 528 MB."""
    from perfkit import history

    v, mod = history.variant_at("7c7b2e0", "batchnorm", "fused", {})
    assert v is not None, history.why_not("7c7b2e0")
    est = {lay: model.estimate(v, mod.Problem(n=32, c=256, h=56, w=56, layout=lay)) for lay in ("NCHW", "NHWC")}
    wi = {lay: sum(p["warp_instructions"] for p in e.launches) for lay, e in est.items()}
    assert wi["NHWC"] == pytest.approx(wi["NCHW"], rel=0.05)
    assert wi["NHWC"] == pytest.approx(189.66e6, rel=0.25)
    dram = sum(p["dram_bytes"] for p in est["NHWC"].launches)
    assert dram == pytest.approx(380.3e6 + 147.5e6, rel=0.25)
    assert est["NHWC"].seconds > 1.2 * est["NCHW"].seconds
    assert 0.5 < est["NHWC"].seconds / 1157.0e-6 < 2.0
    # each of its three sweeps reads the channel from DRAM (ncu: 308 MB read for NCHW, 3 x the
    # input): its loads wait on DRAM, though the small simulated twin finds its re-reads in L2
    dram_clk = model.rates("h100-sxm")["latency_dram_clk"]["value"]
    for e in est.values():
        assert e.launches[0]["latencies_clk"]["global_miss"] >= dram_clk


def test_dense_uncoalesced_layout_moves_bytes_not_instructions():
    """conv's direct_halo runs the same kernel in NCHW and NHWC: per input channel a block
    stages its 10x18 input tile and its KB=8 filters' 72 taps in shared memory, one element a
    thread at a time, the layout only changing the index arithmetic.  Its traffic model gives L2
    bytes only, and in NHWC counts the tile at 8 sectors per element (one channel of a pixel
    each): 1592 MB at 32x128x28x28, k=128, 3x3, where the instructions ask for 270 MB in float16
    (541 MB, and 541 MB of L2, in float32 NCHW).  The loader loops are sized from the bytes the
    instructions ask for, the twin's scaled by the FLOPs in a dense op (the same tiles, more of
    them), not from those sectors: before, float16 NHWC came to 2018 M warp instructions
    against 684 M for float32 NCHW and 3.3 ms against 1244 us measured on the H200 (2.65x).
    Nsight Compute counted 826 M for float32 NCHW there."""
    from perfkit.kernels import conv

    v = conv.DirectHalo()
    est = {}
    for dt, lay in (("float32", "NCHW"), ("float16", "NHWC")):
        p = conv.Problem(32, 128, 28, 28, 128, 3, 3, 1, 1, dt, lay)
        est[(dt, lay)] = model.estimate(v, p, "h200", stored=False)
    wi = {k: sum(p["warp_instructions"] for p in e.launches) for k, e in est.items()}
    assert wi[("float16", "NHWC")] == pytest.approx(wi[("float32", "NCHW")], rel=0.1)
    assert 0.5 < wi[("float16", "NHWC")] / 825.85e6 < 1.5
    assert 0.5 < est[("float16", "NHWC")].seconds / 1244.1e-6 < 2.0


def test_outer_row_loop_with_a_reduction_across_warps():
    """The same outer loop whose row spans W warps (layernorm backward's tuned rung at 7c7b2e0:
    256 threads a row): shuffles, then each warp's partial stored to shared memory, a barrier,
    and every warp loading the W partials back. W = shared loads / shared stores of the body,
    and each iteration the W warps finish one row: rows x W warp-iterations (that rung's shared
    wavefronts against Nsight Compute went 2.68 -> 0.97, FFMA 1.63 -> 0.83)."""
    from types import SimpleNamespace

    def listing(w):
        ins = ["MOV R5, RZ",                                          # outer: over rows
               "LDG.E R6, desc[UR4][R8.64]",                          # inner: along the row
               "FADD R5, R6, R5",
               "@P2 BRA 0x10",
               "SHFL.BFLY PT, R7, R5, 0x10, 0x1f",
               "SHFL.BFLY PT, R7, R5, 0x8, 0x1f",
               "SHFL.BFLY PT, R7, R5, 0x4, 0x1f",
               "SHFL.BFLY PT, R7, R5, 0x2, 0x1f",
               "SHFL.BFLY PT, R7, R5, 0x1, 0x1f",
               "@!P4 STS [R9], R7",
               "BAR.SYNC.DEFER_BLOCKING 0x0"]
        ins += [f"LDS R{10 + j}, [R11+{hex(4 * j)}]" for j in range(w)]
        ins += ["BAR.SYNC.DEFER_BLOCKING 0x0"]
        out = [(0x10 * a, t) for a, t in enumerate(ins)]
        n = len(out)
        return out + [(0x10 * n, "@P3 BRA 0x00"), (0x10 * (n + 1), "EXIT")]

    nbytes = 64e6
    prob = SimpleNamespace(flops=0.0, bytes=nbytes, rows=4096, cols=4096, dtype="float32")
    for w, tpb in ((8, 256), (2, 128)):
        rep = _fake_report(listing(w))
        starts = [lp.start for lp in rep.loops]
        o = starts.index(0x00)
        dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=528 * tpb // 32,
                                threads_per_block=tpb)
        assert dyn["trips"][o] == 4096 * w and f"one row per {w} warps" in dyn["rules"][o], dyn["rules"]
        # each warp walks 4096 x W / warps rows one after another: what it re-reads within a
        # row is in flight for that row only (the re-read rule's footprint is divided by it)
        assert dyn["rows_in_turn"] == pytest.approx(4096 * w / (528 * tpb // 32))


def test_host_launch_cost_shows_only_past_the_work_queued_ahead():
    """The timer's cold-L2 flush (2 x L2 at the effective DRAM rate: ~45 us on the H100) hides
    that much of the host's cost to launch the first kernel (37 + 4.6 us per array on the
    records' machine: 65 us for layernorm's six arrays); with nothing queued ahead it shows in full."""
    r = model.rates("h100-sxm")
    assert model.flush_seconds(r) == pytest.approx(2 * r["l2_size_bytes"]["value"] / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"]))
    assert 40e-6 < model.flush_seconds(r) < 50e-6
    p = layernorm.Problem(rows=64, cols=512)
    v = layernorm.LADDER[2]
    hidden = model.estimate(v, p, banks=False, ahead_s=model.flush_seconds(r))  # the flush-only timer
    bare = model.estimate(v, p, banks=False, ahead_s=0.0)
    h0 = bare.launches[0]["host_s"]
    assert h0 == pytest.approx(r["host_base_s"]["value"] + 6 * r["host_per_array_arg_s"]["value"]
                               + 2 * r["host_per_scalar_arg_s"]["value"], rel=1e-9)  # six arrays, eps and cols
    exposed = max(0.0, h0 - model.flush_seconds(r))  # what the flush does not hide
    assert hidden.legs["launch"] == pytest.approx(r["launch_latency_s"]["value"] + exposed)
    assert bare.seconds - hidden.seconds == pytest.approx(h0 - exposed, rel=1e-6)
    assert bare.inputs["ahead_s"]["value"] == 0.0
    # partly hidden: what the host takes beyond the work ahead
    part = model.estimate(v, p, banks=False, ahead_s=h0 / 2)
    assert part.seconds - hidden.seconds == pytest.approx(h0 / 2 - exposed, rel=1e-6)


def test_todays_timer_hides_the_host_launch_cost_by_default():
    """The timer's spin rule (``model.launch.timer_ahead``): ``timing.measure`` queues the cold-L2
    flush, then a spin kernel of ``timing.spin_length`` of the host's enqueue of the whole
    sequence, then the start event, so an estimate made before a record (no ``ahead_s``) puts
    none of the host's launch cost in the window: the launch leg is the launch latency alone,
    also for a rung of several launches and for a GPU whose L2 size is unknown.  Before the
    rule the default was the flush alone: layernorm fused's six arrays (65 us of host cost on
    the H100) showed 20 us past its 45 us flush."""
    from perfkit import timing

    r = model.rates("h100-sxm")
    lat = r["launch_latency_s"]["value"]
    p = layernorm.Problem(rows=64, cols=512)
    v = layernorm.LADDER[2]
    e = model.estimate(v, p, banks=False)
    host = e.launches[0]["host_s"]
    assert host > model.flush_seconds(r)  # the flush alone would leave part of it in the window
    assert e.inputs["ahead_s"]["value"] == pytest.approx(model.flush_seconds(r) + timing.spin_length(host))
    assert e.legs["launch"] == pytest.approx(lat)
    assert "spin" in e.inputs["ahead_s"]["source"]
    # several launches: the spin covers the host's enqueue of all of them
    pb = layernorm_bwd.Problem(rows=64, cols=512)
    multi = next(x for x in layernorm_bwd.LADDER if not x.oracle and len(model.estimate(x, pb, banks=False).launches) > 1)
    em = model.estimate(multi, pb, banks=False)
    hosts = [l["host_s"] for l in em.launches]
    assert sum(hosts) > model.flush_seconds(r)
    assert em.inputs["ahead_s"]["value"] == pytest.approx(model.flush_seconds(r) + timing.spin_length(sum(hosts)))
    assert em.legs["launch"] == pytest.approx(lat)
    # a record's own flush and spin give the same estimate where its spin outlasted the host
    doc_timing = {"flush_bytes": timing.flush_bytes_for(r["l2_size_bytes"]["value"]),
                  "extra": {"spin_s": timing.spin_length(sum(hosts))}}
    assert model.estimate(multi, pb, banks=False, ahead_s=model.record_ahead(doc_timing, r)).seconds \
        == pytest.approx(em.seconds, rel=1e-9)
    # a device whose L2 size devices.yaml does not give (B200): the spin alone, the host hidden
    rb = model.rates("b200")
    assert rb["l2_size_bytes"]["value"] is None and model.flush_seconds(rb) is None
    eb = model.estimate(v, p, "b200", banks=False)
    assert eb.inputs["ahead_s"]["value"] == pytest.approx(timing.spin_length(eb.launches[0]["host_s"]))
    assert eb.legs["launch"] == pytest.approx(rb["launch_latency_s"]["value"])


def test_a_loop_reading_back_partials_after_a_barrier():
    """A loop that only reads shared memory after its parent stored partials and passed a
    barrier.  Stores one lane makes (a warp's partial after its shuffles): every warp reads all
    W = threads / 32 warps' values, W x stores / loads iterations per parent iteration
    (layernorm backward's persistent rows today: 5 values, 16 warps, 20 loads: 4 a row).
    Stores every lane makes: one reader gathers 32 x stores values, 32 x stores / loads
    iterations for the block (batchnorm split in NCHW: 8 a warp, as Nsight Compute's shared
    wavefronts say: 806 a block, the model 792)."""
    from types import SimpleNamespace

    def listing(pred, nld, nst, nested):
        ins = []
        if nested:
            ins += ["MOV R5, RZ"]                                      # the row loop
        ins += ["LDG.E R6, desc[UR4][R8.64]", "FADD R5, R6, R5"]
        ins += [("@!P1 " if pred else "") + f"STS [R2+{hex(0x80 * j)}], R5" for j in range(nst)]
        ins += ["BAR.SYNC.DEFER_BLOCKING 0x0", "MOV R20, RZ"]
        merge = len(ins)
        ins += [f"LDS R{10 + j}, [R11+{hex(4 * j)}]" for j in range(nld)] + ["FADD R20, R10, R20"]
        out = [(0x10 * a, t) for a, t in enumerate(ins)]
        n = len(out)
        out += [(0x10 * n, f"@P3 BRA {hex(0x10 * merge)}")]
        if nested:
            out += [(0x10 * (n + 1), "STG.E desc[UR4][R2.64], R20"), (0x10 * (n + 2), "@P4 BRA 0x0")]
        return out + [(0x10 * (len(out)), "EXIT")], 0x10 * merge

    prob = SimpleNamespace(flops=0.0, bytes=64e6, rows=4096, cols=4096, dtype="float32")
    warps = 4224
    # one lane's stores, nested in a row loop: 16 warps x 5 / 20 = 4 per row-loop iteration
    instrs, start = listing(True, 20, 5, True)
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    i, o = starts.index(start), starts.index(0x0)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=64e6, dense=False, warps=warps, threads_per_block=512)
    assert dyn["trips"][o] and dyn["trips"][i] == pytest.approx(4 * dyn["trips"][o]), dyn["rules"]
    assert "every warp reads all 16" in dyn["rules"][i]
    # every lane's stores in the straight code, one reader: 32 x 3 / 12 = 8 per warp
    instrs, start = listing(False, 12, 3, False)
    rep = _fake_report(instrs)
    i = [lp.start for lp in rep.loops].index(start)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=64e6, dense=False, warps=4096, threads_per_block=256)
    assert dyn["trips"][i] == pytest.approx(8 * 4096) and "one reader" in dyn["rules"][i], dyn["rules"]


def test_a_sweep_over_a_row_staged_by_cp_async_is_not_a_read_back_of_partials():
    """The read-back rule counts the stores that reach a loop through a barrier: those before
    the last barrier ahead of the loop (since the barrier before it).  The smem_row rungs copy
    their row into shared memory by cp.async (LDGSTS, LDGDEPBAR, DEPBAR, then the barrier) and
    sweep it there, each thread its own vectors; the block reductions' partials are stored
    *after* that sweep.  Before the rule looked at the order, those later stores made the max
    sweep a read-back: softmax smem_row at 4096 x 16384 float32 (256 threads) got 24 + 6 trips a
    warp for its remainder and x4 loops, where each thread reads 16 vectors (0 + 4); split_row at
    65536 (1024 threads) 96 + 24 for 0 + 3.  A barrier that publishes cp.async copies, with a
    scalar head stored beside them (an unaligned row), stages data: no read-back either.  Those
    loops sweep the staged row instead (:func:`perfkit.model.trips.rule_staged_sweep`): the
    block's dynamic shared memory over its threads, a pass (16 LDS.128 a thread here: 0 + 4 for
    the max's remainder and x4 loops, 8 for the sum's x2 loop)."""
    from types import SimpleNamespace

    def listing(head):
        ins = ["LDGSTS.E.BYPASS.128 [R11], desc[UR6][R14.64]",        # stage: cp.async copies
               "IADD3 R11, R11, 0x1000, RZ",
               "@P1 BRA 0x0",
               "LDGDEPBAR"]
        if head:
            ins += ["@!P5 STS [R9], R7"]                               # an unaligned row's head
        ins += ["DEPBAR.LE SB0, 0x0",
                "BAR.SYNC.DEFER_BLOCKING 0x0"]
        sweep = len(ins)
        ins += ["LDS.128 R8, [R11]",                                   # the max over the staged row
                "FMNMX R23, R8, R23, !PT",
                "IADD3 R11, R11, 0x1000, RZ",
                f"@P3 BRA {hex(0x10 * sweep)}",
                "SHFL.BFLY PT, R8, R23, 0x10, 0x1f",
                "@!P2 STS [R8], R13",                                  # the reduction's partials
                "BAR.SYNC.DEFER_BLOCKING 0x0",
                "LDS R24, [R24]",
                "BAR.SYNC.DEFER_BLOCKING 0x0",
                "@!P2 STS [R20], R19",
                "BAR.SYNC.DEFER_BLOCKING 0x0",
                "LDS R17, [R17]",
                "BAR.SYNC.DEFER_BLOCKING 0x0"]
        write = len(ins)
        ins += ["LDS.128 R12, [R12]",                                  # the write
                "STG.E.128 desc[UR6][R2.64], R12",
                f"@P4 BRA {hex(0x10 * write)}",
                "EXIT"]
        return [(0x10 * a, t) for a, t in enumerate(ins)], 0x10 * sweep

    prob = SimpleNamespace(flops=0.0, bytes=2 * 4096 * 16384 * 4, rows=4096, cols=16384, dtype="float32")
    for head in (False, True):
        instrs, start = listing(head)
        rep = _fake_report(instrs)
        i = [lp.start for lp in rep.loops].index(start)
        dyn = model.dynamic_mix(rep, prob, launch_bytes=prob.bytes, dense=False, warps=32768,
                                threads_per_block=256, dynamic_shared=16384 * 4)
        assert not dyn["rules"][i].startswith("reads back"), (head, dyn["rules"][i])
        # it sweeps the staged row (rule_staged_sweep): 64 KiB over 256 threads, 16 LDS.128 a thread
        assert dyn["trips"][i] == pytest.approx(16 * 32768) and "staged" in dyn["rules"][i], dyn["rules"][i]
    # the worked case still reads back: batchnorm split's statistics, stored, a barrier, merged
    est = model.estimate(next(x for x in batchnorm.LADDER if x.name == "split"), batchnorm.Problem(n=32, c=256, h=56, w=56), "h200", stored=False)
    assert any(r.startswith("reads back") for r in est.launches[0]["trip_rules"]), est.launches[0]["trip_rules"]
    # and the compiled smem_row softmax has no read-back loop
    v = next(x for x in softmax.LADDER if x.name == "smem_row")
    est = model.estimate(v, softmax.Problem(rows=4096, cols=16384), "h200", stored=False)
    (L,) = est.launches
    assert not any(r.startswith("reads back") for r in L["trip_rules"])
    # its max sweep (remainder, x4), sum sweep (x2, stores back in place): 0, 4, 8 a warp
    staged = [t / L["warps"] for t, r in zip(L["trips"], L["trip_rules"]) if "staged" in r]
    assert staged == pytest.approx([0, 4, 8]), L["trip_rules"]


def test_a_tiled_products_tile_loop_runs_with_its_loaders():
    """A dense op's tile loop that holds the arithmetic loop and a loader loop (the implicit
    GEMM convolution: the k-tile loop with its B-tile loader nested): it runs once per tile as
    its loaders do, sharing the tiles' bytes with them, not once per warp."""
    from types import SimpleNamespace
    instrs = [(0x00, "LDG.E R6, desc[UR4][R8.64]"),                   # tile loop: A's element
              (0x10, "STS [R2], R6"),
              (0x20, "LDG.E R7, desc[UR4][R10.64]"),                  # loader loop: B's elements
              (0x30, "STS [R3], R7"),
              (0x40, "@P1 BRA 0x20"),
              (0x50, "BAR.SYNC.DEFER_BLOCKING 0x0"),
              (0x60, "LDS R12, [R4]"),                                # arithmetic loop
              (0x70, "FFMA R20, R12, R12, R20"),
              (0x80, "@P2 BRA 0x60"),
              (0x90, "BAR.SYNC.DEFER_BLOCKING 0x0"),
              (0xa0, "@P3 BRA 0x00"),
              (0xb0, "EXIT")]
    rep = _fake_report(instrs)
    starts = [lp.start for lp in rep.loops]
    tile, loader, work = starts.index(0x00), starts.index(0x20), starts.index(0x60)
    warps, nbytes = 1024, 1024 * 32 * 8 * 100.0   # 100 tiles a warp, 4 + 4 bytes a thread each
    prob = SimpleNamespace(flops=64.0 * warps * 800, bytes=1e6, m=64, n=64, k=64, dtype="float32")
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=True, warps=warps, threads_per_block=256)
    assert dyn["trips"][work] == pytest.approx(800 * warps)
    assert dyn["trips"][tile] == pytest.approx(100 * warps) == dyn["trips"][loader], dyn["rules"]


def test_validate_cli_says_what_is_wrong_without_a_traceback(tmp_path, capsys):
    """Bad input to ``perfkit model validate``: one line on stderr and a non-zero exit, not a
    traceback; a folder with no GPU records gives an empty table and the 0-record line."""
    assert model.validate_cli(["validate", "--results", str(tmp_path / "nowhere")]) == 2
    assert "no records folder" in capsys.readouterr().err
    assert model.validate_cli(["validate", "--gpu", "no-such-gpu"]) == 2
    assert "unknown device 'no-such-gpu'" in capsys.readouterr().err
    assert model.validate_cli(["validate", "--ncu", str(tmp_path / "none.csv")]) == 2
    assert "no Nsight Compute table" in capsys.readouterr().err
    assert model.validate_cli(["validate", "--results", str(tmp_path)]) == 1
    assert "no GPU records" in capsys.readouterr().err
    table, line, levels = model.validate(results_root=tmp_path)
    assert len(table) == 0 and len(levels) == 0 and line.endswith("within 2x: 0/0")


def test_a_loop_storing_only_zero_clears_the_workspace():
    """A loop whose only global accesses store zero clears the launch's workspace (a persistent
    grid's partial sums, layernorm backward's multirow rung at 7c7b2e0): unrolled x4 beside its
    remainder, it runs workspace bytes / (32 x its bytes an iteration); the streamed bytes stay
    with the sweep.  The same code falling through to EXIT is the compiler's copy for an empty
    inner range and does not run."""
    from types import SimpleNamespace

    def listing(exit_after):
        ins = [(0x00, "STG.E desc[UR4][R2.64], RZ"),                 # remainder: one element
               (0x10, "@P1 BRA 0x00")]
        ins += [(0x20 + 0x10 * j, f"STG.E desc[UR4][R2.64+{hex(4 * j)}], RZ") for j in range(4)]
        ins += [(0x60, "@P2 BRA 0x20")]                               # unrolled x4
        if exit_after:
            return ins + [(0x70, "EXIT"), (0x80, "LDG.E R6, desc[UR4][R8.64]"),
                          (0x90, "STG.E desc[UR4][R10.64], R6"), (0xa0, "@P3 BRA 0x80"), (0xb0, "EXIT")]
        return ins + [(0x70, "LDG.E R6, desc[UR4][R8.64]"),            # the sweep
                      (0x80, "STG.E desc[UR4][R10.64], R6"), (0x90, "@P3 BRA 0x70"), (0xa0, "EXIT")]

    prob = SimpleNamespace(flops=0.0, bytes=64e6, rows=4096, cols=4096, dtype="float32")
    warps, nbytes, clear = 1024, 32 * 8 * 1024 * 100.0, 32 * 16 * 1024 * 10.0
    rep = _fake_report(listing(False))
    starts = [lp.start for lp in rep.loops]
    r, u, sw = starts.index(0x00), starts.index(0x20), starts.index(0x70)
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=128,
                            clear_bytes=clear)
    assert dyn["trips"][u] == pytest.approx(10 * warps) and "workspace" in dyn["rules"][u]
    assert dyn["trips"][r] == pytest.approx(1.5 * warps)
    assert dyn["trips"][sw] == pytest.approx(100 * warps)
    rep = _fake_report(listing(True))
    starts = [lp.start for lp in rep.loops]
    dyn = model.dynamic_mix(rep, prob, launch_bytes=nbytes, dense=False, warps=warps, threads_per_block=128,
                            clear_bytes=clear)
    assert "workspace" not in dyn["rules"][starts.index(0x20)], dyn["rules"]


@pytest.mark.skipif(not _history_ok(), reason="commit 7c7b2e0 (the H100 records' code) is not in this clone's history")
def test_a_live_workspace_counts_in_the_rows_l2_must_keep():
    """Layernorm backward's tuned rung at 7c7b2e0 keeps 528 slots of partial sums (17 MB) live
    beside the rows in flight (17 MB): together past what L2 keeps for re-reads (32 MB), short
    of its 50 MB, so part of the re-reads go to DRAM.  Nsight Compute: 375.5 MB of DRAM for this
    kernel, 174 MB beyond x, dy and dx (the model had 196 MB before it counted the workspace)."""
    v0 = next(v for v in layernorm_bwd.LADDER if v.name == "tuned")
    v, _, code = model._variant_as_recorded(v0, layernorm_bwd, "layernorm_bwd", "tuned", {}, "7c7b2e0")
    assert code.startswith("at ")
    L = model.estimate(v, layernorm_bwd.Problem(rows=4096, cols=4096, dtype="float32"), "h100-sxm").launches[0]
    m = re.search(r"work on (\d+) MB at once.*; ([0-9.]+) of the simulated", L["dram_source"])
    assert m and 32 < float(m.group(1)) < 50 and 0 < float(m.group(2)) < 1, L["dram_source"]
    assert 0.75 * 375.5e6 < L["dram_bytes"] < 1.25 * 375.5e6


def test_validate_compares_nsight_compute_rows_no_record_has(tmp_path):
    """The per-level table covers every row of the Nsight Compute table: at a recorded problem,
    and (``record`` False) at a row no record has, the rung as of the records' commit estimated
    at the row's problem (saxpy at 2^26 here).  No records, no commit: no such rows."""
    import glob
    import json
    import shutil

    src = [f for f in glob.glob(str(model.RATES_PATH.parent / "results" / "*" / "softmax" / "*-r2-fused-*.json"))
           if json.load(open(f))["problem"] == "rows=4096 cols=1024 dtype=float32 axis=-1"]
    if not src:
        pytest.skip("no softmax fused record at 4096x1024 in data/results")
    shutil.copy(src[0], tmp_path / "r.json")
    saxpy_label = "n=67108864 dtype=float32 alpha=2.0"
    table, line, levels = model.validate(results_root=tmp_path, banks=False,
                                         problems=["rows=4096 cols=1024 dtype=float32 axis=-1", saxpy_label])
    if not len(levels):
        pytest.skip("no Nsight Compute table next to this checkout")
    sx = levels[levels["op"] == "saxpy"]
    assert set(sx["rung"]) == {"01 naive", "02 grid_stride", "03 unrolled"} and not sx["record"].any()
    assert set(sx["level"]) == {"dram_bytes", "l2_bytes", "shared_wavefronts", "warp_instructions",
                                "ffma_thread_instructions"}
    assert ((sx["ratio"] - 1).abs() < 0.25).all(), sx  # a streaming kernel: every count within 25%
    shown = model.levels_table(levels).to_string()
    assert "* n=67108864 dtype=float32" in shown
    # a row of an op perfkit has no ladder for is left out, not an error
    import pandas as pd

    ncu = [model.NCU_PATH]
    if ncu:
        t = pd.read_csv(ncu[0])
        extra = t.iloc[[0]].assign(op="no_such_op", rung="01 naive", problem="n=5")
        pd.concat([t, extra]).to_csv(tmp_path / "ncu.csv", index=False)
        _, _, lv = model.validate(results_root=tmp_path, banks=False, ncu_path=tmp_path / "ncu.csv",
                                  problems=["rows=4096 cols=1024 dtype=float32 axis=-1", saxpy_label, "n=5"])
        assert "no_such_op" not in set(lv["op"]) and len(lv[lv["op"] == "saxpy"]) == 15


def test_ncu_table_is_the_newest_of_the_gpu_asked_for():
    tables = model.ncu_tables("h100-sxm")
    assert model.NCU_PATH in [p for p, _ in tables] and dict(tables)[model.NCU_PATH] == "7c7b2e0"
    assert tables == sorted(tables, key=lambda pc: pc[0].name, reverse=True)  # newest first
    assert model.ncu_table("h100-sxm") == tables[0][0]
    assert model.ncu_table("NVIDIA H100 80GB HBM3") == tables[0][0]  # a record's name resolves too
    h200 = model.ncu_table("h200")
    assert h200 is not None and h200.name.startswith("h200-") and h200.exists()
    assert all(p.name.startswith("h200-") for p, _ in model.ncu_tables("h200"))
    assert model.ncu_table("l40s") is None and model.ncu_tables("l40s") == []


@pytest.mark.skipif(not _history_ok(), reason="commit 7c7b2e0 (the H100 records' code) is not in this clone's history")
def test_validate_takes_each_rungs_counts_from_the_newest_table_against_the_code_it_profiled(tmp_path, monkeypatch):
    """A session that profiles some rungs writes a table of those alone: every table of the GPU
    counts, a rung's newest row wins, and it is compared with the estimate of a record made at
    that table's commit (softmax fused at 6bbc424 here, not its 7c7b2e0 record); a rung only the
    older table has (naive) keeps its row and its own commit's record, and a rung the older table
    numbered differently is the same rung."""
    import glob
    import json
    import shutil

    import pandas as pd

    data = model.RATES_PATH.parent
    label = "rows=4096 cols=4096 dtype=float32 axis=-1"
    recs = {}
    for f in glob.glob(str(data / "results" / "nvidia-h100-80gb-hbm3" / "softmax" / "*-r[12]-*.json")):
        d = json.load(open(f))
        if d["problem"] == label:
            recs.setdefault((d["rung"], d["provenance"]["git_commit"][:7]), f)
    need = [(1, "7c7b2e0"), (2, "7c7b2e0"), (2, "6bbc424")]
    if not all(k in recs for k in need):
        pytest.skip("the softmax records at 7c7b2e0 and 6bbc424 are not in data/results")
    (tmp_path / "results").mkdir()
    for k in need:
        shutil.copy(recs[k], tmp_path / "results" / Path(recs[k]).name)
    ncu_dir = tmp_path / "ncu"
    ncu_dir.mkdir()
    old = pd.read_csv(model.NCU_PATH)
    old = old[(old["op"] == "softmax") & (old["problem"] == label) & old["rung"].isin(["01 naive", "02 fused"])]
    # the older table numbered fused differently (a rung renumbered since): still one rung
    old.assign(rung=old["rung"].replace({"02 fused": "05 fused"})).to_csv(ncu_dir / "h100-sxm-2026-11-23.csv", index=False)
    (ncu_dir / "h100-sxm-2026-11-23.json").write_text(json.dumps(
        {"table": "h100-sxm-2026-11-23.csv", "gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-23", "commit": "7c7b2e0"}))
    new = old[old["rung"] == "02 fused"].assign(dram_read_bytes=lambda t: t["dram_read_bytes"] * 2)
    new.to_csv(ncu_dir / "h100-sxm-2026-12-01.csv", index=False)
    (ncu_dir / "h100-sxm-2026-12-01.json").write_text(json.dumps(
        {"table": "h100-sxm-2026-12-01.csv", "gpu": "NVIDIA H100 80GB HBM3", "date": "2026-12-01",
         "commit": "6bbc4249a1109cec0219ee145ce01c2dc8dd6042"}))
    from perfkit.model import inputs

    monkeypatch.setattr(inputs, "NCU_PATH", ncu_dir / "h100-sxm-2026-11-23.csv")
    assert [c for _, c in model.ncu_tables("h100-sxm")] == ["6bbc4249a1109cec0219ee145ce01c2dc8dd6042", "7c7b2e0"]
    table, _, levels = model.validate(results_root=tmp_path / "results", banks=False)
    dram = levels[levels["level"] == "dram_bytes"].set_index("rung")
    assert set(dram.index) == {"01 naive", "02 fused"} and dram["record"].all()
    fused_new = float((new["dram_read_bytes"] + new["dram_write_bytes"]).sum())
    assert dram.loc["02 fused", "ncu"] == fused_new  # the newest table's row, not the older one's
    est = table[(table["rung"] == "02 fused") & table["_commit"].str.startswith("6bbc424")]["_estimate"].iloc[0]
    assert dram.loc["02 fused", "model"] == sum(p["dram_bytes_profiled"] for p in est.launches)
    naive_old = old[old["rung"] == "01 naive"]
    assert dram.loc["01 naive", "ncu"] == float((naive_old["dram_read_bytes"] + naive_old["dram_write_bytes"]).sum())


def test_validate_compares_only_records_of_the_gpu_it_estimates(tmp_path):
    """An H200 record is no test of an H100 estimate (nor the reverse); a ceiling record is no rung."""
    import shutil

    from perfkit import paths

    data = paths.DATA / "results"
    picks = {"nvidia-h100-80gb-hbm3": "softmax", "nvidia-h200": "softmax"}
    for gpu, op in picks.items():
        src = sorted((data / gpu / op).glob("*-r5-multirow-*.json"))[-1]  # DRAM-bound on both
        (tmp_path / gpu / op).mkdir(parents=True)
        shutil.copy(src, tmp_path / gpu / op / src.name)
    ceil = sorted((data / "nvidia-h200" / "roofline").glob("*.json"))[0]
    (tmp_path / "nvidia-h200" / "roofline").mkdir()
    shutil.copy(ceil, tmp_path / "nvidia-h200" / "roofline" / ceil.name)
    # no Nsight Compute table (a path that does not exist): the per-level check is another test's
    none = tmp_path / "no-ncu.csv"
    t100, _, _ = model.validate("h100-sxm", results_root=tmp_path, ncu_path=none, banks=False, history=False)
    t200, _, _ = model.validate("h200", results_root=tmp_path, ncu_path=none, banks=False, history=False)
    assert list(t100["rung"]) == ["05 multirow"] and list(t200["rung"]) == ["05 multirow"]
    assert t100["measured_s"].iloc[0] != t200["measured_s"].iloc[0]  # each its own GPU's record
    assert t200["predicted_s"].iloc[0] < t100["predicted_s"].iloc[0]  # the H200's DRAM is faster


def test_a_gpu_process_estimates_with_the_same_access_simulation(monkeypatch):
    """On a GPU the model read no bank simulation ("not simulated (GPU process)") and its
    estimates moved (RMSNorm fused's shared wavefronts x3.6, GEMM naive's time x1.8 on an H200);
    banks.count now answers there too (store, cache or a simulator child)."""
    import sys

    from perfkit import backend

    real = backend.is_simulator

    def gpu_where_asked(frame_names=("count", "_bank_report")):  # kernels still build for this process
        return False if sys._getframe(1).f_code.co_name in frame_names else real()

    fused = next(v for v in rmsnorm.LADDER if v.name == "fused")
    p = rmsnorm.Problem(rows=96, cols=512, dtype="float32")
    here = model.estimate(fused, p, "h100-sxm").launches[0]["smem_wavefronts"]
    monkeypatch.setattr(backend, "is_simulator", gpu_where_asked)
    model._bank_report.cache_clear()
    rep, twin, why = model._bank_report(fused, rmsnorm.Problem(rows=97, cols=512, dtype="float32"))
    assert rep is not None and why == "", why
    assert model.estimate(fused, p, "h100-sxm", stored=False).launches[0]["smem_wavefronts"] == here == 60 * 96


def test_a_kept_estimate_is_the_computed_one_and_any_input_it_read_misses_it(tmp_path, monkeypatch):
    """perfkit.model.stored: an estimate written by a refresh and read from the store (the local
    cache gone) equals the one computed, field for field (tuples too); other rates (a patched
    rates.yaml), banks, ahead_s or rung config are other keys; an entry of other compiler tools
    is not read; the entry leaves out the rates and launch inputs its key holds."""
    import dataclasses
    import json
    import shutil

    from perfkit import static
    from perfkit.model import stored

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFKIT_STATIC_DIR", str(tmp_path / "store"))
    v = next(x for x in saxpy.LADDER if x.name == "unrolled")  # a quick build: the key's rules are any rung's
    p = saxpy.Problem(n=40961)
    computed = model.estimate(v, p, "h200", stored=False)
    monkeypatch.setenv("PERFKIT_STATIC_WRITE", "1")
    assert model.estimate(v, p, "h200") == computed
    [entry] = static.entries("estimate")
    doc = json.loads(entry.read_text())
    assert doc["what"] == f"{v.label} @ {p.label} on h200" and doc["tools"] == stored._tools()
    assert "dram_bw" not in doc["answer"]["inputs"] and "launch0" not in doc["answer"]["inputs"]
    assert len(entry.read_text()) < len(json.dumps(computed.as_dict())) / 2
    monkeypatch.setenv("PERFKIT_STATIC_WRITE", "0")
    shutil.rmtree(tmp_path / "cache")
    kept = model.estimate(v, p, "h200")
    assert kept == computed and kept.launches[0]["grid"] == computed.launches[0]["grid"]
    assert isinstance(kept.launches[0]["grid"], tuple) and static.used() >= {("estimate", entry.stem)}
    r = model.rates("h200")
    k = stored.key(v, p, "h200", r, True, None)
    assert k == entry.stem
    faster = model.Inputs(r)
    faster["dram_bw"] = {"value": r["dram_bw"]["value"] * 2, "source": "a test"}
    assert len({k, stored.key(v, p, "h200", faster, True, None), stored.key(v, p, "h200", r, False, None),
                stored.key(v, p, "h200", r, True, 1e-5), stored.key(dataclasses.replace(v, unroll=2), p,
                                                                    "h200", r, True, None)}) == 5
    monkeypatch.setattr(model, "rates", lambda gpu: faster)
    assert model.estimate(v, p, "h200").legs["dram"] < computed.legs["dram"]  # not the kept one
    shutil.rmtree(tmp_path / "cache")
    monkeypatch.setattr(stored, "_tools", lambda: {"numba-cuda": "0.1"})
    assert stored.load(k, r) is None


def test_trip_rules_are_an_ordered_list_of_documented_rules():
    """The trip rules of perfkit.model.trips run in TRIP_RULES' order, each a named function
    whose docstring states the rule and a worked case; the package re-exports the old names."""
    from perfkit.model import trips

    names = [f.__name__ for f in trips.TRIP_RULES]
    assert names[0] == "rule_not_taken" and names[-1] == "rule_other" and len(set(names)) == len(names)
    for f in trips.TRIP_RULES:
        assert f.__doc__ and "Worked case" in " ".join(f.__doc__.split()), f.__name__
    assert model._warp_cycles is model.latency.warp_cycles and model._bank_report is model.memory.bank_report


def test_trip_rules_not_taken_outer_and_other_worked_cases():
    """The worked cases of three trip rules on a made-up nest: a loop in a dropped arm runs 0
    times; an outer loop as often as its least frequent inner loop (64 of 64 and 128); any
    other loop log2(threads) times a warp (256 threads, 10 warps: 80)."""
    from types import SimpleNamespace as NS

    from perfkit.model import trips

    loops = [NS(start=0x10, end=0x80, parent=None), NS(start=0x20, end=0x40, parent=0),
             NS(start=0x50, end=0x70, parent=0), NS(start=0x100, end=0x120, parent=None)]
    m = trips.Mix(loops=loops, trips=[None, 64.0, 128.0, None], rules=[""] * 4, warps=10, threads_per_block=256,
                  dropped=[(0x100, 0x200)])
    trips.rule_not_taken(m)
    assert m.trips[3] == 0.0 and m.trips[0] is None
    trips.rule_outer_as_inner(m)
    assert m.trips[0] == 64.0 and m.rules[0].startswith("outer: as its least frequent")
    m.trips[3] = None
    trips.rule_other(m)
    assert m.trips[3] == 80.0


# a warp-role split as ptxas writes rung 22's (sm_90a): wg = t // 128 in 64 bits (floor division:
# the sign bias, the shift by 7, the remainder's correction), tested against zero; the consumers
# fall through to their k loop and EXIT, the producer is the branch's target
_ROLE_SPLIT = [(0x00, "LDC R1, c[0x0][0x28] ;"), (0x10, "S2R R0, SR_TID.X ;"),
               (0x20, "LDC.64 R2, c[0x0][0x2c8] ;"), (0x30, "SHF.R.S32.HI R2, RZ, 0x1f, R0 ;"),
               (0x40, "SHF.R.S32.HI R3, RZ, 0x1f, R2 ;"), (0x50, "LEA.HI R8, P2, R3, R0, RZ, 0x7 ;"),
               (0x60, "LOP3.LUT R7, R8, 0xffffff80, RZ, 0xc0, !PT ;"), (0x70, "IMAD.X R9, RZ, RZ, R2, P2 ;"),
               (0x80, "IADD3 R0, P3, R0, -R7, RZ ;"), (0x90, "IMAD.X R2, R2, 0x1, ~R9, P3 ;"),
               (0xa0, "SHF.R.S64 R3, R8, 0x7, R9 ;"), (0xb0, "SHF.R.S32.HI R9, RZ, 0x7, R9 ;"),
               (0xc0, "BAR.SYNC.DEFER_BLOCKING 0x0 ;"), (0xd0, "LEA.HI.SX32 R8, P2, R2, R3, 0x1 ;"),
               (0xe0, "LEA.HI.X.SX32 R6, R2, R9, 0x1, P2 ;"), (0xf0, "ISETP.NE.U32.AND P0, PT, R8, RZ, PT ;"),
               (0x100, "ISETP.NE.AND.EX P0, PT, R6, RZ, PT, P0 ;"), (0x110, "@!P0 BRA 0x170 ;"),
               # consumers (wg != 0): the tensor work
               (0x120, "HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ ;"), (0x130, "HGMMA.64x256x16.F32 R24, gdesc[UR8], R24 ;"),
               (0x140, "STG.E desc[UR14][R2.64], R24 ;"), (0x150, "STG.E desc[UR14][R2.64+0x4], R25 ;"),
               (0x160, "EXIT ;"),
               # the producer (wg == 0): the copies
               (0x170, "UTMALDG.2D [UR8], [UR4] ;"), (0x180, "EXIT ;")]


def test_a_warp_role_split_runs_both_arms_each_in_its_warps():
    """An if/else on the warp's index in the block (``t // 128 == 0``: a warp-specialized kernel's
    producer and consumers) is not a choice of one path: both arms run at once, each in the warps
    of its role, on the same SM's schedulers and pipes.  The test against zero is not a zero
    guard here (the producer's arm used to be dropped as "the zero case"); the group of index 0
    is 2^7 = 128 threads."""
    from perfkit.model import branches
    from perfkit.model.trips import role_arms

    full = _ROLE_SPLIT
    assert branches.warp_role(full, 0x110, "@!P0") == (True, 128)
    roles: list = []
    dropped: list = []
    assert model._one_path(full, full, dropped, [], roles) == full and dropped == []
    assert roles == [(0x111, 0x170, 0x110, ("rest", 128)), (0x170, 0x181, 0x110, ("first", 128))]
    # 384 threads: the producer arm a third of the warps, the consumers two thirds
    assert [a[3] for a in role_arms(roles, 384)] == pytest.approx([2 / 3, 1 / 3])
    # without roles asked for, the rule still keeps both (and nothing is dropped)
    assert model._one_path(full) == full



def test_lane_kinds_from_one_pass_equal_a_walk_that_stops_before_the_branch(fresh_seed):
    """The model asks for a register's lane kind before every branch of a listing, and
    validate for the same listing at many problems: one pass over the listing is kept and each
    answer looked up in it.  Asked in a random order (before, at, between and past the
    instructions, the same place twice), each answer equals that of a pass over only the
    instructions before the place."""
    import random

    from perfkit.model import branches

    def stopped_before(full, at, reg):
        head = tuple((a, ins) for a, ins in full if a < at)
        if not head:
            return None, None
        _, _, hist = branches._lane_writes(head)
        idx, vals = hist.get(reg, ((), ()))
        return vals[-1] if idx else (None, None)

    rng = random.Random(fresh_seed)
    full = _ROLE_SPLIT
    places = [a + d for a, _ in full for d in (0, 1)] + [-1, 0x1000] + [a for a, _ in full][::3]
    rng.shuffle(places)
    regs = sorted({r for _, ins in full for r in re.findall(r"\bU?[RP]\d+\b", ins)})
    for at in places:
        for reg in regs:
            assert branches._lane_kind(full, at, reg) == stopped_before(full, at, reg), (hex(at), reg)
    assert branches._lane_kind(full, 0x111, "P0")[0] == branches._WARP  # the role split's test


@pytest.mark.parametrize("change", [
    ("SHF.R.S64 R3, R8, 0x7, R9", "SHF.R.S64 R3, R8, 0x4, R9"),  # t // 16: lanes of a warp differ
    ("S2R R0, SR_TID.X", "LDG.E R0, desc[UR4][R2.64]"),  # a loaded value: data, not a role
    ("S2R R0, SR_TID.X", "S2R R0, SR_CTAID.X"),  # the block index: one path for the whole block
    # the per-warp value against a parameter: a bounds check (gemm 07's row < M), not a role
    ("ISETP.NE.U32.AND P0, PT, R8, RZ, PT", "ISETP.NE.U32.AND P0, PT, R8, c[0x0][0x2f8], PT"),
])
def test_a_lane_or_block_test_is_not_a_warp_role(change):
    """The rule fires on a per-warp value of the thread index compared with a constant only: a
    shift by fewer than 5 bits leaves lanes of one warp apart, a loaded value is data, the
    block's index is the same in every warp, a warp's row against a parameter is a bounds check
    (the rule first fired there, in rungs with records, and was narrowed: MODEL_NOTES)."""
    from perfkit.model import branches

    full = [(a, ins.replace(*change)) for a, ins in _ROLE_SPLIT]
    assert branches.warp_role(full, 0x110, "@!P0")[0] is False
    roles: list = []
    kept = model._one_path(full, full, [], [], roles)
    assert roles == [] and len(kept) < len(full)


def test_a_warp_compare_with_a_multiple_of_32_is_a_role_and_an_odd_one_is_not():
    """``if t < 128`` is uniform per warp (a compare with a multiple of 32); ``if t < 100`` is not;
    ``if t == 0`` (one thread's work) is not.  Which warps take a compare's arms is not read
    (group None: each arm counted for every warp)."""
    from perfkit.model import branches

    base = [(0x00, "S2R R0, SR_TID.X ;"), (0x10, "ISETP.GE.AND P0, PT, R0, 0x80, PT ;"), (0x20, "@P0 BRA 0x50 ;"),
            (0x30, "HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ ;"), (0x40, "BRA 0x70 ;"),
            (0x50, "UTMALDG.2D [UR8], [UR4] ;"), (0x60, "NOP ;"), (0x70, "EXIT ;")]
    roles: list = []
    assert model._one_path(base, base, [], [], roles) == base
    assert roles == [(0x21, 0x50, 0x20, None), (0x50, 0x70, 0x20, None)]
    for odd in ("ISETP.GE.AND P0, PT, R0, 0x64, PT ;", "ISETP.NE.AND P0, PT, R0, RZ, PT ;"):
        listing = [(a, odd if a == 0x10 else ins) for a, ins in base]
        assert branches.warp_role(listing, 0x20, "@P0")[0] is False


def test_a_size_held_in_registers_from_parameters_is_a_zero_guard():
    """``n_k > 0`` as a 64-bit compare of registers (rung 22's consumers: K loaded by LDC into
    registers, (K + 63) // 64 computed there) is the empty-range test as the uniform-register
    one is: the arm for n_k == 0 is dropped, not the k loop.  The same compare of a register
    read by lane (the thread index) stays an ordinary if/else."""
    full = [(0x00, "S2R R0, SR_TID.X ;"), (0x10, "LDC.64 R2, c[0x0][0x2c8] ;"), (0x20, "IADD3 R5, P0, R2, 0x3f, RZ ;"),
            (0x30, "IMAD.X R6, RZ, RZ, R3, P0 ;"), (0x40, "SHF.R.S64 R3, R5, 0x6, R6 ;"),
            (0x50, "SHF.R.S32.HI R5, RZ, 0x6, R6 ;"),
            (0x60, "ISETP.GT.U32.AND P0, PT, R3, RZ, PT ;"), (0x70, "ISETP.GT.AND.EX P0, PT, R5, RZ, PT, P0 ;"),
            (0x80, "@P0 BRA 0xb0 ;"), (0x90, "CS2R R24, SRZ ;"), (0xa0, "BRA 0xf0 ;"),
            (0xb0, "HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ ;"), (0xc0, "HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;"),
            (0xd0, "HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;"), (0xe0, "NOP ;"), (0xf0, "EXIT ;")]
    # inside a consumer's arm of a warp-role split (where the rule is read; MODEL_NOTES)
    split = [(a, ins) for a, ins in _ROLE_SPLIT if a < 0x110] + [(0x110, "@!P0 BRA 0x300 ;")]
    full = split + [(a + 0x200, ins.replace("BRA 0x", "BRA 0x2") if "BRA" in ins else ins) for a, ins in full
                    if a != 0xf0] + [(0x2f0, "EXIT ;"), (0x300, "UTMALDG.2D [UR8], [UR4] ;"), (0x310, "EXIT ;")]
    dropped: list = []
    kept = [a for a, _ in model._one_path(full, full, dropped)]
    assert 0x2b0 in kept and 0x290 not in kept and dropped == [(0x281, 0x2b0)]
    lane = [(a, "SHF.R.S64 R3, R0, 0x2, R6 ;" if a == 0x240 else ins) for a, ins in full]
    kept = [a for a, _ in model._one_path(lane, lane)]
    assert 0x290 in kept and 0x2b0 not in kept  # the shorter arm, as before


def test_a_loop_runs_for_the_flops_the_rung_computes_not_the_problems():
    """The arithmetic-work trip rule counts the FLOPs the rung computes (its traffic model's), not
    the problem's: Winograd F(4x4, 3x3)'s batched GEMM does 36 products per 4x4 output tile where
    direct convolution does 144, so its loop runs a quarter of the direct count and the launch's
    FFMAs are the GEMM's (Nsight Compute on the H200 counted the GEMM's: model/ncu 1.00 with the
    rule, 2.25 without).  An implicit GEMM, whose FLOPs are the problem's, is unchanged."""
    from perfkit.kernels import conv

    p = conv.EXAMPLE_PROBLEM  # 28 x 28 outputs: 7 x 7 tiles of 4 x 4, no rounding (its builds are in the store)
    v = next(u for u in conv.LADDER if u.name == "winograd_f4")
    t = v.traffic(p)
    assert t.flops == pytest.approx(p.flops * 36 / 144)
    e = model.estimate(v, p, "h100-sxm", banks=False, stored=False)
    gemm_launch = next(L for L in e.launches if "gemm" in L["kernel"])
    # thread FFMAs: the GEMM's multiply-adds (flops / 2), within the tile rounding of the k-loop
    assert gemm_launch["ffma"] == pytest.approx(t.flops / 2, rel=0.15), (gemm_launch["ffma"], t.flops / 2)
    assert any(r.startswith("ffma work") for r in gemm_launch["trip_rules"])
    w = next(u for u in conv.LADDER if u.name == "igemm_regblock")
    assert w.traffic(p).flops == p.flops


def test_the_fp32_pipe_is_inside_the_issue_leg_where_it_takes_a_warp_instruction_a_clock():
    """Where the FP32 pipe takes a warp instruction a clock per scheduler (128 lanes an SM, as fast
    as issue), an FFMA's pipe time is inside its issue slot: with latency or issue the largest leg,
    FP32 is not the second (shared memory is); an A100's 64 lanes take two clocks a warp FFMA, so
    there FP32 can follow the issue stream and stays the second.  A SIMT GEMM rung, bound by
    latency, is estimated so on the H100 and not on the A100."""
    from perfkit.model.equations import combine

    legs = {"latency": 10.0, "issue": 9.0, "fp32": 8.0, "smem": 3.0, "dram": 1.0}
    assert combine(legs, 0.5, fp32_in_issue=True) == (10.0 + 0.5 * 3.0, 0.5)
    assert combine(legs, 0.5) == (10.0 + 0.5 * 8.0, 0.5)
    assert combine({**legs, "latency": 1.0, "fp32": 12.0}, 0.5, fp32_in_issue=True)[0] == 12.0 + 0.5 * 9.0
    v = next(u for u in gemm.LADDER if u.name == "autotuned")
    p = gemm.Problem(4096, 4096, 4096, "float32")
    for g, inside in (("h100-sxm", True), ("a100-sxm-80gb", False)):
        r = model.rates(g)
        lanes = round(r["fp32_flops"]["value"] / (2 * r["sm_count"]["value"] * r["clock_hz"]["value"]))
        assert (lanes >= 32 * r["issue_per_sm_per_clk"]["value"]) == inside, (g, lanes)
    e = model.estimate(v, p, "h100-sxm", stored=False)
    L = e.launches[0]
    assert L["bound"] == "latency" and L["legs"]["fp32"] > L["legs"]["smem"]
    top = max(L["legs"]["latency"], L["legs"]["issue"])
    second = max(x for k, x in L["legs"].items() if k not in ("latency", "issue", "fp32"))
    assert L["seconds"] == pytest.approx(top + L["overlap"] * second, rel=1e-9)


def test_validate_within_a_budget_uses_kept_estimates_and_says_how_many_it_left(tmp_path):
    """A notebook validates within a budget: past it, a record whose problem has no kept estimate
    (a grader's new problem, seconds of compiling each) is listed as not estimated and left out of
    the line, which counts it; records with a kept estimate are estimated as ever."""
    import glob
    import json

    from perfkit import paths
    from perfkit.model.validation import NOT_ESTIMATED

    src = next(f for f in sorted(glob.glob(str(paths.DATA / "results/nvidia-h200/softmax/*.json")))
               if json.loads(Path(f).read_text())["variant"] == "naive")
    d = json.loads(Path(src).read_text())
    (tmp_path / "h200" / "softmax").mkdir(parents=True)
    (tmp_path / "h200" / "softmax" / "a.json").write_text(json.dumps(d))
    cols = 3 + int.from_bytes(os.urandom(2), "little") % 4000 * 2  # odd: a problem no cache has kept (a rerun too)
    odd = {**d, "params": {**d["params"], "rows": 3, "cols": cols}, "problem": f"rows=3 cols={cols} dtype=float32 axis=-1"}
    none = tmp_path / "no-ncu.csv"  # no Nsight Compute table: the per-level check is another test's
    model.validate("h200", tmp_path, none)  # the first record's estimate kept (a fresh cache has none)
    (tmp_path / "h200" / "softmax" / "b.json").write_text(json.dumps(odd))
    table, line, _ = model.validate("h200", tmp_path, none, budget_s=0)
    by = dict(zip(table["problem"], table["bound"]))
    assert by[odd["problem"]] == NOT_ESTIMATED and by[d["problem"]] != NOT_ESTIMATED
    assert "over 1;" in line and "1 records not estimated within 0 s" in line
    table, line, _ = model.validate("h200", tmp_path, none)  # no budget: every record
    assert NOT_ESTIMATED not in set(table["bound"]) and "over 2;" in line


def test_wgmma_reads_its_shared_operands_through_the_shared_pipe():
    """wgmma (HGMMA) takes A and B from shared memory through descriptors (``gdesc``; A may come
    from registers instead), 32-byte K rows of each: a warpgroup's m64nNk16 reads (64 + N) x 32
    bytes, a quarter a warp, 128 bytes a wavefront.  Nsight Compute counts them as shared
    wavefronts: the rungs whose only other shared accesses are few (wgmma, tma,
    warp_specialized) come to 1.00-1.03 of its counts on the H100 (the model gave 0.0005-0.13
    of them before), and rung 23's 22.3 M = 21 M operand reads + its epilogue's stores."""
    both = model._pipe_counts(["HGMMA.64x128x16.F32 R24, gdesc[UR8].tnspB, R24 ;"])
    b_only = model._pipe_counts(["HGMMA.64x128x16.F32 R24, R120, gdesc[UR8], R24 ;"])
    assert both["wgmma_smem_bytes"] == (64 + 128) * 32 / 4
    assert b_only["wgmma_smem_bytes"] == 128 * 32 / 4
    assert model._pipe_counts(["HMMA.16816.F32 R4, R8, R12, R4 ;"])["wgmma_smem_bytes"] == 0
    import pandas as pd

    ncu = pd.read_csv(Path(__file__).parent.parent / "data" / "ncu" / "h100-sxm-2026-11-28.csv")
    p = gemm.Problem(m=4096, n=4096, k=4096, dtype="float16")
    for name in ("wgmma", "tma", "warp_specialized", "persistent"):
        v = next(x for x in gemm.LADDER if x.name == name)
        got = sum(L["smem_wavefronts"] for L in model.estimate(v, p, "h100-sxm").launches)
        want = float(ncu[ncu["rung"].str.endswith(" " + name)]["shared_wavefronts"].sum())
        assert 0.95 < got / want < 1.05, (name, got, want)


def _ncu_rows(table: str, op: str, name: str):
    import pandas as pd

    ncu = pd.read_csv(Path(__file__).parent.parent / "data" / "ncu" / table)
    return ncu[(ncu["op"] == op) & ncu["rung"].str.endswith(" " + name)]


@pytest.mark.skipif("conv" not in LADDERS, reason="no conv ladder")
def test_a_kernel_with_both_load_widths_takes_the_lines_its_sass_merged():
    """conv 06 `igemm_regblock`'s k-step loads its 8 A operands as 2 ``LDS.128`` (16 lanes on
    one word: 2 wavefronts each) and its 4 B operands as 4 scalar ``LDS`` (2-way conflict): a
    third of its loads wide.  The all-scalar grouping (nearer than all-merged) charged each
    ``LDS.128`` 4 phases x the scalar loads' degree (1.30 of Nsight Compute); the set of source
    lines whose merge gives the SASS's shares (A merged, B not) gives the count and the
    conflict-free count within 2% (H100 and H200: 47.17 M wavefronts, 31.72 M ideal).  Where
    two lines of one shape could each be the wide one (conv 07 `winograd`'s A and B), the
    grouping stays all-or-none."""
    conv = LADDERS["conv"]
    p = conv.Problem(n=32, c=128, h=28, w=28, k=128, r=3, s=3, stride=1, pad=1, dtype="float32", layout="NCHW")
    v = next(x for x in conv.LADDER if x.name == "igemm_regblock")
    e = model.estimate(v, p, "h100-sxm")
    row = _ncu_rows("h100-sxm-2026-11-28b.csv", "conv", "igemm_regblock")
    want, conflicts = float(row["shared_wavefronts"].sum()), float(row["shared_bank_conflicts"].sum())
    got = sum(L["smem_wavefronts"] for L in e.launches)
    ideal = sum(L["smem_ideal"] for L in e.launches)
    assert 0.98 < got / want < 1.02, (got, want)
    assert 0.98 < ideal / (want - conflicts) < 1.02, (ideal, want - conflicts)
    w = next(x for x in conv.LADDER if x.name == "winograd")
    assert model.mixed_merge(w, p, "load", {4: 5.0, 8: 0.0, 16: 1.0}) is None


def test_one_wave_with_a_block_barrier_waits_for_the_sms_l1_queue():
    """Rule "in-phase L1 queue" (launch.in_phase_lsu_cycles): in a launch of one wave, with a block
    barrier in a loop, the resident warps reach the loop's global instructions together, and L1
    takes one wavefront a clock: an iteration waits for the SM's wavefronts of that iteration
    beyond one warp's chain (7 blocks of 4 warps, 4 requests of 8 lines each: 896 cycles).  Not
    in a launch of more waves (blocks out of phase), nor without a block barrier in the loop (a
    named barrier of some warps is not one), nor without global accesses."""
    from perfkit.model.launch import in_phase_lsu_cycles

    own = {"gmem": 4, "bar": 2, "bar_part": 0}
    assert in_phase_lsu_cycles(own, 8.0, waves=1, resident_warps=28, lsu_per_clk=1) == 896
    assert in_phase_lsu_cycles(own, 8.0, waves=2, resident_warps=28, lsu_per_clk=1) == 0
    assert in_phase_lsu_cycles(dict(own, bar=0), 8.0, waves=1, resident_warps=28, lsu_per_clk=1) == 0
    assert in_phase_lsu_cycles(dict(own, bar=1, bar_part=1), 8.0, waves=1, resident_warps=28, lsu_per_clk=1) == 0
    assert in_phase_lsu_cycles(dict(own, gmem=0), 8.0, waves=1, resident_warps=28, lsu_per_clk=1) == 0
    # the real case: conv tc_ldmatrix (one wave of 784 blocks, 7 an SM, a barrier pair a k-tile):
    # its k loop is the scoreboard's chain (1568 cycles on the H100) plus the SM's wavefronts
    from perfkit.kernels import conv
    from perfkit.model.latency import warp_cycles

    p = conv.Problem(n=32, c=128, h=28, w=28, k=128, r=3, s=3, stride=1, pad=1, dtype="float16", layout="NHWC")
    v = next(x for x in conv.LADDER if x.label.endswith("tc_ldmatrix"))
    lau = model.estimate(v, p, "h100-sxm", stored=False).launches[0]
    assert lau["waves"] == 1
    k_loop = max((d for d in lau["latency_detail"] if d["loop"] != "straight"), key=lambda d: d["iterations_per_warp"])
    assert k_loop["warp_cycles"] > 1568 + 400


def test_one_branch_reader_for_the_model_reads_every_form_cuobjdump_prints():
    """The path walks (branches) and the scalar evaluator read branches through one pattern: the
    evaluator's own had no predicate operand, so `BRA !P3, 0x3030` (188 + 134 such lines in the
    store's sm_90a builds) was no branch to it, and a definition it jumped over looked dominating."""
    from perfkit.model import branches, scalars

    forms = {"BRA 0x1f0": (None, None, 0x1F0), "@!P0 BRA 0x1f0": ("@!P0 ", None, 0x1F0),
             "BRA.U.ANY 0x1f0": (None, None, 0x1F0), "BRA !P3, 0x3030": (None, "!P3, ", 0x3030),
             "@!P1 BRA !P3, 0x3030": ("@!P1 ", "!P3, ", 0x3030), "BRA.U UP0, 0x730": (None, "UP0, ", 0x730),
             "  BRA `(0x40)": (None, None, 0x40)}
    for text, (guard, operand, target) in forms.items():
        m = branches.BRANCH.match(text)
        assert m and (m.group(1), m.group(2), int(m.group(3), 16)) == (guard, operand, target), text
    assert not branches.BRANCH.match("BRX R2 -0x10") and not branches.BRANCH.match("CALL.REL 0x40")
    lines = [(0x00, "MOV R2, c[0x0][0x210]"), (0x10, "BRA !P3, 0x30"), (0x20, "MOV R2, 0x1"), (0x30, "EXIT")]
    assert scalars.Evaluator(lines, {}).branches == [(0x10, 0x30)]
