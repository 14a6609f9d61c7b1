"""No input within the documented limits makes a Temporal message exceed its limit: each
dimension flooded in turn, with the settings a user has (a directory store, the default
threshold), completes with its record, and its history holds no payload over 256 KB and
no workflow task's commands near 4 MiB.

The dimensions flooded elsewhere: 12 members given 84,000 control characters of context
and 1 MB replies (test_store_runs.py), a conversation split into 45 long user messages
(test_openai_api.py), a thread longer than a follow-up can carry (test_threads.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

from app.requests import attachments
from app.requests.front_door import compose
from council import limits
from council.config import Config
from council.models import DeliberationRecord, DeliberationRequest
from runs import starting
from tests.attachment_files import notes
from tests.history_bounds import PAYLOAD_CEILING, TWELVE, check_run
from tests.temporal_fixtures import FOUR_MODELS, TEST_POLICY, Council

# Every run goes the rounds it is given: sim/mule never takes up a critique, so the
# quality threshold of 5 is never met.
EVERY_ROUND = {
    "quality_threshold": 5,
    "stop_on_convergence": False,
    "token_budget": limits.MAX_TOKEN_BUDGET,
    "policy": TEST_POLICY,
    # Every member's every call: the subject is the sizes, and on a loaded machine the
    # straggler rule would cut a member whose huge prompt is read slowly.
    "stragglers": {"wait_for_all": True},
}


def composed(
    question: str, models: list[str], files: list[Any] | None = None, **options: Any
) -> DeliberationRequest:
    return compose(
        question,
        {"models": models, **EVERY_ROUND, **options},
        config=Config(),
        attachments=files or [],
    )


async def run(council: Council, request: DeliberationRequest) -> tuple[DeliberationRecord, Any]:
    handle = await starting.start(council.client, request, council.task_queue)
    record = await handle.result()
    assert record.stage3 is not None and record.stage3.response, record.errors
    assert record.errors == []
    return record, handle


def shown_whole(council: Council, digest: str) -> list[tuple[str, str]]:
    """(model, stage) of every call the simulator answered, after checking that each was
    shown the attachment whose text hashes to `digest`, whole."""
    calls = [e for e in council.sim.log()["entries"] if e["outcome"] == "ok"]
    for call in calls:
        [file] = call["attachments"]
        assert file["sha256"] == digest, (call["model"], call["stage"])
    return [(call["model"], call["stage"]) for call in calls]


async def test_a_400_kb_attachment_reaches_twelve_members_whole_through_two_rounds(
    default_store: Council,
) -> None:
    council = default_store
    text = notes(400_000)
    models = [*TWELVE[:11], "sim/mule"]
    request = composed(
        "What do the attached notes say?",
        models,
        [attachments.from_bytes("notes.md", text.encode())],
        max_rounds=2,
    )
    record, handle = await run(council, request)
    assert len(record.stage1) == 12 and len(record.rounds) == 2
    calls = shown_whole(council, hashlib.sha256(text.encode()).hexdigest())
    # 12 answers, then per review stage 12 reviews, per round 12 refinements, a synthesis.
    assert len(calls) == 12 + 3 * 12 + 2 * 12 + 1
    assert {model for model, _ in calls} == set(models)
    largest, task, inline = await check_run(handle)
    assert largest < 300_000 <= len(text.encode())
    print(
        f"\n12 members, 2 rounds, a 400 KB attachment: largest payload {largest:,} B, "
        f"largest task's commands {task:,} B ({inline:,} B had nothing been stored)"
    )


async def test_the_most_rounds(default_store: Council) -> None:
    request = composed(
        "How should a team of four plan a migration?",
        [*FOUR_MODELS[:3], "sim/mule"],
        max_rounds=limits.MAX_ROUNDS,
    )
    record, handle = await run(default_store, request)
    assert len(record.rounds) == limits.MAX_ROUNDS
    await check_run(handle)


async def test_the_longest_question_of_control_characters(default_store: Council) -> None:
    # JSON escapes each control character six-fold: a 6 MB payload for every prompt.
    question = "Read this: " + "\x01" * (limits.QUESTION_MAX_CHARS - 11)
    request = composed(question, [*FOUR_MODELS[:2], "sim/mule"], max_rounds=1)
    record, handle = await run(default_store, request)
    assert record.query == question and len(record.rounds) == 1
    largest, _, inline = await check_run(handle)
    assert largest < PAYLOAD_CEILING and inline > 4 * 1024 * 1024


async def test_the_largest_attachments(default_store: Council) -> None:
    per_file = limits.MAX_ATTACHMENTS_TOTAL_BYTES // limits.MAX_ATTACHMENTS
    files = [
        attachments.from_bytes(f"part-{n}.txt", notes(per_file, seed=n).encode())
        for n in range(limits.MAX_ATTACHMENTS)
    ]
    assert sum(file.size for file in files) <= limits.MAX_ATTACHMENTS_TOTAL_BYTES
    request = composed(
        "What do these parts say?", [FOUR_MODELS[0], "sim/mule"], files, max_rounds=1
    )
    record, handle = await run(default_store, request)
    assert [a.sha256 for a in record.attachments] == [f.sha256 for f in files]
    assert not any(a.cut for a in record.attachments)
    await check_run(handle)
