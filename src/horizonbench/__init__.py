"""horizonbench: how many steps can a model reason before it collapses, and why."""

__version__ = "0.1.0"
