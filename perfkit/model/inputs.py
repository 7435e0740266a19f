"""The numbers the model starts from: a GPU's datasheet (``data/devices.yaml``) and the
effective rates it lacks (``data/rates.yaml``, each with its source), as one table of
name -> ``{"value", "source"}`` (:func:`rates`); and the Nsight Compute tables validate
checks the per-level counts against (:func:`ncu_tables`)."""
from __future__ import annotations

import functools
from pathlib import Path

from .. import paths


RATES_PATH = paths.DATA / "rates.yaml"
#: the H100's first Nsight Compute table (commit 7c7b2e0; its provenance in the .json beside it);
#: validate checks every table of a GPU in this folder (:func:`ncu_tables`)
NCU_PATH = RATES_PATH.parent / "ncu" / "h100-sxm-2026-11-23.csv"


def ncu_tables(gpu: str = "h100-sxm") -> list[tuple[Path, str | None]]:
    """Every Nsight Compute table in ``data/ncu/`` taken on ``gpu`` (a devices.yaml key or
    alias, from the ``gpu`` its provenance .json names), newest first, each with the commit it
    measured (None where its .json does not say).  A session that profiles only some rungs
    writes a table of those alone, so a rung's newest counts may sit in an older table."""
    import json

    from .. import specs

    want = specs.get(gpu).key
    found = []
    for meta in sorted(NCU_PATH.parent.glob("*.json")):
        d = json.loads(meta.read_text())
        if spec_key(d.get("gpu")) == want and (meta.parent / d.get("table", "")).is_file():
            # a day's second table is <key>-<date>b.csv: the longer name is the later one
            found.append((str(d.get("date", "")), len(meta.name), meta.name, meta.parent / d["table"], d.get("commit") or None))
    return [(path, commit) for *_, path, commit in sorted(found, reverse=True)]


def ncu_table(gpu: str = "h100-sxm") -> Path | None:
    """The newest Nsight Compute table in ``data/ncu/`` taken on ``gpu``; None where there is
    none (:func:`ncu_tables` has them all)."""
    tables = ncu_tables(gpu)
    return tables[0][0] if tables else None


def spec_key(name) -> str | None:
    """devices.yaml key of a GPU name as a record or table writes it; None if unknown."""
    from .. import specs

    try:
        return specs.get(str(name)).key if name else None
    except Exception:  # noqa: BLE001  (a GPU devices.yaml does not list)
        return None


class Inputs(dict):
    def put(self, name, value, source):
        self[name] = {"value": value, "source": source}
        return value


def _load_rates(path=None) -> dict:
    import yaml

    path = Path(path or RATES_PATH)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or doc.get("schema") != 1:
        raise ValueError(f"{path.name}: expected 'schema: 1'")
    return doc


@functools.lru_cache(maxsize=8)
def _rates_doc(path: str, stamp: int) -> dict:
    return _load_rates(path)


def rates(gpu: str = "h100-sxm") -> dict:
    """Every rate :func:`estimate` uses for ``gpu``: name -> {value, source} (SI units; per-SM
    figures already multiplied out).  The fitted constants (``fitted``: ``dram_efficiency``,
    ``overlap``, ``launch_latency_s``, ``dram_latency_spread_clk``) are nothing per rung or per
    op; the host's launch cost (``host_base_s``, ``host_per_array_arg_s``) is derived from the
    records by the rule its note states, not tuned on validate."""
    from .. import specs

    s = specs.get(gpu)
    p = RATES_PATH
    doc = _rates_doc(str(p), p.stat().st_mtime_ns)
    ccs = f"{s.compute_capability[0]}.{s.compute_capability[1]}"
    arch = dict(doc["arch"]["default"])
    arch.update(doc["arch"].get(ccs, {}))
    out = Inputs()
    out.put("sm_count", s.sm_count, s.sources.get("sm_count"))
    lanes = arch["fp32_lanes_per_sm"]["value"]
    if s.boost_clock_mhz:
        clock = out.put("clock_hz", s.boost_clock_mhz * 1e6, s.sources.get("boost_clock"))
    else:
        clock = out.put("clock_hz", s.fp32_flops / (2 * lanes * s.sm_count),
                        f"derived: fp32 peak / (2 x {lanes} lanes x SMs) ({s.sources.get('fp32_flops')})")
    out.put("compute_capability", s.compute_capability, "devices.yaml")
    out.put("fp32_flops", s.fp32_flops, s.sources.get("fp32_flops"))
    out.put("dram_bw", s.dram_bw, s.sources.get("dram_bw"))
    out.put("tensor_fp16_flops", s.tensor_flops.get("fp16"), s.sources.get("tensor_flops.fp16"))
    out.put("max_warps_per_sm", s.max_warps_per_sm, s.sources.get("max_warps_per_sm"))
    out.put("l2_size_bytes", s.l2_bytes, s.sources.get("l2_size"))
    for k, fig in arch.items():
        out.put(k, fig["value"], fig["source"])
    for k, fig in doc["launch"].items():
        out.put(k, fig["value"], fig["source"])
    for k, fig in doc["fitted"].items():
        out.put(k, fig["value"], f"fitted: {fig.get('note', '')} ({fig['source']})")
    out.put("fp32_lanes_per_sm", lanes, arch["fp32_lanes_per_sm"]["source"])
    return out


# --- SASS -> pipes -------------------------------------------------------------------------
