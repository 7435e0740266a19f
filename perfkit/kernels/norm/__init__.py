"""Normalization ladders, one module per op, each with its own ``Problem``, rungs and ``LADDER``
(rung 0 the oracle):

* :mod:`.softmax`        softmax over the last axis of a 2-D array
* :mod:`.layernorm`      LayerNorm forward (y, and the mean and rstd the backward pass uses)
* :mod:`.layernorm_bwd`  LayerNorm backward (dx, dgamma, dbeta)
* :mod:`.rmsnorm`        RMSNorm forward
* :mod:`.batchnorm`      BatchNorm forward in training mode (NCHW or NHWC), running statistics

All are memory-bound: the goal of each ladder is the copy bandwidth (read the input once, write
the output once).  Shared reductions and helpers live in :mod:`._common`.
"""

OPS = ("softmax", "layernorm", "layernorm_bwd", "rmsnorm", "batchnorm")

from . import batchnorm, layernorm, layernorm_bwd, rmsnorm, softmax  # noqa: E402,F401  (norm.softmax etc.)
