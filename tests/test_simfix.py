"""The simulator's shared-array lookup must give every thread of a block the same array, even
when many threads reach the allocation at once (perfkit._simfix)."""
import re
import sys
import threading

import numpy as np
import pytest

import perfkit  # noqa: F401  (applies the fix in the simulator)
from numba import cuda, float32, int32  # noqa: E402
from numba.cuda.simulator import kernelapi
from perfkit import backend

# perfkit._simfix is applied only when the simulator is the backend: on a GPU the simulator's
# classes are Numba's own (unfixed, unused), and this race is not perfkit's to show there
pytestmark = pytest.mark.skipif(not backend.is_simulator(),
                                reason="perfkit._simfix patches the simulator only when it is the backend")


def _allocate_together(n_threads=64, rounds=100):
    """``rounds`` fresh blocks; in each, ``n_threads`` threads request the same shared array
    at the same moment.  Returns how many blocks ended up with more than one array."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    split = 0
    try:
        for _ in range(rounds):
            shared = kernelapi.FakeCUDAShared(0)
            start = threading.Barrier(n_threads)
            got = []

            def work():
                start.wait()
                got.append(id(shared.array((256,), np.float32)))

            ts = [threading.Thread(target=work) for _ in range(n_threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            split += len(set(got)) > 1
    finally:
        sys.setswitchinterval(old)
    return split


def test_one_array_per_line_per_block():
    assert _allocate_together() == 0


def test_dynamic_and_repeated_allocations_still_work():
    shared = kernelapi.FakeCUDAShared(64)
    dyn = shared.array(0, np.dtype(np.float32))
    assert dyn.size == 16
    a = [shared.array((4, 3), np.float64) for _ in range(2)]  # one line: one array
    assert a[0] is a[1] and a[0].shape == (4, 3)



@cuda.jit
def _tree_sum(x, out, early):
    sh = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    if t >= early:  # these threads leave before any barrier
        return
    sh[t] = x[cuda.blockIdx.x * early + t]
    cuda.syncthreads()
    s = early // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sh[0]


@cuda.jit
def _fails(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    out[t + int32(200)] = 1.0  # threads 57 and up index past the end


def test_barriers_release_together_early_exits_count_and_a_failure_aborts_the_block():
    """The event-driven block manager (no polling loop) keeps the simulator's semantics: a
    barrier releases when every live thread reached it, threads that returned no longer count,
    and one thread's exception aborts the block and is raised, naming the thread."""
    x = np.random.default_rng().standard_normal(3 * 64).astype(np.float32)
    out = np.full(3, np.nan, np.float32)
    _tree_sum[3, 128](x, out, 64)
    # a float32 tree of 64 terms is off by a few ulps of the terms' magnitude, not of a sum that
    # cancels to near zero (0.0446 against 1e-5 relative failed once): bound by the sum of |x|
    rows = x.reshape(3, 64).astype(np.float64)
    assert np.all(np.abs(out - rows.sum(1)) <= 8 * np.finfo(np.float32).eps * np.abs(rows).sum(1)), (out, rows.sum(1))
    with pytest.raises(IndexError, match=r"tid=\[(5[7-9]|6[0-3]), 0, 0\]"):
        _fails[1, 64](np.zeros(257, np.float32))


# --- perfkit._simspeed: faster paths, the same results ---------------------------------------
@cuda.jit(device=True)
def _row_sum(row, n):
    s = float32(0)
    for j in range(n):
        s += row[j]
    return s


@cuda.jit
def _rows_through_views(x, out, scale):
    r = cuda.grid(1)
    if r < x.shape[0]:
        row = x[r]  # a sub-array: wrapped again, indexed through the fast path
        out[r, 0] = _row_sum(row, x.shape[1]) * float32(scale)  # a device call and a scalar cast
        out[r, 1] = x.strides[0] // x.dtype.itemsize + x.ndim  # attributes, looked up once a launch


def test_fast_paths_are_installed_and_compute_what_numpy_does(fresh_seed):
    from numba import cuda as real_cuda
    from numba.cuda.simulator import kernel as sk

    from perfkit import _simspeed

    assert sk.FakeCUDAKernel.__call__.__module__ == _simspeed.__name__
    x = np.random.default_rng(fresh_seed).standard_normal((37, 5)).astype(np.float32)
    out = np.full((37, 2), np.nan, np.float32)
    _rows_through_views[3, 16](x, out, 0.5)
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64).sum(axis=1) * 0.5, rtol=1e-5, atol=1e-5)
    assert (out[:, 1] == 5 + 2).all()
    # the launch is over: this module's globals name the real numba.cuda again
    assert globals()["cuda"] is real_cuda


def test_a_kernel_error_inside_a_device_call_still_restores_the_module():
    from numba import cuda as real_cuda

    x = np.zeros((2, 3), np.float32)
    out = np.zeros((1, 2), np.float32)  # row 1 is out of bounds: the kernel raises
    with pytest.raises(IndexError):
        _rows_through_views[1, 2](x, out, 1.0)
    assert globals()["cuda"] is real_cuda
    _rows_through_views[1, 2](x, np.zeros((2, 2), np.float32), 1.0)  # and the next launch runs


def test_bank_sites_name_the_kernel_lines_not_the_fast_paths():
    """banks records each access at the kernel's line: the frames _simspeed adds are skipped
    like the simulator's own."""
    from perfkit.banks import simulate
    from perfkit.kernels.norm import softmax

    v = next(x for x in softmax.LADDER if x.name == "multirow")
    r = simulate.count(v, simulate.small_problem(v, softmax.EXAMPLE_PROBLEM), cache=False)
    files = {s["file"] for s in r.sites} | {s["file"] for s in r.gsites}
    assert files and not any("_simspeed" in f or "simulator" in f for f in files), files


@cuda.jit
def _votes(x, counts, ands, ors, ids):
    t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    b = cuda.blockIdx.x
    v = x[b, t] > 0
    counts[b] = cuda.syncthreads_count(v)
    ands[b] = cuda.syncthreads_and(v)
    ors[b] = cuda.syncthreads_or(v)
    ids[b, t] = t


def test_a_blocks_threads_are_greenlets_with_the_simulators_thread_api():
    """_simspeed runs a block's threads as greenlets on the launching thread: no OS thread is
    started, ``threading.current_thread()`` inside a kernel is the simulated CUDA thread (2-D
    indices, thread_id as the simulator numbers it), and the barrier votes count every thread."""
    from perfkit import _simspeed

    rng = np.random.default_rng()
    x = rng.standard_normal((3, 48))
    x[1] = np.abs(x[1]) + 1  # every vote true
    x[2] = -np.abs(x[2]) - 1  # every vote false
    counts, ands, ors = (np.full(3, -1, np.int32) for _ in range(3))
    ids = np.full((3, 48), -1, np.int32)
    before = threading.active_count()
    seen = []
    _votes[3, (16, 3)](x, counts, ands, ors, ids)
    assert threading.active_count() == before
    np.testing.assert_array_equal(counts, (x > 0).sum(1))
    np.testing.assert_array_equal(ands, (x > 0).all(1))
    np.testing.assert_array_equal(ors, (x > 0).any(1))
    np.testing.assert_array_equal(ids, np.tile(np.arange(48), (3, 1)))

    @cuda.jit
    def who(out):
        seen.append(threading.current_thread())
        out[cuda.threadIdx.x] = 1.0

    who[2, 4](np.zeros(4, np.float32))
    assert len(seen) == 8 and all(isinstance(t, _simspeed.GreenThread) for t in seen)
    assert [(t.blockIdx.x, t.threadIdx.x, t.thread_id) for t in seen] == [(b, i, i) for b in range(2) for i in range(4)]
    assert not isinstance(threading.current_thread(), _simspeed.GreenThread)  # outside a kernel: the OS thread


# --- threads that wait on each other: mbarriers and named barriers (warp specialization) -------
from numba import uint64  # noqa: E402
from perfkit.kernels._ptx_hopper import bar_sync, mbar_arrive, mbar_init, mbar_try_wait, mbar_wait  # noqa: E402


@cuda.jit
def _ring(x, out, n_items, empty_count, cons_bar):
    """Thread 0 (warp 0) produces x's items into a 2-slot ring in shared memory, announcing each
    on full[slot] and reusing a slot once the consumer warp (warp 1) has released it on
    empty[slot]; the consumer warp sums the items (each thread its own slot element), meets at
    named barrier 1 (``cons_bar`` threads) and one of its threads releases the slot.  Warp 0's
    other lanes end at once.  ``empty_count`` > 1 or ``cons_bar`` > 32: a kernel that deadlocks."""
    ring = cuda.shared.array((2, 32), float32)
    full = cuda.shared.array(2, uint64)
    empty = cuda.shared.array(2, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        for s in range(2):
            mbar_init(full, s, 1)
            mbar_init(empty, s, empty_count)
    cuda.syncthreads()
    if t == 0:
        for i in range(n_items):
            s = i % 2
            while mbar_try_wait(empty, s, ((i // 2) & 1) ^ 1) == 0:  # the slot's previous use released
                pass
            for j in range(32):
                ring[s, j] = x[i, j]
            mbar_arrive(full, s)  # release: the stores above are visible to whoever waits on the phase
    elif t >= 32:
        acc = float32(0)
        for i in range(n_items):
            s = i % 2
            mbar_wait(full, s, (i // 2) & 1)
            acc += ring[s, t - 32]
            bar_sync(1, cons_bar)  # the whole warp has read the slot
            if t == 32:
                mbar_arrive(empty, s)
        out[t - 32] = acc


def _ring_inputs(seed, n_items=5):
    x = np.random.default_rng(seed).standard_normal((n_items, 32)).astype(np.float32)
    return x, np.full(32, np.nan, np.float32)


def test_a_producer_warp_and_its_consumers_take_turns_on_mbarriers(fresh_seed):
    """5 items through a 2-slot ring: the producer's waits on "empty" and the consumers' on
    "full" park the waiting thread (_simspeed.yield_to_block) until the other side has arrived;
    every slot's barriers go through 2-3 phases (parities 0, 1, 0)."""
    x, out = _ring_inputs(fresh_seed)
    _ring[2, 64](x, out, 5, 1, 32)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_a_deadlock_raises_naming_each_barrier_and_who_waits():
    """empty[s] expects 2 arrivals a phase and gets 1: the producer waits for slot 0's release
    forever, the consumers for item 2 on full[0]; on a GPU the block hangs, here it raises."""
    from perfkit._simspeed import DeadlockError

    x, out = _ring_inputs(0)
    with pytest.raises(DeadlockError) as e:
        _ring[1, 64](x, out, 5, 2, 32)
    msg = str(e.value)
    assert "deadlock in block (0, 0, 0)" in msg
    assert re.search(r"thread 0: mbarrier empty\[0\], the phase of parity 0 \(phase 0 under way: 1 of 2 arrivals", msg), msg
    assert re.search(r"threads 32-63: mbarrier full\[0\], the phase of parity 1 \(phase 1 under way: 1 of 1", msg), msg
    with pytest.raises(DeadlockError, match=r"threads 32-63: bar.sync 1, 64: 32 of 64 threads arrived"):
        _ring[1, 64](x, out, 5, 1, 64)  # a named barrier for 64 threads that only warp 1 reaches


@cuda.jit
def _polls(flags, out):
    """Thread 0 polls a with try_wait and, seeing it still open, does other work: arrives on b,
    which thread 1 waits for before it arrives on a.  Correct on a GPU (try_wait returns 0 after
    a time limit): the scheduler resumes a parked thread once when nothing is ready."""
    bars = cuda.shared.array(2, uint64)
    t = cuda.threadIdx.x
    if t == 0:
        mbar_init(bars, 0, 1)
        mbar_init(bars, 1, 1)
    cuda.syncthreads()
    if t == 0:
        polls = 0
        while mbar_try_wait(bars, 0, 0) == 0:
            polls += 1
            if polls == 1:
                mbar_arrive(bars, 1)
        out[0] = polls
    elif t == 1:
        mbar_wait(bars, 1, 0)
        mbar_arrive(bars, 0)
        out[1] = 1


def test_try_wait_returns_0_when_nothing_else_can_run():
    out = np.zeros(2, np.int32)
    _polls[1, 32](np.zeros(1), out)
    assert out.tolist() == [1, 1]


def test_without_greenlets_the_os_threads_poll_and_time_out(monkeypatch, fresh_seed):
    """The simulator's own OS threads (no greenlet package): a wait polls ready() while the
    other threads run, and gives up with a DeadlockError after OS_THREAD_WAIT_S."""
    from numba.cuda.simulator import kernel as sk

    from perfkit import _simspeed

    monkeypatch.setattr(sk.BlockManager, "run", _simspeed.os_threads_run)
    x, out = _ring_inputs(fresh_seed, 3)
    _ring[1, 64](x, out, 3, 1, 32)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(_simspeed, "OS_THREAD_WAIT_S", 0.5)
    with pytest.raises(_simspeed.DeadlockError, match=r"no progress in 0.5 s waiting on mbarrier (empty|full)\["):
        _ring[1, 64](x, out, 3, 2, 32)
