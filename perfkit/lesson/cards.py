"""The rung card (:func:`recorded`, :class:`RungCard`): a record, the rung before, the oracle
and the model's estimate, and a ladder's cards and their table."""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..history import source_changed_since
from ..kernels.base import Problem, Variant
from .estimates import estimate_rung, estimate_then, estimate_then_detail
from .formatting import UNIT, fmt_rate, fmt_seconds, metric_for, rate_of
from .ncu import all_counters, counters_html, counters_text, elsewhere, moved, row_of_code
from .matching import derived, ladder_for, match_rows, runs, shared_records, spec_key


def _head_commit() -> str | None:
    from ..results import git_commit

    return git_commit()


@dataclass
class RungCard:
    """One rung at one problem: the recorded measurement, the rung before, the oracle and the
    model's estimate.  Renders as HTML in a notebook, as text elsewhere; ``as_dict()`` is one
    row of :func:`card_table`."""

    op: str
    problem: str
    variant: str
    label: str
    metric: str
    found: bool = False
    median_s: float = float("nan")
    iqr_s: float = float("nan")
    n_samples: float = float("nan")
    rate: float = float("nan")
    gpu: str | None = None
    date: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    changed_since: bool | None = None
    prev_label: str | None = None
    prev_median_s: float = float("nan")
    prev_note: str = ""
    prev_problem: str = ""  # the problem "x the rung before" takes the rung before at, where not this card's
    x_prev: float = float("nan")
    oracle_median_s: float = float("nan")
    of_oracle: float = float("nan")
    estimate: object = None
    estimate_s: float = float("nan")
    bound: str | None = None
    legs: dict = field(default_factory=dict)
    estimate_kind: str = ""
    estimate_error: str = ""
    prev_estimate_s: float = float("nan")
    prev_record: str = ""  # a card with no record: the rung before's record, as its card shows it
    #: the model's estimate of the kernel as it was at the record's commit (where it changed since)
    estimate_then_s: float = float("nan")
    estimate_then_note: str = ""
    bound_then: str | None = None  # the bound and legs of that same estimate
    legs_then: dict = field(default_factory=dict)
    estimate_then_kind: str = ""
    model_gpu: str | None = None
    oracle_label: str | None = None
    oracle_other_run: str = ""  # the oracle's commit, where the record's run timed no oracle here
    anatomy_note: str = ""
    prev_commit: str = ""
    prev_changed_since: bool | None = None  # the rung before's kernel changed since its record
    #: where "x the rung before" crosses code versions on the card's GPU: (another GPU, this rung's
    #: seconds, the rung before's) of two records of today's code there, the comparison that holds
    prev_today: tuple | None = None
    #: the model's side of :attr:`prev_today`: (its GPU's devices.yaml key, this rung's estimate, the rung
    #: before's), both of today's code at the card's problem: the only pair a model ratio is compared with
    #: where "x the rung before" crosses code versions
    prev_today_estimates: tuple | None = None
    #: the GPU the model estimated the rung before's card *as shown* for (set by a view): where it is
    #: not :attr:`model_gpu`, the model ratio prints the estimate of the rung before it used
    prev_shown_model_gpu: str | None = None
    prev_skipped_label: str | None = None  # the rung just before, where it had no record here
    prev_skipped_why: str = "has no record"  # or "does not run this problem" (a float16-only rung)
    best_before_label: str | None = None  # the fastest recorded rung before this one
    best_before_s: float = float("nan")
    best_before_commit: str = ""
    best_before_changed_since: bool | None = None
    estimate_banks: bool = True  # the estimate simulated the shared-memory bank conflicts
    flops: float = float("nan")  # the problem's minimal work, for rates of estimates with no record
    bytes: float = float("nan")
    other_problems: list = field(default_factory=list)
    path: str | None = None
    #: the Nsight Compute counters of this rung and of the rung before on the record's GPU
    counters: object = None
    counters_other: object = None  # the newest row of other code than the record's (named, not used)
    counters_record: str | None = None  # where the counters are another GPU's: its record of this rung
    counters_note: str = ""  # where the counters are another GPU's: which, why, and its record there
    counters_searched: tuple = ()  # the GPUs whose tables were searched for a row
    tensor_mma: bool | None = None  # the rung's SASS issues tensor-core instructions (set by a view)
    prev_counters: object = None
    #: (this rung's row, the rung before's) on another GPU whose table holds both, where the card's
    #: own GPU has this rung's row but not the rung before's beside it: said under the card's table
    counters_pair: object = None
    counters_prev_label: str | None = None
    _variant: object = field(default=None, repr=False)

    # -- derived --
    @property
    def measured_code_estimate_s(self) -> float:
        """The estimate of the program that was measured: of the kernel at the record's commit
        where it changed since (and could be rebuilt), else of today's kernel."""
        if self.changed_since:
            return self.estimate_then_s
        return self.estimate_s

    @property
    def measured_code_bound(self) -> str | None:
        """The bound of :attr:`measured_code_estimate_s` (the same Estimate, never today's where
        the kernel changed since)."""
        return self.bound_then if self.changed_since else self.bound

    @property
    def measured_code_legs(self) -> dict:
        """The legs of :attr:`measured_code_estimate_s` (of the same Estimate)."""
        return (self.legs_then or {}) if self.changed_since else (self.legs or {})

    @property
    def measured_code_kind(self) -> str:
        return self.estimate_then_kind if self.changed_since else self.estimate_kind

    @property
    def ratio(self) -> float:
        """Measured over estimated, both of the same code (> 1: the GPU was slower than the model
        said); NaN where the recorded kernel changed since and could not be rebuilt."""
        e = self.measured_code_estimate_s
        if self.found and np.isfinite(e) and e > 0:
            return self.median_s / e
        return float("nan")

    @property
    def estimate_rate(self) -> float:
        """The model's estimate of the measured code as a rate in the card's unit (ladder plot);
        with no record, today's estimate at the problem's FLOPs or bytes."""
        e = self.measured_code_estimate_s if self.found else self.estimate_s
        if not (np.isfinite(e) and e > 0):
            return float("nan")
        if self.found:
            return self.rate * self.median_s / e
        return rate_of(self.metric, self.flops, self.bytes, e)

    def across_versions(self, other_label: str | None, other_commit: str | None,
                        other_changed: bool | None) -> str:
        """"" where this record and ``other_label``'s record compare the code the ladder has now
        (or one commit's code); else a note that the two are of different commits and which of
        them measured a kernel that changed since, so the factor is not one of today's code."""
        a, b = (self.commit or "")[:7], (other_commit or "")[:7]
        if not (a and b) or a == b or not (self.changed_since or other_changed):
            return ""
        since = ", its kernel changed since"
        return (f"({other_label} recorded at {b}{since if other_changed else ''}; this rung's record is of "
                f"{a}{since if self.changed_since else ''})")

    @property
    def prev_today_text(self) -> str:
        """The same-code factor on another GPU (:attr:`prev_today`), in words; "" where none."""
        if not self.prev_today:
            return ""
        g, a, b = self.prev_today
        return (f"On {g}, where both records are of today's code: x{b / a:.2f} against {self.prev_label} "
                f"({fmt_seconds(a)} against {fmt_seconds(b)})")

    @property
    def prev_across(self) -> str:
        """:meth:`across_versions` of the rung before (x prev's reference)."""
        return self.across_versions(self.prev_label, self.prev_commit, self.prev_changed_since)

    def verdict(self) -> str:
        """What the records say happened at this rung, in words: faster or slower than the rung
        before and by how much, and its share of the oracle's speed (what the anatomy changed is
        :attr:`anatomy_note`).  Written from the numbers, so it cannot contradict them."""
        if not self.found:
            est = (f" The model estimates {fmt_seconds(self.estimate_s)} on {self.model_gpu}, bound by {self.bound}."
                   if np.isfinite(self.estimate_s) else "")
            return f"No record of {self.label} at this problem on a real GPU yet.{est}"
        out = []
        across = self.prev_across
        if np.isfinite(self.x_prev) and across:
            # two commits' code: the factor is kept, but no direction is claimed for today's code
            out.append(f"Measured on {self.gpu}: x{self.x_prev:.2f} against {self.prev_label} "
                       f"({fmt_seconds(self.median_s)} against {fmt_seconds(self.prev_median_s)}){self.prev_note}, "
                       f"across code versions {across}: not a comparison of today's kernels."
                       + (f" {self.prev_today_text}." if self.prev_today else ""))
        elif np.isfinite(self.x_prev):
            x = self.x_prev
            word = "faster than" if x >= 1.02 else "slower than" if x <= 0.98 else "about as fast as"
            out.append(f"Measured on {self.gpu}: {word} {self.prev_label}, x{x:.2f} "
                       f"({fmt_seconds(self.median_s)} against {fmt_seconds(self.prev_median_s)}){self.prev_note}.")
        else:
            out.append(f"Measured on {self.gpu}: {fmt_seconds(self.median_s)}"
                       + (f"; {self.prev_label} has no record here to compare with." if self.prev_label else "."))
        if (self.best_before_label and self.best_before_label != self.prev_label
                and np.isfinite(self.best_before_s) and self.best_before_s < self.median_s * 0.98):
            best_across = self.across_versions(self.best_before_label, self.best_before_commit,
                                               self.best_before_changed_since)
            if best_across:
                out.append(f"Against the fastest rung before it, {self.best_before_label} "
                           f"({fmt_seconds(self.best_before_s)}): x{self.best_before_s / self.median_s:.2f}, across "
                           f"code versions {best_across}.")
            else:
                out.append(f"Still slower than {self.best_before_label} ({fmt_seconds(self.best_before_s)}), the "
                           f"fastest rung before it, x{self.best_before_s / self.median_s:.2f}.")
        if np.isfinite(self.of_oracle):
            out.append(f"It runs at {self.of_oracle:.1%} of the oracle's speed ({self.oracle_label or 'rung 0'}: "
                       f"{fmt_seconds(self.oracle_median_s)}"
                       + (f", of another run at commit {self.oracle_other_run}: the record's run timed no oracle"
                          if self.oracle_other_run else "") + ").")
        if self.changed_since:
            out.append(f"The record is of the kernel at {(self.commit or '?')[:7]}; it has changed since, so today's "
                       "kernel may not do the same.")
        return " ".join(out)

    @property
    def provenance(self) -> str:
        if not self.found:
            return ""
        c = (self.commit or "?")[:7] + ("+dirty" if self.dirty else "")
        s = f"{self.gpu}, {self.date}, commit {c}"
        if self.changed_since:
            s += f" (recorded at {c}, kernel changed since)"
        elif self.changed_since is None and self.commit and self.commit != _head_commit():
            s += " (cannot tell whether the kernel changed since)"
        return s

    @property
    def status(self) -> str:
        if not self.found:
            return "no record"
        return "kernel changed since" if self.changed_since else "recorded"

    def explanation(self) -> str:
        """Where the estimate misses, read from the numbers (nothing asserted beyond them)."""
        if not self.found:
            return ""
        if not np.isfinite(self.estimate_s):
            return ("No per-rung estimate to compare" + (f" ({self.estimate_error})" if self.estimate_error else "")
                    + ".")
        # every number below is of one Estimate: of the code the record measured
        r, m, e = self.ratio, self.median_s, self.measured_code_estimate_s
        bound, est_kind = self.measured_code_bound, self.measured_code_kind
        kind = "estimate" if est_kind == "estimate" else "roofline bound"
        if self.changed_since and not np.isfinite(e):
            return (f"The record is of this rung's kernel at {(self.commit or '?')[:7]}, which has changed since and "
                    f"could not be rebuilt here ({self.estimate_then_note}): today's estimate describes other code, so "
                    "no comparison is drawn.")
        caveat = (f"The record is of this rung's kernel at {(self.commit or '?')[:7]}, which has changed since: the "
                  "estimate compared here is of that kernel, rebuilt from its commit. "
                  if self.changed_since else "")
        legs = sorted(((k, float(v)) for k, v in self.measured_code_legs.items()
                       if v is not None and np.isfinite(float(v))), key=lambda kv: -kv[1])
        total = sum(v for _, v in legs)
        out = []
        if 0.8 <= r <= 1.25:
            out.append(f"The {kind} ({fmt_seconds(e)}, bound by {bound}) is within 25% of the measured "
                       f"{fmt_seconds(m)} (measured/estimate {r:.2f}).")
        elif r > 1.25:
            out.append(f"The GPU took {r:.1f}x the {kind} ({fmt_seconds(m)} measured, {fmt_seconds(e)} estimated, "
                       f"bound by {bound}).")
            if est_kind != "estimate":
                out.append("A roofline bound counts only FLOPs and DRAM bytes: everything the rung spends on "
                           "L2, shared memory, latency and instruction issue is missing from it.")
            elif legs and len(legs) > 1:
                if m <= total:
                    out.append(f"The measured time lies between the largest leg ({legs[0][0]}, "
                               f"{fmt_seconds(legs[0][1])}) and the sum of all legs ({fmt_seconds(total)}): on the GPU "
                               "the legs overlapped less than the model lets them.")
                else:
                    out.append(f"It is {m / total:.1f}x even the sum of every leg ({fmt_seconds(total)}), so "
                               f"{fmt_seconds(m - total)} per launch is time none of the legs the model counts "
                               "accounts for.")
        else:
            out.append(f"The GPU ran {1 / r:.1f}x faster than the {kind} ({fmt_seconds(m)} measured, "
                       f"{fmt_seconds(e)} estimated).")
            if legs:
                k, v = legs[0]
                if v > m:
                    out.append(f"The {k} leg alone ({fmt_seconds(v)}) exceeds the measured time, so the model "
                               f"over-counts it here: either less traffic reaches that level on the GPU than the "
                               f"model charges, or the level serves it faster than the rate the model assumes.")
        if len(legs) > 1 and legs[1][1] >= 0.5 * legs[0][1]:
            out.append(f"The {legs[1][0]} leg ({fmt_seconds(legs[1][1])}) is within 2x of the bound, so a small "
                       "error in either would change which one binds.")
        comparison = self.model_comparison(e)
        if comparison:
            out.append(comparison)
        return caveat + " ".join(out)

    def model_comparison(self, e: float | None = None) -> str:
        """"Against <the rung before>: measured xA, the model said xB", only where the measured
        factor is of one code version: where this card's factor crosses code versions, the
        same-code pair of another GPU (:attr:`prev_today`, with the model's estimates for that GPU),
        else nothing.  Where the rung before's card as shown estimates for another GPU than this
        card, the two estimates the ratio divides are printed with the GPU they are for."""
        e = self.measured_code_estimate_s if e is None else e
        if not np.isfinite(self.x_prev):
            return ""
        if self.prev_across:  # a factor across code versions scores no model
            if not (self.prev_today and self.prev_today_estimates):
                return ""
            g, a, b = self.prev_today
            key, ea, eb = self.prev_today_estimates
            if not (np.isfinite(ea) and np.isfinite(eb) and ea > 0):
                return ""
            return (f"Against {self.prev_label} on {g}, where both records are of today's code: measured "
                    f"x{b / a:.2f}, the model said x{eb / ea:.2f}{_model_verdict(eb / ea, b / a)} "
                    f"({fmt_seconds(eb)} -> {fmt_seconds(ea)} on {key}).")
        if not (np.isfinite(self.prev_estimate_s) and np.isfinite(e) and e > 0):
            return ""
        pred = self.prev_estimate_s / e
        shown = ""
        if self.prev_shown_model_gpu and self.prev_shown_model_gpu != self.model_gpu:
            shown = f" ({fmt_seconds(self.prev_estimate_s)} -> {fmt_seconds(e)} on {self.model_gpu})"
        return (f"Against {self.prev_label}: measured x{self.x_prev:.2f}, the model said x{pred:.2f}"
                f"{shown}{_model_verdict(pred, self.x_prev)}.")

    # -- rendering --
    def rows(self) -> list[tuple[str, str]]:
        unit = UNIT[self.metric]
        if not self.found:
            msg = f"no record of {self.label} at {self.problem} on a real GPU"
            if self.other_problems:
                msg += "; recorded at: " + "; ".join(self.other_problems[:4])
            rows = [("measured", msg)]
            if np.isfinite(self.estimate_s):
                legs = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in
                                 sorted(self.legs.items(), key=lambda kv: -float(kv[1] or 0)) if v)
                name = ("model estimate, no GPU record yet" if self.estimate_kind == "estimate"
                        else "roofline bound (model.estimate absent)")
                if not self.estimate_banks:
                    name += " (bank conflicts not simulated)"
                rows.append((name, f"{fmt_seconds(self.estimate_s)} on {self.model_gpu}, bound by {self.bound}"
                             + (f"; legs: {legs}" if legs else "")))
                if self.prev_label and np.isfinite(self.prev_estimate_s):  # the prompt's question, estimated
                    # the rung before estimated as this one is (where bank conflicts are not simulated here,
                    # not there either): said, since its own card's estimate may then differ
                    rows.append(("x the rung before, estimated", f"the model says x{self.prev_estimate_s / self.estimate_s:.2f} "
                                 f"vs {self.prev_label} ({fmt_seconds(self.prev_estimate_s)} -> "
                                 f"{fmt_seconds(self.estimate_s)}"
                                 + ("; both without bank conflicts" if not self.estimate_banks else "")
                                 + "); an estimate, not a measured speed-up"
                                 + (f" ({self.prev_label}'s record: {self.prev_record})" if self.prev_record else "")))
            elif self.estimate_error:
                rows.append(("model estimate", self.estimate_error))
            return rows
        rows = [("what happened", self.verdict() + (f" In the anatomy: {self.anatomy_note}." if self.anatomy_note else "")),
                ("measured (median)", f"{fmt_seconds(self.median_s)}  ±{fmt_seconds(self.iqr_s / 2)} (IQR/2), "
                 f"{int(self.n_samples) if np.isfinite(self.n_samples) else '?'} samples"),
                ("rate", f"{fmt_rate(self.rate)} {unit}")]
        if self.prev_label:
            if np.isfinite(self.x_prev):
                same = "" if self.prev_problem else " at this problem"  # a twin's card: not the section's
                rows.append(("x the rung before", f"x{self.x_prev:.2f} vs {self.prev_label} "
                             f"({fmt_seconds(self.prev_median_s)}{same}){self.prev_note}"
                             + (f" {self.prev_across}" if self.prev_across else "")
                             + (f"; {_lower_first(self.prev_today_text)}" if self.prev_today else "")))
            else:
                rows.append(("x the rung before", f"— ({self.prev_label} has no record here)"))
        rows.append(("of the oracle", (f"{self.of_oracle:.1%}" + (f" (the oracle of another run, commit {self.oracle_other_run})"
                                                                   if self.oracle_other_run else ""))
                     if np.isfinite(self.of_oracle) else "— (no oracle record)"))
        rows.append(("recorded on", self.provenance))
        if np.isfinite(self.estimate_s):
            legs = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in
                             sorted(self.legs.items(), key=lambda kv: -float(kv[1] or 0)) if v)
            name = "model estimate" if self.estimate_kind == "estimate" else "roofline bound (model.estimate absent)"
            if self.model_gpu:  # which GPU's rates: the rung before's card can be of another GPU
                name += f" on {self.model_gpu}"
            if self.changed_since:
                name += " of today's kernel"
                legs_then = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in
                                      sorted(self.legs_then.items(), key=lambda kv: -float(kv[1] or 0)) if v)
                then = (f"{fmt_seconds(self.estimate_then_s)}" + (f", bound by {self.bound_then}" if self.bound_then else "")
                        + (f"; legs: {legs_then}" if legs_then else "")
                        if np.isfinite(self.estimate_then_s) else f"— ({self.estimate_then_note or 'not rebuilt'})")
                on = f" on {self.model_gpu}" if self.model_gpu else ""
                rows.append((f"model estimate{on} of the kernel measured (at {(self.commit or '?')[:7]})", then))
            rows.append((name, f"{fmt_seconds(self.estimate_s)}, bound by {self.bound}" + (f"; legs: {legs}" if legs else "")))
            rows.append(("measured / estimate" + (" (same code)" if self.changed_since else ""),
                         f"{self.ratio:.2f}" if np.isfinite(self.ratio) else "— (the measured kernel's estimate is missing)"))
        elif self.estimate_error:
            rows.append(("model estimate", self.estimate_error))
        return rows

    def __str__(self) -> str:
        head = f"{self.label} at {self.problem}"
        lines = [head] + [f"  {k:<20} {v}" for k, v in self.rows()]
        ex = self.explanation()
        if ex:
            lines.append("  " + "\n  ".join(textwrap.wrap(ex, 96)))
        if self.found:
            lines.append("  " + "\n  ".join(textwrap.wrap("counters: " + (f"({self.counters_note}) "
                                                                          if self.counters_note else "")
                                                           + counters_text(self.counters, self.prev_counters, tensor=self.tensor_mma,
                                                                         flops=self.flops),
                                                           96)))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#1a7f37" if self.found and not self.changed_since else "#9a6700" if self.found else "#cf222e"
        rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in self.rows())
        ex = self.explanation()
        return (f"<div style='border-left:4px solid {color};padding-left:8px;margin:4px 0'>"
                f"<b>{html.escape(self.label)}</b> at <code>{html.escape(self.problem)}</code> "
                f"<span style='color:{color}'>[{html.escape(self.status)}]</span><table>{rows}</table>"
                + (f"<p style='max-width:60em'>{html.escape(ex)}</p>" if ex else "")
                + (counters_html(self.counters, self.prev_counters, prev_label=self.counters_prev_label,
                                 gpu=self.gpu, changed_since=self.counters_changed_since,
                                 other=self.counters_other, record_commit=self.commit, note=self.counters_note,
                                 searched=self.counters_searched, tensor=self.tensor_mma, flops=self.flops)
                   if self.found else "") + self._pair_html() + "</div>")

    def _pair_html(self) -> str:
        """The change against the rung before as another GPU's rows of both show it, where the card's
        own GPU has no row of the rung before beside this rung's (its own row is the table above)."""
        if not (self.found and self.counters_pair):
            return ""
        c2, p2 = self.counters_pair
        why = moved(c2, p2)
        tables = (c2.table if p2.table == c2.table else  # two runs' rows of the same code: both named
                  f"{c2.table}; {self.prev_label}'s row: {p2.table}, commit {(p2.commit or '?')[:7]}")
        text = (f"{self.gpu} has no Nsight Compute row of {self.prev_label} beside this rung's; {c2.gpu}'s rows "
                f"hold both (the same code, {tables}): " + (why or "no counter moved enough to say"))
        return f"<p><i>{html.escape(text)}</i></p>"

    @property
    def counters_changed_since(self) -> bool | None:
        """Whether the rung's kernel changed since the commit its counters were taken at."""
        c = getattr(self.counters, "commit", None)
        if not c or self._variant is None:
            return None
        return source_changed_since(self._variant, c)

    @property
    def x_prev_reference(self) -> str | None:
        """The rung "x prev" is against, for a table: named with why where it is not the rung
        just before, or where its record is of other code (None where there is no factor)."""
        if not np.isfinite(self.x_prev):
            return None
        s = self.prev_label or ""
        if self.prev_skipped_label:
            s += f" ({self.prev_skipped_label} {self.prev_skipped_why})"
        elif self.prev_problem:
            s += " (at its own problem)"
        if self.prev_across:
            s += f" {self.prev_across}"
        return s

    def as_dict(self) -> dict:
        unit = UNIT[self.metric]
        return {"rung": self.label, "status": self.status, "median": fmt_seconds(self.median_s) if self.found else "—",
                # a factor across code versions is named in "x prev vs", not printed as today's
                unit: self.rate if self.found else np.nan, "x prev": np.nan if self.prev_across else self.x_prev,
                "x prev vs": self.x_prev_reference,
                "of oracle": self.of_oracle,
                # the estimate of the code that was measured (of the kernel at the record's commit
                # where it changed since), and of today's kernel where that differs
                "estimate": fmt_seconds(self.measured_code_estimate_s if self.found else self.estimate_s),
                "estimate, today's code": fmt_seconds(self.estimate_s) if self.changed_since else "same",
                "bound": self.bound, "measured/est": self.ratio, "recorded on": self.provenance}


def _lower_first(s: str) -> str:
    """A sentence continued after a semicolon: "On NVIDIA H200, ..." -> "on NVIDIA H200, ..."."""
    return s[:1].lower() + s[1:]


def _model_verdict(pred: float, meas: float) -> str:
    """A model ratio's verdict beside the measured one, in parentheses ("" where they agree)."""
    if abs(pred - 1) < 0.02:
        return " (the model sees no difference between the two)"
    if abs(meas - 1) < 0.02:
        return " (measured, the two are about as fast)"
    if (pred > 1) != (meas > 1):
        return " (the model got the direction wrong)"
    return ""


def _as_variant(rung, ladder: list[Variant]) -> Variant:
    if isinstance(rung, Variant):
        return rung
    for v in ladder:
        if (isinstance(rung, str) and (v.name == rung or v.label == rung)) or \
                (isinstance(rung, (int, np.integer)) and not isinstance(rung, bool) and v.rung == rung):
            return v
    raise LookupError(f"rung {rung!r} is not in the ladder ({[v.label for v in ladder]})")


def _today_pair(df: pd.DataFrame, gpu, problem, v: Variant, prev_problem, prev: Variant) -> tuple | None:
    """(GPU, this rung's median, the rung before's) on the first other GPU of ``df`` where both
    have a record of today's code: the same-code factor, where the card's own GPU has only one
    across code versions (the H100's ticket against its split of 7c7b2e0)."""
    rows = _today_rows(df, gpu, problem, v, prev_problem, prev)
    return None if rows is None else (rows[0], float(rows[1]["median_s"]), float(rows[2]["median_s"]))


def _today_rows(df: pd.DataFrame, gpu, problem, v: Variant, prev_problem, prev: Variant) -> tuple | None:
    """(GPU, this rung's record, the rung before's) of :func:`_today_pair`."""
    for g in sorted(set(df["gpu"].dropna().astype(str)) - {str(gpu)}):
        d = df[df["gpu"] == g]
        a, b = match_rows(d, problem, v.name), match_rows(d, prev_problem, prev.name)
        if a.empty or b.empty:
            continue
        ra, rb = choose_record(a, v), choose_record(b, prev)
        if all(isinstance(r.get("commit"), str) and r.get("commit") and source_changed_since(u, r["commit"]) is False
               for r, u in ((ra, v), (rb, prev))):
            return g, ra, rb
    return None


def _commit_text(c) -> str:
    """A record's commit as text, "" where it has none (None, or NaN in a frame's string column)."""
    return c if isinstance(c, str) else ""


def choose_record(rows: pd.DataFrame, v: Variant) -> pd.Series:
    """The record a card shows among ``rows`` (one rung at one problem, oldest first, of one GPU or
    several): the newest of today's code (the kernel unchanged since its commit), on whatever GPU;
    only where no record is of today's code, the newest record (marked "kernel changed since").
    A record whose commit this clone cannot tell about (not in its git history, or none recorded:
    :func:`source_changed_since` is None) is not known to be of older code, so it counts with today's:
    a newer record from another clone is shown (its card says it cannot tell), not passed over for
    an older record, maybe of another GPU."""
    if len(rows) > 1 and not v.oracle:
        commits = rows["commit"].tolist() if "commit" in rows else [None] * len(rows)
        today = [i for i, c in enumerate(commits)  # by position: an index may repeat in a joined frame
                 if source_changed_since(v, c if isinstance(c, str) and c else None) is not True]
        if today:
            return rows.iloc[today[-1]]
    return rows.iloc[-1]


def _real_rows_of(op: str):
    def make(df: pd.DataFrame) -> pd.DataFrame:
        if "op" in df and not df.empty:
            df = df[df["op"] == op]
        if "simulated" in df and not df.empty:
            df = df[~df["simulated"].fillna(False).astype(bool)]
        return df
    return make


def recorded(op: str, problem: Problem | str | dict, rung, *, ladder: list[Variant] | None = None,
             gpu: str | None = None, model_gpu: str = "h100-sxm", estimate: bool = True, root=None,
             table: pd.DataFrame | None = None, banks_unrecorded: bool = True, prev=None) -> RungCard:
    """The **rung card** of ``rung`` (a Variant, its name, label or current number) at ``problem``
    (a Problem, its label, or a dict of parameters).

    Matching (:data:`MATCH_RULE`): op + variant name + problem parameters; the rung number is
    never used.  Records are chosen by code, not recency, among every record (``table`` holds
    every record, as ``records(op, latest=False)`` gives them; the default reads them all): the
    newest matching record of today's code (of ``gpu`` if given, else of any GPU, named on the
    card; :func:`choose_record`) is shown, else the newest record of older code, with the rung
    before it in today's ladder, the fastest rung before and the oracle, recorded on the same GPU
    at the same problem and chosen by the same rule.
    A rung whose record was made at another commit and whose kernel code changed since is
    labelled "recorded at <commit>, kernel changed since".  With ``estimate``, the model's
    estimate for the recorded GPU (``model.estimate``; the roofline bound until it exists).
    ``table`` replaces the recorded frame (e.g. with a fresh sweep's rows added).
    ``banks_unrecorded=False``: a card with no record is estimated without the bank-conflict
    simulation (the slow part for the tensor-core rungs in the simulator), and says so.
    ``prev`` (a Variant or its name): the rung "x the rung before" compares with, where it is not
    the one just before in ladder order (a sub-ladder interleaved with another)."""
    ladder = list(ladder) if ladder is not None else ladder_for(op)
    v = _as_variant(rung, ladder)
    base = problem
    df = table if table is not None else shared_records(op, ladder, root=root, gpu=gpu, latest=False)
    # a table of every op (layernorm_bwd shares layernorm's labels and names), real records only;
    # filtered once per table, not once per card
    df = derived(df, ("real", op), _real_rows_of(op))
    if isinstance(problem, Problem) and hasattr(v, "example") and not v.oracle:
        # the rung's own twin of the problem (float16, NHWC), unless it was recorded at the
        # problem as asked (conv's igemm_regblock at the NCHW layer: its record is shown)
        if match_rows(df, problem, v.name).empty:
            problem = v.example(problem)
    plabel = problem.label if isinstance(problem, Problem) else (
        problem if isinstance(problem, str) else " ".join(f"{k}={x}" for k, x in problem.items()))
    metric = metric_for(op)
    card = RungCard(op=op, problem=plabel, variant=v.name, label=v.label, metric=metric)
    if isinstance(problem, Problem):
        card.flops, card.bytes = float(problem.flops), float(problem.bytes)
    idx = [i for i, x in enumerate(ladder) if x is v or x.name == v.name]
    i = idx[0] if idx else None
    if prev is not None:
        prev = _as_variant(prev, ladder)
        ip = next((j + 1 for j, x in enumerate(ladder) if x.name == prev.name), None)
    else:
        prev = next((ladder[j] for j in range(i - 1, -1, -1) if not ladder[j].oracle), None) if i is not None else None
        ip = i  # the fallback below searches the rungs before prev (its sub-ladder's, where prev is given)
    oracle = next((x for x in ladder if x.oracle), None)
    card.prev_label = prev.label if prev is not None else None
    mine = match_rows(df, problem, v.name)
    card.oracle_label = oracle.label if oracle is not None else None
    if mine.empty:  # no record: the card still shows what the model says (for the default GPU)
        others = df[df["variant"] == v.name]["problem"].drop_duplicates().tolist() if not df.empty else []
        card.other_problems = others
        if not estimate:
            card.estimate_error = "not computed here (estimate=False)"
        elif isinstance(problem, Problem):
            card.model_gpu = spec_key(gpu, model_gpu)
            card.estimate_banks = bool(banks_unrecorded)
            card.estimate_s, card.bound, card.legs, card.estimate_kind, card.estimate_error = \
                estimate_rung(v, problem, card.model_gpu, card.estimate_banks)
        return card
    r = choose_record(mine, v)
    prev_rec = None  # the rung before's record, where it has one here
    today_rows = None  # the same-code pair of another GPU, where this card's factor crosses code versions
    card.found = True
    card.median_s = float(r["median_s"])
    card.iqr_s = float(r.get("iqr_s", np.nan) if r.get("iqr_s") is not None else np.nan)
    card.n_samples = float(r.get("n_samples", np.nan) if r.get("n_samples") is not None else np.nan)
    card.rate = rate_of(metric, r.get("flops"), r.get("bytes"), card.median_s)
    commit, dirty = r.get("commit"), r.get("dirty")
    card.gpu, card.commit = r.get("gpu"), commit if isinstance(commit, str) and commit else None  # never NaN
    card.dirty = bool(dirty) if dirty is not None and not (isinstance(dirty, float) and dirty != dirty) else None
    card.date = str(r.get("utc", ""))[:10]
    card.path = r.get("path")
    card.changed_since = source_changed_since(v, card.commit) if card.commit else None
    same_gpu = derived(df, ("gpu", card.gpu), lambda d: d[d["gpu"] == card.gpu]) if "gpu" in df else df
    if prev is not None:
        pr = match_rows(same_gpu, problem, prev.name)
        if pr.empty and isinstance(base, Problem) and hasattr(prev, "example"):
            alt = prev.example(base)  # e.g. the rung before takes float32, this one float16
            if alt.label != problem.label:
                pr = match_rows(same_gpu, alt, prev.name)
                if not pr.empty:
                    card.prev_problem = alt.label
                    card.prev_note = f"; the rung before at its own problem {alt.label}"
        if pr.empty and ip is not None:  # the rung just before has no record here: the nearest that has
            for j in range(ip - 2, -1, -1):
                cand = ladder[j]
                if cand.oracle:
                    continue
                pr = match_rows(same_gpu, problem, cand.name)
                if not pr.empty:
                    # a rung that refuses the problem (simt_wide at float16, packed at float32)
                    # could have no record here: say so, not that one is missing
                    if isinstance(problem, Problem) and not runs(prev, problem):
                        card.prev_skipped_why = "does not run this problem"
                    card.prev_note = f" ({prev.label}, the rung just before, {card.prev_skipped_why}"
                    card.prev_note += ")" if card.prev_skipped_why != "has no record" else " here)"
                    card.prev_skipped_label = prev.label
                    card.prev_label, prev = cand.label, cand
                    break
        if not pr.empty:
            prev_rec = choose_record(pr, prev)  # by code, as this rung's own record
            card.prev_median_s = float(prev_rec["median_s"])
            card.x_prev = card.prev_median_s / card.median_s
            card.prev_commit = _commit_text(prev_rec.get("commit"))
            if card.prev_commit and card.prev_commit != card.commit:  # only then does it qualify a factor
                card.prev_changed_since = source_changed_since(prev, card.prev_commit)
            if card.prev_across and "gpu" in df:
                today_rows = _today_rows(df, card.gpu, problem, v, card.prev_problem or problem, prev)
                if today_rows is not None:
                    g, ra, rb = today_rows
                    card.prev_today = (g, float(ra["median_s"]), float(rb["median_s"]))
    if i is not None:  # the fastest rung before this one, as recorded here
        best = None
        for u in ladder[:i]:
            if u.oracle:
                continue
            ur = match_rows(same_gpu, problem, u.name)
            ur = choose_record(ur, u) if not ur.empty else None
            if ur is not None and (best is None or float(ur["median_s"]) < best[1]):
                best = (u.label, float(ur["median_s"]), _commit_text(ur.get("commit")), u)
        if best is not None:
            card.best_before_label, card.best_before_s, card.best_before_commit, u = best
            if card.best_before_commit and card.best_before_commit != card.commit:
                card.best_before_changed_since = source_changed_since(u, card.best_before_commit)
    card._variant = v
    # the row that can explain this record: of the same code, on the record's GPU, else on another
    # GPU of this table (a pinned notebook's table holds one GPU), named with its own record there
    gpus = list(dict.fromkeys([card.gpu] + (derived(df, "gpus", lambda d: sorted(set(d["gpu"].dropna().astype(str))))
                                            if "gpu" in df else [])))
    card.counters_searched = tuple(gpus)
    card.counters, card.counters_other = row_of_code(op, plabel, v, card.commit, gpus)
    if card.counters is not None and prev is not None:
        card.prev_counters = _counters_beside(op, plabel, prev, v, card.counters, card.counters.gpu)
        if card.prev_counters is None:  # no row of the rung before beside it: a GPU whose rows hold both
            for g in gpus:
                c2 = row_of_code(op, plabel, v, card.commit, [g])[0] if g != card.counters.gpu else None
                p2 = _counters_beside(op, plabel, prev, v, c2, g) if c2 is not None else None
                if p2 is not None:
                    if card.counters.gpu == card.gpu:
                        # the record's own GPU has this rung's row: it stays the card's (issue 42: the
                        # shown GPU's counters), and the other GPU's change is said beside it, apart
                        card.counters_pair = (c2, p2)
                    else:
                        card.counters_note = (f"{card.counters.gpu} has no row of {prev.label} beside this rung's, "
                                              f"so these are {g}'s rows of both (the same code)")
                        card.counters, card.prev_counters = c2, p2
                    break
        card.counters_prev_label = prev.label if card.prev_counters is not None else None
    if card.counters is not None and card.counters.gpu != card.gpu:
        there = match_rows(df[df["gpu"] == card.counters.gpu], problem, v.name)
        if not there.empty:
            t = choose_record(there, v)
            card.counters_record = f"{fmt_seconds(float(t['median_s']))}, commit {str(t.get('commit') or '?')[:7]}"
            if card.counters_note:
                card.counters_note += f"; its record there: {card.counters_record}"
        card.counters_note = card.counters_note or elsewhere(card.counters, card.gpu, card.counters_record)
    if oracle is not None:
        orc = match_rows(same_gpu, problem, oracle.name)
        if not orc.empty:
            # the oracle timed in the record's own run (one GPU, one commit), as where-the-ladder-stands
            # divides (standing.of_run); where that run timed none, the oracle's newest, its commit named
            run = orc[orc["commit"] == card.commit] if card.commit and "commit" in orc else orc.iloc[0:0]
            o = choose_record(run if len(run) else orc, oracle)
            card.oracle_median_s = float(o["median_s"])
            card.of_oracle = card.oracle_median_s / card.median_s
            if run.empty:
                card.oracle_other_run = str(o.get("commit") or "?")[:7]
    if not estimate:
        card.estimate_error = "not computed here (estimate=False)"
    elif isinstance(problem, Problem):
        key = card.model_gpu = spec_key(card.gpu, model_gpu)
        # behind what the record's timer queued ahead (its flush and spin), as validate estimates it
        ahead = _ahead_of(r, key)
        card.estimate_s, card.bound, card.legs, card.estimate_kind, card.estimate_error = estimate_rung(
            v, problem, key, ahead_s=ahead)
        if card.changed_since:  # the record measured other code: estimate that code too (the default ahead)
            (card.estimate_then_s, card.bound_then, card.legs_then, card.estimate_then_kind,
             card.estimate_then_note) = estimate_then_detail(op, v, problem, card.commit, key)
        if prev is not None and np.isfinite(card.x_prev) and not card.prev_problem:
            # like for like: the rung before's estimate of the code its record measured, behind its timer
            then = source_changed_since(prev, card.prev_commit) if card.prev_commit else None
            ahead_prev = _ahead_of(prev_rec, key) if prev_rec is not None else None
            card.prev_estimate_s = (estimate_then(op, prev, problem, card.prev_commit, key)[0] if then
                                    else estimate_rung(prev, problem, key, ahead_s=ahead_prev)[0])
        if card.prev_today and today_rows is not None and not card.prev_problem:
            # the same-code pair of another GPU: the model's estimates of both for that GPU, each
            # behind its own record's timer, so that the model is scored against a factor of one code
            g, ra, rb = today_rows
            gkey = spec_key(g, model_gpu)
            card.prev_today_estimates = (gkey, estimate_rung(v, problem, gkey, ahead_s=_ahead_of(ra, gkey))[0],
                                         estimate_rung(prev, problem, gkey, ahead_s=_ahead_of(rb, gkey))[0])
    return card


def _ahead_of(row, gpu_key: str) -> float | None:
    """What a record's timer queued ahead of each sample (:func:`perfkit.model.record_ahead`),
    from its row of the records frame; None where it does not say (older records)."""
    from .. import model

    if not hasattr(row, "get"):
        return None
    try:  # record_ahead says None for an absent or empty (NaN) flush
        return model.record_ahead({"flush_bytes": row.get("flush_bytes"), "extra": {"spin_s": row.get("spin_s")}},
                                  gpu_key)
    except Exception:  # noqa: BLE001  (a GPU with no rates: the default applies)
        return None


def ladder_cards(op: str, problem: Problem, *, ladder: list[Variant] | None = None, include_oracle: bool = False,
                 **kw) -> list[RungCard]:
    """One card per rung of today's ladder (looped, never a fixed count) at ``problem``."""
    ladder = list(ladder) if ladder is not None else ladder_for(op)
    return [recorded(op, problem, v, ladder=ladder, **kw) for v in ladder if include_oracle or not v.oracle]


def card_table(cards: list[RungCard], style: bool = False):
    """The summary table of a ladder: one row per card, rates and ratios as numbers (with
    ``style``, a Styler that prints them as x1.10, 48%, and a dash where there is nothing)."""
    df = pd.DataFrame([c.as_dict() for c in cards])
    if not style or df.empty:
        return df
    unit = UNIT[cards[0].metric]
    # rates as the cards print them (3 digits, no exponent: 1643 GB/s, not 1.64e+03)
    return df.style.format({unit: fmt_rate, "x prev": "x{:.2f}", "of oracle": "{:.1%}", "measured/est": "{:.2f}"},
                           na_rep="—").hide(axis="index")


def changed_since_recorded(table: pd.DataFrame) -> pd.Series:
    """Per row of a records frame (:func:`records`): True where the rung's kernel changed since
    the row's commit (:func:`perfkit.history.source_changed_since`), False otherwise (peers, rungs
    no longer in the ladder, and rows where it cannot tell are not marked)."""
    if table is None or table.empty:
        return pd.Series(False, index=getattr(table, "index", None), dtype=bool)
    ladders: dict = {}

    def changed(op, name, commit) -> bool:
        if not commit or not isinstance(commit, str):
            return False
        if op not in ladders:
            try:
                ladders[op] = {v.name: v for v in ladder_for(op)}
            except LookupError:
                ladders[op] = {}
        v = ladders[op].get(name)
        return bool(v is not None and not v.oracle and source_changed_since(v, commit))

    ops = table["op"] if "op" in table else pd.Series("", index=table.index)
    commits = table["commit"] if "commit" in table else [None] * len(table)
    return pd.Series([changed(o, n, c) for o, n, c in zip(ops, table["variant"], commits)],
                     index=table.index, dtype=bool)


CHANGED_MARK_NOTE = "* recorded at an older commit; the kernel changed since"


def record_pivot(table: pd.DataFrame, values: str = "tflops", caption: str = ""):
    """A Styler of ``values`` by rung (rows, in today's ladder order: peers, the oracle, then
    01, 02, ...) and problem (columns), from a records frame (:func:`records`).  A cell whose
    record is of a kernel that changed since its commit is printed with a trailing ``*`` and
    the caption says what that means; the Styler's ``data`` stays numeric.  One GPU's records
    (ValueError for several: no cell mixes GPUs); given every record, each cell is the record
    chosen by code (:func:`.standing.chosen_records`, as the cards choose), never a mean of several."""
    from .standing import chosen_records  # (standing reads this module)

    if "gpu" in table and table["gpu"].nunique() > 1:
        raise ValueError(f"record_pivot is of one GPU's records; this table holds {sorted(set(table['gpu']))}")
    t = table
    if not t.empty and {"problem", "variant", "utc"} <= set(t.columns) and t.duplicated(
            [c for c in ("op", "gpu", "problem", "variant") if c in t]).any():
        ops = t["op"] if "op" in t else pd.Series("", index=t.index)
        t = pd.concat([chosen_records(g, op) for op, g in t.groupby(ops, sort=False)], ignore_index=True)
    t = t.copy()
    t["_rung"] = t["rung_now"] if "rung_now" in t else t["rung"]
    # rung number, not the order rows first appear in (a rung recorded at one problem only
    # would otherwise sort after the rest); rungs no longer in the ladder last
    order = (t.drop_duplicates("label").assign(_nan=lambda d: d["_rung"].isna())
             .sort_values(["_nan", "_rung", "label"])["label"].tolist())
    piv = t.pivot_table(index="label", columns="problem", values=values, sort=False).reindex(order)
    marked = t[changed_since_recorded(t).to_numpy()]
    # times in their unit (21 µs, 14.4 ms), rates with no exponent (1643): never 2.1e-05
    show = fmt_seconds if values.endswith("_s") else fmt_rate
    sty = piv.style.format(show, na_rep="—")
    for lab, prob in zip(marked["label"], marked["problem"]):
        if lab in piv.index and prob in piv.columns and np.isfinite(piv.at[lab, prob]):
            sty = sty.format(lambda x: show(x) + "*", subset=([lab], [prob]))
    note = CHANGED_MARK_NOTE if len(marked) else ""
    return sty.set_caption("; ".join(x for x in (caption, note) if x))


def _counters_beside(op, plabel, prev, v, cur, gpu):
    """The rung before's row to compare with ``cur``: of the same table's commit, or both rows of
    today's code (a delta across code versions would credit this rung with another's change)."""
    for c in all_counters(op, plabel, prev.name, gpu):
        if (c.commit or "")[:7] == (cur.commit or "")[:7] and c.commit:
            return c
        if source_changed_since(prev, c.commit) is False and source_changed_since(v, cur.commit) is False:
            return c
    return None
