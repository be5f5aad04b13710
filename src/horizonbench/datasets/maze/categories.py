"""The maze's violation types grouped into seqBench's failure categories.

seqBench (appendix B.2, "Observed Violation Categories") sorts failed answers into
five kinds of error. Paraphrased:

* **adjacency** -- stepping between rooms that no stated door joins;
* **locked door** -- going through a locked door without having unlocked it with its
  key;
* **key usage** -- using a key that was never picked up, or the wrong key for a door;
* **path inefficiency** -- detours or redundant actions: not always an illegal move,
  but the plan no longer matches the optimal one;
* **missed critical actions** -- leaving out a step the task needs, such as a key
  pickup or a door unlock (the paper's main failure mode, section 2.4, which shows up as
  low recall and progress).

horizonbench names the first rule a plan breaks (``rules.VIOLATIONS``), which is finer
than these five. :data:`CATEGORY_OF` assigns each of the 16 types to one category.
Two categories are horizonbench's own, because the paper has no name for them:
``invalid_output`` (no plan could be read from the answer at all) and
``plan_protocol`` (a readable plan that breaks the answer's framing: it does not open
with Bob's room, names an action outside the six, or rescues someone other than Alice).

Two limits of any such map, worth keeping in mind when reading the shares:

* An omitted step is seen by the replay only where its absence first bites. A plan that
  skips a key pickup is named ``key_not_held`` at the later ``use_key``, and one that
  skips an unlock is named ``locked_door`` at the move through the door. The map files
  these under key usage and locked door, as the paper's definitions of those categories
  do; "missed critical actions" here gets only the omissions the replay can name
  directly: a plan that stops without the rescue (``no_rescue``) or announces the
  rescue before reaching Alice's room (``rescue_elsewhere``). Recall and progress
  measure omissions more fully than any violation label can.
* Each attempt has one category: that of its first violation.
"""

from __future__ import annotations

from horizonbench.datasets.maze.rules import VIOLATIONS

ADJACENCY = "adjacency"
LOCKED_DOOR = "locked_door"
KEY_USAGE = "key_usage"
PATH_INEFFICIENCY = "path_inefficiency"
MISSED_CRITICAL_ACTION = "missed_critical_action"
#: horizonbench's own: the answer held no readable plan
INVALID_OUTPUT = "invalid_output"
#: horizonbench's own: the plan breaks the answer's framing (start, vocabulary, target)
PLAN_PROTOCOL = "plan_protocol"

#: the categories, the paper's five first, in the order a report lists them
CATEGORIES = (
    ADJACENCY,
    LOCKED_DOOR,
    KEY_USAGE,
    PATH_INEFFICIENCY,
    MISSED_CRITICAL_ACTION,
    PLAN_PROTOCOL,
    INVALID_OUTPUT,
)
#: the categories seqBench names (the other two are horizonbench's)
PAPER_CATEGORIES = frozenset(CATEGORIES[:5])

#: violation type -> category, with the reason for each placement
CATEGORY_OF: dict[str, str] = {
    # no plan in the answer
    "invalid_output": INVALID_OUTPUT,
    # the first action is not ('start', Bob's room): the plan is not anchored where the
    # facts put Bob, so it cannot be replayed at all
    "bad_start": PLAN_PROTOCOL,
    # a move (or an unlock) towards a room no stated door joins to Bob's room
    "non_adjacent_move": ADJACENCY,
    # walking through a door that is still locked
    "locked_door": LOCKED_DOOR,
    # use_key with a key Bob does not hold (typically: its pickup was skipped)
    "key_not_held": KEY_USAGE,
    # the readied key is not the one this door requires
    "wrong_key": KEY_USAGE,
    # picking up a key that is not in Bob's room (or is already in his hand)
    "key_not_in_room": KEY_USAGE,
    # use_key not followed at once by the unlock it prepares
    "use_key_without_unlock": KEY_USAGE,
    # unlocking with no key readied by use_key just before
    "unlock_without_use_key": KEY_USAGE,
    # unlocking a door that is open or already unlocked: a wrong belief about the
    # state of a door
    "not_locked": LOCKED_DOOR,
    # rescuing before reaching Alice's room: the rest of the route was left out
    "rescue_elsewhere": MISSED_CRITICAL_ACTION,
    # rescuing someone other than 'Alice': an identifier that is not in the facts
    "rescue_wrong_target": PLAN_PROTOCOL,
    # a legal plan that ends without the rescue
    "no_rescue": MISSED_CRITICAL_ACTION,
    # actions after the rescue: redundant steps
    "after_rescue": PATH_INEFFICIENCY,
    # an action outside the six the instructions allow
    "unknown_action": PLAN_PROTOCOL,
    # legal and rescues, but longer than the shortest plan: a detour
    "suboptimal": PATH_INEFFICIENCY,
}


def category_of(violation: str | None) -> str | None:
    """The category of a maze violation type; ``None`` for a success (no violation)
    and for a name that is not a maze violation (another family's)."""
    if violation is None:
        return None
    return CATEGORY_OF.get(violation)


def violations_in(category: str) -> tuple[str, ...]:
    """The violation types of one category, in ``VIOLATIONS`` order."""
    return tuple(v for v in VIOLATIONS if CATEGORY_OF[v] == category)
