"""Theoretical occupancy against hand-worked CUDA Occupancy Calculator cases."""
import pytest

from perfkit import occupancy as occ


@pytest.mark.parametrize("cc, threads, regs, smem, blocks, warps, limiter", [
    # A100: 256 threads x 64 registers -> 2048 registers per warp, 8 warps per sub-partition,
    # 32 warps per SM -> 4 blocks, 50% (the calculator's classic register-bound example)
    ((8, 0), 256, 64, 0, 4, 32, "registers"),
    # H100: 40 registers round up to 1280 per warp -> 12 warps per sub-partition -> 48 warps
    ((9, 0), 128, 40, 0, 12, 48, "registers"),
    # A100: 48 KiB + 1 KiB reserved per block against 164 KiB -> 3 blocks of 4 warps
    ((8, 0), 128, 32, 48 * 1024, 3, 12, "shared memory"),
    # H100: 100 KiB dynamic + 1 KiB reserved against 228 KiB -> 2 blocks
    ((9, 0), 256, 32, 100 * 1024, 2, 16, "shared memory"),
    # H100: one-warp blocks hit the 32 resident blocks limit before 64 warps
    ((9, 0), 32, 16, 0, 32, 32, "blocks"),
    # RTX 30xx (8.6): 16 blocks per SM max -> 16 one-warp blocks, 33%
    ((8, 6), 32, 32, 0, 16, 16, "blocks"),
    # RTX 30xx (8.6): a 1024-thread block is 32 of the 48 warps; a second does not fit
    ((8, 6), 1024, 32, 0, 1, 32, "warps"),
    # Turing (7.5): 32 warps per SM -> 4 blocks of 256 threads, 100%
    ((7, 5), 256, 32, 0, 4, 32, "warps"),
    # Volta (7.0): 256-byte shared granularity, no reservation: 1000 B -> 1024 B, 96 KiB / 1 KiB = 96 -> 32 blocks cap
    ((7, 0), 64, 32, 1000, 32, 64, "warps"),
])
def test_calculator_cases(cc, threads, regs, smem, blocks, warps, limiter):
    o = occ.occupancy(cc, threads, regs, smem)
    assert (o.blocks_per_sm, o.active_warps, o.limiter) == (blocks, warps, limiter)
    assert o.ratio == warps / occ.LIMITS[cc].max_warps_per_sm


def test_shared_rounding_and_reservation():
    o = occ.occupancy((8, 0), 128, 32, 1)
    assert o.shared_per_block == 1024 + 128  # 1 B + 1 KiB reserved, rounded to 128 B
    # a block with no shared memory is charged the reservation too (cuda_occupancy.h,
    # cudaOccMaxBlocksPerSMSmemLimit: staticSmemSize = sharedSizeBytes + reservedSharedMemPerBlock)
    none = occ.occupancy((9, 0), 128, 32, 0)
    assert none.shared_per_block == 1024 and none.limits["shared memory"] == 228 and none.blocks_per_sm == 16
    assert occ.occupancy((8, 0), 1024, 32, 0).limits["shared memory"] == 164
    assert occ.occupancy((7, 5), 128, 32, 0).shared_per_block == 0  # no reservation before 8.0


def test_every_limit_has_a_source():
    for cc, lim in occ.LIMITS.items():
        assert lim.source.startswith("https://docs.nvidia.com/cuda/") or lim.source == occ.HEADER_SOURCE
        assert lim.registers_per_sm == 65536 and lim.max_shared_per_block <= lim.shared_per_sm


@pytest.mark.parametrize("args, msg", [
    (((9, 0), 2048, 32, 0), "1..1024"),
    (((9, 0), 0, 32, 0), "1..1024"),
    (((9, 0), 128, 300, 0), "the limit of 255"),
    (((9, 0), 128, 32.0, 0), "must be an integer"),
    (((9, 0), 128, 32, -1), ">= 0"),
    (((6, 1), 128, 32, 0), "no occupancy limits for compute capability 6.1"),
])
def test_errors(args, msg):
    with pytest.raises(occ.OccupancyError, match=msg):
        occ.occupancy(*args)


def test_a_block_that_cannot_launch_says_so():
    # 1024 threads x 72 registers = 73728 > 65536 registers per SM: no block fits
    o = occ.occupancy((9, 0), 1024, 72)
    assert o.blocks_per_sm == 0 and o.limiter == "registers"
    assert "too many resources requested" in str(o)
    assert occ.occupancy((9, 0), 1024, 64).blocks_per_sm == 1


@pytest.mark.parametrize("cc, smem, opt_in, blocks", [
    # without opt-in a block gets 48 KiB (static + dynamic); the 1 KiB reservation is on top
    ((9, 0), 48 * 1024, False, 4),
    ((9, 0), 48 * 1024 + 1, False, 0),
    ((9, 0), 48 * 1024 + 1, True, 4),
    ((9, 0), 227 * 1024, True, 1),
    ((9, 0), 227 * 1024 + 1, True, 0),
    ((8, 6), 99 * 1024, True, 1),
    ((8, 6), 100 * 1024, True, 0),
    ((7, 5), 64 * 1024, True, 1),
    ((7, 5), 64 * 1024, False, 0),
])
def test_per_block_shared_limit_gives_zero_blocks(cc, smem, opt_in, blocks):
    o = occ.occupancy(cc, 128, 32, smem, opt_in=opt_in)
    assert o.blocks_per_sm == blocks
    if blocks == 0:
        assert o.limiter == "shared memory" and "per-block limit" in str(o)



_HARNESS = r"""
#include <cstdio>
#include "cuda_occupancy.h"
int main() {
  int maj, min, warps, th, regs, optin; long smsm, optinlim, res, st, dyn;
  while (scanf("%d %d %d %ld %ld %ld %d %d %ld %ld %d", &maj, &min, &warps, &smsm, &optinlim, &res,
               &th, &regs, &st, &dyn, &optin) == 11) {
    cudaOccDeviceProp p; p.computeMajor = maj; p.computeMinor = min; p.maxThreadsPerBlock = 1024;
    p.maxThreadsPerMultiprocessor = warps * 32; p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536;
    p.warpSize = 32; p.sharedMemPerBlock = 48 * 1024; p.sharedMemPerMultiprocessor = smsm; p.numSms = 100;
    p.sharedMemPerBlockOptin = optinlim; p.reservedSharedMemPerBlock = res;
    cudaOccFuncAttributes a; a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = st;
    a.shmemLimitConfig = optin ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
    a.maxDynamicSharedSizeBytes = optin ? (optinlim - st) : (48 * 1024 - st);
    cudaOccDeviceState s; cudaOccResult r;
    int e = (int)cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, th, dyn);
    printf("%d %d\n", e, r.activeBlocksPerMultiprocessor);
  }
}
"""


def test_agrees_with_nvidias_cuda_occupancy_h(tmp_path):
    """Random launches on every cc in LIMITS against NVIDIA's own calculator, the header-only
    cuda_occupancy.h from the CUDA runtime wheel, compiled here (skipped without a C++ compiler)."""
    import random
    import shutil
    import subprocess
    from pathlib import Path

    import nvidia

    inc = next((Path(d) / "cu13" / "include" for d in nvidia.__path__
                if (Path(d) / "cu13" / "include" / "cuda_occupancy.h").exists()), None)
    cxx = shutil.which("c++") or shutil.which("g++")
    if inc is None or cxx is None:
        pytest.skip("needs cuda_occupancy.h (nvidia-cuda-runtime) and a C++ compiler")
    (tmp_path / "h.cpp").write_text(_HARNESS)
    subprocess.run([cxx, "-O1", "-I", str(inc), str(tmp_path / "h.cpp"), "-o", str(tmp_path / "h")],
                   check=True, capture_output=True)
    rnd = random.Random()
    cases, lines = [], []
    for _ in range(4000):
        cc = rnd.choice(list(occ.LIMITS))
        lim = occ.LIMITS[cc]
        threads, regs = rnd.randint(1, 1024), rnd.randint(0, 255)
        static = rnd.choice([0, 0, rnd.randint(0, 48 * 1024)])
        dyn = rnd.choice([0, rnd.randint(0, lim.max_shared_per_block)])
        opt_in = rnd.random() < 0.5
        cases.append((cc, threads, regs, static + dyn, opt_in))
        lines.append(f"{cc[0]} {cc[1]} {lim.max_warps_per_sm} {lim.shared_per_sm} {lim.max_shared_per_block} "
                     f"{lim.reserved_shared_per_block} {threads} {regs} {static} {dyn} {int(opt_in)}")
    out = subprocess.run([str(tmp_path / "h")], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True).stdout.split("\n")
    bad = []
    for case, line in zip(cases, out):
        err, blocks = map(int, line.split())
        cc, threads, regs, smem, opt_in = case
        ours = occ.occupancy(cc, threads, regs, smem, opt_in=opt_in).blocks_per_sm
        if err != 0 or ours != blocks:
            bad.append((case, err, blocks, ours))
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:3]}"
