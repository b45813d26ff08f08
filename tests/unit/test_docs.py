"""Docs cover the surface: every command has help and is in the README; every config key and
every sweep-group option is in docs/config.md (sqlite-utils' test_docs idea)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.cli.main import EXTENSIONS, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIG_DOC = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")


def commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


def test_extension_commands_are_registered():
    names = set(commands())
    for module in EXTENSIONS:
        assert set(module.COMMANDS) <= names


@pytest.mark.parametrize("command", commands())
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: reprogrid" in capsys.readouterr().out


@pytest.mark.parametrize("command", commands())
def test_every_command_is_in_the_readme(command):
    assert f"reprogrid {command}" in README or f"`{command}`" in README


def flatten(node: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in node.items():
        if key == "defaults" or key == "decodings":
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            keys += flatten(value, path + ".")
        else:
            keys.append(path)
    return keys


ROOT_KEYS = flatten(yaml.safe_load((ROOT / "sweeps" / "config.yaml").read_text()))
CLUSTER_KEYS = [
    f"cluster.{k}" for k in yaml.safe_load((ROOT / "sweeps/cluster/local.yaml").read_text())
]
BENCH_KEYS = [
    f"benchmark.{k}"
    for k in yaml.safe_load((ROOT / "sweeps/benchmark/humanevalfix.yaml").read_text())
    if k != "name"
]


@pytest.mark.parametrize("key", ROOT_KEYS + CLUSTER_KEYS + BENCH_KEYS)
def test_every_config_key_is_documented(key):
    assert f"`{key}`" in CONFIG_DOC


MODEL_KEYS = sorted(
    {k for p in (ROOT / "sweeps/model").glob("*.yaml") for k in yaml.safe_load(p.read_text())}
)


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_every_model_config_field_is_documented(key):
    assert f"`{key}`" in CONFIG_DOC


@pytest.mark.parametrize(
    ("group", "name"),
    [
        (g, p.stem)
        for g in ("grid", "model", "experiment")
        for p in sorted((ROOT / "sweeps" / g).glob("*.yaml"))
    ],
)
def test_every_sweep_group_option_is_documented(group, name):
    assert name in CONFIG_DOC, f"sweeps/{group}/{name}.yaml is not in docs/config.md"


def project_modules() -> list[Path]:
    return [
        path.relative_to(ROOT)
        for package in ("orchestrator", "workers", "storage")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
    ]


@pytest.mark.parametrize("module", project_modules(), ids=str)
def test_every_module_is_in_the_architecture_doc(module):
    """docs/architecture.md names every module: its file name, and the folder it sits in."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert module.name in text
    if len(module.parts) > 2:  # in a folder of its package: that folder is named too
        assert f"{module.parts[-2]}/" in text
