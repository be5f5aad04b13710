"""Errors that carry a message meant for the person running horizonbench."""


class HorizonbenchError(Exception):
    """Base class: the CLI prints these as one line instead of a traceback."""


class ConfigError(HorizonbenchError):
    """A configuration file or command-line value is wrong; the message names the field."""


class ValidationFailed(HorizonbenchError):
    """A table broke its Great Expectations suite; the run stops before anything uses it."""


class RunFolderDamaged(ConfigError):
    """A run folder's file is missing or not what its manifest recorded (deleted,
    truncated, changed); the message names it. A ``ConfigError``, so a command that
    reads it prints one line and exits 2, as for any input it cannot use."""
