"""Which of an MCP server's tools a council is offered, and what is said of the others
(council.tool_config): naming a tool in `allow` offers it; a tool that does not declare
itself read-only needs `side_effects = true` otherwise; each withheld tool is said, in the
record's lines and in the refusal of a start that names an entry offering none."""

from __future__ import annotations

from typing import Any

import pytest

from council.tool_config import (
    MAX_WITHHELD_LINES,
    NOT_ALLOWED,
    NOT_READ_ONLY,
    WRITES,
    McpEntry,
    clashing,
    nothing_offered,
    withheld_lines,
)
from council.tools import offered_name

pytestmark = pytest.mark.fast


def entry(**options: Any) -> McpEntry:
    return McpEntry.model_validate({"command": ["python", "server.py"], **options})


@pytest.mark.parametrize(
    ("options", "read_only", "why"),
    [
        ({}, True, None),
        ({}, None, NOT_READ_ONLY),  # the SDK's default: no annotations at all
        ({}, False, WRITES),
        ({"side_effects": True}, None, None),
        ({"side_effects": True}, False, None),
        ({"allow": ["write"]}, None, None),  # naming it is consent
        ({"allow": ["write"]}, False, None),
        ({"allow": ["other"]}, True, NOT_ALLOWED),
        ({"allow": ["other"], "side_effects": True}, None, NOT_ALLOWED),
        ({"allow": []}, True, NOT_ALLOWED),
    ],
)
def test_which_tools_an_entry_offers(
    options: dict[str, Any], read_only: bool | None, why: str | None
) -> None:
    assert entry(**options).withholds("write", read_only) == why


def test_the_record_names_each_withheld_tool_and_counts_the_rest() -> None:
    assert withheld_lines("notes", {"write_note": NOT_READ_ONLY}) == [
        "notes__write_note: does not declare readOnlyHint; offered with side_effects = true "
        "or by naming it in allow"
    ]
    many = {f"tool{i}": NOT_ALLOWED for i in range(MAX_WITHHELD_LINES + 5)}
    lines = withheld_lines("big", many)
    assert len(lines) == MAX_WITHHELD_LINES
    assert lines[0] == "big__tool0: not named in allow"
    assert lines[-1] == "big: 6 more tools withheld"


def test_the_refusal_names_the_entry_and_the_setting_that_offers_its_tools() -> None:
    unmarked = nothing_offered(
        "notes", {"write_note": NOT_READ_ONLY, "erase_notes": WRITES}, "council.toml"
    )
    assert unmarked == (
        "tools: notes offers none of its tools: write_note, erase_notes are not declared "
        "read-only (readOnlyHint); offer them with side_effects = true in [tools.notes] of "
        "council.toml, or name them in its allow"
    )
    one = nothing_offered("notes", {"write_note": NOT_READ_ONLY})
    assert "write_note is not declared read-only" in one and "name it in its allow" in one
    typo = nothing_offered("calc", {"evaluate": NOT_ALLOWED, "convert": NOT_ALLOWED})
    assert typo == (
        "tools: calc offers none of its tools: its allow names none of them (it has "
        "evaluate, convert); name them in the allow of [tools.calc] of council.toml, or "
        "leave allow out"
    )
    assert "\n" not in unmarked + typo


def test_two_entries_that_offer_one_function_name_are_named_both() -> None:
    """Names that read the same once cleaned (a dot becomes _), or once joined by __."""
    cleaned = clashing({"calc.v2": ["calc_v2__evaluate"], "calc_v2": ["calc_v2__evaluate"]})
    assert cleaned == (
        "tools: [tools.calc.v2] and [tools.calc_v2] of council.toml both offer "
        "calc_v2__evaluate (an offered name is the entry's and the tool's, joined by __, in "
        "letters, digits, _ and -, at most 64 characters): rename one of the two entries"
    )
    joined = {
        "a": [offered_name("a", "b__c"), offered_name("a", "d")],
        "a__b": [offered_name("a__b", "c")],
    }
    line = clashing(joined, "/etc/council.toml")
    assert line is not None and "\n" not in line
    assert line.startswith(
        "tools: [tools.a] and [tools.a__b] of /etc/council.toml both offer a__b__c"
    )
    assert clashing({"a": ["a__x", "a__y"], "b": ["b__x"]}) is None
