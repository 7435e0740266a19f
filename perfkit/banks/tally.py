"""From recorded per-thread accesses to warp-wide instructions and their costs.

How accesses are grouped into warp-wide instructions: an access site is a source line and a
direction (load or store); the k-th access of a thread at a site belongs with the k-th access
of the other threads of its warp at that site (true for non-divergent code, which is what
kernels with shared memory and barriers are).  The compiler turns runs of a thread's
consecutive accesses to adjacent words at one site (``reg[j] = S[r, c + j]`` for j in 0..3)
into one 64- or 128-bit instruction when the run's start is aligned to its size; the same
merge is applied here (:func:`perfkit.banks.rules.merge_runs`), so an unrolled ``LDS.128`` is
counted as one.

Global memory: the k-th access of each lane at a site is one warp-wide request.  Lines per
request is what the L1 spends on it (1 for a coalesced 4-byte warp access; 32 when every
thread walks its own row, as in the naive GEMM, whose H100 time 275 ms is its 33 lines per
k-step at one line per clock per SM)."""
from __future__ import annotations

import os

from .record import Recorder
from .report import BankReport
from .rules import merge_runs, sectors_lines, wavefronts


def warp_accesses(events: dict, threads_per_block: int, vectorize: bool = True):
    """Warp-wide instructions of recorded per-thread accesses: (site, addresses of the 32 lanes
    (None for a lane with no k-th access at the site), width), the k-th access of each lane at a
    site making one instruction, runs merged into 64/128-bit accesses when ``vectorize``."""
    by_block: dict = {}
    for (blk, tid), evs in events.items():
        per_site: dict = {}
        for site, addr, size in evs:
            per_site.setdefault(site, []).append((addr, size))
        by_block.setdefault(blk, {})[tid] = {s: (merge_runs(v) if vectorize else v) for s, v in per_site.items()}
    for blk, threads in by_block.items():
        for site in {s for th in threads.values() for s in th}:
            for w0 in range(0, threads_per_block, 32):
                lanes = [threads.get(t, {}).get(site, []) for t in range(w0, min(w0 + 32, threads_per_block))]
                n = max((len(x) for x in lanes), default=0)
                for k in range(n):
                    addrs, width = [], 1
                    for x in lanes:
                        if k < len(x):
                            addrs.append(x[k][0])
                            width = max(width, x[k][1])
                        else:
                            addrs.append(None)
                    yield site, addrs, width



def tally_global(rec: Recorder, threads_per_block: int, report: "BankReport", vectorize: bool = True,
            shared: dict | None = None) -> None:
    per_launch = {k: 0 for p in ("", "load_", "store_") for k in
                  (p + "requests", p + "sectors", p + "lines", p + "ideal_sectors")}
    sites: dict = {}
    for site, addrs, width in warp_accesses(rec.gevents, threads_per_block, vectorize):
        ns, nl, ni = sectors_lines(addrs, width)
        s = sites.setdefault(site, {"file": os.path.basename(site[0]), "line": site[1], "kind": site[2],
                                    "width": width, "requests": 0, "sectors": 0, "lines": 0})
        s["requests"] += 1
        s["sectors"] += ns
        s["lines"] += nl
        for p in ("", site[2] + "_"):
            per_launch[p + "requests"] += 1
            per_launch[p + "sectors"] += ns
            per_launch[p + "lines"] += nl
            per_launch[p + "ideal_sectors"] += ni
    per_launch.update(shared if shared is not None else {**rereads(rec), **l1_hits(rec, threads_per_block)})
    report.gsites.extend(sites.values())
    report.global_launches.append(per_launch)


# a thread's sector counts as an L1 hit when it is among the last 4 distinct sectors the thread
# touched: reuse that the access pattern fixes whatever the size (a walk along a row within a
# sector, a warp-uniform parameter read for the next rows); reuse at a distance that grows with
# the problem (a second sweep over a row) is left to the rung's L2 bytes, since the simulated
# twin of the problem is far smaller than the problem
L1_REUSE_WINDOW = 4


def l1_hits(rec: Recorder, threads_per_block: int) -> dict:
    """Where the warp-wide global loads of the simulated block find their data.  A lane's
    access hits L1 when each of its 32-byte sectors is among the last ``L1_REUSE_WINDOW``
    distinct sectors the thread touched (a walk along a row, a warp-uniform parameter read for
    the next rows; not a re-sweep of a row, nor reuse across threads); a request hits when all
    its lanes do.  A request that misses goes to DRAM when
    one of its lanes touches a sector for the first time in the block (a parameter vector that
    every block reads is counted so too, though later blocks find it in L2: in a batch of loads
    it is waited for with the row's own loads, which do go to DRAM); else it finds its data in L2.
    ``load_requests_hit``, ``load_miss_requests``, ``load_miss_dram`` and ``load_miss_lines``
    (the 128-byte lines the missing requests touch), prefixed ``l1s_`` with every element
    access its own request and ``l1v_`` with runs of a thread's accesses merged into 64/128-bit
    requests (as :func:`warp_accesses` does with ``vectorize``)."""
    from collections import OrderedDict

    # per thread and site, in order: (address, size, L1 hit, first touch of a sector in the
    # block); threads are walked one after another, so which lane of a request touches a shared
    # sector first is arbitrary, but not whether the request holds a first touch
    seen_block: set = set()
    flags: dict = {}
    order = sorted(rec.gevents)
    for key in order:
        recent: OrderedDict = OrderedDict()
        per_site: dict = {}
        for site, addr, size in rec.gevents[key]:
            secs = range(addr // 32, (addr + max(size, 1) - 1) // 32 + 1)
            if site[2] == "load":
                first = any(b not in seen_block for b in secs)
                per_site.setdefault(site, []).append((addr, size, all(b in recent for b in secs), first))
            for b in secs:
                recent.pop(b, None)
                recent[b] = True
                if len(recent) > L1_REUSE_WINDOW:
                    recent.popitem(last=False)
                seen_block.add(b)
        flags.setdefault(key[0], {})[key[1]] = per_site
    out = {}
    for pre, vec in (("l1s_", False), ("l1v_", True)):
        out.update({pre + k: v for k, v in _l1_requests(flags, threads_per_block, vec).items()})
    return out


def _l1_requests(flags: dict, threads_per_block: int, vectorize: bool) -> dict:
    out = {"load_requests_hit": 0, "load_miss_requests": 0, "load_miss_dram": 0, "load_miss_lines": 0}
    for blk, threads in flags.items():
        if vectorize:
            # runs merged into one wide access: it hits when all its elements did
            threads = {t: {st: _merge_flags(v) for st, v in ps.items()} for t, ps in threads.items()}
        for site in {s for th in threads.values() for s in th}:
            for w0 in range(0, threads_per_block, 32):
                lanes = [threads.get(t, {}).get(site, []) for t in range(w0, min(w0 + 32, threads_per_block))]
                for k in range(max((len(x) for x in lanes), default=0)):
                    acc = [x[k] for x in lanes if k < len(x)]
                    if all(a[2] for a in acc):
                        out["load_requests_hit"] += 1
                        continue
                    out["load_miss_requests"] += 1
                    out["load_miss_dram"] += any(a[3] for a in acc)
                    out["load_miss_lines"] += sectors_lines([a[0] for a in acc], max(a[1] for a in acc))[1]
    return out


def _merge_flags(v: list) -> list:
    res, i = [], 0
    for a, z in merge_runs([(a, z) for a, z, _, _ in v]):
        n, hit, first = 0, True, False
        while i < len(v) and n < z:
            hit, first = hit and v[i][2], first or v[i][3]
            n += v[i][1]
            i += 1
        res.append((a, z, hit, first))
    return res


def rereads(rec: Recorder) -> dict:
    """What the simulated blocks read again: ``bytes`` (every element a thread read or wrote),
    and for the *streamed* arrays (those the blocks read less than half of: rows, channels,
    tiles, not a parameter vector every block reads whole) ``streamed_distinct`` (bytes read at
    least once) and ``streamed_reread`` (bytes read again after the first time);
    ``bytes_if_rereads_miss``: the stores and every read of a streamed array (what DRAM moves
    when no re-read of a row finds it in cache; the other arrays, read by every block, stay
    in L2 and are left out)."""
    import bisect

    bases = sorted(rec.gsizes)
    loaded: dict = {}   # base -> [bytes read, {address: element size}]
    touched: dict = {}  # base -> {address: element size}, loads and stores
    stored: dict = {}   # base -> {address: element size}, stores
    total = 0
    for evs in rec.gevents.values():
        for site, addr, size in evs:
            total += size
            i = bisect.bisect_right(bases, addr) - 1
            if i >= 0:
                touched.setdefault(bases[i], {}).setdefault(addr, size)
                if site[2] == "store":
                    stored.setdefault(bases[i], {}).setdefault(addr, size)
            if site[2] != "load" or i < 0:
                continue
            d = loaded.setdefault(bases[i], [0, {}])
            d[0] += size
            d[1].setdefault(addr, size)
    distinct = reread = 0
    miss = total - sum(d[0] for d in loaded.values())  # stores
    for b, (nread, addrs) in loaded.items():
        uniq = sum(addrs.values())
        if uniq < 0.5 * rec.gsizes[b]:
            distinct += uniq
            reread += nread - uniq
            miss += nread
    # how much of each 32-byte sector the blocks' own elements fill, over the arrays they touch
    # less than half of (rows, channels, tiles: not a parameter vector every block reads):
    # 1 where a block owns its sectors, 1/8 where it takes one float of each and seven other
    # blocks the rest (NHWC batchnorm: a channel per block, C floats apart)
    def fill(arrays):
        own = secs = 0
        for b, addrs in arrays.items():
            uniq = sum(addrs.values())
            if uniq < 0.5 * rec.gsizes[b]:
                own += uniq
                secs += 32 * len({a // 32 for a in addrs})
        return own / secs if secs else 1.0

    return {"bytes": total, "streamed_distinct": distinct, "streamed_reread": reread, "bytes_if_rereads_miss": miss,
            "sector_fill": fill(touched), "store_fill": fill(stored),
            "store_bytes": sum(sum(a.values()) for a in stored.values())}


def tally_shared(rec: Recorder, threads_per_block: int, report: BankReport, vectorize: bool = True) -> None:
    sites: dict = {}
    for site, addrs, width in warp_accesses(rec.events, threads_per_block, vectorize):
        wf, ideal = wavefronts(addrs, width)
        s = sites.setdefault(site, {"file": os.path.basename(site[0]), "line": site[1], "kind": site[2],
                                    "width": width, "accesses": 0, "wavefronts": 0, "ideal": 0})
        s["accesses"] += 1
        s["wavefronts"] += wf
        s["ideal"] += ideal
    for s in sites.values():
        report.sites.append(s)
        report.accesses += s["accesses"]
        report.wavefronts += s["wavefronts"]
        report.ideal += s["ideal"]
        k = s["kind"]
        setattr(report, f"{k}_accesses", getattr(report, f"{k}_accesses") + s["accesses"])
        setattr(report, f"{k}_wavefronts", getattr(report, f"{k}_wavefronts") + s["wavefronts"])
        setattr(report, f"{k}_ideal", getattr(report, f"{k}_ideal") + s["ideal"])
