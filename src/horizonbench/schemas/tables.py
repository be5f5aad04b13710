"""Arrow schemas of the tables every family shares (attempts, scores).

Schemas are explicit so Parquet files never depend on pandas' inference (pandas 3
infers ``large_string``), and every file carries ``schema_version`` in its metadata.
Family instance schemas live beside their family and start with ``COMMON_INSTANCE_FIELDS``.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "3"

STEP_TYPE = pa.struct([("action", pa.string()), ("arg", pa.string())])

#: columns every family's instance table starts with
COMMON_INSTANCE_FIELDS: list[pa.Field] = [
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("family", pa.string(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("candidate_index", pa.int64(), nullable=False),
    pa.field("solution", pa.list_(STEP_TYPE), nullable=False),
    pa.field("solution_length", pa.int32(), nullable=False),
    #: how many optimal plans exist (null where the family does not count them)
    pa.field("optimal_plan_count", pa.int64()),
]

ATTEMPTS_SCHEMA = pa.schema(
    [
        pa.field("attempt_key", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        pa.field("sample", pa.int32(), nullable=False),
        #: 0 for single-turn attempts; the turn index within a multi-turn episode
        pa.field("turn", pa.int32(), nullable=False),
        #: "plan" (one answer per attempt) or "rollout" (one row per step of an episode)
        pa.field("mode", pa.string(), nullable=False),
        pa.field("prompt_sha256", pa.string(), nullable=False),
        pa.field("response", pa.string()),
        pa.field("finish_reason", pa.string()),
        pa.field("input_tokens", pa.int64(), nullable=False),
        pa.field("output_tokens", pa.int64(), nullable=False),
        pa.field("latency_s", pa.float64(), nullable=False),
        pa.field("cost_usd", pa.float64(), nullable=False),
        pa.field("error", pa.string()),
        #: null when answered; else a kind from models/failures.py (rate_limit, auth, ...)
        pa.field("error_class", pa.string()),
        #: calls sent for this attempt in this run (0 when reused)
        pa.field("tries", pa.int32(), nullable=False),
        pa.field("reused", pa.bool_(), nullable=False),
        pa.field("via_batch", pa.bool_(), nullable=False),
        #: the model the provider says answered, and OpenAI's system_fingerprint
        pa.field("served_model", pa.string()),
        pa.field("system_fingerprint", pa.string()),
    ]
)

PROMPTS_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        #: for rollouts, the prompt of the first step (later steps show the state reached)
        pa.field("mode", pa.string(), nullable=False),
        pa.field("prompt_sha256", pa.string(), nullable=False),
        pa.field(
            "messages",
            pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
            nullable=False,
        ),
    ]
)

SCORES_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("instance_id", pa.string(), nullable=False),
        pa.field("family", pa.string(), nullable=False),
        #: "plan" or "rollout"; a rollout's row scores its whole episode
        pa.field("mode", pa.string(), nullable=False),
        pa.field("sample", pa.int32(), nullable=False),
        #: False for an attempt with no answer (a provider failure, not a model failure):
        #: counted here, left out of every rate and fit
        pa.field("answered", pa.bool_(), nullable=False),
        pa.field("error_class", pa.string()),
        pa.field("solution_length", pa.int32(), nullable=False),
        pa.field("num_keys", pa.int32()),
        pa.field("noise_ratio", pa.float64()),
        pa.field("shuffle_ratio", pa.float64()),
        pa.field("success", pa.bool_(), nullable=False),
        pa.field("valid", pa.bool_(), nullable=False),
        pa.field("exact_match", pa.bool_(), nullable=False),
        #: maze: the share of the optimal plan done before the first violation; puzzles:
        #: the share of the start's distance to the goal that the last state closed
        #: (1 - d(last) / d(start) by the certificate's distance map, clipped to [0, 1])
        pa.field("progress_ratio", pa.float64(), nullable=False),
        #: maze: multiset precision (predicted actions found in the gold plan, order
        #: ignored); null for puzzles (their share of legal moves is move_legality_rate)
        pa.field("precision", pa.float64()),
        #: maze: seqBench's precision read by position (predicted steps equal to the gold
        #: step at the same index, over the predicted length); null for other families
        pa.field("precision_positional", pa.float64()),
        #: maze: multiset recall; null for puzzles (legal moves over the optimal length
        #: is legal_move_coverage)
        pa.field("recall", pa.float64()),
        pa.field("plan_length", pa.int32(), nullable=False),
        pa.field("violation", pa.string()),
        pa.field("first_violation_step", pa.int32()),
        pa.field("parse_error", pa.string()),
        #: puzzle families: size n, (length - optimal) / optimal of a solved attempt,
        #: the share of legal moves (plan) or legal transitions (rollout), and the steps
        #: taken (the plan's length, or the rollout's model calls)
        pa.field("n", pa.int32()),
        pa.field("optimality_gap", pa.float64()),
        pa.field("move_legality_rate", pa.float64()),
        pa.field("steps_taken", pa.int32()),
        #: puzzle families: legal moves made over the optimal length (capped at 1; 1 for a
        #: success): it counts moves, not progress (a legal random walk scores 1.0)
        pa.field("legal_move_coverage", pa.float64()),
        #: puzzle families: progress_ratio of the closest state to the goal the attempt
        #: reached (1 - min d / d(start))
        pa.field("best_progress", pa.float64()),
    ]
)


def with_version(schema: pa.Schema, table: str) -> pa.Schema:
    """The schema with ``schema_version`` and the table name in its metadata."""
    meta = dict(schema.metadata or {})
    meta[b"schema_version"] = SCHEMA_VERSION.encode()
    meta[b"horizonbench_table"] = table.encode()
    return schema.with_metadata(meta)


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, typ) for name, typ in cols])


_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
#: the columns naming a sweep setting (``analysis/sweep.settings_table``'s)
_SETTING_KEYS = (("family", _S), ("base_family", _S), ("setting", _S), ("varied", _S), ("axes", _S))
#: the columns naming a point along a swept axis (``analysis/sweep.axis_table``'s)
_AXIS_KEYS = (("base_family", _S), ("axis", _S), ("held", _S), ("model", _S), ("family", _S))
_AXIS_KEYS += (("setting", _S), ("x", _F), ("x_label", _S))

#: analysis tables: one row per (family, model, ...); see the README for meanings
ANALYSIS_SCHEMAS: dict[str, pa.Schema] = {
    "overall": _schema(
        ("family", _S),
        ("model", _S),
        ("attempts", _I),
        ("instances", _I),
        ("success_rate", _F),
        ("exact_match_rate", _F),
        ("valid_rate", _F),
        ("progress_ratio_mean", _F),
        ("precision_mean", _F),
        ("precision_positional_mean", _F),
        ("recall_mean", _F),
        ("invalid_output_share", _F),
    ),
    "by_length": _schema(
        ("family", _S),
        ("model", _S),
        ("L", _I),
        ("attempts", _I),
        ("instances", _I),
        ("successes", _I),
        ("success_rate", _F),
        ("exact_match_rate", _F),
        ("valid_rate", _F),
        ("progress_ratio_mean", _F),
        ("progress_ratio_sem", _F),
        ("precision_mean", _F),
        ("precision_positional_mean", _F),
        ("recall_mean", _F),
    ),
    "fits": _schema(
        ("family", _S),
        ("model", _S),
        ("method", _S),
        # which success the fit counts: "simulation" (the scores' success) or
        # "exact_match" (seqBench's Pass@1); analysis/decay.py SUCCESS_DEFINITIONS
        ("success_definition", _S),
        ("L0", _F),
        ("A", _F),
        ("L0_low", _F),
        ("L0_high", _F),
        ("n_bins_used", _I),
        ("n_bins_dropped", _I),
        ("n_attempts", _I),
        ("converged", _B),
        ("note", _S),
    ),
    "violations": _schema(
        ("family", _S),
        ("model", _S),
        ("violation", _S),
        # the seqBench failure category of the violation (datasets/maze/categories.py)
        ("category", _S),
        ("count", _I),
        ("share", _F),
    ),
    "first_violations": _schema(
        ("family", _S),
        ("model", _S),
        ("L", _I),
        ("violation", _S),
        ("first_violation_step", _I),
        ("solution_length", _I),
        ("relative_position", _F),
    ),
    # puzzle families (a rollout evaluation is the family "<name>/rollout"):
    "compounding": _schema(
        ("family", _S),
        ("model", _S),
        ("eps", _F),
        ("eps_low", _F),
        ("eps_high", _F),
        ("n_attempts", _I),
        ("successes", _I),
        ("converged", _B),
        ("note", _S),
    ),
    "by_n": _schema(
        ("family", _S),
        ("model", _S),
        ("n", _I),
        ("L_mean", _F),
        ("attempts", _I),
        ("successes", _I),
        ("success_rate", _F),
        ("predicted", _F),
        ("predicted_low", _F),
        ("predicted_high", _F),
        ("predicted_eps_low", _F),
        ("predicted_eps_high", _F),
        ("move_legality_mean", _F),
        ("optimality_gap_mean", _F),
        ("progress_mean", _F),
        ("best_progress_mean", _F),
    ),
    # seqBench's figures (analysis/seqbench.py says what each column means)
    "progress_distribution": _schema(
        ("family", _S), ("model", _S), ("bin_low", _F), ("bin_high", _F), ("count", _I), ("share", _F)
    ),
    "first_violation_by_length": _schema(
        ("family", _S),
        ("model", _S),
        ("L_low", _I),
        ("L_high", _I),
        ("attempts", _I),
        ("relative_position_mean", _F),
        ("relative_position_median", _F),
        ("relative_position_q25", _F),
        ("relative_position_q75", _F),
        ("first_violation_step_mean", _F),
        ("first_violation_step_median", _F),
        ("first_violation_step_q25", _F),
        ("first_violation_step_q75", _F),
        ("expected_step_mean", _F),
        ("expected_step_median", _F),
        ("expected_step_q25", _F),
        ("expected_step_q75", _F),
        ("constant_eps", _F),
        ("hazard_slope", _F),
        ("hazard_slope_low", _F),
        ("hazard_slope_high", _F),
    ),
    "violations_by_length": _schema(
        ("family", _S),
        ("model", _S),
        ("L", _I),
        ("violation", _S),
        ("category", _S),
        ("count", _I),
        ("attempts", _I),
        ("share", _F),
    ),
    "instance_progress": _schema(
        ("family", _S),
        ("model", _S),
        ("instance_id", _S),
        ("L", _I),
        ("attempts", _I),
        ("progress_ratio_mean", _F),
        ("success_rate", _F),
    ),
    "model_pairs": _schema(
        ("family", _S),
        ("model_a", _S),
        ("model_b", _S),
        ("instances", _I),
        ("progress_mean_a", _F),
        ("progress_mean_b", _F),
        ("progress_corr", _F),
        ("a_better", _I),
        ("b_better", _I),
        ("a_only_solved", _I),
        ("b_only_solved", _I),
        ("weaker", _S),
        ("inversions", _I),
        ("inversion_share", _F),
    ),
    "tokens_by_length": _schema(
        ("family", _S),
        ("model", _S),
        ("L", _I),
        ("attempts", _I),
        ("output_tokens_mean", _F),
        ("output_tokens_median", _F),
        ("output_tokens_q90", _F),
    ),
    # sweeps (analysis/sweep.py): these two span family labels, so their ``family`` is
    # the setting's label and ``base_family`` the family swept
    "sweep": _schema(
        *_SETTING_KEYS,
        ("model", _S),
        ("attempts", _I),
        ("instances", _I),
        ("L_min", _I),
        ("L_max", _I),
        ("success_rate", _F),
        ("success_low", _F),
        ("success_high", _F),
        ("progress_ratio_mean", _F),
        ("progress_low", _F),
        ("progress_high", _F),
        ("output_tokens_mean", _F),
        ("L0", _F),
        ("L0_low", _F),
        ("L0_high", _F),
        ("L0_wls_prefactor", _F),
        ("L0_wls_origin", _F),
    ),
    "sweep_axes": _schema(
        *_AXIS_KEYS,
        ("L0", _F),
        ("L0_low", _F),
        ("L0_high", _F),
        ("success_rate", _F),
        ("success_low", _F),
        ("success_high", _F),
        ("progress_ratio_mean", _F),
        ("output_tokens_mean", _F),
    ),
    # a sweep curve by curve (analysis/seqbench_sweep.py): seqBench Figures 11, 12, 15
    # and the progress and token panels of 3, 4, 14
    "sweep_by_length": _schema(
        *_SETTING_KEYS,
        ("model", _S),
        ("L", _I),
        ("L_high", _I),
        ("L_centre", _F),
        ("attempts", _I),
        ("successes", _I),
        ("success_rate", _F),
        ("success_low", _F),
        ("success_high", _F),
    ),
    "sweep_failed_progress": _schema(
        *_SETTING_KEYS,
        ("model", _S),
        ("bin_low", _F),
        ("bin_high", _F),
        ("bin_centre", _F),
        ("count", _I),
        ("failures", _I),
        ("share", _F),
        ("share_low", _F),
        ("share_high", _F),
        ("progress_mean", _F),
        ("progress_median", _F),
    ),
    "sweep_panels": _schema(
        *_AXIS_KEYS,
        ("attempts", _I),
        ("progress_ratio_mean", _F),
        ("progress_low", _F),
        ("progress_high", _F),
        ("token_attempts", _I),
        ("output_tokens_mean", _F),
        ("output_tokens_low", _F),
        ("output_tokens_high", _F),
    ),
    # seqBench Figures 6/7: one example prompt per family label and mode, as sent
    # (analysis/prompt_example.py)
    "example_prompts": _schema(
        ("family", _S),
        ("mode", _S),
        ("instance_id", _S),
        ("solution_length", _I),
        ("prompt_sha256", _S),
        ("message", _I),
        ("role", _S),
        ("content", _S),
    ),
}
#: analysis tables computed across family labels rather than one label at a time
CROSS_FAMILY_TABLES = (
    "sweep",
    "sweep_axes",
    "sweep_by_length",
    "sweep_failed_progress",
    "sweep_panels",
    "example_prompts",
)


# --- world-model studies -------------------------------------------------------------

#: one row per agent episode (``datasets/worlds/episode.py`` says what each column means)
EPISODES_SCHEMA = _schema(
    ("episode_id", _S),
    ("env", _S),
    ("model", _S),
    ("regime", _S),
    ("sc", _I),
    ("dd", _I),
    ("horizon", _I),
    ("branching", _I),
    ("observation", _S),
    ("mutation", _S),
    ("archetype", _I),
    ("variant", _I),
    ("seed", _I),
    ("optimal_length", _I),
    ("horizon_ratio", _F),
    ("horizon_short", _B),
    ("success", _B),
    ("steps", _I),
    ("invalid_actions", _I),
    ("first_error", _S),
    ("error_counts", _S),
    ("mean_jaccard", _F),
    ("final_jaccard", _F),
    ("consistency_rate", _F),
    ("dependency_accuracy", _F),
    ("self_check_accuracy", _F),
    ("tau_w", _F),
    ("tau_a", _F),
    ("lag", _F),
    ("tau_w_onset", _F),
    ("lag_onset", _F),
    ("collapse_onset", _F),
    ("collapse_type", _S),
    # success | failure | budget_exceeded (a harness limit) | format_failure (no usable
    # action for harness.fallback_streak steps); the last two count as failures
    ("outcome", _S),
    # the harness's memory mode and prompt version (null for offline agents)
    ("memory", _S),
    ("prompt_version", _S),
    ("calls", _I),
    ("repairs", _I),
    ("fallbacks", _I),
    ("input_tokens", _I),
    ("output_tokens", _I),
    ("wall_s", _F),
    ("budget_detail", _S),
)

#: one row per step of an agent episode
STEPS_SCHEMA = _schema(
    ("episode_id", _S),
    ("env", _S),
    ("model", _S),
    ("seed", _I),
    ("step", _I),
    ("action", _S),
    ("action_read", _S),
    ("action_valid", _B),
    ("error", _S),
    ("jaccard", _F),
    ("state_size", _I),
    ("gold_size", _I),
    ("consistent", _B),
    ("dependency_correct", _B),
    ("self_check_correct", _B),
    ("valid_actions", _I),
    ("mutations", _I),
    ("calls", _I),
    ("repairs", _I),
    # the harness calls of this step that fell back (comma-separated roles)
    ("fallbacks", _S),
    ("output_tokens", _I),
    ("confidence", _F),
    ("replan", _B),
)

_WORLD_CONTRAST = [
    ("env", _S),
    ("model", _S),
    ("dd", _I),
    ("sc_from", _I),
    ("sc_to", _I),
]

#: ``<run>/analysis/worlds_<name>.parquet`` (``analysis/worlds.py`` documents each)
#: the key of a one-axis ablation row (Tables 4 and 5): one level of one axis in one cell
_ABLATION_KEY = (("env", _S), ("model", _S), ("sc", _I), ("dd", _I), ("axis", _S), ("level", _S))

WORLD_ANALYSIS_SCHEMAS: dict[str, pa.Schema] = {
    # analysis/world_horizons.py: which worlds fit in T; the T scan as Table 7
    "horizons": _schema(
        ("env", _S),
        ("sc", _I),
        ("dd", _I),
        ("worlds", _I),
        ("lstar_min", _I),
        ("lstar_median", _F),
        ("lstar_max", _I),
        ("t_min", _I),
        ("t_max", _I),
        ("unwinnable", _I),
        ("regime_t", _I),
        ("unwinnable_at_regime_t", _I),
        ("horizon", _S),
    ),
    "grid": _schema(
        ("env", _S),
        ("model", _S),
        ("sc", _I),
        ("dd", _I),
        ("n", _I),
        ("successes", _I),
        ("p", _F),
        ("wilson_low", _F),
        ("wilson_high", _F),
        # budget stops are in n and p as failures; p_finished leaves them out
        ("budget_exceeded", _I),
        ("n_finished", _I),
        ("p_finished", _F),
        # episodes with T < L* (out of n); n 0 and p NaN: no world of the cell fits in T
        ("n_unwinnable", _I),
        # successes / (n + n_unwinnable), Wilson: T < L* as failures (the paper's Table 2)
        ("p_all", _F),
        ("p_all_low", _F),
        ("p_all_high", _F),
        # how T was set (WorldsSpec.horizon_label): "paper T=40", "relative T=ceil(1.5 L*)"
        ("horizon", _S),
    ),
    "critical_points": _schema(
        ("env", _S),
        ("model", _S),
        ("dd", _I),
        ("sc_star", _F),
        ("sc_star_low", _F),
        ("sc_star_high", _F),
        ("bracket_low", _F),
        ("bracket_high", _F),
        ("reason", _S),
        ("horizon", _S),
    ),
    "cliffs": _schema(
        ("env", _S),
        ("model", _S),
        ("dd", _I),
        ("sc_from", _I),
        ("sc_to", _I),
        ("p_from", _F),
        ("p_to", _F),
        ("drop", _F),
        ("meets_margin", _B),
        ("mn_z", _F),
        ("mn_p", _F),
        ("plateau_exists", _B),
        ("floor_exists", _B),
        ("abrupt", _B),
    ),
    "band_widths": _schema(("env", _S), ("model", _S), ("dd", _I), ("w_trans", _I), ("sc_in_band", _S)),
    "contrasts": _schema(
        *_WORLD_CONTRAST,
        ("cohens_h", _F),
        ("cohens_h_label", _S),
        ("mw_u", _F),
        ("mw_p", _F),
        ("mw_p_holm", _F),
        ("mw_p_bonferroni", _F),
        ("mw_p_bh", _F),
        ("hodges_lehmann", _F),
        ("cliffs_delta", _F),
        ("cliffs_delta_label", _S),
    ),
    "lags": _schema(
        ("env", _S),
        ("model", _S),
        ("n_episodes", _I),
        ("n_failed", _I),
        ("count", _I),
        ("median", _F),
        ("mean", _F),
        ("share_world_first", _F),
        ("share_simultaneous", _F),
        ("share_action_first", _F),
        ("mean_low", _F),
        ("mean_high", _F),
        ("onset_count", _I),
        ("onset_mean", _F),
        ("onset_mean_low", _F),
        ("onset_mean_high", _F),
        ("onset_share_world_first", _F),
    ),
    "step_metrics": _schema(
        ("env", _S),
        ("model", _S),
        ("sc", _I),
        ("dd", _I),
        ("episodes", _I),
        ("mean_jaccard", _F),
        ("consistency_rate", _F),
        ("dependency_accuracy", _F),
        ("self_check_accuracy", _F),
        ("invalid_per_episode", _F),
        ("world_state_collapses", _I),
        ("action_validity_collapses", _I),
        ("self_check_collapses", _I),
        ("compound_collapses", _I),
        ("format_collapses", _I),
    ),
    # per cell, the episodes left out of every rate (T < L*) and those stopped by a
    # harness limit (counted as failures; an example of the limit in budget_detail);
    # measured = episodes - horizon_short = what the grid counts
    "excluded": _schema(
        ("env", _S),
        ("model", _S),
        ("sc", _I),
        ("dd", _I),
        ("episodes", _I),
        ("horizon_short", _I),
        ("budget_exceeded", _I),
        ("measured", _I),
        ("budget_detail", _S),
    ),
    # per (env, model, memory mode) of the model agents: the memory-mode comparison
    "harness": _schema(
        ("env", _S),
        ("model", _S),
        ("memory", _S),
        ("prompt_version", _S),
        ("episodes", _I),
        ("measured", _I),
        ("horizon_short", _I),
        ("budget_exceeded", _I),
        ("format_failures", _I),
        ("successes", _I),
        ("p", _F),
        ("wilson_low", _F),
        ("wilson_high", _F),
        ("p_finished", _F),
        ("steps", _I),
        ("calls", _I),
        ("calls_per_step", _F),
        ("repairs", _I),
        ("fallbacks", _I),
        ("input_tokens", _I),
        ("output_tokens", _I),
        ("mean_jaccard", _F),
        ("n_failed", _I),
        ("lag_count", _I),
        ("share_world_first", _F),
        ("mean_lag", _F),
    ),
    # the paper's own tables (analysis/world_effects.py, analysis/world_shapes.py)
    # Table 5: Cliff's delta of each one-axis level against its backdrop
    "ablation_deltas": _schema(
        *_ABLATION_KEY,
        ("backdrop", _S),
        ("n_level", _I),
        ("n_backdrop", _I),
        ("p_level", _F),
        ("p_backdrop", _F),
        ("cliffs_delta", _F),
        ("delta_low", _F),
        ("delta_high", _F),
        ("magnitude", _S),
        # T < L* episodes (left out above) and the delta with them as failures
        ("n_unwinnable", _I),
        ("delta_all", _F),
    ),
    # Table 10: Cohen's h between two agents on a cell both played
    "model_pairs": _schema(
        ("env", _S),
        ("model_a", _S),
        ("model_b", _S),
        ("sc", _I),
        ("dd", _I),
        ("n_a", _I),
        ("n_b", _I),
        ("p_a", _F),
        ("p_b", _F),
        ("cohens_h", _F),
        ("h_low", _F),
        ("h_high", _F),
        ("magnitude", _S),
    ),
    # Appendix H's G1b: three metrics at the trigger pair, Holm, Hodges-Lehmann >= 0.20
    "g1b": _schema(
        ("env", _S),
        ("model", _S),
        ("dd", _I),
        ("sc_from", _I),
        ("sc_to", _I),
        ("metric", _S),
        ("n_from", _I),
        ("n_to", _I),
        ("mw_u", _F),
        ("mw_p", _F),
        ("p_holm", _F),
        ("hodges_lehmann", _F),
        ("hl_low", _F),
        ("hl_high", _F),
        ("significant", _B),
        ("shift_met", _B),
        ("metric_passes", _B),
        ("g1b_passes", _B),
        ("pair_chosen", _S),
    ),
    # Table 1: the trigger-environment selection rule over the run's dd sweeps
    "env_selection": _schema(
        ("env", _S),
        ("model", _S),
        ("dd_levels", _S),
        ("p_by_dd", _S),
        ("shape", _S),
        ("max_drop", _F),
        ("drop_low", _F),
        ("drop_high", _F),
        ("monotone", _B),
        ("shapes_match", _B),
        ("min_max_drop", _F),
        ("selected", _B),
        ("reason", _S),
    ),
    # Appendix J: W_trans(d) read as Pattern A / B / C
    "band_patterns": _schema(
        ("env", _S),
        ("model", _S),
        ("dd_levels", _S),
        ("w_trans", _S),
        ("w_trans_low", _S),
        ("w_trans_high", _S),
        ("pattern", _S),
        ("pattern_name", _S),
        ("stable", _B),
    ),
    # Table 4: one-axis ablations around the backdrop, paired on the world
    # (analysis/ablations.py; empty for a run without worlds.ablations)
    "ablations": _schema(
        *_ABLATION_KEY,
        ("is_backdrop", _B),
        ("n", _I),
        ("successes", _I),
        ("p", _F),
        ("wilson_low", _F),
        ("wilson_high", _F),
        ("n_unwinnable", _I),
        ("p_all", _F),
        ("diff", _F),
        ("diff_low", _F),
        ("diff_high", _F),
        ("paired", _B),
        ("n_pairs", _I),
        ("p_value", _F),
        ("p_holm", _F),
        ("horizon", _S),
    ),
}


# every worlds_* table ends with how T was set (analysis/worlds.with_horizon)
for _name, _world_schema in WORLD_ANALYSIS_SCHEMAS.items():
    if "horizon" not in _world_schema.names:
        WORLD_ANALYSIS_SCHEMAS[_name] = _world_schema.append(pa.field("horizon", _S))


def _t_fine_schema(ablations: pa.Schema) -> pa.Schema:
    """Table 7 (``analysis/world_horizons.t_fine``): the horizon rows of the Table 4
    table with T as a number, its rates and difference columns (n through diff_high),
    and ``coarse_reference`` (Table 4's T levels, starred in Table 7)."""
    names = ablations.names
    rates = [ablations.field(n) for n in names[names.index("n") : names.index("diff_high") + 1]]
    head = [ablations.field(n) for n in ("env", "model", "sc", "dd")]
    tail = [pa.field("coarse_reference", _B), ablations.field("horizon")]
    return pa.schema([*head, pa.field("t", _I), *rates, *tail])


WORLD_ANALYSIS_SCHEMAS["t_fine"] = _t_fine_schema(WORLD_ANALYSIS_SCHEMAS["ablations"])
