"""What makes a folder a store (storage/presence.py): its own entries, named there without
pyarrow and kept equal here to the modules that own them; the stores found inside a folder that
is not one, two levels deep, named as the user named the folder; object-store URIs alike."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from storage import lock, quarantine, schema
from storage.manifest import MANIFEST_FILE
from storage.presence import (
    STORE_ENTRIES,
    TABLE_FOLDERS,
    NotAStore,
    Presence,
    _named,
    probe,
    require_creatable,
    require_store,
)
from storage.store import Store


def test_the_store_entries_are_the_stores_own_names():
    assert TABLE_FOLDERS == tuple(schema.TABLES)
    assert STORE_ENTRIES == {
        *schema.TABLES,
        MANIFEST_FILE,
        quarantine.QUARANTINE_DIR,
        lock.LOCK_FILE,
        lock.LOCK_OBJECT,
    }


def test_checking_a_local_store_imports_no_pyarrow(tmp_path):
    code = (
        "import sys; from storage.presence import require_store; "
        f"require_store({str(tmp_path)!r}); assert 'pyarrow' not in sys.modules"
    )
    (tmp_path / "settings").mkdir()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("entry", sorted(STORE_ENTRIES))
def test_any_one_entry_makes_a_store(tmp_path, entry):
    if entry.endswith(".json") or entry in (lock.LOCK_FILE, lock.LOCK_OBJECT):
        (tmp_path / entry).write_text("")
    else:
        (tmp_path / entry).mkdir()
    assert probe(str(tmp_path)).presence is Presence.STORE
    assert require_store(str(tmp_path)) == str(tmp_path)


def test_missing_file_empty_and_other(tmp_path):
    assert probe(str(tmp_path / "nope")).presence is Presence.MISSING
    (tmp_path / "file").write_text("x")
    assert probe(str(tmp_path / "file")).presence is Presence.FILE
    (tmp_path / "empty").mkdir()
    assert probe(str(tmp_path / "empty")).presence is Presence.EMPTY
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    assert probe(str(tmp_path / "other")).presence is Presence.OTHER
    with pytest.raises(FileNotFoundError, match="does not exist"):
        require_store(str(tmp_path / "nope"))
    with pytest.raises(NotAStore, match="is a file, not a store's folder"):
        require_store(str(tmp_path / "file"))
    with pytest.raises(NotAStore, match="is not a store: it holds none of a store's tables"):
        require_store(str(tmp_path / "other"))


def test_stores_inside_two_levels_deep_in_order_and_named_from_the_folder(tmp_path):
    for store in ("results/demo", "results/2026/b", "results/2026/a", "results/x/y/too-deep"):
        (tmp_path / store / "runs").mkdir(parents=True)
    (tmp_path / "results" / ".hidden" / "settings").mkdir(parents=True)
    found = probe(str(tmp_path / "results"))
    named = [str(tmp_path / "results" / s) for s in ("demo", "2026/a", "2026/b")]
    assert found.presence is Presence.OTHER and list(found.inside) == named
    assert probe(str(tmp_path / "results") + "/").inside == found.inside
    with pytest.raises(NotAStore, match=f"it holds {named[0]}, {named[1]}, {named[2]} "):
        require_store(str(tmp_path / "results"))


def test_many_stores_inside_are_counted_after_the_first_five(tmp_path):
    for n in range(7):
        (tmp_path / "results" / f"s{n}" / "settings").mkdir(parents=True)
    with pytest.raises(NotAStore, match="s4 and 2 more \\(pass --store "):
        require_store(str(tmp_path / "results"))


def test_a_store_may_be_created_anywhere_but_on_a_file_or_over_stores(tmp_path):
    for made in ("new", "empty/", "other/notes.txt", "store/settings/"):
        path = tmp_path / made
        if made.endswith("/"):
            path.mkdir(parents=True)
        elif "/" in made:
            path.parent.mkdir()
            path.write_text("x")
        uri = str(tmp_path / made.split("/")[0])
        assert require_creatable(uri) == uri
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotAStore, match="is a file"):
        require_creatable(str(tmp_path / "file"))
    (tmp_path / "results" / "demo" / "settings").mkdir(parents=True)
    with pytest.raises(NotAStore, match="results is not a store; it holds .*results/demo"):
        require_creatable(str(tmp_path / "results"))


def test_an_object_store_uri_is_checked_the_same_way_and_keeps_its_query():
    bucket = f"memory://presence-{uuid.uuid4().hex[:8]}"
    Store(f"{bucket}/outer/demo").write_rows("runs", "r1", [{"run_id": "r1"}])
    assert probe(f"{bucket}/outer/demo").presence is Presence.STORE
    assert probe(f"{bucket}/none").presence is Presence.MISSING
    assert probe(f"{bucket}/outer/demo/runs/r1.parquet").presence is Presence.FILE
    assert probe(f"{bucket}/outer").inside == (f"{bucket}/outer/demo",)
    with pytest.raises(NotAStore, match=f"it holds {bucket}/outer/demo"):
        require_store(f"{bucket}/outer")
    query = "?endpoint_override=http://127.0.0.1:1"
    assert _named(f"s3://b/results{query}", "demo") == f"s3://b/results/demo{query}"
