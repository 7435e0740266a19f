import math

import numpy as np
import pytest

from perfkit import backend, timing


def test_median_ci_brackets_median_and_matches_order_statistics():
    rng = np.random.default_rng(1)
    x = rng.lognormal(size=101)
    lo, hi = timing.median_ci(x)
    med = np.median(x)
    assert lo <= med <= hi
    s = np.sort(x)
    # n=101, z=1.96: j = floor(50.5 - 9.85) = 40, k = ceil(50.5 + 9.85) = 61
    assert lo == s[40] and hi == s[61]


def test_median_ci_of_constant_samples_is_a_point():
    assert timing.median_ci([3.0] * 20) == (3.0, 3.0)


def test_median_ci_coverage_is_near_nominal():
    # Over many draws, the 95% interval must contain the true median about 95% of the time.
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        lo, hi = timing.median_ci(rng.exponential(size=50))
        hits += lo <= math.log(2) <= hi
    assert 0.90 <= hits / 400 <= 0.995


def test_measure_statistics_and_labels():
    calls = []
    m = timing.measure(lambda: calls.append(1), warmup_s=0, min_samples=5, max_samples=50,
                       min_time_s=0, max_time_s=1.0)
    assert 5 <= m.n <= 50 and len(calls) >= m.n
    x = np.array(m.samples)
    assert m.median_s == pytest.approx(np.median(x))
    assert m.min_s == x.min()
    assert m.iqr_s == pytest.approx(np.subtract(*np.percentile(x, [75, 25])))
    assert m.ci_low_s <= m.median_s <= m.ci_high_s
    assert m.simulated == backend.is_simulator()
    # a GPU warms up at least once (the first launch compiles); the simulator, with no budget, not at all
    assert m.warmup_calls == 0 if m.simulated else m.warmup_calls >= 1
    assert m.settings["l2"] == "cold"
    if m.simulated:
        assert "SIMULATED" in str(m) and m.flush_bytes == 0
    d = m.as_dict()
    assert d["samples"] == m.samples and d["n"] == m.n


def test_measure_respects_the_wall_clock_cap():
    import time

    with pytest.warns(RuntimeWarning, match="min_samples=1000"):
        m = timing.measure(lambda: time.sleep(0.02), warmup_s=0, min_samples=1000, max_samples=5000,
                           max_time_s=0.2)
    assert m.n < 30 and "max_time_s" in m.stop_reason and "before min_samples" in m.stop_reason


def test_measure_stops_on_the_confidence_interval():
    m = timing.measure(lambda: None, warmup_s=0, min_samples=10, max_samples=100000, min_time_s=0,
                       max_time_s=5.0, rel_ci=10.0)
    assert m.n == 10 and m.stop_reason.startswith("ci <")


@pytest.mark.parametrize("kw, msg", [
    (dict(l2="warm"), "l2 must be one of"),
    (dict(min_samples=0), "min_samples"),
    (dict(min_samples=10, max_samples=5), "min_samples"),
    (dict(rel_ci=0), "rel_ci"),
    (dict(max_time_s=-1), "max_time_s"),
    (dict(confidence=1.5), "confidence"),
    (dict(min_time_s=3, max_time_s=1), "must not exceed max_time_s"),
    (dict(warmup_s=float("inf")), "warmup_s must be finite"),
    (dict(min_time_s=float("nan")), "min_time_s must be finite"),
    (dict(flush_factor=1), "flush_factor must be >= 2"),
])
def test_measure_rejects_bad_settings(kw, msg):
    with pytest.raises(ValueError, match=msg):
        timing.measure(lambda: None, **kw)


@pytest.mark.parametrize("kw, msg", [
    (dict(min_samples=2.5), "min_samples must be an integer"),
    (dict(max_samples=True), "max_samples must be an integer"),
    (dict(flush_factor=2.0), "flush_factor must be an integer"),
    (dict(max_time_s="1"), "max_time_s must be a number"),
])
def test_measure_rejects_wrong_types(kw, msg):
    with pytest.raises(TypeError, match=msg):
        timing.measure(lambda: None, **kw)


def test_measure_needs_a_callable():
    with pytest.raises(TypeError, match="callable"):
        timing.measure(42)


@pytest.mark.skipif(not backend.is_simulator(), reason="simulator behaviour")
def test_nvml_is_absent_in_the_simulator():
    assert timing.nvml_snapshot() is None


def test_defaults_give_way_to_an_explicit_value():
    m = timing.measure(lambda: None, warmup_s=0, min_time_s=0.6)      # default max_time_s is lower
    assert m.settings["max_time_s"] >= 0.6
    m = timing.measure(lambda: None, warmup_s=0, max_time_s=0.01)     # GPU default min_time_s is higher
    assert m.settings["min_time_s"] <= 0.01
    m = timing.measure(lambda: None, warmup_s=0, max_samples=2)       # GPU default min_samples is 10
    assert m.settings["min_samples"] <= 2 and m.n <= 2
    with pytest.raises(ValueError, match="must not exceed"):
        timing.measure(lambda: None, min_time_s=2, max_time_s=1)      # both explicit: an error


# --- the event window holds GPU time only ------------------------------------------------------
def test_spin_length_outlasts_the_host_within_bounds():
    assert timing.spin_length(0.0) == timing.SPIN_MIN_S
    assert timing.spin_length([3e-6, 40e-6, 5e-6]) == pytest.approx(2 * 40e-6 + timing.SPIN_MARGIN_S)
    assert timing.spin_length(1.0) == timing.SPIN_MAX_S          # a host that blocks: capped
    assert timing.spin_length(float("nan")) == timing.SPIN_MAX_S  # nonsense: the safe side
    for h in (1e-6, 25e-6, 300e-6, 4e-3):
        assert timing.spin_length(h) > h


def test_spin_kernel_compiles_to_a_globaltimer_loop():
    """The spin kernel (GPU path) builds for sm_90 with no GPU: it reads %globaltimer inside its loop."""
    import os
    import subprocess
    import sys

    code = ("import perfkit\nfrom numba import cuda\nfrom perfkit import timing\n"
            "ptx, _ = cuda.compile_ptx(timing._spin_kernel().py_func, 'void(uint64)', cc=(9, 0))\nprint(ptx)")
    env = {**os.environ, "PERFKIT_BACKEND": "compile", "NUMBA_ENABLE_CUDASIM": "0"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    body = r.stdout.split("$L__BB0_1:", 1)
    assert len(body) == 2 and "%globaltimer" in body[1], "the timer must be read again in the loop"


def test_measure_says_what_its_window_holds():
    m = timing.measure(lambda: None, warmup_s=0, min_samples=3, max_samples=3, max_time_s=5.0)
    if m.simulated:
        assert m.extra == {} and m.clock.startswith("host")
    else:
        assert "GPU time" in m.extra["window"] and m.extra["spin_s"] >= timing.SPIN_MIN_S
        assert len(m.extra["host_enqueue_s"]) >= m.n and m.extra["host_exceeded_spin"] == 0
    assert "spin kernel" in timing.measure.__doc__ and "window" in timing.measure.__doc__


needs_gpu = pytest.mark.skipif(backend.is_simulator(), reason="times real kernels on a GPU")


def _args_kernel():
    from numba import cuda

    @cuda.jit
    def touch(a, b, c, d, e, f, n):  # six array arguments: a slow host launch, no GPU work
        i = cuda.grid(1)
        if i < n:
            a[i] = b[i] + c[i] + d[i] + e[i] + f[i]

    return touch


@needs_gpu
def test_launch_time_stays_out_of_the_window():
    """A near-empty kernel with six array arguments: its host launch costs tens of us, the GPU
    work ~2-3 us. The window must show the GPU's time, not the host's."""
    from numba import cuda

    arrs = [cuda.device_array(32, np.float32) for _ in range(6)]
    k = _args_kernel()
    m = timing.measure(lambda: k[1, 32](*arrs, 0), l2="hot")
    host = float(np.median(m.extra["host_enqueue_s"]))
    assert m.median_s < 10e-6, f"window {m.median_s * 1e6:.1f} us for an empty kernel (host {host * 1e6:.1f} us)"
    assert m.extra["host_exceeded_spin"] == 0


@needs_gpu
def test_hot_l2_is_not_slower_than_cold_when_the_data_fits():
    """A copy of a quarter of the L2: hot (inputs left in L2) must not read slower than cold."""
    from numba import cuda

    from perfkit import roofline

    n = max((backend.device().l2_bytes or (8 << 20)) // 4 // 4, 1 << 16)  # floats: 1/4 of L2 for src+dst
    src, dst = cuda.to_device(np.ones(n, np.float32)), cuda.device_array(n, np.float32)
    copy = roofline.copy_launcher(dst, src)
    hot = timing.measure(copy, l2="hot")
    cold = timing.measure(copy, l2="cold")
    assert hot.median_s <= cold.median_s * 1.02, (hot.median_s, cold.median_s)


def test_gpu_path_retakes_a_sample_the_host_outlasted(monkeypatch):
    """The GPU path's logic, run here with stand-ins for events, the spin kernel, the device and a
    virtual host clock: the spin is sized from the host's enqueue time; a sample in which the host
    outlasted the spin (a 3 ms pause here) is taken again, never kept; the spin grows only if that
    happens twice running."""
    import types

    from numba import cuda

    clock = [0.0]
    fake_time = types.SimpleNamespace(perf_counter=lambda: clock[0])

    class Event:
        def __init__(self, timing=True):
            self.t = None

        def record(self, stream=0):
            self.t = clock[0]

        def synchronize(self):
            pass

    spins = []

    class Spin:
        def __getitem__(self, launch_config):
            return lambda ns: spins.append(int(ns))

    monkeypatch.setattr(timing, "time", fake_time)
    monkeypatch.setattr(cuda, "event", Event, raising=False)
    monkeypatch.setattr(cuda, "event_elapsed_time", lambda a, b: (b.t - a.t) * 1e3, raising=False)
    monkeypatch.setattr(cuda, "synchronize", lambda: None)
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    monkeypatch.setattr(backend, "device", lambda: backend.DeviceInfo(name="stand-in", simulated=False, l2_bytes=1 << 20))
    monkeypatch.setattr(timing, "nvml_snapshot", lambda: None)
    monkeypatch.setattr(timing, "_spin_kernel", lambda: Spin())
    monkeypatch.setattr(timing, "_flusher", lambda l2, factor: ((lambda: None), factor * l2))
    calls = [0]

    def fn():  # 100 us on the host, once a 3 ms pause (call 8: a timed sample)
        calls[0] += 1
        clock[0] += 3e-3 if calls[0] == 8 else 1e-4

    m = timing.measure(fn, warmup_s=0, min_samples=12, max_samples=12, max_time_s=10.0)
    assert not m.simulated and m.n == 12 and m.clock == "cuda events"
    assert m.extra["retaken_with_longer_spin"] == 1 and m.extra["host_exceeded_spin"] == 0
    assert max(m.samples) == pytest.approx(1e-4), "the sample the host outlasted must not be kept"
    assert m.extra["spin_s"] == pytest.approx(timing.spin_length(1e-4)) and len(m.extra["spin_history_s"]) == 1
    assert spins[0] == 0 and all(ns == int(m.extra["spin_s"] * 1e9) for ns in spins[1:])
    assert len(m.extra["host_enqueue_s"]) == m.n + 1 and m.flush_bytes == 2 << 20

    calls[0] = 0  # now the host takes 100 us in warm-up and probes, then 1 ms: the spin must grow

    def slower():
        calls[0] += 1
        clock[0] += 1e-4 if calls[0] <= 4 else 1e-3

    m = timing.measure(slower, warmup_s=0, min_samples=5, max_samples=5, max_time_s=10.0)
    assert m.extra["spin_s"] >= timing.spin_length(1e-3) and m.extra["retaken_with_longer_spin"] == 2
    assert m.extra["host_exceeded_spin"] == 0 and m.n == 5
