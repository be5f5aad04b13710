"""The pipeline's rooms, one sub-package per stage in the order the flow runs them
(``generate`` -> ``validate`` -> ``evaluate`` -> ``score`` -> ``analyse`` -> ``report``),
plus the two every stage stands on: ``run_folder`` (where the tables live) and ``cluster``
(where the work runs). In a stage's room, ``stage.py`` holds its thin Prefect tasks (read
inputs, call the machinery beside it, write outputs atomically); the other modules are
plain functions that run without Prefect."""
