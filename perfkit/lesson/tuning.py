"""The device's tuning tables (``data/tuning/``, written by ``perfkit record --parts tune`` and
``perfkit record import``): a GEMM rung's configurations, each with the model's estimate made
before any was timed and the time the GPU gave it, as a table and a paragraph written from the
same numbers.  Not records: a winning configuration becomes the rung's own in a later commit and
is recorded then."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from .. import paths
from .formatting import fmt_seconds

__all__ = ["tuning_tables", "tuning_table", "tuning_paragraph", "describe_config"]


def tuning_tables(root: Path | str | None = None) -> list[Path]:
    """Every tuning table in ``root`` (default ``data/tuning/``), by name (GPU key, then date)."""
    folder = Path(root) if root is not None else paths.DATA / "tuning"
    return sorted(folder.glob("*.csv")) if folder.is_dir() else []


def describe_config(rung: str, config: dict) -> str:
    """A configuration in the words of its tile: ``128x256x32, 3 stages, 8 warps`` (``rung`` is
    the rung's label, ``18 tc_deep``; its ladder rebuilds the variant to read the tile)."""
    from ..kernels import gemm

    name = str(rung).split(" ", 1)[-1]
    base = next((v for v in gemm.LADDER if v.name == name), None)
    try:
        v = dataclasses.replace(base, **config)
    except Exception:  # noqa: BLE001  (a rung renamed since: the fields as they are)
        return " ".join(f"{k}={x}" for k, x in sorted(config.items()))
    words = [f"{v.BM}x{v.BN}x{v.BK}"]
    if hasattr(v, "STAGES"):
        words.append(f"{v.STAGES} stages")
    words.append(f"{v.threads() // 32} warps")
    return ", ".join(words)


def tuning_table(root: Path | str | None = None) -> pd.DataFrame:
    """The newest table of each GPU, one row per configuration that was checked and timed, the
    fastest first within each (GPU, rung): the model's estimate and rank beside the measured
    median and its fraction of the oracle.  Empty where no table exists."""
    newest: dict[str, Path] = {}
    for f in tuning_tables(root):
        newest[f.stem.rsplit("-", 3)[0]] = f  # <gpu key>-<yyyy>-<mm>-<dd>: the last date wins
    frames = []
    for key, f in sorted(newest.items()):
        df = pd.read_csv(f)
        if df.empty or "median_us" not in df:
            continue
        # a unit's configurations (rung 19's holds rung 11 too), and how many the model ranked
        # (timed or not): "ranked k of n"
        if "unit" not in df:
            df = df.assign(unit=df["rung"])
        df = df.assign(ranked_of=df["unit"].map(df.groupby("unit")["model_rank"].count()))
        df = df[df["median_us"].notna() & (df.get("status", "ok") == "ok")]
        if "simulated" in df:
            df = df[~df["simulated"].astype(str).str.lower().eq("true")]
        if df.empty:
            continue
        df = df.assign(gpu_key=key, table=f.name,
                       tile=[describe_config(r, json.loads(c)) for r, c in zip(df["rung"], df["config"])])
        frames.append(df)
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    out = out.sort_values(["gpu_key", "unit", "median_us"], kind="stable")
    cols = ["gpu_key", "unit", "rung", "tile", "default", "model_rank", "ranked_of", "model_us", "median_us",
            "x_oracle", "commit", "table"]
    return out[[c for c in cols if c in out]].reset_index(drop=True)


def tuning_paragraph(table: pd.DataFrame) -> str:
    """Per (GPU, rung): the fastest configuration and its fraction of the oracle, the rung's own
    beside it, and where the model had ranked the fastest (its prediction, made before timing)."""
    if table is None or table.empty:
        return ("No tuning table yet: `perfkit record --parts tune` on a GPU times rungs 18 and 19's "
                "configurations in the model's order, and `perfkit record import` brings the table here.")
    lines = []
    for (key, _), g in table.groupby(["gpu_key", "unit"], sort=True):
        best = g.iloc[0]
        own = g[g["default"].astype(str).str.lower() == "true"]
        rung = own.iloc[0]["rung"] if not own.empty else best["rung"]
        text = (f"{key}, rung {rung}: {len(g)} configurations timed; the fastest, "
                f"{best['tile']}{'' if best['rung'] == rung else ' (rung ' + str(best['rung']) + ')'}, ran "
                f"{fmt_seconds(best['median_us'] * 1e-6)} (x{best['x_oracle']:.2f} of the oracle)")
        if not own.empty and own.index[0] != best.name:
            o = own.iloc[0]
            text += (f"; the rung's own, {o['tile']}, {fmt_seconds(o['median_us'] * 1e-6)} "
                     f"(x{o['x_oracle']:.2f})")
        elif not own.empty:
            text += "; that is the rung's own configuration"
        if best["model_rank"] == best["model_rank"]:
            text += (f". The model, before the timing, had ranked it {int(best['model_rank'])} of {int(best['ranked_of'])} "
                     f"(estimate {fmt_seconds(best['model_us'] * 1e-6)})")
        lines.append(text + ".")
    return " ".join(lines)
