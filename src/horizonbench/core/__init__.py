"""Shared vocabulary of every layer: plans, messages, scores, seeds, the family registry.

Nothing here imports another horizonbench package, so every layer may import it.
"""

from horizonbench.core.errors import ConfigError, HorizonbenchError, ValidationFailed
from horizonbench.core.registry import Family, family_names, get_family, register_family
from horizonbench.core.seeding import derive_seed, rng_for
from horizonbench.core.types import (
    Candidate,
    Completion,
    Message,
    ParsedAnswer,
    Plan,
    Score,
    Step,
)

__all__ = [
    "Candidate",
    "Completion",
    "ConfigError",
    "Family",
    "HorizonbenchError",
    "Message",
    "ParsedAnswer",
    "Plan",
    "Score",
    "Step",
    "ValidationFailed",
    "derive_seed",
    "family_names",
    "get_family",
    "register_family",
    "rng_for",
]
