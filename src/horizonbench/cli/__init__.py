"""The ``horizonbench`` command."""
