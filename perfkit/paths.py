"""Where perfkit's shipped data lives: one home for the path.

In a checkout (and an editable install) that is the repository's ``data/``; a non-editable
install carries the same files inside the package as ``perfkit/data`` (pyproject maps the
``perfkit.data`` package onto ``data/``).  ``PERFKIT_ROOT`` points the notebooks and git at
another checkout."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The checkout perfkit runs from (git, runs/, notebooks/); for an installed package, its parent."""
    return Path(os.environ.get("PERFKIT_ROOT") or PACKAGE.parent)


def data_dir() -> Path:
    inside = PACKAGE / "data"
    return inside if inside.is_dir() else PACKAGE.parent / "data"


DATA = data_dir()
