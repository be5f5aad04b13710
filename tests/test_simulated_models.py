"""Simulated offline models with planted truth (issue 22): the rising per-step error,
its truth as pure functions, answers in the styles real models write, and the config
fields that set them.

The truth is only worth planting if the pipeline's own code reproduces it, so the
empirical checks go through the real OfflineModel, the families' parsers and scorers,
and the rollout conversation of the pipeline, over fixed seeds (deterministic: a
binomial tolerance of 4 standard deviations on a fixed draw never flakes).
"""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.cli.main import _demo_text
from horizonbench.core.answer_styles import STYLES, UNUSABLE, PlanPieces, pick_style, write_answer
from horizonbench.core.errors import ConfigError
from horizonbench.core.hazard import PlantedTruth, complete_mix, usable_share
from horizonbench.core.registry import get_family
from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.baselines import answer_pieces
from horizonbench.datasets.maze.rules import ACTIONS
from horizonbench.datasets.plan_parser import parse_plan
from horizonbench.datasets.puzzles.rollout import read_state_answer
from horizonbench.models.base import AttemptRequest
from horizonbench.models.offline import OfflineModel
from horizonbench.schemas.config import GenerationSettings, ModelSpec, parse_config
from horizonbench.tasks.evaluate.rollouts import RolloutConversation
from puzzle_helpers import PUZZLES, puzzle_rows

MAZE = MazeFamily()
USABLE_STYLES = [s for s in STYLES if s not in UNUSABLE]


def maze_rows(n: int) -> list[dict]:
    p = MazeParams(grid_rows=8, grid_cols=8, num_keys=2, noise_ratio=0.5, num_keys_mode="at_most")
    return [row for s in range(n) if (row := MAZE.generate_candidate(p, s, s).row) is not None]


MAZE_ROWS = maze_rows(24)
PUZZLE_ROWS = {name: puzzle_rows(name, limit=60) for name in PUZZLES}


def spec(**fields: object) -> ModelSpec:
    return ModelSpec.model_validate({"name": "sim", "provider": "offline", **fields})


def request(row: dict, sample: int, seed_root: int = 22) -> AttemptRequest:
    return AttemptRequest(
        instance_id=row["instance_id"],
        family=row["family"],
        sample=sample,
        messages=(),
        temperature=1.0,
        top_p=1.0,
        max_tokens=1000,
        seed=derive_seed(seed_root, "sim", row["instance_id"], sample),
        row=row,
    )


# --- the planted truth as pure functions ---------------------------------------------------


def test_constant_truth_is_the_noisy_baselines_exactly() -> None:
    truth = spec(kind="noisy", eps=0.05).truth()
    assert truth is not None
    for L in (0, 1, 7, 60):
        assert truth.success_probability(L) == (1 - 0.05) ** L
        assert truth.success_probability(L, "rollout") == (1 - 0.05) ** L
    assert [truth.hazard(i) for i in (1, 10, 100)] == [0.05, 0.05, 0.05]


def test_rising_shapes_follow_their_formulas_and_the_cap() -> None:
    lin = PlantedTruth(eps=0.02, shape="linear", rate=0.5, cap=0.3)
    assert lin.hazard(1) == 0.02
    assert lin.hazard(3) == pytest.approx(0.02 * (1 + 0.5 * 2))
    assert lin.hazard(1000) == 0.3  # capped
    exp = PlantedTruth(eps=0.02, shape="exponential", rate=0.1, cap=0.9)
    assert exp.hazard(5) == pytest.approx(0.02 * 1.1**4)
    assert exp.hazard(10**6) == 0.9  # no overflow, capped
    assert lin.success_probability(4) == pytest.approx(math.prod(1 - lin.hazard(i) for i in range(1, 5)))


def test_usable_share_scales_plans_once_and_rollouts_per_step() -> None:
    truth = spec(
        kind="rising", eps=0.01, rise="linear", rate=0.1, styles={"cut": 0.1, "refusal": 0.1}
    ).truth()
    assert truth is not None and truth.usable == pytest.approx(0.8)
    steps = truth.step_success(5)
    assert truth.success_probability(5) == pytest.approx(0.8 * steps)
    assert truth.success_probability(5, "rollout") == pytest.approx(0.8**5 * steps)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0, 0.5),
    st.sampled_from(["linear", "exponential"]),
    st.floats(0.001, 5),
    st.floats(0.5, 0.99),
    st.integers(1, 200),
)
def test_hazard_never_falls_and_success_never_rises(
    eps: float, shape: str, rate: float, cap: float, n: int
) -> None:
    truth = PlantedTruth(eps=eps, shape=shape, rate=rate, cap=cap)  # type: ignore[arg-type]
    h = truth.hazards(n + 1)
    assert np.all(np.diff(h) >= 0) and np.all(h <= cap) and h[0] == pytest.approx(eps)
    assert truth.success_probability(n + 1) <= truth.success_probability(n) <= 1.0


def test_truth_describes_itself_in_one_line() -> None:
    assert PlantedTruth(eps=0.05).describe() == "eps_i = 0.05"
    rising = PlantedTruth(eps=0.01, shape="linear", rate=0.05, cap=0.9, usable=0.95)
    assert rising.describe() == "eps_i = 0.01 * (1 + 0.05 (i - 1)), capped at 0.9; usable answers 0.95"
    assert PlantedTruth(eps=0.01, shape="exponential", rate=0.1, cap=0.5).describe() == (
        "eps_i = 0.01 * 1.1^(i - 1), capped at 0.5"
    )


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"eps": 1.0}, "eps:"),
        ({"eps": 0.1, "shape": "cubic"}, "shape:"),
        ({"eps": 0.1, "shape": "linear", "rate": -0.1, "cap": 0.5}, "rate:"),
        ({"eps": 0.6, "shape": "linear", "rate": 0.1, "cap": 0.5}, "cap:"),
        ({"eps": 0.1, "shape": "exponential", "rate": 0.1, "cap": 1.0}, "cap:"),
        ({"eps": 0.1, "usable": 1.5}, "usable:"),
    ],
)
def test_a_truth_that_is_not_one_is_refused_naming_the_field(fields: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        PlantedTruth(**fields)
    with pytest.raises(ValueError, match="from 1"):
        PlantedTruth(eps=0.1).hazard(0)


def test_other_models_plant_nothing() -> None:
    assert spec(kind="oracle").truth() is None
    assert spec(kind="random").truth() is None


# --- config fields: strict, one line naming the field -------------------------------------------


def _with_model(model: dict) -> dict:
    data = yaml.safe_load(_demo_text())
    data["evaluation"]["models"] = [model]
    return data


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        (
            {"kind": "rising", "rise": "linear", "rate": 0.1},
            "evaluation.models.0.eps: the rising model needs it",
        ),
        ({"kind": "rising", "eps": 0.01, "rate": 0.1}, "evaluation.models.0.rise: the rising model needs it"),
        (
            {"kind": "rising", "eps": 0.01, "rise": "linear"},
            "evaluation.models.0.rate: the rising model needs it",
        ),
        ({"kind": "rising", "eps": 0.01, "rise": "cubic", "rate": 0.1}, "evaluation.models.0.rise"),
        ({"kind": "rising", "eps": 0.01, "rise": "linear", "rate": -1}, "evaluation.models.0.rate"),
        ({"kind": "rising", "eps": 0.01, "rise": "linear", "rate": "0.1"}, "evaluation.models.0.rate"),
        (
            {"kind": "rising", "eps": 0.01, "rise": "linear", "rate": 0.1, "eps_cap": 1.0},
            "evaluation.models.0.eps_cap",
        ),
        (
            {"kind": "rising", "eps": 0.5, "rise": "linear", "rate": 0.1, "eps_cap": 0.2},
            "evaluation.models.0.eps_cap: 0.2 is below eps (0.5)",
        ),
        (
            {"kind": "noisy", "eps": 0.1, "rate": 0.1},
            "evaluation.models.0.rate: only the 'rising' kind uses it",
        ),
        ({"kind": "oracle", "rise": "linear"}, "evaluation.models.0.rise: only the 'rising' kind uses it"),
        ({"kind": "oracle", "styles": {"poetry": 0.1}}, "evaluation.models.0.styles.poetry"),
        ({"kind": "oracle", "styles": {"json": 1.5}}, "evaluation.models.0.styles.json"),
        (
            {"kind": "oracle", "styles": {"json": 0.6, "cut": 0.6}},
            "evaluation.models.0.styles: the shares sum to 1.2",
        ),
    ],
)
def test_bad_simulated_model_fields_are_one_line_naming_the_field(model: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_with_model({"name": "sim", "provider": "offline", **model}))
    message = str(err.value)
    assert needle in message and "\n" not in message


def test_styles_belong_to_offline_models_only() -> None:
    with pytest.raises(ConfigError, match="styles: only offline models"):
        parse_config(_with_model({"name": "m", "provider": "openai", "model": "x", "styles": {"json": 0.1}}))


def test_mix_fills_plain_with_the_rest() -> None:
    assert complete_mix({"json": 0.25, "cut": 0.25}) == {"json": 0.25, "cut": 0.25, "plain": 0.5}
    assert usable_share({"json": 0.25, "cut": 0.25}) == 0.75
    assert complete_mix(None) == {"plain": 1.0}


# --- the model: determinism, identity, byte-identical plain answers ----------------------------


def test_earlier_kinds_answer_and_key_as_before() -> None:
    # without styles a noisy baseline's identity (its attempt keys) and answers are today's
    noisy = OfflineModel(spec(kind="noisy", eps=0.1))
    assert noisy.identity() == {"provider": "offline", "kind": "noisy", "eps": 0.1}
    for row in MAZE_ROWS[:5]:
        req = request(row, 0)
        old = MAZE.offline_answer(row, "noisy", np.random.default_rng(req.seed), 0.1)
        assert noisy.complete(req).text == old


def test_rising_identity_names_its_shape_and_styles() -> None:
    ident = OfflineModel(
        spec(kind="rising", eps=0.01, rise="linear", rate=0.2, styles={"json": 0.2})
    ).identity()
    assert ident["rise"] == "linear" and ident["rate"] == 0.2 and ident["eps_cap"] == 0.9
    assert ident["styles"] == [("json", 0.2)]


def test_answers_are_a_pure_function_of_the_request_seed() -> None:
    model = OfflineModel(
        spec(kind="rising", eps=0.05, rise="linear", rate=0.2, styles=dict.fromkeys(STYLES, 0.125))
    )
    for row in MAZE_ROWS[:4] + PUZZLE_ROWS["hanoi"][:4]:
        a = [model.complete(request(row, s)) for s in range(6)]
        b = [model.complete(request(row, s)) for s in range(6)]
        assert [(c.text, c.finish_reason) for c in a] == [(c.text, c.finish_reason) for c in b]


def test_styles_do_not_change_the_intended_plan() -> None:
    # the style is drawn from a stream of its own: same request, same intended plan
    plain = OfflineModel(spec(kind="rising", eps=0.05, rise="linear", rate=0.3))
    styled = OfflineModel(
        spec(kind="rising", eps=0.05, rise="linear", rate=0.3, styles={"reasoning": 0.5, "recap": 0.5})
    )
    for row in MAZE_ROWS[:8]:
        for s in range(5):
            req = request(row, s)
            assert MAZE.parse_answer(styled.complete(req).text) == MAZE.parse_answer(plain.complete(req).text)


def test_every_style_is_drawn_from_a_mix() -> None:
    rng = np.random.default_rng(0)
    mix = dict.fromkeys(STYLES, 1 / len(STYLES))
    drawn = {pick_style(mix, rng) for _ in range(500)}
    assert drawn == set(STYLES)
    assert pick_style(None, rng) == "plain"


# --- empirical success against the planted curve --------------------------------------------------


def _check_binomial(outcomes: list[tuple[float, bool]], what: str) -> None:
    """Observed successes within 4 standard deviations of the planted expectation."""
    p = np.array([q for q, _ in outcomes])
    hits = sum(ok for _, ok in outcomes)
    expected, sd = p.sum(), math.sqrt(float((p * (1 - p)).sum()))
    assert abs(hits - expected) <= 4 * sd + 1e-9, (
        f"{what}: {hits} successes, planted {expected:.1f} +- {sd:.1f}"
    )


def _far_from(outcomes: list[tuple[float, bool]], other: list[float]) -> bool:
    hits = sum(ok for _, ok in outcomes)
    q = np.array(other)
    return abs(hits - q.sum()) > 4 * math.sqrt(float((q * (1 - q)).sum()))


def _maze_outcomes(model: OfflineModel, samples: int) -> list[tuple[int, bool]]:
    out = []
    for row in MAZE_ROWS:
        for s in range(samples):
            text = model.complete(request(row, s)).text
            out.append((int(row["solution_length"]), MAZE.score(row, MAZE.parse_answer(text)).success))
    return out


def test_maze_rising_success_matches_the_planted_curve() -> None:
    sim = spec(kind="rising", eps=0.01, rise="linear", rate=0.25, eps_cap=0.5)
    truth = sim.truth()
    assert truth is not None
    raw = _maze_outcomes(OfflineModel(sim), 60)
    outcomes = [(truth.success_probability(L), ok) for L, ok in raw]
    _check_binomial(outcomes, "maze, all")
    lengths = sorted({L for L, _ in raw})
    mid = lengths[len(lengths) // 2]
    _check_binomial([o for o, (L, _) in zip(outcomes, raw, strict=True) if L < mid], "maze, short plans")
    _check_binomial([o for o, (L, _) in zip(outcomes, raw, strict=True) if L >= mid], "maze, long plans")
    # and it is not the constant-rate curve of its first step's error
    assert _far_from(outcomes, [(1 - 0.01) ** L for L, _ in raw])


def test_maze_styled_success_is_scaled_by_the_usable_share() -> None:
    sim = spec(
        kind="rising",
        eps=0.01,
        rise="exponential",
        rate=0.05,
        styles={"reasoning": 0.2, "draft": 0.1, "json": 0.1, "recap": 0.2, "cut": 0.15, "refusal": 0.1},
    )
    truth = sim.truth()
    assert truth is not None and truth.usable == pytest.approx(0.75)
    raw = _maze_outcomes(OfflineModel(sim), 40)
    outcomes = [(truth.success_probability(L), ok) for L, ok in raw]
    _check_binomial(outcomes, "styled maze")
    assert _far_from(outcomes, [truth.step_success(L) for L, _ in raw])  # the cut and refused count


@pytest.mark.parametrize("name", PUZZLES)
def test_puzzle_plans_match_the_planted_curve(name: str) -> None:
    fam = get_family(name)
    sim = spec(kind="rising", eps=0.04, rise="exponential", rate=0.4, styles={"recap": 0.3, "cut": 0.1})
    truth, model = sim.truth(), OfflineModel(spec(**sim.model_dump(exclude={"name", "provider"})))
    assert truth is not None
    outcomes, constant = [], []
    for row in PUZZLE_ROWS[name]:
        L = int(row["solution_length"])
        for s in range(40):
            text = model.complete(request(row, s)).text
            outcomes.append((truth.success_probability(L), fam.score(row, fam.parse_answer(text)).success))
            constant.append(0.9 * (1 - 0.04) ** L)
    _check_binomial(outcomes, name)
    assert _far_from(outcomes, constant)


def _rollout(model: OfflineModel, row: dict, sample: int) -> bool:
    fam = get_family(row["family"])
    conv = RolloutConversation(fam, row, fam.prompt_model(), GenerationSettings(), 22, "sim", sample)
    req = conv.first()
    while req is not None:
        req = conv.next(model.complete(req))
    return bool(conv.episode.solved)


@pytest.mark.parametrize("name", ["hanoi", "blocks_world", "river_crossing"])
def test_puzzle_rollouts_match_the_planted_curve(name: str) -> None:
    # each step is one answer: its hazard is the step's, and every step may be cut or refused
    sim = spec(
        kind="rising",
        eps=0.03,
        rise="linear",
        rate=1.0,
        styles={"reasoning": 0.3, "fenced": 0.2, "cut": 0.02},
    )
    truth, model = sim.truth(), OfflineModel(sim)
    assert truth is not None
    outcomes, constant = [], []
    for row in PUZZLE_ROWS[name]:
        L = int(row["solution_length"])
        for s in range(50):
            outcomes.append((truth.success_probability(L, "rollout"), _rollout(model, row, s)))
            constant.append((0.98 * (1 - 0.03)) ** L)
    _check_binomial(outcomes, f"{name} rollouts")
    assert _far_from(outcomes, constant)


# --- every usable style reads back as the intended plan (hypothesis) -----------------------------

ROOMS = st.builds("{}{}".format, st.sampled_from(string.ascii_uppercase[:12]), st.integers(1, 40))
maze_steps = st.one_of(
    st.builds(Step, st.sampled_from(["start", "move_to", "unlock_and_open_door_to"]), ROOMS),
    st.builds(Step, st.sampled_from(["pick_up_key", "use_key"]), st.integers(0, 20).map(str)),
    st.just(Step("rescue", "Alice")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(maze_steps, min_size=1, max_size=40), st.sampled_from(USABLE_STYLES), st.integers(0, 2**32))
def test_maze_styles_read_back_as_the_intended_plan(plan: list[Step], style: str, seed: int) -> None:
    text, finish = write_answer(style, answer_pieces(plan), np.random.default_rng(seed))
    assert finish == "stop"
    assert parse_plan(text, task_actions=ACTIONS).plan == tuple(plan)
    assert MAZE.parse_answer(text).plan == tuple(plan)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(maze_steps, min_size=1, max_size=40), st.sampled_from(sorted(UNUSABLE)), st.integers(0, 2**32)
)
def test_maze_cut_and_refused_answers_hold_no_plan(plan: list[Step], style: str, seed: int) -> None:
    text, finish = write_answer(style, answer_pieces(plan), np.random.default_rng(seed))
    assert finish == ("length" if style == "cut" else "stop")
    assert parse_plan(text, task_actions=ACTIONS).plan is None


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(PUZZLES),
    st.integers(0, 10**6),
    st.sampled_from(["oracle", "noisy", "random"]),
    st.sampled_from(STYLES),
    st.integers(0, 2**32),
)
def test_puzzle_styles_read_back_as_the_intended_plan(
    name: str, pick: int, kind: str, style: str, seed: int
) -> None:
    fam = get_family(name)
    row = PUZZLE_ROWS[name][pick % len(PUZZLE_ROWS[name])]
    pieces = fam.offline_pieces(row, kind, np.random.default_rng(seed), 0.3)
    intended = fam.parse_answer(f"{pieces.marker} {pieces.plan}")
    assert intended.plan is not None
    assert fam.offline_answer(row, kind, np.random.default_rng(seed), 0.3) == f"{pieces.marker} {pieces.plan}"
    text, _ = write_answer(style, pieces, np.random.default_rng(seed + 1))
    parsed = fam.parse_answer(text)
    if style in UNUSABLE:
        assert parsed.plan is None or not fam.score(row, parsed).success
    else:
        assert parsed == intended


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(PUZZLES),
    st.integers(0, 10**6),
    st.integers(0, 10),
    st.sampled_from(USABLE_STYLES),
    st.integers(0, 2**32),
)
def test_rollout_step_styles_read_back_as_the_intended_state(
    name: str, pick: int, at: int, style: str, seed: int
) -> None:
    fam = get_family(name)
    row = PUZZLE_ROWS[name][pick % len(PUZZLE_ROWS[name])]
    states = list(row["states"])
    state = states[at % max(len(states) - 1, 1)] if len(states) > 1 else states[0]
    pieces = fam.offline_step_pieces(row, state, "noisy", np.random.default_rng(seed), 0.3)
    if pieces is None:
        return  # STOP at the goal: nothing to style
    text, _ = write_answer(style, pieces, np.random.default_rng(seed + 1))
    answer = read_state_answer(fam.puzzle, text)
    assert answer.state == fam.puzzle.parse_state(pieces.plan), text


def test_recap_after_the_answer_line_is_not_the_answer() -> None:
    # issue 22: a recap after `Solution:` (as lines or a short list) was scored as the plan
    row = MAZE_ROWS[0]
    gold = tuple(Step(str(s["action"]), str(s["arg"])) for s in row["solution"])
    pieces = answer_pieces(gold)
    assert isinstance(pieces, PlanPieces) and pieces.recap_list and pieces.recap_lines
    for recap in (pieces.recap_list, pieces.recap_lines):
        text = f"Some thoughts.\n\nSolution: {pieces.plan}\n\n{recap}"
        score = MAZE.score(row, MAZE.parse_answer(text))
        assert score.success and score.exact_match, (recap, score.violation)
