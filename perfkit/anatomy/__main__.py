"""``python -m perfkit.anatomy``: the anatomy's command line, and (``--worker JOB OUT``) the
compiler child that :func:`perfkit.anatomy.build.compile_rung` starts with ``PERFKIT_BACKEND=compile``."""
import sys

if len(sys.argv) == 4 and sys.argv[1] == "--worker":
    import perfkit  # noqa: F401  (PERFKIT_BACKEND=compile: the real numba.cuda)
    from perfkit.anatomy.build import worker_main

    sys.exit(worker_main(sys.argv[2], sys.argv[3]))

from perfkit.anatomy.command import cli  # noqa: E402

sys.exit(cli(sys.argv[1:]))
