"""The world study's analysis tables against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from horizonbench.analysis import worlds


def synthetic(seed: int = 0) -> pd.DataFrame:
    """Episodes of two agents over sc x dd with a known success profile; a few rows
    whose horizon was too short (they must never count)."""
    rng = np.random.default_rng(seed)
    rows = []
    profile = {5: 0.95, 10: 0.9, 15: 0.4, 20: 0.05}
    for model, shift in (("a", 0), ("b", 5)):
        for dd in (1, 2):
            for sc, p in profile.items():
                p_eff = profile.get(sc - shift, 0.95) if shift else p
                for i in range(40):
                    rows.append(
                        {
                            "env": "stateful_puzzle",
                            "model": model,
                            "sc": sc,
                            "dd": dd,
                            "success": bool(rng.random() < p_eff),
                            "horizon_short": i >= 38,  # 2 of 40 left out
                            "mean_jaccard": float(np.clip(rng.normal(1.0 - sc / 40, 0.05), 0, 1)),
                            "consistency_rate": 1.0,
                            "dependency_accuracy": 1.0,
                            "self_check_accuracy": 1.0,
                            "invalid_actions": int(rng.integers(0, 3)),
                            "collapse_type": None if rng.random() < 0.5 else "action_validity",
                            "tau_w": float(rng.integers(0, 10)) if rng.random() < 0.7 else math.nan,
                            "tau_a": float(rng.integers(0, 10)),
                        }
                    )
    return pd.DataFrame(rows)


def test_episodes_with_a_short_horizon_never_count():
    eps = synthetic()
    cells = worlds.grid(eps)
    assert (cells["n"] == 38).all()
    a = eps[(eps.model == "a") & (eps.sc == 15) & (eps.dd == 1) & ~eps.horizon_short]
    row = cells[(cells.model == "a") & (cells.sc == 15) & (cells.dd == 1)].iloc[0]
    assert row["successes"] == a["success"].sum() and row["p"] == pytest.approx(a["success"].mean())
    ex = worlds.excluded(eps)
    assert (ex["horizon_short"] == 2).all() and (ex["episodes"] == 40).all()
    # offline agents (no outcome column here) never hit a harness limit
    assert (ex["budget_exceeded"] == 0).all() and (ex["measured"] == cells["n"]).all()
    assert worlds.harness(eps).empty


def test_contrasts_match_scipy_and_the_adjustments_are_over_the_whole_table():
    eps = synthetic()
    table = worlds.contrasts(eps)
    assert len(table) == 2 * 2 * 3
    ok = eps[~eps.horizon_short]
    for r in table.itertuples():
        x = ok[(ok.model == r.model) & (ok.dd == r.dd) & (ok.sc == r.sc_from)]
        y = ok[(ok.model == r.model) & (ok.dd == r.dd) & (ok.sc == r.sc_to)]
        ref = stats.mannwhitneyu(x["mean_jaccard"], y["mean_jaccard"], alternative="two-sided")
        assert r.mw_u == pytest.approx(ref.statistic) and r.mw_p == pytest.approx(ref.pvalue)
        p1, p2 = x["success"].mean(), y["success"].mean()
        assert r.cohens_h == pytest.approx(2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2)))
        gt = sum(a > b for a in x["mean_jaccard"] for b in y["mean_jaccard"])
        lt = sum(a < b for a in x["mean_jaccard"] for b in y["mean_jaccard"])
        assert r.cliffs_delta == pytest.approx((gt - lt) / (len(x) * len(y)))
        assert r.hodges_lehmann == pytest.approx(
            np.median(np.subtract.outer(x["mean_jaccard"].to_numpy(), y["mean_jaccard"].to_numpy()))
        )
    p = table["mw_p"].to_numpy()
    m = len(p)
    assert table["mw_p_bonferroni"].to_numpy() == pytest.approx(np.minimum(1, p * m))
    order = np.argsort(p)
    holm = np.maximum.accumulate(np.minimum(1, (m - np.arange(m)) * p[order]))
    assert table["mw_p_holm"].to_numpy()[order] == pytest.approx(holm)


def test_identical_samples_give_no_evidence_rather_than_an_error():
    eps = synthetic()
    eps["mean_jaccard"] = 1.0
    table = worlds.contrasts(eps)
    assert (table["mw_p"] == 1.0).all() and (table["cliffs_delta"] == 0.0).all()


def test_critical_points_cliffs_and_bands_per_agent_and_dd():
    eps = synthetic()
    tables = worlds.world_tables(eps, bootstrap=100, seed=1)
    crit = tables["critical_points"]
    assert set(zip(crit.model, crit.dd, strict=True)) == {("a", 1), ("a", 2), ("b", 1), ("b", 2)}
    a = crit[crit.model == "a"]
    assert a["sc_star"].between(10, 15).all()
    assert (a["sc_star_low"] <= a["sc_star"]).all() and (a["sc_star"] <= a["sc_star_high"]).all()
    b = crit[crit.model == "b"]
    assert (b["sc_star"] > a["sc_star"].min()).all()  # the shifted agent crosses later
    assert len(tables["cliffs"]) == 2 * 2 * 3
    assert set(tables["band_widths"]["model"]) == {"a", "b"}
    lags = tables["lags"]
    assert set(lags["model"]) == {"a", "b"} and (lags["n_episodes"] == 8 * 38).all()
    steps = tables["step_metrics"]
    assert (steps["episodes"] == 38).all()
    for name, df in tables.items():
        assert list(df.columns)[0] == "env", name
