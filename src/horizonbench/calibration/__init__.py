"""Calibration suite: planted truths and nulls for every analysis output (issue 22).

Pure simulation at the table level the analysis reads, then the project's own analysis
functions; no Prefect, no files. Cases live one module per statistic and register themselves;
``load_cases()`` collects them. See ``base`` for the contract and ``benchmarks/calibration.py``
for the full-size figures.
"""

from horizonbench.calibration.base import (
    COVERAGE_95,
    FALSE_POSITIVE_5,
    REPORT,
    ArmResult,
    Case,
    CaseResult,
    Study,
    Target,
    Trial,
    load_cases,
    register,
    results_table,
    run_case,
    study_rngs,
)

__all__ = [
    "COVERAGE_95",
    "FALSE_POSITIVE_5",
    "REPORT",
    "ArmResult",
    "Case",
    "CaseResult",
    "Study",
    "Target",
    "Trial",
    "load_cases",
    "register",
    "results_table",
    "run_case",
    "study_rngs",
]
