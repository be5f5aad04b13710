"""The maze family: seqBench-style pathfinding with keys and locked doors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from horizonbench.core.answer_styles import PlanPieces
from horizonbench.core.hazard import PlantedTruth
from horizonbench.core.types import Candidate, Message, ParsedAnswer, Score, Step
from horizonbench.datasets.maze import baselines, prompt
from horizonbench.datasets.maze.categories import CATEGORIES, CATEGORY_OF
from horizonbench.datasets.maze.certificate import gold_violation, solve, world_of_listing
from horizonbench.datasets.maze.generator import generate_maze
from horizonbench.datasets.maze.rules import ACTIONS, VIOLATIONS
from horizonbench.datasets.maze.simulator import Judge
from horizonbench.datasets.plan_parser import parse_plan
from horizonbench.schemas.tables import COMMON_INSTANCE_FIELDS

#: rejection of a candidate whose rewind placed fewer keys than asked (``exact`` mode)
NUM_KEYS_SHORT = "num_keys_short"
#: rejection of a candidate whose fact strings are not what its fact items render to
FACTS_MISMATCH = "facts_mismatch"


class MazeParams(BaseModel):
    """Generation parameters. Noise and shuffle are targets (the effective values are
    recorded per instance); ``num_keys`` is exact unless ``num_keys_mode: at_most``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid_rows: int = Field(ge=2, le=500)
    grid_cols: int = Field(ge=2, le=500)
    #: number of locked doors on the optimal path (B); see ``num_keys_mode``
    num_keys: int = Field(default=2, ge=0, le=50)
    #: the rewind construction stops early when the current cell is walled in by the
    #: doors already locked; ``exact`` rejects such a candidate (``num_keys_short``),
    #: ``at_most`` keeps it with fewer keys (its effective B is in the row's num_keys)
    num_keys_mode: Literal["exact", "at_most"] = "exact"
    #: distracting facts / supporting facts
    noise_ratio: float = Field(default=0.0, ge=0.0, le=20.0)
    #: share of the fact listing moved away from its path-ordered position
    shuffle_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    #: extra locked doors (with keys) off the path, visible only as distractors;
    #: default: as many as num_keys
    decoy_doors: int | None = Field(default=None, ge=0, le=200)

    @model_validator(mode="after")
    def _big_enough(self) -> MazeParams:
        if self.grid_rows * self.grid_cols < 2 * (self.num_keys + 1):
            raise ValueError("grid too small for that many keys")
        return self


class MazePrompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: worked examples in the prompt (0 to 3), easy to hard
    shots: int = Field(default=3, ge=0, le=3)
    #: include the reasoning guidance paragraph
    guidance: bool = True
    #: ask for a self-assessment (confidence and perceived difficulty, 1 to 5) on a line
    #: after the plan, as seqBench's prompt does; it is not scored
    self_assessment: bool = True


STEP = pa.struct([("action", pa.string()), ("arg", pa.string())])

MAZE_SCHEMA = pa.schema(
    COMMON_INSTANCE_FIELDS
    + [
        pa.field("grid_rows", pa.int32(), nullable=False),
        pa.field("grid_cols", pa.int32(), nullable=False),
        pa.field("num_keys", pa.int32(), nullable=False),
        pa.field("target_num_keys", pa.int32(), nullable=False),
        pa.field("noise_ratio", pa.float64(), nullable=False),
        pa.field("target_noise_ratio", pa.float64(), nullable=False),
        pa.field("shuffle_ratio", pa.float64(), nullable=False),
        pa.field("target_shuffle_ratio", pa.float64(), nullable=False),
        pa.field("supporting_facts", pa.int32(), nullable=False),
        pa.field("distracting_facts", pa.int32(), nullable=False),
        pa.field("start_room", pa.string(), nullable=False),
        pa.field("goal_room", pa.string(), nullable=False),
        pa.field("facts", pa.list_(pa.string()), nullable=False),
    ]
)


def gold_plan(row: Mapping[str, Any]) -> tuple[Step, ...]:
    return tuple(Step(str(s["action"]), str(s["arg"])) for s in row["solution"])


def _judge_of(row: Mapping[str, Any]) -> Judge:
    """The judge of an instance row: its gold plan is certified legal and optimal, and
    its optimal plans counted (``generate_candidate``)."""
    count = row.get("optimal_plan_count")
    gold = [(s["action"], s["arg"]) for s in row["solution"]]
    return Judge(row["facts"], gold, certified=True, optimal_plans=None if count is None else int(count))


@lru_cache(maxsize=16)
def _judge(facts: tuple[str, ...], gold: tuple[tuple[str, str], ...], count: int | None) -> Judge:
    """One instance's judge, shared by its attempts when they are scored one by one."""
    return Judge(facts, gold, certified=True, optimal_plans=count)


class MazeFamily:
    name: ClassVar[str] = "maze"
    params_model: ClassVar[type[BaseModel]] = MazeParams
    prompt_model: ClassVar[type[BaseModel]] = MazePrompt
    instance_schema: ClassVar[pa.Schema] = MAZE_SCHEMA
    violations: ClassVar[tuple[str, ...]] = VIOLATIONS
    #: seqBench's failure categories (``categories.py``), in report order, and the one
    #: each violation type belongs to: the generic analysis reads them through the
    #: registry (``core.registry.violation_categories``)
    categories: ClassVar[tuple[str, ...]] = CATEGORIES
    violation_categories: ClassVar[Mapping[str, str]] = CATEGORY_OF
    #: the columns ``score`` and ``answer_scorer`` read (the score stage ships no others)
    score_columns: ClassVar[tuple[str, ...]] = ("instance_id", "facts", "solution", "optimal_plan_count")
    #: candidates are freed by reference counting alone (no cycles), so a shard may run
    #: with the cyclic collector paused (``datasets.shards.gc_paused``)
    acyclic_generation: ClassVar[bool] = True

    def generate_candidate(self, params: BaseModel, seed: int, index: int) -> Candidate:
        p = params if isinstance(params, MazeParams) else MazeParams.model_validate(params)
        decoys = p.num_keys if p.decoy_doors is None else p.decoy_doors
        maze = generate_maze(
            p.grid_rows, p.grid_cols, p.num_keys, p.noise_ratio, p.shuffle_ratio, decoys, seed
        )
        if p.num_keys_mode == "exact" and maze.num_keys != p.num_keys:
            return Candidate(None, NUM_KEYS_SHORT)  # before the certificate: it is the costly part
        world = world_of_listing(maze.items, maze.facts)
        if world is None:
            return Candidate(None, FACTS_MISMATCH)
        sol = solve(world)
        if sol.length is None:
            return Candidate(None, "unsolvable")
        if sol.length != len(maze.gold):
            return Candidate(None, "gold_not_optimal")
        bad = gold_violation(world, maze.gold)
        if bad is not None:
            return Candidate(None, f"gold_invalid:{bad}")
        n_facts = len(maze.facts)
        row = {
            "instance_id": f"maze-{seed:016x}",
            "family": self.name,
            "seed": seed,
            "candidate_index": index,
            # Step.as_dict, written out: a plan has a hundred steps or more
            "solution": [{"action": s.action, "arg": s.arg} for s in maze.gold],
            "solution_length": len(maze.gold),
            "optimal_plan_count": sol.count,
            "grid_rows": p.grid_rows,
            "grid_cols": p.grid_cols,
            "num_keys": maze.num_keys,
            "target_num_keys": p.num_keys,
            "noise_ratio": maze.distracting_count / maze.supporting_count,
            "target_noise_ratio": p.noise_ratio,
            "shuffle_ratio": maze.displaced_count / n_facts if n_facts else 0.0,
            "target_shuffle_ratio": p.shuffle_ratio,
            "supporting_facts": maze.supporting_count,
            "distracting_facts": maze.distracting_count,
            "start_room": maze.start,
            "goal_room": maze.goal,
            "facts": list(maze.facts),
        }
        return Candidate(row)

    def request_problems(self, params: BaseModel, sampling: Any) -> list[str]:
        """What these params and sampling cannot deliver (``schemas.config.check_requests``)."""
        from horizonbench.datasets.maze.limits import request_problems

        return request_problems(params, sampling)

    def difficulty(self, row: Mapping[str, Any]) -> int:
        return int(row["solution_length"])

    def render_prompt(self, row: Mapping[str, Any], prompt_settings: BaseModel) -> list[Message]:
        ps = MazePrompt.model_validate(
            prompt_settings.model_dump() if isinstance(prompt_settings, BaseModel) else prompt_settings
        )
        # the worked examples are drawn at the instance's own (effective) noise and
        # shuffle ratios
        return prompt.render(
            list(row["facts"]),
            ps.shots,
            ps.guidance,
            noise_ratio=float(row["noise_ratio"]),
            shuffle_ratio=float(row["shuffle_ratio"]),
            self_assessment=ps.self_assessment,
        )

    def parse_answer(self, text: str) -> ParsedAnswer:
        return parse_plan(text, task_actions=ACTIONS)

    def score(self, row: Mapping[str, Any], parsed: ParsedAnswer) -> Score:
        count = row.get("optimal_plan_count")
        gold = tuple((str(s["action"]), str(s["arg"])) for s in row["solution"])
        return _judge(tuple(row["facts"]), gold, None if count is None else int(count)).score(parsed)

    def answer_scorer(self, row: Mapping[str, Any]) -> Callable[[str], Score]:
        """``lambda text: self.score(row, self.parse_answer(text))``, for the many answers
        to one instance (the score stage): the instance is prepared once."""
        return _judge_of(row).score_text

    def offline_answer(
        self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
    ) -> str:
        return baselines.offline_answer(list(row["facts"]), gold_plan(row), kind, rng, eps)

    def offline_pieces(
        self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
    ) -> PlanPieces:
        """The intended plan of :meth:`offline_answer` (same draws) in the forms the
        answer styles arrange."""
        plan = baselines.intended_plan(list(row["facts"]), gold_plan(row), kind, rng, eps)
        return baselines.answer_pieces(plan)
