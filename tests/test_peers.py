"""Peers (perfkit.kernels.peers): GPU-only library kernels timed beside the ladders.  Here, with
no GPU, they must say clearly why they do not run, stay out of the ladders, and (where Triton
is installed) their Triton kernels must compile for an sm_90 target."""
from __future__ import annotations

import importlib.util

import pytest

import perfkit  # noqa: F401
from perfkit import backend, bench
from perfkit.kernels import gemm, peers
from perfkit.kernels.base import UnsupportedProblem
from perfkit.kernels.norm import layernorm, rmsnorm, softmax


def test_peers_are_not_rungs():
    for op, ps in peers.PEERS.items():
        assert ps, op
        for p in ps:
            assert p.rung == -1 and not p.oracle and p.label.startswith("peer ") and len(p.what) > 40
            assert op in p.ops
    for mod in (gemm, softmax, layernorm, rmsnorm):
        assert not any(isinstance(v, peers.Peer) for v in mod.LADDER)
    assert peers.peers_for("batchnorm") == []


@pytest.mark.parametrize("peer, problem", [
    (peers.TorchMatmul(), gemm.Problem(5, 7, 3)),
    (peers.TritonMatmul(), gemm.Problem(5, 7, 3, "float16")),
    (peers.TritonRows(), softmax.Problem(2, 9)),
    (peers.TritonRows(), rmsnorm.Problem(2, 9)),
])
def test_gpu_only_in_the_simulator(peer, problem):
    """In the simulator a peer refuses, saying why; on a GPU it runs and passes the check."""
    if not backend.is_simulator():
        peer.supports(problem)
        x = problem.make_inputs(0)
        assert problem.check(peer.run(problem, x), problem.reference(x)).ok
        return
    with pytest.raises(UnsupportedProblem, match="GPU-only"):
        peer.supports(problem)
    with pytest.raises(UnsupportedProblem, match="GPU-only"):
        peer.run(problem, problem.make_inputs(0))


def test_wrong_op_is_named():
    with pytest.raises(UnsupportedProblem, match="not softmax"):
        peers.TorchMatmul().supports(softmax.Problem(2, 9))


def test_sweep_keeps_unsupported_peer_rows():
    p = gemm.Problem(3, 4, 5)
    table = bench.sweep([p], [gemm.LADDER[0], gemm.LADDER[2]] + peers.peers_for("gemm"), progress=False,
                        record=False)
    if not backend.is_simulator():  # on a GPU the peers run and pass their checks (as on the H100)
        assert list(table.status) == ["ok"] * 4, table[["label", "status", "error"]]
        return
    assert list(table.status) == ["ok", "ok", "unsupported", "unsupported"]
    assert table.error.iloc[2].startswith("unsupported: torch: a GPU-only peer")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_peers_compile_for_sm90():
    """No GPU needed: Triton compiles for a named target.  The float16 GEMM must use the tensor
    cores (an mma/wgmma instruction in the PTX); the float32 one must not (IEEE products)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)

    def ptx(fn, sig, consts):
        return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target,
                              options={"num_warps": 4}).asm["ptx"]

    mm = peers._triton_mm()
    ints = {n: "i32" for n in "M N K s_am s_ak s_bk s_bn s_cm s_cn".split()}
    tm = peers.TritonMatmul()
    consts = {"BM": tm.BM, "BN": tm.BN, "BK": tm.BK, "GROUP_M": tm.GROUP_M}
    for dt, prec in (("fp32", "ieee"), ("fp16", "tf32")):
        sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*fp32", **ints,
               **{k: "constexpr" for k in [*consts, "PRECISION"]}}
        text = ptx(mm, sig, {**consts, "PRECISION": prec})
        assert ("mma" in text) == (dt == "fp16"), dt
    softmax_rows, norm_rows = peers._triton_rows()
    for dt in ("fp32", "fp16"):
        assert "ex2" in ptx(softmax_rows, {"x_ptr": "*" + dt, "y_ptr": "*" + dt, "cols": "i32", "BLOCK": "constexpr"},
                            {"BLOCK": 1024})
        for center in (True, False):
            sig = {"x_ptr": "*" + dt, "g_ptr": "*" + dt, "b_ptr": "*" + dt, "y_ptr": "*" + dt, "mean_ptr": "*fp32",
                   "rstd_ptr": "*fp32", "cols": "i32", "eps": "fp32", "BLOCK": "constexpr", "CENTER": "constexpr"}
            assert "sqrt" in ptx(norm_rows, sig, {"BLOCK": 1024, "CENTER": center})
