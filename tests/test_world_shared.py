"""The world environments' shared mechanics and the study config's place in the layers.

- the config models read a ``worlds`` section without importing any environment
  (schemas sit below datasets), and the environment names the schema accepts are the
  registry's;
- the last-seen bookkeeping of partial observation (``worlds/observation.py``) answers
  what a brute-force scan of everything shown so far answers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.study import ENVIRONMENTS
from horizonbench.schemas.config import WorldsSpec


def test_the_worlds_schema_imports_no_environment() -> None:
    """Validating a worlds section and building its study loads no datasets module."""
    code = textwrap.dedent(
        """
        import sys
        from horizonbench.schemas.config import WorldsSpec
        spec = WorldsSpec.model_validate({
            "environments": ["graph_nav"], "regime": "III", "sc": [5], "dd": [1],
            "agents": [{"name": "o", "kind": "oracle"}],
        })
        assert len(spec.study().episodes(0)) == 100
        loaded = sorted(m for m in sys.modules if m.startswith("horizonbench.datasets"))
        print(loaded)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_schema_names_the_registered_environments() -> None:
    """The config's list of environment names is the registry's, in its order."""
    (literal,) = get_args(WorldsSpec.model_fields["environments"].annotation)
    assert get_args(literal) == tuple(ENVIRONMENTS)
