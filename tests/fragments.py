"""Where a warpgroup's wgmma accumulators land (PTX ISA, "Matrix fragments for wgmma .m64nNk16"):
thread t of the 128 holds, for each 8-column block j, D[16 w + lane/4 (+8), 8 j + 2 (lane%4) (+1)]
with w = t / 32 and lane = t % 32.  Shared by the tests that run a wgmma twin."""
import numpy as np


def assert_wgmma_accumulators(out: np.ndarray, D: np.ndarray, blocks: int = 8) -> None:
    """``out[t, 4 j + i]``: thread t's i-th accumulator of block j, against the float64 ``D``."""
    t = np.arange(128)
    w, lane = t // 32, t % 32
    for j in range(blocks):
        r, c = 16 * w + lane // 4, 8 * j + 2 * (lane % 4)
        for i, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
            np.testing.assert_allclose(out[:, 4 * j + i], D[r + dr, c + dc], rtol=1e-5, atol=1e-5)
