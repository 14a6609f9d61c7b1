"""Reading a reviewer's text: ranking, 1-5 ratings and a critique per anonymous answer.

Real reviews come in many shapes (markdown bold and headers, "1. Response B (4/5) -
reason", "Rating: 4/5", "4.5/5", "4 out of 5", bullets, lower-case labels, no final
section at all). The rules, in order:

- Lines inside code fences, block quotes or echoed <response> frames are quotations,
  never the reviewer's own words: they are skipped everywhere.
- The ranking comes from the reviewer's own FINAL RANKING section: the last such heading
  outside quotations that is followed by a shown label.
- Ratings come from the ranking lines; where a line has none, from the reviewer's
  paragraph about that answer. With no section, ratings found in the paragraphs give
  the ranking (best first). With a ranking and no ratings at all, ratings are inferred
  from position (best 4, worst 2) and marked inferred.
- Only labels that were shown to this reviewer count; anything else is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from council.labels import LABEL_PREFIX

MAX_CRITIQUE_CHARS = 1_500
INFERRED_BEST = 4.0
INFERRED_WORST = 2.0

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^\s*>")
_FRAME_OPEN = re.compile(r"<\s*response\b[^>]*>", re.IGNORECASE)
_FRAME_CLOSE = re.compile(r"<\s*/\s*response\s*>", re.IGNORECASE)
_HEADING = re.compile(r"^[\s#*_>|-]*final\s+rankings?\b[\s*_:|-]*", re.IGNORECASE)
# "Response B" anywhere; a lower-case letter only where a label is expected (see below).
_LABEL_ANY_CASE = re.compile(r"\bresponse\s*[-_:]?\s*([a-z])\b", re.IGNORECASE)
_LABEL_STRICT = re.compile(r"\b[Rr]esponse\s+([A-Z])\b")
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}\s*[.):]|#\d{1,2}\b|[-*+•]\s)")
_RATING_PATTERNS = (
    re.compile(r"(\d+(?:\.\d+)?)\s*/\s*5(?![\d.]*\d)"),
    re.compile(r"(\d+(?:\.\d+)?)\s+out\s+of\s+5\b", re.IGNORECASE),
    re.compile(r"\b(?:rating|rated|score|scored)\s*(?:of|:|=|-)?\s*(\d+(?:\.\d+)?)\b", re.IGNORECASE),
)
# A paragraph is about one answer when its first words name it: "**Response A** ...",
# "### Response A", "- Response A:", "Response A (3/5): ...".
_BLOCK_START = re.compile(r"^[\s#*_>|\-+•\d.)]*\**\s*response\s*[-_:]?\s*([a-z])\b", re.IGNORECASE)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_MARKUP = re.compile(r"[*_#`|]+")
_RATING_TEXT = re.compile(
    r"[(\[]?\s*(?:(?:rating|rated|score|scored)\s*(?:of|:|=|-)?\s*)?\d+(?:\.\d+)?"
    r"\s*(?:/\s*5|out\s+of\s+5)\s*[)\]]?|\b(?:rating|score)\s*[:=]\s*\d+(?:\.\d+)?",
    re.IGNORECASE,
)


class ParsedReview(BaseModel):
    ranking: list[str] = Field(default_factory=list)
    ratings: dict[str, float] = Field(default_factory=dict)
    ratings_inferred: bool = False
    critiques: dict[str, str] = Field(default_factory=dict)
    found_final_section: bool = False


def _own_lines(text: str) -> list[str | None]:
    """The review's lines, with quotations replaced by None."""
    lines: list[str | None] = []
    fenced = framed = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(None)
            continue
        if framed:
            if _FRAME_CLOSE.search(line):
                framed = False
            lines.append(None)
            continue
        if _FRAME_OPEN.search(line) and not _FRAME_CLOSE.search(line):
            framed = True
            lines.append(None)
            continue
        lines.append(None if fenced or _QUOTE.match(line) else line)
    return lines


def _label(letter: str, shown: set[str]) -> str | None:
    label = f"{LABEL_PREFIX}{letter.upper()}"
    return label if label in shown else None


def _rating(text: str) -> float | None:
    for pattern in _RATING_PATTERNS:
        for match in pattern.finditer(text):
            try:
                value = float(match.group(1))
            except ValueError:
                continue
            if 0 <= value <= 5:
                return max(1.0, value)
    return None


def _clean(text: str) -> str:
    text = _RATING_TEXT.sub(" ", _MARKUP.sub("", text))
    return re.sub(r"\s+", " ", text).strip(" -–—:;,.") [:MAX_CRITIQUE_CHARS].strip()


def _reason(line: str, label_end: int) -> str:
    """The one-line reason after the label and rating on a ranking line."""
    rest = line[label_end:]
    rest = re.sub(r"^[\s*_]*\(?[^)\n]*?(?:/\s*5|out of 5)\)?", "", rest, count=1)
    rest = re.sub(r"^[\s*_:)\]]*(?:rating|score)?\s*[:=]?\s*\d*(?:\.\d+)?\s*(?:/\s*5)?", "", rest, flags=re.IGNORECASE)
    return _clean(rest)


def _final_section(lines: list[str | None], shown: set[str]) -> tuple[int, list[str]] | None:
    """Where the reviewer's own final ranking starts, and its lines; None if there is none."""
    headings = [i for i, line in enumerate(lines) if line is not None and _HEADING.match(line)]
    for start in reversed(headings):
        first = lines[start] or ""
        section = [first[_HEADING.match(first).end() :]]  # type: ignore[union-attr]
        section += [line for line in lines[start + 1 :] if line is not None]
        if any(_label(m.group(1), shown) for s in section for m in _LABEL_ANY_CASE.finditer(s)):
            return start, section
    return None


def _ranking_entries(section: list[str], shown: set[str]) -> list[tuple[str, float | None, str]]:
    """(label, rating, reason) per ranked answer, best first."""
    entries: list[tuple[str, float | None, str]] = []
    seen: set[str] = set()
    started = False
    for line in section:
        if not line.strip():
            continue
        matches = [(m, _label(m.group(1), shown)) for m in _LABEL_ANY_CASE.finditer(line)]
        matches = [(m, label) for m, label in matches if label]
        if not matches:
            # Prose after the list ends the section.
            if started and not _LIST_ITEM.match(line):
                break
            continue
        chained = len(matches) > 1 and re.search(r">|,|→|\bthen\b", line)
        if chained and not _LIST_ITEM.match(line):
            # "Response B > Response A > Response C" on one line.
            for m, label in matches:
                if label not in seen:
                    seen.add(label)
                    entries.append((label, None, ""))
            started = True
            continue
        match, label = matches[0]
        started = True
        if label in seen:
            continue
        seen.add(label)
        tail = line[match.end() :]
        next_label = _LABEL_ANY_CASE.search(tail)
        own_part = tail[: next_label.start()] if next_label else tail
        entries.append((label, _rating(own_part), _reason(line, match.end())))
    return entries


def _paragraphs(lines: list[str | None], shown: set[str]) -> dict[str, list[str]]:
    """Label -> the reviewer's own sentences about that answer.

    A sentence that opens with a label ("**Response A** ...", "### Response A",
    "Response B is good.") starts that answer's paragraph; the sentences after it belong
    to the same answer until another one opens. Before any such opening, a sentence goes
    to every label it names.
    """
    about: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        if line is None or not line.strip():
            continue
        if _HEADING.match(line):
            current = None
            continue
        for sentence in _SENTENCE_BREAK.split(line):
            start = _BLOCK_START.match(sentence)
            label = _label(start.group(1), shown) if start else None
            if label and (start.group(1).isupper() or "**" in sentence[: start.end() + 2]):
                current = label
                rest = sentence[start.end() :].lstrip("*_")
                # Keep the label where it is the subject ("Response A lacks examples.").
                about.setdefault(label, []).append(
                    f"{label}{rest}" if re.match(r"\s+[a-z]", rest) else rest
                )
            elif current:
                about[current].append(sentence)
            else:
                for m in _LABEL_STRICT.finditer(sentence):
                    named = _label(m.group(1), shown)
                    if named:
                        about.setdefault(named, []).append(sentence)
    return about


def _inferred(ranking: Sequence[str]) -> dict[str, float]:
    if len(ranking) == 1:
        return {ranking[0]: (INFERRED_BEST + INFERRED_WORST) / 2}
    step = (INFERRED_BEST - INFERRED_WORST) / (len(ranking) - 1)
    return {label: round(INFERRED_BEST - i * step, 2) for i, label in enumerate(ranking)}


def parse_review(text: str | None, shown_labels: Iterable[str]) -> ParsedReview:
    """Parse one review. Never raises; returns only labels in `shown_labels`."""
    shown = set(shown_labels)
    lines = _own_lines(text or "")
    found = _final_section(lines, shown)
    entries = _ranking_entries(found[1], shown) if found else []
    about = _paragraphs(lines[: found[0]] if found else lines, shown)

    ratings = {label: rating for label, rating, _ in entries if rating is not None}
    for label, paragraph in about.items():
        if label not in ratings:
            rating = _rating(" ".join(paragraph))
            if rating is not None:
                ratings[label] = rating

    ranking = [label for label, _, _ in entries]
    if not ranking and ratings:
        ranking = sorted(ratings, key=lambda label: -ratings[label])
    inferred = bool(ranking) and not ratings
    if inferred:
        ratings = _inferred(ranking)

    critiques: dict[str, str] = {}
    for label, paragraph in about.items():
        critique = _clean(" ".join(paragraph))
        if critique:
            critiques[label] = critique
    for label, _, reason in entries:
        if label not in critiques and reason:
            critiques[label] = reason

    return ParsedReview(
        ranking=ranking,
        ratings=ratings,
        ratings_inferred=inferred,
        critiques=critiques,
        found_final_section=found is not None,
    )
