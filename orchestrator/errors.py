"""The driver's errors that the command line turns into messages and exit codes.

Kept free of imports so that every wing, the pure analysis wing included, can raise them.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad value in config or overrides; the message names it and the valid choices."""


class ClusterError(RuntimeError):
    """The Ray cluster cannot be reached or cannot place an engine."""


class Interrupted(BaseException):
    """A run was asked to stop (SIGTERM from a scheduler's preemption or time limit, SIGINT
    from a terminal). A BaseException, like KeyboardInterrupt: nothing may swallow it."""

    def __init__(self, signum: int, name: str):
        super().__init__(f"interrupted by {name}")
        self.signum = signum
        self.name = name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 143 for SIGTERM, 130 for SIGINT
