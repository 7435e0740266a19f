"""perfkit.plots.ladder: today's rung order, provenance on the axis, the model's estimates as
ticks, a placeholder (not an error) for a problem with no real rows."""
import matplotlib
import pandas as pd

from perfkit import plots

matplotlib.use("Agg")


def _rows():
    return pd.DataFrame({"problem": ["p"] * 3, "rung": [0, 9, 3], "rung_now": [0, 2, 5],
                         "label": ["00 oracle", "02 b", "05 a"], "variant": ["oracle", "b", "a"],
                         "tflops": [50.0, 5.0, 10.0], "flops": [1e12] * 3, "simulated": [False] * 3,
                         "check_ok": [True] * 3, "gpu": ["GPU X"] * 3, "utc": ["2026-11-23T10:00:00"] * 3,
                         "commit": ["7c7b2e09825f"] * 3})


def test_ladder_orders_by_todays_rungs_and_labels_provenance():
    ax = plots.ladder(_rows(), metric="tflops", estimates={"02 b": 7.0, "05 a": float("nan")})
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["00 oracle", "02 b", "05 a"]  # by rung_now, not the recorded rung numbers
    xl = ax.get_xlabel()
    assert "GPU X" in xl and "2026-11-23" in xl and "7c7b2e0" in xl and "7c7b2e09" not in xl
    assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) == 1  # one finite estimate
    assert any("10% of oracle" in t.get_text() for t in ax.texts)


def test_ladder_with_no_rows_at_the_problem_is_a_placeholder():
    ax = plots.ladder(_rows(), metric="tflops", problem="other")
    assert not ax.patches and "no GPU measurements at other" in ax.texts[0].get_text()


def test_ladder_draws_records_of_changed_code_apart():
    ax = plots.ladder(_rows(), metric="tflops", changed={"05 a"})
    bars = {t.get_text(): b for t, b in zip(ax.get_yticklabels(), ax.patches)}
    assert bars["05 a"].get_hatch() == "//" and not bars["02 b"].get_hatch()
    assert bars["05 a"].get_alpha() < 1 and bars["02 b"].get_alpha() in (None, 1)
    assert "recorded kernel changed since" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_ladder_with_no_record_draws_the_estimates_as_such():
    ax = plots.ladder(_rows(), metric="tflops", problem="other", estimates={"01 a": 3.0, "02 b": float("nan")})
    assert [t.get_text() for t in ax.get_yticklabels()] == ["01 a", "02 b"]
    assert len(ax.collections[0].get_offsets()) == 1 and not ax.patches  # a tick, no bar
    assert "model estimate only" in ax.get_xlabel() and "no GPU measurements at other" in ax.get_xlabel()


def _widths():
    """layernorm multirow on the H100: float32 at 1024 and 4096 columns, float16 at 4096."""
    return pd.DataFrame({"label": ["05 multirow"] * 3, "cols": [1024, 4096, 4096],
                         "dtype": ["float32", "float32", "float16"], "gbps": [235.0, 2644.0, 571.0],
                         "problem": [f"rows=4096 cols={c} dtype={d}" for c, d in
                                     [(1024, "float32"), (4096, "float32"), (4096, "float16")]],
                         "simulated": [False] * 3, "check_ok": [True] * 3})


def test_metric_vs_never_averages_dtypes_into_one_point():
    ax = plots.metric_vs(_widths(), x="cols", metric="gbps", hue="label")
    ys = sorted(float(y) for line in ax.get_lines() for y in line.get_ydata())
    assert 2644.0 in ys and 571.0 in ys  # each record drawn as itself
    assert not any(abs(y - (2644.0 + 571.0) / 2) < 1 for y in ys)  # no mean of float32 and float16
    assert not ax.collections or all(len(c.get_paths()) == 0 for c in ax.collections
                                     if type(c).__name__ == "PolyCollection")  # no error band
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "float32" in legend and "float16" in legend  # the lines say which dtype they are
    one = plots.metric_vs(_widths().iloc[:2], x="cols", metric="gbps", hue="label")
    assert "float32" not in [t.get_text() for t in one.get_legend().get_texts()]  # one dtype: no style


def test_ladder_labels_rates_without_an_exponent_and_keeps_the_legend_off_the_bars():
    """Notebook 04's bars read "2.74e+03  117% of oracle", and the legend sat over the last bar's
    label: a rate is printed as 2740, and the legend is drawn beside the axes."""
    rows = _rows().assign(tflops=[2335.0, 2740.4, 83.14])
    ax = plots.ladder(rows, metric="tflops", changed={"05 a"}, estimates={"02 b": 2000.0})
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith(" 2740 ") for t in texts) and any(t.startswith(" 83.1 ") for t in texts)
    assert not any("e+0" in t for t in texts)
    legend = ax.get_legend()
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 >= 1.0  # right of the plotting area
