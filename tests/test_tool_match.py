"""The simulated members' pick of any offered tool besides fetch, web_search and the
calculator's (simulator.tool_match): the tools that share the most words with the
question, called with arguments valid for their input schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from simulator.tool_match import Function, matching_calls

pytestmark = pytest.mark.fast

# The tools of the reference time server (mcp-server-time), as a run offers them.
TIMEZONE = "IANA timezone name (e.g., 'America/New_York', 'Europe/London')."
CURRENT = Function(
    "time__get_current_time",
    "Get current time in a specific timezone",
    {
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": TIMEZONE}},
        "required": ["timezone"],
    },
)
CONVERT = Function(
    "time__convert_time",
    "Convert time between timezones",
    {
        "type": "object",
        "properties": {
            "source_timezone": {"type": "string", "description": "Source " + TIMEZONE},
            "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
            "target_timezone": {"type": "string", "description": "Target " + TIMEZONE},
        },
        "required": ["source_timezone", "time", "target_timezone"],
    },
)
# A tool with a schema of every kind pydantic writes.
REPORT = Function(
    "weather__forecast_report",
    "A weather forecast for a city, over some days.",
    {
        "type": "object",
        "$defs": {
            "Units": {"type": "string", "enum": ["metric", "imperial"]},
            "Place": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                "required": ["city"],
            },
        },
        "properties": {
            "place": {"$ref": "#/$defs/Place"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "units": {"$ref": "#/$defs/Units", "default": "metric"},
            "hourly": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "verbose": {"type": "boolean", "default": False},
        },
        "required": ["place", "days", "units", "hourly", "tags", "note"],
    },
)


def valid(function: Function, arguments: dict[str, Any]) -> dict[str, Any]:
    assert function.parameters is not None
    jsonschema.validate(arguments, function.parameters)
    return arguments


def test_the_tool_that_shares_the_most_words_with_the_question_is_called() -> None:
    [(name, arguments)] = matching_calls(
        "What is the current time in Asia/Tokyo?", [CURRENT, CONVERT]
    )
    assert name == "time__get_current_time"
    assert valid(CURRENT, arguments) == {"timezone": "Asia/Tokyo"}


def test_strings_go_to_the_properties_whose_examples_they_look_like() -> None:
    question = "Convert 09:30 from Europe/London to Asia/Tokyo, please."
    [(name, arguments)] = matching_calls(question, [CURRENT, CONVERT])
    assert name == "time__convert_time"
    assert valid(CONVERT, arguments) == {
        "source_timezone": "Europe/London",
        "time": "09:30",
        "target_timezone": "Asia/Tokyo",
    }


def test_ties_are_all_called_and_no_shared_word_is_no_call() -> None:
    tied = matching_calls("What time is it in Tokyo?", [CURRENT, CONVERT])
    assert [name for name, _ in tied] == ["time__get_current_time", "time__convert_time"]
    assert tied[0][1] == {"timezone": "Tokyo"}
    for name, arguments in tied:
        valid(CURRENT if name == CURRENT.name else CONVERT, arguments)
    assert matching_calls("What is 37*91+12?", [CURRENT, CONVERT]) == []
    assert matching_calls("Tell me about the history of Rome.", [CURRENT, CONVERT]) == []


def test_arguments_of_every_kind_are_valid_for_the_schema() -> None:
    [(_, arguments)] = matching_calls(
        "The weather forecast in Lyon for 12 days, imperial", [REPORT]
    )
    # Several strings: the question's words not the tool's own, one each, in turn.
    assert valid(REPORT, arguments) == {
        "place": {"city": "Lyon"},
        "days": 7,  # 12, within its maximum
        "units": "metric",  # its default
        "hourly": False,
        "tags": ["12"],
        "note": "imperial",
    }
