"""The pipeline's rooms, one sub-package per stage in the order the flow runs them
(``generate`` -> ``validate`` -> ``evaluate`` -> ``score`` -> ``analyse`` -> ``report``),
plus the two every stage stands on: ``run_folder`` (where the tables live) and ``cluster``
(where the work runs).

In a stage's room, ``stage.py`` holds its Prefect tasks, thin: read inputs, call the
plain functions beside it (which run without Prefect), write outputs atomically, log.
The evaluate stage is the exception: its task runs are part of how it runs (one task run
per model beside the shared engine, submitted outside the transaction), so they stay in
``attempts.py``, ``world_episodes.py`` and ``world_models.py`` next to that glue."""
