"""Table 4's paired one-axis ablations: a planted axis effect must be found, and nothing in
the matching null.

A study simulates the episodes table of a paired ablation run (``worlds.ablations``): one
backdrop cell of worlds, every level of the paper's four axes replaying those worlds (ids
ending ``:<axis>=<level>``, as ``datasets/worlds/episode.episode_id`` writes them). Worlds
differ in difficulty (a logit drawn once per world, shared by every level: what makes
pairing worth doing), and the agent's success on a world at a level is a Bernoulli draw of
``sigmoid(ability(level) - difficulty)``. The table is read through
``analysis/ablations.py`` (``ablation_table``, ``flagged``), the function the pipeline calls.

- planted: partial observation lowers the agent's ability (backdrop about 0.5, partial
  about 0.2), every other level is the backdrop's; a hit is the partial level flagged
  (Holm p < 0.05, a negative difference) and no other level flagged;
- null: every level is the backdrop's; a hit (a false positive) is any level flagged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.analysis import ablations
from horizonbench.calibration.base import FALSE_POSITIVE_5, Case, Target, Trial, register

#: worlds of the backdrop cell at scale 1 (the paper: 25 per level; the config: 100)
WORLDS = 100
#: Table 4's levels around Regime III's backdrop (T 40, branching 4, clean, static)
LEVELS = {
    "horizon": (10, 20, 80),
    "branching": (2, 8, 16),
    "observation": ("conflict", "distractor", "partial"),
    "mutation": ("low", "medium", "high"),
}
BACKDROP = {"horizon": 40, "branching": 4, "observation": "clean", "mutation": "static"}
#: the planted effect: partial observation costs this much ability (logit scale)
PLANTED = ("observation", "partial")
PLANTED_DROP = 1.6
#: the spread of world difficulty (logit sd): success of one world is correlated across levels
DIFFICULTY_SD = 1.5
DETECTION_80 = Target(0.80, 1.0)


def ablation_episodes(rng: np.random.Generator, worlds: int, drop: float) -> pd.DataFrame:
    """One paired ablation study's episodes: ``worlds`` worlds at the backdrop and at every
    level of :data:`LEVELS`, the :data:`PLANTED` level's ability lowered by ``drop``."""
    difficulty = rng.normal(0.0, DIFFICULTY_SD, size=worlds)
    arms = [("", BACKDROP)] + [
        (f"{axis}={level}", {**BACKDROP, axis: level}) for axis, levels in LEVELS.items() for level in levels
    ]
    rows = []
    for label, axes in arms:
        ability = -drop if label == "=".join(map(str, PLANTED)) else 0.0
        p = 1.0 / (1.0 + np.exp(-(ability - difficulty)))
        won = rng.random(worlds) < p
        for w in range(worlds):
            eid = f"sim:agent:{w:016x}" + (f":{label}" if label else "")
            outcome = "success" if won[w] else "failure"
            rows.append(
                {"episode_id": eid, "env": "sim", "model": "agent", "sc": 10, "dd": 6, "seed": w, **axes,
                 "success": bool(won[w]), "horizon_short": False, "outcome": outcome}
            )  # fmt: skip
    return pd.DataFrame(rows)


def _study(drop: float):
    def study(rng: np.random.Generator, scale: float) -> Trial:
        table = ablations.ablation_table(ablation_episodes(rng, max(10, round(WORLDS * scale)), drop))
        found = ablations.flagged(table)
        labels = set(zip(found["axis"], found["level"], strict=True))
        planted = table[(table["axis"] == PLANTED[0]) & (table["level"] == PLANTED[1])].iloc[0]
        values = {"planted_diff": float(planted["diff"]), "levels_flagged": float(len(found))}
        if drop == 0.0:
            return Trial(bool(labels), values)
        return Trial(labels == {PLANTED} and float(planted["diff"]) < 0, values)

    return study


#: what the case reads and what each arm plants, as the calibration report prints them
STATISTIC = (
    "analysis/ablations.py ablation_table: paired difference, McNemar exact p, Holm over the 12 levels; "
    "flagged = Holm p < 0.05"
)
PLANTED_TEXT = (
    f"{WORLDS} worlds replayed at 12 levels; partial observation lowers the logit of success by "
    f"{PLANTED_DROP} (about 0.5 -> 0.25), every other level unchanged"
)
NULL_TEXT = "every level the backdrop's: a flagged level claims an effect"

ABLATION_CASE = register(
    Case(
        "one-axis ablation found (Table 4, paired)",
        STATISTIC,
        PLANTED_TEXT,
        NULL_TEXT,
        "detection (partial alone flagged)",
        _study(PLANTED_DROP),
        DETECTION_80,
        _study(0.0),
        FALSE_POSITIVE_5,
    )  # fmt: skip
)
