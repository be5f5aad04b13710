"""Trajectory-level collapse statistics (Section 3, Appendix G of the phase-transition paper).

Per episode, from per-step arrays: when the world-state fidelity fails (:func:`tau_w`,
:func:`tau_w_onset`), when action validity fails (:func:`tau_a`), the lag between them
(:func:`lag`), which steps are bad (:func:`bad_steps`, :func:`dependency_correct`), where
the collapse starts and of what type (:func:`collapse_onset`, :func:`collapse_type`);
over episodes, the lag summary (:func:`lag_distribution`).

Where the paper's reference code went wrong we do not follow it: ``tau_w`` and
``tau_a`` are positions in the *same* per-step arrays (0-based), and dependency
correctness compares the declared *required* preconditions with the gold *required*
set (not with the missing ones).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from horizonbench.analysis.inputs import bool_series, float_series, require_columns

#: trajectory defaults of Section 3 / Appendix G: fidelity window h = 5 below 1/2;
#: collapse onset is the first 3-of-next-5 bad window
TAU_W_WINDOW = 5
TAU_W_THRESHOLD = 0.5
ONSET_K = 3
ONSET_WINDOW = 5
COLLAPSE_TYPES = ("world_state", "action_validity", "self_check", "compound")


def tau_w(R, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """First step at which the trailing fidelity mean drops below ``threshold``.

    ``R[t]`` is the gold-scored fidelity (Appendix G: Jaccard of agent and gold world
    state) of the state the agent held when it chose action ``t``, so ``R`` and the
    validity series of :func:`tau_a` index the same steps. Section 3 defines
    ``tau_W = inf{t : mean(R_{t-h+1..t}) < 1/2}`` with ``h = 5``; we return that ``t``
    as a 0-based position in ``R``, or None if the mean never drops below.

    For ``t < h - 1`` the window would reach before the episode; we use the mean of the
    steps available (``R_0..R_t``) instead of padding or skipping. Why: skipping would
    make a world state that is wrong from the very first step look healthy for four
    steps, and padding would invent fidelity values; the available-window mean detects
    an early collapse as soon as the data show it.

    Fidelity values must be finite: a step whose state could not be read must be
    scored by the caller (e.g. as 0), not left missing -- the reference code turned a
    malformed update into an empty state silently.
    """
    r = float_series(R, "R")
    if h < 1:
        raise ValueError("h must be at least 1")
    if r.size == 0:
        return None
    # window sums computed window by window, not as differences of a running sum: the
    # latter loses low-order bits over a long episode and can move a mean that equals
    # the threshold to just below it
    head = min(h - 1, r.size)
    means = [float(r[: t + 1].sum()) / (t + 1) for t in range(head)]
    if r.size >= h:
        means.extend(np.lib.stride_tricks.sliding_window_view(r, h).sum(axis=1) / h)
    hits = np.flatnonzero(np.asarray(means) < threshold)
    return int(hits[0]) if hits.size else None


def tau_w_onset(R, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """The step at which the fidelity drop that :func:`tau_w` detects began.

    ``tau_w`` fires when the *trailing mean* of ``h`` steps falls below ``threshold``, so it
    lags the drop itself: a fall from about 0.9 to about 0.15 needs three low steps in the
    window, and ``tau_w`` lands two steps after the first of them (the calibration suite's
    lag case: a world state failing 4 steps before the first invalid action reads as a
    lag of -1.9, and a simultaneous failure as +2.1, i.e. "action first"). This is the
    first step of the window ending at ``tau_w`` from which every fidelity value through
    ``tau_w`` is below ``threshold``; ``tau_w`` itself when its own value is not below
    (the mean fell without a sustained run). None when ``tau_w`` is None.
    """
    r = float_series(R, "R")
    tw = tau_w(r, h, threshold)
    if tw is None:
        return None
    start = tw
    while start > max(0, tw - h + 1) and r[start - 1] < threshold and r[start] < threshold:
        start -= 1
    return int(start)


def tau_a(valid) -> int | None:
    """First step index (0-based, same index as :func:`tau_w`) with an invalid action.

    ``valid[t]`` says whether action ``t`` had all its gold preconditions in the gold
    state (Appendix G). The paper writes ``inf{t >= 1 : A_t = 0}`` with 1-based steps
    and its reference code counted ``tau_W`` and ``tau_A`` on different step indices,
    which shifts every lag; here both are positions in per-step arrays of one episode.
    None when every action was valid.
    """
    v = bool_series(valid, "valid")
    bad = np.flatnonzero(~v)
    return int(bad[0]) if bad.size else None


def lag(R, valid, h: int = TAU_W_WINDOW, threshold: float = TAU_W_THRESHOLD) -> int | None:
    """``tau_w - tau_a`` for one episode; negative means the world state failed first.

    Both series must have one entry per step (same length), which is the guarantee
    that the two times are on the same index. None when either time is undefined.
    """
    r = float_series(R, "R")
    v = bool_series(valid, "valid")
    if r.size != v.size:
        raise ValueError("R and valid must have one entry per step (same length)")
    tw, ta = tau_w(r, h, threshold), tau_a(v)
    if tw is None or ta is None:
        return None
    return tw - ta


def dependency_correct(declared_required: Iterable, gold_required: Iterable) -> bool:
    """Whether the Planner's declared required preconditions equal the gold required set.

    Appendix G's "dependency correctness". The reference code compared the declared
    *required* set with the gold *missing* preconditions, which marks a perfect
    declaration wrong whenever nothing is missing; here like is compared with like.
    Order and repetition do not matter.
    """
    return set(declared_required) == set(gold_required)


def bad_steps(action_valid, world_consistent, dependency_ok) -> np.ndarray:
    """Appendix H's ``bad(t) = not valid or not consistent or not dependency-correct``."""
    a = bool_series(action_valid, "action_valid")
    w = bool_series(world_consistent, "world_consistent")
    d = bool_series(dependency_ok, "dependency_ok")
    if not a.size == w.size == d.size:
        raise ValueError("per-step series must have the same length")
    return ~a | ~w | ~d


def collapse_onset(
    bad, k: int = ONSET_K, window: int = ONSET_WINDOW, require_bad_start: bool = True
) -> int | None:
    """First step ``t`` such that at least ``k`` of steps ``t .. t + window - 1`` are bad.

    Appendix G's collapse onset ``tau_o``: "first step of a 3-of-next-5 bad window".
    Why a k-of-window rule and not the first bad step: an isolated slip that the agent
    recovers from is not a collapse.

    ``require_bad_start`` (default) also asks step ``t`` itself to be bad. Without it
    the window, which looks *forward*, can start on good steps: for
    ``bad = 0 0 0 0 0 0 1 1 1`` the bare rule dates the collapse at step 4, two steps
    before the first error. Any qualifying window still qualifies when moved forward
    to its first bad step (it loses only good steps), so the anchored onset is the
    first bad step that opens a k-of-window run, and it differs from the bare rule
    only by those leading good steps. ``require_bad_start=False`` gives the bare rule.

    Near the end of an episode the window is whatever steps remain, and it still needs
    ``k`` bad steps: an episode that ends in a burst of errors has collapsed even if it
    stopped before five more steps. None if no window qualifies.
    """
    b = bool_series(bad, "bad")
    if not 1 <= k <= window:
        raise ValueError("need 1 <= k <= window")
    if b.size == 0:
        return None
    csum = np.concatenate(([0], np.cumsum(b.astype(np.int64))))
    t = np.arange(b.size)
    end = np.minimum(b.size, t + window)
    ok = csum[end] - csum[t] >= k
    if require_bad_start:
        ok &= b
    hits = np.flatnonzero(ok)
    return int(hits[0]) if hits.size else None


def collapse_type(
    world_bad,
    action_bad,
    self_check_bad=None,
    k: int = ONSET_K,
    window: int = ONSET_WINDOW,
    onset: int | None = None,
) -> str | None:
    """Which per-step signal drives the collapse: one of :data:`COLLAPSE_TYPES` or None.

    Signals (one bool per step, True = bad): ``world_bad`` (world state wrong, e.g.
    fidelity below 1/2 or inconsistent), ``action_bad`` (invalid action),
    ``self_check_bad`` (Self-Diag disagreed with the gold validity verdict; optional).

    Rule. The onset window is ``[onset, onset + window)``; ``onset`` defaults to
    :func:`collapse_onset` of the union of the signals (pass your own, e.g. from
    :func:`bad_steps`, to use the paper's bad-step definition). No onset: None. In the
    window, a signal that is bad on at least ``k`` steps meets the onset criterion on
    its own; exactly one such signal names the type, two or more give "compound". If no
    signal reaches ``k`` alone, the signals present in the window decide: one signal
    present names the type, several give "compound" (the collapse needed them
    together), none gives None. Why this rule: the type should say which failure was
    sufficient for the collapse, not which one happened to appear once in it.
    """
    signals = {
        "world_state": bool_series(world_bad, "world_bad"),
        "action_validity": bool_series(action_bad, "action_bad"),
    }
    if self_check_bad is not None:
        signals["self_check"] = bool_series(self_check_bad, "self_check_bad")
    sizes = {s.size for s in signals.values()}
    if len(sizes) != 1:
        raise ValueError("per-step signals must have the same length")
    if onset is None:
        union = np.zeros(sizes.pop(), dtype=bool)
        for s in signals.values():
            union |= s
        onset = collapse_onset(union, k, window)
        if onset is None:
            return None
    counts = {name: int(s[onset : onset + window].sum()) for name, s in signals.items()}
    dominant = [name for name, c in counts.items() if c >= k]
    if not dominant:
        dominant = [name for name, c in counts.items() if c > 0]
    if not dominant:
        return None
    return dominant[0] if len(dominant) == 1 else "compound"


def mean_t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean (NaN below two values; the point when they all agree).

    Deterministic, unlike a bootstrap, so a rebuilt analysis gives the same bytes; the
    calibration suite checks its coverage on planted lags."""
    from scipy import stats  # lazily, as for the rank tests: start-up pays for what it uses

    v = np.asarray(values, dtype=float)
    n = int(v.size)
    if n < 2:
        return math.nan, math.nan
    m = float(v.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return m - half, m + half


def lag_distribution(episodes: pd.DataFrame) -> dict[str, float]:
    """Summary of ``tau_w - tau_a`` over failed episodes with both times defined.

    ``episodes`` has columns ``success`` (bool/0-1), ``tau_w`` and ``tau_a`` (numbers,
    NaN/None when undefined). Section 5.1's mechanism claim is about *failed* episodes
    whose world state and action validity both failed ("paired"), so only those enter.
    Returns counts and, over the paired episodes, the median and mean lag with the
    mean's t interval (``mean_low``/``mean_high``), and the shares with the world state
    first (``tau_w < tau_a``), simultaneous, and action first; the statistics are NaN
    when no episode is paired.

    ``tau_w`` is the paper's (the trailing mean of 5 steps below 1/2): it fires about
    two steps after a sharp drop, so its lag reads late by that much (the calibration
    suite: a world state failing 4 steps first reads -1.9). With a ``tau_w_onset``
    column (:func:`tau_w_onset`, the start of the drop ``tau_w`` detects) the same
    summary of ``tau_w_onset - tau_a`` comes beside it (``onset_*``): that is the lag
    the suite recovers within its interval.
    """
    require_columns(episodes, ["success", "tau_w", "tau_a"], "episodes")
    success = bool_series(episodes["success"].to_numpy(), "success")
    tw = pd.to_numeric(episodes["tau_w"], errors="raise").to_numpy(dtype=float)
    ta = pd.to_numeric(episodes["tau_a"], errors="raise").to_numpy(dtype=float)
    failed = ~success
    paired = failed & np.isfinite(tw) & np.isfinite(ta)
    lags = tw[paired] - ta[paired]
    n = int(lags.size)

    def share(mask: np.ndarray) -> float:
        return float(mask.mean()) if n else math.nan

    low, high = mean_t_interval(lags)
    out: dict[str, float] = {
        "n_episodes": int(success.size),
        "n_failed": int(failed.sum()),
        "count": n,
        "median": float(np.median(lags)) if n else math.nan,
        "mean": float(lags.mean()) if n else math.nan,
        "share_world_first": share(lags < 0),
        "share_simultaneous": share(lags == 0),
        "share_action_first": share(lags > 0),
        "mean_low": low,
        "mean_high": high,
    }
    if "tau_w_onset" in episodes.columns:
        on = pd.to_numeric(episodes["tau_w_onset"], errors="raise").to_numpy(dtype=float)
        both = failed & np.isfinite(on) & np.isfinite(ta)
        onset_lags = on[both] - ta[both]
    else:
        onset_lags = np.empty(0)
    k = int(onset_lags.size)
    o_low, o_high = mean_t_interval(onset_lags)
    out.update(
        onset_count=k,
        onset_mean=float(onset_lags.mean()) if k else math.nan,
        onset_mean_low=o_low,
        onset_mean_high=o_high,
        onset_share_world_first=float((onset_lags < 0).mean()) if k else math.nan,
    )
    return out
