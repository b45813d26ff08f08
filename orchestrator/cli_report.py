"""Subcommands for reading a store: report, export and import of harness generations.

(Placeholder registry; the commands are added by the report module.)"""

from __future__ import annotations

COMMANDS: dict = {}


def register(sub) -> None:
    return None
