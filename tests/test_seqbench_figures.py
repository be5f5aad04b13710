"""seqBench's sweep figures curve by curve (Figures 11, 12, 15 and the progress and token
panels of 3, 4, 14) and its example prompt (Figures 6/7): the tables against an
independent computation, each figure's drawn points against its table, the prompt's
text escaped, and the report's sections."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib.figure import Figure

from horizonbench.analysis import prompt_example, sweep
from horizonbench.reports import seqbench_figures as sf
from horizonbench.reports.html import render_report
from horizonbench.schemas.config import parse_config
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, PROMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.analyse.scores import analyse_scores, example_prompt_rows, to_table
from horizonbench.tasks.run_folder.layout import PROMPTS_REL

Z = 1.959963984540054
SETTINGS = [
    {"name": "noise-1", "params": {"noise_ratio": 1.0}},
    {"name": "noise-1-shuffle-0", "params": {"noise_ratio": 1.0, "shuffle_ratio": 0.0}},
    {"name": "shots-0", "prompt": {"shots": 0}},
    {"name": "keys-0", "params": {"num_keys": 0}},
]
NEW_TABLES = ("sweep_by_length", "sweep_failed_progress", "sweep_panels", "example_prompts")


def _axes() -> dict[str, dict]:
    cfg = parse_config(
        {
            "families": {
                "maze": {
                    "params": {"grid_rows": 8, "grid_cols": 8, "num_keys": 1, "noise_ratio": 0.0},
                    "sampling": {"count": 5},
                    "sweep": SETTINGS,
                }
            }
        }
    )
    return sweep.setting_axes(cfg.families)


def _scores(n: int = 120, models: tuple[str, ...] = ("a", "b")) -> pd.DataFrame:
    """Whole-plan scores: each label and model fails each step at its own rate."""
    rng = np.random.default_rng(3)
    rows = []
    for j, label in enumerate(_axes()):
        for k, model in enumerate(models):
            eps = 0.01 * (1 + j + 2 * k)
            L = rng.integers(3, 40, size=n)
            ok = rng.random(n) < (1 - eps) ** L
            progress = np.where(ok, 1.0, rng.integers(0, L) / L)
            for i in range(n):
                rows.append(
                    {
                        "model": model,
                        "instance_id": f"i{i}",
                        "family": label,
                        "mode": "plan",
                        "sample": 0,
                        "answered": True,
                        "solution_length": int(L[i]),
                        "success": bool(ok[i]),
                        "valid": bool(ok[i]),
                        "exact_match": bool(ok[i]),
                        "progress_ratio": float(progress[i]),
                        "precision": 1.0,
                        "recall": 1.0,
                        "plan_length": int(L[i]),
                        "violation": None if ok[i] else "locked_door",
                        "first_violation_step": None if ok[i] else int(progress[i] * L[i]),
                    }
                )
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


def _tokens(scores: pd.DataFrame) -> pd.DataFrame:
    return scores[["model", "family", "instance_id", "sample", "mode"]].assign(
        turn=0, output_tokens=(np.arange(len(scores)) * 7) % 50 + 10
    )


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    scores = _scores()
    tokens = _tokens(scores)
    tables = analyse_scores(
        scores, bootstrap=0, seed=0, min_attempts=1, bin_width=5, axes=_axes(), tokens=tokens
    )
    return scores, tokens, tables


def _wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half) if k else 0.0, min(1.0, centre + half) if k < n else 1.0


# --- the tables -------------------------------------------------------------------------


def test_the_new_tables_have_their_schemas(data):
    _, _, tables = data
    for name in NEW_TABLES:
        assert list(tables[name].columns) == ANALYSIS_SCHEMAS[name].names, name
        to_table(tables[name], ANALYSIS_SCHEMAS[name])
    for name in NEW_TABLES[:3]:
        assert len(tables[name]), name


def test_success_by_length_per_setting_against_an_independent_count(data):
    scores, _, tables = data
    table = tables["sweep_by_length"]
    assert set(table["family"]) == set(_axes())
    for r in table.itertuples():
        part = scores[(scores["family"] == r.family) & (scores["model"] == r.model)]
        part = part[part["solution_length"] // 5 * 5 == r.L]
        n, k = len(part), int(part["success"].sum())
        assert (r.attempts, r.successes) == (n, k)
        assert (r.L_high, r.L_centre) == (r.L + 4, r.L + 2.0)
        assert r.success_rate == pytest.approx(k / n)
        assert (r.success_low, r.success_high) == pytest.approx(_wilson(k, n))
    assert table["attempts"].sum() == len(scores)


def test_failed_progress_counts_only_failures_in_tenths(data):
    scores, _, tables = data
    table = tables["sweep_failed_progress"]
    for (family, model), g in table.groupby(["family", "model"]):
        part = scores[(scores["family"] == family) & (scores["model"] == model) & ~scores["success"]]
        p = part["progress_ratio"].to_numpy()
        expected = [int(((p >= k / 10) & ((p < (k + 1) / 10) | (k == 9))).sum()) for k in range(10)]
        assert list(g["count"]) == expected
        assert set(g["failures"]) == {len(part)}
        assert g["share"].sum() == pytest.approx(1.0)
        assert list(g["bin_centre"]) == pytest.approx([(k + 0.5) / 10 for k in range(10)])
        assert g["progress_mean"].iloc[0] == pytest.approx(p.mean())
        for r in g.itertuples():
            assert (r.share_low, r.share_high) == pytest.approx(_wilson(r.count, r.failures))


def test_progress_and_token_panels_against_an_independent_computation(data):
    scores, tokens, tables = data
    table = tables["sweep_panels"]
    axes_rows = tables["sweep_axes"]
    assert len(table) == len(axes_rows)
    assert set(table["axis"]) == {"noise_ratio", "shuffle_ratio", "shots", "num_keys"}
    for r in table.itertuples():
        part = scores[(scores["family"] == r.family) & (scores["model"] == r.model)]["progress_ratio"]
        half = Z * part.std(ddof=1) / math.sqrt(len(part))
        assert r.progress_ratio_mean == pytest.approx(part.mean())
        assert (r.progress_low, r.progress_high) == pytest.approx(
            (max(0.0, part.mean() - half), min(1.0, part.mean() + half))
        )
        t = tokens[(tokens["family"] == r.family) & (tokens["model"] == r.model)]["output_tokens"]
        half = Z * t.std(ddof=1) / math.sqrt(len(t))
        assert r.token_attempts == len(t)
        assert (r.output_tokens_mean, r.output_tokens_low, r.output_tokens_high) == pytest.approx(
            (t.mean(), t.mean() - half, t.mean() + half)
        )


def test_without_a_sweep_the_new_tables_are_empty_with_their_columns():
    scores = _scores(n=20)
    scores = scores[scores["family"] == "maze"].reset_index(drop=True)
    tables = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1)
    for name in NEW_TABLES:
        assert tables[name].empty and list(tables[name].columns) == ANALYSIS_SCHEMAS[name].names
        to_table(tables[name], ANALYSIS_SCHEMAS[name])


# --- each figure draws its table --------------------------------------------------------


def _drawn(fig: Figure) -> dict[tuple[str, str], tuple[np.ndarray, ...]]:
    """(panel title, legend label) -> the x, y, and error-bar ends drawn."""
    out = {}
    for ax in fig.axes:
        for c in ax.containers:
            line, _, (bars,) = c.lines
            x, y = line.get_xdata(), line.get_ydata()
            segments = np.array(bars.get_segments())
            out[(ax.get_title(), c.get_label())] = (
                np.asarray(x, float),
                np.asarray(y, float),
                segments[:, 0, 1],
                segments[:, 1, 1],
            )
    return out


def _check(drawn, key, x, y, low, high):
    got = drawn[key]
    np.testing.assert_allclose(got[0], x)
    np.testing.assert_allclose(got[1], y)
    np.testing.assert_allclose(got[2], low)
    np.testing.assert_allclose(got[3], high)


def test_figure_12_draws_each_noise_shuffle_setting_at_its_bin_centres(data):
    _, _, tables = data
    table = tables["sweep_by_length"]
    fig = Figure()
    curves = sf.draw_success_curves(fig, table, "maze", sf.NOISE_SHUFFLE)
    drawn = _drawn(fig)
    labels = {
        "maze": "noise 0, shuffle 1",
        "maze@noise-1": "noise 1, shuffle 1",
        "maze@noise-1-shuffle-0": "noise 1, shuffle 0",
    }
    assert {c.label for c in curves} == set(labels.values())  # never keys-0 or shots-0
    assert len(drawn) == 2 * 3
    for (family, model), g in table[table["family"].isin(labels)].groupby(["family", "model"]):
        g = g.sort_values("L")
        _check(
            drawn,
            (model, labels[family]),
            g["L_centre"],
            g["success_rate"],
            g["success_low"],
            g["success_high"],
        )


def test_figure_15_draws_one_curve_per_prompt_variant(data):
    _, _, tables = data
    table = tables["sweep_by_length"]
    fig = Figure()
    sf.draw_success_curves(fig, table, "maze", sf.PROMPT_AXES)
    drawn = _drawn(fig)
    assert {label for _, label in drawn} == {"shots 3", "shots 0"}
    g = table[(table["family"] == "maze@shots-0") & (table["model"] == "b")].sort_values("L")
    _check(drawn, ("b", "shots 0"), g["L_centre"], g["success_rate"], g["success_low"], g["success_high"])


def test_figure_11_draws_the_failed_share_per_noise_level(data):
    _, _, tables = data
    table = tables["sweep_failed_progress"]
    fig = Figure()
    sf.draw_failed_progress(fig, table, "maze")
    drawn = _drawn(fig)
    assert len(drawn) == 2 * 2  # base and noise-1 for each model; no shuffle, shots or keys
    for (family, model), g in table[table["family"].isin(["maze", "maze@noise-1"])].groupby(
        ["family", "model"]
    ):
        level = "noise 0" if family == "maze" else "noise 1"
        key = (model, f"{level} (n={int(g['failures'].iloc[0])})")
        _check(drawn, key, g["bin_centre"], g["share"], g["share_low"], g["share_high"])


@pytest.mark.parametrize(
    ("measure", "columns"),
    [
        ("progress", ("progress_ratio_mean", "progress_low", "progress_high")),
        ("tokens", ("output_tokens_mean", "output_tokens_low", "output_tokens_high")),
    ],
)
@pytest.mark.parametrize("axis", ["noise_ratio", "num_keys", "shuffle_ratio"])
def test_the_progress_and_token_panels_draw_their_table(data, measure, columns, axis):
    _, _, tables = data
    rows = tables["sweep_panels"]
    fig = Figure()
    sf.draw_panel(fig, rows, axis, measure)
    drawn = _drawn(fig)
    part = rows[rows["axis"] == axis]
    assert len(drawn) == part.groupby(["model", "held"]).ngroups
    for (model, held), g in part.groupby(["model", "held"]):
        g = g.sort_values("x")
        label = model + (f" ({held})" if held else "")
        _check(drawn, ("", label), g["x"], *(g[c] for c in columns))


def test_the_svgs_render_and_say_when_a_run_has_nothing_to_draw(data):
    _, _, tables = data
    svg = sf.success_curves_svg(tables["sweep_by_length"], "maze", sf.NOISE_SHUFFLE, "x")
    assert svg.startswith("<svg") and "noise 1, shuffle 0" in svg
    only_keys = tables["sweep_by_length"][tables["sweep_by_length"]["varied"].isin(["base", "num_keys"])]
    assert "no settings of maze that vary only" in sf.success_curves_svg(
        only_keys, "maze", sf.PROMPT_AXES, "x"
    )


# --- the example prompt (Figures 6/7) ---------------------------------------------------

HOSTILE = "<script>alert(1)</script>"


def _prompts() -> pd.DataFrame:
    rows = []
    for family, ids in (("maze", ["m1", "m2", "m3"]), ("hanoi", ["h1", "h2"])):
        for i in ids:
            rows.append(
                {
                    "instance_id": i,
                    "family": family,
                    "mode": "plan",
                    "prompt_sha256": "0" * 64,
                    "messages": [
                        {"role": "system", "content": f"system of {i}"},
                        {"role": "user", "content": f"facts of {i} {HOSTILE}"},
                    ],
                }
            )
    return pd.DataFrame(rows)


def _lengths() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "family": ["maze", "maze", "maze", "hanoi", "hanoi"],
            "instance_id": ["m1", "m2", "m3", "h1", "h2"],
            "solution_length": [9, 4, 4, 7, 3],
        }
    )


def test_the_example_is_the_shortest_instance_with_every_message_in_order():
    table = prompt_example.example_prompts(_prompts(), _lengths())
    assert list(table.columns) == ANALYSIS_SCHEMAS["example_prompts"].names
    to_table(table, ANALYSIS_SCHEMAS["example_prompts"])
    chosen = table.groupby("family")["instance_id"].first().to_dict()
    assert chosen == {"maze": "m2", "hanoi": "h2"}  # least L, then instance id
    maze = table[table["family"] == "maze"]
    assert list(maze["role"]) == ["system", "user"] and list(maze["message"]) == [0, 1]
    assert list(maze["content"]) == ["system of m2", f"facts of m2 {HOSTILE}"]


def test_the_run_folder_glue_reads_only_the_chosen_prompts(tmp_path):
    path = tmp_path / PROMPTS_REL
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(_prompts(), schema=PROMPTS_SCHEMA, preserve_index=False), path)
    rows = example_prompt_rows(tmp_path, _lengths())
    assert sorted(rows["instance_id"]) == ["h2", "m2"]
    assert example_prompt_rows(tmp_path / "nothing", _lengths()) is None


def test_the_report_shows_the_prompt_escaped_and_every_new_section(data):
    _, _, tables = data
    examples = prompt_example.example_prompts(_prompts(), _lengths())
    # the sweep's tables only: the maze's own figures are another test's (and take time)
    sweep_tables = {name: tables[name] for name in ("sweep", "sweep_axes", *NEW_TABLES[:3])}
    html = render_report(
        title="t", run_info={}, examples=[], counts={}, tables={**sweep_tables, "example_prompts": examples}
    )
    assert HOSTILE not in html
    assert "facts of m2 &lt;script&gt;alert(1)&lt;/script&gt;" in html
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    wanted = {
        "prompt-example",
        "sweep-maze-failed-progress",
        "sweep-maze-noise-shuffle",
        "sweep-maze-prompt-variants",
        "sweep-maze-noise_ratio",
        "sweep-maze-num_keys",
        "sweep-maze-shuffle_ratio",
        "sweep-maze-shots",
    }
    assert wanted <= ids
    # the maze's example comes first and is open
    section = html[html.index('id="prompt-example"') :]
    assert section.index("maze (plan)") < section.index("hanoi (plan)")
    all_ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(all_ids) == len(set(all_ids))
    # the progress and token panels are drawn for every swept axis
    for axis in ("noise_ratio", "num_keys", "shuffle_ratio", "shots"):
        for measure in ("progress", "tokens"):
            assert f'id="sweep-maze-{axis}-{measure}-figure_1"' in html


# --- coinciding settings and integer axes (issue 25 review) -----------------------------


def _with_a_copy(table: pd.DataFrame, model: str, source: str, target: str) -> pd.DataFrame:
    """``table`` with ``target``'s rows of ``model`` replaced by ``source``'s points, as an
    offline baseline that ignores the facts draws noise 0 and noise 1 alike."""
    keep = ~((table["family"] == target) & (table["model"] == model))
    copy = table[(table["family"] == source) & (table["model"] == model)].copy()
    own = table[(table["family"] == target)].iloc[0]
    for col in ("family", "varied", "axes"):
        copy[col] = own[col]
    return pd.concat([table[keep], copy], ignore_index=True)


def test_the_captions_say_which_settings_draw_identical_points(data):
    _, _, tables = data
    by_length = tables["sweep_by_length"]
    assert sf.coinciding(sf.success_curves(by_length, "maze", sf.NOISE_SHUFFLE)) is None
    same = _with_a_copy(by_length, "a", "maze", "maze@noise-1")
    sentence = sf.coinciding(sf.success_curves(same, "maze", sf.NOISE_SHUFFLE))
    assert sentence == (
        "Identical points, so one line hides the other: a: noise 0, shuffle 1 and noise 1, shuffle 1."
    )
    failed = _with_a_copy(tables["sweep_failed_progress"], "b", "maze", "maze@noise-1")
    assert "b: noise 0 (n=" in (sf.coinciding(sf.failed_progress_curves(failed, "maze")) or "")
    sweep_tables = {name: tables[name] for name in ("sweep", "sweep_axes", *NEW_TABLES[:3])}
    html = render_report(
        title="t", run_info={}, examples=[], counts={}, tables={**sweep_tables, "sweep_by_length": same}
    )
    caption = re.search(r'id="sweep-maze-noise-shuffle-same">([^<]*)<', html)
    assert caption is not None and caption.group(1) == sentence
    assert 'id="sweep-maze-failed-progress-same"' not in html


def test_an_integer_axis_gets_integer_ticks(data):
    _, _, tables = data
    fig = Figure()
    sf.draw_panel(fig, tables["sweep_panels"], "num_keys", "progress")
    (ax,) = fig.axes
    fig.draw_without_rendering()
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
