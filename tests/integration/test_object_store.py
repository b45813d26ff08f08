"""The store on object storage: a real S3-compatible server on localhost (moto in server mode,
started per module and stopped by its handle), reached through pyarrow's S3 filesystem.

Store semantics (atomic shards, invisible temporaries, unreadable shards count as missing, the
lock object), then the CLI: a fake-backend grid on `s3://...`, its driver SIGKILLed mid-grid,
resumed by re-running the same command, while `status` and `report` read the store at the same
time. Both URI forms are used: the endpoint in the URI's query (`?endpoint_override=...`) and
the endpoint in AWS_ENDPOINT_URL with a plain `s3://bucket/prefix`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from storage.index import build_index
from storage.integrity import ProblemKind
from storage.schema import TABLES, SettingStatus
from storage.store import (
    LOCK_OBJECT,
    QUARANTINE_DIR,
    REASON_FILE,
    TEMP_PREFIX,
    ShardInfo,
    Store,
    StoreLocked,
)
from storage.verify import verify_store
from tests.ports import free_port
from tests.unit.storage.damage import flip_data_page_bit, garbage_in_data

# find_spec, not import: importing moto.server loads Flask into this process, and a Werkzeug
# LocalProxy in sys.modules breaks vLLM's kernel rebinding in later tests of the same session.
if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
    pytest.skip("the S3 tests need moto[server] (requirements/lock.txt)", allow_module_level=True)

BUCKET = "reprogrid-test"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask an instance-metadata service for a region
}


def _start_moto() -> tuple[subprocess.Popen, str]:
    for _ in range(3):  # the port may be taken between choosing and binding it
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).read()
                return proc, endpoint
            except OSError:
                time.sleep(0.2)
        proc.kill()
        proc.wait(10)
    pytest.fail("moto_server did not start")


@contextlib.contextmanager
def moto_bucket() -> Iterator[str]:
    """A moto S3 server on a free local port with one bucket, its credentials in this process's
    environment (restored after); its endpoint. Stopped by its own handle."""
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)  # pyarrow's S3 client reads them when it is created
    proc, endpoint = _start_moto()
    try:
        fs, _ = pafs.FileSystem.from_uri(
            f"s3://{BUCKET}?endpoint_override={endpoint}&scheme=http&allow_bucket_creation=true"
        )
        fs.create_dir(BUCKET)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def s3_endpoint():
    with moto_bucket() as endpoint:
        yield endpoint


def s3_uri(endpoint: str, prefix: str) -> str:
    """The endpoint in the URI: what a user passes when AWS_ENDPOINT_URL is not set."""
    return f"s3://{BUCKET}/{prefix}?endpoint_override={endpoint}&scheme=http"


@pytest.fixture
def store(s3_endpoint) -> Store:
    return Store(s3_uri(s3_endpoint, f"unit-{uuid.uuid4().hex[:8]}"))


def execution(key: str, task: str, passed: bool) -> dict:
    outcome = "passed" if passed else "failed"
    return {
        "setting_key": key,
        "task_id": task,
        "sample_index": 0,
        "outcome": outcome,
        "passed": passed,
        "score": float(passed),
    }


def complete(store: Store, key: str) -> None:
    store.write_rows("settings", key, [{"setting_key": key, "status": SettingStatus.COMPLETE}])
    store.write_rows("generations", key, [{"setting_key": key, "task_id": "t", "sample_index": 0}])
    store.write_rows("executions", key, [execution(key, "t", True)])
    store.write_rows("scores", key, [{"setting_key": key, "value": 1.0}])


# -- store semantics on S3 -------------------------------------------------------------------


def test_shards_replace_atomically_and_temporaries_are_invisible(store):
    assert not store.is_local
    store.write_rows("executions", "k1", [execution("k1", "Python/0", True)])
    store.write_rows("executions", "k2", [execution("k2", "Python/0", False)])
    store.write_rows(
        "executions", "k1", [execution("k1", "Python/0", False), execution("k1", "Python/1", True)]
    )
    frame = store.read_table("executions").to_pandas()
    assert len(frame) == 3
    assert sorted(frame[frame.setting_key == "k1"].task_id) == ["Python/0", "Python/1"]
    # no temporary object is left behind by a write
    listed = store.fs.get_file_info(pafs.FileSelector(store.table_dir("executions")))
    assert sorted(i.base_name for i in listed) == ["k1.parquet", "k2.parquet"]
    # a crashed writer's temporary is not a shard, and clean_temp removes it
    half = f"{store.table_dir('executions')}/{TEMP_PREFIX}k3-deadbeef.parquet"
    with store.fs.open_output_stream(half) as out:
        out.write(b"PAR1 half a file")
    assert set(store.shards("executions")) == {"k1", "k2"}
    assert store.read_table("executions").num_rows == 3
    assert store.clean_temp() == 1
    assert store.fs.get_file_info(half).type == pafs.FileType.NotFound


def test_listed_but_unreadable_shards_count_as_missing(store, monkeypatch):
    complete(store, "k1")
    complete(store, "k2")
    assert build_index(store)["k1"].complete
    # a corrupt object (e.g. written by something else) is not a shard
    with store.fs.open_output_stream(store.shard_path("scores", "k1")) as out:
        out.write(b"truncated")
    # an eventually consistent listing still names a shard that is gone
    real_shards = Store.shards

    def stale_listing(self, table):
        listed = real_shards(self, table)
        ghost = self.shard_path(table, "ghost")
        return {**listed, "ghost": ShardInfo(table, "ghost", ghost, 100)}

    monkeypatch.setattr(Store, "shards", stale_listing)
    index = build_index(store)
    assert not index["k1"].complete and index["k1"].has_generations
    assert index["k2"].complete and "ghost" not in index
    assert set(store.read_table("settings").to_pandas().setting_key) == {"k1", "k2"}
    assert store.read_table("scores").num_rows == 1  # k2 only; k1 unreadable, ghost gone


def _objects(store: Store) -> dict[str, bytes]:
    """Every object under the store's prefix (the lock aside): relative name -> bytes."""
    infos = store.fs.get_file_info(pafs.FileSelector(store.root, recursive=True))
    return {
        i.path[len(store.root) + 1 :]: store.read_bytes(i.path)
        for i in infos
        if i.type == pafs.FileType.File and i.base_name != LOCK_OBJECT
    }


def test_corrupt_objects_are_found_quarantined_by_the_writer_and_redone(store):
    """Garbage in a data page (footer intact), one flipped bit in `passed`, a foreign object:
    readers report them and move nothing; the writer quarantines them (never deletes); the index
    then redoes exactly the damaged settings and every table reads with pyarrow again."""
    for key in ("k1", "k2", "k3"):
        complete(store, key)
    store.write_rows("runs", "r1", [{"run_id": "r1", "setting_keys": ["k1", "k2", "k3"]}])
    damaged = {
        store.shard_path("generations", "k1"): garbage_in_data,
        store.shard_path("executions", "k2"): lambda b: flip_data_page_bit(b, "passed"),
    }
    for path, how in damaged.items():
        payload = how(store.read_bytes(path))
        with store.fs.open_output_stream(path) as out:
            out.write(payload)
    with store.fs.open_output_stream(f"{store.table_dir('scores')}/notes.txt") as out:
        out.write(b"my notes")
    before = _objects(store)

    report = verify_store(store)
    assert {(p.kind, p.table, p.file, p.setting_key) for p in report.problems} == {
        (ProblemKind.CHECKSUM_MISMATCH, "generations", "k1.parquet", "k1"),
        (ProblemKind.CHECKSUM_MISMATCH, "executions", "k2.parquet", "k2"),
        (ProblemKind.FOREIGN_FILE, "scores", "notes.txt", None),
    }
    assert report.settings_to_redo == ("k1", "k2")
    assert complete_keys(store) == {"k3"}
    assert _objects(store) == before  # readers move nothing

    with store.writer_lock():
        index = build_index(store, quarantine=True)
    assert {k for k, s in index.items() if s.complete} == {"k3"} == complete_keys(store)
    after = _objects(store)
    moved = {name for name in after if name.startswith(f"{QUARANTINE_DIR}/")}
    for name, payload in before.items():  # nothing deleted
        if name in after:
            assert after[name] == payload
        else:
            table, file = name.split("/", 1)
            [copy] = [
                m
                for m in moved
                if m.startswith(f"{QUARANTINE_DIR}/{table}/") and m.endswith(f"/{file}")
            ]
            assert after[copy] == payload
    assert len([m for m in moved if m.endswith(REASON_FILE)]) == 3
    for table in TABLES:
        if not store.shards(table):
            continue  # a table this store never wrote (repeat_checks) has no folder
        frame = pq.read_table(store.table_dir(table), filesystem=store.fs).to_pandas()
        assert len(frame) == store.read_table(table).num_rows
    assert verify_store(store).settings_to_redo == ("k1", "k2")


def test_the_lock_object_keeps_a_second_writer_out_and_is_removed(store):
    lock = f"{store.root}/{LOCK_OBJECT}"
    with store.writer_lock():
        holder = json.loads(store._read_lock(lock))
        assert holder["pid"] == os.getpid()
        with pytest.raises(StoreLocked, match="being written by another reprogrid process"):
            with Store(store.uri).writer_lock(wait_s=0):
                pass
    assert store.fs.get_file_info(lock).type == pafs.FileType.NotFound


def test_a_lock_taken_over_by_another_writer_is_not_deleted_by_the_first(store):
    lock = f"{store.root}/{LOCK_OBJECT}"
    other = json.dumps({"id": "other", "pid": 1, "host": "elsewhere"})
    with store.writer_lock():
        with store.fs.open_output_stream(lock) as out:  # e.g. a racing writer that wrote last
            out.write(other.encode())
    assert store._read_lock(lock) == other
    with pytest.raises(StoreLocked, match="elsewhere"):
        with store.writer_lock(wait_s=0):
            pass


def test_a_short_lived_probe_does_not_refuse_a_writer(store):
    """`reprogrid status` takes the lock for an instant; a writer starting then waits for it."""
    lock = f"{store.root}/{LOCK_OBJECT}"
    probe = json.dumps({"id": "probe", "pid": 1, "host": "elsewhere"})
    with store.fs.open_output_stream(lock) as out:
        out.write(probe.encode())
    timer = threading.Timer(0.5, store.fs.delete_file, args=(lock,))
    timer.start()
    try:
        with store.writer_lock(wait_s=0):
            assert json.loads(store._read_lock(lock))["pid"] == os.getpid()
    finally:
        timer.join()


def test_the_lock_of_a_killed_driver_on_this_host_is_taken_over(store):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # an exited (and reaped) process: its pid no longer runs
    lock = f"{store.root}/{LOCK_OBJECT}"
    dead = json.dumps({"id": "dead", "pid": gone.pid, "host": socket.gethostname()})
    with store.fs.open_output_stream(lock) as out:
        out.write(dead.encode())
    with store.writer_lock(wait_s=0):
        assert json.loads(store._read_lock(lock))["pid"] == os.getpid()


def test_any_fsspec_uri_works():
    """Schemes pyarrow does not know go through fsspec (here its in-memory filesystem)."""
    mem = Store(f"memory://reprogrid-{uuid.uuid4().hex[:8]}/store")
    assert not mem.is_local
    complete(mem, "k1")
    with mem.writer_lock():
        pass
    assert build_index(mem)["k1"].complete
    assert mem.read_table("executions").num_rows == 1


# -- the CLI on S3: resume and concurrent readers ------------------------------------------------

GRID = [
    "backend=fake",
    "model=tiny",
    "benchmark.limit=3",
    "template=own,instruct",
    "grid.precision=fp32,bf16",
    # 1.5 s a sample: an engine's second setting completes 4.5 s after its first, so the kill
    # below lands before all four are complete (at 0.4 s, polling an S3 index under load missed
    # that window)
    "model.repo_id='fake://delay=1.5'",
    "cluster.num_cpus=3",
]


def reprogrid(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"timed out: {proc.args}\n{out}")
    assert proc.returncode == 0, out
    return out


def complete_keys(store: Store) -> set[str]:
    return {k for k, s in build_index(store).items() if s.complete}


def test_grid_on_s3_resumes_after_a_killed_driver_and_serves_concurrent_readers(
    env, s3_endpoint, tmp_path
):
    prefix = f"grid-{uuid.uuid4().hex[:8]}"
    uri = s3_uri(s3_endpoint, prefix)
    env = {**env, **CREDENTIALS}
    run = ["run", *GRID, f"store='{uri}'"]  # quoted: the URI holds '=' (Hydra override syntax)
    store = Store(uri)

    first = reprogrid(run, env)
    deadline = time.monotonic() + 300
    while not complete_keys(store):
        assert first.poll() is None, first.communicate()[0]
        assert time.monotonic() < deadline, "no setting completed"
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the driver and its private Ray instance
    first.communicate(timeout=30)
    before = complete_keys(store)
    assert 1 <= len(before) < 4

    # Resume (the same command) while two readers use the plain URI + AWS_ENDPOINT_URL.
    reader_env = {**env, "AWS_ENDPOINT_URL": s3_endpoint}
    plain = f"s3://{BUCKET}/{prefix}"
    second = reprogrid(run, env)
    readers = []
    while second.poll() is None and len(readers) < 4:
        readers.append(reprogrid(["status", "--store", plain, "--json"], reader_env))
        out_dir = str(tmp_path / f"report{len(readers)}")
        report = ["report", "--store", plain, "--format", "md,json", "--out", out_dir]
        readers.append(reprogrid(report, reader_env))
        time.sleep(1.0)
    out = finish(second)
    assert f"{len(before)} done" in out
    for reader in readers:
        finish(reader)
    assert readers, "the resumed run ended before a reader started"

    # Exactly once: every setting complete, one shard per table per setting, no duplicates.
    index = build_index(store)
    assert len(index) == 4 and all(s.complete for s in index.values())
    generations = store.read_table("generations").to_pandas()
    assert len(generations) == 4 * 3
    assert not generations.duplicated(["setting_key", "task_id", "sample_index"]).any()
    assert store.read_table("scores").num_rows == 4
    runs = store.read_table("runs").to_pandas().sort_values("started_at")
    assert runs.iloc[-1].status == "finished"
    assert runs.iloc[-1].n_executed == 4 - len(before)
    assert store.fs.get_file_info(f"{store.root}/{LOCK_OBJECT}").type == pafs.FileType.NotFound

    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "status", "--store", plain, "--json"],
        env=reader_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["totals"]["complete"] == 4 and not status["writer_active"]
    report = finish(
        reprogrid(
            ["report", "--store", plain, "--format", "md", "--out", str(tmp_path / "final")],
            reader_env,
        )
    )
    assert (tmp_path / "final" / "report.md").is_file(), report


def test_compaction_on_s3_keeps_every_row_and_a_kill_is_finished_by_the_next_writer(
    store, monkeypatch
):
    """Packs on an object store: the same rows for the store and for pyarrow over the prefix;
    killed after the packs are in place (before the originals are removed), the store's readers
    still read every row once and the next writer finishes the compaction."""
    from storage.compact import compact
    from tests.fixtures_store import Spec, write_setting
    from tests.unit.storage.crashes import Crash, crash_before

    keys = sorted(
        write_setting(store, Spec("tiny", "own", "greedy", length, "fp32", 40))
        for length in (512, 1024, 2048)
    )
    before = {t: store.read_table(t).num_rows for t in TABLES}
    with pytest.raises(Crash), crash_before(monkeypatch, 5):  # temp, manifest, reveal, 2 removed
        with store.writer_lock():
            compact(store)
    reader = Store(store.uri)
    assert {t: reader.read_table(t).num_rows for t in TABLES} == before
    assert {k for k, s in build_index(reader).items() if s.complete} == set(keys)
    with store.writer_lock():
        store.clean_temp()
        compact(store)
    reader = Store(store.uri)
    assert {t: reader.read_table(t).num_rows for t in TABLES} == before
    for table in ("settings", "executions", "scores"):
        selector = pafs.FileSelector(f"{store.root}/{table}", allow_not_found=True)
        names = [i.base_name for i in store.fs.get_file_info(selector)]
        assert len(names) == 1 and names[0].startswith("pack-"), names
        assert pq.read_table(f"{store.root}/{table}", filesystem=store.fs).num_rows == before[table]
    assert verify_store(reader).ok
