"""The hardware's rules for one warp-wide access, as functions of its lanes' addresses.

Shared memory (NVIDIA: 32 banks, 4 bytes wide, one wavefront serves each bank once):

* a warp-wide access of 4 bytes (or less) per thread is served in one phase of 32 threads;
  64-bit and 128-bit accesses in two phases of 16 threads (half-warps);
* within a phase, the wavefronts needed are the largest number of DISTINCT 4-byte words any
  one bank holds among the addresses of the active threads (threads reading the same word
  are served together: a broadcast).  A half-warp of distinct 128-bit accesses holds 64 words,
  two in every bank: 2 wavefronts, so a conflict-free ``LDS.128`` costs 4, as the quarter-warp
  phases of the CUDA C++ Best Practices Guide ("Shared Memory and Memory Banks") also give.
  Where lanes share 16-byte words the half-warp rule gives fewer: a warp-uniform ``LDS.128``
  costs 2 (one per half), not 4.  Nsight Compute on the H100 (the shared ncu table at
  7c7b2e0) says so: the warp-shuffle norm rungs, whose only 128-bit loads are broadcasts of
  the per-warp partials, and GEMM rungs 07/08, whose ``LDS.128`` lanes read two distinct
  16-byte words per half-warp, are within 4% of the model's count under the half-warp rule,
  and were 25-34% below it under the quarter-warp one;
* ``ideal`` is, per phase with an active thread, the distinct words over 32 (at least 1);
  ``conflicts = wavefronts - ideal`` (what ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``
  counts).

Global memory: a warp-wide request touches some 32-byte sectors and 128-byte lines
(:func:`sectors_lines`).  The compiler's vector merge (:func:`merge_runs`) decides how many
instructions a thread's run of accesses is."""
from __future__ import annotations

BANKS = 32
WORD = 4

def wavefronts(addresses, width: int = 4) -> tuple[int, int]:
    """Wavefronts and the ideal number for ONE warp-wide shared access.

    ``addresses``: the byte address of each active thread, in lane order (``None`` or a
    missing lane: inactive), ``width``: bytes per thread (1, 2, 4, 8 or 16).
    """
    lanes = list(addresses)
    width = int(width)
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"width must be 1, 2, 4, 8 or 16 bytes, got {width}")
    per_phase = 32 if width <= 4 else 16
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
