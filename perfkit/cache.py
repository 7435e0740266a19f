"""The one local cache root: ``$PERFKIT_CACHE_DIR``, default ``~/.cache/perfkit``.

Each concern keeps a folder under it (``anatomy/`` builds, ``banks/`` simulations, ``history/``
old commits' kernels, ``exercises/`` a learner's copies). Nothing here is shipped; what the
repository ships is the static store (:mod:`perfkit.static`).

A cached answer is keyed by what it depends on, including the code that computes it:
:func:`code_version` derives that code's version from its text, so nobody bumps a number by hand
(and nobody forgets to)."""
from __future__ import annotations

import functools
import hashlib
import io
import os
import tokenize
from pathlib import Path

from .paths import PACKAGE


def root() -> Path:
    return Path(os.environ.get("PERFKIT_CACHE_DIR") or Path.home() / ".cache" / "perfkit")


def folder(name: str) -> Path:
    return root() / name


def code_version(*modules: str) -> str:
    """The version of the code in ``modules`` (paths inside the package, ``"_simfix.py"``,
    ``"anatomy/build.py"``), derived from their text: the same after an edit to comments, blank
    lines or trailing space; different after any other edit."""
    h = hashlib.sha256()
    for rel in modules:
        h.update(rel.encode() + b"\0" + _code_text((PACKAGE / rel).read_text()) + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=64)  # by the text itself: a file rewritten within one clock tick still counts
def _code_text(src: str) -> bytes:
    """The file's text without its comments, blank lines and trailing space.  Comments are found
    by tokenizing (a ``#`` inside a string is not one); the text itself is hashed, not the tokens,
    whose split differs between Python versions (3.12 tokenizes inside f-strings)."""
    lines = src.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            (row, col) = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(line.rstrip() for line in lines if line.strip()).encode()
