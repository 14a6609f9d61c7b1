"""The front door (app.requests.front_door): one composition of a request from a council, the
user's options and the question, and one refusal that each surface words with its own
names for the fields. No server: the council's options come from a council.toml text and
the settings from a mapping."""

from __future__ import annotations

import pytest

from app.requests import attachments, front_door
from app.settings import flags
from app.settings.environment import Settings
from council import limits
from council.attachments import IMAGE_TOKENS
from council.config import parse_config
from council.iteration import DEFAULT_TOKEN_BUDGET
from council.structured import StructuredReply
from council.thread import Thread, Turn
from tests.attachment_files import png
from web.openai_body import read_body
from web.views import request_from_form

pytestmark = pytest.mark.fast

CONFIG = parse_config(
    """
[councils.default]
models = ["lab/a", "lab/b", "lab/c"]
chairman = "lab/c"
max_rounds = 3
policy = { max_attempts = 2, call_timeout_seconds = 60 }

[councils.quick]
models = ["lab/x", "lab/y"]
max_rounds = 1
"""
)
# No COUNCIL_MODELS: the default council is the file's.
NOTHING_SET = Settings.read({})


def compose(question: str = "Why?", options: dict | None = None, **parts):
    return front_door.compose(question, options, config=CONFIG, settings=NOTHING_SET, **parts)


def refused(question: str = "Why?", options: dict | None = None, **parts) -> front_door.Refused:
    with pytest.raises(front_door.Refused) as caught:
        compose(question, options, **parts)
    return caught.value


def test_the_council_then_the_users_options_on_top() -> None:
    request = compose()
    assert (request.models, request.chairman, request.max_rounds) == (
        ["lab/a", "lab/b", "lab/c"],
        "lab/c",
        3,
    )
    assert (request.policy.max_attempts, request.policy.call_timeout_seconds) == (2, 60)
    given = compose(options={"max_rounds": 1, "policy": {"max_attempts": 5}, "chairman": None})
    # A value replaces the council's, a table is merged key by key, None was not given.
    assert given.max_rounds == 1 and given.chairman == "lab/c"
    assert (given.policy.max_attempts, given.policy.call_timeout_seconds) == (5, 60)
    # Models given without a chairman drop a council chairman who is not among them.
    other = compose(options={"models": ["lab/p", "lab/q"]})
    assert (other.models, other.chairman) == (["lab/p", "lab/q"], "lab/p")
    quick = compose(council="quick")
    assert (quick.models, quick.max_rounds) == (["lab/x", "lab/y"], 1)
    # COUNCIL_MODELS names the default council's members.
    members = Settings.read({"COUNCIL_MODELS": "env/1, env/2"})
    request = front_door.compose("Why?", config=CONFIG, settings=members)
    assert request.models == ["env/1", "env/2"] and request.max_rounds == 3


def test_files_come_on_top_of_the_default_token_budget_only() -> None:
    notes = attachments.from_bytes("notes.txt", b"x" * 400_000)
    image = attachments.from_bytes("chart.png", png())
    request = compose(attachments=[notes, image])
    # Three members, each a call per stage of up to MAX_ROUNDS rounds, then the chairman:
    # every call carries the files (100,000 tokens of text and an image).
    calls = 3 * (2 + 2 * limits.MAX_ROUNDS) + 1
    tokens = 100_000 + IMAGE_TOKENS
    assert request.token_budget == DEFAULT_TOKEN_BUDGET + calls * tokens
    # A budget the user gives, or the council sets, is kept as it is.
    assert compose(options={"token_budget": 9_000}, attachments=[notes]).token_budget == 9_000
    assert compose().token_budget == DEFAULT_TOKEN_BUDGET
    huge = [attachments.from_bytes(f"{n}.txt", b"y" * 800_000) for n in range(10)]
    many = compose(options={"models": [f"lab/{n}" for n in range(12)]}, attachments=huge)
    assert many.token_budget == limits.MAX_TOKEN_BUDGET


def test_numbers_in_text_are_read_in_ascii_digits_only() -> None:
    request = compose(options={"max_rounds": "2", "quality_threshold": " 2.5 "})
    assert (request.max_rounds, request.quality_threshold) == (2, 2.5)
    request = compose(options={"policy": {"call_timeout_seconds": "90"}})
    assert request.policy.call_timeout_seconds == 90
    problems = refused(
        options={
            "max_rounds": "²",
            "token_budget": "5_000",
            "quality_threshold": "nan",
            "policy": {"max_attempts": "١"},
        }
    ).problems
    assert [(p.loc, p.line()) for p in problems] == [
        (("max_rounds",), "max_rounds must be a whole number from 1 to 5 (got '²')"),
        (
            ("token_budget",),
            "token_budget must be a whole number from 1 to 100,000,000 (got '5_000')",
        ),
        (("quality_threshold",), "quality_threshold must be a number from 0 to 5 (got 'nan')"),
        (
            ("policy", "max_attempts"),
            "policy.max_attempts must be a whole number from 1 to 20 (got '١')",
        ),
    ]


def test_a_key_no_option_has_and_a_boolean_for_a_number_are_refused() -> None:
    """A table's unknown key is refused (not dropped), and true or false where a number
    belongs is no number (pydantic would read true as 1), each in one line naming the
    field: as /v1 names it, and as the request does."""
    body = read_body(
        {
            "model": "council",
            "messages": [{"role": "user", "content": "Why?"}],
            "council": {"policy": {"x": 1}},
        }
    )
    [problem] = refused(options=body.options()).problems
    assert problem.loc == ("policy", "x") and body.param_of(problem.loc) == "council.policy.x"
    assert problem.line().startswith("policy.x is not a known field (allowed: call_timeout")
    for options, line in (
        ({"context_tokens": True}, "context_tokens must be a whole number from 0 to"),
        ({"quality_threshold": False}, "quality_threshold must be a number from 0 to 5 (got"),
        ({"policy": {"max_attempts": True}}, "policy.max_attempts must be a whole number from"),
        ({"temperature": True}, "temperature must be a number from 0 to 2 (got true)"),
    ):
        [problem] = refused(options=options).problems
        assert problem.line().startswith(line), problem.line()
        assert "\n" not in problem.line() and problem.line().endswith(("(got true)", "(got false)"))
    # A boolean where one belongs is read as it always was.
    assert compose(options={"stop_on_convergence": False}).stop_on_convergence is False
    assert compose(options={"stragglers": {"wait_for_all": True}}).stragglers.wait_for_all


def test_every_problem_at_once_each_with_its_field() -> None:
    problems = refused(" ", {"max_rounds": 9, "models": ["lab/a", "not a model"]}).problems
    assert {p.loc for p in problems} == {("question",), ("models", 1), ("max_rounds",)}
    # An unknown council is said, and the rest is checked with the default council.
    problems = refused(" ", council="nope").problems
    assert [p.line() for p in problems] == [
        "council: no council 'nope' (known: default, quick)",
        "question must not be empty",
    ]


def test_what_belongs_to_one_request_is_no_option() -> None:
    for name in ("question", "history", "thread_id", "instructions", "answer_format"):
        [problem] = refused(options={name: "x"}).problems
        assert problem.line() == f"{name} is not an option: it belongs to one request"
    conversation = Thread(history=[Turn(id="messages[0]", question="Hi?", answer="Hello.")])
    reply = StructuredReply(name="short", json_schema={"type": "object"})
    request = compose(
        "And now?", thread=conversation, instructions="Be brief.", answer_format=reply
    )
    assert request.history == conversation.history and request.follow_up_of is None
    assert request.instructions == "Be brief." and request.answer_format == reply
    follow_up = Thread(follow_up_of="run-1", history=conversation.history)
    placed = front_door.in_thread(compose("Then?"), follow_up)
    assert (placed.follow_up_of, placed.thread_id) == ("run-1", "run-1")


@pytest.mark.parametrize(
    ("options", "cli", "form", "api"),
    [
        (
            {"max_rounds": 9},
            "--max-rounds must be between 1 and 5 (got 9)",
            "Max rounds must be between 1 and 5 (got 9)",
            ("max_rounds must be between 1 and 5 (got 9)", "council.max_rounds"),
        ),
        (
            {"models": ["lab/a", "bad id"]},
            "--model: 'bad id' is not a model id",
            "Models, line 2: 'bad id' is not a model id",
            ("models.1: 'bad id' is not a model id", "council.models[1]"),
        ),
        (
            {"max_tokens": {"review": 3}},
            "--max-tokens review=N must be between 16 and",
            "max_tokens.review must be between 16 and",
            ("max_tokens.review must be between 16 and", "council.max_tokens.review"),
        ),
    ],
)
def test_one_refusal_in_each_surfaces_words(
    options: dict, cli: str, form: str, api: tuple[str, str]
) -> None:
    """The same problem, from the same rule, named as each surface names the field: the
    CLI's flag, the page's label, the API's path in its body (MCP's arguments are the
    request's own names: the plain line)."""
    refusal = refused(options=options)
    assert refusal.line(flags.flag_of).startswith(cli)
    field = "models" if "models" in options else next(iter(options))
    form_fields = {"question": "Why?"}
    if field in ("models", "max_rounds"):
        value = options[field]
        form_fields[field] = "\n".join(value) if isinstance(value, list) else str(value)
        _, state = request_from_form(form_fields, CONFIG, NOTHING_SET)
        assert state.errors[field].startswith(form)
    else:
        assert refusal.line().startswith(form)  # no form field: the request's own words
    body = read_body({"model": "council", "messages": [{"role": "user", "content": "Why?"}]})
    first = refusal.problems[0]
    assert first.line().startswith(api[0]) and body.param_of(first.loc) == api[1]


def test_the_api_names_the_body_field_a_value_came_from() -> None:
    body = read_body(
        {
            "model": "council",
            "messages": [{"role": "user", "content": "Why?"}],
            "temperature": "١",
            "max_completion_tokens": 20,
        }
    )
    assert body.options() == {"temperature": "١", "max_tokens": {"synthesis": 20}}
    [first, *_] = refused(options=body.options()).problems
    assert first.loc == ("temperature",) and body.param_of(first.loc) == "temperature"
    assert body.param_of(("max_tokens", "synthesis")) == "max_completion_tokens"
    assert body.param_of(("question",)) == "messages"
