"""Rollout episodes as engine conversations, and their scoring from the attempts table.

Each step of a rollout is one request through the model's runner (rate limit, retries,
attempt store). The conversation is deterministic in the answers it sees, so a rerun
after a crash replays the stored steps without calls and continues at the first
missing one. Scoring replays the same pure episode from the attempts table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Completion, Score
from horizonbench.datasets.puzzles.rollout import Episode
from horizonbench.models.base import AttemptRequest
from horizonbench.schemas.config import GenerationSettings


@dataclass
class RolloutConversation:
    """One episode of one model on one instance (one sample)."""

    family: Any
    row: Mapping[str, Any]
    prompt_settings: BaseModel
    settings: GenerationSettings
    root_seed: int
    model: str
    sample: int
    episode: Episode = field(init=False)

    def __post_init__(self) -> None:
        self.episode = self.family.episode(self.row)

    def _request(self) -> AttemptRequest:
        ep = self.episode
        step = ep.steps + 1
        messages = self.family.step_prompt(self.row, self.prompt_settings, ep.state, step)
        iid = self.row["instance_id"]
        return AttemptRequest(
            instance_id=iid,
            family=self.row["family"],
            sample=self.sample,
            messages=tuple(messages),
            temperature=self.settings.temperature,
            top_p=self.settings.top_p,
            max_tokens=self.settings.max_tokens,
            # each step its own seed: an offline baseline's mistakes are independent per step
            seed=derive_seed(self.root_seed, "rollout", self.model, iid, self.sample, ep.steps),
            row=self.row,
            turn=ep.steps,
            mode="rollout",
            context={"state": self.family.puzzle.format_state(ep.state)},
        )

    def first(self) -> AttemptRequest:
        return self._request()

    def next(self, completion: Completion) -> AttemptRequest | None:
        self.episode.feed(completion.text, completion.finish_reason)
        return None if self.episode.done else self._request()


def score_rollout(family: Any, row: Mapping[str, Any], turns: Sequence[Mapping[str, Any]]) -> Score | None:
    """The episode's score from its attempt rows (in turn order), or None when a step
    has no answer (a provider failure: the next run resumes there, nothing is scored)."""
    ep = family.episode(row)
    for t in sorted(turns, key=lambda r: r["turn"]):
        if ep.done:
            break
        if t["response"] is None:
            return None
        ep.feed(t["response"], t["finish_reason"] or "stop")
    if not ep.done:
        return None
    return family.score_episode(row, ep)
