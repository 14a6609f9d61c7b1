"""The one rule every simulated reviewer applies: how good an answer looks, and what it lacks.

An answer earns a point for each of: some depth (40+ words), structure (a list of 3+
points), a reason ("because"), a concrete example, and a caveat; its rating is
1 + points, at most 5. The question's own words are ignored, so a question that
mentions "trade-offs" does not earn every answer a caveat. A gap is a missing point;
critiques name gaps in words the refining persona looks for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SIMULATED_MARK = "[simulated]"
LONG_ENOUGH_WORDS = 40
MIN_LIST_ITEMS = 3
TOPIC_WORDS = 8

# Gap -> (feature test, the request a critique makes, how the ranking line says it).
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+\S", re.MULTILINE)
_EXAMPLE = re.compile(r"\b(?:for example|for instance|e\.g\.|example:)", re.IGNORECASE)
_REASON = re.compile(r"\b(?:because|the reason is|this matters since)\b", re.IGNORECASE)
_CAVEAT = re.compile(r"\b(?:caveat|however|limitation|trade-off)s?\b", re.IGNORECASE)

GAPS = ("example", "reason", "depth", "structure", "caveat")
REQUESTS = {
    "example": "add a concrete example",
    "reason": "explain why it holds",
    "depth": "develop the answer in more depth",
    "structure": "organise the key points as a list",
    "caveat": "mention a limitation or trade-off",
}
SHORT_GAPS = {
    "example": "no example",
    "reason": "no reasoning",
    "depth": "too brief",
    "structure": "unstructured",
    "caveat": "no caveat",
}
# How a refining persona recognises each request in a critique, whoever wrote it.
_REQUESTED = {
    "example": re.compile(
        r"\b(?:add|give|include|needs?|lacks?|missing)\b[^.;]*\bexamples?\b|\bno example",
        re.IGNORECASE,
    ),
    "reason": re.compile(r"\bexplain(?:s|ing)? why\b|\bno reasoning\b|\bjustif", re.IGNORECASE),
    "depth": re.compile(
        r"\btoo (?:brief|short|terse)\b|\bmore (?:depth|detail)\b|\bdevelop\b", re.IGNORECASE
    ),
    "structure": re.compile(
        r"\borgani[sz]e\b|\bstructure it\b|\bunstructured\b|\bas a list\b", re.IGNORECASE
    ),
    "caveat": re.compile(
        r"\b(?:mention|add|note|acknowledge)\b[^.;]*\b(?:limitation|trade-off|caveat)s?\b"
        r"|\bno caveat\b",
        re.IGNORECASE,
    ),
}
_LEADS = {
    1: "Too brief to be useful",
    2: "Thin",
    3: "Reasonable but incomplete",
    4: "Good and well organised",
}
PRAISE = (
    "Strong answer: well organised and reasoned, with a concrete example and an honest "
    "caveat; nothing important is missing."
)

_WHAT = re.compile(r"^(?:what|which)\s+(?:is|are|was|were)\s+", re.IGNORECASE)
_WH_AUX = re.compile(
    r"^(how|why|when|where|who)\s+(?:do|does|did|can|could|should|would|will|is|are|to)\s+",
    re.IGNORECASE,
)
_TIMES = re.compile(r"(?<=\d)\s*\*\s*(?=\d)")
_IMPERATIVE = re.compile(
    r"^(?:explain|describe|compare|summari[sz]e|discuss|tell me about|give me|list)\s+",
    re.IGNORECASE,
)


def topic_of(question: str) -> str:
    """A short noun phrase naming what the question is about."""
    first = re.split(r"(?<=[.?!])\s|\n", question.strip(), maxsplit=1)[0]
    first = _TIMES.sub(" × ", first)  # "1500 * 365" is arithmetic, not markup
    first = re.sub(r"[<>*#`_\[\]{}|\"]", "", first).strip(" ?.!:;,")
    if not first:
        return "the question"
    if _WHAT.match(first):
        phrase = _WHAT.sub("", first, count=1)
    elif _WH_AUX.match(first):
        phrase = _WH_AUX.sub(lambda m: m.group(1).lower() + " ", first, count=1)
    elif _IMPERATIVE.match(first):
        phrase = _IMPERATIVE.sub("", first, count=1)
    else:
        words = first.split()
        short = " ".join(words[:TOPIC_WORDS]) + (" ..." if len(words) > TOPIC_WORDS else "")
        return f"the question '{short}'"
    words = phrase.split()
    if len(words) > TOPIC_WORDS:
        # Cut, it ends on a word that carries meaning: "... PostgreSQL", never "... for a".
        words = words[:TOPIC_WORDS]
        while len(words) > 1 and words[-1].lower() in _FUNCTION_WORDS:
            words.pop()
    return " ".join(words) if words else "the question"


# Words a phrase cut short must not end on.
_FUNCTION_WORDS_TEXT = """
a an the and or but nor of for to in on at by with from into onto over under about as than
that which who whom whose is are was were be been being do does did can could should would
will shall may might must my your our their its his her this these those
"""
_FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())


@dataclass(frozen=True)
class Assessment:
    rating: int
    gaps: tuple[str, ...]
    words: int

    @property
    def lead(self) -> str:
        return _LEADS.get(self.rating, "Strong")


def assess(answer: str, question: str = "") -> Assessment:
    """Rate an answer 1-5 from its text alone (the question's own words do not count)."""
    text = answer.replace(SIMULATED_MARK, " ")
    topic = topic_of(question) if question else ""
    if topic and topic != "the question":
        text = re.sub(re.escape(topic), " ", text, flags=re.IGNORECASE)
    words = len(text.split())
    present = {
        "example": bool(_EXAMPLE.search(text)),
        "reason": bool(_REASON.search(text)),
        "depth": words >= LONG_ENOUGH_WORDS,
        "structure": len(_LIST_ITEM.findall(text)) >= MIN_LIST_ITEMS,
        "caveat": bool(_CAVEAT.search(text)),
    }
    gaps = tuple(gap for gap in GAPS if not present[gap])
    rating = min(5, 1 + sum(present.values()))
    return Assessment(rating=rating, gaps=gaps, words=words)


def critique(assessment: Assessment, max_gaps: int | None = None) -> str:
    """A critique that names what to add, in sentences a reviewer would write."""
    if assessment.rating >= 5 or not assessment.gaps:
        return PRAISE
    gaps = assessment.gaps[:max_gaps] if max_gaps else assessment.gaps
    return f"{assessment.lead}: {joined([REQUESTS[g] for g in gaps])}."


def joined(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def ranking_reason(assessment: Assessment) -> str:
    if assessment.rating >= 5 or not assessment.gaps:
        return "thorough, reasoned, with an example and a caveat"
    return f"{assessment.lead.lower()}; " + ", ".join(SHORT_GAPS[g] for g in assessment.gaps[:2])


def requested_gaps(critiques: list[str]) -> list[str]:
    """The gaps the critiques ask to fill, in priority order."""
    return [gap for gap in GAPS if any(_REQUESTED[gap].search(text) for text in critiques)]
