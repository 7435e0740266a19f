"""``perfkit record`` for a checkout with no install (the device call runs this): the recorder is
``perfkit/record/`` (its docstring is the manual; docs/RECORDING.md the runbook)."""
import time

T0 = time.monotonic()  # the budget counts from here: before the imports and CUDA's start-up

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if __name__ == "__main__" and "--rehearse" in sys.argv[1:]:
    os.environ["PERFKIT_BACKEND"] = "sim"  # chosen before perfkit loads numba.cuda

if __name__ == "__main__":
    from perfkit.record import command

    sys.exit(command.main(sys.argv[1:], t0=T0, prog="tools/record_gpu.py"))
