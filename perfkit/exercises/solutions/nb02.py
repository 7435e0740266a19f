"""Reference solutions of notebook 02's exercises."""
import perfkit  # noqa: F401  (picks GPU or simulator before numba.cuda loads)
from numba import cuda, float32

TILE = 16  # the tile of 02.smem_tile (grade it with tile=TILE)


@cuda.jit
def gemm_tiled(a, b, c, M, N, K):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, K, TILE):
        As[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
        Bs[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc


PAD = 1  # one extra column: row r of the tile starts in bank (33 * r) % 32 = r % 32
WIDTH = 32 + PAD  # a shared array's shape must be a compile-time constant: computed out here


@cuda.jit
def transpose(out, inp, rows, cols):
    tile = cuda.shared.array((32, WIDTH), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    r0 = cuda.blockIdx.y * 32
    c0 = cuda.blockIdx.x * 32
    for j in range(0, 32, 8):  # read rows of inp (coalesced along tx)
        r = r0 + ty + j
        if r < rows and c0 + tx < cols:
            tile[ty + j, tx] = inp[r, c0 + tx]
    cuda.syncthreads()
    for j in range(0, 32, 8):  # write rows of out = columns of the tile
        r = c0 + ty + j
        if r < cols and r0 + tx < rows:
            out[r, r0 + tx] = tile[tx, ty + j]
