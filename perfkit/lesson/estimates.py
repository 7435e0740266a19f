"""The model's estimate beside a card: of today's rung, and of the rung as it was at a record's
commit (rebuilt from git by :mod:`perfkit.history`)."""
from __future__ import annotations

from ..kernels.base import Problem, Variant


_ESTIMATES: dict = {}


def estimate_rung(variant: Variant, problem: Problem, gpu_key: str, banks: bool = True, ahead_s: float | None = None):
    """(seconds, bound, legs, kind, error) from ``model.estimate`` when it exists, else the
    roofline; remembered per (rung, config, problem, gpu, banks, ahead) for the session.
    ``ahead_s``: the GPU work a record's timer queued ahead of each sample
    (:func:`perfkit.model.record_ahead`), so that the estimate beside a record is the one
    ``perfkit model validate`` sets against it; None: the model's default (the flush alone)."""
    key = (type(variant).__module__, type(variant).__qualname__, repr(getattr(variant, "config", None)),
           type(problem).__qualname__, problem.label, gpu_key, banks, ahead_s)
    if key not in _ESTIMATES:
        _ESTIMATES[key] = _estimate_now(variant, problem, gpu_key, banks, ahead_s)
    return _ESTIMATES[key]


def estimate_then(op: str, v: Variant, problem: Problem, commit: str, gpu_key: str,
                  ahead_s: float | None = None) -> tuple[float, str]:
    """(seconds, note) of the model's estimate of rung ``v`` as it was at ``commit``
    (:func:`perfkit.history.variant_at`); NaN and the reason where it cannot be rebuilt."""
    t, _, _, _, note = estimate_then_detail(op, v, problem, commit, gpu_key, ahead_s)
    return t, note


def estimate_then_detail(op: str, v: Variant, problem: Problem, commit: str, gpu_key: str,
                         ahead_s: float | None = None):
    """(seconds, bound, legs, kind, note) of the estimate of rung ``v`` as it was at ``commit``:
    a card that shows this estimate must word its legs and bound from it too, not from today's."""
    from .. import history

    try:
        old, old_mod = history.variant_at(commit, op, v.name, getattr(v, "config", None))
    except Exception as exc:  # noqa: BLE001  (no git, an old module that fails: say so on the card)
        return float("nan"), None, {}, "", f"{type(exc).__name__}: {exc}"
    if old is None:
        return (float("nan"), None, {}, "",
                history.why_not(commit) or f"{v.name} is not in the ladder at {commit[:7]}")
    try:
        old_p = old_mod.Problem(**problem.params)
    except Exception:  # noqa: BLE001  (the Problem's fields changed since: today's is the same shape)
        old_p = problem
    t, bound, legs, kind, err = estimate_rung(old, old_p, gpu_key, ahead_s=ahead_s)
    return t, bound, legs, kind, (err or f"{kind} of the kernel at {commit[:7]}")


def _estimate_now(variant: Variant, problem: Problem, gpu_key: str, banks: bool = True, ahead_s: float | None = None):
    from .. import model

    if hasattr(model, "estimate"):
        try:
            kw = {"ahead_s": ahead_s} if ahead_s is not None else {}
            e = model.estimate(variant, problem, gpu=gpu_key, banks=banks, **kw)
            return float(e.seconds), str(e.bound), dict(e.legs or {}), "estimate", ""
        except Exception as exc:  # a rung the model cannot take yet: say so, do not fail the lesson
            err = f"model.estimate failed: {type(exc).__name__}: {exc}"
    else:
        err = ""
    try:
        from ..roofline import published_rates

        t = variant.traffic(problem)
        r = published_rates(t, gpu=gpu_key)
        pr = model.predict(t, peak_flops=r["flops"], dram_bw=r["dram_bw"])
        return float(pr.seconds), str(pr.limiter), dict(pr.per_level or {}), "roofline", err
    except Exception as exc:
        return float("nan"), None, {}, "", err or f"no model for this rung: {type(exc).__name__}: {exc}"


def first_recorded(table, gpu_name: str, anywhere: bool = True):
    """The model against the rungs it had never been checked on: (newest commit, ratios), the
    predicted / measured ratio (``table``: :func:`perfkit.model.validate`'s, of ``gpu_name``) of
    each (op, problem, rung) whose first record on any GPU (``anywhere=False``: on ``gpu_name``)
    is one of ``gpu_name``'s newest run, sorted (a rung recorded twice in that run: the median of
    its ratios)."""
    import pandas as pd

    from .. import results

    ever = results.load(latest=False)  # every record, not only the newest of each rung
    ever = ever[(ever["rung"] > 0) & ~ever["simulated"].fillna(False).astype(bool)].sort_values("utc")
    mine = ever[ever["gpu"] == gpu_name]
    newest = str(mine["commit"].iloc[-1]) if len(mine) else ""
    # each rung's first record, per problem (on any GPU, or on this one)
    first = (ever if anywhere else mine).drop_duplicates(["op", "problem", "variant"])
    first = first[(first["commit"] == newest) & (first["gpu"] == gpu_name)]
    # any `code`: a rung changed since is estimated as it was measured, rebuilt from its commit
    new = table[(table["kind"] == "rung") & (table["_commit"] == newest)]
    if new.empty or first.empty:
        return newest, pd.Series(dtype=float)
    new = new.assign(variant=new["rung"].str.split(" ", n=1).str[1]).merge(first[["op", "problem", "variant"]])
    return newest, new.groupby(["op", "problem", "rung"], sort=False)["ratio"].median().sort_values()


def _named(ratios) -> str:
    """ "conv 14 winograd_f4 (float32 NCHW) x2.44": the dtype and layout where an op has several."""
    return ", ".join(f"{op} {rung}" + (" (" + " ".join(x.split("=")[1] for x in prob.split()
                                                        if x.startswith(("dtype=", "layout="))) + ")"
                                       if op in ("conv", "gemm") else "") + f" x{r:.2f}"
                     for (op, prob, rung), r in ratios.items())


def first_recorded_answer(table, gpu_name: str):
    """:func:`first_recorded` in words, folded (the answer to a prompt): the rungs within 25% of
    their record, predicted slower, predicted faster."""
    from .prompts import fold, paragraph
    from .formatting import plural

    newest, new = first_recorded(table, gpu_name)
    anywhere = not new.empty
    if not anywhere:  # every rung of that run was recorded on another GPU first: this GPU's first records
        newest, new = first_recorded(table, gpu_name, anywhere=False)
    if new.empty:
        return paragraph(f"No rung had its first GPU record in {gpu_name}'s newest run (commit {newest[:7]}).")
    parts = [paragraph(f"{what} ({int(pick.sum())}): {_named(new[pick]) or 'none'}.")
             for what, pick in (("within 25% of the record", (new >= 0.8) & (new <= 1.25)),
                                ("predicted slower than measured", new > 1.25),
                                ("predicted faster than measured", new < 0.8))]
    if not anywhere:
        parts.insert(0, paragraph(f"No rung had its first record on any GPU in {gpu_name}'s newest run: these are "
                                  f"its first records on {gpu_name}, rungs another GPU had recorded before (the "
                                  "model may have learned from those: docs/MODEL_NOTES.md says which rules)."))
    # the GPU named once: "that <GPU> had never recorded before its newest run", not "before <GPU>'s"
    whose = f"no GPU had recorded before {gpu_name}'s" if anywhere else f"{gpu_name} had never recorded before its"
    return fold(*parts, summary=f"{plural(len(new), 'rung')} (per problem) that {whose} newest run (commit "
                                f"{newest[:7]}), predicted / measured (open once you have predicted)")
