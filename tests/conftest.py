"""Shared test setup: perfkit picks its backend (the simulator on a machine with no GPU)
before anything imports numba.cuda."""
import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

import perfkit  # noqa: E402,F401  (decides GPU or simulator first)
from perfkit import backend  # noqa: E402


@pytest.fixture
def fresh_seed(request):
    """A new random seed each run, printed on failure so a failing case can be replayed."""
    seed = int(np.random.SeedSequence().entropy % (2**31))
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed}")
    return seed


def pytest_report_header(config):
    return f"perfkit: {backend.describe()}"
