"""perfkit.lesson: rung cards from recorded GPU results (matched by op + variant name + problem
parameters), the kernel's diff with its helpers, and readable output.  No kernel runs here:
everything is static or reads data/results/ (read-only)."""
import importlib
import json
from pathlib import Path
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import perfkit  # noqa: F401  (before numba.cuda)
from perfkit import backend, history, lesson, model, results
from perfkit.kernels import conv, gemm
from perfkit.kernels.norm import softmax

RECORDED = results.load()
RECORDED = RECORDED[~RECORDED["simulated"].fillna(False).astype(bool)] if not RECORDED.empty else RECORDED


def _problem_from_label(op, label):
    """The Problem a record was taken at, rebuilt from its label through today's Problem class."""
    import dataclasses

    ladder = lesson.ladder_for(op)
    mod = __import__(type(ladder[0]).__module__, fromlist=["Problem"])
    vals = dict(re.findall(r"(\w+)=(\S+)", label))
    kinds = {f.name: f.type for f in dataclasses.fields(mod.Problem)}
    kw = {}
    for k, v in vals.items():
        t = str(kinds.get(k, "str"))
        kw[k] = int(v) if "int" in t else float(v) if "float" in t else v
    return mod.Problem(**kw)


def _recorded_rungs():
    """(op, problem label, variant) of every recorded rung still in today's ladder (no peers)."""
    out = []
    if RECORDED.empty:
        return out
    for (op, prob, var), _ in RECORDED.groupby(["op", "problem", "variant"]):
        try:
            names = {v.name for v in lesson.ladder_for(op)}
        except LookupError:
            continue
        if var in names:
            out.append((op, prob, var))
    return out


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_every_recorded_rung_is_shown_with_its_record():
    """The notebook path (a Problem object, the rung from today's ladder, its example()) finds
    the record of every (problem, rung) that has one: none is shown as 'no record'."""
    rungs = _recorded_rungs()
    assert len(rungs) >= 100, len(rungs)
    missing = []
    for op, label, var in rungs:
        p = _problem_from_label(op, label)
        card = lesson.recorded(op, p, var, estimate=False)
        if not card.found:
            missing.append((op, label, var, str(card)))
        else:
            assert card.problem == label or lesson._matches(p, label)
            assert card.median_s > 0 and np.isfinite(card.rate) and card.gpu and card.commit and card.date
            assert lesson.false_no_record_claims(str(card)) == []
    assert not missing, missing[:3]


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_gemm_card_numbers_agree_with_the_record():
    card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, "double_buffer", estimate=False)
    rows = RECORDED[(RECORDED.op == "gemm") & (RECORDED.problem == gemm.EXAMPLE_PROBLEM.label)
                    & (RECORDED.gpu == card.gpu)]  # the card's GPU (the newest record's), its newest records
    rec = rows.sort_values("utc").drop_duplicates("variant", keep="last").set_index("variant")["median_s"]
    assert card.found and card.median_s == pytest.approx(rec["double_buffer"])
    assert card.rate == pytest.approx(gemm.EXAMPLE_PROBLEM.flops / rec["double_buffer"] / 1e12)
    assert card.of_oracle == pytest.approx(rec["oracle"] / rec["double_buffer"])
    ladder = gemm.LADDER
    i = next(j for j, v in enumerate(ladder) if v.name == "double_buffer")
    prev = ladder[i - 1]
    if prev.name in rec:
        assert card.x_prev == pytest.approx(rec[prev.name] / rec["double_buffer"])
    text = str(card)
    assert "TFLOP/s" in text and card.gpu in text and card.commit[:7] in text and card.date in text
    assert card.gpu.startswith("NVIDIA H") and len(card.date) == 10


def test_a_rung_with_no_record_says_so_and_the_checker_catches_false_claims(tmp_path):
    p = gemm.Problem(37, 41, 29)
    card = lesson.recorded("gemm", p, "naive", estimate=False)
    assert not card.found and "no record of" in str(card) and card.status == "no record"
    assert lesson.false_no_record_claims(str(card)) == []
    if not RECORDED.empty:  # a false claim is caught
        lie = f"<td>no record of 08 double_buffer at {gemm.EXAMPLE_PROBLEM.label} on a real GPU</td>"
        assert lesson.false_no_record_claims(lie) == [f"double_buffer at {gemm.EXAMPLE_PROBLEM.label}"]


def _write_record(root, op, variant, rung, label, params, median, commit="abc1234", gpu="Test GPU",
                  utc="2026-01-02T03:04:05+00:00"):
    slug = gpu.lower().replace(" ", "-")
    folder = root / slug / op
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"op": op, "variant": variant, "rung": rung, "problem": label, "params": params,
           "flops": 2.0 * params.get("m", 1) * params.get("n", 1) * params.get("k", 1), "bytes": 1e6,
           "simulated": False, "check_ok": True, "timing": {"median_s": median, "iqr_s": median / 100, "n": 10},
           "provenance": {"gpu": gpu, "gpu_slug": slug, "git_commit": commit, "git_dirty": False, "utc": utc}}
    stamp = re.sub(r"\D", "", utc)[:14]
    (folder / f"{stamp}-{variant}-{rung}-{commit}-{label.replace(' ', '_')}.json").write_text(json.dumps(doc))


def test_matching_is_by_name_and_parameters_never_by_rung_number(tmp_path):
    p = gemm.Problem(64, 64, 64)
    # recorded when double_buffer was rung 3 and naive rung 9: numbers that mean nothing today
    _write_record(tmp_path, "gemm", "double_buffer", 3, p.label, p.params, 2e-3)
    _write_record(tmp_path, "gemm", "oracle", 0, p.label, p.params, 1e-3)
    # the same name at another dtype must not match
    q = gemm.Problem(64, 64, 64, "float16")
    _write_record(tmp_path, "gemm", "double_buffer", 3, q.label, q.params, 9.0)
    # an older record of an older problem label without dtype (a parameter added since, at its default)
    _write_record(tmp_path, "gemm", "naive", 9, "m=64 n=64 k=64", {"m": 64, "n": 64, "k": 64}, 4e-3)
    lesson.reload()
    try:
        card = lesson.recorded("gemm", p, "double_buffer", estimate=False, root=tmp_path)
        assert card.found and card.median_s == 2e-3 and card.of_oracle == pytest.approx(0.5)
        assert card.label.startswith(f"{next(v.rung for v in gemm.LADDER if v.name == 'double_buffer'):02d} ")
        naive = lesson.recorded("gemm", p, "naive", estimate=False, root=tmp_path)
        assert naive.found and naive.median_s == 4e-3
        assert not lesson.recorded("gemm", gemm.Problem(64, 64, 65), "double_buffer", estimate=False,
                                   root=tmp_path).found
        df = lesson.records("gemm", root=tmp_path)
        assert set(df.label) >= {v.label for v in gemm.LADDER if v.name in ("double_buffer", "oracle", "naive")}
        # a commit this repository does not have: cannot tell, and says so rather than claim "unchanged"
        assert card.changed_since is None and "cannot tell" in card.provenance
    finally:
        lesson.reload()


def test_rung_closure_sees_kernel_and_helper_changes_not_comments_or_prose():
    base = '''
from ._helpers import load4
from .base import Variant

def _kern(BM):
    def k(a):
        x = load4(a, BM)  # a comment
    return k

class Fast(Variant):
    """doc"""
    BM: int = 64
    rung = 3
    name = "fast"
    what = "the prose"
    def plan(self, problem, bufs):
        return [_kern(self.BM)]
    def traffic(self, problem):
        return 1
'''
    helpers = ("if SIM:\n    def load4(a, i):\n        return a[i]\n"  # per-backend twins: both count
               "else:\n    def load4(a, i):\n        return a[i]\n")
    files = {"pk/k.py": base, "pk/_helpers.py": helpers}
    same = history._rung_closure(files.get, "pk/k.py", "fast")
    assert same and any("load4" in k for k in same)
    prose = dict(files, **{"pk/k.py": base.replace("the prose", "new prose").replace("a comment", "edited")
                           .replace('"""doc"""', '"""new doc"""').replace("return 1", "return 2")})
    assert history._rung_closure(prose.get, "pk/k.py", "fast") == same  # prose, comments, traffic
    helper = dict(files, **{"pk/_helpers.py": helpers.rsplit("a[i]", 1)[0] + "a[i + 1]\n"})
    assert history._rung_closure(helper.get, "pk/k.py", "fast") != same  # the change lives in a helper
    tile = dict(files, **{"pk/k.py": base.replace("BM: int = 64", "BM: int = 128")})
    assert history._rung_closure(tile.get, "pk/k.py", "fast") != same
    assert history._rung_closure(files.get, "pk/k.py", "renamed") is None
    # a simulator twin never runs on a GPU: editing it leaves what a GPU record measured unchanged,
    # editing the GPU branch does not
    twins = ("if backend.is_simulator():\n    def load4(a, i):\n        return a[i]\n"
             "else:\n    def load4(a, i):\n        return a[i]\n")
    t0 = dict(files, **{"pk/_helpers.py": twins})
    first = history._rung_closure(t0.get, "pk/k.py", "fast")
    sim_edit = dict(files, **{"pk/_helpers.py": twins.replace("return a[i]\nelse", "return a[i] * 1\nelse")})
    assert history._rung_closure(sim_edit.get, "pk/k.py", "fast") == first
    gpu_edit = dict(files, **{"pk/_helpers.py": twins.rsplit("a[i]", 1)[0] + "a[i + 1]\n"})
    assert history._rung_closure(gpu_edit.get, "pk/k.py", "fast") != first
    negated = dict(files, **{"pk/_helpers.py": "if not backend.is_simulator():\n    def load4(a, i):\n"
                                                "        return a[i + 2]\n"})
    assert history._rung_closure(negated.get, "pk/k.py", "fast") != first  # that body is the GPU's


def test_a_rung_or_helper_moved_to_another_kernel_module_unchanged_is_no_change():
    """A definition is known by the name the rung's code uses and its text, not by its file:
    splitting a ladder module into a package (the helper to a shared module, the rung to a
    module of its own) leaves the rung unchanged; its body edited there, it changed."""
    helper = "def tile(BM):\n    return BM * 2\n"
    rung = ("class Fast(Variant):\n    BM: int = 64\n    name = 'fast'\n"
            "    def plan(self, problem, bufs):\n        return [tile(self.BM)]\n")
    before = {"perfkit/kernels/toy.py": "from .base import Variant\n" + helper + rung}
    after = {"perfkit/kernels/toy/_common.py": helper,
             "perfkit/kernels/toy/rungs.py": "from .base import Variant\nfrom ._common import tile\n" + rung}
    then = history._rung_closure(before.get, "perfkit/kernels/toy.py", "fast")
    now = history._rung_closure(after.get, "perfkit/kernels/toy/rungs.py", "fast")
    assert then and "tile" in then and now == then
    edited = dict(after, **{"perfkit/kernels/toy/_common.py": helper.replace("* 2", "* 4")})
    assert history._rung_closure(edited.get, "perfkit/kernels/toy/rungs.py", "fast") != then
    # reached through its module (norm's ``C.group_sum``, a private helper of the package) it is the
    # same helper; a base class reached that way brings its fields and methods as before
    tunable = "class Tunable(Variant):\n    TM: int = 8\n    def plan(self, problem, bufs):\n        return [tile(self.TM)]\n"
    b2 = {"perfkit/kernels/toy.py": "from .base import Variant\n" + helper + tunable
          + "class Fast(Tunable):\n    name = 'fast'\n"}
    a2 = {"perfkit/kernels/toy/_common.py": "from .base import Variant\n" + helper + tunable,
          "perfkit/kernels/toy/rungs.py": "from . import _common as C\nclass Fast(C.Tunable):\n    name = 'fast'\n"}
    then2 = history._rung_closure(b2.get, "perfkit/kernels/toy.py", "fast")
    assert "method plan" in then2 and "TM" in then2["fields"]
    assert history._rung_closure(a2.get, "perfkit/kernels/toy/rungs.py", "fast") == then2
    qualified = dict(after, **{"perfkit/kernels/toy/rungs.py": after["perfkit/kernels/toy/rungs.py"]
                               .replace("from ._common import tile", "from . import _common as C")
                               .replace("return [tile(", "return [C.tile(")})
    assert history._rung_closure(qualified.get, "perfkit/kernels/toy/rungs.py", "fast") == then
    # a relative import inside the code names the same module from one level deeper (conv's im2col
    # rung imports gemm: ``from . import gemm`` in kernels/conv.py, ``from .. import gemm`` after)
    uses = ("class Fast(Variant):\n    name = 'fast'\n    def plan(self, problem, bufs):\n"
            "        from {dots} import gemm\n        return gemm.LADDER\n")
    then3 = history._rung_closure({"perfkit/kernels/toy.py": uses.format(dots=".")}.get, "perfkit/kernels/toy.py", "fast")
    moved = {"perfkit/kernels/toy/rungs.py": uses.format(dots="..")}
    assert history._rung_closure(moved.get, "perfkit/kernels/toy/rungs.py", "fast") == then3
    other = {"perfkit/kernels/toy/rungs.py": uses.format(dots=".")}  # perfkit.kernels.toy.gemm: another module
    assert history._rung_closure(other.get, "perfkit/kernels/toy/rungs.py", "fast") != then3
    # where the rung's file was at the older commit: its path, then the module its package replaced
    assert history._former_paths("perfkit/kernels/toy/rungs.py") == ["perfkit/kernels/toy/rungs.py",
                                                                    "perfkit/kernels/toy.py"]
    assert history._former_paths("perfkit/kernels/saxpy.py") == ["perfkit/kernels/saxpy.py"]


def test_conv_rungs_read_unchanged_across_the_move_into_a_package():
    """Every conv rung of the commit before conv.py became kernels/conv/ reads as unchanged at that
    commit: its records keep matching their code (the rungs were moved, not edited)."""
    if history.source_changed_since(conv.LADDER[1], "c98565b") is None:
        pytest.skip("no git history here (a source archive)")
    before = {"oracle", "direct", "direct_halo", "im2col_gemm", "igemm_naive", "igemm_smem", "igemm_regblock",
              "winograd", "tensor_core"}
    for v in conv.LADDER:
        if v.name in before:
            assert history.source_changed_since(v, "c98565b") is False, v.label


def test_source_diff_is_the_kernel_and_its_helpers_not_the_class():
    ladder = softmax.LADDER
    names = [v.name for v in ladder]
    fused, warp = ladder[names.index("fused")], ladder[names.index("warp")]
    d = str(lesson.source_diff(fused, warp, softmax.EXAMPLE_PROBLEM))
    assert "helper _common.group_sum" in d and "def traffic" not in d and "what: ClassVar" not in d
    assert "# launch softmax_warp: grid" in d
    mma_rung = next(v for v in gemm.LADDER if v.name == "tc_epilogue")  # the last mma.sync rung (later: wgmma)
    src = lesson.kernel_sources(mma_rung, gemm.EXAMPLE_PROBLEM)
    assert "mma_16816" in src and "def traffic" not in src
    if backend.is_simulator():  # on a GPU mma_16816 is the PTX intrinsic: no Python helper to show
        assert "helper _ptx.mma_16816" in src


def test_explanation_reads_the_numbers():
    c = lesson.RungCard(op="gemm", problem="m=1 n=1 k=1 dtype=float32", variant="x", label="05 x", metric="tflops",
                        found=True, median_s=3e-3, rate=1.0, estimate_s=1e-3, bound="shared",
                        legs={"shared": 1e-3, "l2": 0.8e-3, "issue": 0.5e-3}, estimate_kind="estimate",
                        x_prev=2.0, prev_label="04 y", prev_estimate_s=0.9e-3)
    e = c.explanation()
    assert "3.0x" in e and "sum of every leg" in e and "l2 leg" in e and "direction wrong" in e
    c.median_s = 1.5e-3
    assert "between the largest leg" in c.explanation()
    c.median_s = 0.5e-3
    assert "faster than the estimate" in c.explanation() and "over-counts" in c.explanation()
    c.median_s = 1.1e-3
    assert "within 25%" in c.explanation()
    assert c.as_dict()["measured/est"] == pytest.approx(1.1)


def test_an_unrecorded_card_says_when_its_estimated_factor_leaves_out_bank_conflicts():
    """A card with no record estimates the rung before as it estimates itself: without simulated
    bank conflicts where it has none, so that estimate can differ from the rung before's own card
    (notebook 02: cluster's card put warp_specialized at 195 µs, its own card at 194 µs); the row says so."""
    c = lesson.RungCard(op="gemm", problem="p", variant="x", label="24 x", metric="tflops", estimate_s=195e-6,
                        bound="tensor", legs={"tensor": 141e-6}, estimate_kind="estimate", prev_label="22 y",
                        prev_estimate_s=195e-6, estimate_banks=False)
    row = dict(c.rows())["x the rung before, estimated"]
    assert "(195 µs -> 195 µs; both without bank conflicts)" in row
    c.estimate_banks = True
    assert "bank" not in dict(c.rows())["x the rung before, estimated"]


def test_predict_prompt_comes_before_a_folded_answer():
    card = lesson.recorded("gemm", gemm.Problem(37, 41, 29), "coalesced", estimate=False)
    prompt = lesson.predict_prompt(gemm.LADDER[1], gemm.LADDER[2], "m=37")
    assert "faster or slower" in str(prompt) and "Predict" in prompt._repr_html_()
    ans = lesson.answer(card)
    assert ans._repr_html_().startswith("<details>") and "no record" in ans._repr_html_()


def test_numba_performance_warnings_are_shown_once_and_counted(monkeypatch, capsys):
    from numba.core.errors import NumbaPerformanceWarning

    monkeypatch.setattr(lesson.numba_warnings, "_WARN", lesson._WarningLog())  # where the hook reads it
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    with warnings.catch_warnings():
        lesson.quiet_numba_warnings()
        for g in (1, 2, 3):
            warnings.warn(f"Grid size {g} will likely result in GPU under-utilization", NumbaPerformanceWarning)
    err = capsys.readouterr().err
    assert err.count("Grid size") == 1
    s = lesson.numba_warning_summary()
    assert s["times"].tolist() == [3]


def test_sweep_table_units_and_simulated_rows():
    df = pd.DataFrame({"op": ["gemm", "gemm"], "problem": ["p", "p"], "label": ["01 a", "02 b"],
                       "check_ok": [True, True], "median_s": [2.5e-3, 40e-6], "tflops": [1.5, np.nan],
                       "model_s": [1e-3, np.nan], "simulated": [False, True], "error": [None, None]})
    t = lesson.sweep_table(df)
    assert t["median"].tolist() == ["2.5 ms", "simulated"]
    assert t["TFLOP/s"].tolist() == [1.5, "—"]  # a simulated row: a dash, never NaN on screen
    assert "NaN" not in t.to_html() and "nan" not in t.to_string()
    assert lesson.fmt_seconds(62.1e-6) == "62.1 µs"


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_notebook_ladder_views_show_every_recorded_rung():
    """The cards notebooks 02 and 04 render per ladder (lesson.ladder_cards at each op's example
    problem, and 02's 1024^3): every rung with a record shows it, and the rendered HTML makes no
    false 'no record' claim."""
    from perfkit.kernels.norm import batchnorm, layernorm, layernorm_bwd, rmsnorm

    views = [("gemm", gemm.EXAMPLE_PROBLEM), ("gemm", gemm.Problem(1024, 1024, 1024))]
    views += [(m.Problem.op, m.EXAMPLE_PROBLEM) for m in (softmax, layernorm, layernorm_bwd, rmsnorm, batchnorm)]
    shown = 0
    for op, p in views:
        cards = lesson.ladder_cards(op, p, estimate=False)
        html_ = "".join(lesson.answer(c)._repr_html_() for c in cards) + lesson.card_table(cards).to_html()
        assert lesson.false_no_record_claims(html_) == [], (op, p.label)
        for c in cards:
            has = not RECORDED[(RECORDED.op == op) & (RECORDED.variant == c.variant)
                               & (RECORDED.problem == c.problem)].empty
            assert c.found == has, (op, c.label, c.problem)
            shown += c.found
    assert shown >= 40, shown


def test_a_card_never_shows_another_ops_record():
    """layernorm and layernorm_bwd share problem labels and rung names: a card handed a table of
    every op's records shows its own op's record (notebook 04 once showed the backward times
    on the forward cards)."""
    from perfkit.kernels.norm import layernorm

    every = results.load(latest=False)
    assert {"layernorm", "layernorm_bwd"} <= set(every["op"])
    p = layernorm.EXAMPLE_PROBLEM
    for rung in ("fused", "warp", "naive"):
        mixed = lesson.recorded("layernorm", p, rung, table=every, estimate=False)
        own = lesson.recorded("layernorm", p, rung, estimate=False)
        assert mixed.found and mixed.median_s == own.median_s
        fwd = every[(every["op"] == "layernorm") & (every["variant"] == rung)]
        assert mixed.median_s in set(fwd["median_s"])
        bwd = lesson.recorded("layernorm_bwd", p, rung, table=every, estimate=False)
        assert bwd.found and bwd.median_s != mixed.median_s


_LADDERS = ["gemm", "softmax", "layernorm", "layernorm_bwd", "rmsnorm", "batchnorm"]


@pytest.mark.parametrize("op", _LADDERS)
def test_every_recorded_card_states_the_measured_direction(op):
    """The card's words follow the records: 'faster than' the rung before where the record is
    faster (by more than 2%), 'slower than' where slower, with the measured factor."""
    ladder = lesson.ladder_for(op)
    ex = importlib.import_module(f"perfkit.kernels.{'' if op == 'gemm' else 'norm.'}{op}").EXAMPLE_PROBLEM
    checked = 0
    for v in ladder:
        if v.oracle:
            continue
        card = lesson.recorded(op, ex, v, estimate=False)
        text = str(card)
        if not card.found:
            assert "No record" in card.verdict() and "faster" not in card.verdict()
            continue
        if np.isfinite(card.x_prev) and card.prev_across:  # two commits' code: the factor, no direction
            assert f"x{card.x_prev:.2f} against {card.prev_label}" in text and "across code versions" in text
            for other in {"faster than", "slower than", "about as fast as"}:
                assert f"{other} {card.prev_label}" not in text
            checked += 1
        elif np.isfinite(card.x_prev):
            word = "faster than" if card.x_prev >= 1.02 else "slower than" if card.x_prev <= 0.98 else "about as fast as"
            assert f"{word} {card.prev_label}, x{card.x_prev:.2f}" in text, text
            for other in {"faster than", "slower than", "about as fast as"} - {word}:
                assert f"{other} {card.prev_label}" not in text
            checked += 1
        if np.isfinite(card.of_oracle):
            assert f"{card.of_oracle:.1%} of the oracle's speed" in text
        if card.changed_since:
            assert "changed since" in card.verdict()
    assert checked >= 3  # the H100 records cover every one of these ladders


def test_verdict_names_what_the_anatomy_changed():
    class R:  # the fields of an anatomy report the verdict reads
        def __init__(self, regs, occ, shared, spills=0):
            self.registers, self.shared_bytes = regs, shared
            self.spill_store_bytes = self.spill_load_bytes = spills
            self.occupancy = type("O", (), {"ratio": occ, "limiter": "registers"})()

    assert lesson.anatomy_changes(R(64, 1.0, 8192), R(128, 0.5, 8192)) == \
        "occupancy 100% -> 50% (limited by registers), registers 64 -> 128"
    assert lesson.anatomy_changes(R(64, 1.0, 8192), R(64, 1.0, 8192)) == ""
    assert "spilled bytes 0 -> 16" in lesson.anatomy_changes(R(64, 1.0, 0), R(255, 1.0, 0, spills=8))
    card = lesson.RungCard(op="gemm", problem="p", variant="v", label="04 v", metric="tflops", found=True,
                           median_s=2.0, prev_median_s=1.0, x_prev=0.5, prev_label="03 u", gpu="H100")
    card.anatomy_note = lesson.anatomy_changes(R(64, 1.0, 8192), R(128, 0.5, 8192))
    assert "slower than 03 u, x0.50" in str(card) and "occupancy 100% -> 50%" in str(card)


def test_a_card_with_no_record_still_shows_the_estimate():
    from perfkit.kernels import saxpy

    card = lesson.recorded("saxpy", saxpy.EXAMPLE_PROBLEM, "grid_stride", root=Path("/nonexistent-records"))
    assert not card.found and np.isfinite(card.estimate_s) and card.estimate_s > 0
    text = str(card)
    assert "no record" in text and "model estimate" in text and card.model_gpu == "h100-sxm"
    assert "No record" in card.verdict() and "model estimates" in card.verdict()


def test_a_record_of_changed_code_is_compared_with_that_codes_estimate(monkeypatch):
    """A card beside a record of a kernel that changed since shows the estimate of the kernel
    that was measured (rebuilt from its commit) and today's, says which is which, and its ratio
    is of the same code."""
    from perfkit.kernels.norm import softmax as sm

    calls = []

    def then(op, v, problem, commit, key):
        calls.append((op, v.name, commit))
        return 123e-6, f"estimate of the kernel at {commit[:7]}"

    def then_detail(op, v, problem, commit, key):  # the card's own code: seconds with its bound and legs
        t, note = then(op, v, problem, commit, key)
        return t, "dram", {"dram": 100e-6, "issue": 20e-6}, "estimate", note

    monkeypatch.setattr(lesson.cards, "estimate_then", then)  # where recorded() looks them up
    monkeypatch.setattr(lesson.cards, "estimate_then_detail", then_detail)
    monkeypatch.setattr(lesson.cards, "source_changed_since", lambda v, c: True)
    card = lesson.recorded("softmax", sm.EXAMPLE_PROBLEM, "fused", estimate=True)
    assert card.found and card.changed_since
    # this rung's measured code, then the rung before's (its factor is compared like for like)
    assert calls == [("softmax", "fused", card.commit), ("softmax", "naive", card.commit)]
    assert card.prev_estimate_s == pytest.approx(123e-6)
    assert card.ratio == pytest.approx(card.median_s / 123e-6)
    text = str(card)
    assert f"model estimate on {card.model_gpu} of the kernel measured (at {card.commit[:7]})" in text
    assert f"model estimate on {card.model_gpu} of today's kernel" in text and "(same code)" in text
    row = card.as_dict()
    assert row["estimate"] == lesson.fmt_seconds(123e-6) and row["estimate, today's code"] != "same"


def test_a_diff_shows_the_constants_and_paths_a_configuration_selects():
    """no_bank_conflicts differs from vectorized only by compile-time constants: the diff names
    them and marks the branch each build takes; a rewrite is folded behind what it touches."""
    L = {v.name: v for v in gemm.LADDER}
    d = lesson.source_diff(L["vectorized"], L["no_bank_conflicts"], gemm.EXAMPLE_PROBLEM)
    assert "+#   SWIZZLE = True" in d.text and "-#   SWIZZLE = False" in d.text
    assert "taken here (SWIZZLE=True)" in d.text and "not taken here (SWIZZLE=False)" in d.text
    assert "SWIZZLE False -> True" in d.title and d.open
    tc = lesson.source_diff(L["tc_ldmatrix"], L["tc_cp_async"], gemm.EXAMPLE_PROBLEM)
    assert "STAGES 1 -> 3" in tc.title and "taken here (STAGES=3)" in tc.text
    long = lesson.source_diff(L["double_buffer"], L["index32"], gemm.EXAMPLE_PROBLEM)
    assert not long.open and "long diff, folded" in long.title and "gemm_simt" in long.title
    assert lesson._const_eval("STAGES > 1 and not EPI", {"STAGES": 3, "EPI": False}) is True
    for expr in ("i < N", "__import__('os')", "f(STAGES)", "STAGES.real"):
        assert lesson._const_eval(expr, {"STAGES": 3, "N": 4}) is None  # only constants are evaluated


def test_no_card_of_any_ladder_shows_another_ops_record():
    """Every op's cards, rendered from one table mixing every op's records (as a notebook may
    pass), show the same records as from the op's own table."""
    every = results.load(latest=False)
    shown = 0
    for op in sorted(set(every["op"]) - {"roofline", "workload"}):
        ladder = lesson.ladder_for(op)
        own = lesson.records(op, ladder)
        for problem in sorted(set(own["problem"])):
            for v in ladder:
                mixed = lesson.recorded(op, problem, v, ladder=ladder, table=every, estimate=False)
                alone = lesson.recorded(op, problem, v, ladder=ladder, estimate=False)
                assert mixed.found == alone.found, (op, problem, v.label)
                if alone.found:
                    assert mixed.median_s == alone.median_s and mixed.path == alone.path, (op, problem, v.label)
                    assert f"/{op}/" in mixed.path.replace("\\", "/")
                    shown += 1
    assert shown > 50


def test_a_rung_before_with_no_record_gives_way_to_the_nearest_that_has_one():
    """The H100 records of 7c7b2e0 predate index32: warptile's card among them compares with
    double_buffer, the nearest rung before it with a record, says so, and names a faster rung
    before it where there is one."""
    h100 = "NVIDIA H100 80GB HBM3"  # later runs (all rungs, one commit) have no such gap
    first = lesson.records("gemm", lesson.ladder_for("gemm"), gpu=h100, latest=False)
    first = first[first["commit"].astype(str).str.startswith("7c7b2e0")]
    if first.empty:
        pytest.skip("no H100 records of 7c7b2e0 in data/results")
    card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, "warptile", estimate=False, gpu=h100, table=first)
    assert card.found and card.prev_label == "08 double_buffer" and "09 index32" in card.prev_note
    assert np.isfinite(card.x_prev) and card.x_prev < 1 and "slower than 08 double_buffer" in card.verdict()
    auto = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, "autotuned", estimate=False, gpu=h100, table=first)
    assert auto.prev_label == "10 warptile" and "Still slower than 08 double_buffer" in auto.verdict()


def test_an_explanation_words_only_the_estimate_it_shows():
    """Where the record's kernel changed since, the card compares the measured time with the
    estimate of the code measured: the bound, the legs and their sum in its words are of that
    same estimate, never of today's kernel (whose legs can sum to less than the estimate shown)."""
    today = {"latency": 81.7e-6, "issue": 79.2e-6, "dram": 77.8e-6, "fp32": 39.4e-6}
    then = {"latency": 520e-6, "dram": 212e-6, "issue": 149e-6}
    c = lesson.RungCard(op="layernorm_bwd", problem="p", variant="multirow", label="05 multirow", metric="gbps",
                        found=True, median_s=1.51e-3, rate=133.0, gpu="H100", commit="7c7b2e0" + "0" * 33,
                        changed_since=True, estimate_s=154e-6, bound="issue", legs=today, estimate_kind="estimate",
                        estimate_then_s=768e-6, bound_then="latency", legs_then=then, estimate_then_kind="estimate")
    e = c.explanation()
    assert "768 µs estimated, bound by latency" in e and "bound by issue" not in e
    assert f"sum of every leg ({lesson.fmt_seconds(sum(then.values()))})" in e
    assert f"{lesson.fmt_seconds(c.median_s - sum(then.values()))} per launch" in e
    for v in today.values():
        assert lesson.fmt_seconds(v) not in e, e  # today's legs belong to another estimate
    assert "within 2x of the bound" not in e  # dram 212 µs is not within 2x of latency 520 µs
    assert "768 µs, bound by latency; legs: latency 520 µs" in str(c)  # the estimate measured, with its legs
    c.changed_since = False  # today's code measured: today's estimate and legs
    c.median_s = 160e-6
    e = c.explanation()
    assert "bound by issue" in e and "issue leg (79.2 µs) is within 2x" in e


_H100 = "NVIDIA H100 80GB HBM3"


def _h100_card(op, name, **kw):
    ex = importlib.import_module(f"perfkit.kernels.norm.{op}").EXAMPLE_PROBLEM
    card = lesson.recorded(op, ex, name, gpu=_H100, **kw)
    if not (card.found and card.changed_since and (card.commit or "").startswith("7c7b2e0")):
        pytest.skip(f"no H100 record of {op} {name} at 7c7b2e0 whose kernel changed since")
    return card


def test_a_real_card_of_changed_code_words_the_rebuilt_estimate():
    """layernorm_bwd multirow's H100 record is of 7c7b2e0's kernel: the explanation's sum of legs
    is of the estimate shown (768 µs), so it is no smaller than that estimate."""
    card = _h100_card("layernorm_bwd", "multirow")
    if not np.isfinite(card.estimate_then_s) or not card.legs_then:
        pytest.skip(f"the kernel at {card.commit[:7]} could not be rebuilt: {card.estimate_then_note}")
    e = card.explanation()
    total = sum(float(v) for v in card.legs_then.values() if v)
    assert total >= card.estimate_then_s
    if "sum of every leg" in e:
        assert f"sum of every leg ({lesson.fmt_seconds(total)})" in e
    mentioned = set(re.findall(r"\(([\d.]+ (?:µs|ms|s|ns))\)", e))
    shown = {lesson.fmt_seconds(float(v)) for v in card.legs_then.values() if v} | {lesson.fmt_seconds(total)}
    assert mentioned <= shown, (mentioned - shown, e)


@pytest.mark.parametrize("op, name", [("layernorm_bwd", "multirow"), ("layernorm_bwd", "tuned"),
                                      ("batchnorm", "split")])
def test_a_factor_across_code_versions_says_so(op, name):
    """A record of 7c7b2e0 whose kernel changed since, compared with a rung recorded at another
    commit: the factor is kept, but the words say it is across code versions, never a plain
    'slower than' / 'Still slower than' about today's kernels."""
    card = _h100_card(op, name, estimate=False)
    v, text = card.verdict(), str(card)
    assert "Still slower than" not in v
    pairs = [(card.prev_label, card.prev_commit), (card.best_before_label, card.best_before_commit)]
    across = [(lab, c) for lab, c in pairs if lab and c and not c.startswith("7c7b2e0")]
    assert across, "the H100 records of this card's rungs before are all of 7c7b2e0"
    for lab, c in across:
        assert f"({lab} recorded at {c[:7]}; this rung's record is of 7c7b2e0, its kernel changed since)" in v, v
        assert f"slower than {lab}" not in v and f"faster than {lab}" not in v
    if card.prev_across:
        assert f"x{card.x_prev:.2f} against {card.prev_label}" in v
        assert f"x{card.x_prev:.2f} vs {card.prev_label}" in text and card.prev_across in text
        assert card.prev_across in card.as_dict()["x prev vs"]


def test_a_factor_at_one_commit_is_stated_plainly():
    """Two records of one commit compare the same code version: the plain direction, no note."""
    c = lesson.RungCard(op="gemm", problem="p", variant="v", label="05 v", metric="tflops", found=True, gpu="H100",
                        median_s=2.0, prev_median_s=1.0, x_prev=0.5, prev_label="04 u", commit="a" * 40,
                        prev_commit="a" * 40, changed_since=True, best_before_label="02 w", best_before_s=0.5,
                        best_before_commit="a" * 40)
    assert "slower than 04 u, x0.50" in c.verdict() and "Still slower than 02 w" in c.verdict()
    assert "across code versions" not in c.verdict() and c.as_dict()["x prev vs"] == "04 u"
    c.prev_commit = c.best_before_commit = "b" * 40  # today's code of the rungs before, this one's old
    assert "across code versions" in c.verdict() and "slower than 04 u" not in c.verdict()
    c.changed_since = False  # neither kernel changed since: both records measured today's code
    assert "slower than 04 u, x0.50" in c.verdict()


def test_card_table_names_the_rung_x_prev_is_against():
    """warptile's 7c7b2e0 card compares with double_buffer (index32 has no record there): the
    table says so in its own column."""
    first = lesson.records("gemm", lesson.ladder_for("gemm"), gpu=_H100, latest=False)
    first = first[first["commit"].astype(str).str.startswith("7c7b2e0")]
    if first.empty:
        pytest.skip("no H100 records of 7c7b2e0 in data/results")
    cards = [lesson.recorded("gemm", gemm.Problem(1024, 1024, 1024), n, estimate=False, gpu=_H100, table=first)
             for n in ("double_buffer", "warptile")]
    tab = lesson.card_table(cards)
    row = tab.set_index("rung")["x prev vs"]
    assert row["10 warptile"] == "08 double_buffer (09 index32 has no record)"
    assert row["08 double_buffer"] == "07 no_bank_conflicts"
    assert "x prev vs" in lesson.card_table(cards, style=True).to_html()


def test_the_rungs_first_recorded_in_a_gpus_newest_run_are_read_from_the_records():
    """Notebook 06's answer to "which kinds of kernel will the model miss": exactly the (op,
    problem, rung) whose first record on any GPU is of that GPU's newest run (read here from the
    JSON files, not through perfkit.results), each with the validate table's ratio, folded."""
    import glob

    docs = []
    for path in glob.glob(str(Path(results.RESULTS_DIR) / "*" / "*" / "*.json")):
        d = json.loads(Path(path).read_text())
        if not d.get("simulated") and (d.get("rung") or 0) > 0:
            docs.append((d["provenance"]["utc"], d["provenance"]["gpu"], str(d["provenance"]["git_commit"]),
                         d["op"], d["problem"], d["variant"]))
    if not docs:
        pytest.skip("no GPU records")
    docs.sort()
    gpu = docs[-1][1]
    newest = [c for _, g, c, *_ in docs if g == gpu][-1]

    def firsts(anywhere):
        seen, want = set(), set()
        for utc, g, c, op, prob, var in docs:
            if (op, prob, var) not in seen and (anywhere or g == gpu):
                seen.add((op, prob, var))
                if g == gpu and c == newest:
                    want.add((op, prob, var))
        return want

    want, mine = firsts(True), firsts(False)
    assert want <= mine
    rows = [{"kind": "rung", "_commit": newest, "op": op, "problem": prob, "rung": f"99 {var}", "ratio": 1.0}
            for op, prob, var in mine] + [{"kind": "rung", "_commit": newest, "op": "gemm", "problem": "p",
                                           "rung": "99 never_first", "ratio": 9.0}]
    for anywhere, expect in ((True, want), (False, mine)):
        commit, ratios = lesson.first_recorded(pd.DataFrame(rows), gpu, anywhere=anywhere)
        assert commit == newest
        assert {(op, prob, r.split(" ", 1)[1]) for op, prob, r in ratios.index} == expect
    # the answer: the rungs no GPU had recorded before; where there are none (the H100's run of
    # 2026-11-28 recorded rungs the H200 had recorded first), this GPU's own first records, said so
    folded = lesson.first_recorded_answer(pd.DataFrame(rows), gpu)._repr_html_()
    shown = want or mine
    assert folded.startswith("<details>") and f"{lesson.plural(len(shown), 'rung')} (per problem)" in folded
    import html as _html
    summary = re.search(r"<summary>(.*?)</summary>", folded).group(1)
    assert summary.count(_html.escape(gpu)) == 1, summary  # the GPU named once ("before its newest run")
    assert f"within 25% of the record ({len(shown)})" in folded
    assert ("No rung had its first record on any GPU" in folded) == (not want)


def test_a_card_shows_its_own_gpus_counters_and_another_gpus_change_apart():
    """Issue 42: a recorded card shows the Nsight Compute row of the shown GPU where one exists.
    GEMM 13 tc_vector's H100 record (6bbc424) has its own H100 row, but no row of 12 tensor_core
    of today's code beside it: the card showed the H200's rows of both instead.  Now the table is
    the H100's row, and the H200's change against the rung before is said under it, named."""
    for v in [x for x in gemm.LADDER if not x.oracle]:
        for p in {gemm.EXAMPLE_PROBLEM.label: gemm.EXAMPLE_PROBLEM, "f16": gemm.Problem(4096, 4096, 4096, "float16")}.values():
            card = lesson.recorded("gemm", p, v.name, estimate=False)
            if not card.found:
                continue
            own = [x for x in lesson.ncu.all_counters("gemm", card.problem, v.name, card.gpu)
                   if lesson.ncu.same_code(v, x.commit, card.commit)]
            if own:
                assert card.counters is not None and card.counters.gpu == card.gpu, (v.name, card.counters)
            if card.counters_pair:
                c2, p2 = card.counters_pair
                h = card._repr_html_()
                assert card.prev_counters is None and c2.gpu != card.gpu
                assert (f"{card.gpu} has no Nsight Compute row of {card.prev_label} beside this rung&#x27;s; "
                        f"{c2.gpu}&#x27;s rows hold both") in h


def test_the_prompt_names_every_leg_an_answer_can_name():
    """The GEMM naive card answers "bound by lsu", a word its prompt's list of resources did not
    have: the prompt lists every leg of the model by the name the card prints."""
    from perfkit.model.equations import LEGS

    text = str(lesson.predict_prompt(None, gemm.LADDER[1], gemm.EXAMPLE_PROBLEM.label))
    for leg in LEGS:
        assert f"({leg}" in text or f", {leg}" in text or f" {leg})" in text, (leg, text)


def test_card_table_prints_rates_without_an_exponent():
    """A bandwidth ladder's summary printed 1643 GB/s as "1.64e+03": the table prints a rate as
    the card does (three digits, no exponent)."""
    card = lesson.RungCard(op="softmax", problem="p", variant="fused", label="02 fused", metric="gbps",
                           found=True, median_s=81.7e-6, rate=1643.2)
    slow = lesson.RungCard(op="softmax", problem="p", variant="naive", label="01 naive", metric="gbps",
                           found=True, median_s=1.61e-3, rate=83.14)
    html_ = lesson.card_table([slow, card], style=True).to_html()
    assert ">1643<" in html_ and ">83.1<" in html_ and "e+0" not in html_


def test_record_pivot_sorts_by_rung_and_marks_records_of_changed_code():
    """Notebook 02's table of rates by rung and problem: rows by rung number (index32, recorded
    at one problem only, between 08 and 10, not last), and a cell whose record is of a kernel
    that changed since its commit marked "*", the caption saying what "*" means."""
    rec = lesson.records("gemm", gpu=_H100)
    if rec.empty or not rec["commit"].astype(str).str.startswith("7c7b2e0").any():
        pytest.skip("no H100 records of 7c7b2e0 in data/results")
    sty = lesson.record_pivot(rec, "tflops", caption="TFLOP/s")
    idx = sty.data.index.tolist()
    assert idx.index("09 index32") == idx.index("08 double_buffer") + 1
    nums = [int(lab[:2]) for lab in idx if lab[:2].isdigit()]
    assert nums == sorted(nums) and idx[:2] == ["peer torch", "peer triton"]
    changed = lesson.changed_since_recorded(rec)
    assert changed.any() and not changed.all()
    html_ = sty.to_html()
    cols = sty.data.columns.tolist()
    for (lab, prob, val), ch in zip(rec[["label", "problem", "tflops"]].itertuples(index=False), changed):
        r, c = idx.index(lab), cols.index(prob)
        cell = re.search(rf'class="data row{r} col{c}" >([^<]*)<', html_).group(1)
        assert cell == lesson.fmt_rate(val) + ("*" if ch else ""), (lab, prob, cell)
    assert sty.data.dtypes.map(lambda d: d.kind == "f").all()  # the numbers stay numbers
    assert sty.caption == "TFLOP/s; " + lesson.CHANGED_MARK_NOTE
    same = rec[~changed.to_numpy()]
    assert lesson.record_pivot(same, "tflops", caption="TFLOP/s").caption == "TFLOP/s"
    # medians in their unit (notebook 03 printed 2.1e-05): fmt_seconds, never an exponent
    times = lesson.record_pivot(rec, "median_s", caption="median").to_html()
    assert "e-0" not in times and "e+0" not in times and " µs" in times and " ms" in times


def test_changed_since_recorded_marks_rewritten_kernels_of_old_records():
    """Notebook 04's best-rung table marks a record of a kernel rewritten since (layernorm_bwd
    tuned at 7c7b2e0), not one of today's code (6bbc424) nor an oracle's.  The naive rung's row
    statistics were rewritten after 6bbc424 (summed about the row's first value): its record
    there is of older code, and marked."""
    rec = lesson.records("layernorm_bwd", gpu=_H100, latest=False)
    old = rec[rec["commit"].astype(str).str.startswith("7c7b2e0")]
    if old.empty:
        pytest.skip("no H100 records of 7c7b2e0 in data/results")
    ch = lesson.changed_since_recorded(rec).to_numpy()
    by = {(v, str(c)[:7]): x for v, c, x in zip(rec["variant"], rec["commit"], ch)}
    assert by[("tuned", "7c7b2e0")] and by[("multirow", "7c7b2e0")]
    assert not any(x for (v, c), x in by.items() if (c == "6bbc424" and v != "naive") or v == "oracle")
    assert by.get(("naive", "6bbc424"), True)


def test_answers_shown_before_a_prediction_are_found_outside_folds_only():
    """The check behind 'predict, then reveal' (tests/test_notebooks.py runs it over every executed
    notebook): a bare figure or a GPU's name outside <details> above the prompt fails; folded ones
    and printed lines do not."""
    gpu = "NVIDIA H100 80GB HBM3"
    ok = [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": f"<details><summary>x</summary><details>"
                                                             f"<p>{gpu}</p></details>{gpu}</details>"}},
        {"output_type": "stream", "name": "stdout", "text": f"records shown: {gpu}"}]},
          {"cell_type": "markdown", "source": gpu}]
    assert lesson.answers_shown_before(ok, 2, [gpu]) == []
    bad = ok + [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": f"<table><caption>{gpu}</caption></table>"}}]},
                {"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}]}]
    assert lesson.answers_shown_before(bad, 4, [gpu]) == [f"cell 2: names {gpu} outside a fold", "cell 3: a figure"]
    assert lesson.answers_shown_before(bad, 2, [gpu]) == []


def test_values_that_answer_a_prediction_are_found_outside_folds_printed_lines_included():
    """values_shown_before (notebook_checks.ANSWER_VALUES, for 01.predict_saxpy): a value as written
    to 0-2 decimals, outside <details>, in HTML or a printed line, is found; folded, or only a
    longer number that contains its digits, it is not."""
    folded = {"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": "<details><summary>t</summary><td>295.87</td></details>"}},
        {"output_type": "stream", "name": "stdout", "text": "from 0.97 to 1.01 over 16 rungs; 1295.9 us, 2295.87, 296.81"}]}
    assert lesson.values_shown_before([folded], 1, [295.872, 296.768]) == []
    shown = [folded, {"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": "<table><td>grid_stride</td><td>295.87</td></table>"}},
        {"output_type": "stream", "name": "stdout", "text": "grid_stride took 297 us"}]}]
    assert lesson.values_shown_before(shown, 2, [295.872, 296.768]) == ["cell 1: 295.87", "cell 1: 297"]
    assert lesson.values_shown_before(shown, 1, [295.872]) == []


def test_every_graded_prediction_is_held_to_predict_then_reveal():
    """Each exercise named NN.predict_* is checked over its executed notebook by one of
    notebook_checks' rules: the generic one (PREDICTION), ANSWERED_BY or ANSWER_VALUES; 01's values
    include the time its grader checks against."""
    import notebook_checks as nc
    from perfkit import exercises

    graded = [n for n in exercises.EXERCISES if ".predict_" in n]
    assert graded, "no graded prediction registered"
    for n in graded:
        src = f'grade("{n}", my_prediction)'
        assert nc.GRADED_PREDICTION.search(src).group(1) == n
        assert nc.PREDICTION.search(src) or n in nc.ANSWERED_BY or n in nc.ANSWER_VALUES, n
    vals = nc.saxpy_answers_us()
    assert any(abs(v - 287.0) < 0.5 for v in vals), vals  # Nsight Compute's H100 time, data/ncu (2026-11-23)


def test_a_graded_prediction_comes_before_the_cards_that_answer_it_even_folded():
    """ANSWERED_BY (tests/notebook_checks.py, run over every executed notebook): warptile's card,
    folded as the notebook renders it, above 02.predict_order answers it, no_bank_conflicts' alone
    does not; any softmax card above 04.predict_softmax answers that one."""
    from notebook_checks import ANSWERED_BY, answered_before

    def card(op, problem, name):
        html_ = lesson.answer(lesson.recorded(op, problem, name, estimate=False))._repr_html_()
        assert html_.startswith("<details>")  # folded: answers_shown_before lets it pass
        return {"cell_type": "code", "source": "", "outputs": [
            {"output_type": "display_data", "data": {"text/html": html_, "text/plain": "<Rendered>"}}]}

    prompt = {"cell_type": "code", "source": 'grade("02.predict_order", None)', "outputs": []}
    cells = [card("gemm", gemm.EXAMPLE_PROBLEM, "no_bank_conflicts"), prompt,
             card("gemm", gemm.EXAMPLE_PROBLEM, "warptile")]
    assert answered_before(cells, 1, ANSWERED_BY["02.predict_order"]) == []
    late = [cells[0], cells[2], prompt]
    assert [f.split(":")[0] for f in answered_before(late, 2, ANSWERED_BY["02.predict_order"])] == ["cell 1"]
    sm = [card("softmax", softmax.EXAMPLE_PROBLEM, softmax.LADDER[1].name), prompt]
    assert answered_before(sm, 1, ANSWERED_BY["04.predict_softmax"]) != []


def test_fold_figure_hides_a_figure_until_opened():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    h = lesson.fold_figure(ax, "the bars")._repr_html_()
    assert h.startswith("<details><summary>the bars</summary><img src='data:image/png;base64,")
    assert not plt.fignum_exists(fig.number)  # closed: not drawn a second time under the cell


def test_counters_are_the_ncu_rows_and_the_moved_counter_is_named():
    """A card's counters equal the Nsight Compute table's row (summed over a rung's launches), the
    change is against the rung before in the same table, and the sentence names the counter that
    moved most and whether the profiled time followed."""
    import glob

    def row(name):  # from the newest H200 table that has the rung (a newer one may profile other rungs)
        for path in sorted(glob.glob(str(Path(results.__file__).resolve().parents[1] / "data/ncu/h200-*.csv")))[::-1]:
            t = pd.read_csv(path)
            t = t[(t.op == "gemm") & (t.problem == gemm.EXAMPLE_PROBLEM.label) & (t.rung.str.split().str[-1] == name)]
            if len(t):
                return t.iloc[0]
    cur = lesson.counters("gemm", gemm.EXAMPLE_PROBLEM.label, "no_bank_conflicts", "NVIDIA H200")
    prev = lesson.counters("gemm", gemm.EXAMPLE_PROBLEM.label, "vectorized", "NVIDIA H200")
    r, q = row("no_bank_conflicts"), row("vectorized")
    assert cur.get("shared_bank_conflicts") == r.shared_bank_conflicts
    assert cur.get("dram_bytes") == r.dram_read_bytes + r.dram_write_bytes
    assert cur.time_s == pytest.approx(r.time_us * 1e-6)
    from perfkit.lesson import ncu as C

    why = C.moved(cur, prev)
    assert "shared bank conflicts" in why and f"x{q.time_us / r.time_us:.2f}" in why and "not the limit" in why
    assert lesson.counters("gemm", gemm.EXAMPLE_PROBLEM.label, "no_such_rung", "NVIDIA H200") is None
    card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, "no_bank_conflicts", gpu="NVIDIA H200", estimate=False)
    assert card.counters.get("shared_wavefronts") == r.shared_wavefronts and "Nsight Compute on" in card._repr_html_()


def _counters(gpu, t_s, **vals):
    from perfkit.lesson.ncu import Counters

    return Counters("gemm", "x", "p", gpu, "abc1234", "t.csv", 1, t_s, vals)


def test_a_counter_table_names_the_rung_befores_row_where_it_is_of_another_run():
    """GEMM 04 blocktile_1d's H200 card named its row's table (h200-2026-11-26.csv, ed6ffd5) and set
    03 smem_tiling's counters beside it, which come from h200-2026-11-27.csv (6ba0514): the same
    code, but another run, unnamed.  The rung before's table is named where it differs, in the
    card's table and in the line where another GPU's rows hold both (19 simt_wide on the H100)."""
    from dataclasses import replace

    from perfkit.lesson.ncu import counters_html

    cur = replace(_counters("NVIDIA H200", 15.4e-3, shared_wavefronts=2.49e9), table="h200-2026-11-26.csv",
                  commit="ed6ffd5aaaa")
    prev = replace(_counters("NVIDIA H200", 17.5e-3, shared_wavefronts=3.38e9), table="h200-2026-11-27.csv",
                   commit="6ba0514bbbb")
    head = re.search(r"<b>(.*?)</b>", counters_html(cur, prev, prev_label="03 smem_tiling")).group(1)
    assert "h200-2026-11-26.csv, commit ed6ffd5" in head
    assert "against 03 smem_tiling (its row: h200-2026-11-27.csv, commit 6ba0514)" in head
    same = re.search(r"<b>(.*?)</b>", counters_html(cur, replace(prev, table=cur.table, commit=cur.commit),
                                                    prev_label="03 smem_tiling")).group(1)
    assert same.endswith("against 03 smem_tiling") and same.count("h200-2026-11-26.csv") == 1
    card = lesson.RungCard(op="gemm", problem="p", variant="simt_wide", label="19 simt_wide", metric="tflops",
                           found=True, median_s=2.95e-3, gpu="NVIDIA H100 80GB HBM3", prev_label="11 autotuned")
    card.counters_pair = (replace(prev, table="h200-2026-11-27.csv"), replace(cur, table="h200-2026-11-26.csv"))
    assert ("(the same code, h200-2026-11-27.csv; 11 autotuned&#x27;s row: h200-2026-11-26.csv, commit ed6ffd5)"
            in card._pair_html())
    card.counters_pair = (prev, replace(cur, table=prev.table))
    assert "(the same code, h200-2026-11-27.csv):" in card._pair_html()


def test_a_counters_change_is_printed_without_an_exponent():
    """Shared wavefronts 384 -> 1.86 M was printed "x4.84e+03" in notebook 04's counter tables."""
    from perfkit.lesson.ncu import counter_rows

    rows = counter_rows(_counters("NVIDIA H100 80GB HBM3", 1e-4, shared_wavefronts=1.86e6),
                        _counters("NVIDIA H100 80GB HBM3", 2e-4, shared_wavefronts=384))
    change = next(r["change"] for r in rows if r["counter"] == "shared wavefronts")
    assert change == "x4844" and "e+" not in change


def test_a_card_shows_the_largest_stall_reasons_beside_the_rung_befores(tmp_path):
    """A table with stall columns (from 2026-11-28 on) gives a card its three largest reasons, each
    with the rung before's figure for that reason; the issuing warp (``selected``) is not a stall,
    and a table without the columns adds no row."""
    from perfkit.lesson.ncu import counter_rows

    cur = _counters("G", 1e-4, warp_instructions=10.0, stall_long_scoreboard=0.2, stall_barrier=1.5,
                    stall_selected=1.0, stall_mio_throttle=0.9, stall_wait=0.4, stall_math_pipe_throttle=float("nan"))
    prev = _counters("G", 2e-4, warp_instructions=10.0, stall_barrier=0.5, stall_wait=0.4)
    rows = [r for r in counter_rows(cur, prev) if r["counter"].startswith("stalled")]
    assert [r["counter"] for r in rows] == ["stalled: barrier, warps per issue",
                                            "stalled: shared-memory queue (MIO throttle), warps per issue",
                                            "stalled: fixed latency (wait), warps per issue"]
    assert rows[0]["this rung"] == "1.50" and rows[0]["rung before"] == "0.50" and rows[0]["change"] == "x3"
    assert rows[1]["rung before"] == "—" and rows[1]["change"] == ""
    assert not [r for r in counter_rows(prev, None) if r["counter"].startswith("stalled") and "barrier" not in r["counter"]
                and "wait" not in r["counter"]]
    assert not [r for r in counter_rows(_counters("G", 1e-4, warp_instructions=1.0), None) if r["counter"].startswith("stalled")]


def test_a_rungs_stall_columns_are_the_time_weighted_mean_of_its_launches(tmp_path, monkeypatch):
    from perfkit.lesson import ncu as C

    t = tmp_path / "t.csv"
    t.write_text("op,problem,rung,kernel,time_us,warp_instructions,stall_barrier,commit,gpu\n"
                 "gemm,m=1,05 x,a,1.0,10,1.0,abc1234,NVIDIA H200\n"
                 "gemm,m=1,05 x,b,3.0,10,2.0,abc1234,NVIDIA H200\n")
    monkeypatch.setattr(C, "_tables", lambda key: ((str(t), "abc1234"),))
    C.all_counters.cache_clear()
    try:
        c = C.counters("gemm", "m=1", "x", "NVIDIA H200")
        assert c.get("stall_barrier") == pytest.approx(1.75) and c.get("stall_wait") != c.get("stall_wait")
    finally:
        C.all_counters.cache_clear()


def test_the_moved_counter_is_weighed_as_time_at_the_gpus_peak_rates():
    """Unlike counters are compared by the time their change takes at the GPU's peak rate for that
    level (a ratio alone names a counter that went from 384 to 1.86 M); among near-equal changes,
    the one of the largest factor (bank conflicts, not the wavefronts they are part of); a largest
    change under a tenth of the time explains nothing."""
    from perfkit import specs
    from perfkit.lesson.ncu import moved

    h100 = "NVIDIA H100 80GB HBM3"
    s = specs.get("h100-sxm")
    prev = _counters(h100, 0.55e-3, shared_wavefronts=384.0, dram_bytes=1.2e9)
    cur = _counters(h100, 0.25e-3, shared_wavefronts=1.86e6, dram_bytes=0.3e9)
    text = moved(cur, prev)
    at_peak = lesson.fmt_seconds(0.9e9 / s.dram_bw)
    assert text.startswith(f"The counter that moved most, weighed as time at {h100}'s peak rates: DRAM bytes 1.2 GB -> 300 MB")
    assert f"the change is {at_peak} of DRAM time" in text
    # 269 us at peak of the 300 us saved: at least half, so the time followed it
    assert f"the time followed it (at peak that is {at_peak} of the 300 µs saved); DRAM bytes was part of what bound" in text
    # a change a little larger than the time saved: said as more than it, not "of" it
    over = moved(_counters(h100, 0.3e-3, dram_bytes=0.3e9), _counters(h100, 1.1e-3, dram_bytes=3.6e9))
    assert "the time followed it (at peak that alone is" in over and " of the 800 µs saved" not in over
    assert "more than the 800 µs saved); DRAM bytes was part of what bound" in over
    # the same counters with more time saved: the change explains a fifth, and occupancy is named
    part = moved(_counters(h100, 0.25e-3, dram_bytes=0.3e9, achieved_occupancy_pct=60.0),
                 _counters(h100, 1.55e-3, dram_bytes=1.2e9, achieved_occupancy_pct=20.0))
    assert "so most of the change is what these counts do not show: achieved occupancy 20% -> 60%" in part
    flat = moved(_counters(h100, 1.0e-3, dram_bytes=1.02e9, warp_instructions=5e6),
                 _counters(h100, 1.01e-3, dram_bytes=1.0e9, warp_instructions=5e6))
    assert "the time moved less than 10%, and no counter's change is worth a tenth of it at peak" in flat
    # more issue work at peak than the time lost: most of it overlapped other work; an occupancy
    # that moved against the time is not offered as the explanation
    over = moved(_counters(h100, 37.7e-6, warp_instructions=28.2e6, achieved_occupancy_pct=80.0),
                 _counters(h100, 33.0e-6, warp_instructions=13.3e6, achieved_occupancy_pct=60.0))
    assert "at peak that alone is" in over and "lost, so most of it overlapped other work" in over and "occupancy" not in over
    # the same wavefronts' change at one SM-clock each is far under the DRAM change: never named
    assert 1.86e6 / (s.sm_count * s.boost_clock_mhz * 1e6) < 0.9e9 / s.dram_bw
    tie = moved(_counters(h100, 5.03e-3, shared_wavefronts=441e6, shared_bank_conflicts=3.4e6),
                _counters(h100, 5.19e-3, shared_wavefronts=777e6, shared_bank_conflicts=340e6))
    assert "shared bank conflicts 340 M -> 3.4 M" in tie and "the time hardly moved, so shared bank conflicts was not" in tie
    small = moved(_counters(h100, 111e-3, dram_bytes=4.34e9), _counters(h100, 275e-3, dram_bytes=8.49e9))
    assert "of the 164 ms saved, under a tenth, so none of these counts explains it" in small
    other = moved(_counters("GPU X", 1e-3, dram_bytes=1e9), _counters("GPU X", 2e-3, dram_bytes=2e9))
    assert "h100-sxm's (its own are not in devices.yaml)" in other


def test_a_card_without_a_row_of_its_code_takes_another_gpus_and_names_it():
    """Where the record's GPU has no Nsight Compute row of the record's code and another recorded
    GPU has one of the same code, the card shows that GPU's row (its delta against the rung before
    on that GPU too), names the GPU and quotes its own record of the rung there."""
    from perfkit.lesson.ncu import same_code

    ladder = [v for v in gemm.LADDER if not v.oracle]
    seen = 0
    for v in ladder:
        card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, v.name, estimate=False)
        c = card.counters
        if not card.found or c is None or c.gpu == card.gpu:
            continue
        seen += 1
        assert same_code(v, c.commit, card.commit)
        mine = [r for r in _json_records(RECORDED[RECORDED.gpu == c.gpu].gpu_slug.iloc[0], "gemm")
                .itertuples() if r.variant == v.name and r.problem == card.problem]
        today = [r for r in mine if history.source_changed_since(v, r.commit) is False] or mine
        there = sorted(today, key=lambda r: r.utc)[-1]
        h = card._repr_html_()
        record_there = f"{lesson.fmt_seconds(there.median_s)}, commit {there.commit[:7]}"
        own = [x for x in lesson.ncu.all_counters("gemm", card.problem, v.name, card.gpu)
               if same_code(v, x.commit, card.commit)]
        assert not own, (v.name, "the card's own GPU has a row of this code: it must be the card's (issue 42)")
        assert (f"{card.gpu} has no Nsight Compute row of this code, so these are {c.gpu}&#x27;s rows of the "
                f"same code (its record there: {record_there})") in h
        assert card.prev_counters is None or card.prev_counters.gpu == c.gpu
    if not seen:
        pytest.skip("every recorded GEMM card has a row of its code on its own GPU")


def test_a_card_explains_its_record_only_with_counters_of_the_same_code():
    """The H100's Nsight Compute rows of GEMM rungs 04-11 are of 7c7b2e0 and their kernels changed
    since, while the cards show records of today's code: such a row never explains a card (the
    card names it instead), and a delta is only against the rung before's row of the same code."""
    from perfkit.history import source_changed_since

    ladder = [v for v in gemm.LADDER if not v.oracle]
    seen_other = 0
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        for i, v in enumerate(ladder):
            card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, v.name, gpu=gpu, estimate=False)
            if not card.found:
                continue
            c = card.counters
            if c is not None:
                assert c.commit[:7] == card.commit[:7] or (source_changed_since(v, c.commit) is False
                                                          and source_changed_since(v, card.commit) is False)
                if card.prev_counters is not None:
                    q, prev = card.prev_counters, ladder[i - 1]
                    assert q.commit[:7] == c.commit[:7] or (source_changed_since(prev, q.commit) is False
                                                            and source_changed_since(v, c.commit) is False)
            elif card.counters_other is not None:
                seen_other += 1
                h = card._repr_html_()
                assert "is of other code, so it cannot explain this time" in h
                assert card.counters_other.commit[:7] in h and "The counter that moved most" not in h
    assert seen_other, "no card met a row of other code (the H100's 7c7b2e0 rows): the test checks nothing"


def test_a_ladders_summary_is_one_table_and_chart_per_gpu_each_of_its_own_records(monkeypatch):
    """layernorm backward: rungs 05/06's cards show the H200's records of today's code (the H100's
    are of 7c7b2e0), so the summary is one table and chart per GPU: each table's cards are all
    records of that GPU (older code marked), its "x the rung before" against that GPU's record,
    and its bars exactly the records its table shows."""
    from perfkit import plots
    from perfkit.kernels.norm import layernorm_bwd

    h100 = "NVIDIA H100 80GB HBM3"
    table = lesson.records("layernorm_bwd")
    drawn, shown = [], []
    real = plots.ladder
    monkeypatch.setattr(plots, "ladder", lambda t, **kw: drawn.append(t) or real(t, **kw))
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    pinned = []
    real_cards_on = lesson.LadderView._cards_on
    monkeypatch.setattr(lesson.LadderView, "_cards_on",
                        lambda self, p, g: pinned.append((g, real_cards_on(self, p, g))) or pinned[-1][1])
    view = lesson.LadderView("layernorm_bwd", layernorm_bwd.EXAMPLE_PROBLEM, table=table, estimate=False,
                             plot_gpu=h100)
    cards = view.summary()
    gpus = {c.gpu for c in cards if c.found}
    if len(gpus) < 2:
        pytest.skip("every layernorm backward card shows one GPU's records now")
    assert [g for g, _ in pinned] == sorted(gpus, key=lambda g: (g != h100, g)) and len(drawn) == len(pinned)
    ex = layernorm_bwd.EXAMPLE_PROBLEM.label
    for (g, cs), t in zip(pinned, drawn):
        found = [c for c in cs if c.found]
        assert found and all(c.gpu == g for c in found)
        for c in found:  # the rung before's time on the card is this GPU's record of it
            if np.isfinite(c.x_prev):
                prev = table[(table.gpu == g) & (table.label == c.prev_label) & (table.problem == ex)]
                assert c.prev_median_s in set(prev.median_s)
        for c in found:  # a factor across code versions is named, never printed as a number
            row = c.as_dict()
            if c.prev_across:
                assert np.isnan(row["x prev"]) and c.prev_across in row["x prev vs"]
        t = t[(t["problem"] == ex) & (t["rung"] > 0)]
        assert set(t["gpu"]) <= {g}
        assert set(zip(t["variant"], t["commit"].astype(str))) == {(c.variant, c.commit) for c in found}
    heads = [x._repr_html_() for x in shown]
    assert all(f"on {g}" in "".join(heads) for g in gpus) and not any("no bar for" in h for h in heads)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_a_rung_is_compared_with_the_nearest_rung_that_runs_its_problem(monkeypatch):
    """GEMM 19 simt_wide (float32) follows the float16-only 18 tc_deep in ladder order: it is
    compared with 11 autotuned, the nearest rung that runs float32; 12 tensor_core has no float16
    rung before it, so it is compared with 11 autotuned at that rung's own problem, and the prompt
    names that problem."""
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    view = lesson.LadderView("gemm", gemm.EXAMPLE_PROBLEM, table=lesson.records("gemm"), estimate=False)
    by = {v.name: v for v in gemm.LADDER}
    assert view.prev_of(by["simt_wide"]).name == "autotuned"
    assert view.prev_of(by["wgmma"]).name == "tc_deep" and view.prev_of(by["tc_deep"]).name == "tc_epilogue"
    assert view.prev_of(by["tensor_core"]).name == "autotuned"
    out = view.rung("tensor_core")
    prompt = next(str(x) for x in out if "Predict before you look" in str(x))
    assert (f"than {by['autotuned'].label} at its own problem, {gemm.EXAMPLE_PROBLEM.label}?" in prompt
            and "dtype=float16 be faster" in prompt)


def test_a_rung_shown_at_another_example_still_counts_as_the_rung_before_where_it_runs(monkeypatch):
    """Conv 06 igemm_regblock is shown at its NHWC twin but runs (and was recorded at) the NCHW
    layer: 07 winograd (NCHW) is compared with it, not with 05 igemm_smem two rungs back (its card
    said "x5.61 vs 05 igemm_smem" with rung 6's NCHW record on the same GPU)."""
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    table = lesson.records("conv")
    view = lesson.LadderView("conv", conv.EXAMPLE_PROBLEM, table=table, estimate=False)
    by = {v.name: v for v in conv.LADDER}
    assert by["igemm_regblock"].example(conv.EXAMPLE_PROBLEM).label != conv.EXAMPLE_PROBLEM.label
    assert view.prev_of(by["winograd"]).name == "igemm_regblock"
    out = view.rung("winograd", kernel=2)
    prompt = next(str(x) for x in out if "Predict before you look" in str(x))
    assert f"than {by['igemm_regblock'].label} at {conv.EXAMPLE_PROBLEM.label}?" in prompt, prompt
    card = view.cards["winograd"]
    mine = table[(table.variant == "igemm_regblock") & (table.problem == conv.EXAMPLE_PROBLEM.label)
                 & (table.gpu == card.gpu)]
    if card.found and len(mine):
        assert card.prev_label == by["igemm_regblock"].label and not card.prev_skipped_label
        assert card.x_prev == pytest.approx(mine.sort_values("utc").median_s.iloc[-1] / card.median_s)


def test_the_traffic_line_counts_the_rungs_own_flops(monkeypatch):
    """Conv's Winograd rungs do 0.44x and 0.25x the direct FLOPs: the traffic line above their card
    gives the rung's own count (it said 7.4 GFLOP, the problem's, right above a cell printing 3.29)
    and names the problem's beside it; a rung that does the problem's FLOPs gives that one number."""
    shown = []
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    by = {v.name: v for v in conv.LADDER}
    view = lesson.LadderView("conv", conv.EXAMPLE_PROBLEM, table=lesson.records("conv"), estimate=False, traffic=True)
    p = conv.EXAMPLE_PROBLEM
    for name in ("winograd", "winograd_f4", "direct"):
        out = view.rung(name)
        line = next(x._repr_html_() for x in out if "traffic model at" in str(x))
        own = by[name].traffic(p).flops
        assert f": {own / 1e9:.2f} GFLOP" in line, line
        assert (f"(the problem's {p.flops / 1e9:.1f})" in line) == (abs(own - p.flops) > 0.005 * p.flops), line
    assert by["winograd"].traffic(p).flops < 0.5 * p.flops


def test_a_rung_that_does_not_run_the_problem_is_not_said_to_lack_a_record():
    """Where the rung just before refuses the problem (GEMM 19 simt_wide at float16, layernorm's
    float16-only 08 packed at float32), the factor is against the nearest recorded rung and the
    table says why the one just before was passed over: it does not run the problem, not 'has no
    record'."""
    from perfkit.kernels.norm import layernorm

    for op, problem, name, skipped in (("gemm", gemm.Problem(4096, 4096, 4096, "float16"), "wgmma", "simt_wide"),
                                       ("layernorm", layernorm.EXAMPLE_PROBLEM, "persist", "packed")):
        card = lesson.recorded(op, problem, name, estimate=False)
        if not (card.found and np.isfinite(card.x_prev)):
            continue
        v = next(x for x in lesson.ladder_for(op) if x.name == skipped)
        assert card.prev_skipped_label == v.label
        assert f"({v.label} does not run this problem)" in card.x_prev_reference, card.x_prev_reference
        assert "has no record" not in card.x_prev_reference


def test_a_persist_rung_is_asked_and_carded_at_its_narrow_rows(monkeypatch):
    """Softmax's persist rung is for narrow rows: its section asks about it, and its card answers,
    at its example (4096 x 1024), against the nearest earlier rung that runs that problem (not the
    float16-only packed), named at that same problem; the summary at 4096 x 4096 leaves it out.
    Where it was also recorded at 4096 x 4096, that record is its card (recorded at the problem
    as asked), and the prompt asks there."""
    from perfkit.lesson.view import _runs

    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    every = lesson.records("softmax")
    v = next(u for u in softmax.LADDER if u.name == "persist")
    # recorded at the page's problem too (a quick plan's unit runs it there): that record is the card
    wide = every[(every["variant"] == "persist") & (every["problem"].str.contains("cols=4096"))]
    if len(wide):
        view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, table=every, estimate=False)
        out = view.rung("persist")
        assert view.cards["persist"].problem == softmax.EXAMPLE_PROBLEM.label and view.cards["persist"].found
        prompt = next(str(x) for x in out if "Predict before you look" in str(x))
        assert f"at {softmax.EXAMPLE_PROBLEM.label}?" in prompt
    table = every.drop(wide.index)  # then as on a GPU that recorded it at its narrow rows only, or not at all
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, table=table, estimate=False)
    narrow = v.example(softmax.EXAMPLE_PROBLEM)
    assert narrow.cols == 1024 and not _runs(v, softmax.EXAMPLE_PROBLEM)
    prev = view.prev_of(v)
    assert prev.name != "packed" and _runs(prev, narrow)
    out = view.rung("persist")
    prompt = next(str(x) for x in out if "Predict before you look" in str(x))
    assert f"than {prev.label} at {narrow.label}?" in prompt and "its own problem" not in prompt
    assert view.cards["persist"].problem == narrow.label
    # no record: the model answers the prompt at the narrow rows (smem_row's own card is at 4096 x 4096)
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, table=table)
    view.rung(prev.name)
    view.rung("persist")
    card = view.cards["persist"]
    assert view.cards[prev.name].problem != card.problem and np.isfinite(card.prev_estimate_s)
    assert card.prev_estimate_s == lesson.estimate_rung(prev, narrow, card.model_gpu, card.estimate_banks)[0]
    assert "x the rung before, estimated" in dict(card.rows())
    # and its anatomy column is smem_row built at the narrow rows, not at its own 4096 columns
    assert view.reports[prev.name, 0, narrow.label].shared_bytes < view.reports[prev.name, 0].shared_bytes


def test_a_tensor_core_card_counts_warp_instructions_per_mma_as_a_simt_card_counts_them_per_ffma():
    """Issue 42's counters include instructions per FFMA or HMMA: a rung that issues mma shows its
    warp instructions per 16x8x16 mma of the problem's work (4096 FLOPs each), beside the rung
    before's only where that one used the tensor pipe too; a SIMT rung shows none."""
    from perfkit.lesson.ncu import MMA_FLOPS, Counters, counter_rows

    assert MMA_FLOPS == 4096
    flops = 2.0 * 4096 ** 3  # 33.5 M mmas
    cur = Counters("gemm", "b", "p", "NVIDIA H100 80GB HBM3", "abc1234", "t.csv", 1, 1e-3,
                   {"warp_instructions": 93.7e6, "tensor_pipe_active_pct": 60.0})
    tc_prev = Counters("gemm", "a", "p", "NVIDIA H100 80GB HBM3", "abc1234", "t.csv", 1, 2e-3,
                       {"warp_instructions": 228e6, "tensor_pipe_active_pct": 42.0})
    simt_prev = Counters("gemm", "s", "p", "NVIDIA H100 80GB HBM3", "abc1234", "t.csv", 1, 3e-3,
                         {"warp_instructions": 3e9, "tensor_pipe_active_pct": 0.5})
    row = lambda prev, **kw: next((r for r in counter_rows(cur, prev, **kw) if "per mma" in r["counter"]), None)  # noqa: E731
    assert row(tc_prev, tensor=True, flops=flops) == {"counter": "warp instructions per mma (16x8x16)",
                                                      "this rung": "2.79", "rung before": "6.79", "change": "x0.411"}
    assert row(simt_prev, tensor=True, flops=flops)["rung before"] == "—"  # a SIMT rung before: no mmas
    assert row(tc_prev, tensor=False, flops=flops) is None and row(tc_prev, tensor=True) is None
    assert row(None, flops=flops)["this rung"] == "2.79"  # unknown anatomy: the pipe's 60% says mma


def test_a_card_shows_the_tensor_pipe_only_for_a_rung_that_issues_tensor_instructions(monkeypatch):
    """A view's card knows from the rung's anatomy whether its SASS issues mma: a SIMT rung's few
    percent of tensor pipe (the counter's floor) is not shown; a tensor-core rung's is."""
    from perfkit.lesson.ncu import Counters, counter_rows

    c = Counters("gemm", "x", "p", "NVIDIA H200", "abc1234", "t.csv", 1, 1e-3, {"tensor_pipe_active_pct": 6.8})
    labels = lambda **kw: [r["counter"] for r in counter_rows(c, None, **kw)]  # noqa: E731
    assert "tensor pipe active" not in labels(tensor=False) and "tensor pipe active" in labels(tensor=True)
    assert "tensor pipe active" in labels()  # unknown: shown from 5% up
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    view = lesson.LadderView("gemm", gemm.EXAMPLE_PROBLEM, table=lesson.records("gemm"), estimate=False)
    view.rung("autotuned")
    view.rung("tc_vector")
    assert view.cards["autotuned"].tensor_mma is False and view.cards["tc_vector"].tensor_mma is True


def test_a_summary_holds_only_the_rungs_that_run_its_problem(monkeypatch):
    """GEMM at float32 4096^3: the SIMT rungs only (the tensor-core rungs run its float16 twin, and
    a factor against a float32 rung would compare two problems); at the float16 twin, only rungs
    that run float16, each card at that problem and its "x the rung before" against a float16 rung."""
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    table = lesson.records("gemm")
    # the oracle and the rungs about the float32 -> float16 boundary (estimates on: a refused rung
    # still has a roofline bound, so an estimate does not say that a rung runs the problem)
    names = [v.name for v in gemm.LADDER]
    ladder = [gemm.LADDER[0]] + list(gemm.LADDER[names.index("warptile"):names.index("tc_vector") + 1])
    view = lesson.LadderView("gemm", gemm.EXAMPLE_PROBLEM, table=table, ladder=ladder)
    f32 = view.summary()
    ex = gemm.EXAMPLE_PROBLEM
    f16 = view.summary(gemm.Problem(ex.m, ex.n, ex.k, "float16"))
    dtype = {v.label: v.example(ex).dtype for v in gemm.LADDER if not v.oracle}
    assert f32 and all(c.problem == ex.label and dtype[c.label] == "float32" for c in f32)
    assert f16 and all(c.problem.endswith("dtype=float16") and dtype[c.label] == "float16" for c in f16)
    assert all(dtype[c.prev_label] == "float16" for c in f16 if np.isfinite(c.x_prev))
    import matplotlib.pyplot as plt

    plt.close("all")


def test_one_ladder_view_renders_any_rung_and_the_rest(monkeypatch):
    """LadderView renders a rung as: kernel (or diff), anatomy folded, prompt, answer folded; a rung
    with no section is shown by rest() under its label; a name not in the ladder says so."""
    shown = []
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    ladder = [v for v in softmax.LADDER][:3]
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, ladder=ladder, estimate=False)
    out = view.rung(ladder[2].name)
    html_ = [o._repr_html_() for o in out]
    assert "what changed in the kernel" in html_[0] and html_[1].startswith("<details>")
    assert "Predict before you look" in html_[-2] and html_[-1].startswith("<details>")
    assert view.rest() == [ladder[1].name] and ladder[1].label in shown[0]._repr_html_()
    assert "not in today's ladder" in view.rung("no_such_rung")[0]._repr_html_()
    assert [c.variant for c in view.all_cards()] == [v.name for v in ladder if not v.oracle]


def _standing_truth(op):
    """Per (GPU slug, problem): the best rung of today's code read from the record files alone (per
    rung the newest record of today's code, else its newest, as the cards choose; checked rungs of
    today's ladder), the library of that run (the same commit on that GPU, its newest there), and
    the fastest older record where one ran faster, with the library of its own run."""
    ladder = {v.name: v for v in lesson.ladder_for(op)}
    out = {}
    for slug in sorted({s for s in RECORDED[RECORDED.op == op].gpu_slug}):
        files = _json_records(slug, op)
        for problem, f in files.groupby("problem"):
            f = f.sort_values("utc", kind="stable")
            picks = []
            for name, g in f[f.rung > 0].groupby("variant"):
                if name not in ladder:
                    continue
                today = g[[history.source_changed_since(ladder[name], c) is False for c in g.commit]]
                p = (today if len(today) else g).iloc[-1]
                if p["ok"] is not False:
                    picks.append((p, history.source_changed_since(ladder[name], p["commit"]) is True))
            if not picks:
                continue
            now = [p for p, o in picks if not o]
            best = min(now or [p for p, _ in picks], key=lambda p: p["median_s"])
            lib = f[f.rung == 0]
            run = lib[lib.commit == best["commit"]]
            was = [p for p, o in picks if o and now and p["median_s"] < best["median_s"]]
            faster = min(was, key=lambda p: p["median_s"]) if was else None
            frun = lib[lib.commit == faster["commit"]] if faster is not None else lib.iloc[0:0]
            out[(slug, problem)] = {
                "best": best, "older": not now, "library": (run if len(run) else lib).iloc[-1] if len(lib) else None,
                "same run": len(run) > 0, "faster": faster,
                "faster library": frun.iloc[-1] if len(frun) else None, "label": ladder}
    return out


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
@pytest.mark.parametrize("op", ["gemm", "conv"])
def test_where_a_ladder_stands_numbers_equal_the_record_files(op):
    """Notebooks 02 and 03's standing, per GPU and problem, is the record files' own numbers: the
    best rung of today's code (records chosen by code, not recency), its median and commit, the
    library's median of the same run and their ratio (never a library of another commit), and the
    faster older record beside it against the library of its own run."""
    st = lesson.standing(op)
    truth = _standing_truth(op)
    slug = {g: RECORDED[RECORDED.gpu == g].gpu_slug.iloc[0] for g in set(st.gpu)}
    assert sorted((slug[g], p) for g, p in zip(st.gpu, st.problem)) == sorted(truth)
    for _, r in st.iterrows():
        t = truth[(slug[r["gpu"]], r["problem"])]
        best, lib = t["best"], t["library"]
        assert r["best rung"] == t["label"][best["variant"]].label and r["best median_s"] == best["median_s"]
        assert r["commit"] == best["commit"][:7] + ("*" if t["older"] else "")
        if lib is None:
            assert np.isnan(r["library median_s"]) and np.isnan(r["of library"])
            continue
        assert r["library median_s"] == lib["median_s"] and r["library commit"] == lib["commit"][:7]
        if t["same run"]:
            assert r["of library"] == pytest.approx(lib["median_s"] / best["median_s"]) and not r["library other run"]
        else:
            assert np.isnan(r["of library"]) and r["library other run"]
        f = t["faster"]
        if f is None:
            assert r["older faster rung"] == "" and np.isnan(r["older faster median_s"])
        else:
            assert (r["older faster rung"], r["older faster median_s"], r["older faster commit"]) == (
                t["label"][f["variant"]].label, f["median_s"], f["commit"][:7])
            fl = t["faster library"]
            assert (r["older faster of library"] == pytest.approx(fl["median_s"] / f["median_s"]) if fl is not None
                    else np.isnan(r["older faster of library"]))


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_where_a_ladder_stands_is_read_from_one_gpus_records_per_problem():
    """Each standing row is one GPU and one problem: today's best rung and the library of its run
    on that GPU (never a median across commits or GPUs); the takeaway quotes those same numbers."""
    st = lesson.standing("gemm")
    assert not st.empty
    text = lesson.takeaway(st, "cuBLAS")
    today = st[~st["commit"].str.endswith("*") & np.isfinite(st["of library"])]
    for (group, gpu), g in today.groupby(["group", "gpu"]):
        assert f"x{g['of library'].min():.2f}" in text and f"{group} on {gpu}" in text
    assert "No problem" in lesson.takeaway(st.iloc[0:0])
    # goals: per dtype and GPU, met only where every problem's best rung of today's code reaches it
    goals = {"float32": 1.0, "float16": 0.5}
    said = lesson.takeaway(st, "cuBLAS", goals=goals)
    for (group, gpu), g in today.groupby(["group", "gpu"]):
        part = said[said.index(f"{group} on {gpu}"):].split(". ")[0]
        goal = goals[group.split()[0]]
        short = int((g["of library"] < goal).sum())
        assert (f"the goal, x{goal:.2f} cuBLAS's speed, is " + ("met" if not short else "missed")) in part, part
        if short and len(g) > 1:
            assert f"missed at {short} of {len(g)} problems (best x{g['of library'].max():.2f})" in part
    # a quoted Nsight Compute row is of the widest gap's own code (the H100's gemm rows of 7c7b2e0
    # timed another kernel than the 6bbc424 record they would stand beside); another GPU's row is
    # named as such
    from perfkit.lesson.ncu import same_code

    ladder = {v.name: v for v in gemm.LADDER}
    quoted = 0
    for part in re.split(r"\. (?=\w+ on )", text):  # one sentence group per dtype and GPU
        m = re.search(r"(\S+) on ([^:;]+?): the best rung.*(?:widest|the) gap at .*?, ([^)]+)\).*Nsight Compute row "
                      r"\((?:[\w.-]+\.csv, )?commit (\w+)(, from ([^:]+): [^)]+ has no row of this code)?\)", part)
        if m:
            quoted += 1
            g = st[(st.gpu == m.group(2)) & (st.group == m.group(1)) & np.isfinite(st["of library"])]
            today = g[~g["commit"].str.endswith("*")]  # today's code speaks where it was recorded
            worst = (today if len(today) else g).sort_values("of library").iloc[0]
            assert worst["best rung"] == m.group(3)
            assert same_code(ladder[worst["variant"]], m.group(4), worst["commit"].rstrip("*")), m.groups()
            rows = lesson.ncu.all_counters("gemm", worst["problem"], worst["variant"], m.group(6) or m.group(2))
            assert m.group(4) in {str(c.commit)[:7] for c in rows}
            # beside the library's own row where any recorded GPU has one (the contrast explains)
            lib = [c for g in sorted(set(st.gpu)) for c in lesson.ncu.all_counters("gemm", worst["problem"], "oracle", g)]
            mine = next(c for c in rows if str(c.commit)[:7] == m.group(4))
            want = f"warp instructions {lesson.ncu.fmt_count(mine.get('warp_instructions'), 'count')}"
            assert want in part and (not lib or re.search(want + r" \(cuBLAS[^:]*: ", part)), part
    assert quoted


def test_where_a_ladder_stands_speaks_for_todays_code_at_every_problem(monkeypatch):
    """A problem whose fastest record is of a kernel changed since is led by its fastest rung of
    today's code, in the table, the figure and the paragraph, and the older record that ran faster
    is named beside it, against the library of its own run (and whether it met the goal): notebook
    02's table led the H200's 4096^3 float16 row with persistent at x0.96 (older code, marked *)
    and gave wgmma at x0.66 (today's code) in a column beside it."""
    import matplotlib.pyplot as plt

    import sys

    monkeypatch.setattr(sys.modules["perfkit.lesson.standing"], "changed_since_recorded",
                        lambda df: pd.Series([c == "old" for c in df["commit"]], index=df.index))
    rows = [("A", 0, "oracle", 0.9, "old", "1"), ("A", 5, "fast_old", 1.05, "old", "1"),
            ("A", 0, "oracle", 1.0, "new", "2"), ("A", 4, "slow_now", 1.6, "new", "2"),
            ("B", 0, "oracle", 1.0, "new", "2"), ("B", 4, "slow_now", 2.0, "new", "2")]
    df = pd.DataFrame([{"op": "gemm", "gpu": "GPU X", "problem": f"m={p} dtype=float16", "rung": r, "variant": v,
                        "label": f"{r:02d} {v}", "median_s": t, "commit": c, "utc": u, "simulated": False}
                       for p, r, v, t, c, u in rows])
    st = lesson.standing("gemm", df)
    a = st[st.problem.str.startswith("m=A")].iloc[0]
    assert a["best rung"] == "04 slow_now" and a["commit"] == "new" and a["best median_s"] == 1.6
    assert a["of library"] == pytest.approx(1 / 1.6) and a["library commit"] == "new"
    assert (a["older faster rung"], a["older faster median_s"], a["older faster commit"]) == ("05 fast_old", 1.05, "old")
    assert a["older faster of library"] == pytest.approx(0.9 / 1.05)  # cuBLAS of its own run, not today's
    text = lesson.takeaway(st, "cuBLAS", goals={"float16": 0.85})
    assert "x0.50 to x0.62 cuBLAS's speed over 2 problems" in text and "(not won; widest gap at m=B" in text, text
    one = lesson.takeaway(st[st.problem.str.startswith("m=B")], "cuBLAS")
    assert "over 1 problem (not won; the gap at m=B, 04 slow_now)" in one, one  # no "widest" of one
    won = lesson.takeaway(st[st.problem.str.startswith("m=B")].assign(**{"of library": 1.2}), "cuBLAS")
    assert "over 1 problem (won)." in won, won  # not "won everywhere" of one problem
    assert "is missed at 2 of 2 problems (best x0.62)" in text, text
    assert "at m=A a record of older code ran faster: 05 fast_old at x0.86 cuBLAS's speed (commit old, its kernel " \
           "changed since), over the goal" in text, text
    # the clause names older code in words, and nothing in the paragraph is marked *: no footnote for
    # a * (notebook 02's GEMM paragraph ended with one though it showed no *)
    assert "*" not in text, text
    table = lesson.standing_table(st, "cuBLAS").data
    assert list(table["best rung"]) == ["04 slow_now", "04 slow_now"] and list(table["commit"]) == ["new", "new"]
    assert list(table["x cuBLAS"]) == pytest.approx([1 / 1.6, 0.5])
    assert list(table["older code ran faster"]) == ["05 fast_old, x0.86 (old*)", ""]
    # the figure's bars are today's code; the older record is a hollow mark at its own ratio
    ax = lesson.standing_figure(st, "cuBLAS")
    assert [round(b.get_width(), 4) for b in ax.patches] == [0.625, 0.5]
    assert any(list(ln.get_xdata()) == [pytest.approx(0.9 / 1.05)] for ln in ax.lines)
    plt.close("all")


def _gemm_record(variant, rung, median_s, commit, utc, problem="m=256 n=256 k=256 dtype=float32", gpu="GPU X"):
    return {"op": "gemm", "problem": problem, "variant": variant, "rung": rung, "median_s": median_s,
            "commit": commit, "utc": utc, "gpu": gpu, "gpu_slug": gpu.lower().replace(" ", "-"), "check_ok": True,
            "simulated": False, "flops": 1.0, "bytes": 1.0}


def test_a_cards_share_of_the_oracle_divides_by_the_oracle_of_the_records_own_run(monkeypatch):
    """02's tc_warptile card (H100, 6bbc424) read 49.4% of the oracle, cuBLAS of the newer 516b940 run;
    with cuBLAS of its own run, 49.5%.  A card divides by the oracle timed in its record's run (one
    GPU, one commit), as where-the-ladder-stands does; where that run timed none, by the oracle's
    newest, and says which run that was."""
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: False)
    p = gemm.Problem(256, 256, 256)
    df = pd.DataFrame([_gemm_record("oracle", 0, 2.0e-3, "c1", "2026-01-01T00:00:00"),
                       _gemm_record("autotuned", 11, 4.0e-3, "c1", "2026-01-01T00:00:01"),
                       _gemm_record("oracle", 0, 1.0e-3, "c2", "2026-01-02T00:00:00")])  # newer, another run
    card = lesson.recorded("gemm", p, "autotuned", estimate=False, table=df)
    assert card.commit == "c1" and card.of_oracle == pytest.approx(0.5) and not card.oracle_other_run
    assert "of another run" not in str(card)
    alone = lesson.recorded("gemm", p, "autotuned", estimate=False, table=df[df["commit"] != "c1"].pipe(
        lambda d: pd.concat([d, df.iloc[[1]]])))  # the record's run timed no oracle
    assert alone.of_oracle == pytest.approx(0.25) and alone.oracle_other_run == "c2"
    assert "of another run at commit c2" in str(alone) and "the oracle of another run, commit c2" in str(alone)


def test_where_a_ladder_stands_divides_only_by_the_library_of_the_rungs_own_run(monkeypatch):
    """The H100's float32 4096^3 row divided autotuned of 6bbc424 by cuBLAS of 516b940 (the newest
    cuBLAS record, of another run): the ratio is against the library timed in the rung's run (one
    GPU, one commit); where that run timed no library, the library's own median is shown, named
    as another run's, and nothing is divided, in the table, the figure and the paragraph."""
    import matplotlib.pyplot as plt

    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: False)
    rung = next(v for v in gemm.LADDER if v.name == "autotuned")
    other = next(v for v in gemm.LADDER if v.name == "simt_wide")
    pb = "m=512 n=512 k=512 dtype=float32"
    df = pd.DataFrame([
        _gemm_record("oracle", 0, 2.0e-3, "c1", "2026-01-01T00:00:00"),
        _gemm_record(rung.name, 11, 2.5e-3, "c1", "2026-01-01T00:00:01"),
        _gemm_record("oracle", 0, 3.0e-3, "c2", "2026-01-02T00:00:00"),   # the newest cuBLAS: another run
        _gemm_record(other.name, 19, 2.6e-3, "c2", "2026-01-02T00:00:01"),
        _gemm_record(rung.name, 11, 4.0e-3, "c1", "2026-01-01T00:00:02", problem=pb),
        _gemm_record("oracle", 0, 1.0e-3, "c2", "2026-01-02T00:00:02", problem=pb),  # no cuBLAS in c1's run
    ])
    st = lesson.standing("gemm", lesson.records("gemm", frame=df, latest=False)).set_index("problem")
    a = st.loc["m=256 n=256 k=256 dtype=float32"]
    assert (a["best rung"], a["commit"], a["best median_s"]) == (rung.label, "c1", 2.5e-3)
    assert a["of library"] == pytest.approx(2.0 / 2.5)  # not 3.0 / 2.5: cuBLAS of c2 is another run
    assert (a["library median_s"], a["library commit"], a["library other run"]) == (2.0e-3, "c1", False)
    b = st.loc[pb]
    assert (b["best rung"], b["best median_s"], b["library median_s"], b["library commit"]) == (
        rung.label, 4.0e-3, 1.0e-3, "c2")
    assert b["library other run"] and np.isnan(b["of library"])
    table = lesson.standing_table(st.reset_index(), "cuBLAS")
    shown = table.data.set_index("problem")
    assert shown.loc[pb, "commit"] == "c1 (cuBLAS c2, another run: not compared)" and np.isnan(shown.loc[pb, "x cuBLAS"])
    assert shown.loc[pb, "cuBLAS's median"] == "1 ms" and "—" in table.to_html()
    text = lesson.takeaway(st.reset_index(), "cuBLAS", goals={"float32": 1.0})
    assert "float32 on GPU X: the best rung runs at x0.80 cuBLAS's speed over 1 problem" in text, text
    assert f"at m=512 n=512 k=512 {rung.label} took 4 ms (commit c1), and no cuBLAS was timed in its run" in text, text
    assert "x0.25" not in text and "x1.20" not in text  # neither ratio across runs is said
    ax = lesson.standing_figure(st.reset_index(), "cuBLAS")
    widths = sorted(round(p.get_width(), 4) for p in ax.patches)
    assert widths == [0.0, 0.8]  # no bar across runs
    assert any("no cuBLAS in its run" in t.get_text() for t in ax.texts)
    plt.close("all")


def test_where_a_ladder_stands_chooses_records_by_code_not_recency(monkeypatch):
    """A rung whose newest record is of older code (a kernel changed since that commit) and that
    also has a record of today's code is shown by its record of today's code, as its card shows
    it: notebooks 02 and 03 kept only each rung's newest record, so the older code's stood in."""
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: c == "old")
    x = next(v for v in gemm.LADDER if v.name == "autotuned")
    y = next(v for v in gemm.LADDER if v.name == "warptile")
    df = pd.DataFrame([
        _gemm_record("oracle", 0, 1.2e-3, "new", "2026-01-01T00:00:00"),
        _gemm_record(x.name, 11, 1.5e-3, "new", "2026-01-01T00:00:01"),
        _gemm_record(y.name, 10, 1.8e-3, "new", "2026-01-01T00:00:02"),
        _gemm_record("oracle", 0, 1.1e-3, "old", "2026-01-02T00:00:00"),  # newer, of another run
        _gemm_record(x.name, 11, 1.0e-3, "old", "2026-01-02T00:00:01"),   # newest of x, of older code
    ])
    st = lesson.standing("gemm", lesson.records("gemm", frame=df, latest=False))
    r = st.iloc[0]
    assert (r["best rung"], r["best median_s"], r["commit"]) == (x.label, 1.5e-3, "new")
    assert r["library median_s"] == 1.2e-3 and r["of library"] == pytest.approx(1.2 / 1.5)
    assert r["older faster rung"] == ""  # x's chosen record is today's: its older record is not another rung
    assert "older code" not in lesson.takeaway(st, "cuBLAS")
    # the cards choose the same record
    card = lesson.recorded("gemm", "m=256 n=256 k=256 dtype=float32", x.name, table=lesson.records(
        "gemm", frame=df, latest=False), estimate=False)
    assert card.median_s == r["best median_s"] and card.commit == "new"


def test_a_card_shows_todays_code_where_a_gpus_newest_record_of_the_rung_is_older_code(tmp_path, monkeypatch):
    """Issue 42, item 3: records are chosen by code, not recency.  A GPU whose newest record of a
    rung is of older code (an old commit re-run, or records imported from another machine with
    newer times) still has an earlier record of today's code: the card shows that record (its
    median, commit and GPU), not the older code's, nor another GPU's older code; the rung before,
    the fastest rung before, the summary's bar and the record table choose by the same rule.  The
    cards saw only each GPU's newest record (``records`` with ``latest=True``), which hid it."""
    import matplotlib.pyplot as plt

    from perfkit import plots

    old, new = "0ld0000", "5ee0000"
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: {old: True, new: False}.get(c))
    p = gemm.Problem(64, 64, 64)
    w = lambda name, rung, median, commit, utc, gpu="Test GPU": _write_record(  # noqa: E731
        tmp_path, "gemm", name, rung, p.label, p.params, median, commit=commit, gpu=gpu, utc=f"2026-01-{utc}+00:00")
    w("oracle", 0, 1.0e-3, new, "01T00:00:00")
    w("blocktile_2d", 5, 4.0e-3, new, "01T00:00:01")
    w("warptile", 10, 3.0e-3, new, "01T00:00:02")
    w("autotuned", 11, 2.0e-3, new, "01T00:00:03")  # today's code: the card's record
    w("blocktile_2d", 5, 1.2e-3, old, "02T00:00:00")  # newer records of older code on the same GPU
    w("warptile", 10, 5.0e-3, old, "02T00:00:01")
    w("autotuned", 11, 1.5e-3, old, "02T00:00:02")
    w("autotuned", 11, 1.1e-3, old, "03T00:00:00", gpu="Other GPU")  # the newest of all: older code too
    lesson.reload()
    try:
        card = lesson.recorded("gemm", p, "autotuned", estimate=False, root=tmp_path)
        assert (card.median_s, card.commit, card.gpu) == (2.0e-3, new, "Test GPU")
        assert card.changed_since is False and "changed since" not in str(card)
        assert card.prev_label.endswith("warptile") and (card.prev_median_s, card.prev_commit) == (3.0e-3, new)
        assert card.x_prev == pytest.approx(1.5) and not card.prev_across
        assert (card.best_before_s, card.best_before_commit) == (3.0e-3, new)  # not blocktile_2d's older 1.2 ms
        assert card.of_oracle == pytest.approx(0.5)
        every = lesson.records("gemm", root=tmp_path, latest=False)
        same = lesson.recorded("gemm", p, "autotuned", estimate=False, table=every)
        assert (same.median_s, same.commit, same.gpu) == (card.median_s, card.commit, card.gpu)
        # only older code recorded: the newest, marked
        only_old = lesson.recorded("gemm", p, "autotuned", estimate=False, table=every[every.commit != new])
        assert (only_old.median_s, only_old.gpu, only_old.changed_since) == (1.1e-3, "Other GPU", True)
        # the summary: one table and bar chart per GPU, each bar the record its card shows
        drawn = []
        real = plots.ladder
        monkeypatch.setattr(plots, "ladder", lambda t, **kw: drawn.append(t) or real(t, **kw))
        monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
        cards = lesson.LadderView("gemm", p, table=every, estimate=False).summary(p)
        shown = {c.variant: c for c in cards if c.found}
        assert (shown["autotuned"].median_s, shown["autotuned"].commit) == (2.0e-3, new)
        assert (shown["blocktile_2d"].median_s, shown["warptile"].median_s) == (4.0e-3, 3.0e-3)
        [bars] = drawn  # every card shows Test GPU's records: one chart
        assert not bars.duplicated("variant").any() and set(bars.gpu) == {"Test GPU"}
        assert dict(zip(bars.variant, bars.median_s)) == {"oracle": 1.0e-3, "blocktile_2d": 4.0e-3,
                                                          "warptile": 3.0e-3, "autotuned": 2.0e-3}
        plt.close("all")
        # the record table: one cell per rung, the record chosen by code, never a mean of commits
        mine = every[every.gpu == "Test GPU"]
        piv = lesson.record_pivot(mine, "median_s").data[p.label]
        assert piv[card.label] == 2.0e-3 and piv[card.prev_label] == 3.0e-3
        with pytest.raises(ValueError, match="one GPU"):
            lesson.record_pivot(every, "median_s")
        # notebooks 02/03's counts and roofline: one record per GPU, problem and rung, by code
        chosen = lesson.chosen_records(every, "gemm").set_index(["gpu", "variant"])
        assert chosen.loc[("Test GPU", "autotuned"), "median_s"] == 2.0e-3 and len(chosen) == 5
    finally:
        lesson.reload()


def test_a_card_prefers_todays_code_over_a_newer_record_of_older_code(monkeypatch):
    """Among several matching records (several GPUs), the card shows the newest of today's code,
    and the newest of older code only where nothing is of today's code."""
    rows = pd.DataFrame({"commit": ["aaa", "bbb", "ccc"], "utc": ["1", "2", "3"], "gpu": ["A", "B", "C"]})
    v = gemm.LADDER[3]
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: c != "bbb")
    assert lesson.choose_record(rows, v)["gpu"] == "B"
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: True)
    assert lesson.choose_record(rows, v)["gpu"] == "C"


def test_a_card_shows_a_newer_record_whose_commit_it_cannot_tell_about():
    """A record made at a commit this clone's git does not have (another clone's, a newer run) is
    not known to be of older code: the card shows it where it is the newest, not an older record
    of today's code (the H100's wgmma card showed the H200's record of 2026-11-27 once an H100
    record of 2026-12-05 at an unknown commit was added, and the H100's table showed the new one)."""
    from perfkit import history, results

    head = results.git_commit()
    if not head:
        pytest.skip("no git here: nothing is of known code")
    v = next(x for x in gemm.LADDER if x.name == "wgmma")
    unknown = "0123456789abcdef0123456789abcdef01234567"
    assert history.source_changed_since(v, head) is False and history.source_changed_since(v, unknown) is None
    rows = pd.DataFrame({"commit": [head, unknown], "utc": ["2026-11-27", "2026-12-05"], "gpu": ["H200", "H100"]})
    assert lesson.choose_record(rows, v)["gpu"] == "H100"
    rows = pd.DataFrame({"commit": [head, None], "utc": ["2026-11-27", "2026-12-05"], "gpu": ["H200", "H100"]})
    assert lesson.choose_record(rows, v)["gpu"] == "H100"  # no commit recorded: cannot tell either
    rows = pd.DataFrame({"commit": [unknown, head], "utc": ["2026-11-27", "2026-12-05"], "gpu": ["H100", "H200"]})
    assert lesson.choose_record(rows, v)["gpu"] == "H200"  # the newest still wins


# --- where the memory-bound ladders stand on one GPU (notebook 04) -----------------------------
def _bw_record(variant, rung, median_s, commit, utc, *, problem="rows=64 cols=1000 dtype=float32 axis=-1",
               gpu="GPU A", op="softmax", ok=True, nbytes=1e9):
    return {"op": op, "problem": problem, "variant": variant, "rung": rung, "median_s": median_s, "commit": commit,
            "utc": utc, "gpu": gpu, "gpu_slug": gpu.lower().replace(" ", "-"), "check_ok": ok, "simulated": False,
            "bytes": nbytes, "gbps": nbytes / median_s / 1e9}


def test_where_they_stand_chooses_records_by_code_and_each_number_is_its_record(monkeypatch):
    """Synthetic records: per (problem, rung) the newest record of today's code, older code only
    where nothing else exists (marked *); a rung that failed its check never wins; torch from the
    best rung's commit; another GPU never enters; the prose quotes the table's numbers."""
    names = [v.name for v in softmax.LADDER if not v.oracle]
    fast, slow, bad = names[-1], names[1], names[-2]
    wide = "rows=64 cols=4096 dtype=float16 axis=-1"
    recs = pd.DataFrame([
        _bw_record(fast, 6, 2.0e-3, "new", "2026-01-02"),      # today's code: the one shown
        _bw_record(fast, 6, 1.0e-3, "old", "2026-01-03"),      # newer, but its kernel changed since
        _bw_record(slow, 2, 2.5e-3, "new", "2026-01-02"),
        _bw_record(bad, 5, 0.5e-3, "new", "2026-01-02", ok=False),  # fastest, failed its check
        _bw_record("oracle", 0, 3.0e-3, "new", "2026-01-02"),  # torch in the best rung's run ...
        _bw_record("oracle", 0, 9.0e-3, "zzz", "2026-01-05"),  # ... not the newest torch
        _bw_record("triton", -1, 1.6e-3, "new", "2026-01-02"),
        _bw_record(fast, 6, 0.1e-3, "new", "2026-01-09", gpu="GPU B"),  # another GPU: never shown
        _bw_record(slow, 2, 4.0e-3, "old", "2026-01-02", problem=wide),  # only older code here
        _bw_record("oracle", 0, 2.0e-3, "old", "2026-01-02", problem=wide),
        _bw_record("oracle", 0, 1.0e-3, "old", "2026-01-02", problem="rows=8 cols=8 dtype=float32 axis=-1"),
    ])
    copy = pd.DataFrame([{"op": "roofline", "variant": "copy", "gpu": "GPU A", "gpu_slug": "gpu-a", "gbps": 800.0,
                          "commit": "c0ffee0", "utc": "2026-01-01", "simulated": False}])
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", lambda v, c: c == "old")
    w = lesson.WhereTheyStand(["softmax"], "GPU A", frame=recs, copy_frame=copy)
    r = w.rows.set_index("shape")
    a = r.loc["64 x 1000"]
    assert a["best rung"] == softmax.LADDER[[v.name for v in softmax.LADDER].index(fast)].label
    assert a["best median_s"] == 2.0e-3 and a["commits"] == "new" and not a["older"]
    assert a["torch median_s"] == 3.0e-3 and a["x torch"] == pytest.approx(1.5)
    assert a["Triton median_s"] == 1.6e-3 and a["x Triton"] == pytest.approx(0.8)
    assert a["of copy"] == pytest.approx((1e9 / 2.0e-3 / 1e9) / 800.0)
    b = r.loc["64 x 4096"]
    assert b["best median_s"] == 4.0e-3 and b["older"] and b["commits"] == "old*" and b["dtype"] == "float16"
    c = r.loc["8 x 8"]
    assert c["best rung"] == "no rung recorded" and np.isnan(c["best median_s"])
    assert list(w.rows["dtype"]) == ["float32", "float32", "float16"]  # float32 first, then by width
    shown = w.table().data
    assert list(shown["its median"]) == [lesson.fmt_seconds(s) for s in w.rows["best median_s"]]
    text = w.takeaway()
    assert "beats torch at 1 of 2" in text and "64 x 1000 (x1.50, 0.62 of copy)" in text
    assert "loses to torch at 64 x 4096 (x0.50" in text and "older code*" in text and "8 x 8 (torch only)" in text
    assert text.endswith("(* a record of a kernel that changed since: not today's code.)"), text  # it shows a *
    fig = w.figure()  # points only: no line joins two records (the ceiling is the one line)
    lines = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_linestyle() == "None"]
    assert lines and all(len(ln.get_xdata()) == 1 for ln in lines)
    folded = w.folded()
    assert all(x._repr_html_().startswith("<details") for x in folded)
    import matplotlib.pyplot as plt

    plt.close("all")
    none = lesson.WhereTheyStand(["softmax"], "GPU C", frame=recs, copy_frame=copy)
    assert none.rows.empty and "nothing to say yet" in none.takeaway()
    # several GPUs: each GPU's rows are its own records (the cards' rule per GPU), one table per
    # op and GPU, one paragraph per GPU; GPU B has no copy record, so no fraction of copy there
    both = lesson.WhereTheyStand(["softmax"], ["GPU A", "GPU B"], frame=recs, copy_frame=copy)
    a_rows = both.rows[both.rows.gpu == "GPU A"].drop(columns="gpu").reset_index(drop=True)
    pd.testing.assert_frame_equal(a_rows, w.rows.drop(columns="gpu").reset_index(drop=True))
    b = both.rows[both.rows.gpu == "GPU B"]
    assert list(b["best median_s"]) == [0.1e-3] and np.isnan(b["x torch"]).all() and np.isnan(b["of copy"]).all()
    assert both.table("softmax", "GPU B").caption == "softmax on GPU B"
    paras = both.takeaway().split("\n\n")
    assert [p.split(",")[0] for p in paras] == ["On GPU A", "On GPU B"] and paras[0] == w.takeaway()
    assert "no copy bandwidth recorded on GPU B" in both.notes()
    assert len(both.figure().axes) == 2 and "GPU A and GPU B" in both.folded()[0]._repr_html_()
    plt.close("all")


def test_where_they_stand_speaks_for_todays_code_as_02_and_03_do(monkeypatch):
    """A rung whose only record is of older code and ran faster than today's best rung is not the
    best rung (notebook 04 showed the H200's softmax smem_row of 6ba0514 at x1.57 torch, 'older code*',
    where today's best, multirow, is at x1.47): the row is today's best with torch of its own run,
    and the older record is named beside it, with torch of its run, in the table and the paragraph,
    as lesson.standing and lesson.takeaway do for notebooks 02 and 03 (one rule, best_by_code)."""
    import sys

    names = [v.name for v in softmax.LADDER if not v.oracle]
    label = {v.name: v.label for v in softmax.LADDER}
    now, gone = names[-2], names[-1]
    p2 = "rows=64 cols=4096 dtype=float32 axis=-1"
    recs = pd.DataFrame([
        _bw_record(now, 5, 2.0e-3, "new", "2026-01-02"),
        _bw_record("oracle", 0, 3.0e-3, "new", "2026-01-02"),
        _bw_record(gone, 6, 1.5e-3, "old", "2026-01-01"),       # faster, but its kernel changed since
        _bw_record("oracle", 0, 2.7e-3, "old", "2026-01-01"),   # torch of the older record's run
        # at p2 the older record ran faster and torch was not timed in its run: no ratio for it
        _bw_record(now, 5, 4.0e-3, "new", "2026-01-02", problem=p2),
        _bw_record("oracle", 0, 5.0e-3, "new", "2026-01-02", problem=p2),
        _bw_record(gone, 6, 3.0e-3, "old", "2026-01-01", problem=p2),
    ])
    old = lambda v, c: c == "old"  # noqa: E731
    monkeypatch.setattr("perfkit.lesson.cards.source_changed_since", old)
    w = lesson.WhereTheyStand(["softmax"], "GPU A", frame=recs, copy_frame=recs.iloc[0:0])
    a = w.rows.set_index("shape").loc["64 x 1000"]
    assert a["best rung"] == label[now] and a["best median_s"] == 2.0e-3 and not a["older"]
    assert a["torch median_s"] == 3.0e-3 and a["x torch"] == pytest.approx(1.5) and a["commits"] == "new"
    assert (a["older faster rung"], a["older faster median_s"], a["older faster commit"]) == (label[gone], 1.5e-3, "old")
    assert a["older faster x torch"] == pytest.approx(2.7e-3 / 1.5e-3)
    b = w.rows.set_index("shape").loc["64 x 4096"]
    assert b["best rung"] == label[now] and np.isnan(b["older faster x torch"])
    # the figure draws each older record that ran faster as a hollow diamond at its own GB/s
    import matplotlib.pyplot as plt

    fig = w.figure()
    diamonds = sorted(float(line.get_ydata()[0]) for ax in fig.axes for line in ax.get_lines()
                      if line.get_marker() == "D" and len(line.get_ydata()))
    assert diamonds == pytest.approx(sorted([a["older faster gbps"], b["older faster gbps"]]))
    assert all(np.isfinite(diamonds))
    plt.close(fig)
    shown = w.table("softmax").data
    assert list(shown["best checked rung"]) == [label[now]] * 2
    assert list(shown["older code ran faster"]) == [f"{label[gone]}, x1.80 (old*)", f"{label[gone]}, 3 ms (old*)"]
    text = w.takeaway()
    assert f"beats torch at 64 x 1000 (x1.50)" in text and "older code*" not in text, text
    # no * in the paragraph, so no footnote explaining one (notebook 04's H200 paragraph ended with
    # one though it named its older record only in words)
    assert "*" not in text, text
    assert (f"at 64 x 1000 a record of older code ran faster: {label[gone]} at x1.80 torch's speed (commit old, "
            "its kernel changed since)") in text, text
    assert (f"at 64 x 4096 a record of older code ran faster: {label[gone]} at 3 ms (no torch timed in its run) "
            "(commit old, its kernel changed since)") in text, text
    assert "* recorded at an older commit" in w.notes()
    # the same frame read by notebooks 02 and 03's standing: the same rung for today's code, the
    # same older record named (there as the fastest record, marked, with today's beside it)
    monkeypatch.setattr(sys.modules["perfkit.lesson.standing"], "changed_since_recorded",
                        lambda df: pd.Series([c == "old" for c in df["commit"]], index=df.index))
    st = lesson.standing("softmax", lesson.records("softmax", frame=recs[recs.problem != p2], latest=False))
    r = st.iloc[0]
    assert (r["best rung"], r["commit"], r["older faster rung"]) == (label[now], "new", label[gone])
    assert r["of library"] == pytest.approx(1.5) and r["older faster of library"] == pytest.approx(2.7e-3 / 1.5e-3)
    said = lesson.takeaway(st, "torch")
    assert f"on GPU A: the best rung runs at x1.50 torch's speed over 1 problem" in said, said
    assert (f"at rows=64 cols=1000 a record of older code ran faster: {label[gone]} at x1.80 torch's speed "
            "(commit old, its kernel changed since)") in said, said


def _json_records(slug, op):
    """Every record file of ``op`` on a GPU folder, read as JSON (not through perfkit.results)."""
    out = []
    for path in sorted((Path(results.RESULTS_DIR) / slug / op).glob("*.json")):
        d = json.loads(path.read_text())
        if d.get("simulated"):
            continue
        out.append({"problem": d["problem"], "variant": d["variant"], "rung": d["rung"], "ok": d.get("check_ok"),
                    "median_s": d["timing"]["median_s"], "bytes": d["bytes"],
                    "commit": d["provenance"]["git_commit"], "utc": d["provenance"]["utc"]})
    return pd.DataFrame(out)


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
@pytest.mark.parametrize("op", ["softmax", "layernorm", "layernorm_bwd"])
def test_where_they_stand_numbers_equal_the_record_files(op):
    """On every recorded GPU: each row's best rung, torch and Triton medians and its fraction of
    copy are those of the record files, chosen by code (today's code first) as the cards choose."""
    ladder = {v.name: v for v in lesson.ladder_for(op)}
    for slug in sorted({s for s in RECORDED[RECORDED.op == op].gpu_slug}):
        gpu = RECORDED[RECORDED.gpu_slug == slug].gpu.iloc[0]
        files = _json_records(slug, op)
        w = lesson.WhereTheyStand([op], gpu)
        copy = _json_records(slug, "roofline")
        copy = copy[copy.variant == "copy"].sort_values("utc").iloc[-1]
        assert sorted(w.rows["problem"]) == sorted(set(files["problem"]))
        for _, row in w.rows.iterrows():
            f = files[files.problem == row["problem"]].sort_values("utc")
            picks = {}
            for name, g in f[f.rung > 0].groupby("variant"):
                if name not in ladder:
                    continue
                today = g[[history.source_changed_since(ladder[name], c) is False for c in g.commit]]
                picks[name] = (today if len(today) else g).iloc[-1]
            ours = [p for p in picks.values() if p["ok"] is not False]
            # today's code first (notebooks 02 and 03's rule); a faster older record named beside it
            old = [history.source_changed_since(ladder[p["variant"]], p["commit"]) is True for p in ours]
            now = [p for p, o in zip(ours, old) if not o]
            best = min(now or ours, key=lambda p: p["median_s"])
            assert row["best median_s"] == best["median_s"] and row["commit"] == best["commit"][:7]
            assert row["best rung"] == ladder[best["variant"]].label and row["older"] == (not now)
            was = [p for p, o in zip(ours, old) if o and now and p["median_s"] < best["median_s"]]
            if was:
                faster = min(was, key=lambda p: p["median_s"])
                assert (row["older faster rung"], row["older faster median_s"]) == (ladder[faster["variant"]].label,
                                                                                 faster["median_s"])
                torch = f[(f.variant == "oracle") & (f.commit == faster["commit"])]
                assert (row["older faster x torch"] == pytest.approx(torch.iloc[-1]["median_s"] / faster["median_s"])
                        if len(torch) else np.isnan(row["older faster x torch"]))
            else:
                assert row["older faster rung"] == "" and np.isnan(row["older faster median_s"])
            assert row["of copy"] == pytest.approx((best["bytes"] / best["median_s"])
                                                   / (copy["bytes"] / copy["median_s"]))
            for peer, variant in (("torch", "oracle"), ("Triton", "triton")):
                p = f[f.variant == variant]
                if p.empty:
                    assert np.isnan(row[f"{peer} median_s"])
                    continue
                same = p[p.commit == best["commit"]]
                assert row[f"{peer} median_s"] == (same if len(same) else p).iloc[-1]["median_s"]
                if same.empty:  # a peer timed only in another run is shown, never compared
                    assert np.isnan(row[f"x {peer}"])
                else:
                    assert row[f"x {peer}"] == pytest.approx(same.iloc[-1]["median_s"] / best["median_s"])


def test_notebook_04_asks_before_it_shows_where_the_ladders_stand():
    """The standing of the norm ladders comes after the prompt it answers, from the helper in one
    call (no helper defined in its cell), and nothing of it is printed unfolded."""
    import jupytext

    cells = jupytext.read(Path(__file__).resolve().parents[1] / "notebooks" / "04_normalization.py").cells
    at = next(i for i, c in enumerate(cells) if "lesson.WhereTheyStand(" in c.source)
    prompt = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "Predict before you open" in c.source)
    assert prompt < at and all(cells[j].cell_type == "code" for j in range(prompt + 1, at + 1))
    src = cells[at].source
    assert "def " not in src and "print(" not in src and "display(*where.folded(" in src


_NORM_OPS = ["softmax", "layernorm", "layernorm_bwd", "rmsnorm", "batchnorm"]
_CITED = re.compile(
    r"at (?P<label>[^,]+), (?P<rung>\d\d \w+) \((?P<table>[\w.-]+\.csv), commit (?P<commit>\w{7})[^)]*\): "
    r"DRAM throughput (?P<dram_pct>\d+)% of peak(?P<t_dram_pct> \(torch: \d+% of peak\))?, "
    r"DRAM (?P<read>[\d.]+ [kMGT]?B) read \+ (?P<written>[\d.]+ [kMGT]?B) written = (?P<ratio>[\d.]+)x the ideal "
    r"(?P<ideal>[\d.]+ [kMGT]?B)(?P<t_ratio> \(torch: [\d.]+x the ideal\))?, "
    r"achieved occupancy (?P<occ>\d+)%(?P<t_occ> \(torch: \d+%\))?, issue active (?P<issue>\d+)%(?P<t_issue> \(torch: \d+%\))?")


def _ncu_csv(gpu):
    """Every Nsight Compute CSV row of ``gpu`` (data/ncu/<its devices.yaml key>-*.csv), read with
    pandas (not through perfkit.lesson.ncu), with the table's name."""
    from perfkit.lesson.matching import spec_key

    key = spec_key(gpu, "")
    parts = [pd.read_csv(f).assign(table=f.name) for f in sorted((Path(__file__).resolve().parents[1]
                                                                  / "data" / "ncu").glob(f"{key}-*.csv"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _same_code_rows(csv, r):
    """The CSV rows of ``r``'s best rung at its problem whose commit is the record's code (one
    commit, or neither changed since: the cards' rule)."""
    from perfkit.lesson.matching import matches

    if csv.empty or "commit" not in csv:
        return csv.iloc[0:0]
    v = next(x for x in lesson.ladder_for(r["op"]) if x.name == r["best variant"])
    rows = csv[(csv.op == r["op"]) & (csv.rung == r["best rung"])]
    rows = rows[np.array([matches(r["problem"], p) for p in rows.problem], dtype=bool)]
    same = np.array([isinstance(c, str) and (c[:7] == r["commit"] or (history.source_changed_since(v, c) is False
                                                             and history.source_changed_since(v, r["commit"]) is False))
                     for c in rows.commit], dtype=bool)
    return rows[same]


def _counters_sentence(text, op):
    """The one sentence of ``op``'s counters in a GPU's paragraph ('' where none); fails on two."""
    said = [m.group(0) for m in re.finditer(rf"(?<![\w]){op}'s counters: .*?\.(?= [a-z_]+ (float|bf)|\s*$| \(\*)", text)]
    assert len(said) <= 1, said  # one sentence per op and GPU at most
    return said[0] if said else ""


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_where_they_stand_cites_each_counter_as_its_ncu_csv_row():
    """Every counter notebook 04's takeaway cites (DRAM throughput, DRAM bytes read and written
    against the ideal, achieved occupancy, issue active) equals the data/ncu CSV row it came from,
    read here with pandas: a table of the paragraph's GPU, the best rung at its problem, a commit
    of the record's code; several launches summed (bytes) or weighted by time (percentages)."""
    cited = 0
    for gpu in sorted(set(RECORDED.gpu)):
        w = lesson.WhereTheyStand(_NORM_OPS, gpu)
        text, csv = w.takeaway(), _ncu_csv(gpu)
        for op in _NORM_OPS:
            for m in _CITED.finditer(_counters_sentence(text, op)):
                rows = w.rows[(w.rows.op == op) & (w.rows["shape"] + " " + w.rows["dtype"] == m["label"])]
                assert len(rows) == 1, m["label"]
                r = rows.iloc[0]
                assert m["rung"] == r["best rung"]
                src = _same_code_rows(csv, r)
                src = src[(src.table == m["table"]) & src.commit.str.startswith(m["commit"])]
                assert len(src), (gpu, op, m.group(0))
                wt = src.time_us.to_numpy(float)
                pct = lambda col: np.average(src[col].to_numpy(float), weights=wt)  # noqa: E731
                read, written = src.dram_read_bytes.sum(), src.dram_write_bytes.sum()
                assert m["dram_pct"] == f"{pct('dram_throughput_pct'):.0f}"
                assert m["read"] == lesson.ncu.fmt_count(read, "bytes")
                assert m["written"] == lesson.ncu.fmt_count(written, "bytes")
                assert m["ratio"] == f"{(read + written) / r['bytes']:.2f}"
                assert m["ideal"] == lesson.ncu.fmt_count(r["bytes"], "bytes")
                assert m["occ"] == f"{pct('achieved_occupancy_pct'):.0f}"
                assert m["issue"] == f"{pct('issue_active_pct'):.0f}"
                # torch's figures, where cited, are its own newest row on the same GPU
                if m["t_occ"]:
                    from perfkit.lesson.matching import matches

                    t = csv[(csv.op == op) & (csv.rung == "00 oracle")]
                    t = t[np.array([matches(r["problem"], p) for p in t.problem], dtype=bool)]
                    t = t[t.table == sorted(set(t.table))[-1]]
                    tw = t.time_us.to_numpy(float)
                    assert m["t_occ"] == f" (torch: {np.average(t.achieved_occupancy_pct, weights=tw):.0f}%)"
                    assert m["t_issue"] == f" (torch: {np.average(t.issue_active_pct, weights=tw):.0f}%)"
                    assert m["t_ratio"] == (f" (torch: {(t.dram_read_bytes.sum() + t.dram_write_bytes.sum()) / r['bytes']:.2f}x"
                                            " the ideal)")
                cited += 1
    if not cited:
        pytest.skip("no Nsight Compute row of a best rung's own code on its GPU")


@pytest.mark.skipif(RECORDED.empty, reason="no GPU results recorded in data/results/")
def test_where_they_stand_says_each_ops_counters_or_that_it_has_none():
    """Per GPU and op, the takeaway has its counters sentence wherever a data/ncu row of the best
    rung's code exists at a problem on that GPU (the widest loss and the largest win that have one),
    and names every problem where the op loses to torch with no row at all there; an op with
    neither says nothing.  Found here from the CSVs, not from the code under test."""
    for gpu in sorted(set(RECORDED.gpu)):
        w = lesson.WhereTheyStand(_NORM_OPS, gpu)
        text, csv = w.takeaway(), _ncu_csv(gpu)
        for op in _NORM_OPS:
            said = _counters_sentence(text, op)
            rows = w.rows[(w.rows.op == op) & w.rows["best median_s"].notna()]
            has = rows[[len(_same_code_rows(csv, r)) > 0 for _, r in rows.iterrows()]]
            vs = has[np.isfinite(has["x torch"])]
            want = ([vs.loc[vs["x torch"].idxmin()]] if (vs["x torch"] < 1).any() else []) + (
                [vs.loc[vs["x torch"].idxmax()]] if (vs["x torch"] >= 1).any() else [])
            for r in want:
                assert f"at {r['shape']} {r['dtype']}, {r['best rung']} (" in said, (gpu, op, said)
                assert _CITED.search(said), said
            lost = rows[np.isfinite(rows["x torch"]) & (rows["x torch"] < 1)]
            from perfkit.lesson.matching import matches

            bare = [f"{r['shape']} {r['dtype']}" for _, r in lost.iterrows()
                    if not any(matches(r["problem"], p) for p in csv[(csv.op == op) & (csv.rung == r["best rung"])].problem)]
            if bare:
                assert f"no Nsight Compute row at {', '.join(bare)} (where it loses)" in said, (gpu, op, said)
            if not want and not len(lost):
                assert said == "", said


def test_where_they_stand_counters_sentence_names_torch_beside_and_only_its_own_gpu(monkeypatch):
    """Synthetic rows: the sentence cites the widest loss and the largest win that have a row,
    torch's row beside each figure, a loss without a row named; a row is asked of the record's own
    GPU only (a percentage of peak is its own GPU's)."""
    names = [v.name for v in softmax.LADDER if not v.oracle]
    label = {v.name: v.label for v in softmax.LADDER}
    best = names[-1]
    probs = {c: f"rows=64 cols={c} dtype=float32 axis=-1" for c in (1024, 2048, 4096, 8192)}
    recs = pd.DataFrame([rec for c, p in probs.items() for rec in (
        _bw_record(best, 6, 1e-3, "abc1234", "2026-01-02", problem=p),
        _bw_record("oracle", 0, {1024: 0.5e-3, 2048: 0.8e-3, 4096: 1.2e-3, 8192: 1.5e-3}[c], "abc1234", "2026-01-02",
                   problem=p))])
    copy = pd.DataFrame([{"op": "roofline", "variant": "copy", "gpu": "GPU A", "gpu_slug": "gpu-a", "gbps": 800.0,
                          "commit": "c0ffee0", "utc": "2026-01-01", "simulated": False}])
    vals = {"dram_read_bytes": 1.5e9, "dram_write_bytes": 0.5e9, "dram_bytes": 2e9, "dram_throughput_pct": 71.4,
            "achieved_occupancy_pct": 44.6, "issue_active_pct": 60.5}
    asked = []

    def row_of_code(op, problem, variant, commit, gpus):
        asked.append(list(gpus))
        if "cols=1024" in problem:
            return None, None  # the widest loss: no row
        return lesson.ncu.Counters(op, variant.name, problem, gpus[0], "abc1234ff", "t.csv", 1, 1e-3, dict(vals)), None

    monkeypatch.setattr("perfkit.lesson.bandwidth.row_of_code", row_of_code)
    monkeypatch.setattr("perfkit.lesson.bandwidth.library_row", lambda op, problem, lib, gpus: lesson.ncu.Counters(
        op, lib, problem, gpus[0], "old0000", "t0.csv", 1, 1e-3,
        {"dram_bytes": 1e9, "dram_throughput_pct": 80.2, "achieved_occupancy_pct": 90.0, "issue_active_pct": 30.0}))
    text = lesson.WhereTheyStand(["softmax"], "GPU A", frame=recs, copy_frame=copy).takeaway()
    assert asked and all(g == ["GPU A"] for g in asked)
    said = _counters_sentence(text, "softmax")
    assert said == (
        f"softmax's counters: at 64 x 2048 float32, {label[best]} (t.csv, commit abc1234): DRAM throughput 71% of "
        "peak (torch: 80% of peak), DRAM 1.5 GB read + 500 MB written = 2.00x the ideal 1 GB (torch: 1.00x the ideal), "
        "achieved occupancy 45% (torch: 90%), issue active 60% (torch: 30%); "
        f"at 64 x 8192 float32, {label[best]} (t.csv, commit abc1234): DRAM throughput 71% of peak (torch: 80% of peak), "
        "DRAM 1.5 GB read + 500 MB written = 2.00x the ideal 1 GB (torch: 1.00x the ideal), achieved occupancy 45% "
        "(torch: 90%), issue active 60% (torch: 30%); no Nsight Compute row at 64 x 1024 float32 (where it loses)."), said
    assert _CITED.search(said)


def test_a_sub_ladder_compares_each_rung_with_the_rung_it_builds_on(monkeypatch):
    """prev= (conv's tensor-core rungs are interleaved with its Winograd rungs): the diff, the
    prompt and the card's "x the rung before" all use the named rung, its record on the card's GPU."""
    shown = []
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    ladder = list(softmax.LADDER)[:4]
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, ladder=ladder, estimate=False)
    out = view.rung(ladder[3].name, prev=ladder[1].name)
    assert f"{ladder[1].label} -> {ladder[3].label}" in out[0].title
    assert f"than {ladder[1].label}" in str(out[-2]) and view.cards[ladder[3].name].prev_label == ladder[1].label
    with pytest.raises(ValueError, match="not in today's ladder"):
        view.rung(ladder[3].name, prev="no_such_rung")
    # no record: the card answers the prompt with the two estimates, and says they are estimates
    c = lesson.RungCard(op="conv", problem="p", variant="b", label="02 b", metric="tflops", estimate_s=2e-6,
                        prev_estimate_s=5e-6, prev_label="01 a", estimate_kind="estimate", model_gpu="h100-sxm",
                        bound="smem")
    assert "model estimate, no GPU record yet" in str(c) and "the model says x2.50 vs 01 a" in str(c)
    assert "not a measured speed-up" in str(c) and "no GPU record yet" in str(lesson.answer(c)).splitlines()[0]
    c.prev_record = "951 µs on G at abc1234"
    assert "(01 a's record: 951 µs on G at abc1234)" in str(c)
    card = lesson.recorded("gemm", gemm.EXAMPLE_PROBLEM, "tc_cp_async", estimate=False, prev="tensor_core")
    if card.found:
        rows = RECORDED[(RECORDED.op == "gemm") & (RECORDED.gpu == card.gpu) & (RECORDED.variant == "tensor_core")
                        & (RECORDED.problem == card.problem)]
        if len(rows):
            assert card.prev_label.endswith("tensor_core")
            assert card.x_prev == pytest.approx(card.prev_median_s / card.median_s)
            assert card.prev_median_s in set(rows.median_s)


def test_a_built_diff_shows_the_code_a_compile_time_switch_turns_on_and_off():
    """built=True cuts what a build does not compile: the body of a branch not taken (a False
    constant in an `and` decides it too), the else of one taken; conv's epilogue rung then shows
    its 16-byte store path as added code, not only EPI's comment."""
    src = ("def k(x):\n    if A:\n        x = 1\n        y = 2\n    else:\n        x = 3\n"
           "    if A and x > 0:\n        x = 4\n    elif x:\n        x = 5\n    return x")
    ann = lesson.kernel_source._annotate_branches(src, {"A": False})
    assert "if A and x > 0:  # <- not taken here (A=False)" in ann
    built = lesson.kernel_source.built_only(ann)
    assert "x = 1" not in built and "y = 2" not in built and "x = 3" in built and "x = 4" not in built
    assert "x = 5" in built and "2 lines not compiled (A=False)" in built
    on = lesson.kernel_source.built_only(lesson.kernel_source._annotate_branches(src, {"A": True}))
    assert "x = 1" in on and "x = 3" not in on and "# else: 2 lines not compiled (A=True)" in on
    L = {v.name: v for v in conv.LADDER}
    d = lesson.source_diff(L["tc_warptile"], L["tc_epilogue"], conv.EXAMPLE_PROBLEM, built=True)
    plain = lesson.source_diff(L["tc_warptile"], L["tc_epilogue"], conv.EXAMPLE_PROBLEM)
    added = [l for l in d.text.splitlines() if l.startswith("+") and "st16_u32_off(y2" in l]
    assert added and not any(l.startswith("+") and "st16_u32_off(y2" in l for l in plain.text.splitlines())


def _fake_report(lines, loop_body=None):
    """An anatomy report's SASS listing (address, instruction) and hot loop, as ptx/nvdisasm write them."""
    from types import SimpleNamespace

    sass = "\n".join(f"        /*{16 * i:04x}*/                   {ins} ;   /* 0x0000 */" for i, ins in enumerate(lines))
    loop = SimpleNamespace(body=list(loop_body)) if loop_body is not None else None
    return SimpleNamespace(sass=sass, hot_loop=loop)


def test_sass_table_counts_opcodes_by_mnemonic_in_the_code_and_the_hot_loop():
    """An opcode is the mnemonic without guard and modifiers: HMMA is not HGMMA, a guarded
    @!P0 SYNCS counts; the hot loop's count is of its body only; the forms are the distinct
    spellings; a report with no loop says so ('—'), never 0."""
    import random

    rng = random.Random()
    n_h = rng.randint(1, 5)
    body = ["HGMMA.64x128x16.F32 R24, gdesc[UR8].tnspB, R24"] * n_h + ["@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR11], R11"]
    new = _fake_report(["SYNCS.EXCH.64 URZ, [UR29], UR6", "UTMALDG.2D [UR16], [UR30]"] + body + ["EXIT"],
                       loop_body=body)
    old = _fake_report(["HMMA.16816.F32 R4, R132, R136, R4"] * 3 + ["LDSM.16.M88.4 R132, [R0]", "EXIT"])
    assert lesson.mnemonic("@!P0 HGMMA.64x128x16.F32 R24, gdesc[UR8], R24") == "HGMMA"
    c = lesson.opcode_counts(new, ["HGMMA", "HMMA", "SYNCS", "UTMALDG"])
    assert (c["HGMMA"]["kernel"], c["HGMMA"]["hot_loop"]) == (n_h, n_h)
    assert (c["HMMA"]["kernel"], c["HMMA"]["hot_loop"]) == (0, 0)
    assert (c["SYNCS"]["kernel"], c["SYNCS"]["hot_loop"]) == (2, 1)
    assert c["SYNCS"]["forms"] == ["SYNCS.EXCH.64", "SYNCS.PHASECHK.TRANS64.TRYWAIT"]
    assert (c["UTMALDG"]["kernel"], c["UTMALDG"]["hot_loop"]) == (1, 0)
    t = lesson.sass_table({"18 old": old, "20 new": new}, ["HMMA", "HGMMA", "LDSM"]).set_index("SASS")
    assert t.loc["HMMA", "18 old: in the code"] == 3 and t.loc["HMMA", "18 old: in the hot loop"] == "—"
    assert t.loc["HMMA", "20 new: in the code"] == 0 and t.loc["HGMMA", "20 new: in the hot loop"] == n_h
    assert t.loc["HGMMA", "one line of it"].startswith("HGMMA.64x128x16") and "warpgroup" in t.loc["HGMMA", "what it is"]
    assert t.loc["LDSM", "one line of it"].startswith("LDSM")  # from the last rung that has it


def test_the_hopper_rungs_sass_comes_from_the_static_store(monkeypatch):
    """Notebook 02's Hopper sections read the SASS from the anatomy (no GPU): wgmma becomes HGMMA
    with no HMMA left, tma's copies UTMALDG with no LDGSTS, its mbarriers SYNCS; the view asks
    first and folds the answer."""
    names = {v.name for v in gemm.LADDER}
    if not {"wgmma", "tma"} <= names:
        pytest.skip("the Hopper rungs are not in this ladder")
    view = lesson.LadderView("gemm", gemm.EXAMPLE_PROBLEM, estimate=False)
    rep = {n: view._report(next(v for v in gemm.LADDER if v.name == n)) for n in ("wgmma", "tma")}
    w, t = (lesson.opcode_counts(rep[n], ["HGMMA", "HMMA", "LDGSTS", "UTMALDG", "SYNCS"]) for n in ("wgmma", "tma"))
    assert w["HGMMA"]["hot_loop"] > 0 and w["HMMA"]["kernel"] == 0 and w["LDGSTS"]["kernel"] > 0
    assert t["UTMALDG"]["hot_loop"] > 0 and t["SYNCS"]["kernel"] > 0 and t["LDGSTS"]["kernel"] == 0
    shown = []
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    view.sass("tma", ["UTMALDG"], "What do the copies become?")
    assert "Predict before you look" in shown[0]._repr_html_() and "What do the copies become?" in shown[0].text
    assert shown[1]._repr_html_().startswith("<details>") and "UTMALDG.2D" in shown[1]._repr_html_()


class _StubRung:
    """A rung for check_rungs: ``mode`` 'wrong' (off by one where the reference is), 'refuse'
    (unsupported) or 'spoil' (right answer, but it writes NaN into its inputs)."""

    def __init__(self, mode):
        self.mode, self.label = mode, f"99 {mode}"

    def supports(self, p):
        from perfkit.kernels.base import UnsupportedProblem

        if self.mode == "refuse":
            raise UnsupportedProblem("takes no such problem")

    def run(self, p, x):
        ref = p.reference(x)
        off = 1 if self.mode == "wrong" else 0
        out = ({k: np.asarray(a) + off for k, a in ref.items()} if isinstance(ref, dict)
               else np.asarray(ref, dtype=p.dtype) + off)
        if self.mode == "spoil":
            for a in x.values():
                a[...] = np.nan
        return out


def test_check_rungs_runs_each_rung_on_its_own_copy_and_names_a_wrong_one():
    """check_rungs: a refused problem is a row (supported False, the reason), not a failure; a rung
    that spoils its inputs does not spoil the next rung's; a wrong output raises, naming the rung
    and the problem; the real rungs pass at an awkward shape against float64."""
    p = softmax.Problem(3, 37)
    real = [v for v in softmax.LADDER if not v.oracle][:1]
    out = lesson.check_rungs([(p, _StubRung("refuse")), (p, _StubRung("spoil"))] + [(p, v) for v in real], seed=None)
    assert list(out.label) == ["99 refuse", "99 spoil"] + [v.label for v in real]
    assert not out.supported[0] and "takes no such problem" in out.message[0]
    assert out.supported[1:].all() and out.ok[1:].all() and (out.max_abs_err[1:] <= out.atol[1:]).all()
    with pytest.raises(AssertionError, match=r"99 wrong at rows=3 cols=37"):
        lesson.check_rungs([(p, real[0]), (p, _StubRung("wrong"))])
    from perfkit.kernels.norm import layernorm, layernorm_bwd  # the same label, other inputs

    fwd, bwd = layernorm.Problem(3, 37), layernorm_bwd.Problem(3, 37)
    assert fwd.label == bwd.label
    both = lesson.check_rungs([(fwd, _StubRung("spoil")), (bwd, _StubRung("spoil"))])
    assert both.ok.all() and list(both.op) == [fwd.op, bwd.op]


def test_traffic_table_is_each_rungs_bytes_over_the_ideal():
    p = softmax.EXAMPLE_PROBLEM
    t = lesson.traffic_table(softmax.LADDER, p, 2e12, "2 TB/s")
    rungs = [v for v in softmax.LADDER if not v.oracle]
    assert f"{p.bytes / 1e6:.1f} MB" in t.text and f"{p.bytes / 2e12 * 1e6:.1f} µs at 2 TB/s" in t.text
    away = {"packed", "persist", "split_row"}  # float16 only; narrow rows; rows past shared memory: named under it
    for v in rungs:
        if v.name in away:
            assert v.label in t.text.splitlines()[-1] and v.label not in t.text.splitlines()[-2]
        else:
            assert v.label in t.html and f"{v.traffic(p).dram_bytes / p.bytes:.2f}" in t.html


def test_a_recorded_workload_profile_is_shown_per_class_beside_its_prediction(tmp_path):
    """Notebook 05's measured section: per class of the newest profile per GPU and workload, the
    measured ms and the prediction the record stored are the record's numbers; today's prediction
    is joined by the workload label; no record: an empty table (the notebook says so)."""
    assert lesson.measured_classes(results.load(op="workload", root=tmp_path)).empty
    rng = np.random.default_rng()
    label = "ResNet-50 train batch 8 bfloat16"
    classes = [{"class": c, "measured_ms": float(rng.uniform(1, 9)), "predicted_ms": float(rng.uniform(1, 9))}
               for c in ("conv", "normalization", "elementwise")]
    for i, utc in enumerate(("2026-11-20T00:00:00Z", "2026-11-25T00:00:00Z")):  # the older one must not show
        doc = {"op": "workload", "problem": label, "rung": "profile", "variant": "torch-eager-resnet50",
               "timing": {"median_s": 0.01}, "model_gpu": "h100-sxm", "simulated": False,
               "per_class": classes if i else [{"class": "conv", "measured_ms": 99.0, "predicted_ms": 1.0}],
               "provenance": {"gpu": "NVIDIA H100 80GB HBM3", "utc": utc, "git_commit": f"{i}" * 40}}
        f = tmp_path / "nvidia-h100" / "workload" / f"r{i}.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(doc))
    rec = results.load(op="workload", root=tmp_path, latest=False)
    today = pd.DataFrame({"class": ["conv", "elementwise"], "predicted_ms": [1.5, 2.5]})
    t = lesson.measured_classes(rec, {label: today}).set_index("class")
    assert list(t.index) == ["conv", "normalization", "elementwise"] and set(t.commit) == {"1" * 7}
    for c in classes:
        row = t.loc[c["class"]]
        assert row.measured_ms == c["measured_ms"] and row["predicted_ms then"] == c["predicted_ms"]
        assert np.isclose(row["measured / predicted then"], c["measured_ms"] / c["predicted_ms"])
    assert t.loc["conv", "predicted_ms today"] == 1.5 and np.isnan(t.loc["normalization", "predicted_ms today"])


def test_the_what_if_says_which_launch_time_the_timer_hides():
    """Notebook 06's what-if under two timers: behind today's spin (timing.spin_length of the modelled
    host cost) no estimate is slower and the launch time hidden is the launch leg's fall; the
    paragraph's numbers are the table's."""
    from perfkit.kernels import saxpy

    v = next(x for x in saxpy.LADDER if x.name == "grid_stride")
    t = lesson.what_if_timers(v, v.example(saxpy.Problem(n=1 << 20)), ["h100-sxm", "h200"], banks=False)
    assert list(t.gpu) == ["h100-sxm", "h200"]
    assert (t.spin_us <= t.flush_us + 1e-9).all() and (t.hidden_us >= 0).all()
    assert np.allclose(t.hidden_us, t.flush_launch_us - t.spin_launch_us)
    text = lesson.timers_paragraph(t, v.label)
    for r in t.itertuples():
        if r.hidden_us > 0:
            assert f"{lesson.fmt_seconds(r.hidden_us / 1e6)} on {r.gpu}" in text
        assert f"{r.gpu} {r.spin_bound}" in text
    fake = pd.DataFrame({"gpu": ["a", "b"], "flush_us": [5.0, 9.0], "flush_bound": ["dram", "launch"],
                         "flush_launch_us": [2.0, 7.0], "spin_us": [5.0, 4.0], "spin_bound": ["dram", "dram"],
                         "spin_launch_us": [2.0, 2.0], "hidden_us": [0.0, 5.0], "host_us": [50.0, 50.0]})
    text = lesson.timers_paragraph(fake, "x")
    assert "binds x on b" in text and "5 µs on b" in text and "a under the flush-only timer, b behind the spin" in text
    assert "the bound changes on b dram (was launch) and stays on a dram" in text
    same = fake.assign(flush_bound=["dram", "dram"])  # no bound moves: said so, not "the bounds become"
    text = lesson.timers_paragraph(same, "x")
    assert "no GPU's bound changes (a dram, b dram)" in text and "become" not in text


def test_progress_outside_a_kernel_leaves_one_line(capsys):
    """With no kernel (a script, the CLI) there is no widget: the bar counts, and closing it
    prints one line, once; bench.sweep takes it as its bar (notebook 01's sweep)."""
    from perfkit import bench
    from perfkit.kernels import saxpy

    bar = lesson.progress(3, "demo")
    bar.set_postfix_str("rung 1")
    bar.update()
    bar.update(2)
    assert capsys.readouterr().out == ""
    bar.close()
    bar.close()
    assert capsys.readouterr().out == "demo: 3 of 3 done\n"
    t = bench.sweep([saxpy.Problem(n=37)], saxpy.LADDER[1:3], record=False, progress=lesson.progress)
    assert list(t.status) == ["ok", "ok"] and capsys.readouterr().out == "sweep: 2 of 2 done\n"


def test_progress_in_a_kernel_shows_a_widget_and_a_saved_notebook_keeps_one_line(tmp_path):
    """In a kernel the bar is a widget while the work runs (its model reaches the front end:
    nbclient keeps its state, the last value the total), and a saved notebook holds, in its
    place, one line: no widget view and no tqdm text stub (tests/test_browser.py checks the
    widget renders in JupyterLab).  The module alone is loaded in the kernel (it imports
    nothing of perfkit): a kernel importing perfkit would take seconds more."""
    import nbformat
    from nbclient import NotebookClient
    from notebook_checks import progress_stubs

    module = importlib.import_module("perfkit.lesson.progress")  # (lesson.progress is the function)

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('progress', {str(module.__file__)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "bar = m.progress(total=3, desc='sweep')\n"
        "for k in range(3):\n    bar.set_postfix_str(f'rung {k}'); bar.update(1)\n"
        "bar.close()\nprint('after')")]
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outs = nb.cells[0].outputs
    shown = [o for o in outs if o.output_type == "display_data"]
    assert len(shown) == 1 and dict(shown[0].data) == {"text/plain": "sweep: 3 of 3 done"}, outs
    assert [o.text for o in outs if o.output_type == "stream"] == ["after\n"], outs
    assert progress_stubs(nb) == []
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    bars = [s["state"] for s in states if s["model_name"] == "IntProgressModel"]
    assert len(bars) == 1 and bars[0]["value"] == bars[0]["max"] == 3 and bars[0]["description"] == "sweep"


def test_progress_stubs_are_found():
    """The check every executed notebook gets (tests/notebook_checks.py) finds tqdm's stub."""
    from notebook_checks import progress_stubs

    stub = {"cells": [{"cell_type": "code", "source": "", "outputs": [{
        "output_type": "display_data", "metadata": {},
        "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                 "text/plain": ["sweep:   0%|          | 0/8 [00:00<?, ?it/s]"]}}]}]}
    assert progress_stubs(stub) == [(0, "sweep:   0%|          | 0/8 [00:00<?, ?it/s]")]
    stub["cells"][0]["outputs"][0]["data"] = {"text/plain": "sweep: 8 of 8 done"}
    assert progress_stubs(stub) == []


def test_a_card_beside_a_record_estimates_it_behind_that_records_timer_as_validate_does():
    """The estimate on a card that shows a record is the model's behind what that record's timer
    queued ahead of each sample (its L2 flush and spin kernel: ``model.record_ahead``), the
    estimate ``perfkit model validate`` sets against the record, not the flush-only timer's
    (which leaves the host's launch cost inside the window: conv tc_warptile read "bound by
    launch" at 60 us beside its 47 us record, where validate's estimate is 28.5 us and ALU-bound);
    the rung before's estimate is behind its own record's timer."""
    import json

    from perfkit.kernels import conv

    card = lesson.recorded("conv", conv.EXAMPLE_PROBLEM, "tc_warptile", gpu="NVIDIA H200")
    assert card.found and card.gpu == "NVIDIA H200"
    doc = json.loads(Path(card.path).read_text())
    ahead = model.record_ahead(doc["timing"], "h200")
    assert ahead is not None and ahead > doc["timing"]["extra"]["spin_s"]
    v = next(u for u in conv.LADDER if u.name == "tc_warptile")
    want = model.estimate(v, conv.Problem(**doc["params"]), "h200", ahead_s=ahead)
    assert card.estimate_s == pytest.approx(want.seconds) and card.bound == want.bound
    assert card.legs.get("launch", 0.0) < 0.2 * card.estimate_s
    flush_only = model.estimate(v, conv.Problem(**doc["params"]), "h200", ahead_s=model.flush_seconds(model.rates("h200")))
    assert flush_only.seconds > want.seconds  # the flush alone leaves host time in the window
    # the default is today's timer (flush and spin): what this record's timer did
    assert model.estimate(v, conv.Problem(**doc["params"]), "h200").seconds == pytest.approx(want.seconds)


def test_tuning_table_and_paragraph_come_from_the_newest_table_of_each_gpu(tmp_path):
    """data/tuning/: the newest table a GPU, the timed configurations fastest first with the
    model's rank beside them, the tile in words; the paragraph names the fastest, the rung's own and
    the rank the model gave the fastest before the timing; none: says how to make one."""
    import json as _json

    from perfkit import lesson

    assert lesson.tuning_table(tmp_path).empty and "--parts tune" in lesson.tuning_paragraph(lesson.tuning_table(tmp_path))
    cols = "rung,config,default,model_rank,model_us,status,median_us,x_oracle,simulated,commit\n"
    own = _json.dumps({"WARPS_M": 2, "WARPS_N": 2, "MT": 4, "NT8": 8, "BK": 64, "STAGES": 3, "GROUP_M": 8})
    wide = _json.dumps({"WARPS_M": 2, "WARPS_N": 4, "MT": 4, "NT8": 8, "BK": 32, "STAGES": 3, "GROUP_M": 8})
    (tmp_path / "h200-2026-11-01.csv").write_text(cols + f'18 tc_deep,"{own.replace(chr(34), chr(34) * 2)}",True,1,300,ok,999,0.2,False,old\n')
    (tmp_path / "h200-2026-11-29.csv").write_text(
        cols + f'18 tc_deep,"{own.replace(chr(34), chr(34) * 2)}",True,1,318.7,ok,312.0,0.605,False,abc\n'
        + f'18 tc_deep,"{wide.replace(chr(34), chr(34) * 2)}",False,16,390.5,ok,270.0,0.699,False,abc\n'
        + f'18 tc_deep,"{wide.replace(chr(34), chr(34) * 2)}",False,17,391.0,error,,,False,abc\n')
    t = lesson.tuning_table(tmp_path)
    assert list(t["tile"]) == ["128x256x32, 3 stages, 8 warps", "128x128x64, 3 stages, 4 warps"]
    assert list(t["median_us"]) == [270.0, 312.0] and set(t["commit"]) == {"abc"}
    text = lesson.tuning_paragraph(t)
    assert "the fastest, 128x256x32, 3 stages, 8 warps, ran 270 µs (x0.70 of the oracle)" in text
    assert "the rung's own, 128x128x64, 3 stages, 4 warps, 312 µs (x0.60)" in text
    assert "ranked it 16 of 3" in text


def test_tuning_paragraph_names_rung_11_when_it_wins_rung_19s_unit(tmp_path):
    """Rung 19's tune unit times rung 11 beside it: one unit, one paragraph, the winner named with
    its own rung where it is not the unit's."""
    import json as _json

    from perfkit import lesson

    own = _json.dumps({"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 16, "LR": 8, "MIN_BLOCKS": 1}).replace('"', '""')
    r11 = _json.dumps({"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "LR": 4, "MIN_BLOCKS": 2}).replace('"', '""')
    (tmp_path / "h100-sxm-2026-11-29.csv").write_text(
        "unit,rung,config,default,model_rank,model_us,status,median_us,x_oracle,simulated,commit\n"
        f'tune-gemm-float32,19 simt_wide,"{own}",True,2,4037,ok,2970,0.91,False,abc\n'
        f'tune-gemm-float32,11 autotuned,"{r11}",False,1,3556,ok,2950,0.92,False,abc\n')
    t = lesson.tuning_table(tmp_path)
    assert list(t["rung"]) == ["11 autotuned", "19 simt_wide"] and list(t["tile"]) == ["128x128x16, 8 warps",
                                                                                       "128x256x8, 8 warps"]
    text = lesson.tuning_paragraph(t)
    assert text.startswith("h100-sxm, rung 19 simt_wide: 2 configurations timed; the fastest, 128x128x16, 8 warps "
                           "(rung 11 autotuned), ran 2.95 ms (x0.92 of the oracle)"), text
    assert "ranked it 1 of 2" in text


def test_a_factor_across_code_versions_names_the_same_code_factor_of_another_gpu():
    """The H100's batchnorm ticket card (516b940) compared with the H100's split of 7c7b2e0 (a
    kernel changed since): x2.98 "across code versions".  Where another GPU holds records of
    today's code of both rungs, the card gives that factor too, from those two records."""
    from perfkit.kernels import registry

    bn = registry.module("batchnorm")
    table = lesson.records("batchnorm")
    seen = 0
    for v in [x for x in bn.LADDER if not x.oracle]:
        card = lesson.recorded("batchnorm", bn.GPU_SWEEP[0], v.name, estimate=False, table=table)
        if not (card.found and card.prev_today):
            continue
        seen += 1
        g, a, b = card.prev_today
        assert card.prev_across and g != card.gpu
        on = table[(table["gpu"] == g) & (table["problem"] == card.problem)]
        assert a in set(on[on["variant"] == v.name]["median_s"]) and b in set(on["median_s"])
        assert f"On {g}, where both records are of today's code: x{b / a:.2f}" in card.verdict()
    if not seen:
        pytest.skip("no card here compares across code versions where another GPU has both of today's code")


def test_a_ladder_tables_factor_never_crosses_dtypes():
    """GEMM 19 simt_wide (float32) comes after the float16-only 18 tc_deep: its row in a ladder's
    summary table (one GPU's, or every GPU's) is compared with 11 autotuned at the same problem,
    not with tc_deep at its own (the table read "x0.11 vs 18 tc_deep (at its own problem)"), as
    its section's card is."""
    p = gemm.Problem(4096, 4096, 4096, "float32")
    view = lesson.LadderView("gemm", p, table=lesson.records("gemm"), estimate=False)
    by = {v.name: v for v in gemm.LADDER}
    assert view.prev_at(by["simt_wide"], p).name == "autotuned" and view.prev_at(by["naive"], p) is None
    rows = view.all_cards(p) + [c for g in ("NVIDIA H100 80GB HBM3", "NVIDIA H200") for c in view._cards_on(p, g)]
    for card in (c for c in rows if c.variant == "simt_wide"):
        assert card.prev_label == by["autotuned"].label and not card.prev_problem


def test_a_sections_explicit_rung_before_is_its_rows_in_the_tables(monkeypatch):
    """Conv's tc_cp_async section is compared with tc_ldmatrix (its sub-ladder's rung), not with
    11 winograd_tiled just before it in ladder order: the summary tables compare its row with the
    same rung (the table read "x5.68 vs 11 winograd_tiled")."""
    from perfkit.kernels import conv

    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    by = {v.name: v for v in conv.LADDER}
    p = by["tc_cp_async"].example(conv.EXAMPLE_PROBLEM)
    view = lesson.LadderView("conv", conv.EXAMPLE_PROBLEM, table=lesson.records("conv"), estimate=False)
    assert view.prev_at(by["tc_cp_async"], p).name == "winograd_tiled"  # ladder order, before the section
    view.rung("tc_cp_async", prev="tc_ldmatrix")
    assert view.prev_at(by["tc_cp_async"], p).name == "tc_ldmatrix"
    for card in (c for g in ("NVIDIA H100 80GB HBM3", "NVIDIA H200") for c in view._cards_on(p, g)
                 if c.variant == "tc_cp_async"):
        assert card.prev_label == by["tc_ldmatrix"].label


def test_a_record_with_no_commit_gets_a_card(tmp_path):
    """A record made where git could not say the commit (a copy with no .git and no
    PERFKIT_GIT_COMMIT: provenance git_commit null) is NaN in pandas' string column: its card, and
    the card of the rung after it, said TypeError ('float' object is not subscriptable) in 02."""
    import json
    import shutil

    from perfkit import paths, results

    src = sorted((paths.DATA / "results").glob("nvidia-h100-80gb-hbm3/gemm/*-r2[01]-*.json"))
    if len({p.name.split("-r")[1] for p in src}) < 2:
        pytest.skip("no H100 records of wgmma and tma")
    folder = tmp_path / "nvidia-h100-80gb-hbm3" / "gemm"
    folder.mkdir(parents=True)
    for p in src:
        shutil.copy(p, folder / p.name)
    tma = sorted(folder.glob("*-r21-tma-*.json"))[-1]
    doc = json.loads(tma.read_text())
    doc["provenance"]["git_commit"] = None
    doc["provenance"]["utc"] = "2026-12-02T09:00:00+00:00"
    (folder / "20261202T090000Z-r21-tma-00000000.json").write_text(json.dumps(doc))
    raw = results.load(op="gemm", root=tmp_path, latest=False)
    p = "m=4096 n=4096 k=4096 dtype=float16"
    for table in (raw, lesson.records("gemm", frame=raw)):
        card = lesson.recorded("gemm", p, "tma", table=table, estimate=False)
        assert card.found and card.commit is None and card.date == "2026-12-02"
        assert "commit ?" in card.provenance and "nan" not in card.provenance
        str(card), card._repr_html_()
    for table in (raw, lesson.records("gemm", frame=raw)):  # the rung after: tma is its rung before
        card = lesson.recorded("gemm", p, "warp_specialized", table=table, estimate=False)
        assert card.prev_label.endswith("tma") and card.prev_commit == ""


def test_the_shown_gpu_is_the_newest_known_gpu_not_one_with_no_ceilings(monkeypatch):
    """A newer record of a GPU devices.yaml does not list would draw its records against another
    GPU's ceilings: the newest record of a known GPU picks the notebook's GPU; an unknown GPU is
    shown only where no known one has records, or where asked for by name."""
    from perfkit.lesson import matching

    df = pd.DataFrame({"gpu": ["NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA Foo 9000"],
                       "gpu_slug": ["nvidia-h200", "nvidia-h100-80gb-hbm3", "nvidia-foo-9000"],
                       "utc": ["2026-11-27T00:00", "2026-11-28T00:00", "2026-12-01T00:00"], "simulated": False})
    monkeypatch.setattr(matching, "_load", lambda op, root: df)
    assert matching.shown_gpu(None, ["gemm"]) == "NVIDIA H100 80GB HBM3"
    assert matching.shown_gpu("nvidia-foo-9000", ["gemm"]) == "NVIDIA Foo 9000"
    monkeypatch.setattr(matching, "_load", lambda op, root: df.iloc[2:])
    assert matching.shown_gpu(None, ["gemm"]) == "NVIDIA Foo 9000"


# --- which records exist, in words read from the records (lesson.coverage) ----------------------
_F16 = "rows=4096 cols=4096 dtype=float16 axis=-1"
_F32 = "rows=4096 cols=4096 dtype=float32 axis=-1"


def test_where_a_rung_was_recorded_is_read_from_the_records():
    """The sentence follows the records: none, one GPU, a second GPU, a newer run, another problem,
    a pinned GPU; never a claim the frame does not hold."""
    none = pd.DataFrame([_bw_record("tuned", 6, 1e-3, "aaaaaaa1", "2026-01-01T00:00", problem=_F32)])
    assert lesson.recorded_where("softmax", "packed", frame=none) == "No GPU has timed the rung packed yet."
    one = pd.concat([none, pd.DataFrame([_bw_record("packed", 9, 1e-3, "bbbbbbb2", "2026-02-03T04:05",
                                                    problem=_F16, gpu="NVIDIA H100 80GB HBM3")])])
    s = lesson.recorded_where("softmax", "packed", frame=one)
    assert s == "The rung packed was recorded on NVIDIA H100 80GB HBM3 (2026-02-03, commit bbbbbbb), at 4096 x 4096 float16 only."
    assert "No GPU" not in s
    # asked at a problem it has no record at: said first, then where its records are
    at = lesson.recorded_where("softmax", "packed", at="rows=4096 cols=16384 dtype=float16 axis=-1", frame=one)
    assert at.startswith("No GPU has timed the rung packed at 4096 x 16384 float16 yet: the rung packed was recorded on NVIDIA H100")
    assert not lesson.recorded_where("softmax", "packed", at=_F16, frame=one).startswith("No GPU")
    two = pd.concat([one, pd.DataFrame([
        _bw_record("packed", 9, 1e-3, "ccccccc3", "2026-01-05T00:00", problem=_F16, gpu="GPU B"),
        _bw_record("packed", 9, 1e-3, "ddddddd4", "2026-03-01T00:00", problem=_F32, gpu="GPU B"),
        _bw_record("smem_row", 7, 1e-3, "ddddddd4", "2026-03-01T00:00", problem=_F32, gpu="GPU B")])])
    s = lesson.recorded_where("softmax", ["smem_row", "packed", "persist"], frame=two)
    assert s.startswith("The rungs smem_row and packed were first recorded on GPU B (2026-01-05, commit ccccccc), "
                        "then on NVIDIA H100 80GB HBM3 (2026-02-03, commit bbbbbbb), at 4096 x 4096 float16 and "
                        "4096 x 4096 float32"), s
    assert "the newest record is GPU B's (2026-03-01, commit ddddddd)" in s and "the rung persist has no record yet" in s
    assert lesson.recorded_where("softmax", "smem_row", gpu="NVIDIA H100 80GB HBM3", frame=two) == \
        "NVIDIA H100 80GB HBM3 has not timed the rung smem_row yet."
    # simulated records are no GPU's
    sim = one.assign(simulated=True)
    assert lesson.recorded_where("softmax", "packed", frame=sim) == "No GPU has timed the rung packed yet."


def test_each_gpus_recording_runs_are_listed_with_todays_rung_numbers():
    rung = {v.name: v.rung for v in softmax.LADDER}
    recs = pd.DataFrame([_bw_record(n, rung[n], 1e-3, "aaaaaaa", "2026-01-01T00:00", problem=_F32)
                         for n in ("naive", "fused", "warp")]
                        + [_bw_record("oracle", 0, 1e-3, "aaaaaaa", "2026-01-01T00:00", problem=_F32),
                           _bw_record("persist", rung["persist"], 1e-3, "bbbbbbb", "2026-01-02T00:00",
                                      problem=_F16, gpu="GPU B")])
    runs = lesson.recording_runs("softmax", frame=recs)
    assert list(runs["gpu"]) == ["GPU A", "GPU B"] and runs["rungs"].iloc[0] == sorted(rung[n] for n in ("naive", "fused", "warp"))
    s = lesson.runs_sentence("softmax", frame=recs)
    assert f"On GPU A: rungs {rung['naive']}-{rung['warp']} on 2026-01-01 (commit aaaaaaa)." in s
    assert f"On GPU B: rungs {rung['persist']} on 2026-01-02 (commit bbbbbbb)." in s
    assert s.endswith("The records are at 4096 x 4096 float16 and 4096 x 4096 float32.")
    assert "On GPU B: 1 record on 2026-01-02" in lesson.runs_sentence(["softmax", "rmsnorm"], frame=recs)
    assert lesson.runs_sentence("softmax", frame=recs.iloc[:0]).startswith("No GPU has timed softmax yet")
    assert lesson.runs_sentence("softmax", gpu="GPU C", frame=recs).startswith("GPU C has not timed softmax")
    from perfkit.lesson.coverage import _rung_ranges

    assert _rung_ranges([14, 1, 2, 3, 11, 4]) == "1-4, 11, 14"
    assert lesson.problem_words("m=4096 n=4096 k=4096 dtype=float16") == "4096³ float16"
    assert lesson.problem_words("m=8192 n=1024 k=4096 dtype=float32") == "8192 x 1024 x 4096 float32"


def test_the_copy_sentence_quotes_each_gpus_newest_copy_record():
    """A newer copy record changes the sentence (the prose it replaces went stale that way)."""
    from perfkit import specs

    def copy(gpu, gbps, utc, commit="c0ffee0", simulated=False):
        return {"op": "roofline", "variant": "copy", "gpu": gpu, "gpu_slug": gpu.lower(), "gbps": gbps,
                "commit": commit, "utc": utc, "simulated": simulated}

    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    frame = pd.DataFrame([copy(h100, 2800.0, "2026-01-01"), copy(h200, 3900.0, "2026-01-02", "1234567")])
    s = lesson.copy_sentence(frame=frame)
    pub = specs.get(h100).dram_bw
    assert f"{2800e9 / pub:.0%} of the published {pub / 1e12:.2f} TB/s on {h100} (2.80 TB/s, 2026-01-01" in s
    assert f"on {h200} (3.90 TB/s, 2026-01-02, commit 1234567)" in s
    newer = pd.concat([frame, pd.DataFrame([copy(h100, 3000.0, "2026-02-01", "7654321"),
                                            copy(h100, 9999.0, "2026-03-01", simulated=True)])])
    s2 = lesson.copy_sentence(h100, frame=newer)
    assert f"{3000e9 / pub:.0%} of the published" in s2 and "3.00 TB/s, 2026-02-01, commit 7654321" in s2
    assert h200 not in s2 and "9999" not in s2
    assert "no published figure" in lesson.copy_sentence(frame=pd.DataFrame([copy("Mystery GPU", 100.0, "2026-01-01")]))
    assert lesson.copy_sentence(h200, frame=frame.iloc[:1]).startswith("No copy kernel has been timed on a real GPU on NVIDIA H200")
    assert lesson.copy_sentence(frame=frame.iloc[:0]).startswith("No copy kernel has been timed")


def test_a_comparison_or_timer_check_that_is_not_here_is_said_not_raised(capsys, tmp_path):
    assert lesson.comparison("gpu=no-such-gpu", "gpu=h100", root=tmp_path) is None
    assert "Nothing to compare [gpu=no-such-gpu] with [gpu=h100]" in capsys.readouterr().out
    assert lesson.timer_check("no-such-run", "a run that never was") is None
    assert "No timer check of a run that never was here (data/timer/no-such-run.csv" in capsys.readouterr().out
    from perfkit import paths

    kept = sorted((paths.DATA / "timer").glob("*.csv"))
    if kept:
        assert len(lesson.timer_check(kept[0].stem, "a kept run")) > 0


def test_timer_runs_are_read_from_data_timer_and_the_newest_of_each_gpu_is_behind_the_spin(tmp_path, monkeypatch):
    """Notebook 01 shows the first timer's run and each GPU's newest run behind the spin kernel,
    from data/timer/'s descriptions, not from file names typed into the notebook."""
    import json

    from perfkit import paths

    (tmp_path / "timer").mkdir()
    for stem, gpu, date, spin in (("a-1", "GPU A", "2026-01-01", False), ("a-2", "GPU A", "2026-01-03", True),
                                  ("b-1", "GPU B", "2026-01-02", True), ("a-3", "GPU A", "2026-01-05", True)):
        (tmp_path / "timer" / f"{stem}.json").write_text(json.dumps(
            {"table": f"{stem}.csv", "gpu": gpu, "date": date, "commit": "abcdef0123"}))
        (tmp_path / "timer" / f"{stem}.csv").write_text("op,variant,measure_s" + (",spin_s" if spin else "") + "\n")
    (tmp_path / "timer" / "gone.json").write_text(json.dumps({"table": "gone.csv", "gpu": "GPU C"}))  # no table here
    monkeypatch.setattr(paths, "DATA", tmp_path)
    runs = lesson.timer_runs()
    assert list(runs["name"]) == ["a-1", "b-1", "a-2", "a-3"] and list(runs["spin"]) == [False, True, True, True]
    assert runs["when"].iloc[0] == "GPU A (2026-01-01, commit abcdef0), before the spin kernel"
    newest = lesson.newest_timer_runs()
    assert list(newest["name"]) == ["a-3", "b-1"] and newest["when"].iloc[0].endswith("with the spin kernel")


def test_a_timer_check_names_its_rungs_as_today_whatever_numbers_its_run_gave_them(tmp_path, monkeypatch):
    """The first H100 timer check (7c7b2e0) labelled its rungs with that run's numbers ("09
    warptile", "10 autotuned"; today 09 is index32) while the newer checks write bare names: notebook
    01 showed both side by side.  timer_check's ``variant`` is the bare name; ``label_then`` keeps
    what the run wrote."""
    from perfkit import paths

    (tmp_path / "timer").mkdir()
    (tmp_path / "timer" / "old.csv").write_text(
        "op,variant,measure_s\ngemm,09 warptile,1e-3\ngemm,10 autotuned,1e-3\nsoftmax,fused,1e-4\n")
    monkeypatch.setattr(paths, "DATA", tmp_path)
    t = lesson.timer_check("old", "an old run")
    assert list(t["variant"]) == ["warptile", "autotuned", "fused"]
    assert list(t["label_then"]) == ["09 warptile", "10 autotuned", "fused"]


def _newest_timer_tables():
    """(when, table) of each GPU's newest timer check behind the spin, read here straight from data/timer/."""
    import json

    from perfkit import paths

    newest = {}
    for meta in sorted((paths.DATA / "timer").glob("*.json")):
        d = json.loads(meta.read_text())
        t = pd.read_csv(meta.parent / d["table"])
        if "spin_s" in t and (d["gpu"] not in newest or d["date"] >= newest[d["gpu"]][0]):
            newest[d["gpu"]] = (d["date"], d["commit"][:7], t)
    return [(f"{g} ({date}, commit {c}), with the spin kernel", t) for g, (date, c, t) in sorted(newest.items())]


def test_notebook_01_shows_the_recorded_timer_checks_numbers_as_data_timer_holds_them(capsys):
    """Sections 1, 3 and 4 of notebook 01 (simulator): measure against do_bench per run, the
    L2-sized copy hot and cold, the empty kernel, from data/timer/'s records, each number as its
    table holds it, in the order the notebook shows them; the helpers print nothing themselves."""
    newest = _newest_timer_tables()
    if not newest:
        pytest.skip("no timer check behind the spin kernel in this copy of data/timer/")
    shown = lesson.timer_vs_do_bench()
    # the first timer's run (before the spin kernel) first, then each GPU's newest, GPUs by name
    assert "before the spin kernel" in shown[0][0]
    assert [s.split(": events")[0] for s, _ in shown[1:]] == [f"Recorded on {w}" for w, _ in newest]
    for (sentence, table), (when, t) in zip(shown[1:], newest):
        rungs = t[t["op"] != "timer"]
        assert sentence.endswith(f"measure / do_bench from {rungs.ratio.min():.2f} to {rungs.ratio.max():.2f} "
                                 f"over {len(rungs)} rungs")
        assert isinstance(table, lesson.prompts.Rendered) and table.html.startswith("<details><summary>")
        assert f"the {len(rungs)} rungs' times on {when.split(' (')[0]} (open after" in table.text
        assert f"{rungs.measure_s.iloc[0] * 1e6:.2f}" in table.text and "timer" not in table.text.split("\n", 2)[2]
    hot_cold = lesson.hot_cold_lines()
    assert len(hot_cold) == len(newest)
    for line, (when, t) in zip(hot_cold, newest):
        c = t[(t.op == "timer") & (t.variant == "copy16")].set_index("l2")["measure_s"]
        assert line == (f"  {when}: the same L2-sized copy, hot {c['hot'] * 1e6:.2f} us, cold {c['cold'] * 1e6:.2f} us "
                        f"(hot / cold = {c['hot'] / c['cold']:.2f})")
        assert c["hot"] <= c["cold"] * 1.02  # behind the spin, a hot L2 is no slower (section 3's test of the timer)
    empty = lesson.empty_kernel_lines()
    assert len(empty) == len(newest)
    for line, (when, t) in zip(empty, newest):
        e = t[(t.op == "timer") & (t.variant == "empty")].iloc[0]
        assert line == (f"On {when}: {e.measure_s * 1e6:.2f} us by events (do_bench: {e.do_bench_s * 1e6:.2f} us), "
                        "the GPU's part of a launch.")
        assert 0.5e-6 < e.measure_s < 20e-6  # a launch's GPU part: microseconds, not the host's tens
    assert capsys.readouterr().out == ""


def test_notebook_01s_timer_views_say_what_a_copy_of_data_timer_lacks(tmp_path, monkeypatch):
    """No timer check at all: one sentence and no table; a check without the copy or the empty
    kernel (the first timer's had neither): a line saying so for that GPU."""
    import json

    from perfkit import paths

    (tmp_path / "timer").mkdir()
    monkeypatch.setattr(paths, "DATA", tmp_path)
    assert lesson.timer_vs_do_bench() == [
        ("No timer check in data/timer/ here (tools/record_gpu.py --parts timer records one).", None)]
    assert lesson.hot_cold_lines() == [] and lesson.empty_kernel_lines() == []
    (tmp_path / "timer" / "g.json").write_text(json.dumps({"table": "g.csv", "gpu": "GPU G", "date": "2026-01-01"}))
    (tmp_path / "timer" / "g.csv").write_text("op,variant,l2,measure_s,do_bench_s,ratio,spin_s\n"
                                              "saxpy,naive,cold,2e-6,1e-6,2.0,1e-4\ntimer,copy16,hot,1e-6,1e-6,1.0,1e-4\n")
    (sentence, table), = lesson.timer_vs_do_bench()
    assert sentence == ("Recorded on GPU G (2026-01-01), with the spin kernel: events around the launch against "
                        "triton's do_bench, measure / do_bench from 2.00 to 2.00 over 1 rungs")
    assert "2.0" in table.text and "copy16" not in table.text
    assert lesson.hot_cold_lines() == ["  GPU G (2026-01-01), with the spin kernel: its timer check holds no hot/cold "
                                       "pair of the copy"]
    assert lesson.empty_kernel_lines() == ["On GPU G (2026-01-01), with the spin kernel: its timer check holds no empty "
                                           "kernel."]


def test_problem_words_among_others_says_only_what_tells_them_apart():
    a = "n=32 c=128 h=28 w=28 k=128 r=3 s=3 stride=1 pad=1 dtype=float16 layout=NHWC"
    b = "n=32 c=128 h=28 w=28 k=128 r=3 s=3 stride=1 pad=1 dtype=float32 layout=NCHW"
    c = "n=32 c=64 h=56 w=56 k=64 r=1 s=1 stride=1 pad=0 dtype=float16 layout=NHWC"
    assert lesson.problem_words(a, among=[a, b]) == "float16 NHWC"
    assert lesson.problem_words(a, among=[a, c]) == "c=128 h=28 w=28 k=128 r=3 s=3 pad=1"
    assert lesson.problem_words(a, among=[a]) == lesson.problem_words(a)  # nothing to tell apart: all of it
    assert lesson.problem_words("m=4096 n=4096 k=4096 dtype=float32", among=["m=8192 n=8192 k=8192 dtype=float32"]) \
        == "4096³ float32"


def test_an_opcode_counts_its_underscore_family_and_every_asked_opcode_says_what_it_is():
    """barrier.cluster becomes UCGABAR_ARV and UCGABAR_WAIT (no dot before the suffix): the table
    of notebook 02's cluster section counted 0 UCGABAR and showed '—' for the instruction its own
    prompt asks about.  And every opcode a notebook asks about has its line in the glossary."""
    lines = ["MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU", "UCGABAR_ARV", "UCGABAR_WAIT", "@!P0 SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR4], RZ",
             "EXIT"]
    c = lesson.opcode_counts(_fake_report(lines), ["UCGABAR", "MEMBAR", "SYNCS", "UCGA"])
    assert c["UCGABAR"]["kernel"] == 2 and c["UCGABAR"]["forms"] == ["UCGABAR_ARV", "UCGABAR_WAIT"]
    assert c["MEMBAR"]["kernel"] == 2 and c["SYNCS"]["kernel"] == 1
    assert c["UCGA"]["kernel"] == 0  # a prefix of a mnemonic is not its family
    t = lesson.sass_table({"24 cluster": _fake_report(lines)}, ["UCGABAR"]).set_index("SASS")
    assert t.loc["UCGABAR", "one line of it"] == "UCGABAR_ARV" and t.loc["UCGABAR", "what it is"]
    asked = set()
    for path in sorted(Path(__file__).resolve().parents[1].glob("notebooks/0*.py")):
        for m in re.finditer(r"\.sass\(\s*\"\w+\",\s*\[([^\]]*)\]", path.read_text()):
            asked |= set(re.findall(r"\"(\w+)\"", m.group(1)))
    assert "UCGABAR" in asked and "USETMAXREG" in asked
    from perfkit.lesson.sass import GLOSSARY
    assert not {op for op in asked if not GLOSSARY.get(op)}, "opcodes a notebook asks about with no 'what it is'"


def test_a_cards_counter_list_ends_as_a_sentence_before_the_moved_counter():
    """Notebooks 02 and 04 read "achieved occupancy 99.9% (+0.7 points) The counter that moved most":
    the list and the next sentence run together with no full stop."""
    from perfkit.lesson.ncu import counters_text

    g = "NVIDIA H100 80GB HBM3"
    text = counters_text(_counters(g, 1e-4, warp_instructions=2e6, achieved_occupancy_pct=60.0),
                         _counters(g, 2e-4, warp_instructions=4e6, achieved_occupancy_pct=50.0))
    assert "The counter that moved most" in text, text
    assert re.search(r"points\)\. The counter that moved most", text), text
    alone = counters_text(_counters(g, 1e-4, warp_instructions=2e6), None)
    assert not alone.endswith(".") and "The counter" not in alone


def test_counts_are_singular_for_one():
    """Notebook 03 printed "the 1 measured layer(s) of 23"."""
    assert lesson.plural(1, "measured layer") == "1 measured layer"
    assert lesson.plural(3, "GPU") == "3 GPUs" and lesson.plural(0, "problem") == "0 problems"
    assert lesson.plural(2, "child", "children") == "2 children"
    for path in sorted(Path(__file__).resolve().parents[1].glob("notebooks/0[1-6]*.py")):
        assert "(s)" not in re.sub(r"#.*", "", path.read_text()), f"{path.name} prints a '(s)' plural"


def test_a_predicted_steps_class_table_has_a_dash_not_nan():
    """Notebook 05's per-class tables ended in a total row whose step_speedup_2x read NaN."""
    t = pd.DataFrame({"class": ["gemm", "conv"], "ops": [3, 106], "GFLOP": [0.02, 48.57], "GB": [0.012, 0.357],
                      "predicted_ms": [0.006, 0.217], "share": [0.007, 0.26], "flop_share": [0.0005, 0.99],
                      "step_speedup_2x": [1.004, 1.149]})
    from perfkit import workload

    text = workload.format_table(t)  # the CLI's table and notebook 05's
    assert "NaN" not in text and "nan" not in text
    total = text.splitlines()[-1].split()
    assert total[0] == "total" and total[-1] == "—" and total[1] == "109"
    assert "1.004x" in text and "1.149x" in text and "26.0%" in text


def _smem_row_like_card(**kw):
    """07 smem_row's H100 card after 06 tuned's H200 card in notebook 04 (the numbers of both)."""
    base = dict(op="softmax", problem="p", variant="smem_row", label="07 smem_row", metric="gbps", found=True,
                median_s=48.6e-6, rate=2759.0, gpu="NVIDIA H100 80GB HBM3", model_gpu="h100-sxm",
                estimate_s=68.4e-6, bound="dram", legs={"dram": 57.2e-6, "latency": 18.3e-6},
                estimate_kind="estimate", prev_label="06 tuned", prev_median_s=50.3e-6, x_prev=50.3 / 48.6,
                prev_estimate_s=78.1e-6)
    base.update(kw)
    return lesson.RungCard(**base)


def test_a_cards_model_line_names_its_gpu_and_the_ratio_shows_estimates_the_reader_did_not_see():
    """Notebook 04: 06 tuned's card (an H200 record) showed "model estimate 60.8 us"; 07 smem_row's
    (an H100 record) "68.4 us" and "the model said x1.14", from tuned's H100 estimate (78.1 us),
    shown nowhere.  Each model line names its GPU, and where the rung before's card as shown is
    another GPU's, the ratio prints the two estimates it divides."""
    c = _smem_row_like_card()
    assert "model estimate on h100-sxm" in str(c)
    assert "the model said x1.14." in c.explanation()  # the rung before's card shown is of this GPU too
    c.prev_shown_model_gpu = "h100-sxm"
    assert "the model said x1.14." in c.explanation()
    c.prev_shown_model_gpu = "h200"
    assert "the model said x1.14 (78.1 µs -> 68.4 µs on h100-sxm)" in c.explanation(), c.explanation()
    t = lesson.RungCard(op="softmax", problem="p", variant="tuned", label="06 tuned", metric="gbps", found=True,
                        median_s=43.6e-6, gpu="NVIDIA H200", model_gpu="h200", estimate_s=60.8e-6, bound="dram",
                        estimate_kind="estimate", changed_since=True, estimate_then_s=61e-6, commit="a" * 40)
    text = str(t)
    assert "model estimate on h200 of today's kernel" in text and "model estimate on h200 of the kernel measured" in text


def test_a_model_ratio_is_scored_only_against_a_factor_of_one_code_version():
    """Notebook 04's layernorm_bwd twosum (H100, 516b940) against 06 tuned (H100, 7c7b2e0, changed
    since): "measured x5.29, the model said x3.45" scored the model against a factor across code
    versions.  It is scored against the same-code pair of another GPU, named, or not at all."""
    c = _smem_row_like_card(op="layernorm_bwd", variant="twosum", label="07 twosum", median_s=96.3e-6,
                            prev_median_s=510e-6, x_prev=510 / 96.3, commit="b" * 40, prev_commit="c" * 40,
                            changed_since=False, prev_changed_since=True, estimate_s=127e-6, prev_estimate_s=438e-6)
    assert c.prev_across
    e = c.explanation()
    assert "the model said" not in e and "measured x5.29" not in e, e
    c.prev_today = ("NVIDIA H200", 87.6e-6, 138e-6)
    assert "the model said" not in c.explanation()  # no estimates of that pair: nothing to score
    c.prev_today_estimates = ("h200", 100e-6, 116e-6)
    e = c.explanation()
    assert ("Against 06 tuned on NVIDIA H200, where both records are of today's code: measured x1.58, the model "
            "said x1.16 (116 µs -> 100 µs on h200).") in e, e
    row = dict(c.rows())["x the rung before"]
    assert "; on NVIDIA H200, where both" in row and "; On" not in row  # no capital after a semicolon


@pytest.mark.parametrize("op", ["layernorm_bwd", "batchnorm"])
def test_no_recorded_card_scores_the_model_against_a_factor_across_code_versions(op):
    """Every card of the ladder at its example problem, from the records: where "x the rung
    before" crosses code versions, the model's ratio is beside the same-code pair of another GPU
    (with that GPU's estimates, which are the estimates of those two records' code) or absent."""
    mod = importlib.import_module(f"perfkit.kernels.norm.{op}")
    table = lesson.records(op)
    seen = 0
    for v in [x for x in mod.LADDER if not x.oracle]:
        card = lesson.recorded(op, mod.EXAMPLE_PROBLEM, v.name, table=table)
        if not (card.found and card.prev_across and np.isfinite(card.x_prev)):
            continue
        seen += 1
        e = card.explanation()
        assert f"Against {card.prev_label}: measured x{card.x_prev:.2f}" not in e, e
        if card.prev_today and card.prev_today_estimates:
            g, a, b = card.prev_today
            key, ea, eb = card.prev_today_estimates
            assert key == lesson.spec_key(g) and f"on {g}, where both records are of today's code: measured x{b / a:.2f}" in e
            assert f"x{eb / ea:.2f}" in e
    if not seen:
        pytest.skip(f"no {op} card compares across code versions here")


def test_an_anatomy_diff_names_the_launch_and_problem_of_both_sides(monkeypatch):
    """Notebook 04's persist diff read "registers 38 -> 46, shared memory 5248 -> 1280 B" while
    smem_row's own section showed 42 registers and 17536 B (its build at 4096 columns; persist
    compares it built at persist's 1024): the header names each side's launch and problem, and the
    card's anatomy note says it is not the build the rung before's section showed."""
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: None)
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, table=lesson.records("softmax"), estimate=False)
    v = next(u for u in softmax.LADDER if u.name == "persist")
    narrow = v.example(softmax.EXAMPLE_PROBLEM)
    prev = view.prev_of(v)
    view.rung(prev.name)
    out = view.rung("persist")
    fold_text = next(x.text for x in out if getattr(x, "text", "").startswith("[anatomy of 09") or
                     getattr(x, "text", "").startswith(f"[anatomy of {v.label}"))
    head = next(line for line in fold_text.splitlines() if line.startswith("anatomy diff:"))
    before, after = head.split(" -> ", 1)
    assert f"{prev.label} (launch 0" in before and f"at {narrow.label}" in before, head
    assert f"{v.label} (launch 0" in after and f"at {narrow.label}" in after, head
    html_ = next(x._repr_html_() for x in out if getattr(x, "text", "") == fold_text)
    assert "anatomy diff: " in html_
    note = view.cards["persist"].anatomy_note
    if view.built[prev.name] != (0, narrow.label):
        assert f"compared with {prev.label} as built for {narrow.label}; its own section showed another build" in note
    # no lone fragment: where the card is the record at the problem as asked, a whole sentence says so
    for x in out:
        t = getattr(x, "text", "")
        assert t != "card at the problem as asked"
        if t.startswith("The card below is the record at"):
            assert t.endswith(".")


def test_one_older_record_is_singular_in_a_ladder_summary(monkeypatch):
    """"1 of 8 records are of older code": one record is."""
    shown = []
    monkeypatch.setattr("perfkit.lesson.view._display", lambda objs: shown.extend(objs))
    monkeypatch.setattr("perfkit.plots.ladder", lambda *a, **k: __import__("matplotlib.pyplot").pyplot.subplots()[1])
    view = lesson.LadderView("softmax", softmax.EXAMPLE_PROBLEM, table=lesson.records("softmax"), estimate=False)
    view.summary()
    heads = [x.text.splitlines()[0] for x in shown if "one row per rung" in getattr(x, "text", "")]
    assert heads
    for h in heads:
        m = re.search(r"(\d+) of \d+ records? (is|are) of older code", h)
        if m:
            assert (m.group(2) == "is") == (m.group(1) == "1"), h
    assert not any(re.search(r"\b1 of \d+ records are\b", h) for h in heads), heads


def test_a_takeaway_names_the_table_and_commit_of_each_nsight_compute_row_it_quotes():
    """Notebook 02's H100 standing said "its Nsight Compute row (commit 516b940): warp instructions
    27.5 M (cuBLAS: 17.6 M), ..." while cuBLAS's figures came from the 2026-11-23 table (commit
    7c7b2e0), which it did not say: the rung's row names its table and commit, and the library's
    figures name theirs (or say they are of the same table)."""
    from perfkit.lesson.ncu import library_row

    rec = lesson.records("gemm")
    names = [v.name for v in gemm.LADDER if v.oracle or type(v).__module__.split(".gemm")[-1].startswith(".hopper")]
    st = lesson.standing("gemm", rec[rec.variant.isin(names)])
    st = st[st.group == "float16"]
    text = lesson.takeaway(st, "cuBLAS", goals={"float16": 0.85})
    quoted = 0
    for part in re.split(r"\. (?=\w+ on )", text):
        if "its Nsight Compute row (" not in part:
            continue
        m = re.search(r"(\S+) on ([^:;]+?): .*its Nsight Compute row \(([\w.-]+\.csv), commit (\w+)[^)]*\): (.*)", part)
        assert m, part
        quoted += 1
        if "(cuBLAS: " not in m.group(5):
            continue
        gpus = [m.group(2), *sorted(set(st["gpu"]))]
        lib = library_row("gemm", "m=4096 n=4096 k=4096 dtype=float16", "oracle", gpus)
        assert lib is not None
        mine = m.group(3)
        said = re.search(r"cuBLAS's row: ([^)]+)\)", m.group(5))
        assert said, part
        if lib.table == mine and lib.gpu == m.group(2):
            assert said.group(1) == "the same table", part
        else:
            assert said.group(1) == f"{lib.table}, commit {str(lib.commit)[:7]}", part
    if not quoted:
        pytest.skip("no Nsight Compute row quoted in the float16 standing here")


def test_a_takeaway_compares_counters_with_the_librarys_row_of_the_same_gpu_or_names_the_other_once():
    """Notebook 02 compared the H200's wgmma counters with "cuBLAS on NVIDIA H100 80GB HBM3" four times
    over: the library's row of the rung row's own GPU is taken where one exists (library_row's GPU
    order), else the other GPU's, named once after the numbers, with why."""
    from perfkit.lesson.ncu import library_row

    f32 = "m=4096 n=4096 k=4096 dtype=float32"
    for g in ("NVIDIA H200", _H100):
        row = library_row("gemm", f32, "oracle", [g, *({"NVIDIA H200", _H100} - {g})])
        if row is not None and library_row("gemm", f32, "oracle", [g]) is not None:
            assert row.gpu == g
    rec = lesson.records("gemm")
    names = [v.name for v in gemm.LADDER if v.oracle or type(v).__module__.split(".gemm")[-1].startswith(".hopper")]
    st = lesson.standing("gemm", rec[rec.variant.isin(names)])
    st = st[st.group == "float16"]
    text = lesson.takeaway(st, "cuBLAS", goals={"float16": 0.85})
    assert "cuBLAS on " not in text
    for m in re.finditer(r"cuBLAS's numbers are (.+?)'s: (.+?) has no Nsight Compute row of cuBLAS", text):
        assert m.group(1) != m.group(2)
        assert library_row("gemm", "m=4096 n=4096 k=4096 dtype=float16", "oracle", [m.group(2)]) is None


def test_a_kernels_helpers_come_in_the_same_order_in_every_process():
    """The helpers a kernel diff shows (kernel_source.kernel_helpers) are found through sets of
    names; their order must not follow Python's per-process string hashing, or an executed
    notebook's code diff changes from run to run (notebook 02's warp_specialized diff moved
    ``mbar_state``)."""
    import os
    import subprocess
    import sys

    code = ("from perfkit.lesson.kernel_source import kernel_helpers\n"
            "from perfkit.kernels.gemm import hopper_ws\n"
            "print([h.__name__ for h in kernel_helpers(hopper_ws._ws_kernel(128, 4))])\n")
    outs = set()
    for seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outs.add(run.stdout.strip().splitlines()[-1])
    assert len(outs) == 1, outs
