"""What every command module of the CLI shares: output and the overrides argument."""

from __future__ import annotations

import argparse
import sys

OVERRIDES_HELP = (
    "Hydra overrides, e.g. model=tiny template=instruct decoding=greedy max_length=2048 "
    "dtype=bf16 quant=none backend=hf. A comma list sweeps an axis (template=own,instruct); "
    "grid=paper60 selects a grid and grid.<axis>=a,b changes one of its axes. Options: "
    "docs/config.md."
)
DEFAULT_STORE = "results"


def out(text: str = "") -> None:
    """Results go to stdout (logs go to stderr)."""
    sys.stdout.write(text + "\n")


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=OVERRIDES_HELP)
