"""The four-part maze prompt of seqBench's appendix B, in horizonbench's own words.

1. Instructions and task definition (the system message): the task, what the facts
   describe, the six actions and their arguments, the rules (including that a plan
   missing any intermediate action is invalid and that only the given names may be
   used) and the answer format.
2. Worked examples: up to three mazes of rising difficulty (plain navigation, one key,
   two keys), made by the maze generator itself so they follow the instance's rules and
   fact templates. Like the paper's, they carry distracting facts: they are drawn at
   the instance's own (effective, as recorded in its row) noise ratio and shuffle
   ratio, from fixed seeds, so instances with the same ratios see the same examples
   and the prompt is a pure function of the row.
3. Reasoning guidance (optional) and a request for a self-assessment of confidence and
   perceived difficulty (optional), written on its own line after the plan.
4. The instance's facts, then ``YOUR SOLUTION:``.

The self-assessment line is shaped so the plan parser can never read it as a plan: it
has no brackets, and the text after its colon holds spaces, which an ``action: arg``
line cannot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from horizonbench.core.types import Message
from horizonbench.datasets.maze.certificate import solve
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.generator import Maze, generate_maze
from horizonbench.datasets.maze.simulator import format_plan

INSTRUCTIONS = """\
You are a careful problem solver. Reason step by step from the facts you are given and \
follow these instructions exactly.

TASK
Bob is in a maze of rooms and has to reach Alice and rescue her. Work out the shortest \
plan that takes him from his room to hers and rescues her, obeying the rules of the maze.

THE FACTS STATE
- which rooms are joined by a door, and whether that door is open or closed and locked;
- which key each locked door needs, and in which room each key lies;
- the room Bob starts in, and the room Alice is in (where the rescue takes place).
Rooms are named by a column letter and a row number (A1, B7, AA3); keys by positive \
whole numbers (3, 17). Only the doors the facts mention exist.

ACTIONS
A plan lists (action, argument) pairs in the order Bob performs them:
  ('start', ROOM)                    always first: the room Bob starts in
  ('move_to', ROOM)                  go through an open (or already unlocked) door into a neighbouring room
  ('pick_up_key', KEY)               take a key lying in the room Bob is in
  ('use_key', KEY)                   get a key Bob holds ready for a locked door next to him
  ('unlock_and_open_door_to', ROOM)  unlock that door with the readied key and open it
  ('rescue', 'Alice')                always last: rescue Alice in the room Bob is in

RULES
1. Bob moves only between neighbouring rooms that a stated door joins.
2. A key must be picked up, in the room where it lies, before it can be used.
3. A locked door opens only with the key it requires, and 'use_key' comes immediately \
before 'unlock_and_open_door_to'. Once opened, a door stays open.
4. Write out every action. A plan that leaves out any intermediate action (a move, a \
pickup, a key use or an unlock) is invalid, however close the rest of it is.
5. Use only the room and key names that appear in the facts, 'Alice', and the six \
actions above. Never invent a name.
6. The plan must be as short as possible: every extra action counts as a mistake.

ANSWER FORMAT
Put the final plan on one line that starts with "Solution:", written as a Python-style \
list of tuples, for example:
Solution: [('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '3'), ('use_key', '3'), \
('unlock_and_open_door_to', 'C1'), ('move_to', 'C1'), ('rescue', 'Alice')]
Write no other plan after that line."""

GUIDANCE = """\
REASONING GUIDANCE
1. Find Alice's room, then the shortest route from Bob's room to it through the stated \
doors.
2. Note every locked door on that route and the key each one needs.
3. Find where each of those keys lies, and choose an order of fetching them so that Bob \
holds every key before he reaches its door, even if that means walking back.
4. Write the plan one action at a time, checking each action against the rules and \
keeping track of where Bob is and which keys he holds.
5. Leave out anything the rescue does not need: extra actions make the plan longer than \
the shortest.
A long route is easier in pieces: plan from the start to the first key, from there to \
its door, and so on, then join the pieces and check that nothing was dropped at the \
joins."""

SELF_ASSESSMENT = """\
SELF-ASSESSMENT
After the Solution line, add one last line that rates your own answer on a scale from 1 \
(very low) to 5 (very high): C, how confident you are that the plan is correct, and D, \
how difficult this maze was for you. Write it in exactly this form, with your numbers in \
place of C and D:
Self-assessment: confidence C/5, difficulty D/5"""

#: the line a model's answer ends with when it follows the format, for a given C and D
SELF_ASSESSMENT_LINE = "Self-assessment: confidence {confidence}/5, difficulty {difficulty}/5"

EXAMPLES_HEADER = "WORKED EXAMPLES"
EXAMPLES_FOOTER = "END OF EXAMPLES"
PROBLEM_HEADER = "PROBLEM"


@dataclass(frozen=True)
class _ExampleSpec:
    """One worked example: its keys, the range of its gold length, its smallest grid."""

    keys: int
    min_len: int
    max_len: int
    side: int


#: from easy to hard; the length ranges do not overlap, so difficulty always rises
_EXAMPLES = (
    _ExampleSpec(keys=0, min_len=5, max_len=9, side=4),
    _ExampleSpec(keys=1, min_len=10, max_len=14, side=4),
    _ExampleSpec(keys=2, min_len=15, max_len=22, side=5),
)
#: seeds tried per grid size before the grid grows by one row and one column
_SEEDS_PER_SIDE = 40
_MAX_SIDE = 60


def _ratio(value: float) -> float:
    """A ratio as the examples use it: finite, at least 0, and rounded so that float
    noise in a stored ratio cannot pick different examples."""
    v = float(value)
    return round(v, 6) if math.isfinite(v) and v > 0 else 0.0


def _first_side(spec: _ExampleSpec, noise_ratio: float) -> int:
    """Where the search for an example starts: a grid with at least roughly enough
    off-route doors for the distractors a noise ratio asks for (a smaller one would be
    tried in vain)."""
    return max(spec.side, math.ceil(math.sqrt(noise_ratio * spec.min_len / 2)))


def _example(spec: _ExampleSpec, noise_ratio: float, shuffle_ratio: float) -> Maze:
    """The first certified maze, in a fixed order of (grid size, seed), that has the
    spec's keys and length and shows exactly as many distractors as the noise ratio
    asks for (a small grid may not have that many true facts to spare: then the grid
    grows)."""
    for side in range(_first_side(spec, noise_ratio), _MAX_SIDE + 1):
        for seed in range(_SEEDS_PER_SIDE):
            maze = generate_maze(side, side, spec.keys, noise_ratio, shuffle_ratio, spec.keys, seed)
            if maze.num_keys != spec.keys or not spec.min_len <= len(maze.gold) <= spec.max_len:
                continue
            if maze.distracting_count != round(noise_ratio * maze.supporting_count):
                continue
            if solve(world_from_facts(list(maze.facts))).length == len(maze.gold):
                return maze
    raise ValueError(f"no worked example with {spec.keys} keys at noise ratio {noise_ratio}")


#: a sweep's instances have as many effective ratio pairs as supporting-fact counts,
#: rendered in instance order: the cache holds them all rather than thrash
@lru_cache(maxsize=1024)
def _examples(noise_ratio: float, shuffle_ratio: float) -> tuple[Maze, ...]:
    return tuple(_example(spec, noise_ratio, shuffle_ratio) for spec in _EXAMPLES)


def worked_examples(noise_ratio: float = 0.0, shuffle_ratio: float = 1.0) -> tuple[Maze, ...]:
    """The three worked examples at a noise ratio and a shuffle ratio, easy to hard.

    Deterministic: the same ratios give the same mazes in every run and process.
    """
    return _examples(_ratio(noise_ratio), min(_ratio(shuffle_ratio), 1.0))


def _facts_block(facts: list[str] | tuple[str, ...]) -> str:
    return "\n".join(facts)


def render(
    facts: list[str],
    shots: int,
    guidance: bool,
    *,
    noise_ratio: float = 0.0,
    shuffle_ratio: float = 1.0,
    self_assessment: bool = True,
) -> list[Message]:
    """System message: the instructions. User message: the worked examples (at the
    given ratios), the guidance and the self-assessment request, then the facts."""
    parts: list[str] = []
    if shots:
        examples = worked_examples(noise_ratio, shuffle_ratio)[:shots]
        blocks = [
            f"Example {i}:\nFacts:\n{_facts_block(ex.facts)}\nSolution: {format_plan(ex.gold)}"
            for i, ex in enumerate(examples, start=1)
        ]
        parts.append("\n\n".join([EXAMPLES_HEADER, *blocks, EXAMPLES_FOOTER]))
    if guidance:
        parts.append(GUIDANCE)
    if self_assessment:
        parts.append(SELF_ASSESSMENT)
    parts.append(f"{PROBLEM_HEADER}\nFacts:\n{_facts_block(facts)}\n\nYOUR SOLUTION:")
    return [Message("system", INSTRUCTIONS), Message("user", "\n\n".join(parts))]
