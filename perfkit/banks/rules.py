"""The hardware's rules for one warp-wide access, as functions of its lanes' addresses.

Shared memory (NVIDIA: 32 banks, 4 bytes wide, one wavefront serves each bank once):

* a warp-wide access is served in phases of as many threads as the 128 bytes a clock that
  shared memory returns hold: 32 threads of 4 bytes (or less), 16 of 8 (half-warps), 8 of 16
  (quarter-warps);
* within a phase, the wavefronts needed are the largest number of DISTINCT 4-byte words any
  one bank holds among the addresses of the active threads (threads reading the same word
  are served together: a broadcast).  A quarter-warp of distinct 128-bit accesses holds 32
  words, one in every bank: a conflict-free ``LDS.128`` costs 4, as the quarter-warp phases of
  the CUDA C++ Best Practices Guide ("Shared Memory and Memory Banks") give;
* **paired lanes** (a load of 8 or 16 bytes): where every pair of active threads ``n`` and
  ``n ^ 1``, or every pair ``n`` and ``n ^ 2``, reads the same address, the two share one
  returned value and a phase holds twice the threads (NVIDIA's developer forum, "Unexpected
  shared memory bank conflict", thread 77228: on CC 7.x a uniform ``LDS.128`` takes 2 requests,
  not 4, when Tn == Tn^1 or Tn == Tn^2 for all active threads, "by packing the return
  registers"; no more than 2x: a warp-uniform ``LDS.128`` costs 2, one per half-warp).  Nsight
  Compute says so: a warp-uniform ``LDS.128`` (the per-warp partials of the warp-shuffle
  norms) and the ``LDS.128`` of GEMM rungs 07/08 (pairs) count 2; the warp-tiled SIMT GEMM
  (rung 10 at 4096^3 on the H200) loads A with four neighbouring lanes on one 16-byte word
  (pairs: 2) and B with lanes 4 apart on one word (no pair shares: 4), 3 a load on average,
  and 3.005 are counted (the half-warp rule said 2 for both).  A forum thread on the H100
  (373160: lanes n and n + 16 on one word, words 32 bytes apart: 8 wavefronts; lanes 0-15 on
  one word and 16-31 on another: 2) agrees.  A 64-bit load of pairs takes one phase of 32
  lanes by the same packing (no Nsight Compute row here has such a load).  Stores do not pair;
* ``ideal`` is, per phase with an active thread, the distinct words over 32 (at least 1);
  ``conflicts = wavefronts - ideal`` (what ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``
  counts).

Global memory: a warp-wide request touches some 32-byte sectors and 128-byte lines
(:func:`sectors_lines`).  The compiler's vector merge (:func:`merge_runs`) decides how many
instructions a thread's run of accesses is."""
from __future__ import annotations

BANKS = 32
WORD = 4

def paired_lanes(lanes: list) -> bool:
    """True when the active lanes come in pairs that read one address: every ``n`` and ``n ^ 1``
    both active agree, or every ``n`` and ``n ^ 2`` do (and at least one such pair is active)."""
    for flip in (1, 2):
        pairs = [(lanes[n], lanes[n ^ flip]) for n in range(len(lanes))
                 if n ^ flip < len(lanes) and n < n ^ flip and lanes[n] is not None and lanes[n ^ flip] is not None]
        if pairs and all(a == b for a, b in pairs):
            return True
    return False


def wavefronts(addresses, width: int = 4, load: bool = True) -> tuple[int, int]:
    """Wavefronts and the ideal number for ONE warp-wide shared access.

    ``addresses``: the byte address of each active thread, in lane order (``None`` or a
    missing lane: inactive), ``width``: bytes per thread (1, 2, 4, 8 or 16), ``load``: a load
    (paired lanes share a returned value: twice the threads a phase) or a store.
    """
    lanes = list(addresses)
    width = int(width)
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"width must be 1, 2, 4, 8 or 16 bytes, got {width}")
    per_phase = 32 // max(width // WORD, 1)
    if load and width > WORD and paired_lanes(lanes):
        per_phase *= 2
    total = ideal = 0
    for p0 in range(0, max(len(lanes), 1), per_phase):
        words_by_bank: dict[int, set] = {}
        active = False
        for a in lanes[p0:p0 + per_phase]:
            if a is None:
                continue
            active = True
            first = int(a) // WORD
            last = (int(a) + max(width, 1) - 1) // WORD
            for w in range(first, last + 1):
                words_by_bank.setdefault(w % BANKS, set()).add(w)
        if active:
            ideal += max(1, -(-sum(len(s) for s in words_by_bank.values()) // BANKS))
            total += max(len(s) for s in words_by_bank.values())
    return total, ideal



def sectors_lines(addrs, width) -> tuple[int, int, int]:
    """(32-byte sectors, 128-byte lines, ideal sectors) of one warp-wide global access."""
    sec, lines = set(), set()
    distinct = {a for a in addrs if a is not None}
    for a in distinct:
        for b in range(a // 32, (a + width - 1) // 32 + 1):
            sec.add(b)
            lines.add(b // 4)
    return len(sec), len(lines), -(-len(distinct) * width // 32)


def merge_runs(seq: list) -> list:
    """A thread's accesses at one site -> (address, width) after the compiler's vector merge:
    a run of 2 or 4 consecutive 4-byte words starting at an address aligned to the run's size
    becomes one 64- or 128-bit access."""
    out = []
    i = 0
    while i < len(seq):
        addr, size = seq[i]
        step = 1
        if size == 4:
            for w in (16, 8):
                n = w // 4
                if addr % w == 0 and i + n <= len(seq) and all(seq[i + m] == (addr + 4 * m, 4) for m in range(n)):
                    size, step = w, n
                    break
        out.append((addr, size))
        i += step
    return out
