"""The wing rules of docs/architecture.md, enforced with `ast`.

Each rule is a function of one parsed module (its dotted name, its imports, the builtins it
calls) returning what it objects to. Every module of the project must pass every rule, and each
fixture in `layering_fixtures/` (a module that breaks one rule on purpose, checked as if it had
the module name its first line gives) must be caught by exactly the rule it names: a rule that
cannot fail fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from workers.backends.registry import BACKENDS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "layering_fixtures"
PACKAGES = ("orchestrator", "workers", "storage")
HEAVY = frozenset({"torch", "transformers", "vllm", "bitsandbytes", "accelerate"})
# What the analysis wing may import: pure standard-library modules, numpy, the orchestrator's
# errors, itself, and the contract types (keys, specs, the benchmark card, the scoring module,
# literature rows).
ANALYSIS_ALLOWED = frozenset(
    {
        "__future__",
        "collections",
        "dataclasses",
        "decimal",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "re",
        "statistics",
        "typing",
        "numpy",
        "orchestrator.errors",
        "orchestrator.analysis",
        "workers.keys",
        "workers.spec",
        "workers.card",
        "workers.scoring",
        "storage.literature",
    }
)
ANALYSIS_FORBIDDEN_CALLS = frozenset({"open", "print", "input", "exec", "eval", "__import__"})
# The report wing reads stores and renders; it never reads config, talks to Ray or loads a
# model. An allowlist: the standard library, the table and plotting libraries, MLflow (the
# tracker export, imported inside its function), the store, the analysis wing and the contract
# types.
REPORT_ALLOWED = frozenset(
    {
        "numpy",
        "pandas",
        "pyarrow",
        "matplotlib",
        "orjson",
        "mlflow",
        "orchestrator.errors",
        "orchestrator.analysis",
        "orchestrator.report",
        "storage",
        "workers.spec",
        "workers.keys",
        "workers.card",
        "workers.scoring",
    }
)
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
# How the run wing sees the workers: contract types, the task entry points, the registry.
RUN_WORKERS_ALLOWED = frozenset(
    {
        "workers.spec",
        "workers.execspec",
        "workers.keys",
        "workers.card",
        "workers.scoring",
        "workers.tasks",
        "workers.benchmarks.base",
        "workers.benchmarks.registry",
        "workers.backends.base",
        "workers.backends.registry",
    }
)
# The backends' contract and registry import no heavy library (a definition lives in a module
# that imports none): the driver may import them at any time.
BACKEND_CONTRACTS = frozenset({"workers.backends.base", "workers.backends.registry"})
BACKEND_NAMES = frozenset(BACKENDS)
RAY_MODULES = frozenset(
    {"orchestrator.run.execute.dispatch", "orchestrator.run.execute.raycluster", "workers.tasks"}
)
# The run wing's sub-wings, bottom floor first: each imports only sub-wings on lower floors
# (estimate and execute share a floor and never import each other); api.py, the tools' face of
# the wing, sits on top.
RUN_FLOORS = {
    "config": 1,
    "prepare": 2,
    "plan": 3,
    "preflight": 4,
    "estimate": 5,
    "execute": 5,
    "api": 6,
}
RUNNER = "orchestrator.run.execute.runner"
# The report wing's sub-wings: choices.py (option names) below everything, tables above it, and
# the wings that turn tables into files, pages, exports and screens above tables, none of which
# imports another.
REPORT_FLOORS = {
    "choices": 0,
    "tables": 1,
    "formats": 2,
    "view": 2,
    "exports": 2,
    "screens": 2,
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted module name, e.g. "orchestrator.report.tables.build"
    imports: frozenset[str]  # every absolute import, anywhere in the file
    top_imports: frozenset[str]  # imports executed when the module is imported
    calls: frozenset[str]  # names of plain function calls (`open(...)`)
    # Registered backend names used to decide something: compared with, or listed in a
    # module-level table (the driver asks a backend's definition instead).
    backend_names: frozenset[str] = frozenset()
    # (module, name) of every `from module import name`, anywhere in the file: the name may be
    # a submodule, which is then what the file imports
    from_imports: frozenset[tuple[str, str]] = frozenset()


def parse(path: Path, name: str) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def names(nodes) -> set[str]:
        out: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                out |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module)
        return out

    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    from_imports = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for alias in node.names
    }
    return Module(
        name,
        frozenset(names(ast.walk(tree))),
        frozenset(names(tree.body)),
        frozenset(calls),
        frozenset(backend_names_used(tree)),
        frozenset(from_imports),
    )


def backend_names_used(tree: ast.Module) -> set[str]:
    """Backend names in comparisons (`x == "vllm"`, `x in ("hf", "vllm")`, `match` cases) and
    in module-level tables (`ORDER = ("hf", "vllm")`, `{"hf": ...}`)."""

    def constants(node: ast.AST) -> set[str]:
        return {
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in BACKEND_NAMES
        }

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found |= constants(node)
        elif isinstance(node, ast.MatchValue):
            found |= constants(node.value)
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Tuple | ast.List | ast.Set | ast.Dict):
            found |= constants(value)
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def hits(imports: frozenset[str], packages) -> list[str]:
    return sorted(i for i in imports if any(within(i, p) for p in packages))


# -- the rules ----------------------------------------------------------------------------------


def nothing_imports_the_cli(m: Module) -> list[str]:
    if within(m.name, "orchestrator.cli"):
        return []
    return hits(m.imports, ["orchestrator.cli"])


def analysis_is_pure(m: Module) -> list[str]:
    if not within(m.name, "orchestrator.analysis"):
        return []
    bad = [i for i in sorted(m.imports) if not any(within(i, a) for a in ANALYSIS_ALLOWED)]
    return bad + [f"calls {c}()" for c in sorted(m.calls & ANALYSIS_FORBIDDEN_CALLS)]


def report_never_reads_config_ray_or_backends(m: Module) -> list[str]:
    if not within(m.name, "orchestrator.report"):
        return []
    return sorted(
        i
        for i in m.imports
        if i.split(".")[0] not in STDLIB and not any(within(i, a) for a in REPORT_ALLOWED)
    )


def tools_see_run_through_its_api(m: Module) -> list[str]:
    """The tools wing uses the run wing's face (`orchestrator.run.api`), not its rooms."""
    if not within(m.name, "orchestrator.tools"):
        return []
    return [i for i in hits(m.imports, ["orchestrator.run"]) if i != "orchestrator.run.api"]


def only_the_cli_runs_a_grid(m: Module) -> list[str]:
    if within(m.name, "orchestrator.cli") or m.name == RUNNER:
        return []
    return hits(m.imports, [RUNNER])


def run_floor(name: str) -> int | None:
    parts = name.split(".")
    return (
        RUN_FLOORS.get(parts[2])
        if len(parts) > 2 and parts[:2] == ["orchestrator", "run"]
        else None
    )


def run_sub_wings_import_downwards(m: Module) -> list[str]:
    own = run_floor(m.name)
    if own is None:
        return []
    sub = m.name.split(".")[2]
    return [
        i
        for i in hits(m.imports, ["orchestrator.run"])
        if (floor := run_floor(i)) is not None and i.split(".")[2] != sub and floor >= own
    ]


def report_floor(name: str) -> int | None:
    parts = name.split(".")
    return (
        REPORT_FLOORS.get(parts[2])
        if len(parts) > 2 and parts[:2] == ["orchestrator", "report"]
        else None
    )


def report_sub_wings_import_downwards(m: Module) -> list[str]:
    own = report_floor(m.name)
    if own is None:
        return []
    sub = m.name.split(".")[2]
    return [
        i
        for i in hits(m.imports, ["orchestrator.report"])
        if (floor := report_floor(i)) is not None and i.split(".")[2] != sub and floor >= own
    ]


def run_sees_workers_through_contracts(m: Module) -> list[str]:
    if not within(m.name, "orchestrator.run"):
        return []
    workers = [i for i in hits(m.imports, ["workers"]) if i not in RUN_WORKERS_ALLOWED]
    return workers + hits(m.imports, ["orchestrator.report", "orchestrator.tools"])


def ray_only_in_dispatch_and_tasks(m: Module) -> list[str]:
    if m.name in RAY_MODULES:
        return []
    return hits(m.imports, ["ray"])


def heavy_libraries_only_in_backends(m: Module) -> list[str]:
    if within(m.name, "workers.backends"):
        return []
    return hits(m.imports, HEAVY)


def workers_never_import_orchestrator(m: Module) -> list[str]:
    return hits(m.imports, ["orchestrator"]) if within(m.name, "workers") else []


def storage_imports_nothing_of_the_project(m: Module) -> list[str]:
    if not within(m.name, "storage"):
        return []
    return hits(m.imports, ["orchestrator", "workers"])


def orchestrator_reaches_backends_only_lazily(m: Module) -> list[str]:
    """The driver may call a backend helper inside a command (a tokenizer for `prompts`),
    never at import time."""
    if not within(m.name, "orchestrator"):
        return []
    return [i for i in hits(m.top_imports, ["workers.backends"]) if i not in BACKEND_CONTRACTS]


def the_driver_asks_a_backends_definition(m: Module) -> list[str]:
    """Outside workers/backends/, nothing decides by a backend's name: a new backend is one
    file and its registration, not an edit of every place that knows the others."""
    if within(m.name, "workers.backends"):
        return []
    return sorted(m.backend_names)


def module_edges(m: Module, known: frozenset[str]) -> set[str]:
    """The project modules `m` imports: `import a.b` imports a.b, `from a import b` imports the
    module a.b where there is one, else a (a package's own __init__ is not an edge of its
    submodules: importing a.b runs a's __init__ first, which is Python's, not a cycle of ours)."""
    out = {i for i in m.imports if i in known and not any(i == f for f, _ in m.from_imports)}
    for module, name in m.from_imports:
        target = f"{module}.{name}" if f"{module}.{name}" in known else module
        if target in known:
            out.add(target)
    return out - {m.name}


def no_import_cycles(m: Module) -> list[str]:
    """The modules `m` imports that import `m` back, directly or through others: every import
    counts, `TYPE_CHECKING` and function-local ones included (a cycle hidden there still ties
    the two modules together)."""
    graph = {**IMPORT_GRAPH, m.name: module_edges(m, KNOWN | {m.name})}
    back = []
    for start in sorted(graph[m.name]):
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        if m.name in seen:
            back.append(start)
    return back


RULES: dict[str, Callable[[Module], list[str]]] = {
    f.__name__: f
    for f in (
        nothing_imports_the_cli,
        analysis_is_pure,
        report_never_reads_config_ray_or_backends,
        tools_see_run_through_its_api,
        only_the_cli_runs_a_grid,
        run_sub_wings_import_downwards,
        report_sub_wings_import_downwards,
        run_sees_workers_through_contracts,
        ray_only_in_dispatch_and_tasks,
        heavy_libraries_only_in_backends,
        workers_never_import_orchestrator,
        storage_imports_nothing_of_the_project,
        orchestrator_reaches_backends_only_lazily,
        the_driver_asks_a_backends_definition,
        no_import_cycles,
    )
}


def project_modules() -> list[Module]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out.append(parse(path, name))
    return out


MODULES = project_modules()
KNOWN = frozenset(m.name for m in MODULES)
IMPORT_GRAPH = {m.name: module_edges(m, KNOWN) for m in MODULES}


@pytest.mark.parametrize("rule", RULES)
def test_every_module_keeps_the_rule(rule):
    broken = {m.name: v for m in MODULES if (v := RULES[rule](m))}
    assert broken == {}


def fixture_cases() -> list[tuple[Path, str, str]]:
    cases = []
    for path in sorted(FIXTURES.glob("*.py")):
        head = path.read_text(encoding="utf-8").splitlines()[0]
        _, _, name, _, rule = head.split()  # "# as: <module> breaks: <rule>"
        cases.append((path, name, rule))
    return cases


def fixture_id(value) -> str:
    return value.stem if isinstance(value, Path) else str(value)


@pytest.mark.parametrize(("path", "name", "rule"), fixture_cases(), ids=fixture_id)
def test_each_rule_catches_its_fixture(path, name, rule):
    module = parse(path, name)
    objecting = {r for r, check in RULES.items() if check(module)}
    assert objecting == {rule}


def test_every_rule_has_a_fixture():
    assert {rule for _, _, rule in fixture_cases()} == set(RULES)


def test_the_wings_exist_and_nothing_is_left_flat():
    """orchestrator/ holds only its wings (and the shared errors module)."""
    flat = sorted(p.name for p in (ROOT / "orchestrator").glob("*.py"))
    assert flat == ["__init__.py", "errors.py"]
    folders = (ROOT / "orchestrator").iterdir()
    wings = sorted(p.name for p in folders if (p / "__init__.py").exists())
    assert wings == ["analysis", "cli", "report", "run", "tools"]


def test_the_report_wing_is_sub_wings_and_its_choices():
    """orchestrator/report/ holds its sub-wings and choices.py (the command line's names of
    formats and export options), nothing flat."""
    report = ROOT / "orchestrator" / "report"
    flat = sorted(p.name for p in report.glob("*.py"))
    assert flat == ["__init__.py", "choices.py"]
    subs = sorted(p.name for p in report.iterdir() if (p / "__init__.py").exists())
    assert subs == sorted(k for k in REPORT_FLOORS if k != "choices")


def test_the_run_wing_is_sub_wings_and_its_api():
    """orchestrator/run/ holds its sub-wings and api.py (the tools' face), nothing flat."""
    run = ROOT / "orchestrator" / "run"
    flat = sorted(p.name for p in run.glob("*.py"))
    assert flat == ["__init__.py", "api.py"]
    subs = sorted(p.name for p in run.iterdir() if (p / "__init__.py").exists())
    assert subs == sorted(k for k in RUN_FLOORS if k != "api")


def size_breaks(
    folder: Path, root: Path = ROOT, max_lines: int = 400, max_function: int = 60
) -> list[str]:
    out = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        if len(text.splitlines()) > max_lines:
            out.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > max_function:
                    out.append(f"{where}:{node.name}: {length} lines")
    return out


# What may exceed the size budget, by place (a module, or module:function): empty since the last
# debts were paid (issue 33, item 3). An entry would be a debt, and the test below fails as soon
# as one is paid, so that the list only shrinks.
SIZE_ALLOWLIST: frozenset[str] = frozenset()


def size_places(breaks: list[str]) -> set[str]:
    return {b.rsplit(": ", 1)[0] for b in breaks}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_keeps_the_size_budget(package):
    """STYLE rule 3: modules under 400 lines, functions under 60, everywhere but the allowlist."""
    breaks = size_breaks(ROOT / package)
    assert [b for b in breaks if b.rsplit(": ", 1)[0] not in SIZE_ALLOWLIST] == []


def test_the_size_allowlist_holds_only_what_still_exceeds():
    found = size_places([b for package in PACKAGES for b in size_breaks(ROOT / package)])
    assert SIZE_ALLOWLIST - found == set(), "paid debts: take them off SIZE_ALLOWLIST"


def test_the_size_budget_catches_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    assert size_breaks(tmp_path, root=tmp_path) == ["long.py:f: 62 lines"]


def test_importing_the_driver_loads_no_gpu_library():
    """Everything the driver runs (also as a Ray client on a laptop: docs/cluster.md) imports
    no GPU library; tests/integration/test_multinode.py runs a `ray://` driver without them."""
    driver = [
        "orchestrator.cli",
        "orchestrator.run.execute.dispatch",
        "orchestrator.run.execute.runner",
        "orchestrator.run.estimate.estimator",
        "orchestrator.report.screens.status",
        "orchestrator.report.tables.build",
        "orchestrator.report.formats.render",
        "orchestrator.report.screens.planview",
        "storage.store",
        "storage.index",
        "workers.benchmarks.registry",
        "ray.util.client",
    ]
    code = (
        f"import sys, {', '.join(driver)};"
        "from workers.benchmarks.registry import get_benchmark;"
        "[get_benchmark(n) for n in ('humanevalfix', 'infibench')];"
        "from workers.backends.registry import backend_definitions;"
        "[d.installed() for d in backend_definitions()];"
        "print(','.join(sorted(m for m in ('torch','transformers','vllm','bitsandbytes')"
        " if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_cli_starts_without_pandas():
    """Every command imports orchestrator.cli.main first: `status` (1 s at 6,000 settings) and
    `plan` do not read a DataFrame, and pandas alone took 0.27 s to import here. A command's
    module imports the report's frame code inside the function that needs it."""
    code = "import sys, orchestrator.cli.main; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
