"""Modules written by :func:`perfkit.exercises._core.carry`: a learner's kernel, so that the
anatomy compiler (a child process) can import it.  They live under the cache directory
(``$PERFKIT_CACHE_DIR/exercises``, default ``~/.cache/perfkit/exercises``), never in the source
tree; this package only points its search path there."""
import os as _os
from pathlib import Path as _Path

__path__.append(str(_Path(_os.environ.get("PERFKIT_CACHE_DIR") or _Path.home() / ".cache" / "perfkit")
                    / "exercises"))
