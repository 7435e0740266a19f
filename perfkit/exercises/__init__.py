"""Exercises that check themselves, GPU-Puzzles style.

In a notebook the learner fills in a kernel (or a launch, or a tile size) and asks for a grade::

    from perfkit.exercises import grade
    grade("01.grid_stride", saxpy_grid_stride)

The grader runs the answer (in the CUDA simulator, or on the GPU when there is one) against the
float64 reference at awkward shapes with outputs poisoned with NaN first, then scores what the
compiler and the bank-conflict counter can see: registers, local memory, 16-byte loads, warp
shuffles, shared memory, occupancy, bank conflicts.  It never raises for a wrong answer: it
returns a :class:`Grade` whose failed check says which shape failed, where the first wrong
element is, or which property failed.  ``grade(name, None)`` says "not yet solved".

The reference solutions live apart, in :mod:`perfkit.exercises.solutions`, which no notebook
imports; ``grade(name, answer, reference=True)`` grades the reference instead of ``answer`` (the
notebooks' ``exercise_reference`` parameter, for CI runs).  ``show(name)`` prints the task.
"""
from __future__ import annotations

import importlib
import warnings

from ..kernels.intrinsics import load4, shfl_down, shfl_xor
from . import nb01, nb02, nb03, nb04, predict  # noqa: F401  (register the exercises)
from ._core import EXERCISES, Check, Exercise, Grade, backend_label, fresh_seed

__all__ = ["grade", "show", "solution", "EXERCISES", "Grade", "Check", "Exercise", "load4", "shfl_down",
           "shfl_xor", "names"]


def names(notebook: str | None = None) -> list[str]:
    """Exercise names, e.g. ``names("01")`` -> ``['01.grid_stride', ...]``."""
    return [n for n, ex in EXERCISES.items() if notebook is None or ex.notebook.startswith(notebook)]


def _get(name: str):
    if name not in EXERCISES:
        raise KeyError(f"no exercise {name!r}; have: {', '.join(EXERCISES)}")
    return EXERCISES[name]


def show(name: str) -> None:
    """Print the task and what the grader checks."""
    print(_get(name).describe())


def solution(name: str):
    """The reference answer (imported from :mod:`perfkit.exercises.solutions`)."""
    mod, attr = _get(name).solution.split(":")
    return getattr(importlib.import_module(mod), attr)


def grade(name: str, answer=None, *, reference: bool = False, seed: int | None = None, cc=(9, 0),
          progress: bool = False, **options) -> Grade:
    """Grade ``answer`` for exercise ``name``; returns a :class:`Grade` (never raises for a
    wrong answer).  ``reference=True`` grades the reference solution instead; ``seed`` fixes the
    random inputs (each grade draws fresh ones otherwise, and reports the seed); ``cc`` is the
    compile target of the anatomy checks; exercise-specific ``options`` (e.g. ``tile=16``)."""
    ex = _get(name)
    if reference:
        answer = solution(name)
    seed = fresh_seed() if seed is None else int(seed)
    g = Grade(ex.name, ex.title, seed=seed, backend=backend_label())
    if answer is None:
        g.status = "not yet solved"
        g.checks = [_skip(c) for c in ex.checks]
        return g
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(ex.checks), desc=f"grading {ex.name}", leave=False, unit="check")
    try:
        with warnings.catch_warnings():
            # the simulator runs kernels as Python: float warnings (-inf - -inf) would only
            # repeat what a failed check says, once per thread
            warnings.simplefilter("ignore", RuntimeWarning)
            for check in ex.steps(answer, seed=seed, cc=tuple(cc), **options):
                g.checks.append(check)
                if bar is not None:
                    if bar.n + 1 > bar.total:
                        bar.total = bar.n + 1
                    bar.update(1)
    except Exception as exc:  # a bug in a grader must not look like the learner's mistake
        g.checks.append(Check("grader", False, f"the grader itself failed: {exc.__class__.__name__}: {exc}"))
    finally:
        if bar is not None:
            bar.close()
    failed = any(c.ok is False for c in g.checks)
    g.status = "failed" if failed else "passed"
    return g


def _skip(name: str) -> Check:
    return Check(name, None, "not run: no answer yet")
