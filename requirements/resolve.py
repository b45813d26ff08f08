"""Write or check the lock files of requirements/ by asking pip's resolver (no install).

    python requirements/resolve.py compile driver       # rewrite requirements/driver.txt
    python requirements/resolve.py check gpu-worker     # does the lock resolve on its own?

Each target is a role of pyproject.toml (the core dependencies plus some extras) on one Python
minor version; run this with an interpreter of that version (`make lock-driver`,
`make check-gpu-lock`). `compile` resolves the ranges of pyproject.toml and pins what pip picks;
`check` resolves the lock itself (`pip install --dry-run --ignore-installed --report`) and
fails unless pip would install exactly the pinned set: no conflict, no missing dependency, no
extra package. Nothing is installed or downloaded beyond package metadata (PyPI serves it apart
from the wheels), so resolving the GPU worker's CUDA stack here costs no CUDA wheel.

requirements/lock.txt (CPU development) is not made here: it starts with the local CPU torch
wheel and drops packages after installing (see the Makefile); `make install` is its check.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "reprogrid"


@dataclass(frozen=True)
class Target:
    name: str  # the lock is requirements/<name>.txt
    python: tuple[int, int]  # the Python minor version the lock is for
    extras: tuple[str, ...]  # pyproject extras on top of the core dependencies
    also: tuple[str, ...]  # requirements outside pyproject (e.g. Ray's dashboard extra)
    purpose: str


TARGETS = {
    t.name: t
    for t in (
        Target(
            "driver",
            (3, 12),
            ("infibench", "test", "eee"),
            (),
            "the driver and InfiBench grading, no GPU library (laptop, login node, CI on 3.12)",
        ),
        Target(
            "gpu-worker",
            (3, 11),
            ("gpu",),
            ("ray[default]",),
            "the GPU worker image (docker/worker.Dockerfile): CUDA torch, vLLM, transformers",
        ),
    )
}


class ResolveError(RuntimeError):
    """pip could not resolve a target, or a lock is not what pip resolves."""


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def role_requirements(pyproject: dict, extras: tuple[str, ...]) -> list[str]:
    """The core dependencies plus the extras, with `reprogrid[a,b]` extras expanded."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    out = list(project["dependencies"])
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            raise ResolveError(f"unknown extra {extra!r}; extras: {', '.join(sorted(optional))}")
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(rf"{PROJECT}\[([^\]]+)\]", req.strip())
            if own:
                pending += [e.strip() for e in own.group(1).split(",")]
            else:
                out.append(req)
    return out


def lock_pins(text: str) -> dict[str, str]:
    """`name==version` lines of a lock (comments and blank lines ignored), by normalised name."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)", line)
        if not match:
            raise ResolveError(f"lock line {line!r} is not name==version")
        pins[normalise(match.group(1))] = match.group(3)
    return pins


def resolve(requirements: list[str]) -> dict[str, tuple[str, str]]:
    """What pip would install for `requirements` into an empty environment of this Python:
    normalised name -> (name as published, version)."""
    with tempfile.TemporaryDirectory() as tmp:
        req_file, report = Path(tmp) / "requirements.txt", Path(tmp) / "report.json"
        req_file.write_text("\n".join(requirements) + "\n")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            "-r",
            str(req_file),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise ResolveError(f"pip could not resolve:\n{done.stdout}{done.stderr}")
        installs = json.loads(report.read_text())["install"]
    return {
        normalise(i["metadata"]["name"]): (i["metadata"]["name"], i["metadata"]["version"])
        for i in installs
    }


def _check_python(target: Target) -> None:
    if sys.version_info[:2] != target.python:
        want = ".".join(map(str, target.python))
        have = ".".join(map(str, sys.version_info[:2]))
        raise ResolveError(
            f"the {target.name} lock is for Python {want}; this is Python {have} "
            f"(run: python{want} requirements/resolve.py ...)"
        )


def compile_lock(target: Target) -> Path:
    _check_python(target)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    resolved = resolve([*role_requirements(pyproject, target.extras), *target.also])
    python = ".".join(map(str, target.python))
    extras = ",".join(target.extras)
    lines = [
        f"# {target.name}: {target.purpose}.",
        f"# Python {python}, Linux x86_64. Every package pinned: the core dependencies of",
        f"# pyproject.toml plus the extras [{extras}]"
        + (f" and {', '.join(target.also)}" if target.also else "")
        + ".",
        f"# Made by `python{python} requirements/resolve.py compile {target.name}`; checked by",
        f"# `... check {target.name}`. Install it, then the project with --no-deps.",
    ]
    lines += [
        f"{name}=={version}"
        for name, version in sorted(resolved.values(), key=lambda nv: normalise(nv[0]))
    ]
    path = ROOT / "requirements" / f"{target.name}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def check_lock(target: Target) -> str:
    """A one-line summary when the lock resolves to exactly itself; ResolveError otherwise."""
    _check_python(target)
    path = ROOT / "requirements" / f"{target.name}.txt"
    pins = lock_pins(path.read_text())
    resolved = {name: version for name, (_, version) in resolve([f"-r {path}"]).items()}
    missing = sorted(set(resolved) - set(pins))
    unused = sorted(set(pins) - set(resolved))
    changed = sorted(n for n in set(pins) & set(resolved) if pins[n] != resolved[n])
    if missing or unused or changed:
        raise ResolveError(
            f"{path.name} does not resolve to itself: not pinned {missing}, "
            f"not needed {unused}, other versions {changed}"
        )
    return f"{path.name}: {len(pins)} pins resolve on their own (Python {sys.version.split()[0]})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("compile", "check"))
    parser.add_argument("target", choices=sorted(TARGETS))
    args = parser.parse_args(argv)
    target = TARGETS[args.target]
    try:
        if args.action == "compile":
            sys.stdout.write(f"wrote {compile_lock(target)}\n")
        else:
            sys.stdout.write(check_lock(target) + "\n")
    except ResolveError as e:
        sys.stderr.write(f"resolve: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
