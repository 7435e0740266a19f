"""The static guard: no rung spills more, loses occupancy or grows its estimate by over 10% against
data/static/baseline.csv unless the baseline changes with it (perfkit compare --static --update)."""
import pandas as pd
from perfkit import guard


def test_no_rung_regressed_against_the_committed_baseline():
    base = guard.load_baseline()
    assert len(base), "no data/static/baseline.csv: run perfkit compare --static --update and commit it"
    new = guard.figures()
    bad = guard.regressions(base, new)
    assert not bad, ("static regressions (if intended, run `perfkit compare --static --update` and commit "
                     "data/static/baseline.csv with the change):\n" + "\n".join(bad))
    assert set(zip(new["op"], new["rung"])) == set(zip(base["op"], base["rung"])), \
        "the ladders changed: run `perfkit compare --static --update`"


def _row(**kw):
    r = {"op": "gemm", "rung": "05 blocktile_2d", "problem": "p", "registers": 90, "spill_bytes": 0,
         "shared_bytes": 8192, "occupancy": 0.5, "ffma_share": 0.6, "bank_degree": 1.0, "estimate_us": 100.0,
         "bound": "fp32"}
    return {**r, **kw}


def test_regressions_name_the_rung_and_the_figure():
    base = pd.DataFrame([_row()])
    assert guard.regressions(base, pd.DataFrame([_row(estimate_us=109.0)])) == []  # within 10%
    assert guard.regressions(base, pd.DataFrame([_row(estimate_us=95.0, registers=100)])) == []
    [msg] = guard.regressions(base, pd.DataFrame([_row(estimate_us=111.0)]))
    assert msg.startswith("gemm 05 blocktile_2d: estimate 100.0 -> 111.0 us")
    [msg] = guard.regressions(base, pd.DataFrame([_row(occupancy=0.375)]))
    assert "occupancy 0.500 -> 0.375" in msg
    assert guard.regressions(base, pd.DataFrame([_row(rung="18 new")])) == []  # a new rung is no regression
    d = guard.differences(base, pd.DataFrame([_row(registers=96), _row(rung="18 new")]))
    assert set(d["change"]) == {"registers 90 -> 96", "new rung"}


def test_a_kernel_made_to_spill_is_caught(monkeypatch):
    """A kernel built under a register cap that forces spills (perfkit._anatomy_examples.SPILLS),
    guarded against a baseline in which the same rung did not spill: the check names it."""
    from perfkit import _anatomy_examples as ex
    from perfkit import static

    v, p = ex.SPILLS
    monkeypatch.setattr(static, "targets", lambda ops=None: [("example", v, p)])
    new = guard.figures()
    assert new["spill_bytes"].iloc[0] > 0
    base = new.assign(spill_bytes=0)
    [msg] = guard.regressions(base, new)
    assert msg.startswith(f"example {v.label}: spills 0 -> ")
