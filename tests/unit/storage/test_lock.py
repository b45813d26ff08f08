"""The writer lock of an object store is a lease (storage/lock.py): renewed while held, taken
over once its holder stopped renewing it, never taken from a holder that renews, and checked
before every commit. On fsspec's in-memory filesystem (an object store without a server)."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
import uuid

import pytest

from storage.errors import LeaseLost, StoreLocked
from storage.lock import LOCK_OBJECT, Holder
from storage.store import Store

LEASE_S = 0.4  # short, so that a lease expires within a test


@pytest.fixture
def store() -> Store:
    return Store(f"memory://lease-{uuid.uuid4().hex[:8]}/store", lease_s=LEASE_S)


def lock_text(store: Store) -> str | None:
    return store._read_lock(f"{store.root}/{LOCK_OBJECT}")


def put_lock(store: Store, **fields) -> str:
    """A lock object written by another driver (on another host unless it says)."""
    holder = {"id": uuid.uuid4().hex, "pid": 1, "host": "elsewhere", **fields}
    text = json.dumps(holder)
    store.fs.create_dir(store.root, recursive=True)
    with store.fs.open_output_stream(f"{store.root}/{LOCK_OBJECT}") as out:
        out.write(text.encode())
    return text


def rows(key: str) -> list[dict]:
    return [{"setting_key": key, "status": "complete"}]


def test_a_held_lock_is_a_lease_its_holder_renews(store):
    with store.writer_lock():
        first = Holder.parse(lock_text(store))
        time.sleep(LEASE_S * 1.5)  # at least one renewal (every lease / 3)
        later = Holder.parse(lock_text(store))
        assert (first.id, first.host, first.lease_s) == (later.id, socket.gethostname(), LEASE_S)
        assert later.expires_at > first.expires_at
        assert json.loads(later.text)["renewals"] >= 1
    assert lock_text(store) is None  # released


def test_a_holder_that_renews_is_never_taken_over(store):
    with store.writer_lock():
        started = time.monotonic()
        with pytest.raises(StoreLocked, match="being written by another reprogrid process"):
            with Store(store.uri, lease_s=LEASE_S).writer_lock(wait_s=3 * LEASE_S):
                pass
        assert time.monotonic() - started > 3 * LEASE_S  # it waited, and the lease held
        store.write_rows("settings", "k1", rows("k1"))  # the holder still commits


def test_a_lease_no_one_renews_is_taken_over_and_the_old_holder_logged(store, caplog):
    # a driver on another host that was hard-killed: its lease is not expired yet, but it
    # never changes again
    put_lock(store, lease_s=LEASE_S, renewals=3, expires_at=time.time() + LEASE_S)
    with caplog.at_level(logging.WARNING, logger="storage.lock"):
        with store.writer_lock(wait_s=0):
            assert Holder.parse(lock_text(store)).pid != 1
            store.write_rows("settings", "k1", rows("k1"))
    assert "taking over the writer lock of a driver that is gone (pid 1 on elsewhere" in (
        caplog.text
    )


def test_a_lease_expired_long_ago_is_taken_over_at_once(store):
    put_lock(store, lease_s=30.0, renewals=0, expires_at=time.time() - 120)
    started = time.monotonic()
    with store.writer_lock(wait_s=0):
        assert Holder.parse(lock_text(store)).host == socket.gethostname()
    assert time.monotonic() - started < 30.0  # not after waiting out its 30 s lease


def test_an_older_lock_without_a_lease_is_left_to_a_person(store):
    path = f"{store.root}/{LOCK_OBJECT}"
    put_lock(store)
    with pytest.raises(StoreLocked, match=f"delete {path} and re-run"):
        with store.writer_lock(wait_s=0):
            pass


def test_a_driver_whose_lease_was_taken_over_writes_nothing_more(store):
    with store.writer_lock():
        store.write_rows("settings", "k1", rows("k1"))
        other = put_lock(store, lease_s=LEASE_S, renewals=0, expires_at=time.time() + 60)
        with pytest.raises(LeaseLost, match="lost its writer lock"):
            store.write_rows("settings", "k2", rows("k2"))
        assert set(store.shards("settings")) == {"k1"}
    assert lock_text(store) == other  # the new holder's lock is left alone


def test_a_reader_sees_a_live_lease_as_a_writer_and_an_expired_one_as_none(store):
    put_lock(store, lease_s=60.0, renewals=0, expires_at=time.time() + 30)
    assert store.writer_active()
    put_lock(store, lease_s=60.0, renewals=0, expires_at=time.time() - 3600)
    assert not store.writer_active()


class SlowLockWrites:
    """A filesystem whose writes of the lock object wait for `go` once they have begun: a
    renewal still on its way to the object store."""

    def __init__(self, fs, path: str):
        self.fs, self.path = fs, path
        self.writing, self.go = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_output_stream(self, path):
        if path == self.path:  # an object store's PUT: the old content until it completes
            self.writing.set()
            assert self.go.wait(30)
        return self.fs.open_output_stream(path)


def test_a_commit_during_a_renewal_finds_the_lease_still_held(store):
    """A renewal rewrites the lock object while the main thread checks it before a commit:
    the check reads the lease as it was, which is still this driver's (it once compared the
    object with the renewal's new content and stopped a run with LeaseLost, on a real S3 run
    with a 5 s lease)."""
    with store.writer_lock():
        lease = store._lease
        slow = SlowLockWrites(lease.fs, lease.path)
        lease.fs = slow
        renewal = threading.Thread(target=lease.write)
        renewal.start()
        try:
            assert slow.writing.wait(30)
            lease.check()  # no LeaseLost
            store.write_rows("settings", "k1", rows("k1"))
        finally:
            slow.go.set()
            renewal.join(30)
        lease.check()
    assert lock_text(store) is None  # released: the object held this lease's last renewal


class TornLockReads:
    """A filesystem whose first `torn` reads of the lock object return its bytes cut short: an
    object store's read (the size by a HEAD, then a ranged GET) of an object a renewal is
    replacing with a longer one."""

    def __init__(self, fs, path: str, torn: int):
        self.fs, self.path, self.torn = fs, path, torn

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_input_stream(self, path):
        stream = self.fs.open_input_stream(path)
        if path != self.path or self.torn == 0:
            return stream
        self.torn -= 1
        with stream:
            return io.BytesIO(stream.read()[:-3])


def test_a_torn_read_of_the_lock_during_a_renewal_is_read_again(store):
    """A commit's check (and a renewal's) that reads the lock object torn reads it again
    instead of stopping the run with LeaseLost (it did, on a Ray job's resumed driver with a
    5 s lease on the S3 stand-in); a lock object torn on every read is a loss."""
    with store.writer_lock():
        lease = store._lease
        real = lease.fs
        lease.fs = TornLockReads(real, lease.path, torn=2)
        lease.check()  # no LeaseLost
        store.write_rows("settings", "k1", rows("k1"))
        assert lease.fs.torn == 0
        lease.fs = TornLockReads(real, lease.path, torn=100)
        with pytest.raises(LeaseLost, match="no longer holds"):
            lease.check()
        lease.fs = real
