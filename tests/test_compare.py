"""perfkit compare: pairs of records, their ratio, its bootstrap interval and the verdict.
Record sets are written here as JSON files of the records' schema, with samples drawn from
known distributions or resampled from a real H100 record."""
import json
from pathlib import Path

import numpy as np
import pytest

from perfkit import compare, results

ROOT = Path(__file__).resolve().parent.parent


def _write(root: Path, *, gpu="NVIDIA H100 80GB HBM3", commit="aaaaaaa1", utc="2026-11-20T10:00:00+00:00",
           op="softmax", problem="rows=4096 cols=4096 dtype=float32 axis=-1", variant="fused", samples=()):
    slug = gpu.lower().replace(" ", "-")
    folder = root / slug / op
    folder.mkdir(parents=True, exist_ok=True)
    s = [float(x) for x in samples]
    doc = {"schema": 1, "op": op, "problem": problem, "variant": variant, "rung": 2, "simulated": False,
           "flops": 1.0, "bytes": 1.0, "check_ok": True,
           "timing": {"median_s": float(np.median(s)), "samples": s, "n": len(s)},
           "provenance": {"gpu": gpu, "gpu_slug": slug, "git_commit": commit, "utc": utc}}
    path = folder / f"{utc[:19].replace(':', '')}-{variant}-{commit}.json"
    path.write_text(json.dumps(doc))
    return path


def _set(root, commit, utc, scale, rng, variants=("fused", "warp", "tuned"), gpu="NVIDIA H100 80GB HBM3"):
    for v in variants:
        _write(root, gpu=gpu, commit=commit, utc=utc, variant=v,
               samples=100e-6 * scale * (1 + 0.01 * rng.standard_normal(200)))


def test_a_known_10_percent_slowdown_is_slower_and_fails(tmp_path):
    rng = np.random.default_rng(1)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T10:00:00+00:00", 1.0, rng)
    _set(tmp_path, "bbbbbbb2", "2026-11-21T10:00:00+00:00", 1.10, rng)
    c = compare.compare(root=tmp_path)  # default: the two newest commits on the GPU
    assert c.base.endswith("commit=aaaaaaa1") and c.new.endswith("commit=bbbbbbb2")
    assert list(c.table["verdict"]) == ["slower"] * 3
    assert ((c.table["ratio"] - 1.10).abs() < 0.01).all()
    assert (c.table["ci_low"] > 1.05).all() and (c.table["ci_high"] < 1.15).all()
    assert len(c.failed) == 3 and "FAIL: 3 slower by more than 5%" in str(c)
    assert compare.cli(["--results", str(tmp_path)]) == 1
    assert compare.cli(["--results", str(tmp_path), "--fail-above", "0.2"]) == 0  # slower, but within 20%
    back = compare.compare("commit=bbbbbbb2", "commit=aaaaaaa1", root=tmp_path)
    assert list(back.table["verdict"]) == ["faster"] * 3 and len(back.failed) == 0


def test_no_change_with_real_noise_is_same_within_noise(tmp_path):
    """Two draws from one real H100 record's raw samples: the same code, the same machine."""
    real = sorted((ROOT / "data" / "results").glob("nvidia-h100-80gb-hbm3/softmax/*.json"))
    samples = next(np.asarray(d["timing"]["samples"]) for d in (json.loads(p.read_text()) for p in real)
                   if len(d["timing"].get("samples") or []) >= 100)
    rng = np.random.default_rng(7)
    for commit, utc in (("aaaaaaa1", "2026-11-20T10:00:00+00:00"), ("bbbbbbb2", "2026-11-21T10:00:00+00:00")):
        for v in ("fused", "warp", "tuned", "online"):
            _write(tmp_path, commit=commit, utc=utc, variant=v, samples=rng.choice(samples, len(samples)))
    c = compare.compare("commit=aaaaaaa1", "commit=bbbbbbb2", root=tmp_path)
    assert (c.table["verdict"] == "same within noise").all(), c.table
    assert (c.table["ci_low"] <= 1).all() and (c.table["ci_high"] >= 1).all()
    assert compare.cli(["commit=aaaaaaa1", "commit=bbbbbbb2", "--results", str(tmp_path)]) == 0


def test_pairs_on_one_side_only_are_listed_apart(tmp_path):
    rng = np.random.default_rng(2)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T10:00:00+00:00", 1.0, rng, variants=("fused", "warp"))
    _set(tmp_path, "bbbbbbb2", "2026-11-21T10:00:00+00:00", 1.0, rng, variants=("warp", "tuned"))
    c = compare.compare("commit=aaaaaaa1", "commit=bbbbbbb2", root=tmp_path)
    assert list(c.table["variant"]) == ["warp"]
    assert list(c.only_base["variant"]) == ["fused"] and list(c.only_new["variant"]) == ["tuned"]
    assert "only in BASE (1): softmax fused" in str(c) and "only in NEW (1): softmax tuned" in str(c)


def test_two_gpus_pair_without_a_verdict_unless_asked(tmp_path):
    rng = np.random.default_rng(3)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T10:00:00+00:00", 1.0, rng, gpu="NVIDIA H100 80GB HBM3")
    _set(tmp_path, "aaaaaaa1", "2026-11-21T10:00:00+00:00", 0.7, rng, gpu="NVIDIA H200")
    c = compare.compare("h100", "h200", root=tmp_path)
    assert c.across_gpus and len(c.table) == 3 and (c.table["verdict"] == "—").all()
    assert ((c.table["ratio"] - 0.7).abs() < 0.01).all() and set(c.table["gpu_new"]) == {"NVIDIA H200"}
    assert "no verdict on noise" in str(c) and len(c.failed) == 0
    asked = compare.compare("h100", "h200", root=tmp_path, verdict_across_gpus=True)
    assert (asked.table["verdict"] == "faster").all()


def test_selectors_and_their_errors(tmp_path):
    rng = np.random.default_rng(4)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T10:00:00+00:00", 1.0, rng)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T12:00:00+00:00", 1.2, rng)
    c = compare.compare("before=2026-11-20T11:00", "after=2026-11-20T11:00", root=tmp_path)
    assert (c.table["verdict"] == "slower").all() and (c.table["code"] == "same").all()
    assert len(compare.select("2026-11-20,aaaaaaa", root=tmp_path)) == 6
    assert len(compare.select(f"dir={tmp_path},gpu=h100", root=None)) == 6
    with pytest.raises(compare.CompareError, match="no real-GPU record"):
        compare.select("commit=fffffff", root=tmp_path)
    with pytest.raises(compare.CompareError, match="unknown selector"):
        compare.select("colour=red", root=tmp_path)
    with pytest.raises(compare.CompareError, match="two commits"):
        compare.compare(root=tmp_path)  # one commit only: the default cannot choose
    with pytest.raises(SystemExit):
        compare.cli(["only-one-side"])


def test_the_repeated_h100_records_compare(tmp_path):
    """The records of 2026-11-23 hold two runs of the rmsnorm rungs minutes apart: compare
    pairs them, and the plot draws one row per pair."""
    c = compare.compare("gpu=h100,before=2026-11-23T10:24", "gpu=h100,commit=7c7b2e0,after=2026-11-23T10:24")
    assert len(c.table) >= 10 and set(c.table["op"]) == {"rmsnorm"}
    assert {"slower", "same within noise"} <= set(c.table["verdict"])
    ax = compare.plot(c)
    assert len(ax.get_yticklabels()) == len(c.table)


def test_the_plots_ratio_axis_labels_ticks_on_both_sides_of_1(tmp_path):
    """Notebook 01's comparison reached x1.66, yet its log axis labelled no tick above 1 (a log
    axis within a decade labels only its power of ten): every ratio plotted lies between two
    labelled ticks, at least one each side of 1 where the ratios are."""
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(3)
    _set(tmp_path, "aaaaaaa1", "2026-11-20T10:00:00+00:00", 1.0, rng)
    _write(tmp_path, commit="bbbbbbb2", utc="2026-11-21T10:00:00+00:00", variant="fused",
           samples=166e-6 * (1 + 0.01 * rng.standard_normal(200)))
    _write(tmp_path, commit="bbbbbbb2", utc="2026-11-21T10:00:00+00:00", variant="warp",
           samples=82e-6 * (1 + 0.01 * rng.standard_normal(200)))
    c = compare.compare("commit=aaaaaaa1", "commit=bbbbbbb2", root=tmp_path)
    ax = compare.plot(c)
    ax.figure.canvas.draw()
    lo, hi = ax.get_xlim()
    labelled = [t.get_position()[0] for t in ax.get_xticklabels() if t.get_text().strip() and lo <= t.get_position()[0] <= hi]
    assert any(x > 1 for x in labelled) and any(x < 1 for x in labelled), labelled
    assert min(labelled) <= c.table["ratio"].min() * 1.15 and max(labelled) >= c.table["ratio"].max() / 1.15, labelled
    plt.close(ax.figure)
