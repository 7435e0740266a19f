"""Trip-count rules: how many warp-iterations each loop of a launch runs
(:func:`dynamic_mix`), and so the launch's dynamic instruction mix."""
from __future__ import annotations

import math
import re

from .branches import bodies, forward_spans, one_thread_arms
from .pipes import add_counts, pipe_counts


_SHFL_BFLY = re.compile(r"\bSHFL\.BFLY\b[^;]*?,\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*0x1f")


def elements_per_thread(problem, remainders: list, warps: int) -> float | None:
    """Elements of the problem's main array per thread of the launch (``elem_bytes`` over the
    item size, over the threads), where every remainder loop moves one element per access (its
    global accesses are all one item wide); None where the problem does not say."""
    try:
        import numpy as np

        it = np.dtype(problem.dtype).itemsize
        elems = float(problem.elem_bytes) / it
    except (AttributeError, TypeError, ValueError):
        return None
    if warps <= 0 or not all(c["gmem"] and c["gmem_bytes"] == c["gmem"] * it for c in remainders):
        return None
    return elems / (32.0 * warps)


def elements_per_iteration(c: dict, problem) -> float | None:
    """Elements of the problem's dtype one iteration of a sweeping loop covers per thread:
    its smallest group of global accesses of one kind and width, in elements (a group may hold
    several arrays: gamma's and beta's scalar loads beside x's 128-bit ones); None where the
    problem names no dtype."""
    try:
        import numpy as np

        it = np.dtype(problem.dtype).itemsize
    except (AttributeError, TypeError, ValueError):
        return None
    groups = c.get("gw") or {}
    return min((n * w / it for (_, w), n in groups.items() if n), default=None)


def output_elements(problem) -> float | None:
    """The elements of the problem's outputs (``output_specs``), None where it does not say."""
    try:
        specs = problem.output_specs()
    except (AttributeError, TypeError, NotImplementedError):
        return None
    return float(sum(math.prod(shape) for shape, _ in specs.values())) or None


def nested_in(loops, j: int, i: int) -> bool:
    """Whether loop ``j`` lies (at any depth) inside loop ``i``."""
    p = loops[j].parent
    while p is not None:
        if p == i:
            return True
        p = loops[p].parent
    return False


def remainder_factor(inner: dict, outer: dict) -> int | None:
    """k where ``outer``'s own global accesses are ``inner``'s times (k - 1) / k, kind by kind
    and width by width (an inner loop unrolled k times, its k - 1 leftover elements peeled
    into the loop around it); else None."""
    gi, go = inner.get("gw") or {}, outer.get("gw") or {}
    if not gi or set(gi) != set(go):
        return None
    ks = set()
    for g, n in gi.items():
        m = n - go[g]  # accesses per element group
        if m <= 0 or n % m:
            return None
        ks.add(n // m)
    k = ks.pop() if len(ks) == 1 else None
    return k if k and k >= 2 else None


def remainder_blocks(pairs: list[tuple[int, str]]) -> list[tuple[int, int, int]]:
    """The peeled remainder of an unrolled loop in ``pairs``: two or more conditional forward
    branches to one target with global accesses between them, as (start, end, element
    groups) in order (each block after its branch, up to the next branch or the target; a
    block's groups are its global accesses of the commonest kind and width)."""
    spans = forward_spans(pairs)
    by_t: dict = {}
    for a, t in spans:
        by_t.setdefault(t, []).append(a)
    best = []
    for t, starts in by_t.items():
        starts = sorted(starts)
        if len(starts) < 2:
            continue
        out = []
        for n, a in enumerate(starts):
            end = starts[n + 1] if n + 1 < len(starts) else t
            seg = [ins for b, ins in pairs if a < b < end]
            c = pipe_counts(seg)
            groups = max((c.get("gw") or {}).values(), default=0)
            if not groups:
                out = []
                break
            out.append((a, end, int(groups)))
        if len(out) > len(best):
            best = out
    return best


class Mix:
    """What the trip rules share for one launch: the loops and their bodies, the trips and rule
    text found so far (None: not yet), the bytes left to sweep, and what earlier rules marked
    (workspace-clearing loops, sweeping loops, peeled blocks, arithmetic loops, row walks)."""

    def __init__(self, **kw):
        self.zero, self.sweep, self.peeled_back, self.work, self.row_loops = [], [], [], set(), []
        self.__dict__.update(kw)

    def take(self, names: str) -> list:
        return [getattr(self, n) for n in names.split()]


def rule_not_taken(m: Mix) -> None:
    """A loop inside the arm of an if/else that is not taken (:func:`perfkit.model.branches.one_path`
    dropped it) does not run: 0 trips.  Worked case: a vector and a scalar copy of a sweep under
    one if/else: the scalar one's loop gets 0."""
    loops, dropped, trips, rules = m.take("loops dropped trips rules")
    for i, lp in enumerate(loops):
        if any(lo <= lp.start and lp.end < hi for lo, hi in dropped):
            trips[i], rules[i] = 0.0, "alternative path (not taken)"


def rule_arithmetic_work(m: Mix) -> None:
    """In an arithmetic-dense op (FLOP/byte > 8), a loop holding tensor ``mma`` or FP32 FMAs runs
    ``flops / 2 / (32 x fma per iteration)`` times (``mma``: 4096 FLOPs per m16n8k16).  Sibling
    loops with the same count per iteration are alternative paths (vector / scalar): the shortest
    body is kept, the others get 0.  A loop with fewer per iteration than the main one (the
    checked tail of k after the full tiles) runs once per warp.  Worked case: 4096^3 fp32 on a
    loop of 64 FFMA an iteration: 2 x 4096^3 / (64 x 64) = 33.5 M warp-iterations.
    A loop around the main ``mma`` loop with ``mma`` of its own (the k loop's first step, peeled
    to start the accumulators from zero: a persistent GEMM's tile loop) walks output tiles, the
    whole reduction an iteration: it runs ``outputs / accumulator elements a warp holds`` times
    (distinct destinations of its mma, a wgmma's M x N / 4), the main loop the FLOPs left.
    Worked case: rung 23 at 4096^3, 64x256 accumulators a warpgroup: 4096^2 / 4096 = 4096 tile
    iterations, 129 024 of the k loop (test ``test_a_loop_around_the_k_loop_runs_once_per_output_tile``).
    The FLOPs are the ones the rung computes, as its traffic model counts them, not the
    problem's: an algorithm with fewer multiplies runs its loop fewer times (Winograd F(4x4, 3x3):
    36 products per 4x4 tile where direct convolution does 144, 0.25x; test
    ``test_a_loop_runs_for_the_flops_the_rung_computes_not_the_problems``)."""
    problem, loops, own, trips, rules, dense, warps, work_flops = m.take(
        "problem loops own trips rules dense warps work_flops")
    flops = float(work_flops if work_flops is not None else problem.flops)
    if dense:
        mma_loops = [i for i, c in enumerate(own) if c["mma"] > 0 and trips[i] is None]
        fma_loops = [i for i, c in enumerate(own) if c["ffma"] > 0 and trips[i] is None and not mma_loops]
        group = mma_loops or fma_loops
        key = "mma" if mma_loops else "ffma"
        per = 4096.0 if mma_loops else 64.0  # FLOPs per warp instruction (mma.m16n8k16; 32 FMAs)

        def work(c):  # FLOPs a warp's iteration does (wgmma: HGMMA.MxNxK is 2MNK / 4 a warp)
            if key == "mma":
                return c.get("mma_flops", per * c["mma"]) + c.get("wgmma_flops", 0.0)
            return per * c[key]
        if group:
            # alternative paths: loops with the same count per iteration, not nested: keep the shortest
            by_count: dict = {}
            for i in group:
                by_count.setdefault(work(own[i]), []).append(i)
            chosen = []
            for cnt, idx in by_count.items():
                best = min(idx, key=lambda i: own[i]["instr"])
                chosen.append(best)
                for i in idx:
                    if i != best:
                        trips[i], rules[i] = 0.0, "alternative path (not taken)"
            # the loop with the most work per iteration carries it; a loop with less (the checked
            # tail of k after the full tiles, a remainder) runs about once per warp
            main = max(chosen, key=lambda i: work(own[i]))
            for i in chosen:
                if i != main and not nested_in(loops, i, main) and not nested_in(loops, main, i):
                    trips[i], rules[i] = float(warps), f"tail: fewer {key} per iteration than loop {main}: once per warp"
            # a loop enclosing the main one whose own body holds mma too (the reduction's first
            # step, peeled to start the accumulators from zero) walks output tiles, the whole
            # reduction an iteration: it runs once per tile of the accumulators a warp holds
            outs = output_elements(problem)
            for i in chosen:
                if key == "mma" and i != main and nested_in(loops, main, i) and outs and own[i].get("mma_acc"):
                    trips[i], rules[i] = outs / own[i]["mma_acc"], \
                        f"output tiles: {outs:.0f} outputs / ({own[i]['mma_acc']:g} accumulator elements a warp)"
            chosen = [i for i in chosen if trips[i] is None]
            total = max(flops - sum(trips[i] * work(own[i]) for i in group if trips[i]), 0.0) / sum(
                work(own[i]) for i in chosen)
            for i in chosen:
                trips[i], rules[i] = total, f"{key} work: flops / ({per:g} x {key} per iteration)"


def rule_loader_prologue(m: Mix) -> None:
    """Code of an arithmetic loop that a branch skips together with a nested loop moving global
    memory is that loader's peeled remainder: a power-of-two tile divides evenly among the
    threads, so it does not run and is taken out of the loop's body.  Worked case: a 64x64 tile
    loaded by 256 threads, 16 elements each: the remainder of the unrolled loader never runs."""
    loops, own, own_pairs, trips, rules, thread_ffma = m.take("loops own own_pairs trips rules thread_ffma")
    for i in range(len(loops)):
        if not (trips[i] and rules[i].startswith(("mma work", "ffma work"))):
            continue
        kids = [j for j, o in enumerate(loops) if o.parent == i and own[j]["gmem"]]
        spans = [(a, t) for a, t in forward_spans(own_pairs[i])
                 if any(a < loops[j].start and loops[j].end < t for j in kids)]
        if spans:
            kept = [(a, ins) for a, ins in own_pairs[i] if not any(lo < a < hi for lo, hi in spans)]
            if len(kept) < len(own_pairs[i]):
                own_pairs[i] = kept
                own[i] = thread_ffma(kept, pipe_counts([ins for _, ins in kept]))


def rule_workspace_clear(m: Mix) -> None:
    """A loop whose only global accesses store zero clears the workspace the launch is passed
    (partial sums, before a persistent grid accumulates into them): ``workspace bytes / (32 x
    bytes per iteration)``, its unrolled sibling's remainder ``(k - 1) / 2`` per warp, once per
    warp without a workspace.  One that falls through to EXIT is the compiler's copy for an empty
    inner range (left to :func:`rule_outer_walk`).  Worked case: layernorm backward's persistent
    rows at 7c7b2e0 clear each slot's partial row: 32 iterations a warp at 4096 columns, where the
    sweep rule had given 69 (FFMA against Nsight Compute 0.76 -> 0.95); today's clear only the
    columns past the register cache, none at 4096: an overcount there."""
    loops, lines, own, own_bodies, trips, rules, warps, clear_bytes, zero = m.take(
        "loops lines own own_bodies trips rules warps clear_bytes zero")
    zero = []
    for i, body in enumerate(own_bodies):
        g = [ins for ins in body if re.match(r"(@!?U?P\w+\s+)?(LDG|STG|LD|ST|RED|ATOM)\.", ins.strip())]
        if trips[i] is None and g and all(re.match(r"(@!?U?P\w+\s+)?STG\.\S*\s.*,\s*RZ\s*$", ins.strip()) for ins in g):
            zero.append(i)
    # the compiler's copy of a loop for an empty inner range (unswitched: its sums stay zero,
    # so it stores RZ) ends the kernel: it falls through to EXIT.  It and its siblings are left
    # to the unswitched-copy rule below
    def _ends_kernel(i):
        nxt = [ins.strip() for a, ins in lines if a > loops[i].end and not ins.strip().startswith(("BSYNC", "NOP"))]
        return bool(nxt) and nxt[0] == "EXIT"

    if any(_ends_kernel(i) for i in zero):
        zero = []
    rem = {i for i in zero for j in zero if j != i and own[j]["gmem_bytes"] >= 2 * own[i]["gmem_bytes"]
           and loops[i].parent == loops[j].parent}
    carry = [i for i in zero if i not in rem]
    for i in zero:
        if not clear_bytes or not carry:
            trips[i], rules[i] = float(warps), "clears a workspace (stores zero only): once per warp"
        elif i in rem:
            k = max(own[j]["gmem_bytes"] for j in carry) / own[i]["gmem_bytes"]
            trips[i], rules[i] = warps * (k - 1) / 2, "remainder of a workspace-clearing loop: (k - 1) / 2 per warp"
        else:
            t = max(clear_bytes / (32.0 * sum(own[j]["gmem_bytes"] for j in carry)), float(warps))
            trips[i], rules[i] = t, f"clears the launch's workspace ({clear_bytes / 1e6:.3g} MB, stores zero only)"
    # (the launch's bytes stay with the sweeps: a small twin's slots clear little of what the
    # problem's do, so its scaled bytes hold next to none of this clearing)
    m.zero = zero


def rule_unrolled_remainder(m: Mix) -> None:
    """A loop that loads or stores global memory sweeps the launch's bytes; a sibling right beside
    an unrolled sweep that repeats its accesses k (>= 2) times fewer is its remainder loop.  Where
    all sweeping loops are such pairs at the top level, the elements a thread handles per pass
    (n: the problem's elements over the threads where the remainder moves one item per access,
    else bytes / (threads x bytes per element summed over the passes)) give both counts when n is
    whole (``n // k`` and ``n % k`` per warp), else the remainder runs ``(k - 1) / 2`` times per
    warp.  Worked case: a 4096-column row on 256 threads, unrolled x4: n = 16, the loop 4 times a
    warp, the remainder 0."""
    problem, loops, own, trips, rules, launch_bytes, warps, sweep = m.take(
        "problem loops own trips rules launch_bytes warps sweep")
    sweep = [i for i, c in enumerate(own) if trips[i] is None and c["gmem_bytes"] > 0]
    # a remainder loop: the sibling right before or after an unrolled loop whose global
    # accesses it repeats k (>= 2) times fewer; each thread runs it fewer than k times per pass
    pairs = []
    for i in list(sweep):
        for j in (i - 1, i + 1):
            if j in sweep and j != i and loops[j].parent == loops[i].parent and all(j != q for _, q, _ in pairs):
                a, b = own[i], own[j]
                k = b["gmem_bytes"] / a["gmem_bytes"]
                if k >= 2 and k == int(k) and b["gload_bytes"] * a["gmem_bytes"] == a["gload_bytes"] * b["gmem_bytes"]:
                    pairs.append((i, j, int(k)))
                    sweep.remove(i)
                    break
    # where every sweeping loop is such a pair at the top level, each thread's elements per pass
    # follow from the bytes: n = bytes / (threads x bytes per element, over the passes); when n
    # is whole, the unrolled loop runs n // k times and the remainder n % k (0 for 16 elements a
    # thread, the 4096-column rows of 256 threads); else the remainder runs (k - 1) / 2 times
    exact = None
    if pairs and not [q for q in sweep if all(q != j for _, j, _ in pairs)] \
            and all(loops[i].parent is None and loops[j].parent is None for i, j, _ in pairs):
        by_bytes = launch_bytes / (sum(own[i]["gmem_bytes"] for i, _, _ in pairs) * 32.0 * warps)
        n = elements_per_thread(problem, [own[i] for i, _, _ in pairs], warps)
        # the problem's shape where this launch sweeps the main array (its bytes agree within 4x;
        # a small launch over partial sums does not), else the bytes
        if n is None or not (0.25 * by_bytes <= n <= 4.0 * by_bytes):
            n = by_bytes
        if n >= 0.98 and abs(n - round(n)) <= 0.02 * n:
            exact = int(round(n))
    for i, j, k in pairs:
        a, b = own[i], own[j]
        if exact is not None:
            trips[i], rules[i] = float(warps * (exact % k)), \
                f"remainder of loop {j} (unrolled x{k}): {exact} elements a thread per pass, {exact % k} per warp"
            trips[j], rules[j] = float(warps * (exact // k)), \
                f"unrolled x{k}: {exact} elements a thread per pass, {exact // k} per warp"
            sweep.remove(j)
            launch_bytes = max(launch_bytes - trips[i] * 32 * a["gmem_bytes"] - trips[j] * 32 * b["gmem_bytes"], 0.0)
        else:
            trips[i], rules[i] = warps * (k - 1) / 2, f"remainder of loop {j} (unrolled x{k:g}): (k - 1) / 2 per warp"
            launch_bytes = max(launch_bytes - trips[i] * 32 * a["gmem_bytes"], 0.0)
    m.launch_bytes, m.sweep = launch_bytes, sweep


def rule_peeled_block(m: Mix) -> None:
    """A top-level sweep unrolled k times whose odd iterations the compiler peeled into a block
    after it (branched around, its accesses the loop's k times fewer) runs ``s // k`` times per
    thread and the block ``s % k`` times, s the thread's elements per pass over the block's
    (where s is not whole: the block ``(k - 1) / 2`` times).  The block, counted once per warp
    with the straight code, is taken back where it does not run.  Worked case: rms tuned at 4096
    columns: 16 elements a thread, 16 a block: the loop never runs, the block once."""
    problem, loops, own, straight_pairs, warps, sweep, peeled_back = m.take(
        "problem loops own straight_pairs warps sweep peeled_back")
    peeled_back = []
    try:
        import numpy as np

        n = float(problem.elem_bytes) / np.dtype(problem.dtype).itemsize / (32.0 * warps)
    except (AttributeError, TypeError, ValueError):
        n = None
    for i in [q for q in sweep if n is not None and loops[q].parent is None and own[q]["gw"]]:
        after = [(a, t) for a, t in forward_spans(straight_pairs) if a > loops[i].end]
        if not after:
            continue
        a0, t0 = min(after)
        if sum(1 for a, _ in straight_pairs if loops[i].end < a < a0) > 4:
            continue
        blk = [(a, ins) for a, ins in straight_pairs if a0 < a < t0]
        cb = pipe_counts([ins for _, ins in blk])
        if not cb["gw"] or set(cb["gw"]) != set(own[i]["gw"]):
            continue
        ks = {own[i]["gw"][g] / cb["gw"][g] for g in cb["gw"] if cb["gw"][g]}
        if len(ks) != 1:
            continue
        k = ks.pop()
        per_block = elements_per_iteration(cb, problem)
        if k < 2 or k != int(k) or not per_block:
            continue
        k = int(k)
        src = n / per_block
        if src >= 0.98 and abs(src - round(src)) <= 0.02 * src:
            runs, loop_runs = float(int(round(src)) % k), float(int(round(src)) // k)
            how = f"{int(round(src))} source iterations a thread per pass"
        else:
            runs, loop_runs = (k - 1) / 2.0, max(src - (k - 1) / 2.0, 0.0) / k
            how = f"{src:.2f} source iterations a thread per pass (not whole: (k - 1) / 2 in the block)"
        cb["ffma_thread"] = cb["ffma"]
        peeled_back.append((i, warps * loop_runs, f"unrolled x{k} with a peeled remainder block: {how}, "
                                                  f"{loop_runs:g} per warp", cb, -(1.0 - runs) * warps))
    m.peeled_back = peeled_back


def rule_outside_work(m: Mix) -> None:
    """Bytes the arithmetic loops already move (a GEMM's k-loop loads its tiles) are not swept
    again; where loaders are nested in an arithmetic loop, sweeping loops outside it (a
    pipeline's prologue, an epilogue) run once per warp.  Worked case: a tiled GEMM's prologue
    loader before its k-loop: once per warp."""
    loops, own, trips, rules, launch_bytes, warps, zero, sweep, work = m.take(
        "loops own trips rules launch_bytes warps zero sweep work")
    covered = sum(trips[i] * 32 * own[i]["gmem_bytes"] for i in range(len(loops)) if trips[i] and i not in zero)
    launch_bytes = max(launch_bytes - covered, 0.0)
    # loaders nested in an arithmetic loop carry its traffic; sweeping loops outside it (a
    # pipeline's prologue, an epilogue) run about once per warp
    work = {i for i in range(len(loops)) if trips[i] and rules[i].startswith(("mma work", "ffma work"))}

    def inside_work(i):
        j = loops[i].parent
        while j is not None:
            if j in work:
                return True
            j = loops[j].parent
        return False

    if work and any(inside_work(i) for i in sweep):
        for i in [i for i in sweep if not inside_work(i)]:
            trips[i], rules[i] = float(warps), "outside the arithmetic loop: once per warp"
            sweep.remove(i)
            launch_bytes = max(launch_bytes - warps * 32 * own[i]["gmem_bytes"], 0.0)
    m.launch_bytes, m.work = launch_bytes, work


def rule_outer_walk(m: Mix) -> None:
    """A sweeping loop around another sweeping loop (a grid-stride loop over columns around the walk
    down the rows) runs once per warp and the inner one carries the bytes (not a dense op's tile
    loop that holds the arithmetic loop), unless it holds the inner loop's peeled remainder (the
    inner loop unrolled k times, its k - 1 leftover elements in the outer body, each branched to
    one exit): a walk over a 2-D range whose inner loop runs over B, the last dimension of the
    launch's largest 2-D argument, so the outer loop runs once per B of a thread's elements, the
    inner ``B // k`` times per outer trip and the first ``B % k`` remainder blocks run (where B <
    k the inner loop's set-up, branched around with it, does not).  A store-only sibling of such
    an outer loop is the compiler's unswitched copy for an empty inner range and does not run.
    Worked case: batchnorm's naive rung, x as (N, C, H*W): B = H*W = 3136, unrolled x4: 784
    inner trips per outer trip, no remainder block."""
    loops, own, own_pairs, trips, rules, launch_bytes, warps, inner_extent, sweep, work, thread_ffma = m.take(
        "loops own own_pairs trips rules launch_bytes warps inner_extent sweep work thread_ffma")
    def has_inner_sweep(i):
        return any(j != i and nested_in(loops, j, i) for j in sweep)

    # (not a tiled product's tile loop: one that holds the arithmetic loop runs once per tile,
    # as its loaders do, and sweeps the tiles' bytes with them)
    outer = [i for i in sweep if has_inner_sweep(i) and not any(nested_in(loops, j, i) for j in work)]
    # unless the outer loop holds the inner one's peeled remainder (the inner loop unrolled k
    # times, the k - 1 leftover elements in the outer body after it, each branched to the
    # same exit): a walk over a 2-D range, the inner loop over its last dimension (batchnorm's
    # naive rung over x viewed as (N, C, H*W), or (N*H*W, C, 1) in NHWC).  A thread's elements
    # over the launch's largest 2-D argument's last dimension (B) give the outer trips; per
    # outer trip the inner loop runs B // k times and the first B % k remainder blocks run
    for i in outer:
        kids = [j for j in sweep if loops[j].parent == i]
        if len(kids) != 1 or not inner_extent or len(sweep) != 2:
            continue
        j = kids[0]
        k = remainder_factor(own[j], own[i])
        segs = remainder_blocks(own_pairs[i]) if k else []
        if not segs:
            continue
        bpe = own[j]["gmem_bytes"] / k  # bytes a thread moves per element
        per_thread = launch_bytes / (32.0 * warps * bpe)
        B = int(inner_extent)
        runs = float(per_thread) / B * warps  # outer warp-iterations
        r = B % k
        done, cut = 0, []
        for lo, hi, n in segs:  # a block runs while elements are left for it
            if done >= r:
                cut.append((lo, hi))
            done += n
        if B < k:  # the inner loop never runs: nor does its set-up, branched around with it
            cut += [(a, t) for a, t in forward_spans(own_pairs[i]) if a < loops[j].start and loops[j].end < t]
        own_pairs[i] = [(a, ins) for a, ins in own_pairs[i] if not any(lo < a < hi for lo, hi in cut)]
        own[i] = thread_ffma(own_pairs[i], pipe_counts([ins for _, ins in own_pairs[i]]))
        trips[i], rules[i] = runs, (f"outer walk holding loop {j}'s remainder: {per_thread:.0f} elements a "
                                    f"thread over runs of {B} (the largest 2-D argument's last dimension)")
        trips[j], rules[j] = runs * (B // k), f"unrolled x{k} inner walk: {B // k} per outer trip"
        launch_bytes = 0.0
    for i in [i for i in outer if trips[i] is None]:
        trips[i], rules[i] = float(warps), "around an inner sweep: once per warp"
        launch_bytes = max(launch_bytes - warps * 32 * own[i]["gmem_bytes"], 0.0)
    # the compiler's copy of such an outer loop for an empty inner range (loop unswitching on
    # rows <= 0): a sibling that only stores; it and its remainder loop do not run
    for i in [i for i in sweep if trips[i] is None and own[i]["gload_bytes"] == 0]:
        if any(loops[o].parent == loops[i].parent for o in outer):
            trips[i], rules[i] = 0.0, "unswitched copy for an empty inner loop (not taken)"
            for j in range(len(loops)):
                if rules[j].startswith(f"remainder of loop {i} "):
                    launch_bytes += trips[j] * 32 * own[j]["gmem_bytes"]
                    trips[j], rules[j] = 0.0, "unswitched copy for an empty inner loop (not taken)"
    m.launch_bytes = launch_bytes


def rule_sweep(m: Mix) -> None:
    """The sweeps left share the launch's bytes (``Traffic.l1_bytes``, else its L2 bytes, less what
    earlier rules moved): ``trips = bytes / (32 x bytes per thread per iteration, summed over the
    sweeping loops)``, at least once per warp.  Sweeps that pass over the same elements at
    different strides split the bytes so that each covers every element
    (:func:`elements_per_iteration`).  Then the peeled blocks' loops get their trips.  Worked
    case: 4 LDG.128 of float32 (16 elements an iteration) beside 32 scalar loads of gamma and
    beta (32): the second loop runs half as often."""
    problem, own, trips, rules, launch_bytes, warps, sweep, peeled_back = m.take(
        "problem own trips rules launch_bytes warps sweep peeled_back")
    sweep = [i for i in sweep if trips[i] is None]
    if sweep:
        # the sweeps pass over the same elements (each pass of a row walks all of it), each
        # loop a stride of its own: the elements an iteration covers is its smallest group of
        # same-kind, same-width accesses (4 LDG.128 of float32: 16; 32 scalar loads of gamma
        # and beta beside them: 32, two arrays), so a loop unrolled twice as far runs half as often
        stride = {i: elements_per_iteration(own[i], problem) for i in sweep}
        if all(stride.values()) and len(set(stride.values())) > 1:
            elems = launch_bytes / (32.0 * sum(own[i]["gmem_bytes"] / stride[i] for i in sweep))
            ts = {i: elems / stride[i] for i in sweep}
            why = "sweep: the elements every pass covers / the loop's elements per iteration"
        else:
            t = launch_bytes / (sum(own[i]["gmem_bytes"] for i in sweep) * 32)
            ts = {i: t for i in sweep}
            why = "sweep: launch bytes / (32 x bytes per iteration)"
        if max(ts.values()) < warps:  # prologue / epilogue loops around the work: at least once per warp
            ts = {i: float(warps) for i in sweep}
            why = "once per warp (the bytes left after the arithmetic loops are fewer)"
        for i in sweep:
            trips[i], rules[i] = ts[i], why
    for i, t, why, _, _ in peeled_back:
        trips[i], rules[i] = t, why
    m.sweep = sweep


def rule_rows_by_shuffles(m: Mix) -> None:
    """An outer loop with no global accesses of its own, around sweeps, whose body reduces by
    shuffles and no barrier walks rows (``problem.rows``): ``rows x 2^L / 32`` warp-iterations, L
    its butterfly offsets (a group of 2^L lanes finishes a row an iteration).  Worked case:
    offsets 16..1 (L = 5) over 4096 rows: 4096 warp-iterations."""
    problem, loops, own, own_bodies, trips, rules, warps, row_loops = m.take(
        "problem loops own own_bodies trips rules warps row_loops")
    rows = getattr(problem, "rows", None)
    row_loops: list = []  # the loops that walk rows
    for i, c in enumerate(own):
        if trips[i] is None and isinstance(rows, (int,)) and rows > 0 and c["shfl"] and not c["bar"] \
                and not c["gmem"] and any(trips[j] for j in range(len(loops)) if loops[j].parent == i):
            offs = {m.group(1) for ins in own_bodies[i] for m in [_SHFL_BFLY.search(ins)] if m}
            lanes = 2 ** len(offs) if offs else 32
            trips[i] = max(float(rows) * min(lanes, 32) / 32.0, float(warps))
            rules[i] = f"outer: one row per {min(lanes, 32)} lanes an iteration (a shuffle reduction, no barrier)"
            row_loops.append(i)
    m.row_loops = row_loops


def rule_rows_across_warps(m: Mix) -> None:
    """The same loop whose reduction crosses warps (shuffles, then the warps' partials through shared
    memory between barriers, each warp storing its own and loading the W of its group back):
    ``rows x W`` warp-iterations, W its shared loads over its shared stores.  Worked case:
    layernorm backward tuned at 7c7b2e0, 256 threads a row: 40 loads, 5 stores, W = 8."""
    problem, loops, own, trips, rules, warps, threads_per_block, row_loops = m.take(
        "problem loops own trips rules warps threads_per_block row_loops")
    rows = getattr(problem, "rows", None)
    # the same loop whose reduction crosses warps (shuffles, then each warp's partials through
    # shared memory between barriers, every warp of the group reading all of them back): each
    # warp stores its partials once and loads those of the W warps of its group, so W = the
    # body's shared loads over its shared stores; each iteration the group's W warps finish one
    # row: rows x W warp-iterations (layernorm backward tuned at 7c7b2e0, 256 threads a row:
    # 40 loads, 5 stores, W = 8)
    for i, c in enumerate(own):
        nld, nst = sum(c["lds"].values()), sum(c["sts"].values())
        if trips[i] is None and isinstance(rows, (int,)) and rows > 0 and c["shfl"] and c["bar"] \
                and nld and nst and not c["gmem"] and not c["mma"] \
                and any(trips[j] for j in range(len(loops)) if loops[j].parent == i):
            wpg = min(max(round(nld / nst), 1), max(threads_per_block // 32, 1))
            trips[i] = max(float(rows) * wpg, float(warps))
            rules[i] = (f"outer: one row per {wpg} warps an iteration (a reduction across warps: "
                        f"{nld} shared loads, {nst} stores)")
            row_loops.append(i)


#: instructions that copy global memory into shared memory without a thread's store (cp.async and
#: its commit / wait, the TMA's bulk loads)
_STAGE = re.compile(r"(@!?U?P\w+\s+)?(LDGSTS|LDGDEPBAR|DEPBAR|UTMALDG|UBLKCP)\b")


def stores_read_back(loops, i: int, pairs_p, lines) -> set:
    """Addresses of the shared stores (``STS``) of ``pairs_p`` (loop ``i``'s parent's own body, or
    the straight code) whose values reach loop ``i`` through a barrier: those after the barrier
    before the last one ahead of the loop and before that last one, in program order (in a
    parent loop's body, wrapping round from the end of the body to the loop).  Empty where no
    barrier is ahead of the loop, or where the span ends at a barrier that also publishes
    copies from global memory (cp.async, TMA: anywhere in ``lines`` between the two barriers,
    nested loops included): a block that staged part of its input reads it back, each thread
    its own elements, not partials."""
    lp = loops[i]
    par = lp.parent
    before = [(a, ins) for a, ins in pairs_p if a < lp.start]
    order = before if par is None else [(a, ins) for a, ins in pairs_p if a > lp.end] + before
    bars = [k for k, (_, ins) in enumerate(order) if re.match(r"(@!?U?P\w+\s+)?BAR\.SYNC\b", ins.strip())]
    if not bars:
        return set()
    last = bars[-1]
    first = bars[-2] + 1 if len(bars) > 1 else 0
    span = order[first:last + 1]
    if not span:
        return set()
    lo, hi = span[0][0], span[-1][0]
    # the addresses the span covers (in a parent's body that wraps round: two ranges)
    ranges = [(lo, hi)] if lo <= hi else [(lo, loops[par].end), (loops[par].start, hi)]
    if any(_STAGE.match(ins.strip()) for a, ins in lines if any(x <= a <= y for x, y in ranges)):
        return set()
    return {a for a, ins in span if re.match(r"(@!?U?P\w+\s+)?STS\b", ins.strip())}


def rule_read_back_partials(m: Mix) -> None:
    """A loop that only reads shared memory after its parent (or the straight code) stored partials
    and passed a barrier reads them back: stores one lane makes (predicated or branched around: a
    warp's partial) are read by every warp, ``W x stores / loads`` times per parent iteration (W
    the block's warps); stores every lane makes are gathered by one reader, ``W x 32 x stores /
    loads`` times per block (``32 x stores / loads`` a warp).  Worked case: batchnorm split's
    statistics in NCHW, 256 threads' (n, mean, M2) merged by thread 0, 12 loads an iteration: 8 a
    warp (Nsight Compute: 806 shared wavefronts a block against 792).  Where a block holds several
    groups, each reading only its own warps', the first case counts all of them (an upper bound).

    Partials are what reaches the loop through a barrier: the stores counted are those between
    the last barrier before the loop (in program order; in a parent loop's body, wrapping round
    from the end of the body) and the barrier before that; where none are, or where that barrier
    also publishes cp.async copies (``LDGSTS``, its ``LDGDEPBAR`` / ``DEPBAR`` wait) or a TMA
    load, the loop sweeps data the block staged from global memory, each thread its own
    elements, and the rule declines (:func:`stores_read_back`).  Worked case: softmax smem_row
    at 4096 x 16384 float32, 256 threads: its max sweep over the staged row (a remainder loop
    and one unrolled x4) was given 24 + 6 trips a warp from the block reductions' stores *after*
    it, where each thread reads its 16 vectors: 0 + 4."""
    loops, own, own_pairs, straight_pairs, lines, trips, rules, warps, threads_per_block = m.take(
        "loops own own_pairs straight_pairs lines trips rules warps threads_per_block")
    for i, c in enumerate(own):
        nld, par = sum(c["lds"].values()), loops[i].parent
        if trips[i] is not None or not nld or sum(c["sts"].values()) or c["gmem"] or c["bar"] \
                or c["shfl"] or c["mma"] or (par is not None and not trips[par]):
            continue
        pairs_p = straight_pairs if par is None else own_pairs[par]
        if not pipe_counts([ins for _, ins in pairs_p])["bar"]:
            continue
        spans = forward_spans(pairs_p)
        # (address, conditional): predicated, or inside an if the compiler branched around;
        # only the stores that reach the loop through a barrier, not a staged copy's
        reach = stores_read_back(loops, i, pairs_p, lines)
        sts = [(a, ins.strip().startswith("@") or any(lo < a < hi for lo, hi in spans))
               for a, ins in pairs_p if a in reach]
        if not sts:
            continue
        wpb = max(threads_per_block // 32, 1)
        one_lane = all(cond for _, cond in sts)
        per = wpb * len(sts) / nld if one_lane else 32.0 * len(sts) / nld
        base = float(warps) if par is None else trips[par]
        trips[i] = base * max(per, 1.0 / wpb)
        how = (f"one lane each: every warp reads all {wpb} warps'" if one_lane
               else "every lane: one reader gathers them")
        rules[i] = (f"reads back the partials stored before a barrier ({len(sts)} stores, {how}, {nld} "
                    f"loads an iteration): {per:g} per {'warp' if par is None else f'iteration of loop {par}'}")


def _ldgsts_bytes(body) -> float:
    """Bytes one thread's cp.async copies (``LDGSTS``) of ``body`` move into shared memory."""
    out = 0.0
    for ins in body:
        mm = re.match(r"(@!?U?P\w+\s+)?LDGSTS(\S*)\s", ins.strip())
        if mm:
            out += 16 if ".128" in mm.group(2) else 8 if ".64" in mm.group(2) else 4
    return out


def rule_staged_sweep(m: Mix) -> None:
    """A top-level loop whose only memory accesses are shared (loads, and stores back in place; no
    barrier, shuffle or global access), in a launch whose threads staged global memory into shared
    memory by cp.async (``LDGSTS``) ahead of it, sweeps the staged data once a pass: ``b`` bytes a
    thread, the launch's dynamic shared memory over the block's threads (the staged buffer;
    without one, the thread's own copies: the staging loops' trips x their ``LDGSTS`` bytes, over
    the warps, plus the straight code's), so a loop of L shared loads of w bytes an iteration
    runs ``b / (w x L)`` times a warp.  A sibling right before or
    after it with k (>= 2) times fewer loads of that width is its remainder: with n = b / w whole,
    the loop runs ``n // k`` times a warp and the remainder ``n % k``, else the remainder
    ``(k - 1) / 2`` and the loop the rest over k (as :func:`rule_unrolled_remainder` does for
    global sweeps).  Worked case: softmax smem_row at 4096 x 16384 float32, 256 threads: 16
    copies of 16 bytes a thread (loop x4: 4 a warp); its max sweep, a remainder loop of one
    ``LDS.128`` and a loop of four: 0 and 4 a warp (the read-back rule gave 24 and 6, the fallback
    8 and 8)."""
    loops, own, own_bodies, straight_pairs, trips, rules, warps, threads_per_block = m.take(
        "loops own own_bodies straight_pairs trips rules warps threads_per_block")
    dyn_shared = getattr(m, "dynamic_shared", 0) or 0
    if not warps:
        return
    stagers = [j for j, body in enumerate(own_bodies) if _ldgsts_bytes(body)]
    straight_copy = _ldgsts_bytes([ins for _, ins in straight_pairs])
    if not stagers and not straight_copy:
        return
    if dyn_shared and threads_per_block:  # the staged buffer, once a pass: its share a thread
        b, src_b = dyn_shared / threads_per_block, "the dynamic shared memory over the block's threads"
    elif all(trips[j] is not None for j in stagers):
        b = sum(trips[j] * _ldgsts_bytes(own_bodies[j]) for j in stagers) / warps + straight_copy
        src_b = "the thread's cp.async copies"
    else:
        return
    if b <= 0:
        return
    first = min([loops[j].start for j in stagers] + [a for a, ins in straight_pairs if "LDGSTS" in ins],
                default=None)

    def width(c):  # the one width of the loop's shared loads, else None
        ws = [w for w, n in c["lds"].items() if n]
        return ws[0] if len(ws) == 1 else None

    cand = [i for i, c in enumerate(own)
            if trips[i] is None and loops[i].parent is None and first is not None and loops[i].start > first
            and width(c) and not (c["gmem"] or c["bar"] or c["shfl"] or c["mma"] or c.get("ldsm"))]
    cand.sort(key=lambda i: loops[i].start)
    done = set()
    for i in cand:
        if i in done:
            continue
        w, li = width(own[i]), own[i]["lds"][width(own[i])]
        n = b / w  # shared loads of w bytes a thread a pass
        mate = None
        for j in cand:
            if j != i and j not in done and abs(cand.index(j) - cand.index(i)) == 1 and width(own[j]) == w:
                lj = own[j]["lds"][w]
                k = max(li, lj) / min(li, lj)
                if k >= 2 and k == int(k):
                    mate = j
                    break
        if mate is None:
            trips[i], rules[i] = warps * n / li, f"sweeps the staged data: {b:g} bytes a thread ({src_b}), {li} x {w}-byte shared loads an iteration"
            done.add(i)
            continue
        main, rem = (i, mate) if li > own[mate]["lds"][w] else (mate, i)
        k = int(own[main]["lds"][w] // own[rem]["lds"][w])
        per = own[rem]["lds"][w]  # loads of one source iteration
        src = n / per
        if src >= 0.98 and abs(src - round(src)) <= 0.02 * src:
            tm, tr = int(round(src)) // k, int(round(src)) % k
        else:
            tr = (k - 1) / 2.0
            tm = max(src - tr, 0.0) / k
        trips[main], rules[main] = warps * tm, (f"sweeps the staged data (unrolled x{k}): {b:g} bytes a thread ({src_b}), "
                                                 f"{src:g} source iterations, {tm:g} per warp")
        trips[rem], rules[rem] = warps * tr, f"remainder of staged sweep {main} (unrolled x{k}): {tr:g} per warp"
        done |= {main, rem}


def rule_outer_as_inner(m: Mix) -> None:
    """Another outer loop runs as often as its least frequent inner loop.  Worked case: an outer
    loop around inner loops of 64 and 128 trips: 64."""
    loops, trips, rules = m.take("loops trips rules")
    for _ in range(len(loops)):
        for i, lp in enumerate(loops):
            if trips[i] is None:
                kids = [j for j, o in enumerate(loops) if o.parent == i and trips[j] is not None and trips[j] > 0]
                if kids:
                    trips[i], rules[i] = min(trips[j] for j in kids), "outer: as its least frequent inner loop"


def rule_scalar_count(m: Mix) -> None:
    """A loop the rules above leave open whose exit test the SASS computes from the kernel's scalar
    arguments only (``scalar count``): its back edge's predicate traced back through integer code
    (copies, 64-bit adds and compares, selects, masks) to constant-bank words, which hold the
    launch's arguments in Numba's layout (:mod:`perfkit.model.scalars`), and the counter run until
    the branch falls through; 0 where a forward branch on the scalars skips the loop (the guard of
    an unrolled loop whose count is below its unroll).  Per entry, times the warps (top level) or
    its parent's trips.  Anything else in the chain (a thread index, a load) declines: the fallback.
    Worked case: conv ``tc_ldmatrix``'s tap masks, ``for r in range(R)`` unrolled x4 (counter
    ``R - (R & 3)``, step -4): at R = 3 the x4 loop is skipped (0, was log2(128) = 7 a warp); at
    R = 8 it runs 2 times an entry."""
    from .scalars import loop_count

    loops, lines, trips, rules, warps, bank = m.take("loops lines trips rules warps bank")
    if not bank:
        return
    for i, lp in enumerate(loops):
        if trips[i] is not None:
            continue
        par = lp.parent
        if par is not None and trips[par] is None:
            continue
        got = loop_count(lines, loops, i, bank)
        if got is None:
            continue
        n, how = got
        if par is None:
            trips[i], rules[i] = float(n) * warps, f"scalar count: {n} per entry, once per warp ({how})"
        else:
            trips[i], rules[i] = float(n) * trips[par], f"scalar count: {n} per iteration of loop {par} ({how})"


def rule_other(m: Mix) -> None:
    """Any other loop (a reduction tree) runs ``log2(threads per block)`` times per warp.  Worked
    case: 256 threads a block: 8 times a warp."""
    loops, trips, rules, warps, threads_per_block = m.take("loops trips rules warps threads_per_block")
    for i in range(len(loops)):
        if trips[i] is None:
            trips[i], rules[i] = warps * max(math.log2(max(threads_per_block, 2)), 1.0), "other: log2(threads) per warp"


#: the trip rules in the order dynamic_mix applies them: each sets the loops the ones before left open
TRIP_RULES = (
    rule_not_taken,
    rule_arithmetic_work,
    rule_loader_prologue,
    rule_workspace_clear,
    rule_unrolled_remainder,
    rule_peeled_block,
    rule_outside_work,
    rule_outer_walk,
    rule_sweep,
    rule_rows_by_shuffles,
    rule_rows_across_warps,
    rule_read_back_partials,
    rule_staged_sweep,
    rule_outer_as_inner,
    rule_scalar_count,
    rule_other,
)


def dynamic_mix(report, problem, *, launch_bytes: float, dense: bool, warps: int, threads_per_block: int,
                inner_extent: int | None = None, clear_bytes: float | None = None,
                work_flops: float | None = None, solo_warps: int = 1, args=None, cc=None,
                dynamic_shared: int = 0) -> dict:
    """Dynamic per-pipe counts of one launch (warp instructions over the whole launch) and the
    trips of each loop: the rules of :data:`TRIP_RULES`, in order, each setting the loops
    the ones before left open, then :func:`one_thread_counts`.  ``work_flops``: the FLOPs the rung
    computes (its traffic model's), where they are not the problem's (Winograd).  ``solo_warps``:
    the warps of a block that hold a thread of x index 0 (1 for a block of one dimension).
    ``args``, ``cc``: the launch's arguments and the target, for loops counted from the kernel's
    scalars (:func:`rule_scalar_count`; without them those loops keep the fallback).
    ``dynamic_shared``: the launch's dynamic shared memory a block, in bytes (the buffer a sweep
    over staged data reads once a pass: :func:`rule_staged_sweep`)."""
    loops = report.loops
    from ..anatomy import sass_lines

    lines = sass_lines(report.sass)
    dropped: list = []
    divergent: list = []
    roles: list = []
    own_pairs, straight_pairs = bodies(lines, loops, dropped, divergent, roles)
    straight = [ins for _, ins in straight_pairs]
    own_bodies = [[ins for _, ins in b] for b in own_pairs]
    own = [pipe_counts(b) for b in own_bodies]

    def thread_ffma(pairs, c):
        # a data-dependent if/else: the warp issues both arms, each thread runs one; the FFMA
        # a thread executes there (Nsight Compute's thread-level count) is one arm's, taken
        # as the mean of the two
        arms = [ins for a, ins in pairs if any(lo <= a < hi for lo, hi in divergent)]
        c["ffma_thread"] = c["ffma"] - 0.5 * pipe_counts(arms)["ffma"] if arms else c["ffma"]
        return c

    own = [thread_ffma(p, c) for p, c in zip(own_pairs, own)]
    trips = [None] * len(loops)
    rules = [""] * len(loops)
    m = Mix(problem=problem, loops=loops, lines=lines, own=own, own_pairs=own_pairs, own_bodies=own_bodies,
            straight_pairs=straight_pairs, divergent=divergent, dropped=dropped, trips=trips, rules=rules,
            launch_bytes=launch_bytes, dense=dense, warps=warps, threads_per_block=threads_per_block,
            inner_extent=inner_extent, clear_bytes=clear_bytes, thread_ffma=thread_ffma,
            work_flops=work_flops, bank=_bank(report, args, cc), dynamic_shared=dynamic_shared)
    for rule in TRIP_RULES:
        rule(m)
    # a loop inside a warp-role arm whose count is per warp runs in that role's warps only
    arms = role_arms(roles, threads_per_block)
    for i, lp in enumerate(loops):
        arm = [sh for lo, hi, _, sh in arms if lo <= lp.start < hi]
        if arm and trips[i] and "per warp" in rules[i] and min(arm) < 1.0:
            trips[i] *= min(arm)
            rules[i] += f" (its role's warps: {min(arm):.3g} of the block's)"
    own, peeled_back, row_loops = m.take("own peeled_back row_loops")
    solo = one_thread_arms(lines)
    solo_less = one_thread_counts(loops, own_pairs, straight_pairs, trips, rules, arms, solo, warps=warps,
                                  threads_per_block=threads_per_block, solo_warps=solo_warps, thread_ffma=thread_ffma)

    total = add_counts({}, thread_ffma(straight_pairs, pipe_counts(straight)), float(warps))
    # a warp-role split (branches.warp_role): each arm's straight-line code runs in its role's
    # warps only, the share of the block's warps the SASS gives (the group of index 0 is
    # 2^shift threads), else in every warp (both arms counted whole: an upper bound)
    for lo, hi, _, share in arms:
        if share < 1.0:
            part = [(a, ins) for a, ins in straight_pairs if lo <= a < hi]
            add_counts(total, thread_ffma(part, pipe_counts([ins for _, ins in part])), -(1.0 - share) * warps)
    for _, _, _, cb, f in peeled_back:
        add_counts(total, cb, f)
    for i in range(len(loops)):
        add_counts(total, own[i], trips[i])
    for c, f in solo_less:
        add_counts(total, c, f)
    # rows a warp walks one after another (an outer row loop's iterations per warp): what a
    # block re-reads within one row is in flight for that row only
    walks = [trips[i] / warps for i in row_loops if warps]
    return {"counts": total, "trips": trips, "rules": rules, "own": own,
            "straight": thread_ffma(straight_pairs, pipe_counts(straight)),
            "bodies": (own_pairs, straight_pairs), "rows_in_turn": max(walks + [1.0]), "roles": arms,
            "one_thread": solo, "solo_warps": solo_warps}


def _bank(report, args, cc) -> dict:
    """The launch's parameters as constant bank 0 holds them ({} where not known)."""
    sig = getattr(report, "signature", None) or []
    cc = cc or getattr(report, "cc", None)
    if args is None or not sig or not cc:
        return {}
    from .scalars import param_bank

    try:
        return param_bank(sig, list(args), cc)
    except Exception:  # noqa: BLE001  (an argument the layout cannot place: no scalar counts)
        return {}


def role_arms(roles: list, threads_per_block: int) -> list[tuple[int, int, int, float]]:
    """The arms of the warp-role splits :func:`perfkit.model.branches.one_path` found, as
    (start, end, split, share of the block's warps that run it): ``("first", n)``: n threads
    of the block's (whole warps), ``("rest", n)``: the others; unknown: 1 (every warp)."""
    out = []
    for lo, hi, split, grp in roles:
        share = 1.0
        if grp and threads_per_block > 0:
            f = min(grp[1], threads_per_block) / threads_per_block
            share = f if grp[0] == "first" else 1.0 - f
        out.append((lo, hi, split, share))
    return out


def one_thread_counts(loops, own_pairs, straight_pairs, trips, rules, arms, solo, *, warps: int,
                      threads_per_block: int, solo_warps: int, thread_ffma) -> list:
    """Code that every thread but thread 0 branches around (``if t == 0:``, without an else:
    :func:`perfkit.model.branches.one_thread_arms`) is issued by the warps that hold thread 0
    (``solo_warps`` a block, one for a block of one dimension), the other warps jump over it,
    nested loops included.  Rule (``one thread's arm``): its straight instructions and its
    share of a loop's own body count in those warps only; a loop inside it whose count is the
    per-warp fallback ("other") runs in those warps only; the compiler's ELECT waterfall (a
    uniform-operand instruction such as a TMA copy, ``@P0 ELECT P2 ... @P0 BRA.U.ANY``) runs once
    for each thread that reaches it: once per entry of the arm.  Sets ``trips`` in place; returns
    the (counts, factor) pairs that take the arms' instructions out of the other warps.
    Worked case: GEMM rung 21 ``tma`` (256 threads, 8 warps): thread 0 fills a stage (an mbarrier
    arrive, three TMA copies, each in an ELECT loop) in the k loop's body; counted in the 8192
    warps, 82 of the 316 instructions a k-loop iteration were 7/8 too many."""
    if not solo or warps <= 0:
        return []
    wpb = max(-(-threads_per_block // 32), 1)

    def share_at(a):  # the share of the block's warps that run the code at address a (warp roles)
        return min([sh for lo, hi, _, sh in arms if lo <= a < hi] + [1.0])

    def frac(a):  # of the warps running the code around address a, those holding thread 0
        return min(1.0, solo_warps / (wpb * share_at(a)))

    def enclosing(lo_a, hi_a):
        return next(((lo, hi) for lo, hi in solo if lo <= lo_a and hi_a < hi), None)

    out = []
    for i, lp in enumerate(loops):
        arm = enclosing(lp.start, lp.end)
        if arm is not None and trips[i]:
            p = lp.parent
            if p is not None and enclosing(loops[p].start, loops[p].end) == arm:
                base = trips[p]  # the parent runs in the arm's warps already: once per iteration of it
            else:
                base = (trips[p] if p is not None else warps * share_at(lp.start)) * frac(lp.start)
            if _elect_body(own_pairs[i]):
                trips[i], rules[i] = base, "elect loop in one thread's arm: once per entry"
            elif rules[i].startswith("other:") or (rules[i].startswith("scalar count:") and p is None):
                trips[i] *= frac(lp.start)
                rules[i] += " (one thread's arm: the warps holding thread 0)"
        # the loop's own instructions in an arm that starts inside it run in thread 0's warps
        if trips[i]:
            part = [(a, ins) for a, ins in own_pairs[i]
                    if any(lo <= a < hi and lo > lp.start for lo, hi in solo)]
            if part:
                f = frac(lp.start)
                out.append((thread_ffma(part, pipe_counts([ins for _, ins in part])), -(1.0 - f) * trips[i]))
    by_share: dict = {}
    for a, ins in straight_pairs:
        if any(lo <= a < hi for lo, hi in solo):
            by_share.setdefault(share_at(a), []).append((a, ins))
    for sh, part in by_share.items():
        f = min(1.0, solo_warps / (wpb * sh))
        out.append((thread_ffma(part, pipe_counts([ins for _, ins in part])), -(1.0 - f) * warps * sh))
    return out


def _elect_body(pairs) -> bool:
    """Whether a loop's own body is an ELECT waterfall (:func:`one_thread_counts`)."""
    body = [ins.strip().rstrip(";").strip() for _, ins in pairs]
    return bool(body) and any(re.match(r"^(@!?P\w+\s+)?ELECT\b", b) for b in body) and "BRA.U.ANY" in body[-1]
