"""The device intrinsics a kernel written outside the ladders may use, in one public place.

The ladders keep them in private helper modules next to their kernels (``_vector`` for 128-bit
loads and stores, ``norm/_common`` for warp shuffles that also run in the simulator, ``_ptx`` for
the tensor-core ``mma.sync`` and its exact simulator twin, ``_ptx_hopper`` for Hopper's
``wgmma`` and its fences and descriptors); the exercises, the anatomy examples
and a learner's kernels import them from here."""
from ._ptx import (frag_a, frag_b, frag_c, ldmatrix_x4, ldmatrix_x4_trans,  # noqa: F401
                   mma_16816)
from ._ptx_hopper import (fence_proxy_async, smem_addr, wgmma_commit, wgmma_desc, wgmma_fence,  # noqa: F401
                          wgmma_m64n64k16, wgmma_m64n128k16, wgmma_m64n256k16, wgmma_wait)
from ._vector import ld4, load4, st4  # noqa: F401
from .norm._common import shfl_down, shfl_xor  # noqa: F401

__all__ = ["load4", "ld4", "st4", "shfl_down", "shfl_xor", "frag_a", "frag_b", "frag_c", "mma_16816",
           "ldmatrix_x4", "ldmatrix_x4_trans", "wgmma_m64n64k16", "wgmma_m64n128k16", "wgmma_m64n256k16",
           "wgmma_desc", "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "smem_addr"]
