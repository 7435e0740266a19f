"""What an instruction becomes in the compiled kernel: for a few SASS opcodes, how many each rung's
kernel holds (in its code and in its hot loop) and one line of each, read from the anatomy report
(the static store or the compiler, no GPU).  A notebook asks "which instructions will the new PTX
become?" before it shows this table (:meth:`perfkit.lesson.LadderView.sass`)."""
from __future__ import annotations

import re

import pandas as pd

#: what each opcode a notebook asks about is (the PTX it comes from), for the table's last column
GLOSSARY = {
    "HMMA": "mma.sync: one warp's 16x8x16 tensor-core MMA, operands in registers",
    "LDSM": "ldmatrix: shared memory -> a warp's MMA fragments in registers",
    "HGMMA": "wgmma.mma_async: a warpgroup's asynchronous MMA, operands read from shared memory "
             "through descriptors (gdesc)",
    "WARPGROUP": "wgmma.fence (ARRIVE) and wgmma.wait_group (DEPBAR): order and wait for a warpgroup's HGMMA",
    "LDGSTS": "cp.async: one thread's 4-16 byte copy, global -> shared, not through registers",
    "UTMALDG": "cp.async.bulk.tensor: one thread's copy of a whole 2-D box by the TMA unit",
    "SYNCS": "mbarrier: init (EXCH), expect_tx / arrive, and the phase wait (PHASECHK)",
    "BAR": "bar.sync (__syncthreads): the whole block waits",
    "FENCE": "fence.proxy.async: the threads' shared-memory writes made visible to the async proxy",
    "FFMA": "a float32 fused multiply-add (SIMT)",
    "USETMAXREG": "setmaxnreg: a warpgroup gives registers back to the CTA's pool (.dealloc) or claims more (.inc)",
    "UTMASTG": "cp.async.bulk.tensor shared -> global: one thread's store of a whole box by the TMA unit",
    "STS": "a shared-memory store from registers",
    "UCGABAR": "barrier.cluster: arrive (UCGABAR_ARV) and wait (UCGABAR_WAIT) for every thread of the cluster",
    "MEMBAR": "a memory fence at a scope (.CTA, .GPU): orders the thread's memory accesses, here "
              "barrier.cluster.arrive's release",
    "LDS": "a shared-memory load into registers",
    "LDG": "a global-memory load into registers",
}

_PRED = re.compile(r"^@!?U?P\w+\s+")


def mnemonic(instr: str) -> str:
    """The opcode of one SASS instruction, without its guard predicate and modifiers:
    ``@!P0 HGMMA.64x128x16.F32 R24, ...`` -> ``HGMMA``."""
    return _PRED.sub("", instr.strip()).split(" ", 1)[0].split(".", 1)[0]


def is_opcode(instr: str, op: str) -> bool:
    """Whether one SASS instruction is of opcode ``op``: its mnemonic, or one of its family whose
    name carries an underscore suffix (``UCGABAR`` counts ``UCGABAR_ARV`` and ``UCGABAR_WAIT``,
    which have no dot before the suffix)."""
    m = mnemonic(instr)
    return m == op or m.startswith(op + "_")


def _instructions(sass: str) -> list[str]:
    from ..anatomy import sass_lines

    return [i for _, i in sass_lines(sass)]


def opcode_counts(report, opcodes) -> dict[str, dict]:
    """Per opcode: ``kernel`` (instructions of that opcode in the compiled code: static, a loop
    body counts once), ``hot_loop`` (in the hot loop's body; None where no loop was found) and
    ``example`` (its first line in the code, '' where there is none), ``forms`` (its distinct
    opcodes with modifiers, in order of appearance: ``SYNCS.EXCH.64``, ``SYNCS.ARRIVE.TRANS64``...)."""
    instrs = _instructions(report.sass)
    loop = report.hot_loop
    body = list(getattr(loop, "body", None) or []) if loop is not None else None
    out = {}
    for op in opcodes:
        hits = [i for i in instrs if is_opcode(i, op)]
        out[op] = {"kernel": len(hits),
                   "hot_loop": None if body is None else sum(is_opcode(i, op) for i in body),
                   "example": hits[0] if hits else "",
                   "forms": list(dict.fromkeys(_PRED.sub("", i.strip()).split(" ", 1)[0] for i in hits))}
    return out


def sass_table(reports: dict, opcodes) -> pd.DataFrame:
    """One row per opcode, for rungs ``reports`` (label -> anatomy report, in reading order): its
    count in each rung's code and hot loop, its forms and one line of it from the last rung that has
    it, and what it is (:data:`GLOSSARY`)."""
    counts = {label: opcode_counts(r, opcodes) for label, r in reports.items()}
    rows = []
    for op in opcodes:
        row = {"SASS": op}
        for label, c in counts.items():
            hl = c[op]["hot_loop"]
            row[f"{label}: in the code"] = c[op]["kernel"]
            row[f"{label}: in the hot loop"] = "—" if hl is None else hl
        row["its forms"] = ", ".join(next((c[op]["forms"] for c in reversed(list(counts.values()))
                                           if c[op]["forms"]), [])[:4]) or "—"
        row["one line of it"] = next((c[op]["example"] for c in reversed(list(counts.values())) if c[op]["example"]),
                                     "—")
        row["what it is"] = GLOSSARY.get(op, "")
        rows.append(row)
    return pd.DataFrame(rows)
