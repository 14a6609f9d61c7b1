"""Reading a reviewer's text: ranking, 1-5 ratings and a critique per anonymous answer.

Real reviews come in many shapes (markdown bold and headers, "1. Response B (4/5) -
reason", "Rating: 4/5", "4.5/5", "4 out of 5", "Score: 3", "8/10", tables, bullets,
lower-case labels, no final section at all). The rules:

- Quotations are never the reviewer's own words. Lines inside code fences, block quotes
  or echoed <response> frames are skipped everywhere (a fence or frame that never closes
  hides the rest of the review: better lose a review than let quoted text rank answers).
  Text between double quotes or backticks on a line still reads as part of a critique,
  but can neither name a label, nor carry a rating, nor start a sentence. A review
  wrapped whole in one code fence is unwrapped first.
- The ranking comes from the reviewer's own FINAL RANKING section: the last such heading
  outside quotations that a list naming a shown label follows within a few lines. A
  plain "Ranking:" heading is used only when no FINAL RANKING heading qualifies. The
  list is numbered, bulleted, one label a line, or a chain on one line ("Response C >
  Response A, Response B"); it ends at the first prose after it. A line ranks its first
  label; repeats are ignored.
- Ratings come from the ranking lines; where a line has none, from the reviewer's
  paragraph about that answer (its first rating). With no section, the rated answers
  give the ranking (best first). With a ranking and no ratings at all, ratings are
  inferred from position (best 4, worst 2) and marked inferred. A 0-10 score is halved.
- A paragraph is about one answer when it opens with that answer's label: a heading
  ("### Response A", "**Response A**" or "Response A" alone on a line) holds until the
  next heading; a label opening a line ("**Response A** (4/5): ...", "- Response A: ...",
  a table row) holds until a blank line; a sentence that opens with a label ("Response B
  is good.") goes to every label it names. Other sentences go to the answer whose
  paragraph they are in; outside every paragraph, a sentence that names a label only in
  passing ("my preference is given to Response B") is no critique. Hard-wrapped lines
  are joined.
- Only labels that were shown to this reviewer count; anything said about another label
  (the reviewer's own answer, a label that does not exist) is dropped with its paragraph,
  and a sentence that names such a label is dropped wherever it stands.
- A critique says something: with its labels and ratings taken out, a word remains. A
  line that only lists labels, or a bare score, is not a critique.

Every pattern here is linear or bounded: reviews are untrusted text parsed inside the
workflow, so no input may make parsing slow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import chain, pairwise

from pydantic import BaseModel, Field

from council.labels import LABEL_PREFIX, labels_shown_to
from council.limits import MAX_CRITIQUE_CHARS
from council.prompts import RANKING_HEADER
from council.stages import Ending, Stage2Result
from council.structured import JSON_OBJECT, TEXT, review_verdicts

INFERRED_BEST = 4.0
INFERRED_WORST = 2.0
# Words a critique needs besides labels and ratings (none: a list of labels, not a critique).
MIN_CRITIQUE_WORDS = 1
# Lines (of any kind) allowed between a ranking heading and its first ranked label.
MAX_RANKING_PREAMBLE = 6

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^\s*>")
_FRAME_OPEN = re.compile(r"\s*<\s*response\b[^>\n]*>", re.IGNORECASE)  # at a line start
_FRAME_CLOSE = re.compile(r"<\s*/\s*response\s*>", re.IGNORECASE)
_QUOTED = re.compile(r'"[^"\n]*"|“[^“”\n]*”|`[^`\n]*`')
_HEADING = re.compile(
    r"^[\s#*_\-\d.)]*(final\s+)?rankings?\b(?:\s{0,3}\([^()\n]{0,60}\))?[\s*_]*(?::|-|–|—|$)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"\bresponse[\s\-_]{1,3}([a-z])\b", re.IGNORECASE)
# A label at the start of a line or sentence, after any list marker or markup.
_LEAD = re.compile(r"^[\s#*_|+•\-\d.)]*response[\s\-_]{1,3}([a-z])\b", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*+•])\s+")
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}\s?[.):]|#\d{1,2}\b|[-*+•]\s)")
_MD_HEADING = re.compile(r"^\s*#{1,6}\s")
_BOLD_LINE = re.compile(r"^\s*\*\*[^*\n]+\*\*:?\s*$")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
# One rating, wherever it is: "4/5", "4.5/5", "8/10", "4 out of 5", "Rating: 4", "Score: 3".
_RATING = re.compile(
    r"(?<![\w.])(?P<slash>\d{1,2}(?:\.\d{1,2})?)\s?/\s?(?P<scale>5|10)(?!\d|/|\.\d)"
    r"|(?<![\w.])(?P<words>\d(?:\.\d{1,2})?)\s{1,3}out\s{1,3}of\s{1,3}5\b"
    r"|\b(?:rating|rated|score|scored)\s?(?:of|:|=|-)?\s?(?P<bare>\d(?:\.\d{1,2})?)(?!\d|/|\.\d)",
    re.IGNORECASE,
)
# The same, with its wording and brackets, to cut out of a critique.
_RATING_TEXT = re.compile(
    # The lookahead only skips, fast, the positions where no alternative can start.
    r"(?=[(\[\s\drs])(?:"
    r"[(\[]?\s?(?:(?:rating|rated|score|scored)\s?(?:of|:|=|-)?\s?)?\d{1,2}(?:\.\d{1,2})?"
    r"\s?(?:/\s?(?:5|10)|\s{1,3}out\s{1,3}of\s{1,3}5)\s?[)\]]?"
    r"|\b(?:rating|score)\s?[:=]\s?\d(?:\.\d{1,2})?\b)",
    re.IGNORECASE,
)
_CHAIN_WORDS = re.compile(r"\b(?:then|and|followed\s+by)\b|\d{1,2}[.)]", re.IGNORECASE)
_HEADER_FOLLOWERS = ":(|*[-–—"
_DIGIT = re.compile(r"\d")  # every rating text has one
_RATING_LETTERS = frozenset("ratingedscoreoutof")  # the letters a rating text can have


def _without_ratings(text: str) -> str:
    return _RATING_TEXT.sub(" ", text) if _DIGIT.search(text) else text


# A line of the review: its text, and the same text with quoted spans blanked out
# (same length, so that positions in one are positions in the other).
Line = tuple[str, str]


class ParsedReview(BaseModel):
    ranking: list[str] = Field(default_factory=list)
    ratings: dict[str, float] = Field(default_factory=dict)
    ratings_inferred: bool = False
    critiques: dict[str, str] = Field(default_factory=dict)
    found_final_section: bool = False


def _label(letter: str, shown: set[str]) -> str | None:
    label = f"{LABEL_PREFIX}{letter.upper()}"
    return label if label in shown else None


def _blank_quote(match: re.Match[str]) -> str:
    span = match.group(0)
    inner = span[1:-1].strip(" *")
    if _LABEL.fullmatch(inner) or _RATING.fullmatch(inner):
        return span  # '"Response A"' or '`4/5`' is the reviewer's own wording
    return span[0] + " " * (len(span) - 2) + span[-1]


def _unwrap(text: str) -> str:
    """A review wrapped whole in one code fence is the reviewer's text, not a quotation."""
    lines = text.strip().splitlines()
    if len(lines) >= 2 and _FENCE.match(lines[0]) and lines[-1].strip() in ("```", "~~~"):
        return "\n".join(lines[1:-1])
    return text


def _own_lines(text: str) -> list[Line | None]:
    """The review's lines, with quotations replaced by None."""
    lines: list[Line | None] = []
    fenced = framed = False
    for line in _unwrap(text).splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(None)
        elif fenced:
            lines.append(None)
        elif framed:
            framed = not _FRAME_CLOSE.search(line)
            lines.append(None)
        elif _QUOTE.match(line):
            lines.append(None)
        elif _FRAME_OPEN.match(line):
            framed = not _FRAME_CLOSE.search(line)
            lines.append(None)
        else:
            lines.append((line, _QUOTED.sub(_blank_quote, line)))
    return lines


def _rating(text: str) -> float | None:
    """The first 1-5 rating in the text (a 0-10 score is halved; 0 counts as 1)."""
    for match in _RATING.finditer(text.replace("**", "")):
        if match.group("slash"):
            value = float(match.group("slash")) * 5 / int(match.group("scale"))
        else:
            value = float(match.group("words") or match.group("bare"))
        if 0 <= value <= 5:
            return max(1.0, value)
    return None


def _clean(text: str) -> str:
    text = _without_ratings(text.replace("**", "").replace("|", " "))
    text = re.sub(r"\s+", " ", text)
    # What a cut rating leaves behind: "earns : it", "numbers .", "D: .", "well. ."
    text = re.sub(r"(?<=[.!?\"”])(?:\s[.,;:])+", "", text)
    text = re.sub(r"\s+(?=[.,;:!?])", "", text)
    text = re.sub(r"[:;,]+(?=[.!?])", "", text)
    text = text.lstrip(" #-–—:;,.)]").rstrip(" -–—:;,([")
    return text[:MAX_CRITIQUE_CHARS].strip()


# --- the ranking section ---------------------------------------------------------------


def _is_chain(masked: str, mentions: list[re.Match[str]]) -> bool:
    """A one-line ranking such as "Response C > Response A, Response B": only separators
    (and ratings, numbers, "then") stand between the labels."""
    if len(mentions) < 2:
        return False
    for before, after in pairwise(mentions):
        gap = _CHAIN_WORDS.sub(" ", _RATING_TEXT.sub(" ", masked[before.end() : after.start()]))
        if any(ch.isalnum() for ch in gap):
            return False
    return True


def _ranking_entries(
    section: Iterable[tuple[int, Line | None]], shown: set[str]
) -> tuple[list[tuple[str, float | None, str]], int | None]:
    """(label, rating, reason) per ranked answer, best first; and the line after the list."""
    entries: list[tuple[str, float | None, str]] = []
    seen: set[str] = set()
    started = gap = False
    preamble = 0

    def add(label: str | None, rating: float | None, reason: str) -> None:
        if label and label not in seen:
            seen.add(label)
            entries.append((label, rating, reason))

    for index, line in section:
        if not entries:
            preamble += 1
            if preamble > MAX_RANKING_PREAMBLE + 1:
                return entries, index  # a heading that no ranking follows
        if line is None:
            continue
        raw, masked = line
        if not masked.strip():
            gap = started
            continue
        mentions = list(_LABEL.finditer(masked))
        if started and not _LIST_ITEM.match(masked) and (gap or not mentions):
            return entries, index  # prose after the list
        if not mentions:
            continue
        started = True
        ends = [m.start() for m in mentions[1:]] + [len(masked)]
        if _is_chain(masked, mentions):
            for mention, end in zip(mentions, ends, strict=True):
                add(_label(mention.group(1), shown), _rating(masked[mention.end() : end]), "")
        else:
            # The line's first label is the one it ranks; later ones are its reason.
            first = mentions[0]
            add(
                _label(first.group(1), shown),
                _rating(masked[first.end() : ends[0]]),
                _clean(raw[first.end() :]),
            )
    return entries, None


def _final_section(
    lines: list[Line | None], shown: set[str]
) -> tuple[int, int, list[tuple[str, float | None, str]]] | None:
    """The reviewer's own ranking: (first line, line after it, entries), or None."""
    matched = [(i, _HEADING.match(line[1])) for i, line in enumerate(lines) if line is not None]
    headings = [(i, m) for i, m in matched if m is not None]
    final = [h for h in headings if h[1].group(1)]
    plain = [h for h in headings if not h[1].group(1)]
    for start, match in [*reversed(final), *reversed(plain)]:
        raw, masked = lines[start]  # type: ignore[misc]
        rest: Line = (raw[match.end() :], masked[match.end() :])
        section = chain([(start, rest)], ((i, lines[i]) for i in range(start + 1, len(lines))))
        entries, end = _ranking_entries(section, shown)
        if entries:
            return start, len(lines) if end is None else end, entries
    return None


# --- paragraphs about each answer ------------------------------------------------------

_SECTION, _LINE, _SUBJECT = "section", "line", "subject"


def _lead(masked: str) -> tuple[str, int, bool] | None:
    """(letter, end of the label, header-like) when the text opens with a label.

    Header-like: marked up ("**Response A**", "### Response A", a table cell) or followed by
    punctuation or a rating ("Response A: ...", "response b (4/5)"); a lower-case letter
    counts only there. Otherwise the label is a sentence's subject ("Response A lacks ...").
    """
    match = _LEAD.match(masked)
    if not match:
        return None
    letter = match.group(1)
    prefix = masked[: match.start(1)]
    rest = masked[match.end() :].lstrip()
    header = (
        any(mark in prefix for mark in "*#|")
        or not rest
        or rest[0] in _HEADER_FOLLOWERS
        or rest[0].isdigit()
    )
    if not header and not letter.isupper():
        return None
    return letter, match.end(), header


def _standalone(masked: str, rest: str) -> bool:
    """A heading line: "### Response A ...", "**Response A (4/5)**", "Response A" alone."""
    if _MD_HEADING.match(masked) or _BOLD_LINE.match(masked):
        return True
    if any(ch.isalpha() and ch.lower() not in _RATING_LETTERS for ch in rest):
        return False  # a letter no rating text has: words, not a heading (the fast answer)
    return not any(ch.isalnum() for ch in _without_ratings(rest))


def _sentences(raw: str, masked: str) -> list[Line]:
    cuts = [0] + [m.end() for m in _SENTENCE_BREAK.finditer(masked)] + [len(masked)]
    return [(raw[a:b], masked[a:b]) for a, b in pairwise(cuts) if masked[a:b].strip()]


def _named(masked: str, shown: set[str]) -> list[tuple[str, str]]:
    """(label, the text from its mention to the next label) for each shown label named."""
    mentions = [m for m in _LABEL.finditer(masked) if m.group(1).isupper()]
    if not mentions:
        return []
    ends = [m.start() for m in mentions[1:]] + [len(masked)]
    named: dict[str, str] = {}
    for mention, end in zip(mentions, ends, strict=True):
        label = _label(mention.group(1), shown)
        if label and label not in named:
            named[label] = masked[mention.end() : end]
    return list(named.items())


def _names_unshown(text: str, shown: set[str]) -> bool:
    """The text names a label this reviewer was not shown (its own answer's, or none's)."""
    return any(_label(m.group(1), shown) is None for m in _LABEL.finditer(text))


_WORD = re.compile(r"[^\W\d_]{2,}")


def substantive(critique: str) -> bool:
    """A critique says something: a word besides the labels and ratings, so that a bare
    list of labels ("1. Response C, Response B") or a score ("4.0") is not one."""
    words = _WORD.findall(_LABEL.sub(" ", _without_ratings(critique)))
    return len(words) >= MIN_CRITIQUE_WORDS


# Markers among the lines (splitlines never yields "\n" or "\r" inside a line).
_BREAK: Line = ("", "\n")  # a blank line
_RESET: Line = ("", "\r")  # the ranking section, skipped


def _opens_block(masked: str) -> bool:
    return bool(
        _LIST_MARKER.match(masked)
        or _MD_HEADING.match(masked)
        or _BOLD_LINE.match(masked)
        or masked.lstrip().startswith("|")
        or _HEADING.match(masked)
        or _lead(masked)
    )


def _is_heading(masked: str) -> bool:
    lead = _lead(masked)
    if lead and lead[2]:
        return _standalone(masked, masked[lead[1] :])
    return bool(_MD_HEADING.match(masked) or _BOLD_LINE.match(masked))


def _logical_lines(lines: list[Line | None], skip: range) -> list[Line]:
    """The lines to read as prose: a hard-wrapped sentence is joined back into one line."""
    units: list[Line] = []
    parts: list[Line] = []  # the physical lines of the unit being read
    joinable = False

    def flush() -> None:
        if parts:
            units.append(
                (" ".join(r.strip() for r, _ in parts), " ".join(m.strip() for _, m in parts))
            )
            parts.clear()

    for index, line in enumerate(lines):
        if index in skip or line is None or not line[1].strip():
            flush()
            joinable = False
            if index in skip:
                if not units or units[-1] is not _RESET:
                    units.append(_RESET)
            elif line is not None:
                units.append(_BREAK)
            continue
        if not joinable or _opens_block(line[1]):
            flush()
            joinable = not _is_heading(line[1])
        parts.append(line)
    flush()
    return units


def _paragraphs(lines: list[Line | None], shown: set[str], skip: range) -> dict[str, list[Line]]:
    """Label -> the reviewer's own words about that answer, as (text, masked text) parts
    (a passing mention of a label is not about it)."""
    about: dict[str, list[Line]] = {}
    current: str | None = None
    level: str | None = None

    def give(label: str, raw: str, masked: str) -> None:
        about.setdefault(label, []).append((raw, masked))

    for line in _logical_lines(lines, skip):
        if line is _RESET:
            current = level = None
            continue
        if line is _BREAK:
            if level != _SECTION:
                current = level = None
            continue
        raw, masked = line
        marker = _LIST_MARKER.match(masked)
        if marker:
            raw, masked = raw[marker.end() :], masked[marker.end() :]
        lead = _lead(masked)
        opened = bool(lead and lead[2])
        if lead and opened:
            letter, end, _ = lead
            current = _label(letter, shown)  # None: a paragraph about a label not shown
            level = _SECTION if _standalone(masked, masked[end:]) else _LINE
            rest_raw, rest_masked = raw[end:], masked[end:]
            if re.match(
                r"[\s*_]*[a-z]", rest_masked
            ):  # "**Response A** lacks ...": keep the subject
                rest_raw = f"{LABEL_PREFIX}{letter.upper()} {rest_raw.lstrip(' *_')}"
                rest_masked = f"{LABEL_PREFIX}{letter.upper()} {rest_masked.lstrip(' *_')}"
            raw, masked = rest_raw, rest_masked
        elif _MD_HEADING.match(masked) or (_BOLD_LINE.match(masked) and _rating(masked) is None):
            current = level = None  # a heading about something else ("## Summary")
            continue
        for number, (s_raw, s_masked) in enumerate(_sentences(raw, masked)):
            if opened and number == 0:
                if current:
                    give(current, s_raw, s_masked)
                continue
            named = _named(s_masked, shown)
            subject = _lead(s_masked)
            if subject:
                for label, segment in named:
                    give(label, s_raw, segment)
                if level in (None, _SUBJECT):
                    letters = {
                        m.group(1).upper()
                        for m in _LABEL.finditer(s_masked)
                        if m.group(1).isupper()
                    }
                    single = len(letters) == 1
                    current = _label(subject[0], shown) if single else None
                    level = _SUBJECT if single else None
            elif level is not None and current:
                give(current, s_raw, s_masked)
    return about


def _inferred(ranking: Sequence[str]) -> dict[str, float]:
    if len(ranking) == 1:
        return {ranking[0]: (INFERRED_BEST + INFERRED_WORST) / 2}
    step = (INFERRED_BEST - INFERRED_WORST) / (len(ranking) - 1)
    return {label: round(INFERRED_BEST - i * step, 2) for i, label in enumerate(ranking)}


def _critique(parts: Sequence[str], shown: set[str]) -> str:
    """A critique from the reviewer's words about one answer: without the sentences that
    name a label it was not shown, and only when it says something."""
    critique = _clean(" ".join(part for part in parts if not _names_unshown(part, shown)))
    return critique if substantive(critique) else ""


def parse_review(text: str | None, shown_labels: Iterable[str]) -> ParsedReview:
    """Parse one review. Never raises; returns only labels in `shown_labels`."""
    shown = set(shown_labels)
    lines = _own_lines(text or "")
    found = _final_section(lines, shown)
    start, end, entries = found if found else (0, 0, [])
    about = _paragraphs(lines, shown, range(start, end))

    ratings = {label: rating for label, rating, _ in entries if rating is not None}
    for label, parts in about.items():
        if label not in ratings:
            rating = _rating(" ".join(masked for _, masked in parts))
            if rating is not None:
                ratings[label] = rating

    if entries:
        ranking = [label for label, _, _ in entries]
    else:
        ranking = sorted(ratings, key=lambda label: -ratings[label])
    inferred = bool(ranking) and not ratings
    if inferred:
        ratings = _inferred(ranking)

    critiques: dict[str, str] = {}
    for label, parts in about.items():
        critique = _critique([raw for raw, _ in parts], shown)
        if critique:
            critiques[label] = critique
    for label, _, reason in entries:
        if label not in critiques:
            critique = _critique([reason], shown)
            if critique:
                critiques[label] = critique

    return ParsedReview(
        ranking=ranking,
        ratings=ratings,
        ratings_inferred=inferred,
        critiques=critiques,
        found_final_section=found is not None,
    )


# A review given as JSON, as council.structured reads it: ratings, critiques, ranking.
Verdicts = tuple[dict[str, float], dict[str, str], list[str]]


def _json_review(verdicts: Verdicts, shown: list[str]) -> ParsedReview:
    """A review given as JSON (council.structured's review schema), read by the same rules
    as text: only shown labels, a critique only when it says something. The ranking is the
    one given, completed by the ratings of the labels it leaves out."""
    ratings, said, given = verdicts
    critiques = {
        label: critique
        for label, words in said.items()
        if (critique := _critique([words], set(shown)))
    }
    rest = sorted((label for label in ratings if label not in given), key=lambda x: -ratings[x])
    return ParsedReview(
        ranking=[*given, *rest], ratings=ratings, critiques=critiques, found_final_section=True
    )


def _written_out(verdicts: Verdicts, shown: list[str]) -> str:
    """A review given as JSON as a person reads it: written out as the text form asks for
    it (each answer's rating and critique, then the final ranking)."""
    ratings, critiques, ranking = verdicts
    parts = []
    for label in shown:
        if label not in ratings and label not in critiques:
            continue
        rating = f" Rating: {ratings[label]:g}/5" if label in ratings else ""
        critique = critiques.get(label, "").strip()
        parts.append(f"**{label}**{rating}" + (f"\n\n{critique}" if critique else ""))
    if ranking:
        lines = "\n".join(f"{place}. {label}" for place, label in enumerate(ranking, start=1))
        parts.append(f"{RANKING_HEADER}\n{lines}")
    return "\n\n".join(parts)


def read_review(
    reviewer: str,
    text: str,
    label_to_model: dict[str, str],
    presented_order: Sequence[str] = (),
    asked: str | None = None,
    ending: Ending | None = None,
) -> tuple[Stage2Result, ParsedReview]:
    """A reviewer's reply as the record keeps it (its critiques too, and the JSON form
    written out), and the parse. A reply in the review's JSON form is read as JSON
    (read_as: how it was asked for, or json_object); any other as text."""
    shown = labels_shown_to(reviewer, label_to_model)
    labels = sorted(set(shown))
    verdicts = review_verdicts(text, labels)  # read once: the parse and the written-out form
    if verdicts is None:
        parsed, read_as, written_out = parse_review(text, shown), TEXT, None
    else:
        parsed, read_as = _json_review(verdicts, labels), asked or JSON_OBJECT
        written_out = _written_out(verdicts, labels)
    result = Stage2Result(
        model=reviewer,
        ranking=text,
        parsed_ranking=parsed.ranking,
        ratings=parsed.ratings,
        ratings_inferred=parsed.ratings_inferred,
        presented_order=list(presented_order),
        read_as=read_as,
        critiques=parsed.critiques,
        written_out=written_out,
        **(ending.model_dump() if ending else {}),
    )
    return result, parsed
