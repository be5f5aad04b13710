"""Where the run folder keeps its tables: the paths alone, so a command that only reads
them (``analyze``, ``report``, ``compare``) does not import the stages that write them
(and, through evaluation, the provider SDKs)."""

from __future__ import annotations

ATTEMPTS_REL = "attempts/attempts.parquet"
PROMPTS_REL = "prompts/prompts.parquet"
SCORES_REL = "scores/scores.parquet"
#: the world study's tables (one part each) and its analysis tables' prefix
EPISODES_REL = "episodes/part-0.parquet"
STEPS_REL = "steps/part-0.parquet"
WORLD_ANALYSIS_PREFIX = "analysis/worlds_"
#: the horizon card, and an adaptive study's design and waves
HORIZONS_REL = "analysis/horizons.parquet"
DESIGN_REL = "adaptive/design.parquet"
WAVES_REL = "analysis/adaptive.parquet"


def instances_rel(family: str) -> str:
    """A family label's instance table: a folder of parts (``tasks.run_folder.table_parts``)."""
    return f"instances/{family}"
