"""The `reprogrid` command line: parse arguments, call one library function, print the result.

Hydra overrides follow the subcommand (`reprogrid run model=tiny template=instruct ...`). The
commands live in one module per area (grid, report, backends, tools), each with
`register(subparsers)` and `COMMANDS`; only `main` turns exceptions into exit codes and messages.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from orchestrator.cli import backends, export, grid, problems, report, tools
from orchestrator.cli.common import normalize_store_args
from orchestrator.errors import ClusterError, ConfigError, Interrupted
from storage.store import StoreError

EXTENSIONS = (grid, report, backends, tools, export, problems)

logger = logging.getLogger("reprogrid")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reprogrid",
        description="Grid-search orchestrator for reproducing code-LLM benchmark results.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in EXTENSIONS:
        module.register(sub)
    return parser


def _override_commands(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommands that take Hydra overrides (they name the store as `store=DIR`)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name
        for name, p in sub.choices.items()
        if any(a.dest == "overrides" for a in p._actions)
        and not any("--store" in a.option_strings for a in p._actions)
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = normalize_store_args(argv, _override_commands(parser))
    except ValueError as e:
        parser.error(str(e))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    commands = {}
    for module in EXTENSIONS:
        commands.update(module.COMMANDS)
    try:
        return commands[args.command](args)
    except (ConfigError, StoreError, ClusterError, ValueError, FileNotFoundError) as e:
        sys.stderr.write(f"reprogrid {args.command}: error: {e}\n")
        return 2
    except Interrupted as e:
        sys.stderr.write(
            f"reprogrid {args.command}: {e}; its committed chunks are kept: re-run the same "
            "command to resume\n"
        )
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(
            f"reprogrid {args.command}: interrupted; re-run the same command to resume\n"
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
