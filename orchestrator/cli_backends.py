"""Subcommands comparing backends (placeholder registry; filled by the vLLM work)."""

from __future__ import annotations

COMMANDS: dict = {}


def register(sub) -> None:
    return None
