"""Record a GPU session's measurements through perfkit's own recorder, in one command.

A lent GPU comes with 15 minutes of device time in all (the machine's start included) and one
command of at most 10 minutes, so the GPU work is one command that fits a wall-clock budget,
runs what matters most first, and can be run again to go on::

    python tools/record_gpu.py --plan quick --out "$OUT" --budget-s 420 --commit <git hash>

(``perfkit record`` is the same command; ``tools/record_gpu.py`` is its shim for a device copy with
no install; docs/RECORDING.md gives the whole device call).

**Plans.**  ``--plan quick`` (the default) runs these units, in this order, each with its own
cap.  The caps below are at the default 420 s budget; every cap is scaled by ``--budget-s`` / 420
(a 140 s budget gives GEMM float16 18 s and a norm 9 s): a smaller budget runs the same plan with
smaller caps, it does not drop units (``--list`` prints the caps of a budget):

====================  =====  ==============================================================
unit                  cap s  what
====================  =====  ==============================================================
ceilings                 15  copy bandwidth and FP32 FMA rate, recorded
timer                    35  ``timing.measure`` against ``triton.testing.do_bench``: the
                             softmax and saxpy rungs, GEMM's first tensor-core rung (at its
                             float16 problem), an empty kernel, the hot/cold-L2 copy
ops-gemm-float16         55  GEMM float16 4096^3: every tensor-core rung, cuBLAS, torch, Triton
ops-gemm-float16-8192    30  GEMM float16 8192^3 (B outgrows L2): cuBLAS, rungs 18 on
ops-gemm-float32         70  GEMM float32 4096^3: every SIMT rung, cuBLAS, torch, Triton
ops-<norm>            5x28  softmax, layernorm, rmsnorm, layernorm_bwd at 4096x4096 float32,
                             batchnorm 32x256x56x56 NCHW: every rung and peer
ops-conv-*            2x34  the ResNet-50 stage-2 3x3 layer in float32 NCHW and float16 NHWC
ncu-<op>-<tier>-<i>   rest  Nsight Compute on the rungs in no table (``data/ncu/``) of any
                             GPU, then of this GPU, then rungs no GPU has timed, then those
                             changed since their table, three rungs a unit, while the budget
                             lasts
====================  =====  ==============================================================

``--plan full`` is everything: the test suite on the GPU, the ceilings, the timer over every
op's example problem, every ladder and its peers over each op's ``GPU_SWEEP`` (one unit a
problem), Nsight Compute over every rung; its units take what the budget has left.
``--parts``, ``--ops`` and ``--problems`` (a label substring, a dtype, or an index into the op's
``GPU_SWEEP``) pick units of the plan and run them in the order given.  ``--list`` prints the
plan and exits; ``OUT/plan.json`` always has it.

**Units stop when told.**  Each unit runs in its own child process, in its own process group,
with ``min(its cap, what the budget has left)``; at that limit the whole group is killed (the
unit, pytest's workers, ``ncu`` and the profiled program, bench's fault-recovery child) and the
plan goes on.  The budget counts from this process's start.  ``OUT/summary.md`` (and
``summary.csv``, ``status.json``) says per unit: done, timed out, device fault, failed, skipped
(and why) or not started, with its seconds.

**An item at a time, and a hung one costs a bounded time.**  An ops or timer unit writes to its
log, flushed, ``start <op> <rung>`` as an item starts and ``end <op> <rung>: <status> in <s>``
with its result as it ends, and keeps ``OUT/progress/<unit>.json`` (the item in flight, since
when, the items done with their seconds by stage).  An item running past the stall limit
(``--stall-s``; default max(15 s, the unit's cap / 3); 0: none) is *hung*: the unit's group is
killed, the item is never recorded, and a fresh child goes on with the unit's items not yet
measured, within what is left of the unit's cap.  The summary names each hung item with its
seconds (``summary.csv``'s and ``status.json``'s ``hung``); for a unit killed at its cap or the
budget it names the item in flight and for how long ("killed at its cap (50 s) while on gemm 24
cluster (44 s)"); where the seconds went is summed from the items done.  ``--resume-from``
skips the items that hung in the folders given; ``--retry-hung`` (or ``--force``) tries them
again.  ``--rehearse --hang NAME`` makes the rung or peer NAME sleep in every ops unit, to show it.

**Every rung on its own kind of problem.**  The timer and ncu units take each rung's
``example(problem)``: float16-only rungs are timed and profiled at their float16 twin.  ``ncu``
runs with ``--clock-control none`` (clocks as in use; the table keeps each row's SM clock).

**Resume.**  A (part, op, problem, rung) already measured for this commit on this GPU (records in
``data/results/``, ``OUT/results/`` or a ``--resume-from`` folder, the timer's and ncu's CSVs
there) is skipped, so a second device call that carries the first call's output goes on.

**Rehearsal.**  ``--rehearse`` runs the same plan through the same code (units, caps, the kill,
resume, records under ``OUT/results/``, the summary) in the CUDA simulator at each op's tiny
``SIM_SWEEP`` twin of every planned problem, with a first unit that sleeps past its cap (and
leaves a grandchild behind) to show the kill.  Records are marked ``simulated`` and filed under
the simulator's own folder; ``perfkit.results.record`` never writes them to ``data/results/``.
``--max-rungs N`` keeps the first N rungs of each (part, op, problem) (a fast rehearsal).

**Rung filters.**  ``--rungs NAME,...`` keeps only these rungs or peers (by name, or by rung
number), plus the oracle; ``--best`` keeps the rungs a card calls best (the fastest recorded on
this GPU at the problem, and the ladder's last rung) plus the oracle and the peers; ``--new`` keeps,
in the ops units, the rungs and peers no record of this GPU has at the problem (any commit), plus
the oracle (a float16-only rung in a float32 unit stays: its refusal is instant).  The summary
says where an ops unit's seconds went: precompile, inputs, compile+check, load+check, timing,
recheck+record, peers.

**Compiled before it is timed.**  An ops unit first compiles its rungs in K worker processes
(``--precompile K``; default the cores less one, at most one a rung; ``0``: off) for the device's
target, and puts each rung's kernels into the dispatchers it launches
(:mod:`perfkit.record.precompile`), within half its time limit; its seconds are the unit's
``precompile``, and a rung that then compiled nothing at its launch has its check as
``load+check``.  A rung that could not be precompiled (its log line says why) compiles at its
first launch as before (``compile+check``).  In the simulator there is nothing to compile: its
log line says so.

**Across a fleet.**  ``--cluster SPEC --kinds KIND,...`` runs each unit once on each GPU kind as
a task on a Dask cluster (:mod:`perfkit.cluster`), through the same child runner; the records come
back to this process and are written under ``OUT/results/`` (see :mod:`perfkit.record.fleet`).

Exit status (a hung item alone changes nothing: its unit went on and is done): 0 when every unit was done or skipped, 3 when one timed out or was not started
(run again with ``--resume-from`` to go on), 4 on a device fault, 1 when a unit failed.
"""
from perfkit.record.command import main, parser
from perfkit.record.plan import PARTS, PLANS, QUICK_BUDGET_S, PlanError, Unit

__all__ = ["main", "parser", "PARTS", "PLANS", "QUICK_BUDGET_S", "PlanError", "Unit"]
