"""The success-vs-L figure (report ``#success``, seqBench Figure 1) keeps its legend off the
data and never draws a fit that misrepresents it (issue 25 review): a rising WLS fit is a
"no decay" level within the bins, not a flat line under all of them."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from horizonbench.analysis.decay import fit_binomial_mle, fit_wls_origin, fit_wls_prefactor
from horizonbench.reports import plots

#: two models, one decaying and one rising (as the demo's noisy-2pct), 5 bins each
BY_LENGTH = pd.DataFrame(
    {
        "model": ["decays"] * 5 + ["rises"] * 5,
        "L": [2, 4, 6, 8, 10] * 2,
        "attempts": [20] * 10,
        "successes": [18, 14, 9, 6, 3, 7, 8, 9, 11, 12],
    }
).assign(success_rate=lambda d: d["successes"] / d["attempts"])


def _fits() -> pd.DataFrame:
    rows = []
    for model, g in BY_LENGTH.groupby("model"):
        L, rate, n = (g[c].to_numpy(dtype=float) for c in ("L", "success_rate", "attempts"))
        attempts_L = np.repeat(L, n.astype(int))
        pairs = zip(g["successes"], g["attempts"], strict=True)
        attempts_y = np.concatenate([[1.0] * s + [0.0] * (t - s) for s, t in pairs])
        for fit in (
            fit_wls_prefactor(L, rate, n),
            fit_wls_origin(L, rate, n),
            fit_binomial_mle(attempts_L, attempts_y, bootstrap=0),
        ):
            rows.append({"model": model, "method": fit.method, "L0": fit.L0, "A": fit.A, "note": fit.note})
    return pd.DataFrame(rows)


def _drawn() -> tuple[Figure, object]:
    fig = Figure(figsize=(9.0, 4.2))
    ax = plots.draw_success_vs_length(fig, BY_LENGTH, _fits(), log=False, bin_width=1)
    fig.draw_without_rendering()
    return fig, ax


def test_the_legend_sits_outside_the_axes() -> None:
    fig, ax = _drawn()
    (legend,) = fig.legends
    box, axes_box = legend.get_window_extent(), ax.get_window_extent()
    assert len(legend.get_texts()) >= 6
    assert not box.overlaps(axes_box), (box, axes_box)
    assert not ax.get_legend()


def test_a_rising_wls_fit_is_labelled_no_decay_and_drawn_within_the_data() -> None:
    fig, ax = _drawn()
    rising = BY_LENGTH[BY_LENGTH["model"] == "rises"]["success_rate"]
    lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    (label,) = [k for k in lines if k.startswith("rises WLS log A")]
    assert "no decay" in label
    level = np.asarray(lines[label], dtype=float)
    assert np.all(level >= rising.min()) and np.all(level <= rising.max())
