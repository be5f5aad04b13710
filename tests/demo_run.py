"""One full ``horizonbench demo`` per test session, shared by every test file that reads it.

Why: the full demo is the suite's slowest fixture (78 s of setup at CI load), and two files
read it: the report in a browser (tests/test_report_browser.py) and the pinned digests of
the demo's tables and report (tests/test_demo_digests.py). Under ``pytest -n 2 --dist
loadfile`` each worker is its own process, so a session fixture alone would run the demo
once per worker that asks for it. A lock file in the session's shared temp folder lets
the first worker run it and every later one (on any worker) reuse its folder and result.

The run is the demo exactly as ``make demo`` runs it (``horizonbench demo --out DIR``,
default workers), so the digests cover what users get, not a smoke scale.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: inside the checkout (runs/ is git-ignored), so CI keeps the report and the browser
#: test's screenshot after the tests: runs/test-report/report/screenshot.png
RUN = Path(__file__).resolve().parents[1] / "runs" / "test-report"
ARGV = ["demo", "--out", str(RUN)]


@dataclass(frozen=True)
class DemoRun:
    """The shared demo's folder, exit code and the last lines it wrote on stderr."""

    path: Path
    exit_code: int
    stderr_tail: str


def shared_demo(session_dir: Path) -> DemoRun:
    """Run the demo unless this session already has; ``session_dir`` is one folder every
    worker of the session sees (and no other session does), for the lock and the result."""
    lock = session_dir / "demo-run.lock"
    done = session_dir / "demo-run.json"
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when fh closes, even on an error
        if not done.exists():
            shutil.rmtree(RUN, ignore_errors=True)
            proc = subprocess.run(
                [sys.executable, "-m", "horizonbench.cli.main", *ARGV],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
            done.write_text(json.dumps({"exit_code": proc.returncode, "stderr_tail": tail}))
    result = json.loads(done.read_text())
    return DemoRun(RUN, result["exit_code"], result["stderr_tail"])
