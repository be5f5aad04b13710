"""Prefect flows: the only place that knows the order of the stages."""
