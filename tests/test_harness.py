"""The three-call harness (harness/agent.py) end to end: real HTTP, the official SDKs, the
evaluation engine, against a fake server that plays an offline agent through the
harness prompts (tests/world_agent_server.py).

Since the server answers exactly what the offline agent did, every harness episode must
score exactly like the offline one; on top of that the tests inject malformed answers,
answers that never become usable, answers cut at ``max_tokens``, 429s, slow answers
and a provider that stops answering mid-episode, and check what the harness promises
for each (repairs, fallbacks, ``budget_exceeded`` with the numbers, resume without
paying twice)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import runner_for
from fake_model_server import FakeModelServer, running_fake_server
from horizonbench.datasets.worlds.agents import Agent, AgentStep, BoundedMemoryAgent, OracleAgent
from horizonbench.datasets.worlds.base import format_fact
from horizonbench.datasets.worlds.episode import (
    EPISODE_INFO_DEFAULTS,
    STEP_INFO_DEFAULTS,
    EpisodeResult,
    EpisodeSpec,
    episode_id,
    run_episode,
)
from horizonbench.datasets.worlds.study import Study, environment_class, resolve_horizon
from horizonbench.harness import prompts as P
from horizonbench.harness.agent import FALLBACK_ACTION, CallFailed, HarnessAgent, HarnessSettings
from horizonbench.harness.outputs import (
    PlannerOutput,
    SelfDiagOutput,
    SummaryOutput,
    UpdaterOutput,
    read_output,
)
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest, Model
from horizonbench.models.engine import ModelRunner, Outcome
from horizonbench.models.factory import build_model
from horizonbench.schemas.config import ModelSpec
from world_agent_server import BAD_ANSWERS, WorldAgentPlayer, role_of, sections, split_body

KEY_ENV = "HB_HARNESS_TEST_KEY"
ROOT_SEED = 11
ENVS = ("stateful_puzzle", "graph_nav", "tool_dag")
PROVIDERS = ("openai_compatible", "anthropic")
ROLES_OF_MODE = {
    "structured": ("updater", "planner", "selfdiag"),
    "summary": ("summary", "planner", "selfdiag"),
    "transcript": ("planner", "selfdiag"),
}
SCHEMA_OF = {
    "updater": UpdaterOutput,
    "summary": SummaryOutput,
    "planner": PlannerOutput,
    "selfdiag": SelfDiagOutput,
}
AGENTS: dict[str, Callable[[], Agent]] = {
    "oracle": lambda: OracleAgent("oracle"),
    # capacity 6: the same as the oracle at sc = 5, loses the sc = 12 worlds
    "bounded": lambda: BoundedMemoryAgent(6, "bounded-6"),
}


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-NOT-SECRET")


# --- worlds ---------------------------------------------------------------------------------


def episodes(
    envs: Sequence[str] = ENVS,
    sc: Sequence[int] = (5,),
    *,
    factor: float = 1.5,
    axes: dict[str, Any] | None = None,
) -> list[EpisodeSpec]:
    study = Study(tuple(envs), "III", tuple(sc), (1,), 1, 1, axes=axes or {}, horizon_factor=factor)
    return [resolve_horizon(ep, factor) for ep in study.episodes(ROOT_SEED)]


#: the worlds of the equivalence tests, in every environment: easy ones (clean, static,
#: sc = 5) for both agents, and for the bounded agent, which loses them, hard ones
#: (partial observations, mutations, sc = 12)
EASY = episodes(sc=(5,))
HARD = episodes(sc=(12,), axes={"observation": "partial", "mutation": "low"})
WORLDS = {"oracle": EASY, "bounded": EASY + HARD}


def task_text(ep: EpisodeSpec) -> str:
    return environment_class(ep.env)(ep.spec).reset(ep.seed, ep.archetype)[1].text


def offline(player: WorldAgentPlayer, ep: EpisodeSpec) -> EpisodeResult:
    return player.offline[task_text(ep)]


def trace(player: WorldAgentPlayer, ep: EpisodeSpec) -> list[AgentStep]:
    return player.traces[task_text(ep)]


# --- the model and the harness ------------------------------------------------------------------


def make_model(server: FakeModelServer, provider: str) -> Model:
    common: dict[str, Any] = {
        "name": "fake",
        "api_key_env": KEY_ENV,
        "timeout_s": 10,
        "input_cost_per_mtok": 1.0,
        "output_cost_per_mtok": 2.0,
    }
    if provider == "anthropic":
        spec = ModelSpec(provider="anthropic", model="claude-fake", base_url=server.root_url, **common)
    else:
        spec = ModelSpec(provider=provider, model="fake-model", base_url=server.base_url, **common)
    return build_model(spec)


def make_runner(
    server: FakeModelServer, store: AttemptStore, provider: str = "openai_compatible", **kw: Any
) -> ModelRunner:
    kw.setdefault("reuse", "run")
    kw.setdefault("run_tag", "run-1")
    return runner_for(make_model(server, provider), store, **kw)


def play(
    call: Callable[[AttemptRequest], Outcome],
    ep: EpisodeSpec,
    name: str,
    settings: HarnessSettings | None = None,
) -> tuple[EpisodeResult, HarnessAgent]:
    """One harness episode; ``name`` is the offline agent's, so the episode ids match."""
    agent = HarnessAgent(
        name,
        call,
        settings or HarnessSettings(),
        episode_id=episode_id(ep.env, name, ep.seed),
        root_seed=ROOT_SEED,
    )
    return run_episode(environment_class(ep.env)(ep.spec), agent, ep), agent


def recording(runner: ModelRunner, outcomes: list[Outcome]) -> Callable[[AttemptRequest], Outcome]:
    def call(request: AttemptRequest) -> Outcome:
        outcome = runner.attempt(request)
        outcomes.append(outcome)
        return outcome

    return call


# --- reading what the server received --------------------------------------------------------


def content_text(content: Any) -> str:
    if isinstance(content, list):  # Anthropic content blocks
        return "".join(block.get("text", "") for block in content)
    return str(content)


def received(server: FakeModelServer) -> list[tuple[str, int, str, list[dict[str, Any]]]]:
    """(role, 0-based step, system, non-system messages) of every chat request, in order."""
    out = []
    for request in server.requests:
        if not request.path.endswith(("/chat/completions", "/messages")):
            continue
        system, messages = split_body(request.body)
        step = int(sections(content_text(messages[0]["content"]))["Step"].split()[0]) - 1
        out.append((role_of(system), step, system, messages))
    return out


def calls_at(server: FakeModelServer, role: str, step: int) -> list[list[dict[str, Any]]]:
    return [m for r, s, _, m in received(server) if (r, s) == (role, step)]


def prompt_section(server: FakeModelServer, role: str, step: int, title: str) -> str:
    """A section of the first (not a repair) request of ``role`` at ``step``."""
    first = calls_at(server, role, step)[0]
    return sections(content_text(first[0]["content"]))[title]


# --- comparing episodes ---------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_scored_alike(got: EpisodeResult, want: EpisodeResult, *, steps: int | None = None) -> None:
    """Every scoring column of the episode and of each step is the same (the columns the
    harness adds are checked by the tests). ``steps``: compare only the first steps."""
    if steps is None:
        for key, value in want.episode.items():
            if key not in EPISODE_INFO_DEFAULTS:
                assert same(got.episode[key], value), (key, got.episode[key], value)
        assert len(got.steps) == len(want.steps)
    else:
        assert len(got.steps) >= steps
    for g, w in zip(got.steps, want.steps[:steps] if steps is not None else want.steps, strict=False):
        for key, value in w.items():
            if key not in STEP_INFO_DEFAULTS:
                assert same(g[key], value), (g["step"], key, g[key], value)


def assert_clean_harness_columns(result: EpisodeResult, memory: str) -> None:
    per_step = len(ROLES_OF_MODE[memory])
    e = result.episode
    assert e["memory"] == memory and e["prompt_version"] == P.PROMPT_VERSION
    assert e["calls"] == per_step * e["steps"]
    assert (e["repairs"], e["fallbacks"], e["budget_detail"]) == (0, 0, None)
    assert e["input_tokens"] > 0 and e["output_tokens"] > 0 and e["wall_s"] > 0
    for row in result.steps:
        assert (row["calls"], row["repairs"], row["fallbacks"]) == (per_step, 0, None)
        assert (row["confidence"], row["replan"]) == (0.9, False)
        assert row["output_tokens"] > 0
    assert sum(r["output_tokens"] for r in result.steps) == e["output_tokens"]


# --- 1. harness episodes score like the offline agents ----------------------------------------


@pytest.mark.parametrize(
    ("agent", "memory", "provider"),
    [
        ("oracle", "structured", "openai_compatible"),
        ("oracle", "summary", "openai_compatible"),
        ("oracle", "transcript", "anthropic"),
        ("bounded", "structured", "openai_compatible"),
        ("bounded", "summary", "anthropic"),
        ("bounded", "transcript", "openai_compatible"),
    ],
)
def test_harness_episodes_match_the_offline_agent(
    agent: str, memory: str, provider: str, tmp_path: Path
) -> None:
    worlds = WORLDS[agent]
    player = WorldAgentPlayer(worlds, AGENTS[agent])
    wanted = [offline(player, ep) for ep in worlds]
    if agent == "bounded":  # the comparison covers won and lost episodes
        assert {w.episode["success"] for w in wanted} == {True, False}
        assert any(w.episode["collapse_type"] is not None for w in wanted)
    name = wanted[0].episode["model"]
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        runner = make_runner(server, store, provider)
        for ep, want in zip(worlds, wanted, strict=True):
            got, _ = play(runner.attempt, ep, name, HarnessSettings(memory=memory))
            assert_scored_alike(got, want)
            assert_clean_harness_columns(got, memory)
        assert set(player.calls_by_role) == set(ROLES_OF_MODE[memory])
        assert server.repeated_prompts() == {}


# --- 2. malformed answers are repaired and counted ----------------------------------------------

MALFORMED = {
    ("updater", 0),
    ("summary", 0),
    ("planner", 1),
    ("selfdiag", 2),
    ("planner", 4),
    ("updater", 4),
    ("summary", 5),
    ("selfdiag", 5),
    ("planner", 999),  # never reached
}


@pytest.mark.parametrize(
    ("memory", "provider"),
    [("structured", "openai_compatible"), ("summary", "anthropic"), ("transcript", "openai_compatible")],
)
def test_malformed_answers_are_repaired_and_counted(memory: str, provider: str, tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"], malformed=MALFORMED)
    want = offline(player, ep)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, _ = play(
            make_runner(server, store, provider).attempt, ep, "oracle", HarnessSettings(memory=memory)
        )
        requests = received(server)
    assert_scored_alike(got, want)
    hit = {(r, s) for r, s in MALFORMED if r in ROLES_OF_MODE[memory] and s < got.episode["steps"]}
    assert len(hit) >= 3
    per_step = len(ROLES_OF_MODE[memory])
    assert got.episode["repairs"] == len(hit)
    assert got.episode["calls"] == per_step * got.episode["steps"] + len(hit)
    assert got.episode["fallbacks"] == 0
    for row in got.steps:
        repairs = sum(1 for _, s in hit if s == row["step"])
        assert (row["repairs"], row["calls"], row["fallbacks"]) == (repairs, per_step + repairs, None)
    # each repair request is the same exchange plus the bad answer and what was wrong with it
    repairs = [(r, s, system, m) for r, s, system, m in requests if len(m) > 1]
    assert {(r, s) for r, s, _, _ in repairs} == hit and len(repairs) == len(hit)
    for role, step, _, messages in repairs:
        bad = BAD_ANSWERS[(step + len(role)) % len(BAD_ANSWERS)]
        _, error = read_output(bad, SCHEMA_OF[role])
        assert error
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        original = next(m for r, s, _, m in requests if (r, s) == (role, step) and len(m) == 1)
        assert messages[0] == original[0]
        assert content_text(messages[1]["content"]) == bad
        assert P.REPAIR.format(error=error) == content_text(messages[2]["content"])


# --- 3. fallbacks ----------------------------------------------------------------------------------


def test_an_updater_that_never_answers_usably_keeps_the_last_valid_state(tmp_path: Path) -> None:
    (ep,) = episodes(["stateful_puzzle"])
    step = 3
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad={("updater", step)})
    want, states = offline(player, ep), [m.state for m in trace(player, ep)]
    assert states[step] != states[step - 1]  # the fallback is visible
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, agent = play(make_runner(server, store).attempt, ep, "oracle")
        assert len(calls_at(server, "updater", step)) == 1 + HarnessSettings().repairs
        kept = P.facts_block(states[step - 1])
        assert prompt_section(server, "planner", step, "Your world state") == kept
        assert prompt_section(server, "selfdiag", step, "Your world state") == kept
        assert prompt_section(server, "updater", step + 1, "Your world state before the last action") == kept
        assert prompt_section(server, "planner", step + 1, "Your world state") == P.facts_block(
            states[step + 1]
        )
    e, rows = got.episode, got.steps
    assert (e["fallbacks"], e["repairs"], e["outcome"]) == (1, 3, "success")
    assert [r["fallbacks"] for r in rows] == [None] * step + ["updater"] + [None] * (len(rows) - step - 1)
    assert (rows[step]["repairs"], rows[step]["calls"]) == (3, 6)
    assert rows[step]["state_size"] == rows[step - 1]["state_size"] == len(states[step - 1]) > 0
    assert all(r["state_size"] > 0 for r in rows)
    assert [(ev.step, ev.role) for ev in agent.events] == [(step, "updater")]
    assert agent.events[0].error == read_output(BAD_ANSWERS[(step + 7) % 3], UpdaterOutput)[1]
    # the actions never changed; every other step scores as offline
    assert [r["action"] for r in rows] == [r["action"] for r in want.steps]
    for r, w in zip(rows, want.steps, strict=True):
        if r["step"] != step:
            assert (r["jaccard"], r["state_size"]) == (w["jaccard"], w["state_size"])


def test_with_no_repairs_the_fallback_comes_after_one_call(tmp_path: Path) -> None:
    (ep,) = episodes(["graph_nav"], factor=1.0)  # horizon = L*: no step beyond the oracle's trace
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad={("updater", 2)}, malformed={("planner", 1)})
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, _ = play(make_runner(server, store).attempt, ep, "oracle", HarnessSettings(repairs=0))
        assert len(calls_at(server, "updater", 2)) == 1
        assert len(calls_at(server, "planner", 1)) == 1  # no repair either: the Planner fell back
    e = got.episode
    assert (e["repairs"], e["fallbacks"]) == (0, 2)
    assert got.steps[1]["fallbacks"] == "planner" and got.steps[1]["action"] == FALLBACK_ACTION
    assert got.steps[2]["fallbacks"] == "updater" and got.steps[2]["calls"] == 3
    assert got.steps[2]["state_size"] == got.steps[1]["state_size"] > 0


@pytest.mark.parametrize("memory", ["summary", "structured"])
def test_a_planner_that_never_answers_usably_does_noop_without_preconditions(
    memory: str, tmp_path: Path
) -> None:
    # horizon = L*: the harness episode cannot outlast the oracle's trace the server plays
    (ep,) = episodes(["stateful_puzzle"], factor=1.0)
    step = 2
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad={("planner", step)})
    want = offline(player, ep)
    assert want.episode["steps"] == ep.spec.horizon and want.episode["success"]
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, _ = play(make_runner(server, store).attempt, ep, "oracle", HarnessSettings(memory=memory))
        assert len(calls_at(server, "planner", step)) == 4
        assert prompt_section(server, "selfdiag", step, "Proposed action") == FALLBACK_ACTION
        assert prompt_section(server, "selfdiag", step, "Declared preconditions") == "(none)"
        assert prompt_section(server, "planner", step + 1, "Last action").startswith(FALLBACK_ACTION + " -> ")
    rows = got.steps
    assert_scored_alike(got, want, steps=step)
    noop = rows[step]
    assert (noop["action"], noop["action_read"], noop["fallbacks"]) == (FALLBACK_ACTION, None, "planner")
    # no usable action is an invalid action with its own label, never a valid noop
    assert (noop["action_valid"], noop["error"]) == (False, "planner_fallback")
    assert got.episode["tau_a"] == step and got.episode["first_error"] == "planner_fallback"
    assert noop["dependency_correct"] is None and noop["confidence"] is None
    assert noop["self_check_correct"] is not None  # Self-Diag still judged the noop
    if memory == "summary":  # the Planner's own state: the last valid one is kept
        assert noop["state_size"] == rows[step - 1]["state_size"] > 0
    else:  # the Updater's state, updated as usual
        assert noop["state_size"] == want.steps[step]["state_size"] > 0
    assert got.episode["fallbacks"] == 1 and not got.episode["success"]  # one step short
    assert all(r["dependency_correct"] is not None for r in rows if r["step"] != step)


@pytest.mark.parametrize("streak", [3, 1])
def test_a_model_that_never_answers_usably_ends_as_a_format_failure(streak: int, tmp_path: Path) -> None:
    """Issue 22: such a model read as ``world_state`` collapse with 0 invalid actions and
    ran the whole horizon at 12 calls a step. Now each fallen-back step is an invalid
    action, and ``fallback_streak`` of them in a row end the episode."""
    (ep,) = episodes(["stateful_puzzle"], sc=(5,))
    never = {(role, t) for role in ROLES_OF_MODE["structured"] for t in range(ep.spec.horizon)}
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad=never)
    settings = HarnessSettings(fallback_streak=streak)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, agent = play(make_runner(server, store).attempt, ep, "oracle", settings)
    e = got.episode
    assert ep.spec.horizon > 3 * streak
    assert (e["outcome"], e["success"], e["steps"]) == ("format_failure", False, streak)
    assert e["invalid_actions"] == streak and e["first_error"] == "planner_fallback"
    assert e["collapse_type"] == "format" and e["budget_detail"] is None
    assert e["calls"] == streak * 3 * (1 + settings.repairs)
    assert [r["error"] for r in got.steps] == ["planner_fallback"] * streak
    assert agent.fallback_run == streak


def test_a_usable_answer_resets_the_fallback_streak(tmp_path: Path) -> None:
    (ep,) = episodes(["graph_nav"], factor=1.0)
    assert ep.spec.horizon >= 5
    # the Planner falls back on steps 0, 1, 3, 4: never three in a row
    bad = {("planner", t) for t in (0, 1, 3, 4)}
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad=bad)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, _ = play(make_runner(server, store).attempt, ep, "oracle")
    e = got.episode
    assert e["outcome"] == "failure" and e["steps"] == ep.spec.horizon
    assert [r["step"] for r in got.steps if r["error"] == "planner_fallback"] == [0, 1, 3, 4]


def test_a_self_diag_that_never_answers_usably_gives_no_verdict(tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"])
    step = 4
    player = WorldAgentPlayer([ep], AGENTS["oracle"], always_bad={("selfdiag", step)})
    want = offline(player, ep)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, _ = play(make_runner(server, store).attempt, ep, "oracle", HarnessSettings(memory="transcript"))
        assert len(calls_at(server, "selfdiag", step)) == 4
    rows = got.steps
    assert rows[step]["self_check_correct"] is None and rows[step]["replan"] is None
    assert rows[step]["fallbacks"] == "selfdiag"
    assert all(r["self_check_correct"] is True for r in rows if r["step"] != step)
    for r, w in zip(rows, want.steps, strict=True):
        for key in ("action", "action_valid", "jaccard", "state_size", "dependency_correct"):
            assert r[key] == w[key]
    assert got.episode["success"] and got.episode["fallbacks"] == 1
    assert got.episode["self_check_accuracy"] == 1.0


# --- 4. budgets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_cut_at_max_tokens_ends_the_episode_as_budget_exceeded(
    provider: str, tmp_path: Path
) -> None:
    (ep,) = episodes(["graph_nav"], sc=(12,))
    step = 5
    player = WorldAgentPlayer([ep], AGENTS["bounded"], too_long={("updater", step)})
    want = offline(player, ep)
    settings = HarnessSettings(max_tokens=1234)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        got, agent = play(make_runner(server, store, provider).attempt, ep, "bounded-6", settings)
        last = received(server)[-1]
        assert (last[0], last[1]) == ("updater", step)  # nothing sent after the cut answer
        assert len(calls_at(server, "updater", step)) == 1  # a cut answer is not repaired
    e = got.episode
    assert (e["outcome"], e["success"], e["steps"]) == ("budget_exceeded", False, step)
    assert e["budget_detail"] == agent.budget_detail
    assert e["budget_detail"].startswith(f"updater at step {step}: ")
    assert "max_tokens 1,234" in e["budget_detail"]
    assert_scored_alike(got, want, steps=step)
    assert all(r["state_size"] > 0 for r in got.steps)
    assert e["calls"] == 3 * step + 1


def _first_updater_prompt(ep: EpisodeSpec, settings: HarnessSettings) -> tuple[int, int]:
    """(prompt tokens, output tokens needed) of the step-0 Updater call, as the harness counts."""
    observation, task = environment_class(ep.env)(ep.spec).reset(ep.seed, ep.archetype)
    messages = P.updater_messages(task, 0, ep.spec.horizon, None, None, observation)
    tokens = math.ceil(len("".join(m.content for m in messages)) / settings.chars_per_token)
    facts = json.dumps([format_fact(f) for f in observation.facts])
    return tokens, math.ceil(len(facts) / settings.chars_per_token)


def test_a_prompt_beyond_the_context_is_never_sent(tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    prompt, _ = _first_updater_prompt(ep, HarnessSettings())
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        runner = make_runner(server, store, reuse="never")
        tight = HarnessSettings(max_tokens=500, context_tokens=prompt + 499)
        got, _ = play(runner.attempt, ep, "oracle", tight)
        assert server.requests == []
        e = got.episode
        assert (e["outcome"], e["success"], e["steps"], e["calls"]) == ("budget_exceeded", False, 0, 0)
        assert e["budget_detail"] == (
            f"updater at step 0: the prompt needs about {prompt:,} tokens, which with max_tokens 500 "
            f"exceeds the model's context of {prompt + 499:,}"
        )
        # one token more and the call goes out
        play(runner.attempt, ep, "oracle", HarnessSettings(max_tokens=500, context_tokens=prompt + 500))
        assert received(server)[0][:2] == ("updater", 0)


def test_a_growing_transcript_stops_at_the_context_and_is_never_shortened(tmp_path: Path) -> None:
    (ep,) = episodes(["stateful_puzzle"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    settings = HarnessSettings(memory="transcript", max_tokens=300)

    def sizes(server: FakeModelServer) -> list[int]:
        return [
            math.ceil(len("".join(content_text(m["content"]) for m in r.body["messages"])) / 4)
            for r in server.requests
        ]

    with running_fake_server(player) as server, AttemptStore(tmp_path / "a.sqlite") as store:
        full, _ = play(make_runner(server, store).attempt, ep, "oracle", settings)
        free_sizes, free_bodies = sizes(server), [r.body for r in server.requests]
    assert full.episode["outcome"] == "success"
    # the first request at a step of the second half that is larger than every one before it
    cut = next(i for i in range(len(free_sizes) // 2, len(free_sizes)) if free_sizes[i] > max(free_sizes[:i]))
    context = max(free_sizes[:cut]) + settings.max_tokens
    tight = HarnessSettings(memory="transcript", max_tokens=300, context_tokens=context)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "b.sqlite") as store:
        got, _ = play(make_runner(server, store).attempt, ep, "oracle", tight)
        assert [r.body for r in server.requests] == free_bodies[:cut]  # whole prompts, then none
    e = got.episode
    assert e["outcome"] == "budget_exceeded" and e["calls"] == cut
    assert f"the prompt needs about {free_sizes[cut]:,} tokens" in e["budget_detail"]
    assert f"exceeds the model's context of {context:,}" in e["budget_detail"]
    assert_scored_alike(got, full, steps=e["steps"])


def test_the_episode_output_token_budget(tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        free: list[Outcome] = []
        play(recording(make_runner(server, store, reuse="never"), free), ep, "oracle")
        spent = [o.completion.output_tokens for o in free]
        n = 7  # a budget spent exactly by n calls stops there; one token more allows one more call
        for budget, calls in ((sum(spent[:n]), n), (sum(spent[:n]) + 1, n + 1)):
            outcomes: list[Outcome] = []
            before = server.answered
            settings = HarnessSettings(episode_output_tokens=budget)
            got, _ = play(
                recording(make_runner(server, store, reuse="never"), outcomes), ep, "oracle", settings
            )
            assert server.answered - before == len(outcomes) == got.episode["calls"] == calls
            e, used = got.episode, sum(spent[:calls])
            assert (e["outcome"], e["success"], e["output_tokens"]) == ("budget_exceeded", False, used)
            assert e["steps"] == calls // 3
            assert e["budget_detail"].endswith(
                f"the episode has used {used:,} output tokens, its budget is {budget:,}"
            )


def test_an_observation_larger_than_max_tokens_stops_before_the_updater_call(tmp_path: Path) -> None:
    (ep,) = episodes(["stateful_puzzle"], sc=(12,))
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    _, need = _first_updater_prompt(ep, HarnessSettings())
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        runner = make_runner(server, store, reuse="never")
        got, _ = play(runner.attempt, ep, "oracle", HarnessSettings(max_tokens=need - 1))
        assert server.requests == []
        assert got.episode["outcome"] == "budget_exceeded" and got.episode["steps"] == 0
        assert got.episode["budget_detail"] == (
            f"updater at step 0: the observed state needs about {need:,} output tokens, "
            f"above max_tokens {need - 1:,}"
        )
        # exactly enough: the call goes out with that max_tokens
        play(runner.attempt, ep, "oracle", HarnessSettings(max_tokens=need))
        first = server.requests[0].body
        assert received(server)[0][:2] == ("updater", 0) and first["max_tokens"] == need


def test_the_episode_wall_budget(tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    budget = 0.15
    outcomes: list[Outcome] = []
    with running_fake_server(player, latency_s=0.02) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        got, agent = play(
            recording(make_runner(server, store), outcomes),
            ep,
            "oracle",
            HarnessSettings(episode_wall_s=budget),
        )
        assert server.answered == len(outcomes)
    took = [o.completion.latency_s for o in outcomes]
    assert all(t >= 0.02 for t in took)
    assert sum(took) >= budget > sum(took[:-1])
    assert 2 <= len(took) <= budget / 0.02 + 1
    e = got.episode
    assert e["outcome"] == "budget_exceeded" and e["wall_s"] == round(sum(took), 6)
    m = re.search(r"the episode's calls took ([\d.]+) s, its budget is ([\d.]+) s$", e["budget_detail"])
    assert m is not None, e["budget_detail"]
    assert float(m.group(1)) == pytest.approx(sum(took), abs=1e-3) and float(m.group(2)) == budget


# --- 5. 429s on the way ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429s_between_the_calls_change_nothing(provider: str, tmp_path: Path) -> None:
    eps = episodes(["graph_nav", "tool_dag"])
    player = WorldAgentPlayer(eps, AGENTS["oracle"], malformed={("planner", 2)})
    injected = 0
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        runner = make_runner(server, store, provider)

        def call(request: AttemptRequest) -> Outcome:
            nonlocal injected
            if request.turn % 3 == 1:  # two 429s before every third call
                server.fail_next(2, 429)
                injected += 2
            return runner.attempt(request)

        for ep in eps:
            got, _ = play(call, ep, "oracle")
            assert_scored_alike(got, offline(player, ep))
            assert got.episode["repairs"] == 1
        assert server.status_counts.get(429) == injected > 10
        assert runner.throttled == injected
        assert set(server.answers_per_prompt().values()) == {1}


def test_a_requests_per_minute_limit_is_waited_out(tmp_path: Path) -> None:
    (ep,) = episodes(["graph_nav"], sc=(3,))
    player = WorldAgentPlayer([ep], AGENTS["bounded"])
    with (
        running_fake_server(player, rpm=1500, window_s=0.2) as server,  # 5 requests per 0.2 s
        AttemptStore(tmp_path / "store.sqlite") as store,
    ):
        got, _ = play(
            make_runner(server, store).attempt, ep, "bounded-6", HarnessSettings(memory="transcript")
        )
        assert server.status_counts.get(429, 0) > 0
        assert set(server.answers_per_prompt().values()) == {1}
    assert_scored_alike(got, offline(player, ep))


# --- 6. replay and resume -------------------------------------------------------------------------


def test_a_rerun_replays_stored_answers_without_a_call(tmp_path: Path) -> None:
    (ep,) = episodes(["stateful_puzzle"])
    player = WorldAgentPlayer(
        [ep], AGENTS["bounded"], malformed={("updater", 1)}, always_bad={("selfdiag", 3)}
    )
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        first, _ = play(make_runner(server, store).attempt, ep, "bounded-6")
        sent = len(server.requests)
        assert sent == first.episode["calls"]
        again, _ = play(make_runner(server, store).attempt, ep, "bounded-6")
        assert len(server.requests) == sent  # zero new calls
        assert _same_rows([again.episode], [first.episode])
        assert _same_rows(again.steps, first.steps)
        # another run's answers are not this run's: a new tag pays again
        play(make_runner(server, store, run_tag="run-2").attempt, ep, "bounded-6")
        assert len(server.requests) == 2 * sent


def _same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]], skip: tuple[str, ...] = ()) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(same(x[k], y[k]) for k in x if k not in skip)
        for x, y in zip(a, b, strict=True)
    )


def test_an_interrupted_episode_resumes_without_paying_twice(tmp_path: Path) -> None:
    (ep,) = episodes(["tool_dag"], sc=(12,))
    inject = {"malformed": {("planner", 3), ("updater", 6)}, "always_bad": {("selfdiag", 5)}}
    player = WorldAgentPlayer([ep], AGENTS["bounded"], **inject)
    with running_fake_server(player) as server, AttemptStore(tmp_path / "ref.sqlite") as store:
        reference, _ = play(make_runner(server, store).attempt, ep, "bounded-6")
        sent = [r.body for r in server.requests]
    with running_fake_server(player) as server, AttemptStore(tmp_path / "store.sqlite") as store:
        server.fail_after = 20  # every request after the 20th answer gets a 400
        with pytest.raises(CallFailed) as failed:
            play(make_runner(server, store).attempt, ep, "bounded-6")
        assert failed.value.outcome.error_class == "bad_request"
        assert server.answered == 20 and server.status_counts.get(400) == 1
        server.fail_after = None
        resumed, _ = play(make_runner(server, store).attempt, ep, "bounded-6")
        assert set(server.answers_per_prompt().values()) == {1}
        assert server.answered == resumed.episode["calls"] == reference.episode["calls"]
        # byte for byte the uninterrupted run's requests (seeds included), the failed one sent twice
        assert [r.body for r in server.requests] == sent[:21] + sent[20:]
    assert resumed.episode["repairs"] == 2 + 3 and resumed.episode["fallbacks"] == 1
    # the same decisions; only the measured latencies differ between the two servers
    assert _same_rows([resumed.episode], [reference.episode], skip=("wall_s",))
    assert _same_rows(resumed.steps, reference.steps)


# --- 7. untrusted answers through the whole path -------------------------------------------------


class Scripted:
    """The player, with the first answer of some (role, step) calls replaced."""

    def __init__(self, player: WorldAgentPlayer, first: dict[tuple[str, int], str]) -> None:
        self.player, self.first = player, first

    def __call__(self, body: dict[str, Any]) -> Any:
        system, messages = split_body(body)
        step = int(sections(content_text(messages[0]["content"]))["Step"].split()[0]) - 1
        key = (role_of(system), step)
        if len(messages) == 1 and key in self.first:
            return self.first[key]
        return self.player(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_hostile_answers_are_repaired_and_never_run(provider: str, tmp_path: Path) -> None:
    (ep,) = episodes(["stateful_puzzle"])
    player = WorldAgentPlayer([ep], AGENTS["oracle"])
    canary = tmp_path / "pwned"
    code = f"__import__('os').system('touch {canary}')"
    first = {
        ("planner", 1): "<script>alert(1)</script> "
        + json.dumps({"action": code, "preconditions": [], "confidence": 0.5}),
        ("updater", 2): "{" * 5_000 + "}" * 5_000,
        ("selfdiag", 2): "x" * 100_000 + json.dumps({"valid": "yes"}),
        ("updater", 3): "",
        ("planner", 4): '```python\nimport os; os.system("touch ' + str(canary) + '")\n```',
        ("updater", 5): json.dumps({"world_state": [code]}),
    }
    with running_fake_server(Scripted(player, first)) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        got, agent = play(make_runner(server, store, provider).attempt, ep, "oracle")
        repairs = {(r, s): m for r, s, _, m in received(server) if len(m) > 1}
    assert not canary.exists()
    assert_scored_alike(got, offline(player, ep))
    assert got.episode["repairs"] == len(first) and got.episode["fallbacks"] == 0
    assert set(repairs) == set(first)
    quoted = {key: content_text(m[1]["content"]) for key, m in repairs.items()}
    assert quoted[("updater", 3)] == P.EMPTY_ANSWER  # an empty message would be a 400 at Anthropic
    assert quoted[("planner", 1)] == first[("planner", 1)]
    assert len(quoted[("selfdiag", 2)]) < P.REPAIR_QUOTE_CHARS + 100
    said = {key: content_text(m[2]["content"]) for key, m in repairs.items()}
    assert "action: not one action" in said[("planner", 1)]
    assert "no JSON object found" in said[("updater", 2)]
    assert "valid: Input should be a valid boolean" in said[("selfdiag", 2)]
    assert "the answer is empty" in said[("updater", 3)]
    assert "world_state:" in said[("updater", 5)]
    assert all(m["content"] for msgs in repairs.values() for m in msgs)


@pytest.mark.parametrize("memory", ["summary", "transcript"])
def test_a_planner_answer_without_its_world_state_is_repaired_not_kept_silently(tmp_path, memory):
    """Where the Planner keeps the world state (summary, transcript), an answer that leaves
    it out is unusable: it is sent back for repair, never read as 'no change'."""
    ep = EASY[0]
    player = WorldAgentPlayer([ep], AGENTS["oracle"])

    def responder(body: dict[str, Any]) -> Any:
        reply = player(body)
        system, messages = split_body(body)
        step = int(sections(content_text(messages[0]["content"]))["Step"].split()[0]) - 1
        if role_of(system) == "planner" and step == 1 and len(messages) == 1:
            answer = json.loads(reply)
            del answer["world_state"]
            return json.dumps(answer)
        return reply

    with running_fake_server(responder) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        result, agent = play(make_runner(server, store).attempt, ep, "oracle", HarnessSettings(memory=memory))
        repairs = calls_at(server, "planner", 1)
    assert_scored_alike(result, offline(player, ep))
    assert result.episode["repairs"] == 1 and result.episode["fallbacks"] == 0
    assert result.steps[1]["repairs"] == 1
    assert len(repairs) == 2 and "world_state" in content_text(repairs[1][-1]["content"])
