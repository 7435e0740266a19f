"""Shared-memory bank conflicts and global-memory coalescing counted with no GPU: run a rung in
Numba's CUDA simulator, record every thread's address at every access, group the accesses into
warp-wide instructions and count what each costs, as the hardware does.

Public API (other modules build on it; keep it stable)::

    rep = banks.count(variant, problem)          # BankReport of the launches of one run
    rep.wavefronts, rep.ideal, rep.conflicts     # totals over the simulated blocks
    rep.degree                                   # wavefronts / ideal (1.0: conflict free)
    rep.load_degree, rep.store_degree            # the same for loads and for stores
    rep.sites                                    # per source line: accesses, wavefronts, ideal
    rep.scaled(f)                                # every count times f (e.g. to a full grid)
    banks.wavefronts(addresses, width)           # one warp-wide access: (wavefronts, ideal)
    rep.coalescing(launch=None)                  # global memory, same simulation: requests,
                                                 # sectors and lines per request, efficiency
    rep.gsites                                   # per source line: requests, sectors, lines
    banks.small_problem(variant, problem)        # a shrunken twin of problem to simulate

The package, in the order a simulation runs through it:

* :mod:`.simulate`: ``count`` (the run, in a simulator child where this process drives a GPU;
  the cache and the static store) and ``small_problem``;
* :mod:`.record`: the simulator hooks that record each thread's shared and global accesses;
* :mod:`.tally`: recorded accesses -> warp-wide instructions -> wavefronts, sectors, lines, L1
  hits and re-reads;
* :mod:`.rules`: the hardware's rules for one warp-wide access (banks, phases, sectors, the
  compiler's vector merge), each stated next to its code;
* :mod:`.report`: ``BankReport`` and ``BankError``.
"""
from __future__ import annotations

from .report import BankError, BankReport
from .rules import BANKS, WORD, wavefronts
from .simulate import count, small_problem

__all__ = ["BankReport", "count", "wavefronts", "small_problem", "BankError", "BANKS", "WORD"]
