"""2-D forward convolution, ``y = conv2d(x, w)``: cross-correlation as in cuDNN and PyTorch, no
bias, groups 1, zero padding on all sides, NCHW or NHWC.

Convolution is where a GEMM ladder meets data layout.  Seen as a GEMM (the *implicit GEMM* view
that cuDNN and CUTLASS use for most forward convolutions)::

    GEMM M = N * P * Q   (one row per output pixel)
    GEMM N = K           (one column per output channel)
    GEMM K = C * R * S   (the reduction: every input channel under every filter tap)

with A[m, j] = x at the pixel of row m shifted by the tap of j (zero in the padding) and
B[j, n] = w[n, j], w flattened over its trailing dims ((c, r, s) for NCHW, (r, s, c) for NHWC).

Ledger (the rung number and name live only in ``LADDER``):

  0 oracle          cuDNN through torch.nn.functional.conv2d (TF32 off); torch on the CPU (or
                    NumPy) in float32 in the simulator
  1 direct          one thread per output element, loops over (c, r, s) reading x and w from memory
  2 direct_halo     a block stages its input tile and halo (and KB filters) in shared memory
  3 im2col_gemm     explicit im2col buffer (N*P*Q x C*R*S) then the GEMM ladder's best SIMT rung
  4 igemm_naive     implicit GEMM, one thread per (pixel, channel), gathering A on the fly
  5 igemm_smem      implicit GEMM with 16x16 tiles of A (gathered) and B staged in shared memory
  6 igemm_regblock  8x4 register blocking, 128x64 block tile, 16-byte loads of NHWC x and of w
  7 winograd        F(2x2, 3x3) for 3x3 stride-1 layers: 16 multiplies per 2x2 tile instead of 36
  8 tensor_core     float16 implicit GEMM on mma.sync.m16n8k16 (float32 accumulation)
  9 tc_vector       NHWC 16-byte chunks in filter-position order, per-row masks, 32-bit offsets
 10 tc_ldmatrix     fragments by ldmatrix.x4 (both operands) from XOR-swizzled tiles
 11 winograd_tiled  rung 7 with GEMM rung 10's warp-tiled main loop, U stored k-major: no transposing store
 12 tc_cp_async     rung 10 with cp.async into a 3-stage ring, zero-fill for padding, one barrier per k-tile
 13 tc_warptile     64x64 warp tiles (4x8 mma tiles per warp), the block tile chosen for the layer's wave count
 14 winograd_f4     F(4x4, 3x3) on rung 11's GEMM: 36 products per 4x4 tile instead of 144
 15 tc_epilogue     y staged per warp in shared memory (packed halves, swizzled: no conflicts), written with
                    16-byte stores on the (M, K) view
 16 tc_padded       any c: a pre-pass pads x and w to whole 16-byte chunks (c rounded up to 8), and
                    the k-tiles take consecutive (tap, chunk) pairs (4 taps a k-tile at c <= 8), on
                    rung 15's loop: the 7x7 stem (c = 3) on the tensor cores

Every rung is correct for every valid problem (partial tiles read zeros, stores outside y are
skipped); what a rung cannot take it refuses in ``supports`` with the reason.  SIMT rungs take
float32 or float16 inputs (float32 accumulation); the tensor-core rungs take float16, and
rungs 9-15 NHWC with c % 8 == 0 (rung 16 NHWC with any c; rung 8 takes the rest).

The package: ``_common`` (the Problem, layouts, the launch check and traffic record), ``direct``
(rungs 0-2), ``im2col`` (3), ``igemm`` (4-6), ``winograd`` (7, 11, 14), ``tensor`` (8-10, 12-13, 15),
``tensor_padded`` (16); this module is the index: ``LADDER``, the problems to sweep and the ResNet-50 table.  Its peers (torch with cuDNN's
autotuner, a Triton implicit GEMM) live with the other peers in :mod:`perfkit.kernels.peers`.
"""
from __future__ import annotations

from ..base import Variant, registry_check
from ._common import LAYOUTS, Problem, to_layout, torch_conv, torch_nchw  # noqa: F401  (conv.Problem, as before)
from .direct import Direct, DirectHalo, Oracle
from .igemm import IgemmNaive, IgemmRegblock, IgemmSmem
from .im2col import GEMM_PREFERENCE, Im2colGemm  # noqa: F401
from .tensor import TCEpilogue, TCLdmatrix, TCPipeline, TCVector, TCWarpTile, TensorCore
from .tensor_padded import TCPadded
from .winograd import Winograd, WinogradF4, WinogradTiled

__all__ = ["Problem", "LADDER", "EXAMPLE_PROBLEM", "GPU_SWEEP", "SIM_SWEEP", "RESNET50", "resnet50_layers",
           "Oracle", "Direct", "DirectHalo", "Im2colGemm", "IgemmNaive", "IgemmSmem", "IgemmRegblock",
           "Winograd", "TensorCore", "TCVector", "TCLdmatrix", "WinogradTiled", "TCPipeline", "TCWarpTile", "WinogradF4", "TCEpilogue", "TCPadded",
           "to_layout"]

LADDER: list[Variant] = [Oracle(), Direct(), DirectHalo(), Im2colGemm(), IgemmNaive(), IgemmSmem(),
                         IgemmRegblock(), Winograd(), TensorCore(), TCVector(), TCLdmatrix(),
                         WinogradTiled(), TCPipeline(), TCWarpTile(), WinogradF4(),
                         TCEpilogue(), TCPadded()]
registry_check(LADDER)

# --- problems -----------------------------------------------------------------------------------
#: ResNet-50 (torchvision v1.5: stride 2 on the 3x3 of the first block of stages 2-4) forward
#: conv layers, one entry per distinct shape: (name, c, h, k, r, stride, pad, times it occurs)
RESNET50 = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 3, 1),
    ("s1 1x1 64->64", 64, 56, 64, 1, 1, 0, 1),
    ("s1 3x3 64", 64, 56, 64, 3, 1, 1, 3),
    ("s1 1x1 64->256", 64, 56, 256, 1, 1, 0, 4),  # 3 expansions + the downsample
    ("s1 1x1 256->64", 256, 56, 64, 1, 1, 0, 2),
    ("s2 1x1 256->128", 256, 56, 128, 1, 1, 0, 1),
    ("s2 3x3 128/2", 128, 56, 128, 3, 2, 1, 1),
    ("s2 1x1 128->512", 128, 28, 512, 1, 1, 0, 4),
    ("s2 down 256->512/2", 256, 56, 512, 1, 2, 0, 1),
    ("s2 1x1 512->128", 512, 28, 128, 1, 1, 0, 3),
    ("s2 3x3 128", 128, 28, 128, 3, 1, 1, 3),
    ("s3 1x1 512->256", 512, 28, 256, 1, 1, 0, 1),
    ("s3 3x3 256/2", 256, 28, 256, 3, 2, 1, 1),
    ("s3 1x1 256->1024", 256, 14, 1024, 1, 1, 0, 6),
    ("s3 down 512->1024/2", 512, 28, 1024, 1, 2, 0, 1),
    ("s3 1x1 1024->256", 1024, 14, 256, 1, 1, 0, 5),
    ("s3 3x3 256", 256, 14, 256, 3, 1, 1, 5),
    ("s4 1x1 1024->512", 1024, 14, 512, 1, 1, 0, 1),
    ("s4 3x3 512/2", 512, 14, 512, 3, 2, 1, 1),
    ("s4 1x1 512->2048", 512, 7, 2048, 1, 1, 0, 3),
    ("s4 down 1024->2048/2", 1024, 14, 2048, 1, 2, 0, 1),
    ("s4 1x1 2048->512", 2048, 7, 512, 1, 1, 0, 2),
    ("s4 3x3 512", 512, 7, 512, 3, 1, 1, 2),
]


def resnet50_layers(batch: int = 32, dtype: str = "float32", layout: str = "NCHW"):
    """[(name, Problem, count)] for the distinct ResNet-50 conv layers at ``batch``."""
    return [(name, Problem(batch, c, h, h, k, r, r, st, pd, dtype, layout), count)
            for name, c, h, k, r, st, pd, count in RESNET50]


GPU_SWEEP = ([p for _, p, _ in resnet50_layers(32, "float32", "NCHW")]
             + [p for _, p, _ in resnet50_layers(32, "float32", "NHWC")]
             + [p for _, p, _ in resnet50_layers(32, "float16", "NHWC")])
EXAMPLE_PROBLEM = Problem(32, 128, 28, 28, 128, 3, 3, 1, 1)  # ResNet-50 stage 2 3x3; compiled, never run here
SIM_SWEEP = [Problem(2, 3, 7, 6, 5, 3, 3, 1, 1), Problem(1, 4, 6, 7, 3, 3, 2, 2, 1, "float32", "NHWC"),
             Problem(1, 8, 5, 5, 6, 3, 3, 1, 1, "float16", "NHWC")]
