"""The store's exceptions (one module so that the store, the integrity checks and the lock share
them without importing each other)."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of the store's errors."""


class UnknownTable(StoreError):
    pass


class SchemaMismatch(StoreError):
    pass


class StoreLocked(StoreError):
    """Another process holds the store's writer lock."""


class LeaseLost(StoreLocked):
    """The writer lock this driver held on an object store was taken over (its lease expired
    unrenewed, e.g. the process was paused for longer than a lease): it must not write more."""


class NotLockHolder(StoreError):
    """A write that only the holder of the writer lock may do (quarantine) was asked of a Store
    that does not hold it."""


class StoreDamaged(StoreError):
    """Files a command would read fail their checks (`storage.damage` finds and names them);
    the command line exits 1 (not 2: the input is fine, the store is not). Here rather than in
    storage.damage so that the command line catches it without importing the checks."""
