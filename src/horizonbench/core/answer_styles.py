"""Answers written the way real models write them, around the plan they intend.

The offline baselines used to answer with the bare line the prompt asks for. Real
answers reason first, write a draft and then the final plan, wrap it in markdown
fences or JSON, recap a few steps after the answer line, get cut at ``max_tokens``, or
refuse. A simulated model draws one style per answer (from its ``styles`` mix) and
writes the same intended plan in it, so the parser and scorer are exercised on those
shapes while the planted truth stays known:

- ``plain``, ``reasoning``, ``draft``, ``fenced``, ``json``, ``recap``: the parser must
  read back exactly the intended plan (tests/test_simulated_models.py checks it);
- ``cut`` (the plan's list is never closed; finish reason ``length``) and ``refusal``
  (no plan): unusable, so they fail whatever the plan was. They scale the success
  curve by the usable share (see :class:`horizonbench.core.hazard.PlantedTruth`).

A family supplies the pieces in its own text forms (:class:`PlanPieces`); this module
only arranges them. Pure: no I/O; the randomness comes from the caller's generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from horizonbench.core.hazard import ANSWER_STYLES, UNUSABLE_STYLES, complete_mix, usable_share

#: every style, in the order a mix is drawn from; those with no usable plan
STYLES = ANSWER_STYLES
UNUSABLE = UNUSABLE_STYLES

_REASONING = (
    "Let me work through this carefully before answering.",
    "First I read the rules and the facts, then I follow them one step at a time.",
    "I check each step against the rules as I go, so that no step is illegal.",
    "That gives the following answer.",
)
_REFUSALS = (
    "I'm sorry, but I can't help with that request.",
    "I am not able to solve this one reliably, so I will not give a plan.",
    "This puzzle is beyond what I can answer with confidence. I'll stop here.",
)


@dataclass(frozen=True, slots=True)
class PlanPieces:
    """One intended answer in a family's text forms.

    ``marker``: the answer line's prefix the prompt asks for (``Solution:``, ``Moves:``,
    ``Next state:``); ``plan``: the intended plan (or state) as the prompt writes it;
    ``draft``: a different plan in the same form, or None when there is none to write;
    ``json``: the intended plan as a JSON object, or None when the form has none (then
    the ``json`` style writes the fenced form); ``recap_list``: a sentence that repeats
    a few steps as a short list, ``recap_lines``: a few steps as lines (either may be
    None; then the other, or a sentence without steps, is used).
    """

    marker: str
    plan: str
    draft: str | None = None
    json: str | None = None
    recap_list: str | None = None
    recap_lines: str | None = None


def pick_style(mix: Mapping[str, float] | None, rng: np.random.Generator) -> str:
    """One style drawn from ``mix`` (``plain`` when there is none: then nothing is drawn)."""
    if not mix:
        return "plain"
    full = complete_mix(mix)
    weights = np.array([full.get(s, 0.0) for s in STYLES])
    return STYLES[int(rng.choice(len(STYLES), p=weights / weights.sum()))]


def write_answer(style: str, pieces: PlanPieces, rng: np.random.Generator) -> tuple[str, str]:
    """``(text, finish_reason)`` of the intended answer in ``style``."""
    answer = f"{pieces.marker} {pieces.plan}"
    if style == "plain":
        return answer, "stop"
    if style == "reasoning":
        return f"{_prose(rng)}\n\n{answer}", "stop"
    if style == "draft":
        if pieces.draft is None:
            return f"{_prose(rng)}\n\n{answer}", "stop"
        return (
            f"{_prose(rng)}\nA first draft: {pieces.draft}\n"
            "Checking it again, that draft is wrong, so here is the corrected answer.\n\n"
            f"{answer}",
            "stop",
        )
    if style == "json" and pieces.json is not None:
        return f"{_prose(rng)}\n\n```json\n{pieces.json}\n```", "stop"
    if style in ("fenced", "json"):
        return f"{_prose(rng)}\n\n```\n{answer}\n```", "stop"
    if style == "recap":
        options = [r for r in (pieces.recap_list, pieces.recap_lines) if r]
        tail = options[int(rng.integers(len(options)))] if options else "That is the whole answer."
        return f"{_prose(rng)}\n\n{answer}\n\n{tail}", "stop"
    if style == "cut":
        # the plan's text up to a point strictly before its last character: a list is
        # never closed, a state never complete, as when max_tokens stops a model
        keep = int(rng.integers(0, max(len(pieces.plan) - 1, 0) + 1))
        return f"{_prose(rng)}\n\n{pieces.marker} {pieces.plan[:keep]}", "length"
    if style == "refusal":
        return _REFUSALS[int(rng.integers(len(_REFUSALS)))], "stop"
    raise ValueError(f"unknown answer style {style!r}")


def _prose(rng: np.random.Generator) -> str:
    """Two to four sentences of reasoning: no colons, brackets or parentheses, so no
    line of it reads as a step."""
    k = int(rng.integers(2, len(_REASONING) + 1))
    return " ".join(_REASONING[:k])


__all__ = ["STYLES", "UNUSABLE", "PlanPieces", "complete_mix", "pick_style", "usable_share", "write_answer"]
