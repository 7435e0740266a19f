"""Reference answers of the prediction exercises (perfkit.exercises.predict)."""

# 2**26 x (4 + 4 read + 4 written) B = 805 MB at 3.35 TB/s: 240 us
saxpy = {"us": 240}
# warptile's records at 4096^3 took 8.3 ms against no_bank_conflicts' 6.2 ms
gemm_order = {"faster": "no_bank_conflicts", "x": 1.33}
# each thread walks its own output pixel's taps: few loads in flight per warp for their latency
conv_bound = {"bound": "latency"}
# 134 MB (x read, y written) at ~0.7 of 3.35 TB/s: 57 us; the tuned rung's record beat the oracle
softmax = {"us": 57, "beats_oracle": True}
# a training step's many elementwise passes (ReLU, residual adds, their gradients) each stream
# whole activations: at small batch they outweigh the convolutions
share = {"class": "elementwise"}
gpu = {"faster": "h100-sxm", "bound": "dram"}
