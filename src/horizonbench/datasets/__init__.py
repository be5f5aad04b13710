"""Problem families. Importing this package registers the built-in families."""

from horizonbench.core.registry import register_family
from horizonbench.datasets.maze import MazeFamily

register_family(MazeFamily.name, MazeFamily)
