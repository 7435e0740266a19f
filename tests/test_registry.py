import re

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


_LEDGER_LINE = re.compile(r"^ {1,4}(\d{1,2}) ([a-z][a-z0-9_]*)(?: {2,}\S|$)")


def _ledger(doc: str) -> list[tuple[int, str]]:
    """(rung, name) of each ledger line of a module docstring: the rung number right-aligned in
    the first columns, the name, then two spaces and what it does."""
    return [(int(m[1]), m[2]) for m in map(_LEDGER_LINE.match, doc.splitlines()) if m]


@pytest.mark.parametrize("op", list(registry.OPS))
def test_each_ladders_docstring_ledger_agrees_with_its_LADDER(op):
    """The ledger at the top of a ladder's module names every rung by the number and name that
    LADDER gives it, in order: a rung added, renamed or renumbered without its ledger line fails."""
    mod = registry.module(op)
    want = [(v.rung, v.name) for v in mod.LADDER]
    assert _ledger(mod.__doc__ or "") == want, f"{mod.__name__}: the docstring's ledger vs LADDER"


def test_the_ledger_reader_finds_a_wrong_line():
    doc = "Ledger:\n\n   0 oracle        x\n   7 no_bank_conf  y\n  12 tensor_core   z\n     wrapped text\n"
    assert _ledger(doc) == [(0, "oracle"), (7, "no_bank_conf"), (12, "tensor_core")]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def _sentences(what: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(what.strip()) if s]


def test_the_sentence_splitter_counts_sentences():
    assert len(_sentences("One warp per row. Lanes stride by 32 (coalesced). `exp` once!")) == 3
    assert len(_sentences("A 64x64 tile, 2.5x fewer loads; then stores.")) == 1


@pytest.mark.parametrize("op", list(registry.OPS))
def test_every_rungs_and_peers_what_is_one_or_two_short_sentences(op):
    """A rung's (and a peer's) `what` is the heading text of its view: the one idea against the rung
    before, in at most two sentences and 300 characters; its history lives in git."""
    from perfkit.kernels import peers

    bad = [f"{v.label}: {len(v.what)} characters, {len(_sentences(v.what))} sentences"
           for v in [*registry.ladder(op), *peers.peers_for(op)]
           if not v.what.strip() or len(v.what) > 300 or len(_sentences(v.what)) > 2]
    assert not bad, f"{op}: " + "; ".join(bad)
