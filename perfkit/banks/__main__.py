"""``python -m perfkit.banks --worker JOB OUT``: the simulator child that
:func:`perfkit.banks.count` starts from a process that drives a GPU."""
import sys

if len(sys.argv) == 4 and sys.argv[1] == "--worker":
    import perfkit  # noqa: F401  (PERFKIT_BACKEND=sim: the simulator, chosen before numba.cuda)
    from perfkit.banks.simulate import worker_main

    sys.exit(worker_main(sys.argv[2], sys.argv[3]))
sys.exit("usage: python -m perfkit.banks --worker JOB OUT (the command is perfkit anatomy --access)")
