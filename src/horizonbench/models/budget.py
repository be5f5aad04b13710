"""A spending cap shared by every model of a run (``evaluation.budget_usd``).

A call is admitted only if what was spent, plus the estimates of calls in flight, plus
its own estimate stays within the cap; when an answer arrives its estimate is replaced
by its real cost. So the cap holds up to estimate error on the calls in flight, and a
run that reaches it stops sending and ends cleanly with what it has.
"""

from __future__ import annotations

import threading


class Budget:
    def __init__(self, limit_usd: float | None) -> None:
        if limit_usd is not None and limit_usd < 0:
            raise ValueError(f"budget must be non-negative, got {limit_usd}")
        self.limit_usd = limit_usd
        self._lock = threading.Lock()
        self.spent_usd = 0.0
        self._reserved = 0.0
        #: set once a call was refused: the run reports the budget as reached
        self.exhausted = False

    def reserve(self, estimate_usd: float) -> bool:
        with self._lock:
            if self.limit_usd is None:
                self._reserved += estimate_usd
                return True
            if self.spent_usd + self._reserved + estimate_usd > self.limit_usd:
                self.exhausted = True
                return False
            self._reserved += estimate_usd
            return True

    def settle(self, estimate_usd: float, actual_usd: float) -> None:
        with self._lock:
            self._reserved = max(0.0, self._reserved - estimate_usd)
            self.spent_usd += actual_usd
