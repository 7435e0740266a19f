"""A unit's child dies with its parent, and takes its own process group with it.

A unit runs in a child in its own process group (:func:`perfkit.record.supervise.run_child`), so
that a cap can kill the unit, pytest's workers, ``ncu`` and the profiled program together.  The
same isolation means that when the parent itself is killed (a cluster worker lost to the OOM
killer or to ``kill -9``) nothing stops the group: on a GPU it would go on timing next to the
unit's retry.  So the parent names itself in ``PERFKIT_UNIT_PARENT`` and the child, at its start:

* asks Linux for a death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``: sent when the parent
  thread that started it ends; ``run_child`` waits in that thread until the child is gone, so
  only the parent's death sends it), and answers SIGTERM by killing its whole group;
* watches ``getppid()`` from a thread twice a second, for systems without ``prctl`` and for a
  main thread busy in C when the signal arrives;
* checks once at once, in case the parent died before either was in place.

The variable is removed from the child's environment, so its own children (pytest's workers,
``ncu``'s target) never apply the rule to their parents.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

#: the environment variable that carries the parent's pid to the unit's child
PARENT_ENV = "PERFKIT_UNIT_PARENT"
#: seconds between two looks at the parent
POLL_S = 0.5


def _kill_own_group(*_) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)  # this process too: nothing of the unit outlives it


def die_with_parent() -> bool:
    """In a unit's child: arrange to kill this process group when the parent that started it dies.
    Returns False (and does nothing) unless the child was started by ``run_child`` and leads its
    own process group (never kill a group this process merely belongs to)."""
    parent = os.environ.pop(PARENT_ENV, None)
    if not parent or os.getpgrp() != os.getpid():
        return False
    parent = int(parent)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(1, int(signal.SIGTERM), 0, 0, 0) == 0:  # 1 = PR_SET_PDEATHSIG
                signal.signal(signal.SIGTERM, _kill_own_group)
        except (OSError, AttributeError, ValueError):  # no libc prctl, or not the main thread
            pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                _kill_own_group()
            time.sleep(POLL_S)

    if os.getppid() != parent:
        _kill_own_group()
    threading.Thread(target=watch, name="perfkit-orphan-watch", daemon=True).start()
    return True
