"""Model agents in a world study, as users run them: the installed command against the
fake model server (real HTTP, the real OpenAI SDK), real Prefect, a real Dask cluster,
the Great Expectations suites and the report.

The model agent's "model" answers every harness prompt as the oracle would
(tests/world_agent_server.py), so its episodes must reproduce the oracle's exactly;
everything a real model could change (answers, failures, crashes) is then checked
against that known outcome. One uninterrupted run (the module fixture ``study``) is the
reference for the crash, failure and estimate tests.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import world_models_helpers as H
from fake_model_server import running_fake_server
from horizonbench.cli.main import main
from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Completion
from horizonbench.datasets.worlds.study import environment_class
from horizonbench.harness.estimate import estimate_episode
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Outcome
from horizonbench.schemas.config import WorldAgentSpec, parse_config
from horizonbench.tasks.evaluate.world_models import (
    WORLD_ATTEMPTS_REL,
    harness_settings,
    model_agents,
    play_episode,
    study_episodes,
    world_estimate_rows,
)
from world_agent_server import _text, sections, split_body

pytestmark = pytest.mark.flow

#: the model's limits in the reference run: 40 requests in any second, 4 in flight
RPM, WINDOW_S, CONCURRENCY = 2400, 1.0, 4
SHARE = int(RPM * WINDOW_S / 60)


# --- 1. config validation ----------------------------------------------------------------------


def _agent(i: int, **kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["worlds"]["agents"][i].update(kw)


def _offline_model(d: dict[str, Any]) -> None:
    d["evaluation"]["models"][0] = {"name": H.MODEL, "provider": "offline", "kind": "oracle"}


def _batch_model(d: dict[str, Any]) -> None:
    m = d["evaluation"]["models"][0]
    m.update(provider="openai", batch=True)
    m.pop("base_url")


BAD_AGENTS = {
    "missing-model-entry": (_agent(1, model="nope"), "worlds.agents.1.model", "no evaluation.models entry"),
    "no-model-named": (
        lambda d: d["worlds"]["agents"][1].pop("model"),
        "worlds.agents.1.model",
        "names an evaluation.models entry",
    ),
    "offline-model": (_offline_model, "worlds.agents.1.model", "offline baseline"),
    "batch-model": (_batch_model, "worlds.agents.1.model", "batch API"),
    "capacity-on-model-agent": (_agent(1, capacity=4), "worlds.agents.1.capacity", "takes no 'capacity'"),
    "model-on-offline-agent": (_agent(0, model=H.MODEL), "worlds.agents.0.model", "is offline"),
    "memory-on-offline-agent": (_agent(0, memory="summary"), "worlds.agents.0.memory", "is offline"),
    "unknown-memory": (_agent(1, memory="diary"), "worlds.agents.1.memory", "'structured', 'summary'"),
}


@pytest.mark.parametrize("label", list(BAD_AGENTS))
def test_a_bad_model_agent_is_one_error_naming_its_field_and_exit_2(label, tmp_path, capsys):
    mutate, path, words = BAD_AGENTS[label]
    data = copy.deepcopy(H.config_data("http://127.0.0.1:9/v1"))
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert message.startswith(f"config: {path}: ") and words in message, message
    assert "\n" not in message

    out = tmp_path / "out"
    code = main(["run", "--config", str(H.write_config(tmp_path / "c.yaml", data)), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{path}: " in err and words in err, err
    assert not out.exists()


def test_the_installed_command_rejects_a_model_agent_without_a_model_entry(tmp_path):
    data = H.config_data("http://127.0.0.1:9/v1")
    data["worlds"]["agents"][1]["model"] = "gpt-nowhere"
    cfg = H.write_config(tmp_path / "c.yaml", data)
    proc = subprocess.run(
        [str(H.EXE), "run", "--config", str(cfg), "--out", str(tmp_path / "out"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "worlds.agents.1.model: no evaluation.models entry named 'gpt-nowhere'" in lines[0]
    assert not (tmp_path / "out").exists()


# --- 2. the reference run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def study(prefect_server, tmp_path_factory):
    """One uninterrupted run of the study: the oracle on Dask, the model agent through
    the harness at most 4 calls in flight and 2400 rpm (the server enforces the same)."""
    tmp = tmp_path_factory.mktemp("world-models")
    with running_fake_server(H.oracle_player(), latency_s=0.05, rpm=RPM, window_s=WINDOW_S) as server:
        data = H.config_data(
            server.base_url,
            model={"requests_per_minute": RPM, "rate_window_s": WINDOW_S, "max_concurrency": CONCURRENCY},
        )
        cfg = H.write_config(tmp / "c.yaml", data)
        out = tmp / "run"
        proc = H.run_cmd(cfg, out, H.command_env(prefect_server))
        seen = SimpleNamespace(
            requests=list(server.requests),
            answered=server.answered,
            answer_times=[t for t, _ in server.answer_times],
            in_flight_max=server.in_flight_max,
            status_counts=server.status_counts,
            repeated=server.repeated_prompts(),
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return SimpleNamespace(
        cfg=parse_config(data),
        out=out,
        proc=proc,
        server=seen,
        episodes=H.episodes(out),
        steps=H.steps(out),
        attempts=pq.read_table(out / WORLD_ATTEMPTS_REL).to_pandas(),
        manifest=json.loads((out / "manifest.json").read_text()),
    )


def test_a_model_agent_playing_the_oracle_reproduces_the_oracles_episodes(study):
    eps = study.episodes
    assert set(eps["model"]) == {"oracle", H.AGENT}
    oracle = eps[eps["model"] == "oracle"].set_index(H.WORLD_KEY).sort_index()
    player = eps[eps["model"] == H.AGENT].set_index(H.WORLD_KEY).sort_index()
    assert len(oracle) == len(player) == 8  # 2 environments x 2 sc x 2 archetypes
    assert oracle.index.equals(player.index)
    pd.testing.assert_frame_equal(player[H.SAME_AS_ORACLE], oracle[H.SAME_AS_ORACLE])
    assert player["success"].all() and (player["steps"] == player["optimal_length"]).all()
    # the harness columns: filled for the model, null (defaults) for the offline agent
    assert (player["memory"] == "structured").all() and player["prompt_version"].notna().all()
    assert oracle["memory"].isna().all() and oracle["prompt_version"].isna().all()
    assert (oracle["calls"] == 0).all() and (player["calls"] == 3 * player["steps"]).all()
    assert (player[["repairs", "fallbacks"]] == 0).all().all()
    assert (player["outcome"] == "success").all() and player["budget_detail"].isna().all()
    # step by step too: the same actions, validity and fidelity
    st = study.steps
    cols = ["action", "action_valid", "jaccard", "consistent", "dependency_correct", "self_check_correct"]

    def by_step(name: str) -> pd.DataFrame:
        rows = st[st["model"] == name]
        return rows.set_index(["env", "seed", "step"]).sort_index()[cols]

    pd.testing.assert_frame_equal(by_step(H.AGENT), by_step("oracle"))


def test_every_call_is_one_attempt_row_counted_in_the_manifest_and_the_report(study):
    att, eps = study.attempts, study.episodes
    player = eps[eps["model"] == H.AGENT]
    calls = int(player["calls"].sum())
    # one row per call, every call answered exactly once by the server
    assert len(att) == calls == study.server.answered
    assert study.server.repeated == {}
    assert att["response"].notna().all() and att["error_class"].isna().all()
    assert (att["family"] == "worlds").all() and (att["model"] == H.MODEL).all() and not att["reused"].any()
    per_episode = att.groupby("instance_id").size().sort_index()
    assert per_episode.to_dict() == player.set_index("episode_id")["calls"].sort_index().to_dict()
    for _, rows in att.groupby("instance_id"):
        assert sorted(rows["turn"]) == list(range(len(rows)))
    assert int(player["input_tokens"].sum()) == int(att["input_tokens"].sum())

    counts = study.manifest["counts"]["worlds"]
    assert counts["agents"] == ["oracle", H.AGENT] and counts["episodes"] == 16
    c = counts["models"][H.AGENT]
    assert (c["episodes"], c["finished"], c["unfinished"], c["successes"]) == (8, 8, 0, 8)
    assert (c["calls"], c["reused"], c["repairs"], c["fallbacks"]) == (calls, 0, 0, 0)
    assert c["input_tokens"] == int(att["input_tokens"].sum())
    assert c["output_tokens"] == int(att["output_tokens"].sum())
    expected_cost = (c["input_tokens"] * H.PRICE_IN + c["output_tokens"] * H.PRICE_OUT) / 1e6
    assert c["cost_usd"] == pytest.approx(expected_cost, abs=1e-5)
    assert c["cost_usd"] == pytest.approx(float(att["cost_usd"].sum()), abs=1e-5)

    html = (study.out / "report" / "index.html").read_text()
    said = rf"{H.AGENT}: harness calls</dt>\s*<dd>{calls} \(0 reused\), 0 repairs, 0 fallbacks"
    assert re.search(said, html)
    assert f"{H.AGENT}: world episodes" in html and "8 of 8 finished, 8 won" in html
    for suite in ("episodes", "steps"):
        assert "PASSED" in (study.out / "validation" / f"{suite}.md").read_text()
    assert "Traceback" not in study.proc.stderr


# --- 5. concurrency under limits --------------------------------------------------------------


def test_episodes_of_one_model_run_side_by_side_within_its_rate_and_concurrency(study):
    s = study.server
    # an episode's calls are sequential, so more than one in flight means several
    # episodes at once; never more than the model's max_concurrency
    assert 1 < s.in_flight_max <= CONCURRENCY
    # the client kept to 2400 rpm counted per second: the server (same limit) had next
    # to nothing to refuse, and no second held more than its share
    refused = s.status_counts.get(429, 0)
    assert refused <= max(2, 0.05 * s.answered), s.status_counts
    assert H.most_in_window(s.answer_times, WINDOW_S) <= SHARE
    # and the limit was what set the pace: 4 x (1 / 50 ms) = 80 calls/s were possible
    span = max(s.answer_times) - min(s.answer_times)
    assert span >= (s.answered - SHARE) / SHARE * WINDOW_S * 0.95, (span, s.answered)


# --- 6b. the estimate against the real run -----------------------------------------------------


def test_the_estimate_is_the_real_calls_at_l_star_and_the_ceiling_bounds_the_run(study):
    cfg = study.cfg
    agent = model_agents(cfg)[0]
    settings = harness_settings(cfg, agent)
    eps = study.episodes
    player = eps[eps["model"] == H.AGENT].set_index(["env", "seed"])
    prompt_tokens = _prompt_tokens_per_task(study.server.requests, settings.chars_per_token)
    for ep in study_episodes(cfg):
        est = estimate_episode(ep, settings)
        row = player.loc[(ep.env, ep.seed)]
        # the oracle solves in L* steps without repairs: calls_per_step x L*, exactly
        assert est.calls == settings.calls_per_step * int(row["optimal_length"]) == int(row["calls"])
        assert est.calls_max >= row["calls"] and est.output_tokens_max >= row["output_tokens"]
        # the prompts the run really sent, at the estimate's chars per token
        _, task = environment_class(ep.env)(ep.spec).reset(ep.seed, ep.archetype)
        sent = prompt_tokens[task.text]
        assert est.input_tokens_max >= sent
        assert 0.9 * sent <= est.input_tokens <= 1.1 * sent, (ep.env, est.input_tokens, sent)

    (row,) = world_estimate_rows(cfg)
    c = study.manifest["counts"]["worlds"]["models"][H.AGENT]
    assert row["calls"] == c["calls"] and row["calls_max"] >= c["calls"]
    assert row["calls_per_episode"] == pytest.approx(c["calls"] / 8)
    assert row["output_tokens_max"] >= c["output_tokens"] and row["input_tokens_max"] >= c["input_tokens"]
    assert row["cost_usd_max"] >= c["cost_usd"] and row["over_context"] == 0


@pytest.mark.parametrize("memory", ["structured", "summary", "transcript"])
def test_the_estimate_tracks_each_memory_modes_prompts_and_its_ceiling_holds_under_repairs(memory):
    """In process, no HTTP: the harness plays each episode of the study (1) with the
    oracle's answers: calls_per_step x L* calls and prompts the size the estimate
    expects; (2) with every answer unusable (a long text, quoted in every repair): the
    most calls there can be, and prompts within the ceiling."""
    cfg = H.study_config()
    settings = dataclasses.replace(harness_settings(cfg, model_agents(cfg)[0]), memory=memory)
    agent = WorldAgentSpec(name=H.AGENT, kind="model", model=H.MODEL, memory=memory)
    player = H.oracle_player()

    def play(ep: Any, answer: Callable[[AttemptRequest], str], streak: int = 0) -> tuple[Any, float]:
        chars: list[int] = []

        def call(request: AttemptRequest) -> Outcome:
            chars.append(sum(len(m.content) for m in request.messages))
            return Outcome(request, "key", Completion(answer(request), "stop", output_tokens=10))

        s = dataclasses.replace(settings, fallback_streak=streak) if streak else settings
        played = play_episode(call, agent, s, ep, cfg.run.seed)
        assert played.result is not None and played.result.episode["calls"] == len(chars)
        return played.result.episode, sum(chars) / settings.chars_per_token

    def as_oracle(request: AttemptRequest) -> str:
        return str(player({"messages": [{"role": m.role, "content": m.content} for m in request.messages]}))

    for ep in study_episodes(cfg):
        est = estimate_episode(ep, settings)
        row, sent = play(ep, as_oracle)
        assert row["success"] and row["repairs"] == 0
        assert row["calls"] == est.calls == settings.calls_per_step * row["optimal_length"]
        if memory == "summary":  # the estimate assumes a summary of the full summary_words
            assert sent <= est.input_tokens <= 1.5 * sent, (ep.env, est.input_tokens, sent)
        else:
            assert 0.9 * sent <= est.input_tokens <= 1.1 * sent, (ep.env, est.input_tokens, sent)
        assert est.input_tokens_max >= sent

        # by default the episode ends after fallback_streak steps without a usable action
        row, _ = play(ep, lambda request: PROSE)
        assert row["outcome"] == "format_failure" and row["steps"] == settings.fallback_streak
        # the ceiling: no streak ends it, every call repaired the allowed number of times
        row, sent = play(ep, lambda request: PROSE, streak=10**6)
        assert row["outcome"] == "failure" and row["steps"] == row["horizon"]
        assert row["calls"] == est.calls_max and row["fallbacks"] == row["calls"] // (1 + settings.repairs)
        assert sent <= est.input_tokens_max, (ep.env, sent, est.input_tokens_max)


#: an unusable answer, long enough to be cut where a repair quotes it
PROSE = "I would rather describe the world in prose. " * 120


def _prompt_tokens_per_task(requests: list[Any], chars_per_token: float) -> dict[str, float]:
    """The harness prompts' sizes per episode (told apart by task text), in tokens at
    ``chars_per_token`` (what the estimate counts)."""
    out: dict[str, float] = {}
    for r in requests:
        if not r.path.endswith("/chat/completions"):
            continue
        system, messages = split_body(r.body)
        task = sections(_text(messages[0]["content"]))["Task"]
        chars = len(system) + sum(len(_text(m["content"])) for m in messages)
        out[task] = out.get(task, 0.0) + chars / chars_per_token
    return out


# --- 3. kill -9 mid-episode, then resume -------------------------------------------------------


def test_kill_9_mid_episode_then_the_rerun_pays_only_for_calls_in_flight(study, prefect_server, tmp_path):
    with running_fake_server(H.oracle_player(), latency_s=0.1) as server:
        # the model agent alone (the oracle's Dask stage would only make it slower)
        data = H.config_data(server.base_url, model={"max_concurrency": CONCURRENCY}, oracle=False)
        cfg = H.write_config(tmp_path / "c.yaml", data)
        out = tmp_path / "run"
        env = H.command_env(prefect_server)
        proc = H.start_cmd(cfg, out, env)
        H.wait_answers(server, proc, 40)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        time.sleep(0.3)
        answered_before = server.answered
        total = int(study.manifest["counts"]["worlds"]["models"][H.AGENT]["calls"])
        assert 40 <= answered_before < total  # killed mid-study, episodes half played
        assert not (out / "manifest.json").exists() and not (out / "episodes").exists()

        rerun = H.run_cmd(cfg, out, env)
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        repeated = server.repeated_prompts()
        paid_twice = sum(n - 1 for n in repeated.values())
        assert paid_twice <= CONCURRENCY  # at most the calls in flight at the kill
        assert server.answered == total + paid_twice
    c = json.loads((out / "manifest.json").read_text())["counts"]["worlds"]["models"][H.AGENT]
    assert c["calls"] == total and c["finished"] == 8 and c["unfinished"] == 0
    # what was stored before the kill was replayed, not paid for again
    assert answered_before - CONCURRENCY <= c["reused"] <= answered_before
    _same_results(out, study)


def _same_results(out: Path, study: SimpleNamespace) -> None:
    """Episodes, steps and the calls' prompts and answers equal the reference run's
    (its rows of the agents this run has)."""
    eps, st = H.episodes(out), H.steps(out)
    agents = set(eps["model"])
    assert H.AGENT in agents
    for mine, ref in ((eps, study.episodes), (st, study.steps)):
        ref = ref[ref["model"].isin(agents)]
        # without the oracle's nulls a column of the model's booleans reads back as bool
        pd.testing.assert_frame_equal(H.comparable(mine), H.comparable(ref), check_dtype=False)
    cols = ["instance_id", "turn", "prompt_sha256", "response", "input_tokens", "output_tokens"]
    att = pq.read_table(out / WORLD_ATTEMPTS_REL).to_pandas()

    def calls(df: pd.DataFrame) -> pd.DataFrame:
        return df[cols].sort_values(["instance_id", "turn"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(calls(att), calls(study.attempts))


# --- 4. unfinished episodes ----------------------------------------------------------------------


def test_calls_that_fail_for_good_leave_episodes_unfinished_exit_3_and_the_rerun_resumes(
    study, prefect_server, tmp_path
):
    with running_fake_server(H.oracle_player()) as server:
        # 20 answers (a few more: requests that arrived before the 20th was counted),
        # then HTTP 400 (not retried) for everything: no episode (24 calls
        # at least) can finish
        server.fail_after = 20
        data = H.config_data(server.base_url, model={"max_concurrency": CONCURRENCY})
        cfg = H.write_config(tmp_path / "c.yaml", data)
        out = tmp_path / "run"
        env = H.command_env(prefect_server)
        first = H.run_cmd(cfg, out, env)
        assert first.returncode == 3, first.stderr[-4000:]
        line = (
            "8 world episodes are unfinished because a call got no answer (player: 8 (bad_request 8)); "
            "rerun the same command to resume them"
        )
        last = first.stderr.strip().splitlines()[-1]
        assert last == f"horizonbench: error: {line}", last
        assert "Traceback" not in first.stderr
        answered = server.answered
        assert 20 <= answered < 20 + CONCURRENCY and server.status_counts.get(400) == 8
        # everything else was still written: the oracle's episodes, the report, the manifest
        eps = H.episodes(out)
        assert set(eps["model"]) == {"oracle"} and len(eps) == 8
        c = json.loads((out / "manifest.json").read_text())["counts"]["worlds"]["models"][H.AGENT]
        assert (c["finished"], c["unfinished"], c["unfinished_by_class"]) == (0, 8, {"bad_request": 8})
        html = (out / "report" / "index.html").read_text()
        assert "player: unfinished episodes (resumed by the next run)" in html
        att = pq.read_table(out / WORLD_ATTEMPTS_REL).to_pandas()
        assert len(att) == answered + 8 and (att["error_class"] == "bad_request").sum() == 8
        # a nightly deployment sees the same line: the flow run ended Failed with it
        assert line in _failed_flow_run_messages()

        server.fail_after = None
        rerun = H.run_cmd(cfg, out, env)
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        assert server.repeated_prompts() == {}  # no answered call was paid for again
    c = json.loads((out / "manifest.json").read_text())["counts"]["worlds"]["models"][H.AGENT]
    assert (c["finished"], c["unfinished"], c["reused"]) == (8, 0, answered)
    _same_results(out, study)


def test_a_study_of_model_agents_only_whose_calls_all_fail_exits_3_not_a_validation_error(
    prefect_server, tmp_path
):
    with running_fake_server(H.oracle_player()) as server:
        server.fail_after = 0  # the provider refuses everything
        data = H.config_data(server.base_url, oracle=False)
        cfg = H.write_config(tmp_path / "c.yaml", data)
        out = tmp_path / "run"
        proc = H.run_cmd(cfg, out, H.command_env(prefect_server))
        assert server.answered == 0
    assert proc.returncode == 3, proc.stderr[-4000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("horizonbench: error: 8 world episodes are unfinished"), last
    assert "Traceback" not in proc.stderr and "failed validation" not in proc.stderr
    # no episode finished: nothing to validate, analyse or report; the calls are kept
    assert not (out / "episodes").exists() and not (out / "report" / "index.html").exists()
    att = pq.read_table(out / WORLD_ATTEMPTS_REL).to_pandas()
    assert len(att) == 8 and (att["error_class"] == "bad_request").all()
    counts = json.loads((out / "manifest.json").read_text())["counts"]["worlds"]
    assert counts["episodes"] == 0 and counts["models"][H.AGENT]["unfinished"] == 8


def test_a_study_whose_every_episode_stops_over_budget_at_once_is_reported_not_a_validation_error(
    prefect_server, tmp_path
):
    """A context window too small for the first prompt: every episode ends
    budget_exceeded before its first step, no call is sent, the steps table is empty and
    valid, and every episode counts as a failure, with the count of budget stops beside
    each rate and no rate without them (nothing finished)."""
    with running_fake_server(H.oracle_player()) as server:
        data = H.config_data(server.base_url, oracle=False, model={"context_tokens": 2100})
        cfg = H.write_config(tmp_path / "c.yaml", data)
        out = tmp_path / "run"
        proc = H.run_cmd(cfg, out, H.command_env(prefect_server))
        assert server.answered == 0 and not server.requests
    assert proc.returncode == 0, proc.stderr[-4000:]
    eps = H.episodes(out)
    assert len(eps) == 8 and (eps["outcome"] == "budget_exceeded").all() and (eps["steps"] == 0).all()
    assert eps["budget_detail"].str.contains("exceeds the model's context of 2,100").all()
    assert H.steps(out).empty
    excluded = pq.read_table(out / "analysis" / "worlds_excluded.parquet").to_pandas()
    assert excluded["budget_exceeded"].sum() == 8 and (excluded["measured"] == excluded["episodes"]).all()
    grid = pq.read_table(out / "analysis" / "worlds_grid.parquet").to_pandas()
    assert len(grid) == 4 and (grid["p"] == 0.0).all() and (grid["budget_exceeded"] == grid["n"]).all()
    assert (grid["n_finished"] == 0).all() and grid["p_finished"].isna().all()


def _failed_flow_run_messages() -> list[str]:
    from prefect.client.orchestration import get_client

    async def read() -> list[str]:
        async with get_client() as client:
            runs = await client.read_flow_runs(limit=200)
            return [r.state.message or "" for r in runs if r.state and r.state.type.value == "FAILED"]

    return asyncio.run(read())


# --- 6. dry run --------------------------------------------------------------------------------


def test_dry_run_prints_the_world_agent_estimate_sends_nothing_and_needs_no_key(
    study, prefect_server, tmp_path
):
    def never(body: dict[str, Any]) -> str:
        raise AssertionError("a dry run sent a request")

    with running_fake_server(never) as server:
        cfg = H.write_config(tmp_path / "c.yaml", H.config_data(server.base_url))
        env = H.command_env(prefect_server)
        env.pop(H.KEY_ENV)  # no key anywhere: a worlds-only dry run does not need one
        proc = H.run_cmd(cfg, tmp_path / "run", env, "--dry-run")
        assert server.requests == []
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "world study: 8 offline episodes (1 offline agents x 8 worlds), no calls" in proc.stdout
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("world agent"))
    assert "calls/episode" in lines[head] and "cost USD (max)" in lines[head]
    row = lines[head + 1]
    assert row.split()[:3] == [H.AGENT, "structured", "8"]
    (est,) = world_estimate_rows(study.cfg)
    calls = study.manifest["counts"]["worlds"]["models"][H.AGENT]["calls"]
    assert f"{calls / 8:.0f} (max {est['calls_per_episode_max']})" in row
    assert f"{calls:,} ({est['calls_max']:,})" in row
    assert f"{est['cost_usd']:.2f} ({est['cost_usd_max']:.2f})" in row
    assert est["cost_usd"] == pytest.approx(
        (est["input_tokens"] * H.PRICE_IN + est["output_tokens"] * H.PRICE_OUT) / 1e6
    )
    assert f"world study: about {calls:,} calls" in proc.stdout and "nothing was sent" in proc.stdout
    assert not (tmp_path / "run" / "episodes").exists()
    assert not (tmp_path / "run" / WORLD_ATTEMPTS_REL).exists()
