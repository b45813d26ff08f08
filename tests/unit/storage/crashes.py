"""Killing the writer between two steps of a compaction, for the compaction tests.

Every step that changes what is on disk goes through one of the Store methods in STEPS (a
temporary file written, a file renamed into place, a file removed, the manifest committed, a
loose shard written). `crash_before(n)` makes the n-th such call raise `Crash` instead, leaving
the store exactly as a kill at that moment would (nothing after it happens; the lock is released
as the OS releases a dead process's lock). `KILL_SCRIPT` does the same with a real SIGKILL in a
child process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from storage.store import Store

STEPS = ("put_temp", "reveal", "remove", "commit_manifest", "write_shard")


class Crash(Exception):
    """The writer died here."""


@contextlib.contextmanager
def crash_before(monkeypatch: pytest.MonkeyPatch, n: int | None) -> Iterator[list[str]]:
    """Raise Crash at the n-th step (None: never); yields the steps taken, by name."""
    taken: list[str] = []
    with monkeypatch.context() as patch:
        for name in STEPS:
            original = getattr(Store, name)

            def step(self, *args, _original=original, _name=name, **kwargs):
                taken.append(_name)
                if n is not None and len(taken) == n:
                    raise Crash(f"killed before step {n} ({_name})")
                return _original(self, *args, **kwargs)

            patch.setattr(Store, name, step)
        yield taken


# argv: store root, the step to die at, then "compact" or "rewrite <table> <key>"
KILL_SCRIPT = """
import os, signal, sys
from storage.compact import PackPolicy, compact
from storage.store import Store
STEPS = ("put_temp", "reveal", "remove", "commit_manifest", "write_shard")
root, at, what = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
taken = []
for name in STEPS:
    original = getattr(Store, name)
    def step(self, *args, _original=original, **kwargs):
        taken.append(1)
        if len(taken) == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return _original(self, *args, **kwargs)
    setattr(Store, name, step)
store = Store(root)
with store.writer_lock():
    if what[0] == "compact":
        compact(store, PackPolicy(row_group_rows=1, row_group_rows_of={}))
    else:
        table, key = what[1], what[2]
        store.write_table(table, key, store.read_shard(table, key))
"""
