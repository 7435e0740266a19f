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
    assert np.isnan(fl["flops_per_s"]) and fl["flops"] == 2 * 8 * 4 * 2 * 32


def test_lesson_source_diff():
    from perfkit import lesson
    from perfkit.kernels import saxpy

    p = saxpy.Problem(n=8)
    d = lesson.source_diff(saxpy.LADDER[1], saxpy.LADDER[2], p)
    text = str(d)
    assert "+    stride = cuda.gridsize(1)" in text and "saxpy_naive" in text
    assert "<pre" in d._repr_html_()
