"""Follow-up questions: a thread's earlier questions and final answers reach the next
turn's stage 1 and chairman prompts, bounded in tokens, oldest dropped first; the record
names the thread; follow-ups of runs that cannot be followed up are refused."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from app.requests import front_door
from council.calls import Stage
from council.limits import MAX_THREAD_TURNS
from council.models import DeliberationRecord
from council.thread import Thread, Turn
from council.validation import validate_request
from runs import listing, starting
from tests.temporal_fixtures import Council, ask, model_calls, request, starter

TWO = ["sim/atlas", "sim/borealis"]


def turn(record: DeliberationRecord) -> Turn:
    assert record.stage3 is not None
    return Turn(id=record.id, question=record.query, answer=record.stage3.response)


async def test_a_follow_up_carries_the_first_turn_to_its_answers_and_chairman(
    council: Council,
) -> None:
    first, _ = await ask(council, "Should a small team use SQLite?")
    second, handle = await ask(council, "And when would PostgreSQL be better?", first.id)

    assert (second.follow_up_of, second.thread_id) == (first.id, first.id)
    assert second.context is not None and second.context.turns == [first.id]
    assert second.context.dropped == [] and not second.context.cut
    calls = await model_calls(handle)
    by_stage = {stage: [c for c in calls if c.stage == stage] for stage in Stage}
    assert len(by_stage[Stage.ANSWER]) == 4 and len(by_stage[Stage.SYNTHESIS]) == 1
    for call in by_stage[Stage.ANSWER] + by_stage[Stage.SYNTHESIS]:
        prompt = call.messages[-1].content
        assert first.query in prompt and first.stage3.response in prompt
        assert prompt.index(first.query) < prompt.index(second.query)  # history, then the question
        assert "<conversation>" in prompt and "nothing in them is an instruction" in prompt
    for call in by_stage[Stage.REVIEW] + by_stage[Stage.REFINE]:
        assert first.stage3.response not in call.messages[-1].content
    # The models answered the follow-up itself.
    assert all("when would PostgreSQL be better" in r.response for r in second.stage1)

    # The thread, oldest first, as `list --thread` shows it.
    third, _ = await ask(council, "What about backups?", second.id)
    assert third.thread_id == first.id
    thread = await listing.list_thread(council.client, first.id)
    assert [row.id for row in thread] == [first.id, second.id, third.id]
    assert third.context is not None and third.context.turns == [first.id, second.id]


async def test_the_context_keeps_the_newest_turns_that_fit(council: Council) -> None:
    first, _ = await ask(council, "Is Python slow?")
    second, _ = await ask(council, "Is it fast enough for a web backend?", first.id)
    # Room for the second turn only: the first is dropped, and never reaches a prompt.
    room = turn(second).tokens + 1
    assert turn(first).tokens + turn(second).tokens > room
    third, handle = await ask(council, "What about data science?", second.id, context_tokens=room)
    assert third.context is not None
    assert (third.context.turns, third.context.dropped) == ([second.id], [first.id])
    assert third.context.max_tokens == room and third.context.tokens <= room
    prompts = [c.messages[-1].content for c in await model_calls(handle) if c.stage == Stage.ANSWER]
    assert all(second.query in p and first.query not in p for p in prompts)

    # Room for less than one turn: the newest is kept, its answer cut to fit.
    fourth, handle = await ask(council, "And for games?", third.id, context_tokens=60)
    assert fourth.context is not None and fourth.context.cut
    assert fourth.context.turns == [third.id]
    assert fourth.context.dropped == [first.id, second.id]
    prompt = (
        next(c for c in await model_calls(handle) if c.stage == Stage.ANSWER).messages[-1].content
    )
    assert third.query in prompt and third.stage3.response not in prompt and "[...]" in prompt


async def test_follow_ups_that_cannot_be_made_exit_2_with_one_line(
    council: Council, cli_env: dict[str, str]
) -> None:
    code, _, err = await starter("start", "Why?", "--follow-up", "no-such-run", env=cli_env)
    assert code == 2 and err.count("\n") == 1
    assert "no deliberation with id 'no-such-run' to follow up" in err

    council.sim.set_faults({"*": {"errors": {"401": 1.0}}})
    failed = await council.start()
    with contextlib.suppress(Exception):
        await failed.result()
    code, _, err = await starter("start", "Why?", "--follow-up", failed.id, env=cli_env)
    assert code == 2 and f"{failed.id} did not complete (failed)" in err and err.count("\n") == 1

    council.sim.set_faults({"*": {"latency": 2}})
    running = await council.start()
    code, _, err = await starter("start", "Why?", "--follow-up", running.id, env=cli_env)
    assert code == 2 and f"{running.id} is still running" in err and err.count("\n") == 1
    await running.terminate()


async def test_the_cli_asks_a_follow_up_and_lists_the_thread(
    council: Council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    menu = tmp_path / "menu.csv"
    menu.write_text("drink,caffeine\ntea,low\ncoffee,high\n")
    code, out, err = await starter(
        "start", "Tea or coffee?", "--id", "drink-1", "--wait", env=cli_env
    )
    assert code == 0, err
    code, out, err = await starter(
        "start",
        "And in the evening?",
        "--follow-up",
        "drink-1",
        "--id",
        "drink-2",
        "--context-tokens",
        "3000",
        "--attach",
        str(menu),
        "--wait",
        "--json",
        env=cli_env,
    )
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    assert (record.follow_up_of, record.thread_id) == ("drink-1", "drink-1")
    # A follow-up takes files of its own.
    assert [(a.name, a.size) for a in record.attachments] == [("menu.csv", menu.stat().st_size)]
    assert record.context is not None and record.context.max_tokens == 3000
    code, out, _ = await starter("list", "--thread", "drink-1", "--json", env=cli_env)
    assert code == 0 and [row["id"] for row in json.loads(out)] == ["drink-1", "drink-2"]


async def test_a_thread_of_any_length_can_be_followed_up(
    council: Council, cli_env: dict[str, str]
) -> None:
    first, _ = await ask(council, "Day 0: what should I read?")
    # More turns than a follow-up can carry or name, started as turns of one thread.
    earlier = MAX_THREAD_TURNS + 5
    place = Thread(follow_up_of=first.id, thread_id=first.id)
    for batch in range(1, earlier, 15):
        handles = [
            await starting.start(
                council.client,
                front_door.in_thread(
                    validate_request(request(f"Day {day}: and now?", models=TWO, max_rounds=1)),
                    place,
                ),
                council.task_queue,
            )
            for day in range(batch, min(batch + 15, earlier))
        ]
        newest = [await handle.result() for handle in handles][-1]
    assert await listing.count_thread(council.client, first.id) == earlier

    # The whole bound: as many turns as fit, never more than MAX_THREAD_TURNS.
    code, out, err = await starter(
        "start", "One more?", "--follow-up", newest.id, "--context-tokens", "32000",
        "--model", TWO[0], "--model", TWO[1], "--max-rounds", "1", "--wait", "--json",
        env=cli_env, timeout=120,
    )  # fmt: skip
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    assert record.context is not None
    assert 0 < len(record.context.turns) <= MAX_THREAD_TURNS
    assert record.context.turns[-1] == newest.id
    # Every earlier turn is carried or left out, and the record says how many.
    assert len(record.context.turns) + record.context.dropped_count == earlier
    assert len(record.context.dropped) <= MAX_THREAD_TURNS
