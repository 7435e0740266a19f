"""The one local cache root: ``$PERFKIT_CACHE_DIR``, default ``~/.cache/perfkit``.

Each concern keeps a folder under it (``anatomy/`` builds, ``banks/`` simulations, ``history/``
old commits' kernels, ``exercises/`` a learner's copies). Nothing here is shipped; what the
repository ships is the static store (:mod:`perfkit.static`)."""
from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    return Path(os.environ.get("PERFKIT_CACHE_DIR") or Path.home() / ".cache" / "perfkit")


def folder(name: str) -> Path:
    return root() / name
