"""Thin Prefect tasks: read inputs, call the pure code, write outputs atomically."""
