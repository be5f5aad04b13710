"""Small conveniences for tests that drive the evaluation engine directly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from horizonbench.core.types import Message
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest, Model
from horizonbench.models.engine import ModelRunner, attempt_row, evaluate
from horizonbench.models.retry import RetryPolicy

#: retries in tests: quick backoff so a test never waits seconds for jitter
FAST_RETRY = RetryPolicy(max_retries=3, base_s=0.01, max_backoff_s=0.05, retry_after_cap_s=5.0)


def runner_for(model: Model, store: AttemptStore, **kw: Any) -> ModelRunner:
    kw.setdefault("retry", FAST_RETRY)
    return ModelRunner(model, store, **kw)


def rows_for(
    requests: Sequence[AttemptRequest], model: Model, store: AttemptStore, **kw: Any
) -> list[dict[str, Any]]:
    """Attempts-table rows for ``requests``, as the evaluate stage writes them."""
    on_progress = kw.pop("on_progress", None)
    runner = runner_for(model, store, **kw)
    return [attempt_row(o, model.name) for o in evaluate(requests, runner, on_progress=on_progress)]


def puzzle_requests(n: int, max_tokens: int) -> list[AttemptRequest]:
    """``n`` one-message attempts that differ only by their puzzle number (rate tests)."""
    return [
        AttemptRequest(
            instance_id=f"i{i}",
            family="fake",
            sample=0,
            messages=(Message("user", f"solve puzzle {i} step by step"),),
            temperature=1.0,
            top_p=1.0,
            max_tokens=max_tokens,
            seed=i,
        )
        for i in range(n)
    ]
