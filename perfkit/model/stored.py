"""Estimates kept: local cache -> static store -> computed, as the anatomy's builds are kept.

An estimate costs ~0.1 s (the SASS read into loops and arms, each warp's scoreboard, the access
simulation's weights); a notebook asks for hundreds (its cards, ``perfkit model validate`` over
every record) and a fresh clone would compute each.  An estimate is a function of what its key
holds, so a kept one is the one that would be computed:

* the rung (class, config) and its source closure (:func:`perfkit.static.source_hash`), the
  problem, the GPU's rates as :func:`perfkit.model.rates` gives them (every number the equations
  read: a changed ``rates.yaml`` or ``devices.yaml``, or a test's patched rates, is another key),
  ``banks`` and ``ahead_s``;
* the code that computes it (:data:`perfkit.static.PRODUCERS` ``"estimate"``: the model, the
  anatomy's reading of the SASS, the access simulation, occupancy), by its text;
* the compiler tools (the entry carries them; other tools, other SASS: computed again).

The JSON keeps tuples as tuples (launch grid and block, compute capability), so a kept estimate
equals the computed one field for field (``tests/test_model.py``).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .. import cache, static
from .equations import Estimate

KIND = "estimate"


def key(variant, problem, gpu: str, rates: dict, banks: bool, ahead_s) -> str:
    """The cache and store key of ``estimate(variant, problem, gpu, banks=, ahead_s=)`` with ``rates``."""
    return static.key({"v": type(variant).__module__ + "." + type(variant).__qualname__, "config": variant.config,
                       "problem": type(problem).__qualname__, "params": problem.params, "gpu": gpu,
                       "rates": dict(rates), "banks": bool(banks), "ahead_s": ahead_s,
                       "source": static.source_hash(variant), "code": static.producer_version(KIND)})


def _tools() -> dict:
    from ..anatomy import target

    return target.versions()


def _tag(o):
    if isinstance(o, tuple):
        return {"__tuple__": [_tag(x) for x in o]}
    if isinstance(o, dict):
        return {k: _tag(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_tag(x) for x in o]
    return o


def _untag(o):
    if isinstance(o, dict):
        if len(o) == 1 and "__tuple__" in o:
            return tuple(_untag(x) for x in o["__tuple__"])
        return {k: _untag(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_untag(x) for x in o]
    return o


def _path(k: str) -> Path:
    return cache.folder(KIND) / f"{k}.json"


def _packed(d: dict, rates: dict) -> dict:
    """``Estimate.as_dict()`` without what the key already holds: the rates it copied into its
    inputs, and each launch's inputs (its ``launches`` entry less the legs); ~12 KB -> ~3 KB.
    Kept whole where the rules below would not rebuild it exactly."""
    inputs, per = d["inputs"], _launch_inputs(d["launches"])
    source = inputs.get("launch0", {}).get("source")
    have = {n: v for n, v in inputs.items()
            if not (n in rates and v == rates[n]) and not (n in per and v == {"value": per[n], "source": source})}
    out = {**d, "inputs": have, "input_names": list(inputs), "launch_source": source}
    return out if _unpacked(out, rates) == d else d


def _launch_inputs(launches: list) -> dict:
    return {f"launch{i}": {k: v for k, v in p.items() if k != "legs"} for i, p in enumerate(launches)}


def _unpacked(doc: dict, rates: dict) -> dict:
    """The whole ``as_dict()`` again (in the order of its inputs), or {} where it cannot be."""
    if "input_names" not in doc:
        return doc
    doc = dict(doc)
    names, have, source = doc.pop("input_names"), doc["inputs"], doc.pop("launch_source")
    per = _launch_inputs(doc["launches"])
    inputs = {}
    for n in names:
        if n in have:
            inputs[n] = have[n]
        elif n in per:
            inputs[n] = {"value": per[n], "source": source}
        elif n in rates:
            inputs[n] = rates[n]
        else:
            return {}
    doc["inputs"] = inputs
    return doc


def load(k: str, rates: dict) -> Estimate | None:
    """The kept estimate under ``k`` (local cache, then the store), or None; None while the store
    is refreshed: a refresh computes every estimate, so that the builds and simulations it reads
    are kept too (read from a warm cache, they would be dropped as unused)."""
    if static.writing():
        return None
    p = _path(k)
    doc = None
    if p.exists():
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            doc = None  # a damaged entry is computed again
        if doc is not None and doc.get("tools") != _tools():
            doc = None
        doc = doc["answer"] if doc is not None else None
    if doc is None:
        doc = static.get(KIND, k, _tools())
    if doc is None:
        return None
    try:
        return Estimate(**_unpacked(_untag(doc), rates))
    except TypeError:  # the fields of Estimate changed (its code is in the key: should not happen)
        return None


def keep(k: str, e: Estimate, rates: dict) -> None:
    """Write ``e`` to the local cache (atomically) and, while the store is refreshed, to the store."""
    answer, tools = _tag(_packed(e.as_dict(), rates)), _tools()
    what = f"{e.variant} @ {e.problem} on {e.gpu}"
    p = _path(k)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"what": what, "tools": tools, "answer": answer}, f)
        os.replace(tmp, p)
    except OSError:
        pass  # a read-only cache: the estimate is still returned
    static.put(KIND, k, answer, what=what, tools=tools)
