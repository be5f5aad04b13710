"""The four puzzle families, as the ``horizonbench.families`` entry points name them."""

from __future__ import annotations

import pyarrow as pa

from horizonbench.datasets.puzzles.blocks_world import BlocksWorld
from horizonbench.datasets.puzzles.checkers import Checkers
from horizonbench.datasets.puzzles.family import PuzzleFamily
from horizonbench.datasets.puzzles.hanoi import Hanoi
from horizonbench.datasets.puzzles.river_crossing import RiverCrossing


class HanoiFamily(PuzzleFamily):
    name = "hanoi"
    puzzle_cls = Hanoi
    rule_fields = [
        pa.field("start_peg", pa.string(), nullable=False),
        pa.field("goal_peg", pa.string(), nullable=False),
    ]


class CheckersFamily(PuzzleFamily):
    name = "checkers"
    puzzle_cls = Checkers
    rule_fields = [
        pa.field("orientation", pa.string(), nullable=False),
        #: the classic start (all red on one side) keeps the forward-only rule
        pa.field("forward_only", pa.bool_(), nullable=False),
    ]
    example_rules = ("orientation", "forward_only")


class RiverCrossingFamily(PuzzleFamily):
    name = "river_crossing"
    puzzle_cls = RiverCrossing
    rule_fields = [
        pa.field("boat_capacity", pa.int32(), nullable=False),
        pa.field("start_bank", pa.string(), nullable=False),
    ]
    example_rules = ("boat_capacity",)


class BlocksWorldFamily(PuzzleFamily):
    name = "blocks_world"
    puzzle_cls = BlocksWorld
    rule_fields = [pa.field("num_stacks", pa.int32(), nullable=False)]
    example_rules = ("num_stacks",)
