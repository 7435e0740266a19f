"""Reference solutions of notebook 01's exercises."""
import perfkit  # noqa: F401  (picks GPU or simulator before numba.cuda loads)
from numba import cuda

from perfkit.exercises import load4


@cuda.jit
def saxpy_grid_stride(out, x, y, alpha, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i] = alpha * x[i] + y[i]


# 256 threads = 8 warps; 28 registers x 256 = 7 KiB of the 64 K registers, so 8 blocks (64 warps,
# the H100's limit) fit per SM: 100% occupancy, and 8 blocks per SM is exactly one wave.
launch = dict(block=256, blocks_per_sm=8)


@cuda.jit
def copy4(dst, src, rows, cols):
    t = cuda.grid(1)
    per_row = cols // 4
    if t < rows * per_row:
        r = t // per_row
        c = (t % per_row) * 4
        v0, v1, v2, v3 = load4(src, r, c)
        dst[r, c] = v0
        dst[r, c + 1] = v1
        dst[r, c + 2] = v2
        dst[r, c + 3] = v3
