"""The user's docs name only commands, flags and make targets that exist: every
`bin/council COMMAND` in README.md, CONTRIBUTING.md and docs/*.md is a command of
starter.py's parser, and every `--flag` written after it on that line, up to the end of its
code span or table cell, is one of that command's (or of its sub-commands'); every `make
TARGET` in a code span or at the start of a line of a code block is a target of the
Makefile. The README stays a user's first page: short, its council.toml one the
configuration reads, and a link to every page of docs/."""

from __future__ import annotations

import argparse
import re
from functools import cache
from pathlib import Path

import pytest

import starter
from council.config import parse_config

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
# A command as the docs write it, and what follows it up to a code span's or a cell's end.
COMMAND = re.compile(r"(?:bin/council|starter\.py)\s+([a-z][a-z-]*)([^`\n|]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
MAKE_SPAN = re.compile(r"`make ([a-z][a-z0-9-]*)")
MAKE_LINE = re.compile(r"^\s*(?:\$ )?make ([a-z][a-z0-9-]*)", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
MAKE_TARGET = re.compile(r"^([\w-]+(?: [\w-]+)*):(?!=)", re.MULTILINE)


@cache
def commands() -> dict[str, frozenset[str]]:
    """Each command of the CLI and the flags it (or a sub-command of it) takes."""

    def flags(parser: argparse.ArgumentParser) -> set[str]:
        found: set[str] = set()
        for action in parser._actions:
            found |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found |= flags(sub)
        return found

    return {
        name: frozenset(flags(sub))
        for action in starter.parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


@cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(t for line in MAKE_TARGET.findall(text) for t in line.split())


def problems(text: str) -> list[str]:
    """What a text names that the CLI or the Makefile does not have."""
    named = MAKE_SPAN.findall(text)
    named += [t for block in FENCE.findall(text) for t in MAKE_LINE.findall(block)]
    found = [f"the Makefile has no target {t}" for t in named if t not in make_targets()]
    for line in text.splitlines():
        for match in COMMAND.finditer(line):
            name, rest = match.groups()
            if name not in commands():
                found.append(f"no command {name}: {line.strip()[:120]}")
                continue
            found += [
                f"{name} has no {flag}: {line.strip()[:120]}"
                for flag in FLAG.findall(rest)
                if flag not in commands()[name]
            ]
    return found


def test_the_readme_is_short_and_links_every_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    linked = set(re.findall(r"\]\((docs/[a-z-]+\.md)[)#]", text))
    assert linked == {str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md")}


def test_the_readme_council_toml_is_read_as_written() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```toml\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1
    assert {"default", "mixed"} <= set(parse_config(blocks[0]).council_names())


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_name_only_commands_and_flags_the_cli_has(doc: Path) -> None:
    assert problems(doc.read_text(encoding="utf-8")) == []


def test_the_docs_name_the_commands() -> None:
    named = {m.group(1) for doc in DOCS for m in COMMAND.finditer(doc.read_text("utf-8"))}
    assert {"start", "list", "show", "doctor", "store", "mcp"} <= named <= set(commands())


def test_what_counts_as_a_problem() -> None:
    """Control: a flag or a command the CLI lacks is found, wherever on the line."""
    assert problems("| `bin/council start Q --wait --json` | ok |") == []
    assert problems("`bin/council store prune --dry-run`") == []
    assert problems("`bin/council start Q --no-such-flag`") == [
        "start has no --no-such-flag: `bin/council start Q --no-such-flag`"
    ]
    assert problems("run `bin/council frobnicate` now") == [
        "no command frobnicate: run `bin/council frobnicate` now"
    ]
    # A flag after the span or the cell belongs to something else.
    assert problems("`bin/council list` | `--wait`") == []
    assert problems("`make test-fast`, then\n```\nmake test\n```\n") == []
    assert problems("`make tests`, or\nmake sure of it") == ["the Makefile has no target tests"]
    assert problems("```sh\nmake chaos-monkey\n```") == ["the Makefile has no target chaos-monkey"]
