"""The family protocol and the registry that maps family names to implementations.

A family is everything horizonbench knows about one kind of problem. The pipeline
only ever talks to this protocol, so adding a family touches nothing else.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from horizonbench.core.types import Candidate, Message, ParsedAnswer, Score


@runtime_checkable
class Family(Protocol):
    """What every problem family provides. Implementations are pure: no I/O."""

    name: ClassVar[str]
    #: pydantic model of the family's generation parameters (validated config section)
    params_model: ClassVar[type[BaseModel]]
    #: pydantic model of the family's prompt settings
    prompt_model: ClassVar[type[BaseModel]]
    #: Arrow schema of the family's instance table (common columns plus its own)
    instance_schema: ClassVar[pa.Schema]
    #: violation categories the family's scorer can report
    violations: ClassVar[tuple[str, ...]]

    def generate_candidate(self, params: BaseModel, seed: int, index: int) -> Candidate:
        """Instance number ``index`` drawn with ``seed``: certified row or rejection."""
        ...

    def difficulty(self, row: Mapping[str, Any]) -> int:
        """The depth coordinate used for binning (the solution length L)."""
        ...

    def render_prompt(self, row: Mapping[str, Any], prompt: BaseModel) -> list[Message]: ...

    def parse_answer(self, text: str) -> ParsedAnswer: ...

    def score(self, row: Mapping[str, Any], parsed: ParsedAnswer) -> Score: ...

    def offline_answer(self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float) -> str:
        """Text an offline baseline (``oracle``, ``noisy``, ``random``) answers with."""
        ...


@runtime_checkable
class EpisodeFamily(Family, Protocol):
    """A family that can also be evaluated step by step (``rollout`` in its ``modes``).

    The widened contract, the same for every family: a family lists the modes it
    supports (``modes``; a family without the attribute supports ``("plan",)`` only), and
    for ``rollout`` it provides a pure episode: a state machine fed the model's answers in
    order (``feed(text, finish_reason)``; ``done``, ``steps``, ``state``), the prompt of
    each step, the score of a finished episode, and what an offline baseline answers at a
    given state. The pipeline runs each step as one attempt through the evaluation
    engine, so rate limits, retries, budgets and resuming apply per step.
    """

    modes: ClassVar[tuple[str, ...]]

    def start(self, row: Mapping[str, Any]) -> Any:
        """The episode's first state (what the first step prompt shows)."""
        ...

    def episode(self, row: Mapping[str, Any]) -> Any: ...

    def step_prompt(
        self, row: Mapping[str, Any], prompt: BaseModel, state: Any, step: int
    ) -> list[Message]: ...

    def score_episode(self, row: Mapping[str, Any], episode: Any) -> Score: ...

    def offline_step(
        self, row: Mapping[str, Any], state_text: str, kind: str, rng: np.random.Generator, eps: float
    ) -> str: ...


def family_modes(family: Family) -> tuple[str, ...]:
    """The evaluation modes a family supports."""
    return tuple(getattr(family, "modes", ("plan",)))


_FAMILIES: dict[str, Callable[[], Family]] = {}
ENTRY_POINT_GROUP = "horizonbench.families"


def register_family(name: str, factory: Callable[[], Family]) -> None:
    """Add a family at run time (tests, notebooks). Installed packages use entry points."""
    _FAMILIES[name] = factory


def _discover() -> dict[str, Callable[[], Family]]:
    """Families declared as entry points (built-in ones in our pyproject, plug-ins in
    theirs), then those registered at run time. Core imports no other horizonbench
    package: the entry point names the class, and loading it imports its module."""
    found: dict[str, Callable[[], Family]] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.load()
    found.update(_FAMILIES)
    return found


def family_names() -> list[str]:
    return sorted(_discover())


#: separates a family from a setting of its sweep in a family label ("maze@noise-0.5")
SETTING_SEPARATOR = "@"


def family_of(label: str) -> str:
    """The family a label names: "maze@noise-0.5" (a sweep setting) is a maze."""
    return label.split(SETTING_SEPARATOR, 1)[0]


def get_family(name: str) -> Family:
    """The family of a name or a family label (a sweep setting is its family)."""
    name = family_of(name)
    factory = _FAMILIES.get(name)
    if factory is None:
        families = _discover()
        factory = families.get(name)
        if factory is None:
            known = ", ".join(sorted(families)) or "none"
            raise KeyError(f"unknown family {name!r} (known: {known})")
        _FAMILIES[name] = factory
    return factory()


def violation_categories() -> tuple[tuple[str, ...], dict[str, str]]:
    """The failure categories the registered families declare, for generic analysis
    that must not know which family has them: every category in report order, and
    violation type -> category.

    A family declares them with two optional class attributes, ``categories`` (their
    order) and ``violation_categories`` (violation type -> category); a family without
    them has none. Families are read in name order; a violation type two families
    place differently keeps the first family's category. The lookup is by violation
    type alone, so another family's violation of the same name (``invalid_output``)
    falls in the same category.
    """
    order: list[str] = []
    of: dict[str, str] = {}
    for name in family_names():
        family = get_family(name)
        order += [c for c in getattr(family, "categories", ()) if c not in order]
        for violation, category in getattr(family, "violation_categories", {}).items():
            of.setdefault(violation, category)
    return tuple(order), of
