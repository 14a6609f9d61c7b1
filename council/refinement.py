"""Stage 2.5: who refines, reading the refinement, and what changed; and the stage as
the specification's one function, `stage2_5_refine_responses`, over any way of calling
models."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from council.changes import (
    NEW_WORD_RATIO,
    detect_significant_changes,
    estimate_tokens_used,
    summarize_changes,
)
from council.critiques import extract_critiques_from_rankings
from council.echo import ECHO_PROBLEM, repeats_prompt
from council.iteration import (
    CritiqueItem,
    IterationRound,
    IterationState,
    RefinementResult,
    RejectedCritique,
    complete_round,
    start_new_round,
)
from council.models import EvaluationCriteria
from council.prompts import build_refinement_prompt
from council.stages import Ending, Stage1Result

# Only the keys our prompt asks for: a reply whose JSON has an "answer" key is not ours.
ANSWER_KEYS = ("final_answer", "refined_response")
# A reply is structured when one JSON object is the reply: alone, in a code fence, or with
# a short remark around it ("Here is my refined response:"). An answer that merely shows
# some JSON among its prose stays plain text.
MAX_PROSE_AROUND_JSON = 300
_FENCED_JSON = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_ANSWER_START = re.compile(r'"(?:final_answer|refined_response)"\s{0,20}:\s{0,20}"')
_REFINED_HEADER = re.compile(
    r"^[\s#*_]{0,10}refined\s{1,3}response[\s*_]{0,4}(?::|\n|$)[\s*_]{0,4}", re.IGNORECASE
)


class RefinementTask(BaseModel):
    """A model that received critiques, its current answer, and the critiques aimed at it."""

    model: str
    label: str
    original: str
    critiques: list[CritiqueItem]
    # Critiques aimed at it that did not fit the feedback budget of its prompt.
    left_out: int = 0


class ParsedRefinement(BaseModel):
    final_answer: str
    structured: bool = False
    critiques_accepted: list[str] = Field(default_factory=list)
    critiques_rejected: list[RejectedCritique] = Field(default_factory=list)
    refinement_reasoning: str | None = None
    confidence: float | None = None
    changed_from_original: bool | None = None
    improvement_explanation: str | None = None
    reasoning_steps: list[str] = Field(default_factory=list)


def fit_feedback(critiques: Sequence[CritiqueItem], budget: int) -> list[CritiqueItem]:
    """The critiques one refinement prompt carries within `budget` characters of critique
    text: the user's first, then the peers' from the lowest rating up, each whole while it
    fits; those kept stay in their order."""
    rank = {id(c): (not c.from_user, c.rating if c.rating is not None else 3.0) for c in critiques}
    chosen: set[int] = set()
    room = budget
    for item in sorted(critiques, key=lambda c: rank[id(c)]):
        if len(item.critique_text) <= room:
            chosen.add(id(item))
            room -= len(item.critique_text)
    return [c for c in critiques if id(c) in chosen]


def plan_refinements(
    answers: Mapping[str, str],
    critiques: Mapping[str, list[CritiqueItem]],
    label_to_model: Mapping[str, str],
    feedback_chars: int | None = None,
) -> list[RefinementTask]:
    """Each answering model with critiques refines; a model without any keeps its answer.
    With `feedback_chars`, a model's critiques are trimmed to that budget (fit_feedback)."""
    tasks = []
    for label, model in label_to_model.items():
        aimed = [c for c in critiques.get(label, []) if c.source_model != model]
        if model in answers and aimed:
            given = aimed if feedback_chars is None else fit_feedback(aimed, feedback_chars)
            tasks.append(
                RefinementTask(
                    model=model,
                    label=label,
                    original=answers[model],
                    critiques=given,
                    left_out=len(aimed) - len(given),
                )
            )
    return tasks


def _json_candidates(text: str) -> list[str]:
    """JSON objects that could be the whole reply, most likely first."""
    stripped = text.strip()
    candidates = [
        m.group(1)
        for m in _FENCED_JSON.finditer(stripped)
        if len(stripped) - len(m.group(0)) <= MAX_PROSE_AROUND_JSON
    ]
    candidates.append(stripped)
    first, last = stripped.find("{"), stripped.rfind("}")
    if 0 <= first < last and first + len(stripped) - 1 - last <= MAX_PROSE_AROUND_JSON:
        candidates.append(stripped[first : last + 1])
    return candidates


# The JSON string reader the json module itself uses (its C version; typeshed omits it).
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _cut_off_answer(text: str) -> str | None:
    """The answer of a JSON reply that was cut off (a reply over its size cap)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.partition("\n")[2]
    match = _ANSWER_START.search(body) if body.startswith("{") else None
    if not match:
        return None
    for cut in range(7):  # drop a half-written escape sequence at the cut
        try:
            return _scanstring(body[: len(body) - cut] + '"', match.end(), False)[0]
        except ValueError:
            continue
    return None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _critique_text(item: Any) -> str:
    if isinstance(item, dict):
        return _as_text(item.get("critique") or item.get("text")) or ""
    return str(item)


def _strings(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    return [text for text in map(_critique_text, items) if text.strip()]


def _steps(value: Any) -> list[str]:
    """Reasoning steps: a list of strings (or of objects with a step's text), or one text."""
    items = value if isinstance(value, list) else [value] if value else []
    steps = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("step") or item.get("text") or item.get("description") or ""
        text = _as_text(item) or ""
        if text.strip():
            steps.append(text.strip())
    return steps


def _rejections(value: Any) -> list[RejectedCritique]:
    rejected = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            reason = _as_text(item.get("reason")) or ""
            rejected.append(RejectedCritique(critique=_critique_text(item), reason=reason))
        elif str(item).strip():
            rejected.append(RejectedCritique(critique=str(item)))
    return rejected


def _confidence(value: Any) -> float | None:
    if isinstance(value, str):
        value = value.strip().rstrip("%")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if 1 < number <= 100:  # "85" or "85%" style
        number /= 100
    return number if 0 <= number <= 1 else None


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "false", "no"):
        return value.lower() in ("true", "yes")
    return None


def parse_refinement(text: str | None) -> ParsedRefinement:
    """The structured JSON form, JSON in a code fence, or plain text (all of it the answer).

    A structured reply whose answer is empty, or a bare "REFINED RESPONSE:" header, gives
    an empty final_answer: the caller keeps the original answer.
    """
    text = text or ""
    for candidate in _json_candidates(text):
        try:
            data = json.loads(candidate, strict=False)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict) or not any(key in data for key in ANSWER_KEYS):
            continue
        answer = next((_as_text(data[k]) for k in ANSWER_KEYS if data.get(k)), None) or ""
        return ParsedRefinement(
            final_answer=answer.strip(),
            structured=True,
            critiques_accepted=_strings(data.get("critiques_accepted")),
            critiques_rejected=_rejections(data.get("critiques_rejected")),
            refinement_reasoning=_as_text(data.get("refinement_reasoning")),
            confidence=_confidence(data.get("confidence")),
            changed_from_original=_flag(data.get("changed_from_original")),
            improvement_explanation=_as_text(data.get("improvement_explanation")),
            reasoning_steps=_steps(data.get("reasoning_steps")),
        )
    cut_off = _cut_off_answer(text)
    if cut_off is not None:
        return ParsedRefinement(final_answer=cut_off.strip(), structured=True)
    plain = text.strip()
    header = _REFINED_HEADER.match(plain)
    return ParsedRefinement(final_answer=plain[header.end() :].strip() if header else plain)


def refinement_result(
    task: RefinementTask,
    reply: str | None,
    error: str | None = None,
    min_change: float = NEW_WORD_RATIO,
    ending: Ending | None = None,
    late: bool = False,
    prompt: str | None = None,
    material: Sequence[str] = (),
) -> RefinementResult:
    """What a refinement did. A failed or empty call keeps the original answer, and so
    does a reply that only repeats the `prompt` it was given (council.echo; `material`: the
    texts the prompt carried besides the task's own answer and critiques); the reply itself
    is kept as it arrived, with how it ended (`ending`: a finish reason, a cut)."""
    raw = reply if error is None else None
    common = {
        "model": task.model,
        "original_response": task.original,
        "critiques_addressed": [c.critique_text for c in task.critiques],
        "critiques_left_out": task.left_out,
        "raw_response": raw,
        **(ending.model_dump() if ending and raw is not None else {}),
    }
    parsed = parse_refinement(reply) if raw is not None else None
    if (
        parsed is not None
        and parsed.final_answer
        and prompt is not None
        and repeats_prompt(
            parsed.final_answer,
            prompt,
            [task.original, *common["critiques_addressed"], *material],
        )
    ):
        parsed, error = None, ECHO_PROBLEM
    if parsed is None or not parsed.final_answer:
        return RefinementResult(
            **common,
            refined_response=task.original,
            error=error or "the refinement was empty",
            late=late,
        )
    answer = parsed.final_answer
    changed = detect_significant_changes(task.original, answer, min_change)
    return RefinementResult(
        **common,
        refined_response=answer,
        changes_made=changed,
        change_summary=summarize_changes(task.original, answer) if changed else None,
        **parsed.model_dump(exclude={"final_answer", "structured"}),
    )


def record_refinements(
    round_data: IterationRound,
    answers: Mapping[str, str],
    results: list[RefinementResult],
) -> dict[str, str]:
    """Fill the round's refinements and changed/unchanged lists; return the new answers."""
    refined = {result.model: result for result in results}
    new_answers = {}
    for model, answer in answers.items():
        result = refined.get(model)
        new_answers[model] = result.refined_response if result else answer
        if result:
            round_data.refinements.append(result)
        if result and result.changes_made:
            round_data.models_that_changed.append(model)
        else:
            round_data.models_unchanged.append(model)
    return new_answers


ENDING_FIELDS = set(Ending.model_fields)


def answer_ending(
    model: str, answer: str, stage1: Sequence[Stage1Result], rounds: Sequence[IterationRound]
) -> Ending:
    """How `model`'s current answer ended when it was written: its last refinement that
    gave `answer`, else its first answer (an answer copied elsewhere keeps its ending)."""
    refined = (
        r
        for n in reversed(rounds)
        for r in n.refinements
        if r.model == model and r.error is None and r.refined_response == answer
    )
    first = (r for r in stage1 if r.model == model)
    written = next(refined, None) or next(first, None)
    return Ending() if written is None else Ending(**written.model_dump(include=ENDING_FIELDS))


# Model -> chat messages in; model -> {"content": reply text}, or None, out (a model whose
# call failed may be left out).
QueryModels = Callable[
    [dict[str, list[dict[str, str]]]], Awaitable[Mapping[str, Mapping[str, Any] | None]]
]


async def stage2_5_refine_responses(
    user_query: str,
    stage1_results: Sequence[Mapping[str, Any]],
    stage2_results: Sequence[Mapping[str, Any]],
    label_to_model: Mapping[str, str],
    iteration_state: IterationState,
    criteria: EvaluationCriteria | None = None,
    *,
    query_models: QueryModels,
    now: datetime | None = None,
) -> tuple[list[dict[str, Any]], IterationRound]:
    """One refinement round as the specification states it: a new round; the critiques
    from the stage 2 reviews; a refinement call for each model with critiques (in
    parallel, through `query_models`); what changed; the tokens estimated; the round
    completed. Returns each stage 1 model's result, refined or not, and the round.

    The rules are the workflow's own (plan_refinements, build_refinement_prompt,
    refinement_result, record_refinements); a failed call keeps the original answer."""
    round_data = start_new_round(iteration_state, now)
    round_data.critiques = extract_critiques_from_rankings(stage2_results, label_to_model)
    answers = {result["model"]: result["response"] for result in stage1_results}
    tasks = plan_refinements(answers, round_data.critiques, label_to_model)
    prompts = {
        task.model: build_refinement_prompt(user_query, task.original, task.critiques, criteria)
        for task in tasks
    }
    messages = {model: [{"role": "user", "content": text}] for model, text in prompts.items()}
    replies = await query_models(messages) if messages else {}
    contents = {model: (reply or {}).get("content") or None for model, reply in replies.items()}
    results = [
        refinement_result(
            task,
            contents.get(task.model),
            error=None if contents.get(task.model) else "the refinement call failed",
            min_change=iteration_state.min_change_threshold,
        )
        for task in tasks
    ]
    new_answers = record_refinements(round_data, answers, results)
    tasks_for_estimate = {model: {"prompt": text} for model, text in prompts.items()}
    complete_round(
        iteration_state, round_data, estimate_tokens_used(tasks_for_estimate, replies), now
    )
    refined = {result.model: result for result in results if result.error is None}
    return [
        {
            "model": model,
            "response": new_answers[model],
            "original_response": answers[model],
            "refined": True,
            "changes_made": refined[model].changes_made,
        }
        if model in refined
        else {"model": model, "response": answers[model], "refined": False, "changes_made": False}
        for model in answers
    ], round_data
