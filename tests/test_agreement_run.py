"""Agreement in a deliberation on the dev server: a harsh reviewer is named in `dissent`,
the level is not high and the chairman's request holds the dissenting critique; with all
reviewers agreeing the level is high and there is no dissent; show, list and the
Temporal UI's details say so."""

from __future__ import annotations

import json
from typing import Any

from council.agreement import verdict
from council.calls import Stage
from tests.temporal_fixtures import Council, model_calls, starter
from tests.web_fixtures import WebServer
from workflows import search_attributes
from workflows.deliberation import Deliberation

MODELS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
ONE_ROUND = {"models": MODELS, "max_rounds": 1, "min_rounds": 1, "stop_on_convergence": False}


async def test_a_harsh_reviewer_is_the_dissent_and_reaches_the_chairman(
    council: Council, cli_env: dict[str, str]
) -> None:
    council.sim.set_faults({"*": {"rating": 4}, "sim/drift": {"rating": 1}})
    handle = await council.start(**ONE_ROUND)
    record = await handle.result()

    agreement = record.agreement
    assert agreement is not None and agreement.level != "high"
    assert {d.reviewer for d in agreement.dissent} == {"sim/drift"}
    assert {d.author for d in agreement.dissent} == {"sim/atlas", "sim/borealis", "sim/cirrus"}
    assert all((d.rating, d.others_median) == (1, 4) for d in agreement.dissent)
    assert all(d.critique for d in agreement.dissent)
    # The same object per round, and the trend review by review.
    assert record.rounds[0].agreement == agreement
    assert record.agreement_trend is not None and len(record.agreement_trend.levels) == 2

    [synthesis] = [c for c in await model_calls(handle) if c.stage == Stage.SYNTHESIS]
    prompt = synthesis.messages[-1].content
    assert f"AGREEMENT IN THE LATEST REVIEW: {agreement.level}" in prompt
    for dissent in agreement.dissent:
        assert dissent.critique.strip()[:60] in prompt
    assert '<dissent reviewer="sim/drift"' in prompt
    assert "Where the council disagreed" in prompt

    code, out, _ = await starter("show", record.id, env=cli_env)
    assert code == 0 and "1/5 against a median of 4" in out
    assert f"reviewers' agreement on their ratings: {agreement.level}" in out
    description = await handle.describe()
    assert description.typed_search_attributes.get(search_attributes.AGREEMENT) == agreement.level
    code, out, _ = await starter("list", "--json", "--filter", record.id, env=cli_env)
    assert code == 0 and json.loads(out)[0]["agreement"] == agreement.level


async def test_with_structured_output_the_report_names_the_points_of_disagreement(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"rating": 4, "structured": True}, "sim/drift": {"rating": 1}})
    handle = await council.start(**ONE_ROUND)
    record = await handle.result()
    assert record.agreement is not None and record.agreement.level != "high"
    [synthesis] = [c for c in await model_calls(handle) if c.stage == Stage.SYNTHESIS]
    assert synthesis.response_format is not None
    assert synthesis.response_format.name == "synthesis"
    assert record.stage3 is not None
    assert not record.stage3.response.lstrip().startswith("{")  # the answer, not the JSON
    report = record.disagreement_report
    assert report is not None and report.source == "chairman"
    points = [c for c in report.contradictions if c.point.startswith("how good")]
    # Each dissent computed, both sides named; the chairman resolves each by its number.
    assert {tuple(c.positions[0].held_by) for c in points} == {("sim/drift",)}
    assert all(c.source == "computed" and c.resolution for c in points)
    assert all("sim/drift" not in c.positions[1].held_by for c in points)
    assert len(points) == len(record.agreement.dissent)


async def test_agreeing_reviewers_give_high_and_no_dissent(council: Council) -> None:
    council.sim.set_faults({"*": {"rating": 4}})
    handle = await council.start(**ONE_ROUND)
    record = await handle.result()
    assert record.agreement is not None
    assert (record.agreement.level, record.agreement.dissent) == ("high", [])
    [synthesis] = [c for c in await model_calls(handle) if c.stage == Stage.SYNTHESIS]
    prompt = synthesis.messages[-1].content
    assert "AGREEMENT IN THE LATEST REVIEW: high" in prompt
    assert "<dissent" not in prompt and "Where the council disagreed" not in prompt
    progress = await handle.query(Deliberation.progress, 0)
    said = [str(e.data.get("agreement")) for e in progress.events]
    assert any("reviewers' agreement on their ratings: high" in line for line in said)


async def test_the_page_shows_the_level_and_marks_the_dissenting_cells(
    web: WebServer, page: Any, council: Council
) -> None:
    council.sim.set_faults({"*": {"rating": 4}, "sim/drift": {"rating": 1}})
    record = await council.run(**ONE_ROUND)
    assert record.agreement is not None
    await page.goto(f"{web.url}/deliberations/{record.id}")
    verdicts = await page.locator(".agreement-verdict").all_text_contents()
    # Beside the final answer, then with each review: the first, and the one after the round.
    assert len(verdicts) == 3
    assert verdicts[0].strip() == verdicts[-1].strip() == verdict(record.agreement)
    last = page.locator("table.matrix").last
    marked = last.locator("td.dissent")
    assert await marked.count() == len(record.agreement.dissent) == 3
    assert await last.locator('tr[data-reviewer="sim/drift"] td.dissent').count() == 3
    assert await last.locator('tr[data-reviewer="sim/atlas"] td.dissent').count() == 0
