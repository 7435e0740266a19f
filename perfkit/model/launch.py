"""One launch's estimate (:func:`launch_estimate`: counts, traffic, legs, combination)
and the sequence's (:func:`estimate`); a library call's roofline (:func:`library_estimate`)."""
from __future__ import annotations

import math

from .. import model as _pkg  # rates() through the package: tests monkeypatch model.rates
from . import stored as kept
from .equations import LEGS, Estimate, combine, flush_seconds, latency_leg, launch_sequence, resource_legs
from .inputs import Inputs
from .latency import latencies, warp_cycles
from .memory import (bank_degrees, bank_per_access, coalesce_factor, dirty_at_end, guarded_activity, l2_rereads,
                     l2_tag_traffic, launch_weights, lines_per_request, mixed_merge, panel_reads, partly_written_sectors,
                     requested_bytes, requested_bytes_by_work, shared_wavefronts, simulated_launch, wide_global)
from .pipes import add_counts
from .plans import array_bytes, inspect_launch, is_dense, plan_launches, traffic_for
from .trips import dynamic_mix


def launch_estimate(variant, problem, launch, k, r: Inputs, traffic, share, *, use_banks: bool,
                     launch_l1: float | None = None) -> dict:
    """Launch ``k`` of the rung on the target of the rates ``r``: its compiled kernel, its dynamic
    mix (:func:`perfkit.model.trips.dynamic_mix`), its traffic (``share`` of the rung's, or
    ``launch_l1`` bytes from the simulation; :mod:`perfkit.model.memory`), its legs, latency and
    combination (:mod:`perfkit.model.equations`).  A global load's latency in the scoreboard: back
    from L1 if the batch hit (the simulated block's hit rate), else from L2 or, for the DRAM
    share of L2's traffic, from DRAM, where a request that touches n lines waits for the slowest:
    ``latency_dram_clk`` + the fitted ``dram_latency_spread_clk`` x H(n), H the harmonic number
    (the expected largest of n exponential waits)."""
    cc = r["compute_capability"]["value"]
    rep = inspect_launch(variant, problem, cc, k)
    sms, clk = r["sm_count"]["value"], r["clock_hz"]["value"]
    blocks = 1
    for g in launch.grid:
        blocks *= int(g)
    tpb = 1
    for b in launch.block:
        tpb *= int(b)
    wpb = -(-tpb // 32)
    warps = blocks * wpb
    bps = max(rep.occupancy.blocks_per_sm, 1)
    per_sm = blocks / sms
    busiest = math.ceil(per_sm)
    tail = busiest / per_sm if per_sm > 0 else 1.0
    waves = math.ceil(blocks / (sms * bps))
    resident_blocks = min(bps, busiest)
    warps_per_sched = max(resident_blocks * wpb / 4.0, 1e-9)
    dense = is_dense(problem)
    l2_total = traffic.l2_bytes if traffic.l2_bytes is not None else traffic.dram_bytes
    # what the global instructions move (the trip counts of sweeping loops), before L1 hits
    l1_total = traffic.l1_bytes if traffic.l1_bytes is not None else l2_total
    # the extent of a 2-D walk's inner loop: the last dimension of the largest 2-D argument
    two_d = [a for a in launch.args if len(getattr(a, "shape", ()) or ()) >= 2]
    inner_extent = int(max(two_d, key=lambda a: math.prod(a.shape)).shape[-1]) if two_d else None
    # the bytes this launch's global instructions move: from the simulation where it says
    # (each launch's own accesses scaled to the problem), else the launch's share of the rung's
    # the workspace this launch is passed (partial sums a loop may clear before accumulating)
    clear = array_bytes([a for a in launch.args if getattr(a, "workspace", False)])[2]
    # the warps of a block that hold a thread of x index 0 (where `if t == 0:` code runs)
    bx = int(launch.block[0]) if len(launch.block) else 1
    rows = tpb // max(bx, 1)
    solo_warps = len({(y * bx) // 32 for y in range(rows)}) or 1
    dyn = dynamic_mix(rep, problem, launch_bytes=launch_l1 if launch_l1 else l1_total * share, dense=dense,
                      warps=warps, threads_per_block=tpb, inner_extent=inner_extent, clear_bytes=clear,
                      work_flops=traffic.flops, solo_warps=solo_warps, args=launch.args, cc=cc,
                      dynamic_shared=int(getattr(launch, "shared_bytes", 0) or 0))
    c = dyn["counts"]
    has_smem = (sum(c["lds"].values()) + sum(c["sts"].values())) > 0
    ld_vec = False
    if use_banks and has_smem:
        # the SASS decides whether runs of a thread's accesses became 64/128-bit instructions
        # (loads and stores apart): the simulated grouping (merged runs or one access per
        # element) whose share of wide accesses is nearer the executed SASS's
        def merged(kind, counts):
            wide = (counts[8] + counts[16]) / max(sum(counts.values()), 1e-9)
            sim = {vec: bank_per_access(variant, problem, vec).get("accesses", {}) for vec in (True, False)}

            def share(a):
                tot = sum(n for (k, _), n in a.items() if k == kind)
                return sum(n for (k, w), n in a.items() if k == kind and w >= 8) / tot if tot else 0.0
            if not sim[True]:
                return wide > 0.25
            return abs(share(sim[True]) - wide) < abs(share(sim[False]) - wide)
        ld_vec = merged("load", c["lds"])
        st_vec = merged("store", c["sts"])
        ldd, _, bsrc = bank_degrees(variant, problem, ld_vec)
        _, std, bsrc2 = bank_degrees(variant, problem, st_vec)
        bsrc = bsrc if bsrc == bsrc2 else f"loads: {bsrc}; stores: {bsrc2}"
    else:
        ldd, std, bsrc = 1.0, 1.0, "no shared accesses" if use_banks else "banks off: conflict free assumed"
    # the shared-memory pipe (MIO) also carries every warp shuffle (one wavefront each), and
    # Nsight Compute counts one more per read of the thread index (S2R SR_TID.*: 1 per warp in
    # kernels with no shared accesses or shuffles that read threadIdx.x once, 2 in the naive
    # GEMMs, which read .x and .y; shuffles + 1 per warp in the multirow row norms)
    mio_extra = c["shfl"] + c["s2r_tid"]
    guarded = guarded_activity(variant, problem, k, dyn, wpb, ld_vec, st_vec) if use_banks and has_smem else None
    if guarded is not None:
        # the warps that branch around a guarded block skip all of it
        add_counts(c, guarded["counts"], -(1.0 - guarded["active"]) * warps)
    per_access = {"wavefronts": {}, "ideal": {}}
    if use_banks and has_smem:
        for kind, vec, sass in (("load", ld_vec, c["lds"]), ("store", st_vec, c["sts"])):
            # where the SASS has both widths of the kind, the lines it merged, not all or none
            sim = mixed_merge(variant, problem, kind, sass) or bank_per_access(variant, problem, vec)
            for what in per_access:
                per_access[what].update({k: v for k, v in sim.get(what, {}).items() if k[0] == kind})
    # wgmma reads its shared operands through the same pipe, 128 bytes a wavefront (swizzled:
    # conflict free)
    mio_extra += c.get("wgmma_smem_bytes", 0) / 128.0
    wavefronts = shared_wavefronts(c, ldd, std, per_access["wavefronts"]) + mio_extra
    ideal = shared_wavefronts(c, 1.0, 1.0, per_access["ideal"]) + mio_extra
    dram_bytes = traffic.dram_bytes * share
    panel = panel_reads(problem, launch.grid, bps, sms, int(traffic.extra.get("group_m", 1))) if dense else None
    dram_src = "the rung's traffic model"
    if panel is not None:
        # a tiled matrix product: each wave of resident blocks reads its distinct A and B panels
        dram_bytes += max(0.0, panel["reads"] - panel["compulsory"]) * share
        dram_src = (f"panels per wave: {panel['waves']} waves of {panel['per_wave']} blocks "
                    f"({panel['tile'][0]}x{panel['tile'][1]} tiles) read {panel['reads'] / 1e6:.0f} MB of A and B")
    l2_bytes = l2_total * share
    l1_bytes = l1_total * share
    # the bytes the instructions ask for (the simulated twin's, scaled) where known: the rung's
    # L1 bytes may count sectors (NHWC batchnorm: 8 of them per useful float)
    asked = launch_l1 if launch_l1 else l1_bytes
    # the simulated twin's tallies of this launch (re-reads, store fill, sector fill, L1 hits)
    gsim = simulated_launch(variant, problem, k) if use_banks and not dense else None
    reread_to_dram = None
    if not dense and l1_bytes > dram_bytes * 1.05 and r["l2_size_bytes"]["value"] and use_banks:
        dram_bytes, src, reread_to_dram = l2_rereads(gsim, dram_bytes=dram_bytes, asked=asked, blocks=blocks,
                                                     resident=min(blocks, sms * bps), workspace=clear,
                                                     rows_in_turn=dyn.get("rows_in_turn", 1.0), r=r)
        dram_src = src or dram_src
    if gsim and r["l2_size_bytes"]["value"]:
        extra = partly_written_sectors(gsim, requested_bytes(variant, problem, k, array_bytes(launch.args)[2]), r)
        if extra is not None:
            dram_bytes += extra[0]
            dram_src += extra[1]
    l2_tag_bytes = l2_tag_traffic(l2_bytes, dram_bytes, dense=dense, gsim=gsim, fabric=r["l2_fabric_fraction"]["value"])
    # lines per global request: simulated where the bank simulation runs anyway (shared accesses)
    # or where the rung's L1 bytes say its accesses are not coalesced; else 1 per those bytes
    guess = coalesce_factor(traffic, c, l1_bytes)
    lines, lsrc = None, "banks off" if not use_banks else "coalesced by the rung's L2 bytes: not simulated"
    if use_banks and (has_smem or guess > 1.0):
        lines, lsrc = lines_per_request(variant, problem, k, c, vectorize=ld_vec if has_smem else None)
    if lines is None:
        lines, lsrc = guess, f"from the rung's L2 bytes ({lsrc})"
    lsu_wavefronts = c["gmem"] * lines
    # what Nsight Compute counts (a clean L2 before the kernel): the writes still dirty in L2
    # at its end escape (memory.dirty_at_end); a launch writes at most the arrays that are not
    # inputs.  The timed window is charged all of them: its flush leaves L2 full of dirty lines
    # that the kernel's own traffic writes back in their place (docs/MODEL_NOTES.md)
    written = min(32.0 * sum(n * w for (kind, w), n in c["gw"].items() if kind == "store"),
                  array_bytes([a for a in launch.args if not getattr(a, "is_input", False)])[2])
    dirty = dirty_at_end(written, dram_bytes, r)
    legs = resource_legs(c, dram_bytes=dram_bytes, l2_bytes=l2_bytes, wavefronts=wavefronts,
                         lsu_wavefronts=lsu_wavefronts, tail=tail, r=r)
    # latency: one warp's cycles per iteration of each loop (an in-order scoreboard over the
    # SASS: an instruction issues when its operands are ready), against the issue cycles of the
    # warps sharing a scheduler; waves of resident blocks
    miss = min(1.0, max(0.0, dram_bytes / l1_bytes)) if l1_bytes else 1.0
    lat = latencies(r, miss, ldd)
    # global loads: L1 hits from the simulated block's accesses (a thread's own sectors touched
    # again soon), else from the bytes; a miss goes to L2, and to DRAM for the DRAM share of what
    # reaches L2, where a request waits for the slowest of its lines
    sim = gsim
    pre = "l1v_" if wide_global(c, loads=True) else "l1s_"
    nreq = (sim.get(pre + "load_requests_hit", 0) + sim.get(pre + "load_miss_requests", 0)) if sim else 0
    if nreq:
        nmiss = sim[pre + "load_miss_requests"]
        miss_p = nmiss / nreq
        miss_lines = sim[pre + "load_miss_lines"] / nmiss if nmiss else 1.0
        to_dram = sim[pre + "load_miss_dram"] / nmiss if nmiss else 0.0
        # the simulated twin fits in L2, so its re-reads hit there; where the launch's do not
        # (the re-read rule above, or a traffic model whose DRAM bytes are what the
        # instructions ask for: every sweep from DRAM), they wait on DRAM as the first reads do
        if reread_to_dram is not None:
            to_dram = max(to_dram, reread_to_dram)
        if asked:
            to_dram = max(to_dram, min(1.0, dram_bytes / asked))
    else:
        miss_p = min(1.0, max(0.0, l2_bytes / l1_bytes)) if l1_bytes else 1.0
        miss_lines = min(max(lines, 1.0), 32.0)
        to_dram = min(1.0, max(0.0, dram_bytes / l2_bytes)) if l2_bytes else 1.0
    harmonic = sum(1.0 / i for i in range(1, int(round(miss_lines)) + 1))
    l_dram = r["latency_dram_clk"]["value"] + r["dram_latency_spread_clk"]["value"] * harmonic
    lat.update(global_hit=r["latency_l1_clk"]["value"], miss_p=miss_p,
               global_miss=r["latency_l2_clk"]["value"] + to_dram * (l_dram - r["latency_l2_clk"]["value"]))
    w = warps_per_sched
    loops = rep.loops
    own_pairs, straight_pairs = dyn["bodies"]  # each loop's own body, one arm per if/else
    per_loop = []
    # warp-role arms (both run, each in its warps): a loop or straight code in one is charged to
    # that role, its iterations per warp over the role's warps
    arms = dyn.get("roles") or []

    def arm_of(a):
        hit = [k for k, (lo, hi, _, _) in enumerate(arms) if lo <= a < hi]
        return hit[-1] if hit else None
    for i, lp in enumerate(loops):
        t = dyn["trips"][i]
        if not t:
            continue
        body = [ins for _, ins in own_pairs[i]]
        cyc = warp_cycles(body, lat, loop=True)
        cyc += in_phase_lsu_cycles(dyn["own"][i], lines, waves=waves, resident_warps=resident_blocks * wpb,
                                   lsu_per_clk=r["lsu_per_sm_per_clk"]["value"])
        role = arm_of(lp.start)
        share = arms[role][3] if role is not None else 1.0
        n = t / (warps * share)
        n_instr = dyn["own"][i]["instr"]
        per_loop.append({"loop": i, "iterations_per_warp": n, "warp_cycles": cyc, "issue_cycles": w * share * n_instr,
                         "role": role})
    for role in [None] + list(range(len(arms))):
        part = [ins for a, ins in straight_pairs if arm_of(a) == role]
        if role is not None and not part:
            continue
        share = arms[role][3] if role is not None else 1.0
        per_loop.append({"loop": "straight" if role is None else f"straight (role arm {role})", "iterations_per_warp": 1,
                         "warp_cycles": warp_cycles(part, lat, loop=False),
                         "issue_cycles": w * share * len([x for x in part if not x.strip().startswith("NOP")]),
                         "role": role})
    # the roles run at once: each split's time is its longest arm's (the critical path)
    common = [p for p in per_loop if p["role"] is None]
    by_split: dict = {}
    for k, (_, _, split, _) in enumerate(arms):
        by_split.setdefault(split, []).append([p for p in per_loop if p["role"] == k])
    chosen = common + [p for arm_list in by_split.values() for p in max(
        arm_list, key=lambda ps: sum(p["iterations_per_warp"] * max(p["warp_cycles"], p["issue_cycles"]) for p in ps))]
    legs["latency"] = latency_leg([(p["iterations_per_warp"], p["warp_cycles"], p["issue_cycles"]) for p in chosen],
                                  waves, clk)
    # one block per SM and barriers: its warps load, wait and compute in lock step (equations.combine)
    has_barrier = any(c2["bar"] for c2 in dyn["own"]) or dyn["straight"]["bar"]
    if arms and not any(c2["bar"] - c2.get("bar_part", 0) for i, c2 in enumerate(dyn["own"]) if dyn["trips"][i]):
        # warp roles that meet on mbarriers, with no block barrier in any loop that runs (a
        # warp-specialized pipeline): the producer runs ahead of the consumers, so their legs
        # overlap as separate blocks' do; the one barrier before the split is not a lock step,
        # nor is a named barrier of one role's warps (rung 23's epilogue: bar.sync 1+w, 128)
        has_barrier = False
    # an FP32 pipe as fast as issue (warp FFMAs an SM a clock >= warp instructions issued) is inside the issue legs
    # (FP32 lanes an SM from the datasheet's rate, rounded: 66.9 TFLOP/s at 1980 MHz is 127.98 lanes)
    fp32_lanes = round(r["fp32_flops"]["value"] / (2.0 * sms * clk))
    seconds, overlap = combine(legs, r["overlap"]["value"], lock_step=resident_blocks <= 1 and has_barrier,
                               fp32_in_issue=fp32_lanes >= 32 * r["issue_per_sm_per_clk"]["value"])
    bound = max(legs, key=legs.get)
    return {"kernel": rep.kernel_name, "grid": tuple(launch.grid), "block": tuple(launch.block), "blocks": blocks,
            "warps": warps, "registers": rep.registers, "blocks_per_sm": bps, "occupancy": rep.occupancy.ratio,
            "waves": waves, "tail": tail, "overlap": overlap, "dram_source": dram_src, "rows_in_turn": dyn.get("rows_in_turn", 1.0), "warps_per_scheduler": warps_per_sched, "share": share,
            "legs": legs, "seconds": seconds, "bound": bound,
            "warp_instructions": c["instr"], "ffma": c.get("ffma_thread", c["ffma"]) * 32, "smem_wavefronts": wavefronts,
            "smem_ideal": ideal, "smem_conflicts": wavefronts - ideal, "bank_degree_load": ldd,
            "bank_degree_store": std, "bank_source": bsrc, "dram_bytes": dram_bytes, "l2_bytes": l2_bytes,
            "dram_bytes_profiled": dram_bytes - dirty, "l1_bytes": l1_bytes, "l2_tag_bytes": l2_tag_bytes,
            "lsu_wavefronts": lsu_wavefronts, "trips": dyn["trips"], "trip_rules": dyn["rules"],
            "hot_loop": str(rep.hot_loop) if rep.hot_loop else None, "latency_detail": per_loop,
            "roles": role_lines(lines_of(rep), arms, wpb),
            "latencies_clk": lat}


def in_phase_lsu_cycles(own: dict, lines: float, *, waves: int, resident_warps: float, lsu_per_clk: float) -> float:
    """Cycles one iteration of a loop waits, beyond one warp's chain, for L1 to take the global
    requests of every warp resident on the SM (rule "in-phase L1 queue").  In a launch of one
    wave every block starts at once and runs the same code; a block barrier in the loop keeps a
    block's warps together each iteration, so the resident warps reach the loop's global
    instructions in the same window, and L1TEX takes one wavefront (line) a clock
    (``lsu_per_sm_per_clk``): the block waits at its barrier for its last warp's request, which
    is behind the other warps' (Nsight Compute's "LG throttle" / "long scoreboard" stalls).  The
    loop's iteration is then one warp's chain plus the SM's wavefronts of that iteration, where
    Little's law with overlapping warps (max(chain, issue)) would hide them.  0 in a launch of
    more than one wave (blocks start as others end, out of phase), or where the loop has no
    block barrier or no global access.  Test
    ``test_one_wave_with_a_block_barrier_waits_for_the_sms_l1_queue``; evidence (docs/MODEL_NOTES.md,
    "Warp instructions", Cause 2): the conv tensor-core rungs 10-15 (one wave, a barrier a
    k-tile) from 0.54-0.75 of their H200 records to 0.66-0.90, validate H200 12% -> 10%."""
    if waves != 1 or not own.get("gmem") or not (own.get("bar", 0) - own.get("bar_part", 0)):
        return 0.0
    return own["gmem"] * max(lines, 1.0) * resident_warps / max(lsu_per_clk, 1e-9)


def lines_of(rep):
    from ..anatomy import sass_lines

    return sass_lines(rep.sass)


def role_lines(lines, arms, wpb: int) -> list[str]:
    """Which warps do what in a warp-role split: per arm, its warps a block and what its code
    holds (tensor-core MMAs, TMA copies, mbarrier waits, global stores)."""
    out = []
    for lo, hi, split, share in arms:
        arm = [ins.strip() for a, ins in lines if lo <= a < hi]
        what = [name for name, pat in (("wgmma/mma", ("HGMMA", "HMMA")), ("TMA loads", ("UTMALDG",)),
                                       ("TMA stores", ("UTMASTG",)), ("mbarrier waits", ("SYNCS.PHASECHK",)),
                                       ("global stores", ("STG",))) if any(x in i for i in arm for x in pat)]
        who = f"{share * wpb:g} of {wpb} warps a block" if share < 1.0 else f"warps unknown (counted in all {wpb})"
        out.append(f"split at {split:#x}, arm {lo:#x}-{hi:#x}: {who}: {', '.join(what) or 'other work'}")
    return out


def library_estimate(variant, problem, r: Inputs, traffic) -> Estimate:
    """Oracles and peers (library calls): the roofline of their Traffic over the datasheet peaks
    (tensor peak for fp16 dense ops) plus one library call's cost, bound ``"library (roofline)"``."""
    peak = r["fp32_flops"]["value"]
    pk = (traffic.extra or {}).get("peak", "fp32")
    if str(pk).startswith("tensor") or getattr(problem, "dtype", "float32") == "float16" and is_dense(problem):
        peak = r["tensor_fp16_flops"]["value"] or peak
    legs = {k: 0.0 for k in LEGS}
    legs["dram"] = traffic.dram_bytes / (r["dram_bw"]["value"] * r["dram_efficiency"]["value"])
    legs["fp32" if peak == r["fp32_flops"]["value"] else "tensor"] = traffic.flops / peak
    legs["launch"] = r["library_call_s"]["value"]
    secs = max(legs["dram"], legs["fp32"], legs["tensor"]) + legs["launch"]
    return Estimate(seconds=secs, bound="library (roofline)", legs=legs, inputs=dict(r), launches=[],
                    variant=variant.label, problem=problem.label)


def timer_ahead(r, host_s: list) -> tuple[float, str]:
    """Seconds of GPU work today's timer queues ahead of a sample, and their source: the
    **timer's spin** rule.  :func:`perfkit.timing.measure` queues the cold-L2 flush (2 x L2
    written, :func:`flush_seconds`), then a one-thread spin kernel of
    :func:`perfkit.timing.spin_length` of the host's enqueue time of the whole sequence (at
    least twice it plus 10 us), then the start event; the host launches the rung's kernels while
    the GPU flushes and spins, so none of their launch cost reaches the timed window.  Every
    record since 2026-11-24 was taken so (``extra["spin_s"]``; ``validate`` and the cards
    estimate a record with its own flush and spin, :func:`perfkit.model.record_ahead`).  An
    estimate made before a record (the static baseline, a card with no record yet, the sweep of
    a network's layers) predicts what that timer will measure.  Evidence: the single-launch
    records behind the spin sit 2.5-11 us above Nsight Compute's kernel durations at the same
    commit and problem (H200: softmax, rmsnorm and layernorm tuned and multirow 2.5-7.2 us;
    batchnorm fused, warp and welford, 8 array arguments, a modelled host cost of 74 us against
    a 37 us flush, 7.8-10.6 us; GEMM rungs 16-23 on both GPUs -1.9 to +6.8 us), where the
    flush-only timer of 7c7b2e0 showed 3-29 us of host time (MODEL_NOTES).  ``host_s``:
    each launch's modelled host cost; a GPU whose L2 size ``devices.yaml`` does not give
    gets the spin alone (it outlasts the host's enqueue either way)."""
    from ..timing import spin_length

    spin = spin_length(sum(host_s)) if host_s else 0.0
    flush = flush_seconds(r)
    if flush is None:
        return spin, ("today's timer: its spin kernel (timing.spin_length of the modelled host enqueue); "
                      "the cold-L2 flush ahead of it of unknown length (no L2 size in devices.yaml)")
    return flush + spin, ("today's timer: the cold-L2 flush (2 x L2 at dram_bw x dram_efficiency) and its spin "
                          "kernel (timing.spin_length of the modelled host enqueue)")


def estimate(variant, problem, gpu: str = "h100-sxm", *, banks: bool = True,
             ahead_s: float | None = None, stored: bool = True) -> Estimate:
    """Predicted median time of one launch sequence of ``variant`` on ``problem`` on ``gpu``
    (a key or alias of ``data/devices.yaml``), from static inputs only (the steps: :mod:`perfkit.model`'s map;
    the equations: :mod:`perfkit.model.equations`).  ``banks=False`` skips the bank-conflict simulation (conflict-free
    shared memory assumed).  ``ahead_s``: seconds of GPU work queued ahead of the sequence
    while the host launches it, which hide that much of the host's launch cost (default: what
    today's timer queues, the cold-L2 flush and a spin longer than the host's enqueue,
    :func:`timer_ahead`; a record's own: :func:`perfkit.model.record_ahead`; the flush-only timer
    of older records: ``ahead_s=flush_seconds(rates(gpu))``).  ``stored=False`` computes it even where one is kept (local cache,
    static store: :mod:`perfkit.model.stored`)."""
    from ..kernels.base import Problem, Variant

    if not isinstance(variant, Variant) or not isinstance(problem, Problem):
        raise TypeError("estimate(variant, problem, gpu): pass a perfkit Variant and Problem")
    r = _pkg.rates(gpu)
    if not stored:
        return _estimate(variant, problem, gpu, r, banks, ahead_s)
    k = kept.key(variant, problem, gpu, r, banks, ahead_s)
    e = kept.load(k, r)
    if e is None:
        e = _estimate(variant, problem, gpu, r, banks, ahead_s)
        kept.keep(k, e, r)
    return e


def _estimate(variant, problem, gpu: str, r: Inputs, banks: bool, ahead_s: float | None) -> Estimate:
    traffic = traffic_for(variant, problem, r)
    if variant.oracle:
        e = library_estimate(variant, problem, r, traffic)
        e.gpu = gpu
        return e
    launches = plan_launches(variant, problem, r)
    if not launches:
        e = library_estimate(variant, problem, r, traffic)
        e.gpu = gpu
        return e
    sizes = [array_bytes(l.args) for l in launches]
    weights = launch_weights(variant, problem, sizes) if banks else None
    if weights is None and banks and len(sizes) == 1 and traffic.l1_bytes is None:
        # one launch whose traffic model gives L2 bytes only: where its accesses do not
        # coalesce (NHWC batchnorm: one useful float per 32-byte sector; NHWC direct_halo's
        # tile loads, one channel at a time: 8 sectors per element in its L2 bytes) those are
        # several times what its instructions ask for, and would multiply its loops' trips;
        # the simulated twin's requested bytes scaled to the problem count them instead (by the
        # arrays' bytes).  In a dense op, scaled by the FLOPs (same tiles, more of them: a block
        # reads its input again for each group of output channels), and only where the rung's
        # L2 bytes are over 1.5x those (uncoalesced, as memory.coalesce_factor reads them):
        # sectors fetched for a fraction of their bytes.  Fewer are L1 hits, and a tiled
        # product's tile loads are what its traffic model counts (kept)
        if is_dense(problem):
            w = requested_bytes_by_work(variant, problem, 0)
            declared = traffic.l2_bytes if traffic.l2_bytes is not None else traffic.dram_bytes
            w = w if w and 1.5 * w < declared else None
        else:
            w = requested_bytes(variant, problem, 0, sizes[0][2])
        weights = [w] if w else None
    simulated = weights is not None
    if weights is None:
        weights = [s[2] for s in sizes]
    if not any(weights):
        # no launch names a byte: its arrays reach the kernel only through TMA tensor maps (rung 23
        # loads and stores by the copy engine alone), so the launches share the rung's traffic
        # evenly, not as a share of zero (a DRAM leg of 0)
        simulated, weights = False, [1.0] * len(weights)
    tot = sum(weights) or 1.0
    per = []
    for k, (l, (na, ns, nb)) in enumerate(zip(launches, sizes)):
        per.append(launch_estimate(variant, problem, l, k, r, traffic, weights[k] / tot, use_banks=banks,
                                    launch_l1=weights[k] if simulated else None))
        per[-1]["host_s"] = r["host_base_s"]["value"] + na * r["host_per_array_arg_s"]["value"] \
            + ns * r["host_per_scalar_arg_s"]["value"]
    # the launch sequence: the host issues launches back to back while the GPU works through
    # what was queued ahead of them (the L2 flush of a cold-L2 timing: ``ahead``), then runs
    # them in order; launch i is queued at H_i = h_0 + ... + h_i - ahead (time 0: the start
    # event, when the GPU finishes the work ahead) and starts at max(H_i, end of launch i-1).
    # Host cost shows where it outlasts the work ahead (first launch) or the kernels before
    if ahead_s is None:
        ahead, ahead_src = timer_ahead(r, [p["host_s"] for p in per])
    else:
        ahead, ahead_src = max(float(ahead_s), 0.0), "given"
    end = launch_sequence([p["host_s"] for p in per], [p["seconds"] for p in per], ahead,
                          r["launch_latency_s"]["value"])
    busy = sum(p["seconds"] for p in per)
    legs = {k: sum(p["legs"].get(k, 0.0) for p in per) for k in LEGS if k != "launch"}
    legs["launch"] = end - busy
    bound = max(legs, key=legs.get)
    inputs = dict(r)
    inputs["traffic"] = {"value": traffic.as_dict(), "source": f"{variant.label}.traffic(problem)"}
    inputs["ahead_s"] = {"value": ahead, "source": "GPU work queued ahead of the sequence: " + ahead_src}
    for i, p in enumerate(per):
        inputs[f"launch{i}"] = {"value": {k: v for k, v in p.items() if k not in ("legs",)},
                                "source": "perfkit.anatomy (compiled for sm_%d%d) and perfkit.banks" % tuple(r["compute_capability"]["value"])}
    return Estimate(seconds=end, bound=bound, legs=legs, inputs=inputs, launches=per, gpu=gpu,
                    variant=variant.label, problem=problem.label)
