"""Memory-level traffic: what the bank and access simulation of a small twin of the problem
(:mod:`perfkit.banks`) says about shared wavefronts, L1 lines per request, each launch's bytes
and the warps that take a guarded block; and the DRAM panels of a tiled matrix product."""
from __future__ import annotations

import functools

from .branches import guarded
from .pipes import opcode, pipe_counts


def panel_reads(problem, grid, blocks_per_sm: int, sms: int, group_m: int = 1) -> dict | None:
    """DRAM reads of a tiled matrix product C[m, n] = A[m, k] @ B[k, n] whose 2-D grid of
    blocks tiles C (``grid = (n / BN, m / BM)``, blockIdx.x fastest): the blocks resident at
    once (a wave: SMs x blocks per SM, in launch order) read the A panels (BM x k) of their
    distinct block rows and the B panels (k x BN) of their distinct block columns from DRAM
    once, sharing them through L2 while they walk k together; the next wave reads its panels
    again.  None where the launch is not such a grid (or the problem has no m, n, k).  Worked
    case: what Nsight Compute counted on the H100 for the 64x64 and 128x128 tile rungs at
    4096^3 fp32: 2182 and 619 MB.  ``group_m`` > 1: the kernel maps the linear block index to
    tiles in groups of ``group_m`` block rows, walking down a group's rows before moving right
    (Triton's grouped ordering; the traffic's ``extra["group_m"]``)."""
    try:
        m, n, k = int(problem.m), int(problem.n), int(problem.k)
        import numpy as np

        es = int(np.dtype(problem.dtype).itemsize)
    except (AttributeError, TypeError, ValueError):
        return None
    if not isinstance(grid, (tuple, list)) or len(grid) < 2:
        return None  # a 1-D grid: the block -> tile mapping is the kernel's own
    g = [int(x) for x in (list(grid) + [1, 1])[:3]]
    gx, gy = g[0], g[1]
    if g[2] != 1 or gx < 1 or gy < 1 or gx * gy < 2:
        return None
    bn, bm = -(-n // gx), -(-m // gy)
    if (gx - 1) * bn >= n or (gy - 1) * bm >= m:  # not a tiling of C
        return None
    blocks = gx * gy
    per_wave = max(1, int(sms) * max(int(blocks_per_sm), 1))
    reads = 0.0
    waves = 0
    if group_m > 1:
        import numpy as np

        pid = np.arange(blocks)
        gsize = group_m * gx
        first = (pid // gsize) * group_m
        gm = np.minimum(gy - first, group_m)
        row = first + (pid % gsize) % gm
        col = (pid % gsize) // gm
        reads = 0.0
        waves = 0
        for b in range(0, blocks, per_wave):
            rows = len(np.unique(row[b:b + per_wave]))
            cols = len(np.unique(col[b:b + per_wave]))
            reads += (min(rows * bm, m) * k + min(cols * bn, n) * k) * es
            waves += 1
        return {"reads": reads, "compulsory": float((m * k + k * n) * es), "waves": waves,
                "per_wave": per_wave, "tile": (bm, bn)}
    for b in range(0, blocks, per_wave):
        e = min(blocks, b + per_wave)
        # distinct block rows and columns among blocks b .. e-1 (row-major over the grid)
        rows = (e - 1) // gx - b // gx + 1
        if e - b >= gx:
            cols = gx
        elif rows == 1:
            cols = (e - 1) % gx - b % gx + 1
        else:  # wraps once onto the next block row
            cols = min(gx, (gx - b % gx) + (e - 1) % gx + 1)
        reads += (min(rows * bm, m) * k + min(cols * bn, n) * k) * es
        waves += 1
    return {"reads": reads, "compulsory": float((m * k + k * n) * es), "waves": waves,
            "per_wave": per_wave, "tile": (bm, bn)}


def shared_wavefronts(counts: dict, ld_degree: float, st_degree: float, per_access: dict | None = None) -> float:
    """Shared wavefronts of the SASS counts: per instruction of a width, the simulated
    wavefronts per access of that kind and width where the simulation has such accesses
    (``per_access``: (kind, width) -> wavefronts per access), else the conflict-free phases
    (1, 2, 4 for 32/64/128-bit) times the kind's degree.  (The launch adds one per warp shuffle,
    which crosses the same pipe, and one per read of the thread index, ``S2R SR_TID.*``: Nsight
    Compute's count on the H100, 1 per warp in kernels that read threadIdx.x once, 2 in the
    2-D-block naive GEMMs.)  Worked case: an LDS.128 counts 4 wavefronts without a simulation;
    a warp-uniform one simulates to 2 (half-warp phases for 64/128-bit)."""
    phases = {4: 1, 8: 2, 16: 4}
    per_access = per_access or {}
    ld = sum(n * per_access.get(("load", w), phases[w] * ld_degree) for w, n in counts["lds"].items())
    st = sum(n * per_access.get(("store", w), phases[w] * st_degree) for w, n in counts["sts"].items())
    return ld + 4 * counts["ldsm"] * ld_degree + st


@functools.lru_cache(maxsize=4096)
def bank_report(variant, problem, vectorize: bool = True):
    """``(report, twin, why)``: the bank simulation of the problem's small twin
    (:func:`perfkit.banks.count`, cached on disk and here, read-only), or ``(None, None,
    why)`` where it cannot be simulated (the simulation failed).  A GPU process gets it too:
    banks.count runs the simulation in a simulator child there."""
    from .. import banks

    try:
        small = banks.small_problem(variant, problem)
        return banks.count(variant, small, vectorize=vectorize), small, ""
    except Exception as exc:  # noqa: BLE001
        return None, None, f"not simulated ({exc.__class__.__name__})"


@functools.lru_cache(maxsize=4096)
def bank_per_access(variant, problem, vectorize: bool = True) -> dict:
    """{"wavefronts": {(kind, width): per access}, "ideal": {...}}: the simulated wavefronts
    (and conflict-free ones) per warp-wide shared access of that kind and width, from the
    small twin's bank simulation; {} where it cannot be simulated."""
    rep = bank_report(variant, problem, vectorize)[0]
    if rep is None:
        return {}
    acc: dict = {}
    for site in rep.sites:
        a = acc.setdefault((site["kind"], int(site["width"])), [0, 0, 0])
        a[0] += site["wavefronts"]
        a[1] += site["ideal"]
        a[2] += site["accesses"]
    return {"wavefronts": {k: wf / n for k, (wf, _, n) in acc.items() if n},
            "ideal": {k: i / n for k, (_, i, n) in acc.items() if n},
            "accesses": {k: n for k, (_, _, n) in acc.items()}}


def _site_groups(rep, kind: str) -> dict:
    """A report's ``kind`` sites by source line: (file, line) -> (width, accesses, wavefronts, ideal)."""
    out: dict = {}
    for site in rep.sites:
        if site["kind"] != kind:
            continue
        g = out.setdefault((site["file"], site["line"]), [4, 0, 0, 0])
        g[0] = max(g[0], int(site["width"]))
        g[1] += site["accesses"]
        g[2] += site["wavefronts"]
        g[3] += site["ideal"]
    return out


#: at most this many source lines whose accesses merge are tried one by one (2^n sets)
MAX_MERGEABLE_SITES = 10


def mixed_merge(variant, problem, kind: str, sass: dict) -> dict | None:
    """Which source lines' runs became 64/128-bit instructions where the SASS has both widths
    of a kind (``sass``: its executed instructions by width, {4: n, 8: n, 16: n}): the set of
    lines, merged as the vectorized simulation merges them and the others one access per
    element, whose shares of the kind's instructions by width are nearest the SASS's.  Returns
    {"wavefronts": {(kind, width): per access}, "ideal": {...}} from that mix, or None where the
    all-merged or all-scalar grouping (the choice made without this) is as near, no set is
    nearer than every other (two lines of one shape, either of which may be the wide one), or
    there is no simulation.  Worked case: conv ``igemm_regblock``'s k-step loads A as 2
    ``LDS.128`` (its 8 operands, 16 lanes on one word: 2 wavefronts each) and B as 4 scalar
    ``LDS`` (a 2-way conflict): a third of the loads wide, which only "A merged, B not" gives;
    the all-scalar grouping (nearer than all-merged) charged each ``LDS.128`` 4 phases x B's
    degree."""
    total = sum(sass.values())
    if total <= 0 or not (sass.get(8, 0) + sass.get(16, 0)) or not sass.get(4, 0):
        return None
    reps = {vec: bank_report(variant, problem, vec)[0] for vec in (True, False)}
    if any(r is None for r in reps.values()):
        return None
    vec_g, sca_g = _site_groups(reps[True], kind), _site_groups(reps[False], kind)
    if set(vec_g) != set(sca_g):
        return None
    mergeable = sorted(k for k, g in vec_g.items() if g[0] > 4)
    if not mergeable or len(mergeable) > MAX_MERGEABLE_SITES:
        return None
    want = {w: sass.get(w, 0) / total for w in (4, 8, 16)}

    def mix(chosen):
        acc: dict = {}
        for k in vec_g:
            g = vec_g[k] if k in chosen else sca_g[k]
            a = acc.setdefault(g[0], [0, 0, 0])
            a[0] += g[1]
            a[1] += g[2]
            a[2] += g[3]
        n = sum(a[0] for a in acc.values()) or 1
        dist = sum(abs(acc.get(w, [0])[0] / n - want[w]) for w in (4, 8, 16))
        return dist, acc
    import itertools

    scored = []
    for r in range(len(mergeable) + 1):
        for chosen in itertools.combinations(mergeable, r):
            scored.append((mix(set(chosen))[0], set(chosen)))
    scored.sort(key=lambda x: x[0])
    best, chosen = scored[0]
    eps = 1e-9
    all_or_none = min(mix(set())[0], mix(set(mergeable))[0])
    if len(chosen) in (0, len(mergeable)) or best >= all_or_none - eps or scored[1][0] <= best + eps:
        return None
    acc = mix(chosen)[1]
    return {"wavefronts": {(kind, w): a[1] / a[0] for w, a in acc.items() if a[0]},
            "ideal": {(kind, w): a[2] / a[0] for w, a in acc.items() if a[0]}}


@functools.lru_cache(maxsize=4096)
def bank_degrees(variant, problem, vectorize: bool = True) -> tuple[float, float, str]:
    """(load degree, store degree, source) of the rung's shared accesses (simulated on a small
    twin of the problem, cached on disk); (1, 1) where it cannot be simulated."""
    rep, small, why = bank_report(variant, problem, vectorize)
    if rep is None:
        return 1.0, 1.0, f"{why}: conflict free assumed"
    return (rep.load_degree, rep.store_degree,
            f"perfkit.banks simulated at {small.label}" + ("" if vectorize else " (scalar accesses, as the SASS has)"))


def lines_per_request(variant, problem, k: int, c: dict, vectorize: bool | None = None) -> tuple[float | None, str]:
    """L1 wavefronts per global warp instruction of launch ``k``: the 128-byte lines each
    warp-wide request touches, from the addresses the threads of a simulated block used
    (:meth:`perfkit.banks.BankReport.coalescing`; 1 for a coalesced 4-byte warp access, 32 when
    every thread walks its own row).  Runs of a thread's accesses count as one 64/128-bit
    access only where the SASS has wide global accesses.  (None, why) where not simulated."""
    wide = wide_global(c) if vectorize is None else vectorize
    rep, small, why = bank_report(variant, problem, wide)
    if rep is None:
        return None, why
    if k >= len(rep.global_launches) or not rep.global_launches[k].get("requests"):
        return None, "no global requests simulated"
    co = rep.coalescing(k)
    return co["lines_per_request"], f"perfkit.banks simulated at {small.label}"


def launch_weights(variant, problem, sizes) -> list[float] | None:
    """Each launch's part of the bytes the rung's global instructions move, from the bank
    simulation of a small twin of the problem (:func:`requested_bytes`).  None where there is
    one launch or no simulation (then the share follows the bytes of the arrays passed)."""
    if len(sizes) < 2:
        return None
    out = []
    for k, (_, _, nb) in enumerate(sizes):
        total = requested_bytes(variant, problem, k, nb)
        if total is None:
            return None
        out.append(total)
    return out


def requested_bytes(variant, problem, k: int, nb: float) -> float | None:
    """The bytes launch ``k``'s global instructions ask for (elements x their size, before
    any coalescing into sectors), from the bank simulation of a small twin: the simulated
    block's accesses times the twin launch's blocks (the simulated block sees the launch's
    whole grid, so a grid-stride loop does its own share there), or once where that block
    alone touched at least half of the bytes it was passed (the whole launch in one block),
    scaled by ``nb``, the bytes of the arrays the launch is passed, over the twin's.  None
    where not simulated."""
    g = simulated_launch(variant, problem, k)
    if not g or not g.get("arg_bytes") or not g.get("launch_blocks") or not g.get("bytes"):
        return None
    block = float(g["bytes"])
    total = block if block >= 0.5 * g["arg_bytes"] else block * g["launch_blocks"]
    return total * nb / g["arg_bytes"]


def requested_bytes_by_work(variant, problem, k: int) -> float | None:
    """The bytes launch ``k``'s global instructions ask for in a dense op (elements x their
    size, before any coalescing into sectors), from the bank simulation of its small twin:
    the simulated block's accesses times the twin launch's blocks, scaled by the problem's
    FLOPs over the twin's.  A tiled op keeps its tiles and block shapes in the twin, so its
    requests grow with its work, not with its arrays' bytes (a block re-reads its input for
    every group of output channels).  None where not simulated."""
    g = simulated_launch(variant, problem, k)
    twin = bank_report(variant, problem, True)[1]
    if not g or twin is None or not g.get("launch_blocks") or not g.get("bytes"):
        return None
    tw = float(getattr(twin, "flops", 0.0) or 0.0)
    pf = float(problem.flops)
    if tw <= 0 or pf <= 0:
        return None
    return float(g["bytes"]) * g["launch_blocks"] * pf / tw


def guarded_activity(variant, problem, k: int, dyn: dict, wpb: int, ld_vec: bool, st_vec: bool) -> dict | None:
    """Where a launch's shared accesses are all in straight-line code and some sit in blocks
    the SASS branches around (``if t < s:`` in a tree reduction: the warps with no thread
    below ``s`` skip the step), the share of warps that take those blocks, from the simulated
    block's count of warp-wide shared accesses (the block shape and so the count per block are
    the problem's own): ``{"active": share, "counts": the guarded instructions' counts}``.
    None where it does not apply: shared accesses in loops, none guarded, predicated ones
    (``@P0 LDS``: every warp issues those, and Nsight Compute counts them, while the simulation
    sees only the warps with an active thread), or no simulation."""
    def nshared(cc):
        return sum(cc["lds"].values()) + sum(cc["sts"].values()) + cc["ldsm"]

    if any(t and nshared(o) for t, o in zip(dyn["trips"], dyn["own"])):
        return None
    straight = dyn["bodies"][1]
    # code only thread 0 runs (``if t == 0:``) is counted in its warp already (trips.one_thread_counts):
    # it is left out here, and its shared accesses (one warp's a block) out of the simulated count
    solo = dyn.get("one_thread") or []
    spairs = [(a, ins) for a, ins in straight if any(lo <= a < hi for lo, hi in solo)]
    straight = [(a, ins) for a, ins in straight if not any(lo <= a < hi for lo, hi in solo)]
    gpairs = guarded(straight)
    cg = pipe_counts([ins for _, ins in gpairs])
    cg["ffma_thread"] = cg["ffma"]
    ng = nshared(cg)
    ns = nshared(pipe_counts([ins for _, ins in straight])) if solo else nshared(dyn["straight"])
    n_solo = nshared(pipe_counts([ins for _, ins in spairs])) if spairs else 0.0
    if not ng or any(ins.strip().startswith("@") and opcode(ins).split(".")[0] in ("LDS", "STS", "LDSM")
                     for _, ins in straight):
        return None
    reps = {vec: bank_report(variant, problem, vec)[0] for vec in {ld_vec, st_vec}}
    if any(r is None or k >= len(r.global_launches) for r in reps.values()):
        return None
    g = {vec: r.global_launches[k] for vec, r in reps.items()}
    if not g[ld_vec].get("blocks"):
        return None
    per_block = (g[ld_vec].get("smem_load_accesses", 0) + g[st_vec].get("smem_store_accesses", 0)) / g[ld_vec]["blocks"]
    per_block -= n_solo * dyn.get("solo_warps", 1)
    active = (per_block - wpb * (ns - ng)) / (wpb * ng)
    return {"active": min(1.0, max(0.0, active)), "counts": cg}


def wide_global(c: dict, loads: bool = False) -> bool:
    """Whether the SASS made runs of a thread's global accesses (its loads, with ``loads``)
    into 64/128-bit instructions: a quarter of the executed ones wide."""
    if loads and c.get("gw"):
        n = {w: v for (kind, w), v in c["gw"].items() if kind == "load"}
        return sum(v for w, v in n.items() if w >= 8) > 0.25 * max(sum(n.values()), 1e-9)
    return c.get("gwide", 0) > 0.25 * max(c["gmem"], 1e-9)


def simulated_launch(variant, problem, k: int) -> dict | None:
    """Launch ``k``'s global-memory tallies (re-reads, L1 hits, first touches, its blocks and
    arguments' bytes) from the bank simulation of a small twin of the problem, or None where it
    cannot be simulated.  They come from the raw element accesses, the same for either
    ``vectorize`` setting, and one run caches both (:func:`perfkit.banks.count`)."""
    rep = bank_report(variant, problem, True)[0]
    if rep is None:
        return None
    return rep.global_launches[k] if k < len(rep.global_launches) else None


def coalesce_factor(traffic, c, l2_bytes) -> float:
    """L1 wavefronts per global warp instruction: the rung's L2 bytes over the bytes its warp
    instructions ask for, in 32-byte sectors per 128-byte line (1: every warp access is one
    line; up to 32: every thread its own line)."""
    asked = c["gmem_bytes"] * 32
    if asked <= 0:
        return 1.0
    return float(min(32.0, max(1.0, l2_bytes / asked * 4.0))) if l2_bytes > asked * 1.5 else 1.0


def l2_rereads(g, *, dram_bytes: float, asked: float, blocks: int, resident: int, workspace: float,
               rows_in_turn: float, r) -> tuple[float, str | None, float | None]:
    """DRAM bytes of a streaming op whose blocks read their rows again (the simulated block's
    global tallies ``g``, :mod:`perfkit.banks`): the re-reads find the rows in L2 only while
    the rows the resident blocks work on (the launch's distinct bytes of re-read arrays, their
    share of the simulated block's bytes scaled to ``asked``, times the share of blocks resident
    at once, over the rows a warp walks in turn) plus the ``workspace`` the launch keeps live (a
    persistent grid's partial sums) fit in ``l2_reuse_fraction`` of L2.  Past that the re-reads
    miss in proportion up to the whole L2, and past the whole L2 every read of a row goes to
    DRAM; the arrays every block reads (parameters) stay in L2.  Returns (DRAM bytes, source
    or None, share of the loads that wait on DRAM or None); unchanged where the rows fit.

    Worked cases: the 7c7b2e0 multirow rungs: Nsight Compute counted x read twice;
    layernorm backward's tuned rung, 17 MB of rows in flight and 17 MB of partials (38 MB): a
    third of the re-reads miss (Nsight Compute: 174 MB beyond x, dy and dx, of 346 MB that
    could)."""
    keep = r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]
    if g and g.get("streamed_reread", 0) > 0 and g.get("bytes", 0) > 0:
        footprint = asked * g["streamed_distinct"] / g["bytes"] * resident / blocks / max(rows_in_turn, 1.0)
        footprint += workspace
        if footprint > keep:
            frac = min(1.0, (footprint - keep) / max(r["l2_size_bytes"]["value"] - keep, 1.0))
            miss_bytes = dram_bytes + frac * (asked * g["bytes_if_rereads_miss"] / g["bytes"] - dram_bytes)
            if miss_bytes > dram_bytes:
                src = (f"re-reads miss L2: {resident} resident blocks of {blocks} work on "
                       f"{footprint / 1e6:.0f} MB at once, L2 keeps {keep / 1e6:.0f} MB; "
                       + ("the simulated block's reads of its rows all go to DRAM" if frac >= 1 else
                          f"{frac:.2f} of the simulated block's re-reads go to DRAM"))
                # the loads that wait on DRAM: every read of a streamed array (the first touch
                # and the re-reads), not the parameters every block reads
                streamed = g["streamed_distinct"] + g["streamed_reread"]
                params = g["bytes"] - g["bytes_if_rereads_miss"]
                return miss_bytes, src, frac * streamed / max(streamed + params, 1e-9)
    return dram_bytes, None, None


def partly_written_sectors(g, requested: float | None, r) -> tuple[float, str] | None:
    """DRAM reads of stores that fill only part of each sector, the rest written by other
    blocks (the simulated block's store fill below 0.75), over more than L2 keeps: the blocks
    drift apart, a sector leaves L2 before all its parts arrive, and L2 completes it from DRAM,
    reading the unfilled part.  ``requested``: the launch's requested bytes
    (:func:`requested_bytes`).  Returns (bytes, source note) or None where it does not apply.
    Worked case: NHWC batchnorm's channel blocks, a float of each 32-byte sector (fill 1/8),
    32x256x56x56: Nsight Compute 72 MB read and 45 MB written beyond x and y, for 90 MB
    unfilled, in each of the fused, warp and welford rungs."""
    sf = float(g.get("store_fill", 1.0))
    if requested and sf < 0.75 and g.get("bytes"):
        stored = requested * g.get("store_bytes", 0) / g["bytes"]
        if stored > r["l2_size_bytes"]["value"] * r["l2_reuse_fraction"]["value"]:
            return (stored * (1.0 - sf),
                    f"; + {stored * (1.0 - sf) / 1e6:.0f} MB completing partly written sectors (store fill {sf:.2f})")
    return None


def dirty_at_end(written: float, dram_bytes: float, r) -> float:
    """Write-back L2: the bytes a launch writes that are still dirty in L2 when it ends, so
    do not cross the DRAM interface while Nsight Compute counts it (it starts the kernel on a
    clean L2 and stops at its end).  L2 then holds the launch's latest traffic,
    ``l2_reuse_fraction`` of it kept while other data streams through (:func:`l2_rereads`'
    capacity), written bytes in their share of what crossed DRAM:
    ``min(written, keep x written / dram_bytes)``.  Not a saving in a record's timed window:
    perfkit's flush writes 2 x L2 before it, and the kernel writes those dirty lines back as
    it evicts them (docs/MODEL_NOTES.md, "Dirty output lines left in L2").

    Evidence, Nsight Compute's DRAM write bytes (data/ncu/, both GPUs; test
    ``test_nsight_compute_sees_writes_kept_in_l2``): a launch whose traffic fits keeps most of
    its writes (the one-kernel convolutions at the R50 layer, 12.8 MB out: a median 0.06 of y
    written, at most 0.54); the 4096^2 float32 row norms, 67 MB in and out, write 41-43 MB on
    the H200 (rule: 47) and 49-52 on the H100 (rule: 51); matrix products whose C is 67 MB keep
    10-13 MB of it (rule: 5-11).  ``written``: the launch's global store bytes; ``dram_bytes``:
    its DRAM traffic, reads and writes."""
    keep = (r["l2_size_bytes"]["value"] or 0.0) * r["l2_reuse_fraction"]["value"]
    if written <= 0 or dram_bytes <= 0 or keep <= 0:
        return 0.0
    written = min(written, dram_bytes)
    return min(written, keep * written / dram_bytes)


def l2_tag_traffic(l2_bytes: float, dram_bytes: float, *, dense: bool, gsim, fabric: float) -> float:
    """L2 tag traffic (Nsight Compute's ``lts__t_bytes``): the L2 bytes plus ``fabric`` (H100:
    0.5, measured on streaming kernels) of the first touches, which on a two-partition L2 cross
    the fabric when the line lives in the far partition and are counted again.  A streaming op
    touches each requested byte once (all its L2 bytes, times the simulated block's sector fill
    where blocks share sectors: a sector crosses once for all of them); a tiled product re-reads
    its panels from L2, and only what comes from DRAM is a first touch.  Worked case: NHWC
    batchnorm at 32x256x56x56, eight channel blocks to a sector: 3457 MB of L2 for 3289 MB of
    requests, where 1.5x would be 4933 (a block's own repeated requests, the naive rows'
    element-by-element writes, cross each time: 911 MB for 604 MB)."""
    fill = min(max(float((gsim or {}).get("sector_fill", 1.0)), 1.0 / 32), 1.0)
    return l2_bytes + fabric * (min(dram_bytes, l2_bytes) if dense else l2_bytes * fill)
