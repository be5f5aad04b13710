"""Evaluate stage: models answer instances (``attempts``, with rollout episodes as
conversations in ``rollouts``), agents play the world study (``world_episodes`` offline,
``world_models`` through the harness), and ``estimate`` says what a run would send and
cost without sending anything. The stage's Prefect tasks live in those modules (see the
``tasks`` package's docstring for why)."""
