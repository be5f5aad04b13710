"""Validate stage: a table's Great Expectations suite (``checks``), run before the table
leaves staging, and the offline data docs it leaves in the run folder (``data_docs``)."""
