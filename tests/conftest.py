import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

SHARED = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared"))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="run slow statistical tests (level/power over many replications)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow statistical test: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
