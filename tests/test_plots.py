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


def test_provenance_pairs_each_run_with_its_commit_per_gpu():
    """A date is never read as another run's commit: runs are (date, commit) pairs per GPU, and a
    GPU with many runs says how many and their span (notebook 04 printed three dates of one GPU
    and three commits sorted apart, leaving out the newest)."""
    rows = pd.DataFrame({"gpu": ["H100", "H100", "H200", "H100", "H100", "H100"],
                         "utc": ["2026-11-28T1", "2026-11-26T1", "2026-11-27T1", "2026-11-23T1", "2026-11-28T2", "2026-11-29T1"],
                         "commit": ["516b9401", "6bbc4242", "6ba0514a", "7c7b2e09", "516b9401", "aaaaaaa1"]})
    assert plots.provenance(rows.iloc[:3]) == " on H100 (2026-11-26 6bbc424, 2026-11-28 516b940); H200 (2026-11-27 6ba0514)"
    assert plots.provenance(rows) == " on H100 (4 runs, 2026-11-23 to 2026-11-29); H200 (2026-11-27 6ba0514)"
    assert plots.provenance(rows.drop(columns=["gpu"])) == ""


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


def _tick_extents(ax, renderer):
    """Each estimate tick's (x0, x1, y0, y1) in display pixels: its centre, half its line width
    across and half its marker size up and down."""
    out = []
    for c in ax.collections:
        lw = float(c.get_linewidths()[0]) * ax.figure.dpi / 72 / 2
        half = float(c.get_sizes()[0]) ** 0.5 * ax.figure.dpi / 72 / 2
        for x, y in c.get_offset_transform().transform(c.get_offsets()):
            out.append((x - lw, x + lw, y - half, y + half))
    return out


def _overlaps(box, tick):
    x0, x1, y0, y1 = tick
    return box.x0 < x1 and box.x1 > x0 and box.y0 < y1 and box.y1 > y0


def test_ladder_value_labels_sit_clear_of_the_estimate_ticks():
    """The model's tick sat over the bar's value label where the estimate was past the bar's end
    (a label begins at the bar's end): now a label begins right of whichever lies further out,
    the bar's end or its tick, and says the same numbers.  Estimates past the bar (02 b, the
    oracle), short of it (05 a) and just short of its end (the tick's half width over it)."""
    import matplotlib.pyplot as plt

    rows = _rows()
    for est in ({"00 oracle": 60.0, "02 b": 7.0, "05 a": 8.0}, {"02 b": 4.999, "05 a": 10.0}):
        ax = plots.ladder(rows, metric="tflops", estimates=est)
        ax.figure.canvas.draw()
        r = ax.figure.canvas.get_renderer()
        ticks = _tick_extents(ax, r)
        assert len(ticks) == len(est)
        labels = [t for t in ax.texts if "of oracle" in t.get_text()]
        assert sorted(t.get_text() for t in labels) == sorted([" 50  100% of oracle", " 5  10% of oracle",
                                                                " 10  20% of oracle"])
        for t in labels:
            box = t.get_window_extent(r)
            assert not any(_overlaps(box, k) for k in ticks), (t.get_text(), est)
        bars = {lab.get_text(): b for lab, b in zip(ax.get_yticklabels(), ax.patches)}
        for t in labels:  # still beside its own bar, right of its end
            bar = bars[{"50": "00 oracle", "5": "02 b", "10": "05 a"}[t.get_text().split()[0]]]
            bb, box = bar.get_window_extent(r), t.get_window_extent(r)
            assert box.x0 >= bb.x1 and bb.y0 <= (box.y0 + box.y1) / 2 <= bb.y1
        plt.close(ax.figure)


def test_estimates_only_labels_sit_clear_of_their_ticks():
    import matplotlib.pyplot as plt

    ax = plots.ladder(_rows(), metric="tflops", problem="other", estimates={"01 a": 3.0, "02 b": 40.0})
    ax.figure.canvas.draw()
    r = ax.figure.canvas.get_renderer()
    ticks = _tick_extents(ax, r)
    assert len(ticks) == 2 and sorted(t.get_text() for t in ax.texts) == [" 3", " 40"]
    for t in ax.texts:
        assert not any(_overlaps(t.get_window_extent(r), k) for k in ticks), t.get_text()
    plt.close(ax.figure)


def test_a_placeholder_counts_simulated_rows_in_words():
    """The simulator's sweep drawn as a ladder: a placeholder naming how many rows were left out,
    singular or plural, never "row(s)" (notebook 01's saxpy figure said "8 simulated row(s)")."""
    sim = _rows().assign(simulated=True)
    ax = plots.ladder(sim, metric="tflops")
    assert "3 simulated rows left out" in ax.texts[0].get_text()
    ax = plots.ladder(sim.iloc[:1], metric="tflops")
    assert "1 simulated row left out" in ax.texts[0].get_text() and "(s)" not in ax.texts[0].get_text()
