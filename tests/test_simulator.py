"""The simulator: determinism, personas and their formats, the calibration of a default
run, fault injection and the request log."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from council import prompts
from council.aggregate import aggregate_rankings, lowest_ratings, mean_ratings
from council.calls import ChatMessage, ModelCall, Stage
from council.iteration import (
    CritiqueItem,
    IterationConfig,
    IterationRound,
    TerminationReason,
    initialize_iteration_state,
    note_review,
    should_continue_iteration,
)
from council.labels import assign_labels, labels_shown_to
from council.refinement import (
    parse_refinement,
    plan_refinements,
    record_refinements,
    refinement_result,
)
from council.reviews import parse_review, read_review
from council.stages import AggregateRanking, Stage2Result
from simulator import DEFAULT_MODELS, persona_for
from simulator.config import FaultConfigError, parse_faults
from simulator.faults import FaultInjector
from simulator.personas import SYNTHESIS_LABEL
from simulator.quality import assess, topic_of
from tests.review_cases import critiques_of
from tests.sim_fixtures import wait_until

REPO = Path(__file__).resolve().parents[1]
QUESTION = "What are the trade-offs between SQL and NoSQL databases?"
CAP = 37_500  # the reply cap of a default run (4 models, 2 rounds)


@functools.cache
def http() -> httpx.Client:
    return httpx.Client(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def http_closed() -> Iterator[None]:
    """The module's client is closed after its tests (a kept-alive connection with it)."""
    yield
    http().close()
    http.cache_clear()


def post(sim, model: str, messages: list[ChatMessage]) -> httpx.Response:
    body = {"model": model, "messages": [m.model_dump() for m in messages]}
    return http().post(f"{sim.url}/chat/completions", json=body)


def ask(sim, model: str, messages: list[ChatMessage]) -> str:
    response = post(sim, model, messages)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def answers_of(sim, question: str = QUESTION) -> dict[str, str]:
    return {m: ask(sim, m, prompts.answer_prompt(question, CAP)) for m in DEFAULT_MODELS}


# ---- determinism and labelling ----------------------------------------------------------


def test_replies_are_deterministic_per_model_and_prompt(sim) -> None:
    first = answers_of(sim)
    again = answers_of(sim)
    assert first == again
    assert len(set(first.values())) == len(DEFAULT_MODELS)
    other = ask(sim, "sim/atlas", prompts.answer_prompt("How do tides work?", CAP))
    assert other != first["sim/atlas"] and "how tides work" in other


def test_any_model_name_maps_to_a_persona(sim) -> None:
    names = ["openai/gpt-4o", "anthropic/claude-sonnet-4", "llama3.1:8b", "mistral"]
    assert {persona_for(n).name for n in names} <= {"Atlas", "Borealis", "Cirrus", "Drift"}
    assert [persona_for(n) for n in names] == [persona_for(n) for n in names]
    reply = post(sim, "openai/gpt-4o", prompts.answer_prompt(QUESTION, CAP)).json()
    assert reply["model"] == "openai/gpt-4o"
    assert reply["choices"][0]["message"]["content"] == ask(
        sim, persona_for("openai/gpt-4o").model, prompts.answer_prompt(QUESTION, CAP)
    )


def test_everything_served_is_labelled_simulated(sim) -> None:
    models = http().get(f"{sim.url}/models").json()["data"]
    assert [m["id"] for m in models] == [
        *DEFAULT_MODELS,
        "sim/mallory",
        "sim/sentinel",
        "sim/markup",
        "sim/mule",
    ]
    assert all(m["owned_by"] == "council-simulator" and "simulated" in m["name"] for m in models)
    response = post(sim, "sim/borealis", prompts.answer_prompt(QUESTION, CAP))
    assert response.headers["x-council-simulator"] == "simulated"
    assert response.json()["system_fingerprint"] == "council-simulator"
    assert response.json()["choices"][0]["message"]["content"].startswith("[simulated]")
    assert http().get(sim.root_url).json()["simulated"] is True


def test_streaming_sends_chunks_comments_and_usage(sim) -> None:
    body = {
        "model": "sim/drift",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    with httpx.stream("POST", f"{sim.url}/chat/completions", json=body) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[0] == ": SIMULATOR PROCESSING" and lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[1:-1]]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == ask(sim, "sim/drift", [ChatMessage(role="user", content=QUESTION)])
    assert events[-2]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] > 0
    assert len(events) > 5


def test_a_bad_request_gets_an_openai_style_error(sim) -> None:
    response = http().post(f"{sim.url}/chat/completions", json={"model": "sim/atlas"})
    assert response.status_code == 400 and "messages" in response.json()["error"]["message"]


# ---- personas ---------------------------------------------------------------------


def test_answers_differ_in_quality_and_the_question_words_do_not_count(sim) -> None:
    answers = answers_of(sim)
    ratings = {m: assess(text, QUESTION).rating for m, text in answers.items()}
    assert ratings == {"sim/atlas": 5, "sim/borealis": 4, "sim/drift": 3, "sim/cirrus": 1}
    assert len(answers["sim/cirrus"].split(".")) == 2  # one terse sentence
    # "trade-offs" in the question would otherwise count as a caveat in every answer.
    assert (
        "trade-offs" in answers["sim/cirrus"]
        and "caveat" in assess(answers["sim/cirrus"], QUESTION).gaps
    )


def review_of(sim, reviewer: str, answers: dict[str, str]) -> tuple[str, Any]:
    text = ask(sim, reviewer, prompts.review_prompt(QUESTION, answers, CAP))
    return text, parse_review(text, list(answers))


def test_reviews_rate_by_the_answers_in_both_formats(sim) -> None:
    answers = answers_of(sim)
    shown = {
        "Response A": answers["sim/borealis"],
        "Response B": answers["sim/cirrus"],
        "Response C": answers["sim/drift"],
    }
    standard_text, standard = review_of(sim, "sim/atlas", shown)
    headers_text, headers = review_of(sim, "sim/drift", shown)
    assert "FINAL RANKING:\n1. Response A (4/5) - " in standard_text
    assert (
        "### Response A" in headers_text
        and "4 out of 5" in headers_text
        and "/5" not in headers_text
    )
    for parsed in (standard, headers):
        assert parsed.found_final_section and not parsed.ratings_inferred
        assert parsed.ratings == {"Response A": 4.0, "Response B": 1.0, "Response C": 3.0}
        assert parsed.ranking == ["Response A", "Response C", "Response B"]
        assert parsed.critiques["Response B"].startswith("Too brief")
        assert "add a concrete example" in parsed.critiques["Response B"]
    # The weak persona's critiques name only the first gaps.
    _, terse = review_of(sim, "sim/cirrus", shown)
    assert terse.ratings == standard.ratings
    assert (
        terse.critiques["Response B"].rstrip(".")
        == "Too brief to be useful: add a concrete example and explain why it holds"
    )


def refine(sim, model: str, original: str, critiques: list[CritiqueItem]) -> str:
    return ask(sim, model, prompts.refinement_prompt(QUESTION, original, critiques, CAP))


def test_refinements_add_what_the_critiques_ask_for(sim) -> None:
    answers = answers_of(sim)
    asked = [
        CritiqueItem(
            source_model="sim/atlas",
            target_response="Response B",
            critique_text="Too brief: add a concrete example and explain why it holds.",
            rating=1,
        ),
        CritiqueItem(
            source_model="sim/drift",
            target_response="Response B",
            critique_text="Mention a limitation or trade-off.",
            rating=1,
        ),
    ]
    plain = parse_refinement(refine(sim, "sim/cirrus", answers["sim/cirrus"], asked))
    assert not plain.structured
    assert plain.final_answer.startswith(answers["sim/cirrus"])
    assert "For example" in plain.final_answer and "because" in plain.final_answer
    assert "Caveat" not in plain.final_answer  # the weak persona fills two gaps a round
    assert (
        assess(plain.final_answer, QUESTION).rating
        > assess(answers["sim/cirrus"], QUESTION).rating + 1
    )

    formats = {}
    for model in ("sim/atlas", "sim/borealis", "sim/drift"):
        reply = refine(sim, model, answers[model], asked)
        formats[model] = reply
        parsed = parse_refinement(reply)
        assert parsed.structured and parsed.final_answer.startswith(answers[model])
        assert parsed.confidence is not None and parsed.improvement_explanation
    assert formats["sim/atlas"].startswith("{")
    assert formats["sim/borealis"].startswith("```json\n")
    assert formats["sim/drift"].startswith("Here is my refined answer")
    drift = parse_refinement(formats["sim/drift"])
    assert drift.changed_from_original and len(drift.critiques_accepted) == 2
    assert "Caveat" in drift.final_answer and "For example" in drift.final_answer


def test_praise_keeps_the_answer_and_a_met_request_is_rejected(sim) -> None:
    answers = answers_of(sim)
    praise = [
        CritiqueItem(
            source_model="sim/drift",
            target_response="Response A",
            critique_text="Strong answer: nothing important is missing.",
            rating=5,
        )
    ]
    kept = parse_refinement(refine(sim, "sim/atlas", answers["sim/atlas"], praise))
    assert kept.final_answer == answers["sim/atlas"] and kept.changed_from_original is False
    already = [
        CritiqueItem(
            source_model="sim/cirrus",
            target_response="Response A",
            critique_text="Add a concrete example.",
            rating=4,
        )
    ]
    rejected = parse_refinement(refine(sim, "sim/atlas", answers["sim/atlas"], already))
    assert rejected.final_answer == answers["sim/atlas"]
    assert rejected.critiques_rejected[0].reason == "the answer already covers this"


def test_the_chairman_merges_the_best_rated_answer(sim) -> None:
    answers = answers_of(sim)
    rankings = [
        AggregateRanking(
            model="sim/borealis", label="Response A", average_rank=1.0, mean_rating=4.5
        ),
        AggregateRanking(model="sim/atlas", label="Response B", average_rank=2.0, mean_rating=4.0),
        AggregateRanking(model="sim/cirrus", label="Response C", average_rank=3.0, mean_rating=1.0),
    ]
    chosen = {m: answers[m] for m in ("sim/atlas", "sim/borealis", "sim/cirrus")}
    text = ask(sim, "sim/atlas", prompts.synthesis_prompt(QUESTION, chosen, rankings, 1, CAP))
    assert text.startswith(SYNTHESIS_LABEL)
    assert "led by the answer from sim/borealis (mean peer rating 4.50/5)" in text
    points = text.split("Key points:\n")[1].split("\n\n")[0].splitlines()
    assert points[0] == "- The core idea comes first, because everything else builds on it."
    assert any("simplest explanation" in p for p in points)  # a point only Atlas made
    assert "For example" in text or "for instance" in text
    assert "no real model was called" in text and "[simulated]" not in text


def test_a_synthesis_cut_by_its_token_limit_ends_on_a_whole_word(sim) -> None:
    answers = answers_of(sim)
    rankings = [
        AggregateRanking(model=model, label=f"Response {label}", average_rank=rank, mean_rating=3)
        for rank, (model, label) in enumerate(zip(answers, "ABCD", strict=True), start=1)
    ]
    messages = [
        m.model_dump() for m in prompts.synthesis_prompt(QUESTION, answers, rankings, 1, CAP)
    ]
    whole = ask(sim, "sim/atlas", prompts.synthesis_prompt(QUESTION, answers, rankings, 1, CAP))
    for max_tokens in range(3, 120, 4):
        body = {"model": "sim/atlas", "messages": messages, "max_tokens": max_tokens}
        [choice] = http().post(f"{sim.url}/chat/completions", json=body).json()["choices"]
        streamed = http().post(f"{sim.url}/chat/completions", json={**body, "stream": True})
        deltas = [
            json.loads(line.removeprefix("data: "))
            for line in streamed.text.splitlines()
            if line.startswith("data: {")
        ]
        sent = "".join(c["delta"].get("content", "") for d in deltas for c in d["choices"])
        assert sent == choice["message"]["content"]
        cut = choice["message"]["content"]
        assert choice["finish_reason"] == "length", max_tokens
        assert cut.strip() and len(cut) <= max_tokens * 4 and whole.startswith(cut)
        # It ends where a word of the whole synthesis ends, never inside one.
        assert not cut[-1].isspace() and whole[len(cut)].isspace(), (max_tokens, cut)


# ---- calibration: a default run refines once and ends on the quality threshold -----------


def test_a_topic_cut_short_ends_on_a_word_that_carries_meaning() -> None:
    question = "What are the trade-offs between SQLite and PostgreSQL for a small web application?"
    assert topic_of(question) == "the trade-offs between SQLite and PostgreSQL"
    assert topic_of("What is the capital of France?") == "the capital of France"
    # A product between numbers stays one (markup characters are dropped).
    assert topic_of("A table stores about 1500 * 365 rows a year") == (
        "the question 'A table stores about 1500 × 365 rows ...'"
    )
    assert topic_of("Is *this* <b>bold</b>?") == "the question 'Is this bbold/b'"


async def test_a_default_run_refines_once_then_meets_the_quality_threshold(sim) -> None:
    models = DEFAULT_MODELS
    config = IterationConfig(max_rounds=2, quality_threshold=1.5)
    state = initialize_iteration_state(config)
    label_to_model = assign_labels(models, random.Random(3))
    env = ActivityEnvironment()

    async with ModelGateway(GatewaySettings(base_url=sim.url)) as gateway:

        async def call(model: str, stage: Stage, messages: list[ChatMessage]) -> str:
            request = ModelCall(model=model, messages=messages, stage=stage, max_response_bytes=CAP)
            return (await env.run(gateway.call_model, request)).content

        async def review(answers: dict[str, str]) -> tuple[list[Stage2Result], list]:
            reviews = []
            for reviewer in models:
                shown = labels_shown_to(reviewer, label_to_model)
                framed = {label: answers[label_to_model[label]] for label in shown}
                text = await call(
                    reviewer, Stage.REVIEW, prompts.review_prompt(QUESTION, framed, CAP)
                )
                reviews.append(read_review(reviewer, text, label_to_model)[0])
            return reviews, aggregate_rankings(reviews, label_to_model)

        answers = {
            m: await call(m, Stage.ANSWER, prompts.answer_prompt(QUESTION, CAP)) for m in models
        }
        reviews, rankings = await review(answers)
        note_review(state, rankings, refinements_pending=len(models))
        scores = mean_ratings(rankings)
        assert scores["sim/cirrus"] < 1.5 <= min(s for m, s in scores.items() if m != "sim/cirrus")
        assert lowest_ratings(rankings)["sim/cirrus"] == 1
        assert should_continue_iteration(state) == (True, None)

        state.current_round = 1
        round_one = IterationRound(round_number=1, started_at=datetime.now(UTC))
        critiques = critiques_of(reviews, label_to_model)
        results = []
        for task in plan_refinements(answers, critiques, label_to_model):
            reply = await call(
                task.model,
                Stage.REFINE,
                prompts.refinement_prompt(QUESTION, task.original, task.critiques, CAP),
            )
            results.append(refinement_result(task, reply))
        answers = record_refinements(round_one, answers, results)
        assert "sim/cirrus" in round_one.models_that_changed
        assert round_one.models_unchanged == ["sim/atlas"]  # it received only praise
        state.rounds.append(round_one)

        _, refined = await review(answers)
        note_review(state, refined, refinements_pending=len(models))
        refined_scores = mean_ratings(refined)
        assert min(lowest_ratings(refined).values()) >= 1.5
        assert refined_scores["sim/cirrus"] >= scores["sim/cirrus"] + 2
        assert should_continue_iteration(state) == (False, TerminationReason.QUALITY_THRESHOLD_MET)

    # Every model had critiques (praise too), so every model was asked to refine once.
    assert sim.log()["counts"] == {m: {"stage1": 1, "stage2": 2, "stage2_5": 1} for m in models}


# ---- fault injection ------------------------------------------------------------------


def outcome_of(response: httpx.Response) -> str:
    return "ok" if response.status_code == 200 else str(response.status_code)


def test_error_rates_are_seeded_and_reproducible(sim, sim_faults) -> None:
    sim_faults({"*": {"errors": {"500": 0.3, "429": 0.2}, "retry_after": 2}})
    questions = [f"Question number {i}?" for i in range(60)]

    def run() -> list[str]:
        return [
            outcome_of(post(sim, "sim/atlas", [ChatMessage(role="user", content=q)]))
            for q in questions
        ]

    first = run()
    retried = run()  # the same prompts again: fresh draws, as a retry would get
    sim.reset()
    assert run() == first
    assert first != retried
    counts = {k: first.count(k) for k in ("ok", "500", "429")}
    assert 10 <= counts["500"] <= 30 and 4 <= counts["429"] <= 22 and counts["ok"] >= 15
    limited = post(
        sim, "sim/atlas", [ChatMessage(role="user", content=questions[first.index("429")])]
    )
    if limited.status_code == 429:
        assert limited.headers["retry-after"] == "2"


def test_a_model_entry_overrides_the_default_field_by_field(sim, sim_faults) -> None:
    sim_faults({"*": {"latency": 0.2, "errors": {"500": 1.0}}, "sim/drift": {"errors": {}}})
    started = time.monotonic()
    assert post(sim, "sim/drift", prompts.answer_prompt(QUESTION, CAP)).status_code == 200
    assert time.monotonic() - started >= 0.2  # the default latency still applies
    assert post(sim, "sim/atlas", prompts.answer_prompt(QUESTION, CAP)).status_code == 500


def test_a_reply_can_be_held_back_before_its_first_byte(sim, sim_faults) -> None:
    """A provider that is silent before it begins (busy, or overloaded): no status, no
    headers, no keep-alive until the first byte is due; then the latency runs."""
    sim_faults({"sim/atlas": {"first_byte_seconds": 0.6, "latency": 0.2}})
    body = {
        "model": "sim/atlas",
        "messages": [m.model_dump() for m in prompts.answer_prompt(QUESTION, CAP)],
    }
    for stream in (True, False):
        started = time.monotonic()
        with http().stream(
            "POST", f"{sim.url}/chat/completions", json={**body, "stream": stream}
        ) as reply:
            first_byte = time.monotonic() - started
            assert reply.status_code == 200
            reply.read()
        whole = time.monotonic() - started
        assert first_byte >= 0.6 and whole >= 0.8, (stream, first_byte, whole)
    [entry, _] = sim.log()["entries"]
    assert entry["outcome"] == "ok" and entry["fault"] is None


async def test_a_held_stage_waits_until_the_faults_let_it_go(sim, sim_faults) -> None:
    """A test holds a stage's replies until it has done its step, then lets them go."""
    sim_faults({"*": {"hold": True, "stages": ["stage1"]}})
    held = asyncio.create_task(
        asyncio.to_thread(post, sim, "sim/atlas", prompts.answer_prompt(QUESTION, CAP))
    )
    await wait_until(lambda: sim.log()["in_flight"] == 1, timeout=30)
    review = prompts.review_prompt(QUESTION, {"Response A": "An answer."}, CAP)
    assert (await asyncio.to_thread(post, sim, "sim/atlas", review)).status_code == 200
    assert not held.done() and sim.log()["in_flight"] == 1  # another stage went by
    sim_faults({})
    assert (await asyncio.wait_for(held, 30)).status_code == 200
    assert [e["outcome"] for e in sim.log()["entries"]] == ["ok", "ok"]


def test_faults_can_target_stages_and_stop_after_a_count(sim, sim_faults) -> None:
    sim_faults({"sim/atlas": {"errors": {"503": 1.0}, "stages": ["stage2"], "max_faults": 1}})
    question = prompts.answer_prompt(QUESTION, CAP)
    review = prompts.review_prompt(QUESTION, {"Response A": "An answer."}, CAP)
    assert post(sim, "sim/atlas", question).status_code == 200
    assert post(sim, "sim/atlas", review).status_code == 503
    assert post(sim, "sim/atlas", review).status_code == 200  # the one fault was spent


def test_random_latency_stays_in_its_range() -> None:
    injector = FaultInjector(parse_faults({"*": {"latency": [0.5, 1.5]}}), seed=4)
    latencies = [injector.plan("m", Stage.ANSWER, f"sha{i}").latency for i in range(50)]
    assert all(0.5 <= x <= 1.5 for x in latencies) and max(latencies) - min(latencies) > 0.5


def test_invalid_fault_configs_are_refused(sim) -> None:
    for bad in (
        {"*": {"errors": {"200": 0.5}}},
        {"*": {"errors": {"500": 0.7}, "hang": 0.5}},
        {"*": {"latency": [2, 1]}},
        {"*": {"explode": 1.0}},
    ):
        with pytest.raises(FaultConfigError):
            sim.set_faults(bad)
        response = http().post(f"{sim.root_url}/_sim/faults", json=bad)
        assert response.status_code == 400 and response.json()["error"]["message"].startswith(
            "fault config"
        )
    assert http().get(f"{sim.root_url}/_sim/faults").json() == {}


def test_faults_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"sim/cirrus": {"empty": 0.5}}))
    assert parse_faults(str(path)).for_model("sim/cirrus").empty == 0.5
    with pytest.raises(FaultConfigError, match="cannot read"):
        parse_faults(str(tmp_path / "missing.json"))


def test_faults_over_http_and_a_hang_is_logged_in_flight(sim) -> None:
    assert (
        http().post(f"{sim.root_url}/_sim/faults", json={"sim/cirrus": {"hang": 1.0}}).status_code
        == 200
    )
    assert http().get(f"{sim.root_url}/_sim/faults").json() == {"sim/cirrus": {"hang": 1.0}}
    with pytest.raises(httpx.ReadTimeout):
        post_with_timeout(sim, "sim/cirrus", 0.2)
    log = http().get(f"{sim.root_url}/_sim/log").json()
    entry = log["entries"][-1]
    assert entry["fault"] == "hang" and entry["model"] == "sim/cirrus"


def post_with_timeout(sim, model: str, timeout: float) -> httpx.Response:
    return http().post(
        f"{sim.url}/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": QUESTION}]},
        timeout=timeout,
    )


# ---- the request log -------------------------------------------------------------------


async def test_the_log_counts_per_model_and_stage_and_records_disconnects(sim, sim_faults) -> None:
    post(sim, "sim/atlas", prompts.answer_prompt(QUESTION, CAP))
    post(sim, "sim/atlas", prompts.review_prompt(QUESTION, {"Response A": "x"}, CAP))
    post(sim, "sim/drift", prompts.answer_prompt(QUESTION, CAP))
    sim_faults({"sim/cirrus": {"hang": 1.0}})
    with pytest.raises(httpx.ReadTimeout):
        post_with_timeout(sim, "sim/cirrus", 0.1)
    await wait_until(lambda: sim.log()["in_flight"] == 0)
    log = sim.log()
    assert log["counts"] == {
        "sim/atlas": {"stage1": 1, "stage2": 1},
        "sim/drift": {"stage1": 1},
        "sim/cirrus": {"stage1": 1},
    }
    assert log["outcomes"] == {"ok": 3, "disconnected": 1} and log["total"] == 4
    entries = log["entries"]
    assert [e["seq"] for e in entries] == [1, 2, 3, 4]
    assert entries[3]["fault"] == "hang" and entries[3]["status"] is None
    assert all(e["finished"] >= e["started"] and len(e["prompt_sha256"]) == 64 for e in entries)
    over_http = http().get(f"{sim.root_url}/_sim/log", params={"since": 2}).json()
    assert [e["seq"] for e in over_http["entries"]] == [3, 4]
    assert http().post(f"{sim.root_url}/_sim/reset").status_code == 200
    assert sim.log() == {"total": 0, "in_flight": 0, "counts": {}, "outcomes": {}, "entries": []}


# ---- running it --------------------------------------------------------------------


def test_the_package_imports_without_side_effects() -> None:
    code = (
        "import threading, simulator, simulator.server, simulator.__main__, activities.model_call;"
        "assert threading.active_count() == 1, threading.enumerate()"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=30)


def test_the_command_line_serves_until_interrupted(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    faults = json.dumps({"sim/cirrus": {"errors": {"500": 1.0}}})
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "--port",
            str(port),
            "--faults",
            faults,
            "--latency",
            "0.05",
            "--seed",
            "3",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 15
        while True:
            try:
                assert httpx.get(f"{base}/models").status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
        messages = [{"role": "user", "content": QUESTION}]
        assert (
            httpx.post(
                f"{base}/chat/completions", json={"model": "sim/cirrus", "messages": messages}
            ).status_code
            == 500
        )
        assert (
            httpx.post(
                f"{base}/chat/completions", json={"model": "sim/atlas", "messages": messages}
            ).status_code
            == 200
        )
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert "simulated models" in stderr and f"COUNCIL_LLM_BASE_URL={base}" in stderr


def test_the_command_line_refuses_a_bad_fault_config() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "--faults", '{"*": {"hang": 2}}'],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and result.stderr.startswith("simulator: fault config")


# ---- scripted ratings and reported cost ------------------------------------------------


async def test_a_reviewer_can_be_scripted_to_rate_everyone_or_one_author(sim) -> None:
    answers = {m: ask(sim, m, prompts.answer_prompt(QUESTION, CAP)) for m in DEFAULT_MODELS}
    framed = {"Response A": answers["sim/atlas"], "Response B": answers["sim/cirrus"]}
    messages = prompts.review_prompt(QUESTION, framed, CAP)

    def ratings(reviewer: str) -> dict[str, float]:
        return parse_review(ask(sim, reviewer, messages), ["Response A", "Response B"]).ratings

    assert ratings("sim/borealis") == {"Response A": 5, "Response B": 1}  # the quality rule
    sim.set_faults({"*": {"rating": 4}})
    assert ratings("sim/borealis") == {"Response A": 4, "Response B": 4}
    assert ratings("sim/drift") == {"Response A": 4, "Response B": 4}  # the headers style too
    sim.set_faults({"*": {"rating": 4}, "sim/borealis": {"ratings_by_author": {"sim/cirrus": 2}}})
    assert ratings("sim/borealis") == {"Response A": 4, "Response B": 2}
    assert ratings("sim/drift") == {"Response A": 4, "Response B": 4}
    with pytest.raises(FaultConfigError, match="1 to 5"):
        parse_faults({"*": {"ratings_by_author": {"sim/cirrus": 7}}})


async def test_the_reported_cost_follows_the_price(sim) -> None:
    async def usage() -> dict:
        async with httpx.AsyncClient() as client:
            body = {"model": "sim/atlas", "messages": [{"role": "user", "content": QUESTION}]}
            reply = await client.post(f"{sim.url}/chat/completions", json=body)
            return reply.json()["usage"]

    assert (await usage())["cost"] == 0.0  # free by default, and says so
    sim.set_faults({"*": {"cost_per_million_tokens": 2_000_000.0}})
    priced = await usage()
    assert priced["cost"] == priced["total_tokens"] * 2
    sim.set_faults({"*": {"cost_per_million_tokens": None}})
    assert "cost" not in await usage()
