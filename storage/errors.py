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


class NotLockHolder(StoreError):
    """A write that only the holder of the writer lock may do (quarantine) was asked of a Store
    that does not hold it."""
