"""Reference solutions of notebook 03's exercises."""
import perfkit  # noqa: F401  (picks GPU or simulator before numba.cuda loads)
from numba import cuda, float32


@cuda.jit
def im2col(x, col, N, C, H, W, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    CRS = C * R * S
    if i < N * P * Q * CRS:
        j = i % CRS      # column: the tap (c, r, s), s fastest, as w[k] is stored
        m = i // CRS     # row: the output pixel (b, p, q), q fastest
        q = m % Q
        p = (m // Q) % P
        b = m // (P * Q)
        s = j % S
        r = (j // S) % R
        c = j // (R * S)
        ih = p * stride - pad + r
        iw = q * stride - pad + s
        v = float32(0)
        if ih >= 0 and ih < H and iw >= 0 and iw < W:
            v = x[b, c, ih, iw]
        col[m, j] = v


@cuda.jit
def conv_direct(x, w, y, N, C, H, W, K, R, S, P, Q, stride, pad):
    i = cuda.grid(1)
    if i < N * K * P * Q:
        q = i % Q
        p = (i // Q) % P
        k = (i // (P * Q)) % K
        b = i // (K * P * Q)
        acc = float32(0)
        for c in range(C):
            for r in range(R):
                ih = p * stride - pad + r
                if ih >= 0 and ih < H:
                    for s in range(S):
                        iw = q * stride - pad + s
                        if iw >= 0 and iw < W:
                            acc += x[b, c, ih, iw] * w[k, c, r, s]
        y[b, k, p, q] = acc
