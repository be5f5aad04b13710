"""The agent harness: real models play the world-model environments through the
Planner / Updater / Self-Diag loop, every call through the evaluation engine."""
