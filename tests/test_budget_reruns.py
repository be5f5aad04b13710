"""A budget is a cap on what the run folder has paid, across reruns, in total and per model
(issue 23): the attempt store's spend ledger keeps what every billed call cost, a run
starts its budget from it, a rerun past a cap sends nothing and says so in one line, and
a larger cap is an explicit choice (the config, or ``run --budget-usd``). What was paid
is counted by the fake model server itself (usage x price of every 200 it sent)."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_model_server import running_fake_server
from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Completion, Message
from horizonbench.models.anthropic_messages import AnthropicModel
from horizonbench.models.attempt_store import AttemptStore, read_spend
from horizonbench.models.base import AttemptRequest
from horizonbench.models.budget import TOTAL, Budget
from horizonbench.models.engine import ModelRunner, evaluate
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.schemas.config import ModelSpec, parse_config
from horizonbench.tasks.report.artifacts import summary_markdown
from horizonbench.tasks.run_folder.spend import budget_counts, budget_hint, caps_of, spend_lines, summarize
from horizonbench.tasks.run_folder.state import output_config
from horizonbench.tasks.run_folder.status import format_status, run_status

EXE = Path(sys.executable).with_name("horizonbench")
#: USD per million tokens: a maze prompt (~700 words) and a 40-word answer cost ~0.036
PRICE_IN, PRICE_OUT = 40.0, 200.0
ANSWER = " ".join(["step"] * 40)


def _answer(body: dict[str, Any]) -> str:
    return ANSWER


def _completion(cost: float) -> Completion:
    return Completion(text="x", finish_reason="stop", input_tokens=1, output_tokens=1, cost_usd=cost)


# --- the budget and the ledger, without a server ------------------------------------------------


def test_a_seeded_budget_refuses_what_the_folder_has_paid_already() -> None:
    budget = Budget(0.3, spent={"m": 0.28})
    assert budget.seeded_usd == pytest.approx(0.28) and budget.spent_this_run_usd == 0
    assert not budget.reserve(0.03, "m") and budget.refused == {TOTAL}
    assert budget.reserve(0.02, "m")  # what is left still buys a call that fits
    budget.settle(0.02, 0.015, "m")
    assert budget.spent_usd == pytest.approx(0.295) and budget.spent_this_run_usd == pytest.approx(0.015)


def test_a_model_cap_holds_beside_the_total_and_names_itself() -> None:
    budget = Budget(1.0, model_limits={"a": 0.1, "b": None}, spent={"a": 0.08, None: 0.5})
    a, b = budget.for_model("a"), budget.for_model("b")
    assert not a.reserve(0.03) and budget.refused == {"a"}
    assert a.refusal() == "evaluation.models[a].budget_usd reached"
    assert b.reserve(0.4)  # b has no cap of its own: only the total (0.58 + 0.4 <= 1)
    assert not b.reserve(0.1) and b.refusal() == "evaluation.budget_usd reached"
    assert budget.refused == {"a", TOTAL}


def test_a_call_that_fits_once_the_calls_in_flight_settle_waits_for_them() -> None:
    budget = Budget(1.0)
    cancel = threading.Event()
    assert budget.reserve(0.6, "m", cancel)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(budget.reserve(0.6, "m", cancel)))
    waiter.start()
    time.sleep(0.3)
    assert not got  # 0.6 in flight + 0.6 > 1.0, but 0.6 alone fits: it waits
    budget.settle(0.6, 0.2, "m")  # the call came back cheaper
    waiter.join(5)
    assert got == [True] and not budget.exhausted
    # paid + the estimate passes the cap: refused at once, waiting could not help
    assert not budget.reserve(0.9, "m", cancel) and budget.exhausted  # 0.2 + 0.9 > 1
    # a waiting call lets go on an interrupt, without calling the budget reached
    other = Budget(1.0)
    assert other.reserve(0.9, "m", cancel)
    cancel_now = threading.Event()
    threading.Timer(0.2, cancel_now.set).start()
    assert not other.reserve(0.5, "m", cancel_now) and not other.exhausted


def test_the_ledger_books_every_billed_call_per_folder_and_model(tmp_path: Path) -> None:
    with AttemptStore(tmp_path / "s.sqlite") as store:
        store.put("k1", _completion(0.25), "run-a", model="m1")
        # a second run racing on the same key paid too: the answer is kept once, both costs
        store.put("k1", _completion(0.5), "run-a", model="m1")
        store.put("k2", _completion(0.125), "run-a", model="m2")
        store.add_spend("m2", 0.0625, "run-a", "k3")  # a 200 without a usable answer
        store.put("k4", _completion(1.0), "run-b", model="m1")  # another run folder
        store.put("k5", _completion(9.0), "run-a")  # no model: not a paid call (tests, tools)
        assert len(store) == 4
        assert store.spent("run-a") == {"m1": 0.75, "m2": 0.1875}
        assert store.spent("run-b") == {"m1": 1.0}
        store.set_caps("run-a", {"": 0.3, "m1": 0.1, "m2": None})
    spent, caps = read_spend(tmp_path / "s.sqlite", "run-a")
    assert spent == {"m1": 0.75, "m2": 0.1875} and caps == {"": 0.3, "m1": 0.1, "m2": None}


def test_a_store_from_before_the_ledger_keeps_what_its_answers_cost(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE attempts (attempt_key TEXT PRIMARY KEY, text TEXT NOT NULL, finish_reason TEXT"
        " NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, latency_s REAL NOT"
        " NULL, cost_usd REAL NOT NULL, created_at TEXT NOT NULL, run_tag TEXT)"
    )
    for i, (tag, cost) in enumerate([("t", 0.25), ("t", 0.5), ("u", 2.0)]):
        conn.execute(
            "INSERT INTO attempts VALUES (?, 'x', 'stop', 1, 1, 0.1, ?, '2026-01-01', ?)",
            (f"k{i}", cost, tag),
        )
    conn.commit()
    conn.close()
    assert read_spend(path, "t") == ({}, {})  # read only: status never migrates a store
    with AttemptStore(path) as store:
        assert store.spent("t") == {None: 0.75}  # paid, by a model the old store did not name
    with AttemptStore(path) as store:  # opened again: carried over once, not twice
        assert store.spent("t") == {None: 0.75}
    budget = Budget(0.8, spent={None: 0.75})
    assert not budget.reserve(0.1) and budget.reserve(0.05)


def _raw(total: float | None, own: float | None) -> dict[str, Any]:
    model = {"name": "m", "provider": "openai", "model": "gpt-4.1-mini", "budget_usd": own}
    maze = {"params": {"grid_rows": 5, "grid_cols": 5}, "sampling": {"count": 2}}
    return {
        "run": {"name": "b"},
        "families": {"maze": maze},
        "evaluation": {"budget_usd": total, "models": [model]},
    }


def test_raising_a_cap_is_the_same_run_not_another_config() -> None:
    def dumped(total: float, own: float | None) -> dict[str, Any]:
        return parse_config(_raw(total, own)).model_dump(mode="json")

    assert output_config(dumped(0.3, 0.1)) == output_config(dumped(5.0, None))
    with pytest.raises(ConfigError, match="budget_usd"):
        parse_config(_raw(None, -1))


def test_offline_models_without_a_cap_have_no_budget_to_show(tmp_path: Path) -> None:
    raw = _raw(None, None)
    raw["evaluation"]["models"].append({"name": "o", "provider": "offline", "kind": "oracle"})
    assert caps_of(parse_config(raw)) == {"": None, "m": None}  # the offline model costs nothing
    raw["evaluation"]["models"] = raw["evaluation"]["models"][1:]
    assert budget_counts(parse_config(raw), tmp_path, []) is None


def test_the_lines_say_paid_cap_and_left_and_how_to_raise_the_cap() -> None:
    summary = summarize({"a": 0.2994, "b": 0.05}, {"": 0.4, "a": 0.3, "b": None}, ["a", "b"])
    assert summary["left_usd"] == pytest.approx(0.0506) and summary["models"]["a"][
        "left_usd"
    ] == pytest.approx(0.0006)
    lines = spend_lines(summary)
    assert lines["budget"] == "0.3494 USD paid of 0.4 USD (0.0506 USD left)"
    assert lines["a: budget"] == "0.2994 USD paid of 0.3 USD (0.0006 USD left)"
    assert lines["b: budget"] == "0.0500 USD paid (no cap)"
    hint = budget_hint(summary, {"a", TOTAL})
    assert hint is not None and "0.3494 USD of its 0.4 USD budget" in hint and "--budget-usd X" in hint
    assert (
        "model a has paid 0.2994 USD of its 0.3 USD budget" in hint
        and "evaluation.models[a].budget_usd" in hint
    )
    assert budget_hint(summary, ()) is None
    md = summary_markdown("t", Path("."), {"budget": summary}, [])
    assert "## Budget" in md and "- a: budget: 0.2994 USD paid of 0.3 USD (0.0006 USD left)" in md


# --- the engine against the fake server: the cap over three runs of one folder ----------------


def _requests(n: int, max_tokens: int = 64) -> list[AttemptRequest]:
    words = " ".join(["wall"] * 600)  # ~600 words: a prompt of maze size
    return [
        AttemptRequest(
            instance_id=f"i{i}",
            family="fake",
            sample=0,
            messages=(Message("user", f"puzzle {i}: {words}"),),
            temperature=0.0,
            top_p=1.0,
            max_tokens=max_tokens,
            seed=i,
        )
        for i in range(n)
    ]


def _runner(
    server: Any, store: AttemptStore, budget: Budget, name: str, provider: str = "openai_compatible"
) -> ModelRunner:
    anthropic = provider == "anthropic"
    spec = ModelSpec(
        name=name,
        provider=provider,
        model=name,
        base_url=server.root_url if anthropic else server.base_url,
        input_cost_per_mtok=PRICE_IN,
        output_cost_per_mtok=PRICE_OUT,
        max_concurrency=4,
        max_retries=0,
        timeout_s=10,
    )
    model = AnthropicModel(spec, "k") if anthropic else OpenAIChatModel(spec, "k")
    return ModelRunner(
        model,
        store,
        price=spec.price(),
        budget=budget.for_model(name),
        run_tag="folder",
    )


def test_three_runs_of_one_folder_pay_at_most_the_cap_and_reuse_costs_nothing(tmp_path: Path) -> None:
    with running_fake_server(_answer) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        paid_after = []
        for _ in range(3):  # each run starts from what the ledger says was paid
            budget = Budget(0.3, spent=store.spent("folder"))
            outcomes = evaluate(_requests(20), _runner(server, store, budget, "m"))
            paid_after.append(server.billed_usd(PRICE_IN, PRICE_OUT))
        reused = sum(o.reused for o in outcomes)
        ledger = sum(store.spent("folder").values())
    assert paid_after[0] <= 0.3 and paid_after[0] >= 0.3 - 0.04  # within one call of the cap
    assert paid_after[1] == paid_after[2] == paid_after[0]  # the reruns sent nothing
    assert {o.error_class for o in outcomes if not o.answered} == {"budget"}
    assert reused == len(server.billed)  # stored answers came back without a call
    assert ledger == pytest.approx(paid_after[0])  # a reused answer never counts twice


@pytest.mark.parametrize("provider", ["openai_compatible", "anthropic"])
def test_a_billed_reply_without_an_answer_counts_as_paid(tmp_path: Path, provider: str) -> None:
    # about half the replies are a 200 with usage but no choices (no content): billed,
    # nothing to store
    with running_fake_server(_answer, chaos={"empty_choices": 0.5}) as server:
        with AttemptStore(tmp_path / "s.sqlite") as store:
            budget = Budget(0.3, spent=store.spent("folder"))
            outcomes = evaluate(_requests(20), _runner(server, store, budget, "m", provider))
            ledger = sum(store.spent("folder").values())
        billed = server.billed_usd(PRICE_IN, PRICE_OUT)
        empty = server.chaos_counts.get("empty_choices", 0)
    assert empty and len(server.billed) > sum(o.answered for o in outcomes)
    assert ledger == pytest.approx(billed) and billed <= 0.3


def test_a_model_cap_stops_that_model_while_another_goes_on(tmp_path: Path) -> None:
    with running_fake_server(_answer) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        for _ in range(2):
            budget = Budget(None, model_limits={"capped": 0.1}, spent=store.spent("folder"))
            capped = evaluate(_requests(6), _runner(server, store, budget, "capped"))
            free = evaluate(_requests(6), _runner(server, store, budget, "free"))
        assert server.billed_usd(PRICE_IN, PRICE_OUT, "capped") <= 0.1
        assert all(o.answered for o in free) and not all(o.answered for o in capped)
        assert budget.refused == {"capped"}
        failed = next(o for o in capped if not o.answered)
        assert failed.error == "evaluation.models[capped].budget_usd reached before this call"


# --- the command, as a nightly retry loop runs it -------------------------------------------------


def _config(path: Path, server: Any, total: float, own: float | None = None) -> Path:
    def model(name: str, cap: float | None) -> dict[str, Any]:
        return {
            "name": name,
            "provider": "openai_compatible",
            "model": name,  # distinct ids, so the server bills each model apart
            "base_url": server.base_url,
            "api_key_env": "HB_BUDGET_KEY",
            "input_cost_per_mtok": PRICE_IN,
            "output_cost_per_mtok": PRICE_OUT,
            "max_concurrency": 3,
            "budget_usd": cap,
        }

    cfg = {
        "run": {"name": "budget", "seed": 2},
        "families": {
            "maze": {
                "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                "sampling": {"count": 6, "shard_size": 6},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {
            "samples": 3,  # 18 attempts a model, ~0.65 USD: more than either cap
            "settings": {"max_tokens": 64},
            "budget_usd": total,
            "models": [model("capped", own), model("free", None)],
        },
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(cfg: Path, out: Path, capsys: Any, *extra: str) -> tuple[int, str]:
    """``horizonbench run`` in this process (the command's code path, without a
    process start per rerun): its exit code and its last line."""
    from horizonbench.cli.main import main

    code = main(["run", "--config", str(cfg), "--out", str(out), "--no-progress", *extra])
    # (no "Traceback" check here: in one process, Prefect's console handler may still
    # write to an earlier test's captured stream and print a logging error about it)
    err = capsys.readouterr().err
    return code, err.strip().splitlines()[-1]


@pytest.mark.flow
def test_a_run_capped_at_030_and_rerun_twice_pays_at_most_030_until_the_cap_is_raised(
    tmp_path: Path, prefect_server: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    monkeypatch.setenv("HB_BUDGET_KEY", "k-NOT-SECRET")
    out = tmp_path / "run"
    with running_fake_server(_answer) as server:
        cfg = _config(tmp_path / "c.yaml", server, total=0.3, own=0.1)
        runs = [_run(cfg, out, capsys) for _ in range(3)]
        after_three = server.billed_usd(PRICE_IN, PRICE_OUT)
        capped_paid = server.billed_usd(PRICE_IN, PRICE_OUT, "capped")
        calls_after_three = len(server.billed)
        raised = _run(cfg, out, capsys, "--budget-usd", "0.5")
        after_raise = server.billed_usd(PRICE_IN, PRICE_OUT)
    assert 0.3 - 0.05 <= after_three <= 0.3 and capped_paid <= 0.1
    for code, last in runs:
        assert code == 3, last
        assert (
            "the run folder has paid" in last and "of its 0.3 USD budget" in last and "--budget-usd X" in last
        )
        assert "rerun the same command" not in last
    # a rerun past the cap sent nothing, and its one line says what was paid
    assert f"paid {after_three:.4f} USD of its 0.3 USD budget" in runs[2][1]
    assert raised[0] == 3 and "of its 0.5 USD budget" in raised[1]
    assert len(server.billed) > calls_after_three  # the raised cap sent more
    assert 0.5 - 0.05 <= after_raise <= 0.5
    assert server.billed_usd(PRICE_IN, PRICE_OUT, "capped") <= 0.1  # its own cap still holds

    # the manifest, status and the report say what was paid and what is left
    budget = json.loads((out / "manifest.json").read_text())["counts"]["budget"]
    assert budget["cap_usd"] == 0.5 and budget["paid_usd"] == pytest.approx(after_raise, abs=1e-6)
    assert budget["left_usd"] == pytest.approx(0.5 - after_raise, abs=1e-6)
    assert budget["models"]["capped"]["cap_usd"] == 0.1 and budget["models"]["free"]["cap_usd"] is None
    info = run_status(out)
    assert info["budget"]["paid_usd"] == pytest.approx(after_raise, abs=1e-6)
    text = format_status(info)
    assert f"budget: {after_raise:.4f} USD paid of 0.5 USD" in text and "capped: budget:" in text
    report = (out / "report" / "index.html").read_text()
    assert f"{after_raise:.4f} USD paid of 0.5 USD" in report


@pytest.mark.flow
def test_a_world_study_of_model_agents_is_capped_by_the_folder_budget_too(
    tmp_path: Path, prefect_server: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import world_models_helpers as H

    # the whole study, 285 calls, costs 1.44 USD at these prices (measured once): the cap bites
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    monkeypatch.setenv(H.KEY_ENV, H.KEY)
    out = tmp_path / "run"
    with running_fake_server(H.oracle_player()) as server:
        prices = {"input_cost_per_mtok": 10.0, "output_cost_per_mtok": 10.0}
        data = H.config_data(server.base_url, model=prices, oracle=False)
        data["evaluation"] |= {"budget_usd": 0.5, "settings": {"temperature": 0, "max_tokens": 512}}
        cfg = H.write_config(tmp_path / "c.yaml", data)
        first = _run(cfg, out, capsys)
        paid, calls = server.billed_usd(10.0, 10.0), len(server.billed)
        rerun = _run(cfg, out, capsys)
        assert len(server.billed) == calls  # past the cap: nothing sent
    assert 0.5 - 0.05 <= paid <= 0.5
    for code, last in (first, rerun):
        assert code == 3, last
        assert "world episodes are unfinished" in last and "(budget " in last, last
        assert f"the run folder has paid {paid:.4f} USD of its 0.5 USD budget" in last, last
    assert run_status(out)["budget"]["paid_usd"] == pytest.approx(paid, abs=1e-6)
