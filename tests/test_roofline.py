import numpy as np
import pandas as pd
import pytest

from perfkit import backend, plots, roofline
from perfkit.roofline import Ceiling

CEIL = [Ceiling("fp32", "compute", 60e12, "published"), Ceiling("dram", "memory", 3e12, "published"),
        Ceiling("copy", "memory", 2.7e12, "measured")]


def test_intensity_and_attainable():
    assert roofline.intensity(10.0, 5.0) == 2.0
    np.testing.assert_allclose(roofline.attainable([1.0, 20.0, 1000.0], CEIL), [3e12, 60e12, 60e12])
    with pytest.raises(ValueError, match="positive"):
        roofline.intensity(1.0, 0.0)
    with pytest.raises(ValueError, match="compute and one memory"):
        roofline.attainable(1.0, CEIL[:1])


def _table(simulated):
    return pd.DataFrame({"flops": [2e9, 2e12], "bytes": [12e9, 3e9], "median_s": [5e-3, 0.1],
                         "simulated": [simulated, simulated], "label": ["saxpy", "gemm"],
                         "tflops": [0.4, 20.0], "gbps": [2400.0, 30.0], "rung": [1, 0],
                         "problem": ["p", "p"], "check_ok": [True, True]})


def test_plot_draws_real_points_and_refuses_simulated():
    import matplotlib

    matplotlib.use("Agg")
    ax = roofline.plot(_table(False), CEIL)
    assert len(ax.collections) == 2 and ax.get_xscale() == "log"
    ax = roofline.plot(_table(True), CEIL)
    assert len(ax.collections) == 0
    assert any("not plotted" in t.get_text() for t in ax.texts)


def test_ladder_plot_refuses_simulated_rows():
    import matplotlib

    matplotlib.use("Agg")
    ax = plots.ladder(_table(True), metric="tflops")
    assert not ax.patches and "simulated" in ax.texts[0].get_text()
    ax = plots.ladder(_table(False), metric="tflops")
    assert len(ax.patches) == 2
    with pytest.raises(ValueError, match="metric"):
        plots.ladder(_table(False), metric="speed")


def test_published_ceilings_have_sources():
    ceil = roofline.ceilings("H100 SXM", measured=False)
    kinds = {c.kind for c in ceil}
    assert kinds == {"compute", "memory"}
    assert all(c.source.startswith("http") for c in ceil)
    mem = [c for c in ceil if c.kind == "memory"][0]
    assert 3.0e12 < mem.value < 3.5e12  # H100 SXM5: 3.35 TB/s


def test_published_rates_pick_the_unit():
    from perfkit.model import Traffic

    fp32 = roofline.published_rates(Traffic(1, 1), gpu="H100 SXM")
    tc = roofline.published_rates(Traffic(1, 1, extra={"peak": "tensor.fp16"}), gpu="H100 SXM")
    assert tc["flops"] > 5 * fp32["flops"]


@pytest.mark.skipif(not backend.is_simulator(), reason="simulator behaviour")
def test_measured_ceiling_kernels_run_and_check_in_the_simulator():
    bw = roofline.copy_bandwidth(4096, record=False)
    assert bw["measurement"].simulated and np.isnan(bw["bytes_per_s"])
    fl = roofline.fp32_rate(4, record=False)
    assert np.isnan(fl["flops_per_s"]) and fl["flops"] == 2 * roofline.FMA_CHAINS * roofline.FMA_UNROLL * 4 * 2 * 32
    assert bw["below_recorded"] is None and fl["below_recorded"] is None  # nothing to compare a simulation with


@pytest.mark.parametrize("n", [1, 3, 4, 61, 4099])
def test_copy16_copies_every_element_at_awkward_sizes(n):
    """The 16-byte copy: float4 body, unrolled by 4, plus a scalar tail of up to 3 elements."""
    p = roofline.CopyProblem(n)
    x = p.make_inputs(np.random.SeedSequence().entropy % 2**31)
    assert p.check(roofline.COPY.run(p, x), p.reference(x)).ok  # the output is NaN-poisoned first


def test_fma_ceiling_kernel_checks_against_its_closed_form():
    p = roofline.FmaProblem(iters=3, blocks=2, threads=32)
    out = roofline.FMA.run(p, {})
    assert p.check(out, p.reference({})).ok
    assert not p.check(out + 1e-3, p.reference({})).ok


def _real_h100_rows():
    from perfkit import results

    return results.load(gpu="NVIDIA H100 80GB HBM3")


def test_best_recorded_results_the_ceilings_must_beat():
    """On the recorded H100 runs: cuBLAS SGEMM (50-52 TFLOP/s) is the float32 compute bar, not
    cuDNN's float32 convolution (54.8 "TFLOP/s" of direct-convolution FLOPs, more than its
    algorithm executes); the bandwidth bar is a DRAM-streaming record (problem bytes at least
    twice the L2)."""
    if _real_h100_rows().empty:
        pytest.skip("no H100 records in data/results")
    best = roofline.best_recorded("compute", gpu="NVIDIA H100 80GB HBM3")
    assert best["op"] == "gemm" and 45e12 < best["value"] < 60e12
    mem = roofline.best_recorded("memory", gpu="NVIDIA H100 80GB HBM3")
    assert mem is None or mem["value"] < 3.35e12 * 1.1
    with pytest.raises(ValueError, match="kind"):
        roofline.best_recorded("speed", gpu="NVIDIA H100 80GB HBM3")


def test_copy_kernel_uses_16_byte_accesses_in_its_sass():
    from perfkit import anatomy

    r = anatomy.inspect(roofline.COPY, roofline.CopyProblem(1 << 20), (9, 0))
    assert r.mix.get("global load 128", 0) >= 4 and r.mix.get("global store 128", 0) >= 4, r.mix
    assert "LDG.E.128" in r.sass and "STG.E.128" in r.sass


def test_fma_kernel_is_ffma_dominated_in_its_sass():
    from perfkit import anatomy

    r = anatomy.inspect(roofline.FMA, roofline.FmaProblem(iters=64, blocks=264, threads=256), (9, 0))
    loop = _hot_loop(r.sass)
    ffma = sum(1 for ins in loop if ins.startswith("FFMA"))
    assert ffma == roofline.FMA_CHAINS * roofline.FMA_UNROLL, loop
    assert ffma / len(loop) > 0.9, loop  # the counter, compare and branch: a few per 128 FFMAs


def _hot_loop(sass: str) -> list[str]:
    """The instructions of the kernel's one backward branch's loop, in order."""
    import re

    code = {}
    for line in sass.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            code[int(m.group(1), 16)] = m.group(2).strip()
    loops = []
    for addr, ins in code.items():
        m = re.search(r"BRA (0x[0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    assert len(loops) == 1, loops
    lo, hi = loops[0]
    return [re.sub(r"^@!?U?P\w+\s+", "", code[a]) for a in sorted(code) if lo <= a <= hi]


def test_lesson_source_diff():
    from perfkit import lesson
    from perfkit.kernels import saxpy

    p = saxpy.Problem(n=8)
    d = lesson.source_diff(saxpy.LADDER[1], saxpy.LADDER[2], p)
    text = str(d)
    assert "+    stride = cuda.gridsize(1)" in text and "saxpy_naive" in text
    assert "<pre" in d._repr_html_()


def test_a_ceiling_below_a_recorded_result_is_flagged(monkeypatch):
    best = {"value": 50.2e12, "op": "gemm", "problem": "m=4096", "variant": "oracle", "path": "x.json"}
    monkeypatch.setattr(roofline, "best_recorded", lambda kind: best)
    with pytest.warns(RuntimeWarning, match="below a recorded result.*50.2 TFLOP/s"):
        assert roofline._flag_below_recorded("compute", 31.4e12, "FP32 FMA rate") == best
    assert roofline._flag_below_recorded("compute", 60e12, "FP32 FMA rate") is None
    assert roofline._flag_below_recorded("compute", float("nan"), "FP32 FMA rate") is None


def test_a_roofline_of_several_ladders_has_one_colour_and_one_legend_entry_per_ladder():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from perfkit import roofline

    t = pd.DataFrame({"op": ["a", "a", "a", "b", "b"], "label": ["01 x", "02 y", "03 z", "01 u", "02 v"],
                      "flops": [1e9] * 3 + [1e8] * 2, "bytes": [1e7] * 3 + [1e8] * 2,
                      "median_s": [1e-3, 5e-4, 2e-3, 1e-4, 2e-4], "simulated": False})
    ax = roofline.plot(t, group_col="op")
    texts = [x.get_text() for x in ax.get_legend().get_texts()]
    assert texts == ["a (3; fastest 02 y)", "b (2; fastest 01 u)"]  # each ladder's fastest point, in the legend
    assert not {a.get_text() for a in ax.texts} & set(t["label"])  # no name beside a point: they overlapped
    plt.close(ax.figure)


def test_close_ceilings_label_apart():
    """A measured FP32 rate 5% under the datasheet's, and a measured copy under the DRAM slope:
    their labels were printed over each other (notebooks 01, 02, 04).  The higher roof's label sits
    above its line and the lower one's below its own, and so for the two slopes."""
    import matplotlib

    matplotlib.use("Agg")
    cs = [roofline.Ceiling("FP32", "compute", 66.9e12, "published", "s"),
          roofline.Ceiling("measured FP32", "compute", 63.7e12, "measured", "s"),
          roofline.Ceiling("DRAM", "memory", 4.8e12, "published", "s"),
          roofline.Ceiling("measured copy", "memory", 3.91e12, "measured", "s")]
    ax = roofline.plot(None, cs)
    by = {t.get_text(): t for t in ax.texts}
    assert by["FP32"].get_va() == "bottom" and by["measured FP32"].get_va() == "top"
    assert by["DRAM"].get_va() == "bottom" and by["measured copy"].get_va() == "top"
