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
