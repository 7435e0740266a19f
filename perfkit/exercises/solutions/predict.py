"""Reference answers of the prediction exercises (perfkit.exercises.predict)."""

# 2**26 x (4 + 4 read + 4 written) B = 805 MB at 3.35 TB/s: 240 us
saxpy = {"us": 240}
# the newest H100 records at 4096^3 (commit 6bbc424): warptile 3.05 ms against no_bank_conflicts'
# 5.02 ms: each thread computes a register tile of several warp-sized blocks from the same
# shared loads (at 7c7b2e0 warptile was the slower, 8.3 ms against 6.2)
gemm_order = {"faster": "warptile", "x": 1.64}
# each thread walks its own output pixel's taps: few loads in flight per warp for their latency
# (at the stage-4 3x3 layer the model's latency and issue legs are equal: either binds)
conv_bound = {"bound": "latency"}
# 134 MB (x read, y written) at ~0.7 of 3.35 TB/s: 57 us; the tuned rung's record beat the oracle
softmax = {"us": 57, "beats_oracle": True}
# a training step's many elementwise passes (ReLU, residual adds, their gradients) each stream
# whole activations: at small batch they outweigh the convolutions
share = {"class": "elementwise"}
gpu = {"faster": "h100-sxm", "bound": "dram"}
