"""The `reprogrid` command line: parse arguments, call one library function, print the result.

Hydra overrides follow the subcommand (`reprogrid run model=tiny template=instruct ...`), mixed
with its flags in any order (`parse`). The
commands live in one module per area (grid, report, backends, tools), each with
`register(subparsers)` and `COMMANDS`; only `main` turns exceptions into exit codes and messages.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from orchestrator.cli import backends, compare, export, grid, problems, report, store, tools
from orchestrator.cli.common import normalize_store_args
from orchestrator.errors import ClusterError, ConfigError, Interrupted
from storage.errors import StoreDamaged
from storage.store import StoreError

EXTENSIONS = (grid, report, store, backends, tools, export, compare, problems)

logger = logging.getLogger("reprogrid")
# A reader that closed the pipe (`reprogrid prompts ... | head`): 128 + SIGPIPE, what the shell
# reports for a tool that SIGPIPE stopped. Not 0: the output is cut short, and a command that
# writes as it goes (a run's progress) stopped before its end; `set -o pipefail` treats it as
# it treats `cat file | head`.
EXIT_CLOSED_STDOUT = 128 + signal.SIGPIPE


class Parser(argparse.ArgumentParser):
    """argparse with suggestions: an unknown flag or command gets a did-you-mean from the
    parser's own choices, and the error is the subcommand's, with its usage line."""

    def error(self, message: str) -> NoReturn:
        super().error(suggest(self, message))


def suggest(parser: argparse.ArgumentParser, message: str) -> str:
    """`message` with a did-you-mean for each unknown flag or invalid choice in it."""
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        hints: list[str] = []
        options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        tokens = unknown.group(1).split()
        flags = [t for t in tokens if t.startswith("-")]
        for token in tokens:
            if token.startswith("-"):
                close = difflib.get_close_matches(token.split("=", 1)[0], options, n=1)
                if close:
                    which = f" (for {token})" if len(flags) > 1 else ""
                    hints.append(f"Did you mean {close[0]}{which}?")
            elif "=" in token and not any(a.dest == "overrides" for a in parser._actions):
                hints.append(f"`{parser.prog}` takes no KEY=VALUE overrides ({token})")
        return ". ".join([message, *hints])
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        choices = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), choices, n=1)
        if close:
            return f"{message}. Did you mean: {close[0]}?"
    return message


def build_parser() -> Parser:
    parser = Parser(
        prog="reprogrid",
        description="Grid-search orchestrator for reproducing code-LLM benchmark results.",
        epilog="Flags and KEY=VALUE overrides mix in any order after the command; -v works "
        "before or after it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in EXTENSIONS:
        module.register(sub)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _override_commands(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommands that take Hydra overrides (they name the store as `store=DIR`)."""
    return {
        name
        for name, p in _subparsers(parser).items()
        if any(a.dest == "overrides" for a in p._actions)
        and not any("--store" in a.option_strings for a in p._actions)
    }


VERBOSE = ("-v", "--verbose")


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The command and its arguments, flags and overrides in any order: `-v` anywhere, then
    the subcommand's own parser reads the rest intermixed (argparse's plain parse stops
    collecting positionals at the first flag: `plan --json model=tiny` was an error)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    verbose = any(a in VERBOSE for a in argv[:cut])
    argv = [a for a in argv[:cut] if a not in VERBOSE] + argv[cut:]
    commands = _subparsers(parser)
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None or any(a in ("-h", "--help") for a in argv[:at]) or argv[at] not in commands:
        args = parser.parse_args(argv)  # help, no command, or an unknown one: argparse says
    else:
        if argv[:at]:
            parser.error(f"unrecognized arguments: {' '.join(argv[:at])}")
        command = commands[argv[at]]
        args, extras = command.parse_known_intermixed_args(argv[at + 1 :])
        if extras:
            # an unknown flag also strands the overrides after it: name the flag only
            flags = [a for a in extras if a.startswith("-")]
            command.error(f"unrecognized arguments: {' '.join(flags or extras)}")
        args.command = argv[at]
    args.verbose = verbose
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = normalize_store_args(argv, _override_commands(parser))
    except ValueError as e:
        parser.error(str(e))
    args = parse(parser, argv)
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
        code = commands[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except StoreDamaged as e:  # the input is fine, the store is not: 1, as `verify` exits
        sys.stderr.write(f"reprogrid {args.command}: {e}\n")
        return 1
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


def _stdout_closed() -> int:
    """Stop quietly on a closed stdout: the idiom of Python's docs (signal, "Note on SIGPIPE"):
    stdout now writes to /dev/null, so the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    # a stream without a descriptor (output captured in-process) has nothing left to flush
    with contextlib.suppress(io.UnsupportedOperation, AttributeError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_STDOUT


if __name__ == "__main__":
    sys.exit(main())
