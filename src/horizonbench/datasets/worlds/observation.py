"""What the observation modes need beyond the gold state, once for every environment.

- :class:`LastSeen`, the agent's picture under ``partial`` observation: for each state
  slot, the fact the agent was last shown and when, and for each *place* (a room's
  floor, a container's inside, the agent's hands...) when the agent last looked at it.
  A gold fact is observable exactly when the latest view of its slot showed it and, for
  an object that lies in a place, no later look at that place came after (a look that
  did not show the object there means it has gone, whatever the agent was told before).
  This is what ``Environment.observable_gold`` reports and what a stale-picture error
  label reads.
- The ``distractor`` mode's phantom world: a persistent set of true-looking facts about
  entities numbered past the real ones (:func:`phantom_names`), of which
  :data:`PHANTOM_VIEWS` subsets of ``max(1, gold size // 10)`` facts are drawn at reset
  (:func:`phantom_views`); each observation shows one of them.
- The ``conflict`` mode's rate (:data:`CONFLICT_RATE`): the chance per step that an
  observation carries one false fact about a slot that did not change this step.

Pure: no I/O, and every random choice comes from the :class:`~.base.Rng` it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from horizonbench.datasets.worlds.base import Canonical, Fact, Rng

#: how many subsets of the phantom world distractor observations choose from
PHANTOM_VIEWS = 32
#: probability that a conflict-mode observation carries one contradicting fact
CONFLICT_RATE = 0.5


class LastSeen:
    """The last-seen bookkeeping of partial observation (see the module docstring).

    ``see(slot, fact, t)`` records that observation ``t`` showed ``fact`` for ``slot``;
    ``look_at(place, t)`` that observation ``t`` looked at ``place`` (whatever lay
    there was shown with :meth:`see`); :meth:`knows` answers whether the agent's
    picture holds ``fact``. Times never decrease within an episode."""

    __slots__ = ("_places", "_slots")

    def __init__(self) -> None:
        self._slots: dict[Hashable, tuple[Fact, int]] = {}
        self._places: dict[Hashable, int] = {}

    def see(self, slot: Hashable, fact: Fact, t: int) -> None:
        self._slots[slot] = (fact, t)

    def look_at(self, place: Hashable, t: int) -> None:
        self._places[place] = t

    def brief(self, facts: Iterable[Fact], slot_of: Callable[[Fact], Hashable | None], t: int) -> None:
        """The full briefing at reset: every fact with a slot is seen at ``t``."""
        for f in facts:
            slot = slot_of(f)
            if slot is not None:
                self._slots[slot] = (f, t)

    def knows(self, slot: Hashable, fact: Fact, place: Hashable | None = None) -> bool:
        """The latest view of ``slot`` showed ``fact`` and, when ``fact`` puts an object
        in ``place``, no look at that place came after that view."""
        entry = self._slots.get(slot)
        if entry is None or entry[0] != fact:
            return False
        return place is None or self._places.get(place, -1) <= entry[1]

    def copy(self) -> LastSeen:
        out = LastSeen()
        out._slots = dict(self._slots)
        out._places = dict(self._places)
        return out


def phantom_names(stem: str, real: int, count: int) -> list[str]:
    """``count`` names of entities that do not exist, numbered past the ``real`` ones:
    ``stem<real+1>`` ... (a phantom never shares a name with a real entity)."""
    return [f"{stem}{real + i}" for i in range(1, count + 1)]


def phantom_views(facts: Sequence[Fact], gold_size: int, rng: Rng) -> tuple[Canonical, ...]:
    """:data:`PHANTOM_VIEWS` sorted subsets of ``facts`` of ``max(1, gold_size // 10)``
    facts each (all of them when there are fewer), drawn from ``rng``."""
    k = min(len(facts), max(1, gold_size // 10))
    return tuple(tuple(sorted(rng.sample(facts, k))) for _ in range(PHANTOM_VIEWS))


__all__: Sequence[str] = [
    "CONFLICT_RATE",
    "LastSeen",
    "PHANTOM_VIEWS",
    "phantom_names",
    "phantom_views",
]
