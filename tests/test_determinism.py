"""What replays reads nothing but its input: no module of workflows/ or council/ reads the
clock, randomness, the environment or a file, or sleeps on the event loop, outside the one
documented fallback (council.iteration's `_clock`, which the workflow never reaches: it
passes workflow.now()). A workflow takes time, randomness and ids from the SDK
(workflow.now(), workflow.random(), workflow.uuid4()), which replay the same.

Read by the AST, so that an import under another name (`import time as t`,
`from random import random`) is caught as well as the plain one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.processes import ROOT

pytestmark = pytest.mark.fast

FOLDERS = ("workflows", "council")
# What a replayed module may not name: each a fully qualified name, or a module whose every
# name is refused (a trailing dot).
REFUSED = (
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.date.today",
    "time.",
    "random.",
    "uuid.",
    "os.environ",
    "os.getenv",
    "builtins.open",
    "asyncio.sleep",
)
# The one documented fallback: where (module, function), and what it reads.
ALLOWED = {("council/iteration.py", "_clock"): "datetime.datetime.now"}


def refused(name: str) -> bool:
    return any(name == rule or name.startswith(rule.rstrip(".") + ".") for rule in REFUSED)


class Reads(ast.NodeVisitor):
    """The refused names a module uses, each with its line and the function it is in."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, str] = {}  # a local name -> what it was imported as
        bound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.names[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
        if "open" not in bound and "open" not in self.names:
            self.names["open"] = "builtins.open"
        self.where: list[str] = ["<module>"]
        self.found: list[tuple[int, str, str]] = []  # line, function, the name read

    def qualified(self, node: ast.expr) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.names:
            return None
        return ".".join([self.names[node.id], *reversed(parts)])

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            arg.annotation = None  # a type named in an annotation reads nothing
        node.returns = None
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.check(node)

    def check(self, node: ast.Attribute | ast.Name) -> None:
        name = self.qualified(node)
        if name is not None and refused(name):
            self.found.append((node.lineno, self.where[-1], name))
        elif isinstance(node, ast.Attribute):
            self.generic_visit(node)


def reads(path: Path) -> list[tuple[int, str, str]]:
    visitor = Reads(tree := ast.parse(path.read_text(), str(path)))
    visitor.visit(tree)
    return visitor.found


def replayed() -> list[Path]:
    return [path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]


def test_replayed_code_reads_no_clock_randomness_environment_or_file() -> None:
    found, allowed = [], set()
    for path in replayed():
        where = path.relative_to(ROOT).as_posix()
        for line, function, name in reads(path):
            if ALLOWED.get((where, function)) == name:
                allowed.add((where, function))
            else:
                found.append(f"{where}:{line}: {name} (in {function})")
    assert found == []
    stale = [f"{where} {function}" for where, function in set(ALLOWED) - allowed]
    assert stale == [], "an allowance names what the code no longer reads"


def test_the_check_sees_every_form(tmp_path: Path) -> None:
    """Control: plain, aliased and imported-by-name reads are each reported, and a type in
    an annotation, a workflow's own clock and a name of the same spelling are not."""
    path = tmp_path / "planted.py"
    path.write_text(
        "import os, random as r, time\n"
        "from datetime import datetime as moment\n"
        "from datetime import time as time_of_day\n"
        "from uuid import uuid4\n"
        "from temporalio import workflow\n"
        "def run(rng: r.Random) -> None:\n"
        "    time.time(); r.random(); moment.now(); uuid4(); open('f'); os.environ['A']\n"
        "    workflow.now(); time_of_day(1); rng.random()\n"
    )
    assert [name for _, _, name in reads(path)] == [
        "time.time",
        "random.random",
        "datetime.datetime.now",
        "uuid.uuid4",
        "builtins.open",
        "os.environ",
    ]
