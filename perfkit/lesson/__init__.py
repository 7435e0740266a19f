"""Literate helpers for the notebooks: what a rung's kernel is, what changed, and what it did.

* :func:`source` / :func:`source_diff`: a rung's **kernel** (the function it launches, with its
  launch shape and config) and the helpers that kernel calls inside ``perfkit.kernels``
  (``load4``, ``mma_16816``, ``group_sum``...), found from the kernel's global names and
  closure; the diff between two rungs is the diff of those, not of the rung classes.
* :func:`recorded` / :class:`RungCard`: the recorded GPU measurement of one (problem, rung):
  median, rate, x the rung before, fraction of the oracle, with GPU, date and commit; the
  model's estimate beside it (``perfkit.model.estimate`` when present) and a paragraph that
  reads, from the numbers, where the estimate misses.  :func:`ladder_cards` and
  :func:`card_table` give a whole ladder (:func:`record_pivot`: rates by rung and problem, a record
  of a kernel changed since marked ``*``); :func:`records` gives the recorded frame with the
  current ladder's labels (for :func:`perfkit.plots.ladder` and the roofline).
* :func:`predict_prompt` / :func:`answer`: "predict before you run", then the answer folded.
* :class:`LadderView`: the one rung view of every notebook (kernel or diff, anatomy folded,
  prompt, folded card); :func:`fold_figure` folds a figure of records until it is opened.
* :func:`standing` / :func:`takeaway`: where a ladder stands, its best rung against the library per
  problem, dtype and GPU, and a paragraph written from those numbers.
* :class:`WhereTheyStand`: memory-bound ops on one GPU, every recorded problem (best checked rung,
  torch, Triton, fraction of the measured copy ceiling), records chosen by code as the cards choose.
* :func:`counters`: a rung's Nsight Compute row (``data/ncu/``) on a GPU, shown on its card with
  the change from the rung before and the counter that moved.
* :func:`check_rungs`: every rung against the float64 reference before anything is shown;
  :func:`traffic_table`: each rung's DRAM bytes over the ideal (the model before anything runs).
* :func:`measured_classes`: a recorded workload profile per class beside its prediction (notebook 05).
* :func:`what_if_timers`, :func:`timers_paragraph`: a rung on every GPU under the flush-only timer
  and behind today's spin: the launch time the timer hides (notebook 06); :func:`timer_check`: a
  recorded timer check (``data/timer/``), or a sentence where it is not here;
  :func:`timer_vs_do_bench`, :func:`hot_cold_lines`, :func:`empty_kernel_lines`: what notebook 01
  shows of the recorded timer checks where it cannot time a GPU itself.
* :func:`recorded_where`, :func:`runs_sentence`, :func:`copy_sentence`: which records exist (which
  GPU timed a rung, where and when; each GPU's runs; what the copy kernel reached), in words read
  from the records when the notebook runs, so that the prose stays true as records are added;
  :func:`comparison`: ``perfkit compare`` of two selections, or a sentence where one is not here.
* :func:`sass_table` (``LadderView.sass``): what a rung's new instructions become in SASS, counted
  in its compiled code and hot loop beside the rung before's (the anatomy: no GPU).
* :func:`quiet_numba_warnings`, :func:`sweep_table`, :func:`fold`, :func:`anatomy_table`:
  output a reader can read; :func:`progress`: a widget bar while work runs that a saved notebook
  keeps as one line (``bench.sweep(..., progress=lesson.progress)``), not as tqdm's frozen stub.

How a record is matched to a rung (:data:`MATCH_RULE`): ladders are renumbered as rungs are
added, so a record matches by **op + variant name + problem parameters**, never by rung number.

The package, by concern: ``formatting`` (units, tables, anatomy changes), ``kernel_source``
(the kernel and its helpers, diffs), ``matching`` (records matched to rungs), ``estimates``
(the model beside a card), ``cards`` (``recorded``, ``RungCard``), ``prompts`` (predict, then
the folded answer), ``coverage`` (which records exist, in words), ``numba_warnings``.
"""
from __future__ import annotations

from ..history import source_changed_since  # re-exported: the notebooks ask lesson
from .cards import (CHANGED_MARK_NOTE, RungCard, card_table, changed_since_recorded, choose_record, ladder_cards,
                    record_pivot, recorded)
from .estimates import estimate_rung, estimate_then, estimate_then_detail, first_recorded, first_recorded_answer
from .formatting import (UNIT, anatomy_changes, anatomy_table, fmt_rate, fmt_seconds, metric_for, plural, rate_of,
                         sweep_table)
from .kernel_source import (LONG_DIFF, const_eval, constants, kernel_helpers, kernel_sources, source,
                            source_diff)
from .matching import (MATCH_RULE, false_no_record_claims, ladder_for, match_rows, matches, records, reload,
                       recorded_gpus, shown_gpu, spec_key)
from .numba_warnings import WarningLog, numba_warning_summary, quiet_numba_warnings
from .prompts import (answer, answers_shown_before, ask, fold, paragraph, predict_prompt, rung_section,
                      values_shown_before)
from .sass import mnemonic, opcode_counts, sass_table
from .checks import check_rungs, traffic_table
from .workloads import measured_classes
from .timers import (empty_kernel_lines, hot_cold_lines, newest_timer_runs, timer_check, timer_runs, timer_vs_do_bench,
                     timers_paragraph, what_if_timers)
from .coverage import comparison, copy_sentence, problem_words, recorded_where, recording_runs, runs_sentence
from .ncu import COUNTERS, Counters, counters, kernels as ncu_kernels
from .view import LadderView, fold_figure
from .networks import layer_estimate, measured_s, network_table, weighted_of_oracle
from .standing import chosen_records, standing, standing_figure, standing_table, takeaway
from .bandwidth import WhereTheyStand, copy_ceiling, standing_rows
from .progress import Progress, progress
from .tuning import describe_config, tuning_paragraph, tuning_table

__all__ = ["source", "source_diff", "kernel_sources", "kernel_helpers", "MATCH_RULE", "records",
           "recorded", "RungCard", "ladder_cards", "card_table", "record_pivot", "changed_since_recorded",
           "CHANGED_MARK_NOTE", "ladder_for", "predict_prompt", "answer",
           "rung_section", "source_changed_since", "quiet_numba_warnings", "numba_warning_summary",
           "sweep_table", "fold", "anatomy_table", "fmt_seconds", "metric_for", "false_no_record_claims", "reload",
           "LadderView", "fold_figure", "counters", "Counters", "COUNTERS", "answers_shown_before", "values_shown_before",
           "layer_estimate", "first_recorded", "first_recorded_answer", "network_table", "weighted_of_oracle", "standing", "chosen_records", "standing_table",
           "standing_figure", "takeaway", "choose_record", "paragraph", "ncu_kernels", "WhereTheyStand",
           "copy_ceiling", "standing_rows", "ask", "mnemonic", "opcode_counts", "sass_table", "check_rungs", "traffic_table", "measured_classes", "plural", "what_if_timers", "timers_paragraph",
           "Progress", "progress", "recorded_gpus", "shown_gpu", "spec_key", "tuning_table", "tuning_paragraph",
           "describe_config", "timer_check", "timer_runs", "newest_timer_runs", "timer_vs_do_bench", "hot_cold_lines",
           "empty_kernel_lines", "comparison", "copy_sentence", "problem_words", "recorded_where",
           "recording_runs", "runs_sentence"]

# the names these had when lesson was one module (tests use them)
_const_eval, _matches, _match_rows, _WarningLog = const_eval, matches, match_rows, WarningLog
_UNIT, _rate, _estimate, _estimate_then = UNIT, rate_of, estimate_rung, estimate_then
