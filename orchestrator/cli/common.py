"""What every command module of the CLI shares: output and the overrides argument."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.damage import StoreDamage

OVERRIDES_HELP = (
    "Hydra overrides, e.g. model=tiny template=instruct decoding=greedy max_length=2048 "
    "dtype=bf16 quant=none backend=hf. A comma list sweeps an axis (template=own,instruct); "
    "grid=paper60 selects a grid and grid.<axis>=a,b changes one of its axes; store=DIR (or "
    "--store DIR) names the store. Options: docs/config.md."
)
DEFAULT_STORE = "results"


def out(text: str = "") -> None:
    """Results go to stdout (logs go to stderr)."""
    sys.stdout.write(text + "\n")


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=OVERRIDES_HELP)


STORE_HELP = (
    "the store: a folder or an object-store URI (default: {default}); `store=DIR` names it too"
)


def add_store(parser: argparse.ArgumentParser, default: str | None = DEFAULT_STORE) -> None:
    """`--store DIR`, the one store option of every command that reads or writes a store."""
    shown = default if default is not None else "the config's `store`"
    parser.add_argument(
        "--store", default=default, metavar="DIR", help=STORE_HELP.format(default=shown)
    )


def existing_store(store: str) -> str:
    """`store` if it is a store: reading one that is not there, or a folder that is not a store
    (the stores inside it named), is an error, never an empty answer (storage/presence.py)."""
    from storage.presence import require_store

    return require_store(store)


def creatable_store(store: str) -> str:
    """`store` if a command that creates a store may write there: not a file, nor a folder that
    holds stores (storage/presence.py)."""
    from storage.presence import require_creatable

    return require_creatable(store)


def normalize_store_args(argv: list[str], override_commands: set[str]) -> list[str]:
    """Accept both ways of naming the store with every command: `--store DIR` (or
    `--store=DIR`) becomes the override `store=DIR` for the commands that take Hydra overrides,
    and `store=DIR` becomes `--store DIR` for the others. Two different stores are an error."""
    command_at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if command_at is None:
        return argv
    head, command, rest = argv[:command_at], argv[command_at], argv[command_at + 1 :]
    named: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        if token == "--store" and i + 1 < len(rest):
            named.append(rest[i + 1])
            i += 2
            continue
        if token.startswith("--store="):
            named.append(token.split("=", 1)[1])
        elif token.startswith("store="):
            named.append(token.split("=", 1)[1])
        else:
            kept.append(token)
        i += 1
    if not named:
        return argv
    if len(set(named)) > 1:
        raise ValueError(f"two stores named: {' and '.join(sorted(set(named)))}; name one")
    store = named[0]
    if command in override_commands:
        return [*head, command, *kept, f"store={store}"]
    return [*head, command, *kept, "--store", store]


SKIP_DAMAGED_HELP = (
    "answer without the settings whose files fail their checks, naming each one left out and "
    "why{where} (default: refuse a store with damaged files, exit status 1, naming each file; "
    "`reprogrid verify --fix` moves them to the quarantine)"
)


def add_skip_damaged(parser: argparse.ArgumentParser, where: str = "") -> None:
    """`--skip-damaged` (docs/report.md, "Damaged files"); `where`: where the command names
    the settings it leaves out."""
    parser.add_argument(
        "--skip-damaged", action="store_true", help=SKIP_DAMAGED_HELP.format(where=where)
    )


def damage_of(
    store: str, tables: Sequence[str], skip: bool, keys: Collection[str] | None = None
) -> StoreDamage:
    """The damaged files among those of `tables` (of the settings `keys`, if given) that a
    command reads, checked before it answers (storage/damage.py): StoreDamaged (exit 1) unless
    `skip`, else what it leaves out."""
    from storage.damage import check_damage
    from storage.store import Store

    return check_damage(Store(store), tables, skip, keys)


def print_left_out(damage: StoreDamage) -> None:
    """A note per setting left out (and per damaged file of no setting)."""
    for line in damage.left_out():
        out(f"note: {line}")
