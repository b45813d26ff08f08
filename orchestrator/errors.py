"""The driver's errors that the command line turns into messages and exit codes.

Kept free of imports so that every wing, the pure analysis wing included, can raise them.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad value in config or overrides; the message names it and the valid choices."""


class ClusterError(RuntimeError):
    """The Ray cluster cannot be reached or cannot place an engine."""
