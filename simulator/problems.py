"""Simulated solving of problems with known answers, so that the evaluation harness runs
offline. Everything here is simulated: no problem is actually solved.

The simulator cannot solve a word problem. It knows the expected answers of the datasets
in the repository's datasets/ folder (and of the JSONL files listed in the environment
variable COUNCIL_SIM_DATASETS, separated by os.pathsep, read once), recognises a problem
by its question text, and plays the four standard personas as solvers of known skill:

- stage 1: a persona answers wrong on a fixed share of the problems (chosen by a hash of
  persona and problem), with one of a few plausible mistakes that personas often share,
  and ends its reply in its own format (marked, bold, terse or boxed); a request with a
  sampling seed is an independent sample, whose slips still fall mostly on the problems
  hard for the persona (stage1_value);
- stage 2: a reviewer checks each answer against the expected one: 5/5 (4/5 without
  working) when it checks out, 1/5 when the final answer is wrong; it misjudges a fixed
  share of the answers it sees (by a hash of reviewer, problem and answer);
- stage 2.5: a persona whose answer a critique calls wrong re-checks it: a wrong answer
  gets fixed (the least careful persona fixes it only some of the time, so it may take
  another round), a right one is kept, unless two reviewers insist and the persona is
  one that gives in;
- stage 3: the chairman writes the answer with the most peer support (the sum of the
  mean ratings of the members who gave it);
- a judge prompt (grading.judge) gets a verdict from a lenient comparison.

A problem as the harness asks it (the question, then its answer instruction) that the
simulator does not know gets no answer: every member says so (grading.dataset's
NO_SIMULATED_ANSWER) and keeps saying so when it refines, and so does the chairman, so that
the harness reports the problem as unknown to the simulator, not as answered wrong.

Any other question, and any persona without a skill here, gets simulator.personas' usual
replies. Like the rest of the simulator, every reply is a pure function of the request.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Protocol

from council.calls import Stage
from grading.answers import DEFAULT_LETTERS, Answer, format_number, normalize_text
from grading.dataset import (
    NO_SIMULATED_ANSWER,
    DatasetError,
    Problem,
    is_problem_prompt,
    load_dataset,
)
from grading.judge import read_judge_prompt
from simulator import wire
from simulator.quality import SIMULATED_MARK
from simulator.reading import Prompt
from simulator.settings import SimulatorSettings

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
SYNTHESIS_LABEL = "(Simulated council synthesis)"
# A seeded sample's chance of slipping on a problem that is hard for the persona.
HARD_SLIP = 0.7
WORKING_WORDS = 20  # an answer this long shows its working and earns 5/5 when right
_FLAGGED = re.compile(r"\b(?:is wrong|incorrect|does not fit)\b", re.IGNORECASE)


class PersonaLike(Protocol):
    name: str
    review_style: str
    refine_format: str


@dataclass(frozen=True)
class Skill:
    slip: float  # share of problems answered wrong at stage 1
    misjudge: float  # share of answers a review of this persona judges wrongly
    fix: float  # chance that a refinement fixes a wrong answer a critique flagged
    gives_in: float  # chance that a right answer flagged by two reviewers is given up
    style: str  # how the reply ends: marked | bold | terse | boxed


SKILLS = {
    "Atlas": Skill(slip=0.10, misjudge=0.04, fix=1.0, gives_in=0.0, style="marked"),
    "Borealis": Skill(slip=0.20, misjudge=0.08, fix=1.0, gives_in=0.0, style="bold"),
    "Cirrus": Skill(slip=0.40, misjudge=0.20, fix=0.5, gives_in=0.5, style="terse"),
    "Drift": Skill(slip=0.25, misjudge=0.10, fix=1.0, gives_in=0.25, style="boxed"),
}
# Words of one category that a solver may confuse (a day for another day, ...).
CATEGORIES = (
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ),
    ("red", "orange", "yellow", "green", "blue", "purple", "white", "black"),
)


def chance(*parts: object) -> float:
    """A number in [0, 1) fixed by the parts: the simulator's only source of luck."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _squash(text: str) -> str:
    return " ".join(text.split())


# ---- which problem is this ------------------------------------------------------------


@functools.cache
def known_problems() -> dict[str, Problem]:
    """Every problem the simulator knows, by its question alone and as the harness asks it
    (the question and the answer instruction), whitespace squashed."""
    found: dict[str, Problem] = {}
    for path in sorted(DATASETS.glob("*.jsonl")) + SimulatorSettings.read().datasets:
        try:
            dataset = load_dataset(path)
        except DatasetError:
            continue
        for problem in dataset.problems:
            found.setdefault(_squash(problem.question), problem)
            found.setdefault(_squash(problem.prompt()), problem)
    return found


def problem_for(question: str) -> Problem | None:
    return known_problems().get(_squash(question))


# ---- answers as a solver writes them --------------------------------------------------


def _rotate(items: list, problem: Problem) -> list:
    if not items:
        return items
    start = int(chance("mistakes", problem.id) * len(items))
    return items[start:] + items[:start]


def _text_mistakes(problem: Problem) -> list[str]:
    expected = normalize_text(problem.answer)
    words = re.findall(r"[A-Za-z]+", problem.question)
    for category in CATEGORIES:
        if expected in category:
            mentioned = [w for w in dict.fromkeys(x.lower() for x in words) if w in category]
            i = category.index(expected)
            near = [category[(i - 1) % len(category)], category[(i + 1) % len(category)]]
            options = [w for w in dict.fromkeys(mentioned + near) if w != expected]
            return [w.capitalize() if problem.answer[:1].isupper() else w for w in options]
    # Names: capitalised words that do not start a sentence.
    names = re.findall(r"(?<![.?!:]\s)(?<!^)\b([A-Z][a-z]+)\b", problem.question)
    options = [n for n in dict.fromkeys(names) if normalize_text(n) != expected]
    return options or ["It cannot be determined"]


def mistakes(problem: Problem) -> list[str]:
    """Plausible wrong answers, most common first (they depend on the problem only, so
    personas that slip often agree on the same wrong answer)."""
    if problem.kind == "number":
        v = float(problem.expected.value)
        candidates = [2 * v, v / 2, v + 1, v - 1, v + 10, 1.5 * v, v + 100]
        wrong = []
        for c in candidates:
            shown = format_number(c)
            if (
                (v < 0 or c >= 0)
                and not problem.is_correct(Answer("number", c, shown))
                and shown not in wrong
            ):
                wrong.append(shown)
        return _rotate(wrong, problem)
    if problem.kind == "choice":
        letters = "ABCD" if problem.letters == DEFAULT_LETTERS else problem.letters
        return _rotate([x for x in letters if x != problem.expected.value], problem)
    return _rotate(_text_mistakes(problem), problem)


def _number_shown(value: str, style: str, question: str) -> str:
    number = float(value)
    if style == "bold" and abs(number) >= 1000:
        return f"{number:,.0f}" if number == int(number) else f"{number:,.2f}"
    if style == "boxed":
        fraction = Fraction(number).limit_denominator(12)
        if 0 < abs(number) < 1 and abs(float(fraction) - number) < 1e-9:
            return rf"\frac{{{fraction.numerator}}}{{{fraction.denominator}}}"
        if "percent" in question.lower():
            return rf"{value}\%"
    return value


def ending(problem: Problem, value: str, style: str) -> str:
    """The last line of a reply that gives `value`, in the persona's style."""
    shown = _number_shown(value, style, problem.question) if problem.kind == "number" else value
    if style == "marked":
        return f"Final answer: {'(' + shown + ')' if problem.kind == 'choice' else shown}"
    if style == "bold":
        return f"So the answer is **{shown}**."
    if style == "boxed":
        inner = rf"\text{{{shown}}}" if problem.kind == "text" else shown
        return rf"$\boxed{{{inner}}}$"
    if problem.kind == "choice":
        return f"I'd go with ({shown})."
    if problem.kind == "text":
        return f"It must be {shown}."  # no marker: exact matching misses it, a judge does not
    return f"I get {shown}."


_WORKING = {
    "marked": (
        "Working through it step by step (simulated: the simulator knows this problem's "
        "expected answer and plays a solver that sometimes slips).\n"
        "1. Note the quantities and conditions the problem gives.\n"
        "2. Set up the relation the question asks about.\n"
        "3. Solve it and check the result against every condition.\n\n"
    ),
    "bold": "I set up the relation from the conditions in the problem and checked the result "
    "against them. ",
    "boxed": "Writing the conditions as equations and solving them gives ",
    "terse": "",
}


def solution(problem: Problem, value: str, style: str) -> str:
    return f"{SIMULATED_MARK} {_WORKING[style]}{ending(problem, value, style)}"


def stage1_value(
    persona: str,
    skill: Skill,
    problem: Problem,
    seed: int | None = None,
    disagree: float | None = None,
) -> str:
    """The answer a persona gives. Unseeded, it slips on a fixed share of problems (the
    ones hard for it). A seeded request is an independent sample: it slips on a problem
    hard for the persona most of the time (HARD_SLIP) and on the others rarely, so that
    the persona slips as often overall, and its mistakes stay correlated by problem, as a
    model's do: sampling more fixes its careless slips, not what it cannot do.

    With `disagree` (a share, unseeded answers only), the problem decides first: a share
    `disagree` of the problems (by a hash of each) are contested, and on the others every
    persona answers right. On a contested one each persona slips as its skill says, and
    when the four would still agree, one of them differs: the least careful slips when all
    four are right, the most careful is right when all four made the same mistake."""
    if disagree is not None and seed is None:
        if chance("contested", problem.id) >= disagree:
            return _expected_value(problem)
        return _contested_value(persona, problem)
    hard = chance("slip", persona, problem.id) < skill.slip
    if seed is None:
        slips, draw = hard, chance("mistake", persona, problem.id)
    else:
        easy_slip = (1 - HARD_SLIP) * skill.slip / (1 - skill.slip)
        slips = chance("sample", persona, problem.id, seed) < (HARD_SLIP if hard else easy_slip)
        draw = chance("sample mistake", persona, problem.id, seed)
    if not slips:
        return _expected_value(problem)
    wrong = mistakes(problem)
    return wrong[int(draw * min(2, len(wrong)))]


def _expected_value(problem: Problem) -> str:
    return problem.expected.shown if problem.kind != "text" else problem.answer


def _contested_value(persona: str, problem: Problem) -> str:
    """A persona's first answer on a contested problem: its own, unless the four agree."""
    values = {name: stage1_value(name, skill, problem) for name, skill in SKILLS.items()}
    if len(set(values.values())) > 1:
        return values[persona]
    by_care = sorted(SKILLS, key=lambda name: SKILLS[name].slip)
    right = _expected_value(problem)
    if values[persona] == right and persona == by_care[-1]:
        wrong = mistakes(problem)
        return wrong[0] if wrong else values[persona]
    if values[persona] != right and persona == by_care[0]:
        return right
    return values[persona]


# ---- reading an answer as a careful reader would --------------------------------------


def _last_line(text: str) -> str:
    lines = [line for line in text.replace(SIMULATED_MARK, " ").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def reads_right(problem: Problem, text: str) -> bool:
    """Whether the reply gives the expected answer (for text: says it in its last line)."""
    if problem.is_correct(problem.read(text)):
        return True
    if problem.kind != "text":
        return False
    return f" {problem.expected.value} " in f" {normalize_text(_last_line(text))} "


def answer_of(problem: Problem, text: str) -> tuple[str, str] | None:
    """(comparable key, how to show it) of the answer a reply gives, or None."""
    if reads_right(problem, text):
        return str(problem.expected.value), _expected_value(problem)
    read = problem.read(text)
    if read is None:
        return None
    key = format_number(float(read.value)) if read.kind == "number" else str(read.value)
    return key, read.shown


# ---- the stages -----------------------------------------------------------------------


def _verdicts(persona: PersonaLike, skill: Skill, problem: Problem, answers: dict[str, str]):
    for label, text in answers.items():
        found = answer_of(problem, text)
        shown = found[1] if found else None
        misjudged = (
            chance("misjudge", persona.name, problem.id, found[0] if found else "-")
            < skill.misjudge
        )
        right = reads_right(problem, text) != misjudged
        if right:
            rating = 5 if len(text.split()) >= WORKING_WORDS else 4
            note = (
                f"The final answer ({shown or 'as stated'}) checks out: it fits every condition "
                "of the problem."
            )
            reason = "checks out"
        else:
            rating = 1
            note = (
                f"The final answer ({shown}) is wrong: it does not fit the conditions of the "
                "problem. Recheck the working and correct it."
                if shown
                else "There is no clear final answer, and what it says is wrong; recheck the "
                "working."
            )
            reason = "wrong final answer"
        yield label, rating, note, reason


def review(persona: PersonaLike, skill: Skill, problem: Problem, prompt: Prompt) -> str:
    judged = list(_verdicts(persona, skill, problem, prompt.answers))
    ranked = sorted(judged, key=lambda v: (-v[1], v[0]))
    who = f"{persona.name}: each final answer checked against the known one"
    return wire.review_text(
        persona.review_style,
        who,
        [(label, rating, note) for label, rating, note, _ in judged],
        [(label, rating, reason) for label, rating, _, reason in ranked],
    )


def refine(persona: PersonaLike, skill: Skill, problem: Problem, prompt: Prompt) -> str:
    original = prompt.original.strip()
    flags = [c for c in prompt.critiques if _FLAGGED.search(c.text)]
    others = [c for c in prompt.critiques if c not in flags]
    right = reads_right(problem, original)
    found = answer_of(problem, original)
    old = found[1] if found else "my answer"
    seed = (persona.name, problem.id, original)  # a rewritten answer gets a fresh draw
    accepted: list[str] = []
    rejected = [{"critique": c.quoted, "reason": "agreed: nothing to change"} for c in others]
    if not flags:
        final, changed = original, False
        explanation = "The reviewers found the final answer correct, so I keep it."
    elif not right and chance("fix", *seed) < skill.fix:
        accepted = [c.quoted for c in flags]
        final = (
            f"{SIMULATED_MARK} I re-checked my working after the reviews and found the slip: "
            f"{old} does not fit the conditions of the problem. Redoing it carefully gives the "
            f"corrected result.\n\n{ending(problem, _expected_value(problem), skill.style)}"
        )
        changed = True
        explanation = f"Fixed the final answer: {old} was a slip."
    elif right and len(flags) >= 2 and chance("give in", *seed) < skill.gives_in:
        accepted = [c.quoted for c in flags]
        wrong = next(iter(mistakes(problem)), old)
        final = (
            f"{SIMULATED_MARK} Two reviewers say {old} is wrong, so I redid the problem and now "
            f"get a different result.\n\n{ending(problem, wrong, skill.style)}"
        )
        changed = True
        explanation = f"Changed the final answer from {old}, as the reviewers asked."
    else:
        rejected += [{"critique": c.quoted, "reason": f"I re-checked: {old} stands"} for c in flags]
        final = f"(Re-checked after the reviews: I still get {old}.)\n\n{original}"
        changed = False
        explanation = f"I re-checked and keep {old}."
    return _refinement_reply(persona, final, accepted, rejected, changed, explanation, right)


def _refinement_reply(
    persona: PersonaLike,
    final: str,
    accepted: list[str],
    rejected: list[dict[str, str]],
    changed: bool,
    explanation: str,
    was_right: bool,
) -> str:
    if persona.refine_format == "plain":
        return final
    data = {
        "critiques_accepted": accepted,
        "critiques_rejected": rejected,
        "refinement_reasoning": "I checked each critique against my working (simulated).",
        "final_answer": final,
        "confidence": 0.9 if was_right != changed else 0.6,
        "changed_from_original": changed,
        "improvement_explanation": explanation,
    }
    return wire.refinement_text(persona.refine_format, data)


def synthesis(persona: PersonaLike, problem: Problem, prompt: Prompt) -> str:
    support: dict[str, list] = {}  # key -> [shown, support, members, first seen]
    for i, member in enumerate(prompt.council):
        found = answer_of(problem, member.text)
        if found is None:
            continue
        key, shown = found
        entry = support.setdefault(key, [shown, 0.0, 0, i])
        entry[1] += member.mean_rating if member.mean_rating is not None else 3.0
        entry[2] += 1
    if not support:
        return (
            f"{SYNTHESIS_LABEL} The council gave no final answer I can use.\n\nFinal answer: none"
        )
    ranked = sorted(support.values(), key=lambda e: (-e[1], -e[2], e[3]))
    listed = ", ".join(
        f"{shown} ({members} member{'s' if members > 1 else ''}, peer support {total:.1f})"
        for shown, total, members, _ in ranked
    )
    best = ranked[0][0]
    value = f"({best})" if problem.kind == "choice" else best
    return (
        f"{SYNTHESIS_LABEL} The council's final answers: {listed}. The answer with the most "
        f"peer support is {best}. (Written by the Council simulator as chairman persona "
        f"{persona.name}; no real model was called.)\n\nFinal answer: {value}"
    )


def judge(persona: PersonaLike, prompt_text: str) -> str | None:
    parsed = read_judge_prompt(prompt_text)
    if parsed is None:
        return None
    _, reference, candidate = parsed
    wanted = normalize_text(reference)
    last = normalize_text(_last_line(candidate))
    said = f" {wanted} " in f" {last} " or any(
        f" {wanted} " in f" {normalize_text(s)} "
        for s in re.findall(r"answer\b[^\n]*", candidate, re.I)
    )
    verdict = "CORRECT" if wanted and said else "INCORRECT"
    return (
        f"{SIMULATED_MARK} Simulated judge {persona.name}: the candidate's final answer "
        f"{'says' if said else 'does not say'} the reference answer.\nVERDICT: {verdict}"
    )


UNKNOWN = (
    f"{NO_SIMULATED_ANSWER} The simulator knows the problems of the datasets in datasets/ "
    "and of the files in COUNCIL_SIM_DATASETS, and this is not one of them: it gives no "
    "answer to it, right or wrong."
)


def unknown(persona: PersonaLike, prompt: Prompt) -> str | None:
    """The reply to a problem the simulator has no answer for (None: the usual review)."""
    if prompt.stage is Stage.ANSWER:
        return f"{SIMULATED_MARK} {UNKNOWN}"
    if prompt.stage is Stage.REFINE:
        original = prompt.original.strip() or f"{SIMULATED_MARK} {UNKNOWN}"
        rejected = [
            {"critique": c.quoted, "reason": "no answer is known to correct"}
            for c in prompt.critiques
        ]
        return _refinement_reply(
            persona, original, [], rejected, False, "No answer is known: nothing to change.", False
        )
    if prompt.stage is Stage.SYNTHESIS:
        return f"{SYNTHESIS_LABEL} {UNKNOWN}"
    return None


def reply(persona: PersonaLike, prompt: Prompt) -> str | None:
    """The reply for a known problem (or a judge prompt), or for a problem the simulator
    does not know; None for anything else."""
    if prompt.stage is Stage.ANSWER:
        verdict = judge(persona, prompt.question)
        if verdict is not None:
            return verdict
    problem = problem_for(prompt.question)
    if problem is None:
        return unknown(persona, prompt) if is_problem_prompt(prompt.question) else None
    skill = SKILLS.get(persona.name)
    if skill is None:
        return None
    if prompt.stage is Stage.REVIEW:
        return review(persona, skill, problem, prompt)
    if prompt.stage is Stage.REFINE:
        return refine(persona, skill, problem, prompt)
    if prompt.stage is Stage.SYNTHESIS:
        return synthesis(persona, problem, prompt)
    value = stage1_value(persona.name, skill, problem, prompt.seed, prompt.disagree)
    return solution(problem, value, skill.style)
