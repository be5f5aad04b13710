"""Configs shipped with the package (the demo), readable from any install."""
