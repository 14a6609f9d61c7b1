"""The layers of the code: imports point down, and no module imports itself back.

    council, grading                  pure: the protocol, problems and grading
    bounded                           work in a process of its own, within limits
    activities                        I/O: the model call
    workflows                         Temporal workflows (may name the activity they call)
    runs                              a run from outside: start, read, steer, list, follow
    app                               the front door, the settings, connecting to Temporal,
                                      payload codec, terminal output
    doctor                            the setup checks: Temporal, a worker, the providers
    service                           the worker: what it runs, and its command
    simulator                         a fake provider: council and grading only
    harness, evaluation, bench, web,
    mcp_server, worker.py,
    starter.py, demo.py, up.py        what people run

Every import counts: at the top, inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

from harness.processes import ROOT

pytestmark = pytest.mark.fast

BELOW = {
    "council": set(),
    "grading": {"council"},
    "bounded": set(),
    "activities": {"council", "bounded"},
    "workflows": {"council", "grading", "activities"},
    "runs": {"council", "workflows"},
    "app": {"council", "bounded"},
    "doctor": {"council", "activities", "workflows", "runs", "app"},
    "simulator": {"council", "grading"},
    "harness": {"council", "app", "workflows", "runs", "simulator"},
    "evaluation": {"council", "grading", "workflows", "runs", "app"},
    "bench": {
        "council",
        "grading",
        "activities",
        "workflows",
        "runs",
        "app",
        "simulator",
        "harness",
        "service",
    },
    "service": {"council", "activities", "workflows", "runs", "app"},
    "worker": {"app", "service"},
    "starter": {
        "council",
        "activities",
        "workflows",
        "runs",
        "app",
        "evaluation",
        "mcp_server",
        "doctor",
    },
    "web": {"council", "workflows", "runs", "app", "doctor"},
    "mcp_server": {"council", "runs", "app", "doctor", "web"},
    "demo": {"app", "harness"},
    "up": {"council", "app", "simulator", "harness", "web"},
}
# What the check reads: every folder and root script named in the layers above.
PACKAGES = tuple(name for name in BELOW if (ROOT / name).is_dir())
SCRIPTS = tuple(name for name in BELOW if (ROOT / f"{name}.py").is_file())
OURS = set(BELOW)
# What the checkout has for its own development and the wheel leaves out (test_packaging).
TOOLING = frozenset({"harness", "simulator", "bench", "tests", "demo", "up"})


def modules() -> dict[str, Path]:
    found = {name: ROOT / f"{name}.py" for name in SCRIPTS}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


@functools.cache
def nodes(path: Path) -> list[ast.AST]:
    """Every node of a module (read once: the checks below read the same modules)."""
    return list(ast.walk(ast.parse(path.read_text(), str(path))))


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours that this module imports (the longest known prefix)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in nodes(path):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target.split(".")[0] in OURS and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def test_imports_point_down() -> None:
    climbing = []
    for module, targets in graph().items():
        top = module.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if other != top and other not in BELOW[top]:
                climbing.append(f"{module} -> {target}")
    assert climbing == []


def test_no_import_cycles() -> None:
    edges = graph()
    # A package's __init__ importing its own submodules is not a cycle of the design.
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(
                    " -> ".join(path[path.index(nxt) :] + [node, nxt])
                    if nxt in path
                    else f"{node} -> {nxt}"
                )
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_the_check_sees_a_climbing_import(tmp_path: Path) -> None:
    """Control: an import from council into workflows is reported."""
    path = tmp_path / "bad.py"
    path.write_text("from workflows.deliberation import Deliberation\n")
    found = imports("council.bad", path, set(modules()))
    assert "workflows.deliberation" in found


def test_nothing_imports_the_worker_script() -> None:
    """worker.py only starts the worker (service/): tests, benchmarks and tools import
    service.worker and service.command, never the script."""
    known = set(modules())
    files = {**modules(), **{f"tests.{p.stem}": p for p in sorted((ROOT / "tests").glob("*.py"))}}
    importing = [name for name, path in files.items() if "worker" in imports(name, path, known)]
    assert importing == []


def installed() -> set[str]:
    """The top-level packages and modules the wheel installs (pyproject.toml's lists)."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(listed["packages"]) | set(listed["py-modules"])


def tooling_imported(path: Path) -> set[str]:
    """The development tooling a module imports (anywhere in it)."""
    found = set()
    for node in nodes(path):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in TOOLING}


def test_nothing_installed_imports_the_development_tooling() -> None:
    """An installed Council has no harness, simulator, benchmarks or tests: a module of the
    wheel that imported one would fail there (as `make eval`'s runner once did)."""
    wheel = installed()
    assert wheel and not wheel & TOOLING
    leaning = [
        f"{name} -> {', '.join(sorted(found))}"
        for name, path in modules().items()
        if name.split(".")[0] in wheel and (found := tooling_imported(path))
    ]
    assert leaning == []


def test_the_tooling_check_sees_an_import_of_the_harness(tmp_path: Path) -> None:
    """Control: a module that imports the harness, as a whole or in part, is reported."""
    path = tmp_path / "leaning.py"
    path.write_text("import tests.fake_models\nfrom harness.processes import ROOT\n")
    assert tooling_imported(path) == {"tests.fake_models", "harness.processes"}
