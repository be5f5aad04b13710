"""The trained sequence models' table (analysis/seqmodels.py): its counts add up, its
Wilson intervals cover planted accuracies, its failure shares sum to 1, the Val − OOD
gap finds a planted difference and stays quiet under none, and the analyse stage's glue
writes it with its schema."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.analysis.seqmodels import (
    best_per_puzzle,
    newcombe_difference,
    paper_failure_shares,
    paper_results,
    seqmodel_table,
    shares_sum,
    split_gaps,
)
from horizonbench.datasets.puzzles.rollout import ROLLOUT_FAILURES
from horizonbench.schemas.seqmodels import FAILURE_MODES, SEQMODELS_SCHEMA
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.analyse.scores import to_table
from horizonbench.tasks.analyse.seqmodels import SEQMODELS_REL, write_seqmodels

LABELS = {"t5-fine_tuned": ("t5", "fine_tuned"), "gpt2-scratch": ("gpt2", "scratch")}
#: failure modes drawn for failed rollouts; None is a failure with no recorded mode
_DRAWN = [*FAILURE_MODES, None]


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def _simulate(
    rng: np.random.Generator,
    means: dict[str, dict[str, float]],
    per_n: int,
    ns: range = range(1, 11),
    heterogeneous: bool = True,
) -> tuple[pd.DataFrame, dict[str, str], dict[tuple[str, str, int], float]]:
    """Rollout rows of ``means`` (model -> split -> mean accuracy): each instance has its
    own success probability (a Beta around the split's mean), so the planted cell rate is
    the mean of its instances' probabilities (``heterogeneous=False``: every instance at
    the mean, so equal means are an exact null). Sizes 1-7 are validation, 8-10 OOD."""
    rows, splits, planted = [], {}, {}
    for model, by_split in means.items():
        for n in ns:
            split = "validation" if n <= 7 else "ood"
            m = by_split[split]
            p = rng.beta(8 * m + 0.1, 8 * (1 - m) + 0.1, size=per_n) if heterogeneous else np.full(per_n, m)
            planted[(model, split, n)] = float(p.mean())
            ok = rng.random(per_n) < p
            for k in range(per_n):
                iid = f"hanoi-{n}-{k}"
                splits[iid] = split
                rows.append(
                    {
                        "model": model,
                        "instance_id": iid,
                        "family": "hanoi",
                        "mode": "rollout",
                        "answered": True,
                        "success": bool(ok[k]),
                        "violation": None if ok[k] else _DRAWN[int(rng.integers(len(_DRAWN)))],
                        "n": n,
                        "optimality_gap": 0.0 if ok[k] else None,
                        "move_legality_rate": 1.0 if ok[k] else 0.5,
                    }
                )
    return _frame(rows), splits, planted


def test_failure_modes_are_the_rollouts() -> None:
    """The table's modes are the engine's: a new mode would land in share_other unseen."""
    assert set(FAILURE_MODES) == set(ROLLOUT_FAILURES)


def test_wilson_coverage_and_shares_calibrated() -> None:
    """Over 400 simulated studies the Wilson interval of each size's cell covers the
    planted mean accuracy at least 92% of the time, and of the pooled split too; shares
    of the failed rollouts sum to 1 on every row with a failure."""
    hits = total = pooled_hits = pooled_total = 0
    means = {"t5-fine_tuned": {"validation": 0.7, "ood": 0.2}}
    for seed in range(400):
        scores, splits, planted = _simulate(np.random.default_rng(seed), means, per_n=20, ns=range(5, 10))
        t = seqmodel_table(scores, splits, LABELS)
        per_n = t[t["n"].notna()]
        for r in per_n.itertuples():
            truth = planted[(r.model, r.split, int(r.n))]
            hits += r.accuracy_low <= truth <= r.accuracy_high
            total += 1
        for r in t[t["n"].isna()].itertuples():
            truth = np.mean([v for (m, s, _), v in planted.items() if m == r.model and s == r.split])
            pooled_hits += r.accuracy_low <= truth <= r.accuracy_high
            pooled_total += 1
        failed = t["failed"] > 0
        assert np.allclose(shares_sum(t[failed]), 1.0)
        assert np.isnan(shares_sum(t[~failed])).all()
    assert hits / total >= 0.92, hits / total
    assert pooled_hits / pooled_total >= 0.92, pooled_hits / pooled_total


def test_planted_gap_found_and_null_quiet() -> None:
    """Model a loses 0.3 from validation to OOD (0.8 -> 0.5), model b loses nothing (0.5
    both), 98 rollouts a side. Newcombe's interval on Val − OOD excludes 0 for a in >= 95%
    of studies and for b in <= 8% (nominal 5%); between the two models it finds a's
    validation lead (0.8 against 0.5) as often and excludes 0 on OOD (0.5 against 0.5)
    no more often than chance allows."""
    means = {
        "t5-fine_tuned": {"validation": 0.8, "ood": 0.5},
        "gpt2-scratch": {"validation": 0.5, "ood": 0.5},
    }
    found = alarm = between_found = between_alarm = 0
    studies = 200
    for seed in range(studies):
        rng = np.random.default_rng(10_000 + seed)
        # sizes 1-7 validation, 8-14 OOD: 7 x 14 = 98 rollouts a side
        scores, splits, _ = _simulate(rng, means, per_n=14, ns=range(1, 15), heterogeneous=False)
        t = seqmodel_table(scores, splits, LABELS)
        gaps = split_gaps(t).set_index("model")
        found += gaps.loc["t5-fine_tuned", "gap_low"] > 0
        b = gaps.loc["gpt2-scratch"]
        alarm += (b["gap_low"] > 0) or (b["gap_high"] < 0)
        pooled = t[t["n"].isna()].set_index(["model", "split"])

        def diff(split: str, pooled: pd.DataFrame = pooled) -> tuple[float, float, float]:
            x, y = pooled.loc[("t5-fine_tuned", split)], pooled.loc[("gpt2-scratch", split)]
            return newcombe_difference(
                int(x["solved"]), int(x["episodes"]), int(y["solved"]), int(y["episodes"])
            )

        between_found += diff("validation")[1] > 0
        _, low, high = diff("ood")
        between_alarm += low > 0 or high < 0
    assert found / studies >= 0.95, found / studies
    assert alarm / studies <= 0.08, alarm / studies
    assert between_found / studies >= 0.95, between_found / studies
    assert between_alarm / studies <= 0.08, between_alarm / studies


def test_newcombe_edges() -> None:
    d, low, high = newcombe_difference(10, 10, 0, 10)
    assert d == 1.0 and 0 < low < 1 and high == 1.0
    assert all(math.isnan(v) for v in newcombe_difference(1, 0, 1, 2))
    d, low, high = newcombe_difference(5, 10, 5, 10)
    assert d == 0 and low < 0 < high and math.isclose(low, -high)


_row = st.fixed_dictionaries(
    {
        "model": st.sampled_from([*LABELS, "other-model"]),
        "instance": st.integers(0, 7),
        "family": st.sampled_from(["hanoi", "checkers"]),
        "mode": st.sampled_from(["rollout", "rollout", "plan"]),
        "answered": st.booleans(),
        "success": st.booleans(),
        "violation": st.sampled_from([*FAILURE_MODES, None, "not_a_mode"]),
        "n": st.integers(1, 4),
        "legal": st.floats(0, 1),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row, min_size=0, max_size=60), st.integers(0, 3))
def test_counts_add_up(raw: list[dict], seed: int) -> None:
    """episodes = solved + failed on every row; a split's pooled row (n null) is the sum
    of its size rows; shares sum to 1 where anything failed; accuracy lies in its
    interval; only rollouts of labelled models with a split appear."""
    rows = [
        {
            "model": r["model"],
            "instance_id": f"{r['family']}-{r['n']}-{r['instance']}",
            "family": r["family"],
            "mode": r["mode"],
            "answered": r["answered"],
            "success": r["success"],
            "violation": None if r["success"] else r["violation"],
            "n": r["n"],
            "optimality_gap": 0.1 if r["success"] else None,
            "move_legality_rate": r["legal"],
        }
        for r in raw
    ]
    columns = ["model", "instance_id", "family", "mode", "answered", "success", "violation", "n"]
    scores = pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)
    rng = np.random.default_rng(seed)
    # instance 7 has no split: left out
    splits = {
        f"{f}-{n}-{i}": ("ood" if n > 3 else str(rng.choice(["train", "validation"])))
        for f in ("hanoi", "checkers")
        for n in range(1, 5)
        for i in range(7)
    }
    t = seqmodel_table(scores, splits, LABELS)
    assert list(t.columns) == SEQMODELS_SCHEMA.names
    assert (t["episodes"] == t["solved"] + t["failed"]).all()
    assert set(t["model"]) <= set(LABELS)
    keys = ["model", "puzzle", "split"]
    for _, g in t.groupby(keys):
        pooled = g[g["n"].isna()]
        assert len(pooled) == 1
        sizes = g[g["n"].notna()]
        for col in ("episodes", "solved", "failed", "unanswered"):
            assert int(pooled[col].iloc[0]) == int(sizes[col].sum())
    failed = t["failed"] > 0
    assert np.allclose(shares_sum(t[failed]), 1.0)
    has = t["episodes"] > 0
    assert (t.loc[has, "accuracy_low"] <= t.loc[has, "accuracy"] + 1e-12).all()
    assert (t.loc[has, "accuracy"] <= t.loc[has, "accuracy_high"] + 1e-12).all()
    # what should be counted: answered rollouts of labelled models with a split
    if rows:
        want = scores[
            (scores["mode"] == "rollout") & scores["model"].isin(LABELS) & scores["instance_id"].isin(splits)
        ]
        assert int(t.loc[t["n"].isna(), "episodes"].sum()) == int(want["answered"].sum())
        assert int(t.loc[t["n"].isna(), "unanswered"].sum()) == int((~want["answered"]).sum())
    # the table fits its schema
    assert to_table(t, SEQMODELS_SCHEMA).num_rows == len(t)


def _pooled_row(model: str, puzzle: str, split: str, solved: int, episodes: int) -> dict:
    arch, cond = LABELS.get(model, ("x", "scratch"))
    return {
        "model": model,
        "puzzle": puzzle,
        "architecture": arch,
        "condition": cond,
        "split": split,
        "n": pd.NA,
        "episodes": episodes,
        "solved": solved,
        "failed": episodes - solved,
        "accuracy": solved / episodes,
        "accuracy_low": 0.0,
        "accuracy_high": 1.0,
    }


def test_best_per_puzzle_ties() -> None:
    """Best validation wins; a tie goes to the better OOD, then to the model name."""
    t = pd.DataFrame(
        [
            _pooled_row("b", "hanoi", "validation", 5, 10),
            _pooled_row("b", "hanoi", "ood", 2, 10),
            _pooled_row("a", "hanoi", "validation", 5, 10),
            _pooled_row("a", "hanoi", "ood", 1, 10),
            _pooled_row("c", "hanoi", "validation", 4, 10),
            _pooled_row("z", "checkers", "validation", 3, 10),
            _pooled_row("y", "checkers", "validation", 3, 10),
        ]
    )
    best = best_per_puzzle(t).set_index("puzzle")
    assert best.loc["hanoi", "model"] == "b"
    assert best.loc["hanoi", "ood_accuracy"] == 0.2
    assert best.loc["checkers", "model"] == "y"
    assert math.isnan(best.loc["checkers", "ood_accuracy"])
    assert best_per_puzzle(t.iloc[0:0]).empty


def test_paper_numbers() -> None:
    """Spot checks against the paper's text (Tables 2, 5-8, 9)."""
    paper = paper_results()
    per = paper["per_puzzle"].set_index(["puzzle", "architecture", "condition"])
    assert len(per) == 24
    assert tuple(per.loc[("blocks_world", "t5", "fine_tuned"), ["val_pct", "ood_pct"]]) == (97.27, 81.00)
    assert tuple(per.loc[("blocks_world", "gpt2", "scratch"), ["val_pct", "ood_pct"]]) == (21.82, 0.00)
    assert tuple(per.loc[("checkers", "gpt2", "scratch"), ["val_pct", "ood_pct"]]) == (1.11, 0.03)
    assert per.loc[("hanoi", "t5", "fine_tuned"), "val_pct"] == 11.11
    assert (per.loc["river_crossing"][["val_pct", "ood_pct"]] == 0).all().all()
    best = paper["best"].set_index("puzzle")
    assert best.loc["blocks_world", "val_pct"] == 97.27 and best.loc["checkers", "ood_pct"] == 0.10
    shares = paper_failure_shares()
    sums = shares[["invalid_move", "invalid_output", "loop", "premature_stop"]].sum(axis=1)
    assert np.allclose(sums, 100.0, atol=0.15)


def test_write_seqmodels(tmp_path) -> None:
    """The glue splits the trained puzzles' instances with the run's seed and rule and
    writes the table with its schema and version; no training section, no table."""
    run = tmp_path / "run"
    ids = [f"hanoi-{n}-{k}" for n in range(1, 10) for k in range(5)]
    inst = pa.table(
        {"family": ["hanoi"] * len(ids), "instance_id": ids, "n": [int(i.split("-")[1]) for i in ids]}
    )
    (run / "instances" / "hanoi").mkdir(parents=True)
    pq.write_table(inst, run / "instances" / "hanoi" / "part-00000.parquet")
    rows = []
    for model in LABELS:
        for i, iid in enumerate(ids):
            ok = i % 3 == 0
            rows.append(
                {
                    "model": model,
                    "instance_id": iid,
                    "family": "hanoi",
                    "mode": "rollout",
                    "sample": 0,
                    "answered": i % 11 != 5,
                    "solution_length": 3,
                    "success": ok,
                    "valid": ok,
                    "exact_match": ok,
                    "progress_ratio": 1.0,
                    "plan_length": 3,
                    "violation": None if ok else "loop",
                    "n": int(iid.split("-")[1]),
                }
            )
    (run / "scores").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCORES_SCHEMA), run / "scores" / "scores.parquet")
    training = SimpleNamespace(puzzles=["hanoi"], model_names=lambda: dict(LABELS))
    cfg = SimpleNamespace(
        training=training,
        run=SimpleNamespace(seed=3),
        export=SimpleNamespace(split="per_n", in_distribution_max=7),
        families={"hanoi": None},
    )
    path = write_seqmodels(cfg, run)
    assert path == str(run / SEQMODELS_REL)
    table = pq.read_table(path)
    assert table.schema.metadata[b"schema_version"]
    assert table.schema.remove_metadata() == SEQMODELS_SCHEMA.remove_metadata()
    t = table.to_pandas()
    assert set(t["split"]) == {"train", "validation", "ood"}
    assert set(t.loc[t["split"] == "ood", "n"].dropna()) == {8, 9}
    assert int(t.loc[t["n"].isna(), "unanswered"].sum()) == sum(not r["answered"] for r in rows)
    assert t.loc[t["failed"] > 0, "share_loop"].eq(1.0).all()
    assert write_seqmodels(SimpleNamespace(training=None), run) is None


@pytest.mark.parametrize("empty", [pd.DataFrame(), pd.DataFrame(columns=["model", "mode"])])
def test_empty_inputs(empty: pd.DataFrame) -> None:
    t = seqmodel_table(empty, {}, LABELS)
    assert t.empty and list(t.columns) == SEQMODELS_SCHEMA.names
    assert to_table(t, SEQMODELS_SCHEMA).num_rows == 0
