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
def shared_demo_run(tmp_path_factory, worker_id, prefect_server):
    """The demo, run once per test session whichever worker asks first (tests/demo_run.py)."""
    from demo_run import shared_demo

    base = tmp_path_factory.getbasetemp()
    # under xdist each worker's temp folder sits in one folder of the session
    return shared_demo(base if worker_id == "master" else base.parent, prefect_server)


#: rough seconds of ``make test`` per test file, for the files holding its slowest tests:
#: the sum of their tests among the ``--durations=15`` of the five CI runs of 2026-12-03
#: (medians; 1991 tests, 880 s in the last); test_shipped_configs from its docstring, less
#: the demo's smoke run. The browser tests carry the shared demo (78 s at full scale,
#: about half at scale 0.1); the digest and shipped-config tests that share it then find
#: it made. An order hint: a stale number costs balance, never a result.
HEAVY_FILES = {
    "test_shipped_configs.py": 190,
    "test_evaluation_process.py": 105,
    "test_puzzle_pipeline.py": 100,
    "test_world_models_pipeline.py": 90,
    "test_models_throughput.py": 62,
    "test_prefect_yaml.py": 53,
    "test_report_browser.py": 45,
    "test_world_pipeline.py": 43,
    "test_startup.py": 33,
    "test_compare.py": 30,
    "test_run_folder_verify.py": 29,
}


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the heaviest files sent first (longest processing time
    first), then xdist's own order (most tests first).

    Why: xdist orders files by their number of tests, so files of a few slow tests (the
    600-rpm throughput test, one test of 63 s; the world pipeline; the deployment) came
    last, and one worker was left running one of them while the other had nothing to
    do. With the heavy files first, the last files to hand out are small ones and the two
    workers end close together.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeaviestFirst(LoadFileScheduling):
        _ordered = False

        def _assign_work_unit(self, node):
            if not self._ordered:
                self._ordered = True
                units = sorted(
                    self.workqueue.items(), key=lambda unit: -HEAVY_FILES.get(Path(unit[0]).name, 0)
                )
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return HeaviestFirst(config, log)
