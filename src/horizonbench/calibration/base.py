"""The calibration suite's contract: a case, its two arms, a runner and a registry.

Why this exists: a statistic is not done until it is calibrated (DESIGN.md). Each case plants
a known truth in simulated tables of the real schemas, runs the project's own analysis
function on them, and asks one yes/no question per simulated study (did the 95% interval
cover the truth? was the effect found? was a change flagged?). Over many seeded studies the
share of yeses is a rate with a Wilson interval, compared with the case's target.

A case has two arms:

- ``planted``: the effect is there; the rate is a coverage (intervals that cover the truth)
  or a detection rate (power);
- ``null``: the effect is absent; the rate is the false-positive rate.

A study function is ``study(rng, scale) -> Trial``: pure, seeded only by ``rng`` (one
``numpy.random.Generator`` per study, spawned from a ``SeedSequence`` keyed by the case, the
arm and the root seed), with ``scale`` shrinking or growing the simulated study (1.0 = the
size the benchmark uses; tests pass smaller values to stay within seconds).

Other modules add cases with :func:`register` at import time; :func:`load_cases` imports every
module of this package, so a new case is one new file here and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from horizonbench.analysis.phase import wilson_interval
from horizonbench.core.seeding import derive_seed

Arm = Literal["planted", "null"]
Verdict = Literal["pass", "fail", "unclear", "report"]


@dataclass(frozen=True)
class Trial:
    """The outcome of one simulated study.

    ``hit`` is the yes/no answer the arm counts (covered / detected / flagged); ``None`` when
    the statistic gave no answer at all (no fit, no crossing): such studies are counted apart
    and never silently dropped from the denominator of a pass. ``values`` carries side
    figures averaged over studies (e.g. the WLS fit's relative bias).
    """

    hit: bool | None
    values: Mapping[str, float] = field(default_factory=dict)


Study = Callable[[np.random.Generator, float], Trial]


@dataclass(frozen=True)
class Target:
    """The acceptable range of an arm's rate; ``report_only`` when there is no bar to pass.

    The verdict compares the measured rate, not its interval, with the range (``pass`` inside,
    ``fail`` when even the Wilson interval misses the range, ``unclear`` in between), so a
    run of too few studies says so instead of passing by luck.
    """

    low: float = 0.0
    high: float = 1.0
    report_only: bool = False

    def describe(self) -> str:
        if self.report_only:
            return "report"
        if self.low <= 0.0:
            return f"<= {self.high:.2f}"
        if self.high >= 1.0:
            return f">= {self.low:.2f}"
        return f"{self.low:.2f}-{self.high:.2f}"


COVERAGE_95 = Target(0.90, 0.98)
FALSE_POSITIVE_5 = Target(0.0, 0.05)
REPORT = Target(report_only=True)


@dataclass(frozen=True)
class Case:
    """One calibration case: a statistic, what is planted, what the null is, and the studies.

    ``measure`` names what the planted arm's rate is ("coverage", "detection", "recovery").
    ``null_study`` may be ``None`` for a pure coverage case (coverage has no null: the truth is
    always there to cover).
    """

    name: str
    statistic: str
    planted: str
    null: str
    measure: str
    planted_study: Study
    planted_target: Target = COVERAGE_95
    null_study: Study | None = None
    null_target: Target = FALSE_POSITIVE_5
    #: what the null arm's rate is; a case whose "null" is a rival reading (the rate an
    #: older rule gave) names it here
    null_measure: str = "false positives"


@dataclass(frozen=True)
class ArmResult:
    """One arm's rate over the studies, with its Wilson 95% interval and verdict."""

    arm: Arm
    measure: str
    hits: int
    studies: int
    undefined: int
    rate: float
    low: float
    high: float
    target: Target
    verdict: Verdict
    values: Mapping[str, float]


@dataclass(frozen=True)
class CaseResult:
    """A case's arms after :func:`run_case`."""

    case: Case
    arms: tuple[ArmResult, ...]

    @property
    def passed(self) -> bool:
        return all(a.verdict in ("pass", "report") for a in self.arms)

    def arm(self, arm: Arm) -> ArmResult:
        for a in self.arms:
            if a.arm == arm:
                return a
        raise KeyError(arm)


def verdict(rate: float, low: float, high: float, target: Target) -> Verdict:
    """``pass`` if the rate lies in the target, ``fail`` if its whole interval misses it."""
    if target.report_only:
        return "report"
    if not np.isfinite(rate):
        return "fail"
    if target.low <= rate <= target.high:
        return "pass"
    if high < target.low or low > target.high:
        return "fail"
    return "unclear"


def study_rngs(case_name: str, arm: Arm, n_studies: int, seed: int) -> list[np.random.Generator]:
    """One generator per study: ``SeedSequence`` children of a sha256 of (seed, case, arm)."""
    root = np.random.SeedSequence(derive_seed(seed, "calibration", case_name, arm))
    return [np.random.default_rng(child) for child in root.spawn(n_studies)]


def run_arm(
    case: Case, arm: Arm, study: Study, target: Target, n_studies: int, seed: int, scale: float
) -> ArmResult:
    """Run ``n_studies`` seeded studies of one arm and summarise them.

    Undefined studies (``hit is None``) count as misses in the rate: a statistic that gives
    no interval has not covered the truth, and one that cannot decide has not detected.
    """
    hits = undefined = 0
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    measure = case.measure if arm == "planted" else case.null_measure
    for rng in study_rngs(case.name, arm, n_studies, seed):
        trial = study(rng, scale)
        if trial.hit is None:
            undefined += 1
        elif trial.hit:
            hits += 1
        for key, value in trial.values.items():
            if np.isfinite(value):
                sums[key] = sums.get(key, 0.0) + float(value)
                counts[key] = counts.get(key, 0) + 1
    low, high = wilson_interval(hits, n_studies) if n_studies else (float("nan"), float("nan"))
    rate = hits / n_studies if n_studies else float("nan")
    means = {k: sums[k] / counts[k] for k in sorted(sums)}
    return ArmResult(
        arm, measure, hits, n_studies, undefined, rate, low, high, target,
        verdict(rate, low, high, target), means,
    )  # fmt: skip


def run_case(case: Case, n_studies: int = 200, seed: int = 0, scale: float = 1.0) -> CaseResult:
    """Both arms of ``case`` over ``n_studies`` studies each (same seeds, same bytes)."""
    arms = [run_arm(case, "planted", case.planted_study, case.planted_target, n_studies, seed, scale)]
    if case.null_study is not None:
        arms.append(run_arm(case, "null", case.null_study, case.null_target, n_studies, seed, scale))
    return CaseResult(case, tuple(arms))


_REGISTRY: dict[str, Case] = {}


def register(case: Case) -> Case:
    """Add a case to the suite; a second case of the same name is a mistake, not an update."""
    if case.name in _REGISTRY and _REGISTRY[case.name] is not case:
        raise ValueError(f"calibration case {case.name!r} is registered twice")
    _REGISTRY[case.name] = case
    return case


def load_cases() -> dict[str, Case]:
    """Import every module of this package (each registers its cases), then the registry."""
    package = importlib.import_module("horizonbench.calibration")
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_") and info.name != "base":
            importlib.import_module(f"horizonbench.calibration.{info.name}")
    return dict(sorted(_REGISTRY.items()))


def results_table(results: Iterable[CaseResult]) -> list[dict[str, object]]:
    """One row per arm: the benchmark prints these and the tests read them."""
    rows: list[dict[str, object]] = []
    for result in results:
        for a in result.arms:
            rows.append(
                {
                    "case": result.case.name,
                    "arm": a.arm,
                    "measure": a.measure,
                    "target": a.target.describe(),
                    "measured": a.rate,
                    "low": a.low,
                    "high": a.high,
                    "studies": a.studies,
                    "undefined": a.undefined,
                    "verdict": a.verdict,
                    **{f"mean {k}": v for k, v in a.values.items()},
                }
            )
    return rows
