import pytest

from perfkit.kernels import registry


def test_every_op_has_one_module_with_a_ladder():
    for op in registry.OPS:
        mod = registry.module(op)
        assert mod.LADDER and registry.ladder(op) == list(mod.LADDER)
        assert mod.EXAMPLE_PROBLEM.op in (op, "layernorm")  # layernorm_bwd's problem names layernorm's op
    assert registry.module("norm.softmax") is registry.module("softmax")
    assert registry.module_name("rmsnorm", "old.kernels") == "old.kernels.norm.rmsnorm"


def test_an_op_with_no_ladder_is_named_as_such():
    assert not registry.has("roofline") and registry.has("batchnorm") and registry.has("norm.layernorm")
    with pytest.raises(LookupError, match="no op 'roofline': one of saxpy, gemm, conv"):
        registry.module("roofline")
