"""An offline run never imports the provider SDKs (about 1.7 s of the fixed cost of a
small run): they load with the first API model."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from horizonbench.cli import main
from horizonbench.flows import pipeline, rebuild
from horizonbench.tasks.analyse import scores as analyse
from horizonbench.tasks.evaluate import attempts as evaluate
from horizonbench.tasks.report import page as report
from horizonbench.tasks.score import stage as score
from horizonbench.models.factory import build_model
from horizonbench.models.sdk_errors import classify_sdk_error
from horizonbench.schemas.config import ModelSpec
build_model(ModelSpec(name="o", provider="offline", kind="oracle"))
assert classify_sdk_error(TimeoutError("x"), None).kind
print(sorted(m for m in ("openai", "anthropic") if m in sys.modules))
spec = ModelSpec(name="a", provider="openai_compatible", model="m", base_url="http://127.0.0.1:9/v1")
build_model(spec, {"OPENAI_API_KEY": "sk-test"})
print(sorted(m for m in ("openai", "anthropic") if m in sys.modules))
"""


def test_an_offline_run_imports_no_sdk_and_an_api_model_loads_its_own() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split("\n")[:2] == ["[]", "['openai']"]


def test_the_pipeline_does_not_import_scipy_stats() -> None:
    """scipy.stats (about 0.3 s) loads only with the rank tests that need it; the
    normal quantiles come from scipy.special, to the same bits."""
    probe = (
        "import sys\n"
        "import horizonbench.flows.pipeline, horizonbench.cli.main\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


def test_the_normal_quantiles_match_scipy_stats() -> None:
    import numpy as np
    from scipy import special, stats

    q = np.linspace(1e-6, 1 - 1e-6, 20_001)
    assert np.array_equal(special.ndtri(q), stats.norm.ppf(q))
    z = np.linspace(-38.0, 38.0, 20_001)
    assert np.array_equal(special.ndtr(-z), stats.norm.sf(z))
