"""Client-side rate control, so a run stays under a provider's limits without being told.

Providers publish limits per minute but enforce them over much shorter windows (OpenAI:
"enforced over shorter periods"). A token bucket holding 10 s of budget lets 100
requests out at once against a 600-rpm limit that is counted per second, and every one
past the tenth comes back 429. So the budget here is a **sliding window**: in any
``window_s`` seconds at most ``per_minute * window_s / 60`` requests (and tokens) are
sent, which is exactly what a provider counting over that window accepts, and the
long-run rate is the per-minute figure.

Details a caller relies on:

* A window holds a whole number of requests: a fractional share rounds down (safe),
  and when it would hold less than one (50 rpm counted per second) the window
  stretches to one request's worth (1.2 s), so the rate still holds.
* A small guard (``guard``, 1 % by default) widens the window, so jitter between our
  clock and the provider's never puts one request too many into its window.
* Requests are spaced evenly through the window rather than sent as one burst: a burst
  of ten leaves the client over tens of milliseconds (each SDK call costs CPU), and its
  stragglers would share a provider window with the next burst.
* Tokens are reserved at admission and **reconciled** when the answer reports its usage
  (:meth:`RateLimiter.reconcile`), so an estimate that was too high frees budget at once.
* An estimate is a mean with a ``variance`` (an answer's length is not known when it is
  sent), and the token window keeps ``margin_sd`` standard deviations of the *sum* of
  the estimates not yet reconciled free, not a margin per request: errors of ten
  answers in flight partly cancel, so a pooled margin grows with the square root of
  their number. A margin per request (mean + 2 deviations each) left a fifth of a
  450k-TPM window unused when answer lengths varied (benchmarks/evaluation.py).
  ``margin_sd`` is 1 by default, a cost trade-off: the margin is window left unused all
  the time, while a 429 of the token limit costs one call's retry and a pause (the
  engine does not cut concurrency for it, and keeps the refused call's reservation,
  which stands in for the tokens the estimates missed): 2 deviations kept 0.87 of that
  window in use, 1 kept 0.885 at 0.022 429s per success (benchmarks/README.md).
* Tokens are spaced like requests: after a request of ``t`` tokens the next waits
  0.9 ``t / token_capacity`` of the window (its current estimate, so a reconcile
  shortens the wait; 0.9 so the pace can make up a stall, the window holding the
  rate). Without this, slots freed together (a window sliding past a burst) are
  refilled as a burst, whose stragglers leave the client late and land in the
  provider's next window beside the next burst: 429s the client did not count. The
  gaps follow a schedule, not the moments of admission: a thread that wakes a few
  milliseconds late (up to 2 % of the window) shortens the next gap instead of
  lengthening every one, which at 30 requests a window would cost a tenth of the rate.
* A request larger than the token window is admitted when the window is empty (it
  would never fit otherwise); the window then holds it until it slides past.
* :meth:`RateLimiter.pause` holds every admission until a time (after a 429 with a
  Retry-After hint), so one refusal is not followed by a volley of others.
* Waiting is interruptible: ``acquire`` returns ``None`` as soon as ``cancel`` is set,
  so Ctrl-C stops threads queued here from sending anything.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: token pacing runs 10 % faster than the limit: the window, not the pace, holds the rate,
#: so a stall (a window full of answers longer than estimated) is made up afterwards
#: instead of lost for good, and requests still leave one by one, never as a burst
_TOKEN_PACE = 0.9


@dataclass(slots=True, eq=False)
class Reservation:
    """One admitted request in the window; ``tokens`` is rewritten on reconcile."""

    at: float
    tokens: float
    #: the estimate's variance (0 once reconciled: the provider's count is exact)
    variance: float = 0.0


class RateLimiter:
    """Thread-safe sliding-window limits on requests and tokens (either may be None)."""

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        *,
        window_s: float = 1.0,
        guard: float = 0.01,
        margin_sd: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        for name, value in (
            ("requests_per_minute", requests_per_minute),
            ("tokens_per_minute", tokens_per_minute),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"a rate limit must be positive, got {name}={value}")
        self._clock = clock
        self._cond = threading.Condition()
        self._entries: deque[Reservation] = deque()
        self._waiters: deque[threading.Event] = deque()
        self._paused_until = 0.0
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        # requests: a whole number per window, at least one; the window stretches to fit
        if requests_per_minute is not None:
            self.request_capacity = max(1, math.floor(requests_per_minute * window_s / 60.0 + 1e-9))
            # never shorter than the provider's window: a fractional share rounds down
            self.window_s = max(window_s, self.request_capacity * 60.0 / requests_per_minute)
        else:
            self.request_capacity = None
            self.window_s = window_s
        self.token_capacity = tokens_per_minute * self.window_s / 60.0 if tokens_per_minute else None
        self._span = self.window_s * (1.0 + guard)
        self._window_tokens = 0.0
        #: the summed variance of the window's estimates not yet reconciled
        self._window_var = 0.0
        self._margin_sd = margin_sd
        #: requests are also spaced evenly (span / capacity apart), so a window's share is
        #: not sent as one burst whose last request, delayed by the client's own CPU,
        #: lands in the provider's next window together with the next burst
        self._spacing = self._span / self.request_capacity if self.request_capacity else 0.0
        self._last_admit = -float("inf")
        #: token pacing: the last reservation and the slot it was given; the next slot
        #: follows the *slot*, not the moment of admission, so a thread's late wake-up
        #: (milliseconds, 30 times a window at 450k TPM) is made up, not added to every gap
        self._last: Reservation | None = None
        self._slot = -float("inf")
        self._slack = 0.02 * self._span

    @property
    def span_s(self) -> float:
        """The window actually enforced (with the guard)."""
        return self._span

    def _expire(self, now: float) -> None:
        while self._entries and self._entries[0].at <= now - self._span:
            entry = self._entries.popleft()
            self._window_tokens -= entry.tokens
            self._window_var -= entry.variance
        if not self._entries:
            self._window_tokens = 0.0  # no float drift survives an empty window
            self._window_var = 0.0

    def _next_slot(self) -> float:
        """The earliest time token pacing lets the next request go (-inf without a token limit)."""
        if not self.token_capacity or self._last is None:
            return -float("inf")
        share = min(1.0, self._last.tokens / self.token_capacity)
        return self._slot + _TOKEN_PACE * self._span * share

    def _over(self, tokens: float, variance: float) -> bool:
        """Would ``tokens`` (with their estimates' summed ``variance``) pass the window's share?"""
        assert self.token_capacity is not None
        margin = self._margin_sd * math.sqrt(max(0.0, variance))
        return tokens + margin > self.token_capacity * (1 + 1e-9)

    def _wait_needed(self, now: float, tokens: float, variance: float) -> float:
        """0 when a request of ``tokens`` may go now, else seconds until it might."""
        if now < self._paused_until:
            return self._paused_until - now
        if now < self._last_admit + self._spacing:
            return self._last_admit + self._spacing - now
        if now < self._next_slot():
            return self._next_slot() - now
        if not self._entries:
            return 0.0
        waits = []
        if self.request_capacity is not None and len(self._entries) >= self.request_capacity:
            waits.append(self._entries[len(self._entries) - self.request_capacity].at + self._span - now)
        used, var = self._window_tokens + tokens, self._window_var + variance
        if self.token_capacity is not None and self._over(used, var):
            # wait until enough old entries slide out (or the window empties)
            until = self._entries[-1].at
            for entry in self._entries:
                used, var = used - entry.tokens, var - entry.variance
                until = entry.at
                if not self._over(used, var):
                    break
            waits.append(until + self._span - now)
        return max([0.0, *waits]) if waits else 0.0

    def try_acquire(self, tokens: float = 0.0, variance: float = 0.0) -> Reservation | float:
        """Take one request of ``tokens`` (an estimate with ``variance``) if it fits now;
        else the seconds to wait."""
        if tokens < 0 or variance < 0:
            raise ValueError(f"tokens and variance must be non-negative, got {tokens}, {variance}")
        with self._cond:
            now = self._clock()
            self._expire(now)
            wait = self._wait_needed(now, tokens, variance)
            if wait > 0.0:
                return wait
            entry = Reservation(now, float(tokens), float(variance))
            self._entries.append(entry)
            self._window_tokens += entry.tokens
            self._window_var += entry.variance
            self._last_admit = now
            # late by at most the slack: keep the schedule (the next gap is shorter); later
            # than that the limiter was idle, and the schedule restarts from now
            slot = self._next_slot()
            self._slot = slot if now - slot <= self._slack else now
            self._last = entry
            return entry

    def acquire(
        self, tokens: float = 0.0, cancel: threading.Event | None = None, variance: float = 0.0
    ) -> Reservation | None:
        """Block until one request of ``tokens`` fits, then take it; None if cancelled.

        Waiters queue first-in, first-out and only the head of the queue polls the window:
        fifteen threads waiting for the next slot cost one wake-up per slot, not fifteen.
        """
        me = threading.Event()
        with self._cond:
            self._waiters.append(me)
            if self._waiters[0] is me:
                me.set()
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    return None
                if not me.wait(timeout=0.25):
                    continue
                with self._cond:
                    if self._waiters[0] is not me:  # woken by wake(): not our turn yet
                        me.clear()
                        continue
                got = self.try_acquire(tokens, variance)
                if isinstance(got, Reservation):
                    return got
                with self._cond:
                    # short waits re-check the cancel flag promptly; notify wakes us early
                    self._cond.wait(timeout=min(got, 0.25))
        finally:
            with self._cond:
                self._waiters.remove(me)
                if self._waiters:
                    self._waiters[0].set()

    def reconcile(self, reservation: Reservation, tokens: float) -> None:
        """Replace a reservation's estimate with what the provider counted."""
        with self._cond:
            tokens = max(0.0, float(tokens))
            if reservation in self._entries:
                self._window_tokens += tokens - reservation.tokens
                self._window_var -= reservation.variance
            reservation.tokens = tokens
            reservation.variance = 0.0
            self._cond.notify_all()

    def pause(self, seconds: float) -> None:
        """Admit nothing for ``seconds`` (a provider's Retry-After)."""
        with self._cond:
            self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    def wake(self) -> None:
        """Let waiting threads look at their cancel flags now."""
        with self._cond:
            for waiter in self._waiters:
                waiter.set()
            self._cond.notify_all()
