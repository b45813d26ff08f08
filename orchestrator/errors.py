"""Errors the CLI turns into messages (kept free of heavy imports, so cli.py can import it)."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The Ray cluster cannot be reached or cannot place an engine."""
