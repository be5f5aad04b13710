"""Test session setup: an isolated, offline Prefect home and quiet third-party bars.

Environment variables are set before any test module imports Prefect, so no test can
see an earlier run's cache or settings, and nothing tries to phone home.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

_HOME = tempfile.mkdtemp(prefix="hb-prefect-home-")
os.environ["PREFECT_HOME"] = _HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["TQDM_DISABLE"] = "1"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
os.environ.pop("PREFECT_API_URL", None)

# the fake model server module lives beside the tests
sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402

CONFIGS = Path(__file__).parent / "configs"


@pytest.fixture(scope="session")
def prefect_server():
    """One real Prefect API server (a subprocess on 127.0.0.1) for the whole session."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        # the harness sets the URL in Prefect's settings, not the environment; subprocess
        # tests pass it on explicitly
        yield PREFECT_API_URL.value()


@pytest.fixture(scope="session")
def shared_demo_run(tmp_path_factory, worker_id):
    """The full demo, run once per test session whichever worker asks first (tests/demo_run.py)."""
    from demo_run import shared_demo

    base = tmp_path_factory.getbasetemp()
    # under xdist each worker's temp folder sits in one folder of the session
    return shared_demo(base if worker_id == "master" else base.parent)

