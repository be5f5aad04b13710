"""Start-up and shut-down marks for ``benchmarks/overhead.py``.

``HORIZONBENCH_TIMINGS=FILE`` appends one JSON line per step (``{"event": ..., "t":
unix time, "pid": ...}``) to FILE. The command and its temporary Prefect server mark
their steps from several floors, so the helper lives here, below every floor that
marks (``cli`` and ``tasks``), and writes nothing unless the variable is set.
"""

from __future__ import annotations

import json
import os
import time

TIMINGS_ENV = "HORIZONBENCH_TIMINGS"


def mark(event: str) -> None:
    """Record a start-up/shut-down step when HORIZONBENCH_TIMINGS names a file."""
    path = os.environ.get(TIMINGS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "t": time.time(), "pid": os.getpid()}) + "\n")
