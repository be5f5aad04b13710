"""Errors that carry a message meant for the person running horizonbench."""


class HorizonbenchError(Exception):
    """Base class: the CLI prints these as one line instead of a traceback."""


class ConfigError(HorizonbenchError):
    """A configuration file or command-line value is wrong; the message names the field."""


class ValidationFailed(HorizonbenchError):
    """A table broke its Great Expectations suite; the run stops before anything uses it."""
