"""What a problems view shows and what of it must be built: the models (a group per model and
benchmark), each named by the hash of what its files are made of (orchestrator/report/view/
identity.py), and the ones whose folder is not there yet; with the damaged files among those
the view reads, checked before anything is read or written.

The store is listed once per table the view reads (settings, generations, executions); only
the settings' rows are read here. What is checked for damage (docs/report.md, "The problems
view"): the settings table whole (its rows are read every time), and the generations and
executions of the models to build (their files are read). A model whose folder is reused reads
nothing: its name holds the identity (name, size, mtime) of every file it was built from, which
were checked then; a file changed since has another identity, so its model is built again and
its files are checked. A damage found is refused or, with skip, its settings are left out and
named (storage/damage.py); it is never hidden.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.report.tables.labels import SHOWN_AXES, ordered_settings
from orchestrator.report.view.identity import model_digest, shard_ids
from storage.damage import StoreDamage, damaged_error, find_damage
from storage.integrity import setting_key_of
from storage.layout import TableView
from storage.store import Store

# what groups_of, matrix and the setting axes read of a settings row (a row holds ~60 columns)
SETTING_COLUMNS = ("setting_key", "status", "model_name", *SHOWN_AXES, "template_kind")
SHARD_TABLES = ("generations", "executions")  # the tables a model's files are made from
MATRIX = "matrix.js"  # a model folder's file the page opens first (folder.py writes it)


@dataclass(frozen=True)
class Group:
    id: str  # its folder's name under data/ (identity.model_digest; "" before it is named)
    model: str
    benchmark: str
    label: str
    settings: tuple[dict[str, Any], ...]  # settings rows with generations (SETTING_COLUMNS)


@dataclass(frozen=True)
class Checked:
    """Tables whose files a caller already checked for damage, and what it found (`report`
    checks its own tables, executions among them, before it plans its view)."""

    tables: tuple[str, ...]
    damage: StoreDamage


@dataclass(frozen=True)
class ViewPlan:
    groups: tuple[Group, ...]  # every model the view shows, named, in model order
    missing: tuple[Group, ...]  # those whose folder is not there: to build
    damage: StoreDamage  # every damaged file found (the caller's included); their settings
    # are not in `groups`
    generations: TableView  # the tables as listed once (what the names were made from)
    executions: TableView

    @property
    def keys(self) -> frozenset[str]:
        """The settings the view shows."""
        return frozenset(str(s["setting_key"]) for g in self.groups for s in g.settings)


def groups_of(settings: Sequence[Mapping[str, Any]], generated: set[str]) -> list[Group]:
    """The settings with generations, by model and benchmark (sorted), not yet named; a
    model's label names its benchmark only when it has several."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in settings:
        if row["setting_key"] in generated:
            by.setdefault((str(row["model_name"]), str(row["benchmark"])), []).append(dict(row))
    models = [m for m, _ in by]
    out = []
    for model, benchmark in sorted(by):
        label = model if models.count(model) == 1 else f"{model} · {benchmark}"
        out.append(Group("", model, benchmark, label, tuple(by[(model, benchmark)])))
    return out


def groups_without_damaged(groups: Sequence[Group], damage: StoreDamage | None) -> list[Group]:
    """The groups without the settings left out; a group left with none is dropped."""
    skipped = damage.settings if damage is not None else frozenset()
    if not skipped:
        return list(groups)
    out = []
    for group in groups:
        kept = tuple(s for s in group.settings if s["setting_key"] not in skipped)
        if kept:
            out.append(dataclasses.replace(group, settings=kept))
    return out


def view_groups(store: Store, generations: TableView | None = None) -> list[Group]:
    """The groups of `store`'s settings with generations (`generations`: that table's listing,
    else listed here), not yet named."""
    settings = store.read_table("settings", columns=SETTING_COLUMNS).to_pylist()
    listed = generations if generations is not None else store.view("generations")
    return groups_of(settings, {setting_key_of(k) for k in listed.shards()})


def named(groups: Sequence[Group], listings: Sequence[TableView]) -> list[Group]:
    """Each group named by the hash of its label, settings and shards (`identity`)."""
    ids = [shard_ids(view) for view in listings]
    out = []
    for group in groups:
        shown = ordered_settings(group.settings)
        rows = [{c: row.get(c) for c in SETTING_COLUMNS} for row in shown]
        digest = model_digest(group.model, group.benchmark, group.label, rows, ids)
        out.append(dataclasses.replace(group, id=digest))
    return out


def is_built(out: Path, group: Group) -> bool:
    """Whether the model's folder is there whole (it appears by one rename, or not at all)."""
    return (out / "data" / group.id / MATRIX).is_file()


def _joined(first: StoreDamage, more: StoreDamage) -> StoreDamage:
    return StoreDamage(first.store, first.files + more.files)


def plan_view(
    store: Store, out: Path, skip_damaged: bool = False, checked: Checked | None = None
) -> ViewPlan:
    """The view of `store` to write into `out`: its models, named, and those to build. The
    files it will read are checked first (see the module docstring; `checked`: tables the
    caller checked, and their damage, which is joined to this one): StoreDamaged naming every
    damaged file, or with `skip_damaged` their settings left out."""
    done = checked.tables if checked is not None else ()
    damage = checked.damage if checked is not None else StoreDamage(store.uri)
    if "settings" not in done:
        damage = _joined(damage, find_damage(store, ["settings"]))
    listings = [store.view(table) for table in SHARD_TABLES]
    every = view_groups(store, listings[0])
    groups = named(groups_without_damaged(every, damage), listings)
    missing = [g for g in groups if not is_built(out, g)]
    keys = {str(s["setting_key"]) for g in missing for s in g.settings}
    tables = [t for t in SHARD_TABLES if t not in done]
    if keys and tables:  # the files of the models to build, before any is read
        found = find_damage(store, tables, keys)
        if found.files:
            damage = _joined(damage, found)
            groups = named(groups_without_damaged(every, damage), listings)
            missing = [g for g in groups if not is_built(out, g)]
    if damage.files and not skip_damaged:
        raise damaged_error(damage)
    return ViewPlan(tuple(groups), tuple(missing), damage, listings[0], listings[1])
