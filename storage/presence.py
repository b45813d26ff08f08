"""Whether a folder is a store, and the stores inside one that is not (docs/store.md).

A store is a folder (or object-store prefix) holding at least one of the store's own entries:
a table's folder, the manifest, the quarantine or the writer's lock (a run that has just begun
holds only its lock). A command that reads a store refuses anything else, with the stores it
finds inside: after `make demo`, the default `results` holds the store `results/demo` and is
not one itself, and reading it as a store would answer with an empty table, exit 0. A command
that creates a store (`run`, `plan`, `import-generations`) accepts a folder that does not exist
yet, an empty one or one of unrelated files, but not a file, nor a folder that holds stores
(its rows would land beside them, in a store nobody meant).

Local paths are checked with `os` alone: every reading command checks its store before it
imports pyarrow, so that a path that is no store is refused before that import. Object stores
are listed through the store's own filesystem: one listing of the prefix, and one per folder
looked into for stores inside (at most MAX_LISTINGS).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from storage.errors import StoreError
from storage.manifest import MANIFEST_FILE

# storage.schema.TABLES' names, storage.lock's LOCK_FILE and LOCK_OBJECT and
# storage.quarantine's QUARANTINE_DIR, named here because those modules import pyarrow;
# tests/unit/storage/test_presence.py keeps them equal.
TABLE_FOLDERS = ("settings", "generations", "executions", "scores", "runs", "repeat_checks")
LOCK_NAMES = (".lock", "_lock")
QUARANTINE_FOLDER = "quarantine"
STORE_ENTRIES = frozenset({*TABLE_FOLDERS, MANIFEST_FILE, QUARANTINE_FOLDER, *LOCK_NAMES})
# How deep and how wide the stores inside a folder are looked for: `results/demo` and
# `results/2026/demo`, without walking a large tree (or many object-store listings).
INSIDE_DEPTH = 2
MAX_LISTINGS = 50
SHOWN_INSIDE = 5


class Presence(StrEnum):
    MISSING = "missing"
    FILE = "file"  # a file (or an object) where the store's folder should be
    EMPTY = "empty"  # a folder holding nothing
    OTHER = "other"  # a folder holding none of a store's entries, only other things
    STORE = "store"


@dataclass(frozen=True)
class StoreProbe:
    uri: str  # as the user named it
    presence: Presence
    inside: tuple[str, ...] = ()  # stores inside (not a store itself), named from `uri`


class NotAStore(StoreError):
    """A folder that is not a store where one is read, or that holds stores where one is
    created, or a file where a store's folder should be."""


def probe(uri: str) -> StoreProbe:
    """What `uri` (a local path or an object-store URI) holds, and the stores inside it when
    it is a folder that is not a store."""
    listing = _local(uri) if "://" not in uri else _object_store(uri)
    listed = listing("")
    if isinstance(listed, Presence):  # missing, or a file
        return StoreProbe(uri, listed)
    names, folders = listed
    if names & STORE_ENTRIES:
        return StoreProbe(uri, Presence.STORE)
    if not names:
        return StoreProbe(uri, Presence.EMPTY)
    inside = tuple(_named(uri, s) for s in _inside(listing, folders))
    return StoreProbe(uri, Presence.OTHER, inside)


def require_store(uri: str) -> str:
    """`uri` if it is a store; FileNotFoundError if nothing is there, NotAStore (naming the
    stores inside) if something else is."""
    found = probe(uri)
    if found.presence is Presence.STORE:
        return uri
    if found.presence is Presence.MISSING:
        raise FileNotFoundError(f"store {uri} does not exist (pass --store DIR or store=DIR)")
    raise NotAStore(_refusal(found))


def require_creatable(uri: str) -> str:
    """`uri` if a store may be written there: a store, nothing yet, an empty folder or one of
    other files; NotAStore for a file, or for a folder that holds stores."""
    found = probe(uri)
    if found.presence is Presence.FILE or found.inside:
        raise NotAStore(_refusal(found))
    return uri


def _refusal(found: StoreProbe) -> str:
    uri = found.uri
    if found.presence is Presence.FILE:
        return f"store {uri} is a file, not a store's folder (pass --store DIR or store=DIR)"
    if found.presence is Presence.EMPTY:
        return f"{uri} is not a store: an empty folder (pass --store DIR or store=DIR)"
    if not found.inside:
        return (
            f"{uri} is not a store: it holds none of a store's tables "
            f"({', '.join(TABLE_FOLDERS)}) nor its manifest (pass --store DIR or store=DIR)"
        )
    shown = ", ".join(found.inside[:SHOWN_INSIDE])
    extra = len(found.inside) - SHOWN_INSIDE
    more = f" and {extra} more" if extra > 0 else ""
    return (
        f"{uri} is not a store; it holds {shown}{more} (pass --store {found.inside[0]}, or "
        "name a new folder for a new store)"
    )


# A folder's listing, by its path relative to the probed root ("" is the root): the names it
# holds and its subfolders that are not hidden; MISSING or FILE where there is no folder.
Entries = tuple[set[str], list[str]]
Listing = Callable[[str], Entries | Presence]


def _inside(listing: Listing, folders: list[str]) -> list[str]:
    """The stores under `folders` (relative paths), breadth first, INSIDE_DEPTH deep, in at
    most MAX_LISTINGS listings."""
    found: list[str] = []
    level, listings = sorted(folders), 0
    for _ in range(INSIDE_DEPTH):
        deeper: list[str] = []
        for folder in level:
            if listings == MAX_LISTINGS:
                return found
            listings += 1
            listed = listing(folder)
            if isinstance(listed, Presence):
                continue  # gone since its parent was listed
            names, subfolders = listed
            if names & STORE_ENTRIES:
                found.append(folder)
            else:
                deeper += [f"{folder}/{s}" for s in sorted(subfolders)]
        level = deeper
    return found


def _named(uri: str, relative: str) -> str:
    """A store inside `uri` named as the user named `uri`: `results` and `demo` make
    `results/demo`; an object-store URI keeps its query (`s3://b/p?endpoint_override=...`)."""
    base, mark, query = uri.partition("?")
    return f"{base.rstrip('/')}/{relative}{mark}{query}"


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _local(root: str) -> Listing:
    def listing(relative: str) -> Entries | Presence:
        path = os.path.join(root, relative) if relative else root
        try:
            with os.scandir(path) as found:
                entries = list(found)
        except FileNotFoundError:
            return Presence.MISSING
        except NotADirectoryError:
            return Presence.FILE
        folders = [e.name for e in entries if not _hidden(e.name) and e.is_dir()]
        return {e.name for e in entries}, folders

    return listing


def _object_store(uri: str) -> Listing:
    import pyarrow.fs as pafs

    from storage.filesystem import resolve

    fs, root = resolve(uri)

    def listing(relative: str) -> Entries | Presence:
        path = f"{root}/{relative}" if relative else root
        kind = fs.get_file_info(path).type
        if kind == pafs.FileType.NotFound:
            return Presence.MISSING
        if kind != pafs.FileType.Directory:
            return Presence.FILE
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        folders = [
            i.base_name
            for i in infos
            if i.type == pafs.FileType.Directory and not _hidden(i.base_name)
        ]
        return {i.base_name for i in infos}, folders

    return listing
