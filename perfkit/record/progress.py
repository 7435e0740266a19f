"""An item at a time: what a unit's child is on and what it has done, for the parent to read.

The child (:class:`Progress`) prints a line when it starts an item and the item's result line when
it ends, flushed, to the unit's log, and rewrites ``OUT/progress/<unit>.json`` whole (written then
renamed: a reader never sees it half written) with the item in flight and since when, and per item
done its status and seconds by stage.  The parent (:mod:`perfkit.record.supervise`) reads it while
the unit runs, to find an item past the stall limit, and after, to name the item a killed unit was
on and to say where the unit's seconds went.  Times are ``time.time()``: the parent and the child
are on one machine."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

#: a unit's seconds by stage: the summary's name -> bench.sweep's column
STAGES = {"inputs": "inputs_s", "compile+check": "check_s", "timing": "time_s", "recheck+record": "record_s"}
#: a precompiled rung's check_s: the cubin loaded, not compiled (its compile is the unit's "precompile")
LOADED = "load+check"


def path(out: Path, unit: str) -> Path:
    return Path(out) / "progress" / f"{unit}.json"


def label(item: dict) -> str:
    """How a log line and the summary name an item: ``gemm 24 cluster``."""
    return f"{item['op']} {item['rung']}"


def ident(item: dict) -> str:
    """An item's identity within a run (op, problem, rung or peer)."""
    return f"{item['op']}|{item['label']}|{item['variant']}"


class Progress:
    """The child's side: ``start(item)`` before an item, ``end(item, ...)`` after it."""

    def __init__(self, out: Path, unit: str, attempt: int = 1):
        self.file = path(out, unit)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.doc = {"unit": unit, "attempt": attempt, "pid": os.getpid(), "in_flight": None, "done": [], "phases": {}}
        self._write()

    def phase(self, name: str, seconds: float) -> None:
        """Seconds the unit spent on something of its own, not an item's (``precompile``)."""
        self.doc["phases"][name] = self.doc["phases"].get(name, 0.0) + seconds
        self._write()

    def start(self, item: dict | None, what: str | None = None, watch: bool = True) -> None:
        """``item`` is in flight from now (``what`` names something else in flight; ``watch``
        False: the stall limit does not apply to it, as to a sweep's fresh process after a device
        fault, which reports its rows only at its end)."""
        if item is None and what is None:
            self.doc["in_flight"] = None
        else:
            name = label(item) if item is not None else what
            self.doc["in_flight"] = {"label": name, "ident": ident(item) if item is not None else None,
                                     "since": time.time(), "watch": watch}
            print(f"start {name}", flush=True)
        self._write()

    def end(self, item: dict, status: str, seconds: dict | None = None, peer: bool = False, line: str = "") -> None:
        """``item`` ended; what is in flight stays so unless it was this item (the rows of a
        sweep's fresh process after a device fault come together at its end)."""
        f = self.doc["in_flight"]
        took = None
        if f and f.get("ident") == ident(item):
            took, self.doc["in_flight"] = time.time() - f["since"], None
        self.doc["done"].append({"label": label(item), "ident": ident(item), "status": status, "peer": peer,
                                 "seconds": took, "stages": seconds or {}})
        print(f"end   {label(item)}: {status}{f' in {took:.1f} s' if took is not None else ''}"
              f"{'  ' + line if line else ''}", flush=True)
        self._write()

    def _write(self) -> None:
        tmp = self.file.with_name(self.file.name + ".tmp")
        tmp.write_text(json.dumps(self.doc))
        tmp.replace(self.file)


def read(out: Path, unit: str) -> dict | None:
    """The unit's progress as its child last wrote it (None: none written)."""
    try:
        return json.loads(path(out, unit).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def row_stages(row: dict) -> dict:
    """A bench.sweep row's seconds by stage (a NaN, a stage it never reached, as 0)."""
    out = {}
    for name, col in STAGES.items():
        v = row.get(col)
        out[name] = float(v) if isinstance(v, (int, float)) and v == v else 0.0
    return out


def stages(done: list[dict], phases: dict | None = None) -> dict:
    """Seconds by stage summed over the items done, the peers' (library) seconds apart; the unit's
    own ``phases`` (``precompile``) first, and ``load+check`` (precompiled rungs) where there was one."""
    spent = {name: 0.0 for name in STAGES}
    spent["peers"] = 0.0
    for d in done:
        for name, v in (d.get("stages") or {}).items():
            key = "peers" if d.get("peer") else name
            spent[key] = spent.get(key, 0.0) + v
    order = [*(phases or {}), "inputs", "compile+check", LOADED, "timing", "recheck+record", "peers"]
    spent.update(phases or {})
    keys = [k for k in order if k in spent] + [k for k in spent if k not in order]
    return {k: round(spent[k], 2) for k in keys}


def stages_text(spent: dict) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in spent.items())
