"""The record's one view model, and the three surfaces that render it: the page, the
Markdown transcript and the MCP results. Every field of the view has a probe (what a
reader sees of it); each surface must show every field it does not leave out by name. A
field added to the view and to no probe, or dropped by one surface, fails here."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from app.views.record_view import Matrix, RecordView, ReportLine, record_view
from app.views.render import view_markdown
from council.attachments import CutFor
from council.labels import labels_shown_to
from council.models import DeliberationRecord
from council.report import Point
from council.reviews import read_review
from council.stages import Stage2Result
from council.structured import Disagreement
from council.thread import ContextSummary
from mcp_server.results import finished_view
from web import views
from web.pages import templates

pytestmark = pytest.mark.fast

HISTORIES = Path(__file__).parent / "histories"
# Between them: members cut as late in each stage, failed calls and a fallback chairman,
# the user's critique and more rounds, a stop, an attachment, dissent.
RECORDED = (
    "stragglers_cut_in_each_stage",
    "failing_model_and_chairman_fallback",
    "user_critique_and_more_rounds",
    "stopped_mid_refinement",
    "small_text_attachment",
    "agreement_dissent_and_structured_synthesis",
    "members_use_tools",
    "depth_auto_check_and_settled_reviews",
    "depth_auto_agreement_after_stage1",
)


def recorded(name: str) -> DeliberationRecord:
    """The record a recorded run returned (its history's last event)."""
    events = json.loads((HISTORIES / f"{name}.json").read_text())["events"]
    result = events[-1]["workflowExecutionCompletedEventAttributes"]["result"]
    return DeliberationRecord.model_validate_json(base64.b64decode(result["payloads"][0]["data"]))


def follow_up(record: DeliberationRecord) -> DeliberationRecord:
    """The record as a follow-up's: no recorded run carried earlier turns."""
    context = ContextSummary(
        turns=["t-1", "t-2"], dropped=["t-0"], dropped_count=3, cut=True, tokens=812
    )
    return record.model_copy(update={"context": context, "follow_up_of": "t-2", "thread_id": "t-0"})


@cache
def records() -> list[DeliberationRecord]:
    found = [recorded(name) for name in RECORDED]
    return [*found, follow_up(found[0])]


@cache
def everything() -> DeliberationRecord:
    """One record with a part of every kind: the stragglers' run, with the others' failed
    calls, steering, stop, attachment and earlier turns."""
    cut, failing, steered, stopped, attached, dissent, tooled, settled, agreed = (
        recorded(name) for name in RECORDED
    )
    assert dissent.disagreement_report is not None and settled.gate is not None
    # The dissent's report, with a part of every kind.
    report = dissent.disagreement_report.model_copy(
        update={
            "unaddressed": [Point(text="what the question's second part asks")],
            # The values the first answers stated (the recorded question states none).
            "stated": {"sim/atlas": "5", "sim/borealis": "5", "sim/drift": "5"},
            "unstated": ["sim/cirrus"],
            "unreported_dissents": [
                "sim/cirrus rated sim/atlas's answer 1/5 where the others' median was 4/5"
            ],
        }
    )
    [attachment] = attached.attachments
    # Its text cut to fit one member's context window.
    cut_to_fit = CutFor(model="sim/atlas", stage="stage1", kept_chars=1200, chars=5300)
    return follow_up(cut).model_copy(
        update={
            "errors": failing.errors,
            "steering": steered.steering,
            "stop_reason": stopped.stop_reason,
            "attachments": [attachment.model_copy(update={"cut": [cut_to_fit]})],
            # The tools' run's calls, under the answers of the members they share.
            "tools": tooled.tools,
            "tool_calls": tooled.tool_calls,
            "without_tools": tooled.without_tools,
            "tools_unavailable": tooled.tools_unavailable,
            # No recorded run withheld a tool.
            "tools_withheld": [
                "calc__erase_memory: does not declare readOnlyHint; offered with side_effects "
                "= true or by naming it in allow"
            ],
            # Depth auto's gate and the review it cancelled, and the disagreement report.
            "depth": settled.depth,
            "gate": settled.gate,
            "not_needed": settled.not_needed,
            # What going straight to the synthesis saved (the run that agreed after stage 1).
            "saved": agreed.saved,
            "disagreement_report": report,
        }
    )


# ---- the three surfaces, as text a reader sees --------------------------------------------

PAGES = templates().env  # compiled once


def page_text(record: DeliberationRecord, view: RecordView | None = None) -> str:
    """The page's text, its entities read back: the page escapes every string."""
    return html.unescape(page_html(record, view))


def page_html(record: DeliberationRecord, view: RecordView | None = None) -> str:
    """The deliberation's page (of `view`, when given)."""
    turn = views.Turn(record.id, "completed", record)
    turn.view = view or turn.view
    page = PAGES.get_template("deliberation.html").render(
        current=turn,
        before=[],
        after=[],
        follow_ups=[],
        ui_url="http://127.0.0.1:1/ui",
        originals=set(),
        threads=[],
        here=turn.thread,
        ask_of=None,
        ask_waiting=False,
        ask_form=views.StartForm(),
        councils=[],
        members={},
    )
    return page


def markdown_text(view: RecordView) -> str:
    return view_markdown(view)


def mcp_text(view: RecordView) -> str:
    """The tool's result: its texts, and its structured content as JSON."""
    result = finished_view(view)
    texts = [part.text for part in result.content if part.type == "text"]
    return "\n".join([*texts, json.dumps(result.structured_content, ensure_ascii=False)])


# ---- what a reader sees of each field -----------------------------------------------------

Probe = Callable[[RecordView], list[str]]


def _context(v: RecordView) -> list[str]:
    c = v.context
    if c is None:
        return []
    return [f"{c.turns} earlier turn(s)", f"{c.tokens} of {c.max_tokens} tokens", *c.dropped]


def _reviews(v: RecordView) -> list[str]:
    m = v.first_review
    if m is None:
        return []
    shown = [r.model for r in m.reviews] + [r.read_as for r in m.reviews]
    return shown + [r.text.splitlines()[0] for r in m.reviews] + [n for _, n in m.late]


def _rounds(v: RecordView) -> list[str]:
    out = [f"Round {r.number}" for r in v.rounds]
    out += [f.verdict for r in v.rounds for f in r.refinements]
    out += [f.text.splitlines()[0] for r in v.rounds for f in r.refinements if f.text]
    return out + [n for r in v.rounds if r.review for _, n in r.review.late]


def _steering(v: RecordView) -> list[str]:
    out = []
    for s in v.steering:
        out.append(s.when)
        if s.max_rounds is not None:
            out.append(f"set the maximum rounds to {s.max_rounds}")
        else:
            out += [f"critique of {s.model}", s.handed, s.text or ""]
    return out


# Every field of the view, and what each surface shows of it.
PROBES: dict[str, Probe] = {
    "id": lambda v: [v.id],
    "question": lambda v: [v.question],
    "status": lambda v: [v.status],
    "ended": lambda v: [v.ended or ""],
    "stop_reason": lambda v: [v.stop_reason or ""],
    "rounds_completed": lambda v: [f"{v.rounds_completed} refinement round(s)"],
    "min_rounds": lambda v: [f"of {v.min_rounds} to"],
    "max_rounds": lambda v: [f"to {v.max_rounds}"],
    "quality_threshold": lambda v: [f"quality threshold {v.quality_threshold}/5"],
    "context": _context,
    "attachments": lambda v: [x for a in v.attachments for x in (a.name, a.size, a.cuts)],
    "final": lambda v: [v.final.chairman, v.final.text] if v.final else [],
    "agreement": lambda v: (
        [v.agreement.verdict, *([v.agreement.votes] if v.agreement.votes else [])]
        if v.agreement
        else []
    ),
    "usage": lambda v: (
        [v.usage.line] + [x for _, rows in v.usage.tables for r in rows for x in (r.name, r.note)]
    ),
    "members": lambda v: [x for m in v.members for x in (m.model, m.label or "")],
    "answers": lambda v: [x for a in v.answers for x in (a.model, a.text, a.final_text or "")],
    "cut_answers": lambda v: [x for c in v.cut_answers for x in (c.model, c.note)],
    "first_review": _reviews,
    "rounds": _rounds,
    "steering": _steering,
    "late": lambda v: v.late,
    "failed": lambda v: [f.line for f in v.failed],
    "tools": lambda v: v.tools,
    "without_tools": lambda v: v.without_tools,
    "tools_unavailable": lambda v: v.tools_unavailable,
    "tools_withheld": lambda v: v.tools_withheld,
    "tool_calls": lambda v: [
        x for c in v.tool_calls for x in (c.line, " ".join(c.excerpt.split()))
    ],
    "depth": lambda v: [f"depth {v.depth}"] if v.depth != "full" else [],
    "gate": lambda v: [v.gate.line, *([v.gate.saved] if v.gate.saved else [])] if v.gate else [],
    "not_needed": lambda v: v.not_needed,
    "report": lambda v: (
        [item.text for _, items in v.report.lines() for item in items] if v.report else []
    ),
    "answers_agree": lambda v: [v.answers_agree] if v.answers_agree else [],
}
# What the MCP result leaves out: a tool returns the final answer with a summary of how
# the run went (the models that call it read the answer, not the transcript).
MCP_LEAVES_OUT = {
    "question",
    "min_rounds",
    "max_rounds",
    "quality_threshold",
    "context",
    "attachments",
    "members",
    "answers",
    "cut_answers",
    "first_review",
    "rounds",
    "steering",
    "tools",
}
# The MCP result's summary of usage: the totals.
MCP_PROBES: dict[str, Probe] = {
    "usage": lambda v: [v.usage.short],
    "final": lambda v: (
        [v.final.chairman, json.dumps(v.final.text, ensure_ascii=False)[1:-1]] if v.final else []
    ),
    "late": lambda v: [json.dumps(line, ensure_ascii=False)[1:-1] for line in v.late],
    "failed": lambda v: [json.dumps(f.line, ensure_ascii=False)[1:-1] for f in v.failed],
    "rounds_completed": lambda v: [f'"rounds_completed": {v.rounds_completed}'],
    "tool_calls": lambda v: [json.dumps(c.line, ensure_ascii=False)[1:-1] for c in v.tool_calls],
    "without_tools": lambda v: [f"{m} answered without tools" for m in v.without_tools],
    "tools_unavailable": lambda v: [
        json.dumps(line, ensure_ascii=False)[1:-1] for line in v.tools_unavailable
    ],
    "tools_withheld": lambda v: [
        json.dumps(line, ensure_ascii=False)[1:-1] for line in v.tools_withheld
    ],
    "depth": lambda v: [f'"depth": "{v.depth}"'],
    "gate": lambda v: [json.dumps(v.gate.line, ensure_ascii=False)[1:-1]] if v.gate else [],
    "not_needed": lambda v: [json.dumps(line, ensure_ascii=False)[1:-1] for line in v.not_needed],
}


def test_every_field_of_the_view_has_a_probe() -> None:
    named = {f.name for f in fields(RecordView)}
    assert named == set(PROBES), "a field of the view needs a probe here, and every surface"
    assert named >= MCP_LEAVES_OUT and set(MCP_PROBES) <= named - MCP_LEAVES_OUT


def test_the_record_of_everything_gives_every_field_something_to_show() -> None:
    view = record_view(everything())
    assert {name for name, probe in PROBES.items() if any(probe(view))} == set(PROBES)


@pytest.mark.parametrize("record", [*records(), everything()], ids=lambda r: r.id)
def test_each_surface_shows_each_field_of_the_view(record: DeliberationRecord) -> None:
    view = record_view(record)
    surfaces = {
        "page": (page_text(record), PROBES, set[str]()),
        "markdown": (markdown_text(view), PROBES, set[str]()),
        "mcp": (mcp_text(view), PROBES | MCP_PROBES, MCP_LEAVES_OUT),
    }
    missing = [
        f"{surface}: {name}: {text!r}"
        for surface, (shown, probes, left_out) in surfaces.items()
        for name, probe in probes.items()
        if name not in left_out
        for text in probe(view)
        if text and text not in shown
    ]
    assert missing == []


# The page names the run by its workflow id and shows its state as Temporal reports it:
# the same as the record's, once the run has ended.
PAGE_FROM_TEMPORAL = {"status", "id"}
# How a field's value is changed to see that a surface shows it.
CHANGES: dict[str, Callable[[Any], Any]] = {
    "usage": lambda u: replace(u, total_tokens=u.total_tokens + 7, tables=[]),
}


def _changed(name: str, value: Any) -> Any:
    """Another value of the field: a text or a number changed, a list emptied, an
    optional part taken away."""
    if name in CHANGES:
        return CHANGES[name](value)
    if isinstance(value, str):
        return f"{value} (changed)"
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, list):
        return []
    return None


def test_each_surface_changes_with_each_field_it_shows() -> None:
    """Each field changed in turn (a list emptied, a part taken away): every surface that
    shows it reads differently."""
    record = everything()
    view = record_view(record)

    def surfaces(v: RecordView) -> dict[str, str]:
        return {"page": page_text(record, v), "markdown": markdown_text(v), "mcp": mcp_text(v)}

    left_out = {"page": PAGE_FROM_TEMPORAL, "markdown": set[str](), "mcp": MCP_LEAVES_OUT}
    before = surfaces(view)
    unmoved = []
    for f in fields(RecordView):
        value = getattr(view, f.name)
        assert value not in (None, [], ""), f"{f.name}: the record of everything has none"
        other = _changed(f.name, value)
        after = surfaces(replace(view, **{f.name: other}))
        unmoved += [
            f"{surface}: {f.name}"
            for surface, text in after.items()
            if f.name not in left_out[surface] and text == before[surface]
        ]
    assert unmoved == []


def test_the_view_keeps_model_text_as_written() -> None:
    record = recorded("stragglers_cut_in_each_stage")
    hostile = "<b>bold</b> & *stars* `ticks` [link](javascript:x)"
    first = record.stage1[0].model_copy(update={"response": hostile})
    view = record_view(record.model_copy(update={"stage1": [first, *record.stage1[1:]]}))
    assert view.answers[0].text == hostile  # each renderer escapes it for its medium
    page = page_html(record, view)
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_a_steering_critique_not_yet_handed_over_waits_while_the_run_goes() -> None:
    record = recorded("user_critique_and_more_rounds")
    critique = next(a for a in record.steering if a.kind == "critique")
    pending = critique.model_copy(update={"delivered_in_round": None, "at": datetime.now(UTC)})
    running = record.model_copy(update={"status": "running", "steering": [pending]})
    assert record_view(running).steering[0].handed == "waiting for the next round"
    done = record_view(running.model_copy(update={"status": "completed"}))
    assert done.steering[0].handed == "never handed over (no round followed)"
    # One wording, whichever surface shows it.
    assert done.steering[0].handed in markdown_text(done)


def test_a_record_of_build_0_4_shows_its_points_of_disagreement_as_the_report() -> None:
    record = recorded("agreement_dissent_and_structured_synthesis")
    assert record.stage3 is not None
    old = Disagreement(point="which engine", held_by=["sim/drift"], resolution="the load")
    stage3 = record.stage3.model_copy(update={"disagreements": [old]})
    view = record_view(record.model_copy(update={"disagreement_report": None, "stage3": stage3}))
    assert view.report is not None and view.report.lines() == [
        (
            "Contradictions",
            [
                ReportLine(
                    "which engine: not the answer's view (held by sim/drift) · resolved: the load",
                    "chairman",
                )
            ],
        )
    ]
    assert "which engine" in markdown_text(view) and "which engine" in page_text(record, view)


def test_refused_and_failed_tool_calls_count_among_the_errors() -> None:
    """A run whose model calls all completed but whose members' tool calls were refused
    (the budget was spent) or failed: the Errors section says so, on every surface, and
    never "No call failed."."""
    record = recorded("members_use_tools")
    assert record.errors == [] and record.tool_calls
    refused = [
        c.model_copy(
            update={
                "refused": True,
                "error": "not run: the tool-call budget is spent",
                "excerpt": "",
            }
        )
        for c in record.tool_calls[:12]
    ]
    broken = record.tool_calls[12].model_copy(update={"error": "connection refused", "excerpt": ""})
    troubled = record.model_copy(update={"tool_calls": [*refused, broken]})
    line = "13 tool calls: 12 refused (the budget was spent), 1 failed"
    page = page_text(troubled)
    errors = page[page.index("<h2>Errors</h2>") :]
    assert "No call failed." not in errors
    assert line in errors
    view = record_view(troubled)
    assert errors.count("not run: the budget was spent") >= 12
    assert "failed after" in errors and "connection refused" in errors
    assert line in markdown_text(view) and line in mcp_text(view)
    # The run as it was recorded: every tool call gave a result, and nothing failed.
    clean = page_text(record)
    assert "No call failed." in clean[clean.index("<h2>Errors</h2>") :]
    assert record_view(record).tool_failures == []


def test_the_view_shows_a_review_as_read_when_stored_and_an_older_one_the_same() -> None:
    """A review is read once, as it is stored: the view shows the critiques and the
    written-out JSON the record keeps, and reads again only an older record's review,
    which kept neither, to show it the same."""
    record = recorded("agreement_dissent_and_structured_synthesis")
    labels = record.label_to_model
    stored = [read_review(r.model, r.ranking, labels)[0] for r in record.stage2]
    assert all(r.critiques and r.written_out for r in stored)  # given as JSON, with critiques
    older = [r.model_copy(update={"critiques": None, "written_out": None}) for r in stored]

    def first_review(reviews: list[Stage2Result]) -> Matrix | None:
        return record_view(record.model_copy(update={"stage2": reviews})).first_review

    assert first_review(older) == first_review(stored) is not None
    kept = [
        r.model_copy(
            update={
                "critiques": dict.fromkeys(labels_shown_to(r.model, labels), "as kept"),
                "written_out": "written out as kept",
            }
        )
        for r in stored
    ]
    matrix = first_review(kept)
    assert matrix is not None and matrix.rows
    assert {cell.critique for _, cells in matrix.rows for cell in cells.values()} == {"as kept"}
    assert set(matrix.texts.values()) == {"written out as kept"}
