"""One rung view for every notebook (:class:`LadderView`): a rung's kernel (or its diff against the
rung before), its anatomy folded, a prediction prompt, then the answer folded (the card: record,
model, counters).  The teaching prose lives in the notebook's markdown above each view; a rung
the notebook has no section for is shown by :meth:`LadderView.rest` with its ``what``, so a new
rung needs no notebook edit.  Record tables and figures of a whole ladder come after the rung
sections, folded (:meth:`LadderView.summary`, :func:`fold_figure`)."""
from __future__ import annotations

import base64
import html
import io

import numpy as np
import pandas as pd

from ..kernels.base import Problem, Variant
from .cards import RungCard, card_table, recorded
from .estimates import estimate_rung
from .formatting import anatomy_changes, anatomy_table, fmt_seconds
from .kernel_source import source, source_diff
from .matching import ladder_for, runs, runs_as_is, shared_records
from .prompts import Rendered, answer, ask, fold, predict_prompt
from .sass import sass_table
from .standing import chosen_records


def fold_figure(fig_or_ax, summary: str, open_: bool = False) -> Rendered:
    """A matplotlib figure (or an Axes of one) as a PNG folded in a ``<details>`` block, closed
    so that a reader predicts before seeing it; the figure is closed (not drawn again below)."""
    import matplotlib.pyplot as plt

    fig = getattr(fig_or_ax, "figure", fig_or_ax)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return Rendered(f"<details{' open' if open_ else ''}><summary>{html.escape(summary)}</summary>"
                 f"<img src='data:image/png;base64,{data}'/></details>", f"[{summary}] (a figure)")


def _display(objs) -> None:
    from IPython.display import display

    for o in objs:
        display(o)


def diff_side(label: str, report, kernel: int, problem: Problem) -> str:
    """One side of an anatomy diff, named so that it cannot be read as another build: the rung, the
    launch compared (its index and kernel) and the problem it was compiled for."""
    n = len(getattr(report, "launches", None) or [])
    launch = f"launch {kernel}" + (f" of {n}" if n > 1 else "")
    arch = report.arch or f"sm_{report.cc[0]}{report.cc[1]}"
    return f"{label} ({launch}, {report.kernel_name}, at {problem.label}, {arch})"


class NamedDiff:
    """An anatomy diff (:func:`perfkit.anatomy.diff`) whose header names the launch and the problem of
    both sides (the rung before is often built at this rung's problem, not at the build its own
    section showed)."""

    def __init__(self, diff, before: str, after: str):
        self.diff, self.before, self.after = diff, before, after

    @property
    def header(self) -> str:
        return f"anatomy diff: {self.before} -> {self.after}"

    def __str__(self) -> str:
        lines = str(self.diff).split("\n")
        return "\n".join([self.header] + lines[1:])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(self.header)}</p>" + self.diff._repr_html_()


_runs = runs_as_is  # (the view's older name): the summary keeps a rung's card at its own problem only


class LadderView:
    """The rung sections of one ladder at one problem.  ``view.show(name)`` renders a rung;
    ``view.rest()`` the rungs no section showed; ``view.cards`` the cards shown (name -> card)."""

    def __init__(self, op: str, problem: Problem, *, table: pd.DataFrame | None = None,
                 model_gpu: str = "h100-sxm", cc=(9, 0), ladder: list[Variant] | None = None,
                 estimate: bool = True, banks_unrecorded: bool = True, traffic: bool = False,
                 plot_gpu: str | None = None):
        self.op, self.problem, self.table, self.model_gpu, self.cc = op, problem, table, model_gpu, tuple(cc)
        self.ladder = list(ladder) if ladder is not None else ladder_for(op)
        self.estimate, self.banks_unrecorded, self.traffic = estimate, banks_unrecorded, traffic
        self.plot_gpu = plot_gpu  # a figure draws one GPU's records (cards name theirs, any GPU)
        self.reports: dict = {}
        self.cards: dict[str, RungCard] = {}
        self.shown: list[str] = []
        self.built: dict[str, tuple] = {}  # the (launch, problem label) each shown section's anatomy is of
        self.prevs: dict[str, Variant] = {}  # a section's explicit ``prev`` (its sub-ladder's rung), by name

    # -- one rung --
    def _example(self, v: Variant) -> Problem:
        return v.example(self.problem) if hasattr(v, "example") else self.problem

    def _report(self, v: Variant, kernel: int = 0, problem: Problem | None = None):
        """``v``'s build at ``problem`` (default its own example problem): the rung before is
        built at this rung's problem where it runs it, so that its anatomy column is the code
        the prompt compares (persist at 1024 columns beside smem_row at 1024, not at 4096)."""
        from .. import anatomy

        own = self._example(v)
        p = problem if problem is not None else own
        key = (v.name, kernel) if p.label == own.label else (v.name, kernel, p.label)  # (name, kernel): its own
        if key not in self.reports:
            self.reports[key] = anatomy.inspect(v, p, self.cc, kernel=kernel)
        return self.reports[key]

    def prev_of(self, v: Variant) -> Variant | None:
        """The rung ``v`` is compared with: the nearest earlier rung that runs ``v``'s own problem
        (a float32 rung after a float16-only one is compared with the float32 rung it builds on;
        a rung shown at another example that still runs the problem counts, as conv's
        ``igemm_regblock`` before ``winograd`` in NCHW), else the rung just before (then compared
        at its own problem, and the prompt says so)."""
        i = next(i for i, u in enumerate(self.ladder) if u.name == v.name)
        before = [u for u in reversed(self.ladder[:i]) if not u.oracle]
        p = self._example(v)
        return next((u for u in before if runs(u, p)), before[0] if before else None)

    def rung(self, name: str, *, kernel: int = 0, fold_source: str | None = None, heading: bool = False,
             prev: str | None = None, built: bool = False, prev_kernel: int = 0) -> list:
        """The renderables of one rung section, in reading order (:meth:`show` displays them).
        ``fold_source``: fold the kernel behind this summary (an exercise asks for it).
        ``prev``: the rung the diff, the prompt and the card compare with, where the ladder
        interleaves two sub-ladders (conv's tc_cp_async follows winograd_tiled in ladder order,
        but is tc_ldmatrix plus one idea); default the non-oracle rung just before.
        ``built``: the diff of the code each build compiles (``source_diff(built=True)``), for rungs
        of one kernel factory that differ by compile-time switches.  ``prev_kernel``: which launch
        of the rung before the anatomy diff compares with (``kernel`` is this rung's)."""
        from .. import anatomy

        names = [v.name for v in self.ladder]
        if name not in names:
            return [Rendered(f"<p><i><code>{html.escape(name)}</code> is not in today's ladder "
                          f"({html.escape(', '.join(names))}): nothing to show.</i></p>",
                          f"{name} is not in today's ladder")]
        v = self.ladder[names.index(name)]
        if prev is not None and prev not in names:
            raise ValueError(f"prev={prev!r} is not in today's ladder ({', '.join(names)})")
        if prev is not None:  # kept: the summary tables compare this rung's rows with the same rung
            prev = self.prevs[v.name] = self.ladder[names.index(prev)]
        else:
            prev = self.prev_of(v)
        p = self._example(v)
        self.shown.append(name)
        out = []
        if heading:
            out.append(Rendered(f"<h4>{html.escape(v.label)}</h4><p style='max-width:60em'>{html.escape(v.what)}</p>",
                             f"{v.label}\n{v.what}"))
        code = source_diff(prev, v, p, built=built) if prev is not None else source(v, p)
        out.append(fold(code, summary=fold_source) if fold_source else code)
        r = self._report(v, kernel)
        p_prev = (p if runs(prev, p) else self._example(prev)) if prev is not None else None
        r_prev = self._report(prev, prev_kernel, p if runs(prev, p) else None) if prev is not None else None
        self.built[name] = (kernel, p.label)
        diff = (NamedDiff(anatomy.diff(r_prev, r), diff_side(prev.label, r_prev, prev_kernel, p_prev),
                          diff_side(v.label, r, kernel, p)) if r_prev is not None else None)
        out.append(fold(diff if diff is not None else r,
                        summary=f"anatomy of {v.label} ({r.kernel_name}) for {r.arch or f'sm_{self.cc[0]}{self.cc[1]}'}: "
                                f"{r.registers} registers, {r.shared_bytes} B shared, occupancy "
                                f"{r.occupancy.ratio:.0%} (open for the diff)"))
        if self.traffic:
            t = v.traffic(p)
            # the FLOPs the rung's own traffic model counts (Winograd does fewer than the problem's)
            flops = t.flops if t.flops is not None and t.flops > 0 else p.flops
            fewer = (f" (the problem's {p.flops / 1e9:.1f})"
                     if abs(flops - p.flops) > 0.005 * p.flops else "")
            out.append(Rendered(f"<p>traffic model at <code>{html.escape(p.label)}</code>: {flops / 1e9:.2f} GFLOP{fewer}, "
                             f"DRAM {t.dram_bytes / 1e6:.1f} MB, L2 {(t.l2_bytes or 0) / 1e6:.0f} MB, shared "
                             f"{(t.smem_bytes or 0) / 1e9:.2f} GB; {html.escape(t.notes or '')}</p>",
                             f"traffic model at {p.label}"))
        card = recorded(self.op, self.problem, v, ladder=self.ladder, table=self.table, model_gpu=self.model_gpu,
                        estimate=self.estimate, banks_unrecorded=self.banks_unrecorded, prev=prev)
        card.anatomy_note = anatomy_changes(r_prev, r)
        if card.anatomy_note and prev is not None and self.built.get(prev.name, (prev_kernel, p_prev.label)) != (
                prev_kernel, p_prev.label):  # not the build of the rung before that its section showed
            # said as a reader sees it: the build compared, and that it is not the one shown above
            card.anatomy_note += (f" (compared with {prev.label} as built for {p_prev.label}"
                                  + (f", its launch {prev_kernel + 1}" if prev_kernel else "")
                                  + "; its own section showed another build)")
        card.tensor_mma = bool((r.mix or {}).get("tensor mma", 0))  # no tensor-pipe counter on a SIMT card
        pc = self.cards.get(prev.name) if prev is not None else None
        if pc is not None:  # the GPU the rung before's card as shown was estimated for
            card.prev_shown_model_gpu = pc.model_gpu
        if (not card.found and pc is not None and pc.model_gpu == card.model_gpu and pc.problem == card.problem
                and not np.isfinite(card.prev_estimate_s)):  # no record: the prompt's question, as the model answers it
            # (the rung before's card estimates its record behind that record's timer: here both
            # are the model's default, like for like)
            card.prev_estimate_s = (estimate_rung(prev, p, card.model_gpu, card.estimate_banks)[0]
                                    if pc.found and card.problem == p.label else pc.estimate_s)
            if pc.found:
                card.prev_record = (f"{fmt_seconds(pc.median_s)} on {pc.gpu} at {str(pc.commit or '')[:7]}"
                                    + (", kernel changed since" if pc.changed_since else ""))
        elif (self.estimate and not card.found and prev is not None and not prev.oracle and card.problem == p.label
              and runs(prev, p)
              and not np.isfinite(card.prev_estimate_s)):  # the rung before's card is at another problem
            # (persist at narrow rows after smem_row at the op's example): the model answers at this one
            card.prev_estimate_s = estimate_rung(prev, p, card.model_gpu, card.estimate_banks)[0]
        self.cards[name] = card
        if card.found and card.problem != p.label:  # recorded at the problem as asked, not the rung's twin
            out.append(Rendered(f"<p><i>The card below is the record at <code>{html.escape(card.problem)}</code>: the "
                             f"anatomy above is of the rung at its own example problem, <code>"
                             f"{html.escape(p.label)}</code>.</i></p>",
                             f"The card below is the record at {card.problem}: the anatomy above is of the rung at "
                             f"its own example problem, {p.label}."))
        own = None  # the rung before is compared at its own problem: the prompt names it
        if prev is not None and card.prev_problem:
            own = card.prev_problem
        elif prev is not None and not runs(prev, p):
            own = self._example(prev).label
        out.append(predict_prompt(prev, v, card.problem, prev_problem=own))
        out.append(answer(card))
        return out

    def show(self, name: str, **kw) -> None:
        """Display one rung section (returns nothing, so a cell never prints the card unfolded:
        ``view.cards[name]`` has it)."""
        _display(self.rung(name, **kw))

    def sass(self, name: str, opcodes, question: str, *, prev: str | None = None, kernel: int = 0,
             prev_kernel: int = 0) -> None:
        """What a rung's new instructions become: ``question`` (the reader predicts), then, folded,
        how many of each SASS opcode in ``opcodes`` the rung before (``prev``, default the one before)
        and this rung hold in their compiled code and hot loop, one line of each and what it is.
        From the anatomy (static store or compiler): no GPU, no record."""
        names = [v.name for v in self.ladder]
        v = self.ladder[names.index(name)]
        pv = self.ladder[names.index(prev)] if prev is not None else self.prev_of(v)
        reps = {}
        p = self._example(v)
        if pv is not None:
            reps[pv.label] = self._report(pv, prev_kernel, p if runs(pv, p) else None)
        r = reps[v.label] = self._report(v, kernel)
        tab = sass_table(reps, list(opcodes)).set_index("SASS")  # (a DataFrame: HTML in a notebook, text elsewhere)
        _display([ask(question, "Write your guess down, then open the compiled code's answer below (read from "
                                "the anatomy: no GPU needed)."),
                  fold(tab, summary=f"the SASS of {v.label} ({r.kernel_name}, {r.arch or f'sm_{self.cc[0]}{self.cc[1]}'})"
                                    + (f" beside {pv.label}'s" if pv is not None else "")
                                    + ": instructions counted in the compiled code (a loop body once) and in the "
                                      "hot loop (open once you have predicted)")])

    def rest(self) -> list[str]:
        """Show every rung of today's ladder that no section showed yet (a rung added since the
        notebook was written), each under its label and ``what``; returns their names."""
        todo = [v.name for v in self.ladder if not v.oracle and v.name not in self.shown]
        for name in todo:
            _display(self.rung(name, heading=True))
        return todo

    # -- the whole ladder, after its sections --
    def prev_at(self, v: Variant, problem: Problem) -> Variant | None:
        """The rung a table row of ``v`` at ``problem`` is compared with: its section's explicit
        ``prev`` where it runs ``problem`` (conv tc_cp_async with tc_ldmatrix, its sub-ladder's,
        not winograd_tiled), else the nearest earlier rung that runs ``problem`` (GEMM 19
        simt_wide, float32, with 11 autotuned, not with the float16-only 18 tc_deep at its own
        problem: where one exists, a table's factor does not cross dtypes), else None (the card's
        own rule)."""
        own = self.prevs.get(v.name)
        if own is not None and runs(own, problem):
            return own
        i = next(i for i, u in enumerate(self.ladder) if u.name == v.name)
        return next((u for u in reversed(self.ladder[:i]) if not u.oracle and runs(u, problem)), None)

    def all_cards(self, problem: Problem | None = None) -> list[RungCard]:
        """One card per rung of today's ladder at ``problem`` (the sections' cards where shown)."""
        if problem is None or problem is self.problem:
            return [self.cards[v.name] if v.name in self.cards else
                    recorded(self.op, self.problem, v, ladder=self.ladder, table=self.table,
                             model_gpu=self.model_gpu, estimate=self.estimate,
                             banks_unrecorded=self.banks_unrecorded, prev=self.prev_at(v, self.problem))
                    for v in self.ladder if not v.oracle]
        return [recorded(self.op, problem, v, ladder=self.ladder, table=self.table, model_gpu=self.model_gpu,
                         estimate=self.estimate, banks_unrecorded=self.banks_unrecorded, prev=self.prev_at(v, problem))
                for v in self.ladder if not v.oracle]

    def anatomy_table(self) -> Rendered:
        """Every shown rung's anatomy in one table, folded."""
        reps = {next(v.label for v in self.ladder if v.name == k[0]): r for k, r in self.reports.items() if len(k) == 2}
        return fold(anatomy_table(reps), summary=f"anatomy of every rung shown, sm_{self.cc[0]}{self.cc[1]} "
                                                 "(one row per rung, at its example problem)")

    def summary(self, problem: Problem | None = None, *, metric: str | None = None, title: str | None = None):
        """The ladder's card table and its bar chart at ``problem``, each folded: shown after the
        rung sections, opened once the reader has predicted.  One table (and chart) per GPU whose
        records the cards show: where the newest records of today's code lie on two GPUs, each
        table is of one GPU (its own records, older code marked), so that no "x the rung before"
        or "of oracle" crosses GPUs from one row to the next; each bar is the record its card shows
        (one per rung, chosen by code among every record of ``table``).  Returns the cards as the
        sections show them."""
        p = problem or self.problem
        # only the rungs that run this problem: a rung shown at its own twin (GEMM's float16 rungs
        # at a float32 problem) belongs to the twin's summary, not beside float32 rungs with a
        # factor across dtypes; a rung that refuses the problem (SIMT GEMM at float16) has no card
        runs = {v.name: _runs(v, p) for v in self.ladder if not v.oracle}
        keep = lambda cards: [c for c in cards if c.problem == p.label and (c.found or runs.get(c.variant, True))]  # noqa: E731
        cs = keep(self.all_cards(p))
        metric = metric or (cs[0].metric if cs else "tflops")
        gpus = sorted({c.gpu for c in cs if c.found}, key=lambda g: (g != self.plot_gpu, g))
        if not gpus:  # nothing measured: the model's estimates, and no empty chart
            _display([fold(card_table(cs, style=True), summary=f"the {self.op} ladder at {p.label}: no record of "
                                                              "this problem on a real GPU yet (open for the model's "
                                                              "estimates)")])
            return cs
        for g in gpus:
            mine = cs if len(gpus) == 1 else keep(self._cards_on(p, g))
            self._summary_of_gpu(mine, p, g, metric, title, several=len(gpus) > 1)
        return cs

    def _cards_on(self, p: Problem, gpu: str) -> list[RungCard]:
        """The cards at ``p`` from ``gpu``'s records only (older code where that is all it has)."""
        t = self.table
        if t is not None and not t.empty and "gpu" in t:
            t = t[t["gpu"] == gpu]
        return [recorded(self.op, p, v, ladder=self.ladder, table=t, gpu=gpu, model_gpu=self.model_gpu,
                         estimate=self.estimate, banks_unrecorded=self.banks_unrecorded, prev=self.prev_at(v, p))
                for v in self.ladder if not v.oracle]

    def _summary_of_gpu(self, cs, p, gpu, metric, title, several):
        from .. import plots

        found = [c for c in cs if c.found and c.gpu == gpu]
        older = [c.label for c in found if c.changed_since]
        t = self.table if self.table is not None else shared_records(self.op, self.ladder, latest=False)  # the cards'
        t = t[t["op"] == self.op] if not t.empty and "op" in t else t
        left_out = [c.label for c in cs if c.found and c.gpu != gpu]
        if t is not None and not t.empty and "gpu" in t:  # never bars of two GPUs
            t = t[t["gpu"] == gpu]
            if {"problem", "variant", "utc"} <= set(t.columns):
                # one bar per rung, its record chosen by code as the cards choose (the table holds
                # every record: never two bars of one rung, nor the newest of older code)
                t = chosen_records(t[t["problem"] == p.label], self.op)
            if {"variant", "commit", "rung"} <= set(t.columns) and not t.empty:
                # a rung's bar is the record its card shows (never a bar of other code beside the
                # table's number)
                shown = {(c.variant, c.commit) for c in found}
                t = t[(t["rung"] <= 0).to_numpy() | [(v, str(cm)) in shown for v, cm in zip(t["variant"], t["commit"])]]
        ax = plots.ladder(t if t is not None else pd.DataFrame(), metric=metric, problem=p.label,
                          title=(title or f"{self.op} ladder at {p.label}") + (f" on {gpu}" if several else ""),
                          estimates={c.label: c.estimate_rate for c in cs},
                          changed={c.label for c in cs if c.changed_since})
        note = (f"; {len(older)} of {len(found)} records {'is' if len(older) == 1 else 'are'} of older code (kernel changed since: not today's "
                "kernels)" if older else "")
        head = f"the {self.op} ladder at {p.label} on {gpu}" if several else f"the {self.op} ladder at {p.label}"
        _display([fold(card_table(cs, style=True), summary=f"{head}: one row per rung (recorded on {gpu}{note}); "
                                                           "open once you have predicted"),
                  fold_figure(ax, f"{head} as bars (measured on {gpu}; the model's estimates as ticks"
                                  + (f"; no bar for {', '.join(left_out)}: the table's record of "
                                     f"{'it' if len(left_out) == 1 else 'them'} is of another GPU" if left_out else "")
                                  + ")")])
