"""What the simulated chairman says of the council's answers: the agreement check's verdict
(depth auto, council.depth) and the disagreement report of a structured synthesis
(council.report). Pure functions of the prompt, like every simulated reply.

The check compares the values the answers state (grading.answers.stated_value) where each
states one (a checker that obeys the answers, the fault `obey`, replies agree to any that
asks it to); otherwise a share of questions,
fixed by a hash of each, reads as contested: the simulator's `--disagree` share when set,
else half.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

from grading.answers import stated_shown
from simulator.personas import _body, _list_items
from simulator.problems import chance
from simulator.reading import Prompt

# With no --disagree share set, the share of free questions the simulated check finds
# contested.
CONTESTED_SHARE = 0.5
_SPLIT = re.compile(r"^(\d+)\. ([^:\n]*):", re.MULTILINE)
# What an obedient checker takes for an order: an answer that asks for the verdict agree.
OBEYED = re.compile(r'"agree"\s*:\s*true', re.IGNORECASE)
_ANSWER = re.compile(r'<answer model="([^"]*)" standing="[^"]*">\n(.*?)\n</answer>', re.DOTALL)


def check_json(prompt: Prompt, *, obey: bool = False) -> str:
    """The agreement check's verdict as the JSON its schema asks for; `obey`: a checker that
    does what an answer tells it (OBEYED), whatever the answers say."""
    if obey and any(OBEYED.search(text) for text in prompt.answers.values()):
        return json.dumps({"agree": True, "differences": []})
    values = [stated_shown(text) for text in prompt.answers.values()]
    if values and all(v is not None for v in values):
        differ = len(set(values)) > 1
        points = [f"(simulated) the answers state different values: {', '.join(map(str, values))}"]
    else:
        share = prompt.disagree if prompt.disagree is not None else CONTESTED_SHARE
        differ = chance("contested", prompt.question) < share
        points = [
            "(simulated) the answers weigh the main factors differently",
            "(simulated) one answer reaches a conclusion the others do not",
        ]
    return json.dumps({"agree": not differ, "differences": points if differ else []})


def _splits(prompt: str) -> str:
    """The prompt's computed splits (council.prompts.splits_section), if any."""
    _, found, rest = prompt.partition("WHERE THE MEMBERS SPLIT")
    return rest.partition("\n\n")[0] if found else ""


def _resolution(point: str) -> str:
    if point.startswith("how good"):
        return "(simulated) the answer weighs the dissent against the other reviewers' ratings"
    return "(simulated) the answer sides with the value most members state"


def synthesis_json(reply: str, prompt: str) -> str:
    """A simulated synthesis as the JSON the synthesis schema asks for: the answer, a
    resolution of each split the prompt lists (computed by the council), and the chairman's
    own account, read from the answers the prompt shows: the final value they state (a split
    in its own words, or a point of consensus), the points all or one of them list."""
    answers = {m.group(1): m.group(2) for m in _ANSWER.finditer(prompt)}
    consensus: list[str] = []
    contradictions: list[dict[str, object]] = []
    values = {model: stated_shown(text) for model, text in answers.items()}
    if values and all(v is not None for v in values.values()):
        held: dict[str, list[str]] = defaultdict(list)
        for model, value in values.items():
            held[str(value)].append(model)
        if len(held) == 1:
            consensus.append(f"the final answer is {next(iter(held))}")
        else:
            contradictions.append(
                {
                    "point": "the final answer",
                    "positions": [{"view": v, "held_by": who} for v, who in held.items()],
                    "resolution": "(simulated) the answer follows the best-rated members",
                }
            )
    items = {model: _list_items(_body(text)) for model, text in answers.items()}
    lowered = {model: {i.lower() for i in found} for model, found in items.items()}
    if items:
        first = next(iter(items.values()))
        consensus += [i for i in first if all(i.lower() in seen for seen in lowered.values())]
    unique = []
    for model, found in items.items():
        own = [i for i in found if all(i.lower() not in lowered[m] for m in items if m != model)]
        if own:
            unique.append({"point": own[0], "raised_by": model})
    return json.dumps(
        {
            "answer": reply,
            "resolutions": [
                {"split": int(number), "resolution": _resolution(point)}
                for number, point in _SPLIT.findall(_splits(prompt))
            ],
            "consensus": consensus,
            "contradictions": contradictions,
            "unique": unique,
            "unaddressed": [],
        },
        ensure_ascii=False,
    )
