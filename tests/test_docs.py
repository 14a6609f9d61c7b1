"""The guides name only what exists: every module, class, function, file and make target
that docs/architecture.md and CONTRIBUTING.md put in backticks is still in the code.

What a backticked span is taken for:

    `council/limits.py`, `web/`          a path (with a slash, or a .py/.md file): it exists
    `make test-fast`                     a target of the Makefile
    `bin/council doctor`                 a command: its first word, a path, exists
    `council.limits`, `Deliberation.run`,
    `council.iteration.refine_until_done`
                                         a dotted name: a module of ours (then names defined
                                         in it, then attributes of a class), a class of ours
                                         and its attribute, or a library's module or object
    `FanOut`, `compose()`, `late`        a name: defined in our code (a module, class,
                                         function, method, field or assignment), or a string
                                         the code uses (an event kind, a record field's value)

Environment variables (`COUNCIL_STORE`), routes (`/v1`), other commands and code with
spaces are prose, not names, and are left alone. Our files are read, never imported.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ("docs/architecture.md", "CONTRIBUTING.md")
# The guides speak of the code: a name the tests alone define does not count.
TESTS = ROOT / "tests"
SKIPPED_DIRS = {"data", "node_modules", "build", "dist"}
# Library modules a guide names by their usual short name.
ALIASES = {"workflow": "temporalio.workflow", "activity": "temporalio.activity"}
# Commands a guide names on their own.
COMMANDS = {"make", "python3", "pip", "git", "pytest", "ruff", "mypy"}

SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
FILE = re.compile(r"\.(py|md|toml|ya?ml|json|jsonl|txt|html|css|js|cfg|ini)$")
PATH = re.compile(r"[A-Za-z_][\w.-]*(/[\w.-]+)*/?")
DOTTED = re.compile(r"_?[A-Za-z]\w*(\.[A-Za-z_]\w*)+(\(\))?")
NAME = re.compile(r"_?[A-Za-z]\w*(\(\))?")
CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*")
# A name the code defines: a module, a def or class, an assignment or a field, or a string
# (an event kind, a record field's value).
CLASS = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)
DEFINES = (
    re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.MULTILINE),
    re.compile(r"^[ \t]*(\w+)[ \t]*[:=]", re.MULTILINE),
    re.compile(r"[\"'](\w+)[\"']"),
)
MAKE_TARGET = re.compile(r"^([\w-]+(?: [\w-]+)*):(?!=)", re.MULTILINE)


def python_files() -> list[Path]:
    """The checkout's Python, never descending into an environment or the data."""
    found = []
    for top in sorted(ROOT.iterdir()):
        if top.name.startswith(".") or top.name in SKIPPED_DIRS:
            continue
        if top.is_dir():
            found += [p for p in sorted(top.rglob("*.py")) if "__pycache__" not in p.parts]
        elif top.suffix == ".py":
            found.append(top)
    return found


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@cache
def classes_in(path: Path) -> list[ast.ClassDef]:
    """The classes a module defines at its top level (under `if` and `try` too) and the
    classes inside them."""
    found: list[ast.ClassDef] = []
    pending: list[ast.stmt] = list(parsed(path).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ClassDef):
            found.append(node)
            pending += node.body
        elif isinstance(node, ast.If | ast.Try | ast.With):
            pending += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                pending += handler.body
    return found


def assigned(targets: list[ast.expr]) -> set[str]:
    names = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def body_names(body: list[ast.stmt]) -> set[str]:
    """What a module's or a class's own body defines or imports (under `if` and `try` too)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= assigned(node.targets)
        elif isinstance(node, ast.AnnAssign):
            names |= assigned([node.target])
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            names |= body_names(inner)
    return names


class Code:
    """The checkout's modules, read as text, and parsed only where a name needs it."""

    def __init__(self) -> None:
        self.modules: dict[str, Path] = {}
        self.class_files: dict[str, list[Path]] = {}
        self.names: set[str] = set()
        for path in python_files():
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                self.modules[".".join(parts)] = path
                self.names.add(parts[-1])
            if path.is_relative_to(TESTS):
                continue
            text = path.read_text(encoding="utf-8")
            for pattern in DEFINES:
                self.names.update(pattern.findall(text))
            for name in CLASS.findall(text):
                self.class_files.setdefault(name, []).append(path)
        self.top = {name.split(".")[0] for name in self.modules}

    def classes(self, name: str) -> list[ast.ClassDef]:
        """Every class of ours with this name."""
        return [
            node
            for path in self.class_files.get(name, [])
            for node in classes_in(path)
            if node.name == name
        ]

    def class_has(self, name: str, attribute: str) -> bool:
        return any(attribute in body_names(c.body) for c in self.classes(name))

    def in_module(self, module: str, rest: list[str]) -> str | None:
        """Why `rest` is not found in our module `module` (None: it is)."""
        if not rest:
            return None
        tree = parsed(self.modules[module])
        if rest[0] not in body_names(tree.body):
            return f"{module} defines no {rest[0]}"
        if len(rest) == 1:
            return None
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == rest[0]]
        if len(rest) == 2 and classes and rest[1] in body_names(classes[0].body):
            return None
        if len(rest) == 2 and not classes and self.class_has(rest[0], rest[1]):
            return None  # a class the module imports
        return f"{module}.{rest[0]} has no {'.'.join(rest[1:])}"

    def dotted(self, name: str) -> str | None:
        """Why the dotted name is not found (None: it is)."""
        parts = name.removesuffix("()").split(".")
        if parts[0] in self.top:
            for cut in range(len(parts), 0, -1):
                module = ".".join(parts[:cut])
                if module in self.modules:
                    return self.in_module(module, parts[cut:])
            return f"no module {parts[0]}.{parts[1]}"
        if self.classes(parts[0]):
            if len(parts) == 2 and self.class_has(parts[0], parts[1]):
                return None
            return f"class {parts[0]} has no {'.'.join(parts[1:])}"
        return library(name)

    def name(self, name: str) -> str | None:
        bare = name.removesuffix("()")
        return None if bare in self.names else f"nothing in the code is named {bare}"


def library(name: str) -> str | None:
    """A library's module or object, found by importing it (None: found)."""
    parts = name.removesuffix("()").split(".")
    parts[0:1] = ALIASES.get(parts[0], parts[0]).split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return f"{'.'.join(parts[:cut])} has no {'.'.join(parts[cut:])}"
            found = getattr(found, attribute)
        return None
    return f"{parts[0]} is neither a module or class of ours nor a library"


@cache
def code() -> Code:
    return Code()


@cache
def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {t for line in MAKE_TARGET.findall(text) for t in line.split()}


def spans(guide: str) -> list[str]:
    text = FENCE.sub("", (ROOT / guide).read_text(encoding="utf-8"))
    return sorted({" ".join(span.split()) for span in SPAN.findall(text)})


def problem(span: str) -> str | None:
    """Why a backticked span names something that does not exist (None: it exists, or it
    names nothing this test checks)."""
    span = span.strip()
    if " " in span:
        first, _, rest = span.partition(" ")
        if first == "make":
            words = shlex.split(rest)  # VARIABLE="a value" is one word
            missing = [t for t in words if "=" not in t and t not in make_targets()]
            return f"the Makefile has no target {missing[0]}" if missing else None
        if "/" in first or FILE.search(first):
            return problem(first)
        return None
    if "://" in span or span.startswith(("/", ".", "-")):
        return None  # an address, a route, a hidden path, a flag
    if FILE.search(span) or ("/" in span and PATH.fullmatch(span)):
        if "/" not in span and not span.endswith((".py", ".md")):
            return None  # a file of the user's, such as council.toml
        return None if (ROOT / span.rstrip("/")).exists() else f"no file {span}"
    if CONSTANT.fullmatch(span) or span in COMMANDS:
        return None  # an environment variable, a library's constant, a command
    if DOTTED.fullmatch(span):
        return code().dotted(span)
    if NAME.fullmatch(span):
        return None if (ROOT / span).is_file() else code().name(span)  # `Dockerfile`
    return None


@pytest.mark.parametrize("guide", GUIDES)
def test_the_guide_names_only_what_exists(guide: str) -> None:
    missing = [f"`{s}`: {why}" for s in spans(guide) if (why := problem(s)) is not None]
    assert not missing, f"{guide} names what is gone:\n" + "\n".join(missing)


def test_the_guide_names_its_layers() -> None:
    """The architecture guide speaks of the code: many names, each checked above."""
    assert len(spans("docs/architecture.md")) >= 60


@pytest.mark.parametrize(
    ("span", "found"),
    [
        ("workflows/deliberation.py", True),
        ("workflows/nothing_here.py", False),
        ("council.limits", True),
        ("council.nothing_here", False),
        ("Deliberation.run", True),
        ("Deliberation.nothing_here", False),
        ("ModelGateway.call_model", True),
        ("council.iteration.should_continue_iteration", True),
        ("council.iteration.no_such_rule", False),
        ("app.settings.environment.Settings", True),
        ("versions.STRAGGLERS", False),
        ("_fan_out", False),
        ("FanOut", True),
        ("make test-fast", True),
        ("make no-such-target", False),
        ('make eval EVAL_ARGS="--limit 10"', True),
        ("bin/council doctor", True),
        ("workflow.wait_condition", True),
        ("COUNCIL_STORE", True),
        ("council.toml", True),
        ("Dockerfile", True),
        ("Dockerfiles", False),
    ],
)
def test_what_counts_as_found(span: str, found: bool) -> None:
    assert (problem(span) is None) is found, problem(span)
