"""Arrow schemas of the adaptive design, its waves, and the horizon card.

* ``adaptive/design.parquet``: the instances each wave asked of each (family label,
  model), per L bin. The evaluate stage reads it to give every model its own instances
  (the first ``sum(new)`` of each bin, in candidate order); the generate stage keeps the
  most any model asked. It lives beside the tables it steers, not under ``analysis/``.
* ``analysis/adaptive.parquet``: after every wave, each (family label, model)'s calls,
  estimate and interval, and why its waves stopped.
* ``analysis/horizons.parquet``: the horizon card, one row per model, family (a maze
  setting, a puzzle and mode, a world environment and dd) and metric.
"""

from __future__ import annotations

import pyarrow as pa

from horizonbench.schemas.tables import with_version

_S, _I, _F = pa.string(), pa.int64(), pa.float64()

#: the card's metrics: the maze's decay length, the puzzles' per-step error, the
#: world environments' critical complexity
HORIZON_METRICS = ("L0", "eps", "sc_star")

DESIGN_SCHEMA = with_version(
    pa.schema(
        [
            pa.field("family", _S, nullable=False),
            pa.field("model", _S, nullable=False),
            pa.field("wave", _I, nullable=False),
            #: the bin's lower edge (the config's ``sampling.bins``)
            pa.field("bin", _I, nullable=False),
            #: instances this wave added to the bin for this model
            pa.field("new", _I, nullable=False),
        ]
    ),
    "adaptive/design",
)

WAVES_SCHEMA = with_version(
    pa.schema(
        [
            pa.field("family", _S, nullable=False),
            pa.field("model", _S, nullable=False),
            pa.field("metric", _S, nullable=False),
            pa.field("wave", _I, nullable=False),
            #: answered attempts so far, and the instances they came from
            pa.field("calls", _I, nullable=False),
            pa.field("instances", _I, nullable=False),
            pa.field("value", _F),
            pa.field("low", _F),
            pa.field("high", _F),
            #: (high - low) / (2 value); null when the interval is missing or unbounded
            pa.field("half_width", _F),
            pa.field("target", _F, nullable=False),
            #: null while waves go on; then target, budget, max_waves, exhausted or
            #: unidentified (no finite estimate after several waves)
            pa.field("stop", _S),
        ]
    ),
    "analysis/adaptive",
)

HORIZONS_SCHEMA = with_version(
    pa.schema(
        [
            pa.field("model", _S, nullable=False),
            #: maze setting (``maze``, ``maze@noise-2``), puzzle and mode
            #: (``hanoi``, ``hanoi/rollout``), or world environment and dd (``graph_nav dd=1``)
            pa.field("family", _S, nullable=False),
            pa.field("metric", _S, nullable=False),
            pa.field("value", _F),
            pa.field("low", _F),
            pa.field("high", _F),
            pa.field("n_attempts", _I, nullable=False),
            #: how the attempts were chosen: "adaptive" (waves) or "fixed" (the bins or grid)
            pa.field("design", _S, nullable=False),
            #: why the value is missing or what bounds it (a fit's note, a crossing's reason)
            pa.field("note", _S),
        ]
    ),
    "analysis/horizons",
)

#: ``<compare>/horizons.parquet``: the leaderboard of horizon cards across runs
LEADERBOARD_SCHEMA = with_version(
    pa.schema(
        [
            pa.field("model", _S, nullable=False),
            pa.field("family", _S, nullable=False),
            #: the family's params and prompt, hashed (``analysis.compare.setting_of``)
            pa.field("setting_id", _S, nullable=False),
            pa.field("metric", _S, nullable=False),
            #: how many of the compared runs hold this (model, family, metric)
            pa.field("runs", _I, nullable=False),
            pa.field("latest_run", _S, nullable=False),
            pa.field("value", _F),
            pa.field("low", _F),
            pa.field("high", _F),
            pa.field("n_attempts", _I, nullable=False),
            pa.field("design", _S, nullable=False),
            pa.field("previous_run", _S),
            pa.field("previous_value", _F),
            pa.field("previous_low", _F),
            pa.field("previous_high", _F),
            #: up / down / within against the previous run (compare's rule); null without one
            pa.field("moved", _S),
            #: relative change per run of a log-linear fit over the series (null under 2 runs)
            pa.field("trend", _F),
            #: the values in run order, as text ("19.2 -> 20.1 -> 18.7")
            pa.field("history", _S, nullable=False),
        ]
    ),
    "compare/horizons",
)
