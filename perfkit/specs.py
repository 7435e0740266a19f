"""Published GPU specifications from ``data/devices.yaml``, validated and in SI units.

Every figure in the file is ``{value, unit, source}`` (plus an optional ``note``); the loader
refuses a figure without a source URL or with a unit that does not fit the field, and names
the file, device and field in the error.  ``get()`` finds a device by its key, its marketing
name or any name the CUDA driver reports for it, ignoring case and punctuation.

This module does not import numba: it is safe to use before the backend is chosen.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import paths

__all__ = ["SpecError", "DeviceSpec", "load", "get", "names", "DEFAULT_PATH"]

DEFAULT_PATH = paths.DATA / "devices.yaml"

# unit -> factor to SI, per kind of quantity
_UNITS = {
    "count": {"count": 1},
    "clock": {"MHz": 1, "GHz": 1e3},  # clocks stay in MHz
    "rate": {"TFLOP/s": 1e12, "GFLOP/s": 1e9, "PFLOP/s": 1e15, "TOP/s": 1e12, "POP/s": 1e15},
    "bandwidth": {"TB/s": 1e12, "GB/s": 1e9},
    "size": {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3},
}
# field -> (kind, required value (False: value may be null when unpublished))
_FIELDS = {
    "sm_count": ("count", True),
    "boost_clock": ("clock", False),
    "fp32": ("rate", True),
    "memory_size": ("size", True),
    "memory_bandwidth": ("bandwidth", True),
    "l2_size": ("size", False),
    "smem_per_sm": ("size", True),
    "smem_per_block": ("size", True),
    "registers_per_sm": ("count", True),
    "max_warps_per_sm": ("count", True),
}


class SpecError(ValueError):
    """devices.yaml is malformed, or a device is unknown."""


@dataclass(frozen=True)
class DeviceSpec:
    key: str
    name: str
    aliases: tuple[str, ...]
    compute_capability: tuple[int, int]
    sm_count: int
    boost_clock_mhz: float | None
    fp32_flops: float
    tensor_flops: dict
    dram_bw: float
    memory_bytes: float
    l2_bytes: float | None
    smem_per_sm_bytes: int
    smem_per_block_bytes: int
    registers_per_sm: int
    max_warps_per_sm: int
    sources: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False, compare=False)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _figure(where: str, fld: str, fig, kind: str, required: bool) -> tuple[float | None, str]:
    if not isinstance(fig, dict):
        raise SpecError(f"{where}.{fld}: expected a mapping {{value, unit, source}}, got {fig!r}")
    for part in ("value", "unit", "source"):
        if part not in fig:
            raise SpecError(f"{where}.{fld}: missing {part}")
    src = fig["source"]
    if not (isinstance(src, str) and re.match(r"https?://\S+$", src)):
        raise SpecError(f"{where}.{fld}: source must be an http(s) URL, got {src!r}")
    unit = fig["unit"]
    if unit not in _UNITS[kind]:
        raise SpecError(f"{where}.{fld}: unit {unit!r} is not a {kind} unit; "
                        f"use one of {', '.join(_UNITS[kind])}")
    value = fig["value"]
    if value is None:
        if required or not fig.get("note"):
            raise SpecError(f"{where}.{fld}: value is null" + ("" if not required else " but required")
                            + ("" if fig.get("note") else "; an unpublished figure needs a note saying so"))
        return None, src
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise SpecError(f"{where}.{fld}: value must be a positive number, got {value!r}")
    return float(value) * _UNITS[kind][unit], src


def _device(where: str, key: str, d) -> DeviceSpec:
    if not isinstance(d, dict):
        raise SpecError(f"{where}: expected a mapping, got {type(d).__name__}")
    for req in ("name", "compute_capability", "tensor", *_FIELDS):
        if req not in d:
            raise SpecError(f"{where}.{req}: missing")
    cc = re.fullmatch(r"(\d+)\.(\d+)", str(d["compute_capability"]))
    if not cc:
        raise SpecError(f"{where}.compute_capability: expected 'major.minor', got {d['compute_capability']!r}")
    vals, sources = {}, {}
    for fld, (kind, required) in _FIELDS.items():
        vals[fld], sources[fld] = _figure(where, fld, d[fld], kind, required)
    if not isinstance(d["tensor"], dict) or not d["tensor"]:
        raise SpecError(f"{where}.tensor: expected a mapping dtype -> figure")
    tensor = {}
    for dt, fig in d["tensor"].items():
        tensor[str(dt)], sources[f"tensor_flops.{dt}"] = _figure(where, f"tensor.{dt}", fig, "rate", True)
    sources["fp32_flops"], sources["dram_bw"] = sources["fp32"], sources["memory_bandwidth"]
    aliases = d.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{where}.aliases: expected a list of names")
    return DeviceSpec(
        key=key, name=str(d["name"]), aliases=tuple(aliases),
        compute_capability=(int(cc.group(1)), int(cc.group(2))),
        sm_count=int(vals["sm_count"]), boost_clock_mhz=vals["boost_clock"],
        fp32_flops=vals["fp32"], tensor_flops=tensor, dram_bw=vals["memory_bandwidth"],
        memory_bytes=vals["memory_size"], l2_bytes=vals["l2_size"],
        smem_per_sm_bytes=int(vals["smem_per_sm"]), smem_per_block_bytes=int(vals["smem_per_block"]),
        registers_per_sm=int(vals["registers_per_sm"]), max_warps_per_sm=int(vals["max_warps_per_sm"]),
        sources=sources, raw=d,
    )


_cache: dict = {}


def load(path: Path | str | None = None) -> dict[str, DeviceSpec]:
    """All devices in the file, validated (cached by path and modification time)."""
    path = Path(path or DEFAULT_PATH)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from exc
    if _cache.get(path) and _cache[path][0] == stamp:
        return _cache[path][1]
    where = path.name
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: invalid YAML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:  # a directory, or unreadable
        raise SpecError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: expected a mapping at the top level")
    if doc.get("schema") != 1:
        raise SpecError(f"{where}: expected 'schema: 1', got {doc.get('schema')!r}")
    devices = doc.get("devices")
    if not isinstance(devices, dict) or not devices:
        raise SpecError(f"{where}: expected a non-empty 'devices' mapping")
    specs = {str(k): _device(f"{where}: {k}", str(k), v) for k, v in devices.items()}
    _cache[path] = (stamp, specs)
    return specs


def names(path: Path | str | None = None) -> list[str]:
    return sorted(load(path))


def get(name: str, path: Path | str | None = None) -> DeviceSpec:
    """A device by key, marketing name or driver-reported alias (case and punctuation ignored)."""
    specs = load(path)
    want = _norm(name)
    for s in specs.values():
        if want in {_norm(s.key), _norm(s.name), *(_norm(a) for a in s.aliases)}:
            return s
    raise SpecError(f"unknown device {name!r}; known: {', '.join(sorted(specs))} "
                    f"(add it to {Path(path or DEFAULT_PATH).name} with sources)")
