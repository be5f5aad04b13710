"""The issue's scenario as a test: providers that count 600 rpm per second, 300 ms
latency, 600 attempts at concurrency 16, OpenAI and Anthropic side by side. Every
attempt must end answered (the figures themselves are ``make bench``'s business)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_helpers import puzzle_requests
from fake_model_server import running_fake_server
from horizonbench.models.anthropic_messages import AnthropicModel
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Evaluation, ModelRunner, submit_attempts
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.models.rate_limit import RateLimiter
from horizonbench.schemas.config import ModelSpec

pytestmark = pytest.mark.slow
KEY = "sk-throughput-NOT-SECRET"


def _requests(n: int) -> list[AttemptRequest]:
    return puzzle_requests(n, max_tokens=256)


def test_600_rpm_counted_per_second_every_attempt_answered(tmp_path: Path) -> None:
    reply = "a plan of about twelve words that the fake server will count as tokens"
    with (
        running_fake_server(lambda b: reply, rpm=600, latency_s=0.3) as oa,
        running_fake_server(lambda b: reply, rpm=600, latency_s=0.3) as an,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        specs = [
            ModelSpec(name="gpt", provider="openai", model="gpt-x", base_url=oa.base_url, max_concurrency=16),
            ModelSpec(
                name="claude",
                provider="anthropic",
                model="claude-x",
                base_url=an.root_url,
                max_concurrency=16,
            ),
        ]
        models = [OpenAIChatModel(specs[0], KEY), AnthropicModel(specs[1], KEY)]
        evaluation = Evaluation()
        plans = []
        for model in models:
            runner = ModelRunner(
                model, store, limiter=RateLimiter(600, None, window_s=1.0), max_concurrency=16
            )
            plans.append((model.name, submit_attempts(evaluation, runner, _requests(600))))
        evaluation.run([(name, plan[1]) for name, plan in plans], 1200)
        outcomes = [f.result() for _, plan in plans for f in plan[1]]
        refused = (oa.status_counts.get(429, 0), an.status_counts.get(429, 0))
    assert len(outcomes) == 1200 and all(o.answered for o in outcomes)
    assert oa.answered == 600 and an.answered == 600
    # a provider counting per second never needs to refuse in steady state
    assert sum(refused) <= 0.05 * 1200, refused
