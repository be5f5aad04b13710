"""seqBench-style mazes: Kruskal maze, rewind construction of keys and locked doors."""

from horizonbench.datasets.maze.family import MazeFamily, MazeParams, MazePrompt

__all__ = ["MazeFamily", "MazeParams", "MazePrompt"]
