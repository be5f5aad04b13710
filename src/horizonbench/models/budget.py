"""Spending caps of a run folder: one in total (``evaluation.budget_usd``) and one per model
(``evaluation.models[].budget_usd``), over everything the folder has paid, reruns included.

A cap is on what the run *folder* has paid, not on what one run spends: the budget starts
from what the attempt store's spend ledger says was paid before (``spent``), so a nightly
retry loop cannot pay a cap again on every rerun. A call is admitted only if what was
paid, plus the estimates of calls in flight, plus its own estimate stays within every cap
it counts against (the total, and its model's); when the provider answers, its estimate
is replaced by the real cost. So a cap holds up to estimate error on the calls in flight,
and a run that reaches it stops sending and ends cleanly with what it has.

A call that would fit once the calls in flight have settled waits for them (when the
caller passes its cancel event) instead of being refused: refusing it would end a run
with up to ``max_concurrency`` calls' worth of the cap unspent, for each rerun to spend
a call or two of it. It is refused only when what was paid plus its own estimate
already passes a cap.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

#: USD below which sums count as equal (0.28 + 0.02 is 0.30000000000000004)
_EPS = 1e-9
#: how often a call waiting for the calls in flight to settle looks at its cancel event
_WAIT_POLL_S = 0.25

#: the total cap's label in :attr:`Budget.refused`
TOTAL = "total"


def _check(limit: float | None, what: str) -> None:
    if limit is not None and limit < 0:
        raise ValueError(f"{what} must be non-negative, got {limit}")


class Budget:
    """The caps of one run folder, shared by every model of a run (thread-safe).

    ``spent`` is what the folder paid before this run (per model; the key ``None`` for
    spend no model is known for, which counts toward the total only). ``model_limits``
    are the per-model caps; a model without one is capped by the total alone.
    """

    def __init__(
        self,
        limit_usd: float | None,
        *,
        model_limits: Mapping[str, float | None] | None = None,
        spent: Mapping[str | None, float] | None = None,
    ) -> None:
        _check(limit_usd, "budget")
        self.limit_usd = limit_usd
        self.model_limits = {k: v for k, v in (model_limits or {}).items() if v is not None}
        for name, cap in self.model_limits.items():
            _check(cap, f"budget of model {name!r}")
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._model_spent: dict[str | None, float] = {k: float(v) for k, v in (spent or {}).items()}
        #: what the folder had paid when this run started
        self.seeded_usd = sum(self._model_spent.values())
        #: what the folder has paid, this run included
        self.spent_usd = self.seeded_usd
        self._reserved = 0.0
        self._model_reserved: dict[str | None, float] = {}
        #: set once a call was refused: the run reports the budget as reached
        self.exhausted = False
        #: which caps refused a call in this run: TOTAL and/or model names
        self.refused: set[str] = set()

    @property
    def spent_this_run_usd(self) -> float:
        return self.spent_usd - self.seeded_usd

    def model_spent_usd(self, model: str | None) -> float:
        with self._lock:
            return self._model_spent.get(model, 0.0)

    def _over(self, estimate_usd: float, model: str | None, in_flight: bool) -> tuple[bool, bool]:
        """(over the total cap, over the model's cap), counting reservations if ``in_flight``."""
        reserved = self._reserved if in_flight else 0.0
        over_total = (
            self.limit_usd is not None and self.spent_usd + reserved + estimate_usd > self.limit_usd + _EPS
        )
        cap = self.model_limits.get(model) if model is not None else None
        model_reserved = self._model_reserved.get(model, 0.0) if in_flight else 0.0
        over_model = (
            cap is not None and self._model_spent.get(model, 0.0) + model_reserved + estimate_usd > cap + _EPS
        )
        return over_total, over_model

    def reserve(
        self, estimate_usd: float, model: str | None = None, cancel: threading.Event | None = None
    ) -> bool:
        """Admit a call of ``model`` estimated at ``estimate_usd``, or refuse it (False).

        With ``cancel``, a call that fits once the calls in flight settle waits for them
        (False if ``cancel`` is set meanwhile); without, it is refused at once."""
        with self._settled:
            while True:
                over_total, over_model = self._over(estimate_usd, model, in_flight=True)
                if not (over_total or over_model):
                    self._reserved += estimate_usd
                    self._model_reserved[model] = self._model_reserved.get(model, 0.0) + estimate_usd
                    return True
                if cancel is not None and cancel.is_set():
                    return False
                if cancel is None or any(self._over(estimate_usd, model, in_flight=False)):
                    self.exhausted = True
                    if over_model and model is not None:
                        self.refused.add(model)
                    if over_total:
                        self.refused.add(TOTAL)
                    return False
                self._settled.wait(_WAIT_POLL_S)

    def settle(self, estimate_usd: float, actual_usd: float, model: str | None = None) -> None:
        """Replace a reservation by what the call cost (0 for a call nobody billed), and
        wake the calls waiting for room."""
        with self._settled:
            self._reserved = max(0.0, self._reserved - estimate_usd)
            self._model_reserved[model] = max(0.0, self._model_reserved.get(model, 0.0) - estimate_usd)
            self.spent_usd += actual_usd
            self._model_spent[model] = self._model_spent.get(model, 0.0) + actual_usd
            self._settled.notify_all()

    def refusal(self, model: str | None = None) -> str:
        """Which cap stops ``model``'s calls, in the words of the config."""
        if model is not None and model in self.refused:
            return f"evaluation.models[{model}].budget_usd reached"
        return "evaluation.budget_usd reached"

    def for_model(self, model: str) -> ModelBudget:
        """The view one model's runner holds: the same caps, its calls booked to it."""
        return ModelBudget(self, model)


class ModelBudget:
    """One model's view of the shared :class:`Budget` (what a runner holds)."""

    def __init__(self, budget: Budget, model: str) -> None:
        self.budget = budget
        self.model = model

    @property
    def exhausted(self) -> bool:
        return self.budget.exhausted

    @property
    def spent_usd(self) -> float:
        return self.budget.model_spent_usd(self.model)

    def reserve(self, estimate_usd: float, cancel: threading.Event | None = None) -> bool:
        return self.budget.reserve(estimate_usd, self.model, cancel)

    def settle(self, estimate_usd: float, actual_usd: float) -> None:
        self.budget.settle(estimate_usd, actual_usd, self.model)

    def refusal(self) -> str:
        return self.budget.refusal(self.model)
