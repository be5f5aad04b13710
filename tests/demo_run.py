"""One ``horizonbench demo`` per test session, shared by every test file that reads it.

Why: the demo is the suite's slowest fixture (the full one was 78 s of setup at CI load),
and three files read it: the report in a browser (tests/test_report_browser.py), the
pinned digests of its tables and report (tests/test_demo_digests.py) and the shipped
configs' check (tests/test_shipped_configs.py). Under ``pytest -n 2 --dist loadfile``
each worker is its own process, so a session fixture alone would run the demo once per
worker that asks for it. A lock file in the session's shared temp folder lets the first
worker run it and every later one (on any worker) reuse its folder and result.

The run is ``horizonbench demo --scale 0.1``: every family, sweep setting, mode, model,
environment, agent and stage of the demo at a tenth of its instances. Measured with
/usr/bin/time on c527958 (2026-12-03, load average about 12): 52 CPU-s against 94-110 for
the full demo, whose digests are checked by hand (tests/test_demo_digests.py). At 0.05
the first model's failing answers are all of one violation, which leaves the browser
test of the violation filter nothing to filter.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: the demo's scale in tests (see above)
SCALE = "0.1"
ARGV = ["demo", "--scale", SCALE]


@dataclass(frozen=True)
class DemoRun:
    """The shared demo's folder, exit code and the last lines it wrote on stderr."""

    path: Path
    exit_code: int
    stderr_tail: str


def shared_demo(session_dir: Path, api_url: str) -> DemoRun:
    """Run the demo unless this session already has; ``session_dir`` is one folder every
    worker of the session sees (and no other session does), for the lock and the result.
    The demo talks to the session's Prefect server at ``api_url`` rather than starting a
    temporary one of its own (which changes no output byte: the digests were recorded
    with a temporary server)."""
    # in the session's folder, not a fixed one: two sessions at once (several people on
    # one checkout) would otherwise write one run folder and share its attempt store
    run = session_dir / "demo"
    lock = session_dir / "demo-run.lock"
    done = session_dir / "demo-run.json"
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when fh closes, even on an error
        if not done.exists():
            shutil.rmtree(run, ignore_errors=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
            proc = subprocess.run(
                [sys.executable, "-m", "horizonbench.cli.main", *ARGV, "--out", str(run)],
                env=env | {"PREFECT_API_URL": api_url},
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
            done.write_text(json.dumps({"exit_code": proc.returncode, "stderr_tail": tail}))
    result = json.loads(done.read_text())
    return DemoRun(run, result["exit_code"], result["stderr_tail"])
