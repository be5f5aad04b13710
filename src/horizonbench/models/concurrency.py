"""How many calls one model may have in flight: adaptive (AIMD), cancellable.

The configured ``max_concurrency`` is a ceiling, not a target. A 429 halves the limit
(at most once per ``cooldown_s``, so one burst of refusals counts once); every answer
adds ``1 / limit``, so the limit grows by about one per round of answers and climbs
back to the ceiling once the refusals stop. (The engine does not report a 429 that names
the token limit while its rate limiter paces tokens: fewer calls in flight would not
send fewer tokens a second.) The same gate runs a *probe*: until the
model has answered once, only one call is in flight, so a wrong key or model name costs
a few calls, not ``max_concurrency`` of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class AdaptiveConcurrency:
    def __init__(
        self,
        ceiling: int,
        *,
        floor: int = 1,
        cooldown_s: float = 1.0,
        probe: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ceiling < 1 or floor < 1 or floor > ceiling:
            raise ValueError(f"need 1 <= floor <= ceiling, got floor={floor}, ceiling={ceiling}")
        self.ceiling = ceiling
        self.floor = floor
        self._limit = float(ceiling)
        self._cooldown = cooldown_s
        self._last_cut = -float("inf")
        self._clock = clock
        self._in_flight = 0
        self._warm = not probe
        self._cond = threading.Condition()
        #: how often the limit was cut (for the manifest)
        self.cuts = 0

    @property
    def limit(self) -> int:
        with self._cond:
            return self._current()

    def _current(self) -> int:
        return max(self.floor, int(self._limit)) if self._warm else 1

    def enter(self, cancel: threading.Event | None = None) -> bool:
        """Take a slot; False (and no slot) if ``cancel`` is set first."""
        with self._cond:
            while self._in_flight >= self._current():
                if cancel is not None and cancel.is_set():
                    return False
                self._cond.wait(timeout=0.25)
            if cancel is not None and cancel.is_set():
                return False
            self._in_flight += 1
            return True

    def leave(self, *, answered: bool, throttled: bool = False) -> None:
        with self._cond:
            self._in_flight -= 1
            if answered:
                self._warm = True
                self._limit = min(float(self.ceiling), self._limit + 1.0 / max(self._limit, 1.0))
            if throttled:
                now = self._clock()
                if now - self._last_cut >= self._cooldown:
                    self._limit = max(float(self.floor), self._limit / 2.0)
                    self._last_cut = now
                    self.cuts += 1
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
