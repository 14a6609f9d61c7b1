"""Reading a model's final answer out of its reply, and matching it against the expected one.

Pure functions without I/O: the harness scores with them, the simulator's reviewers check
answers with them, and the tests call them directly.

Where the answer is looked for, most trusted first:

1. a marked final answer: the last "Final answer: X", "The answer is X", "Answer = X"
   (bold or not) that holds an answer of the right kind;
2. the last ``\\boxed{X}``;
3. the last ``**X**`` in bold that holds an answer of the right kind;
4. numbers: the last number in the reply; choices: the last line that is only a letter,
   else a "(B)" or "B)" in the last line; text: the last non-empty line.

Numbers: "1,250", "-155", "−155", "3/4", "\\frac{3}{4}", "12.5%", "$18.60". A percentage
keeps its value in percent ("25%" reads as 25). Two numbers match within a relative
tolerance of REL_TOL or an absolute one of ABS_TOL (either suffices).
Choices: one letter, "(B)", "B)", "B.", "option B". Text: compared after normalization
(case, accents, punctuation and the articles a/an/the do not count).

The value a council member's free answer states (`stated_value`, `stated_values`: whether
the members' first answers agree by value) is read from the marked places only (1-3), and
only when the marked text is wholly a number, one option letter, or yes or no.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["number", "choice", "text"]
KINDS: tuple[Kind, ...] = ("number", "choice", "text")
REL_TOL = 1e-4
ABS_TOL = 1e-6
DEFAULT_LETTERS = "ABCDEFGH"

_MARKER = re.compile(
    r"\b(?:final\s+answer|answer)\b[\s*_]*(?:is\b|:|=|-(?=\s))[\s*_]*", re.IGNORECASE
)
_BOLD = re.compile(r"\*\*(?!\s)(.+?)(?<!\s)\*\*|__(?!\s)(.+?)(?<!\s)__")
_BOXED = "\\boxed{"
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_NUMBER = re.compile(
    rf"(?<![\w./])(?P<sign>[-+\u2212]?)(?P<a>{_DIGITS})"
    rf"(?:\s*/\s*(?P<b>{_DIGITS}))?(?![\d])(?!\.\d)(?P<pct>\s?%)?"
)
_STRICT_NUMBER = re.compile(
    rf"\s*[$€£]?\s*(?P<sign>[-+\u2212]?)\s*[$€£]?(?P<a>{_DIGITS})"
    rf"(?:\s*/\s*(?P<b>{_DIGITS}))?\s*(?P<pct>%)?\s*"
)
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;!: ]|\$")
_ARTICLES = {"a", "an", "the"}


@dataclass(frozen=True)
class Answer:
    """An answer as read: its kind, its comparable value and how the report shows it."""

    kind: Kind
    value: float | str  # a number, an option letter, or normalized text
    shown: str

    def __str__(self) -> str:
        return self.shown


# ---- numbers ------------------------------------------------------------------------


def _clean_latex(text: str) -> str:
    text = _FRAC.sub(r"(\1)/(\2)", text)
    text = _TEXT_CMD.sub(r"\1", text)
    text = text.replace("\\%", "%").replace("{,}", ",")
    text = _LATEX_NOISE.sub(" ", text)
    # "(3)/(4)" from a \frac with plain numbers: drop the parentheses again.
    return re.sub(r"\((\s*[-\d.,]+\s*)\)", r"\1", text)


def _value(match: re.Match[str]) -> float | None:
    try:
        value = float(match.group("a").replace(",", ""))
        if match.group("b"):
            denominator = float(match.group("b").replace(",", ""))
            if denominator == 0:
                return None
            value /= denominator
    except ValueError:
        return None
    if match.group("sign") in ("-", "\u2212"):
        value = -value
    return value if math.isfinite(value) else None


def numbers_in(text: str) -> list[float]:
    """Every number in the text, in order."""
    values = (_value(m) for m in _NUMBER.finditer(_clean_latex(text)))
    return [v for v in values if v is not None]


def number_in(segment: str) -> float | None:
    """The answer in a short segment: the first number after the last "=" (if any)."""
    cleaned = _clean_latex(segment)
    tail = cleaned.rsplit("=", 1)[-1]
    found = numbers_in(tail) or numbers_in(cleaned)
    return found[0] if found else None


def parse_number(text: str) -> float | None:
    """A string that is one number and nothing else ("1,250", "3/4", "-2.5", "12%", "$4")."""
    match = _STRICT_NUMBER.fullmatch(_clean_latex(text))
    return _value(match) if match else None


def format_number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def numbers_match(
    expected: float, got: float, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL
) -> bool:
    return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)


# ---- choices ------------------------------------------------------------------------


def choice_letters(question: str) -> str:
    """The option letters a question offers ("(A) ... (B) ..." or lines "A) ..."), in order;
    DEFAULT_LETTERS when it offers fewer than two."""
    found = re.findall(r"\(([A-H])\)", question) + re.findall(
        r"^\s*([A-H])[).:]\s", question, re.MULTILINE
    )
    letters = "".join(sorted(set(found)))
    return letters if len(letters) >= 2 else DEFAULT_LETTERS


def choice_in(segment: str, letters: str = DEFAULT_LETTERS) -> str | None:
    """The option a short segment names: "(B)", "B)", "B.", "option B" or a lone capital."""
    allowed = re.escape(letters)
    cleaned = _TEXT_CMD.sub(r"\1", segment)
    paren = re.search(rf"\(\s*([{allowed}{allowed.lower()}])\s*\)", cleaned)
    if paren:
        return paren.group(1).upper()
    lone = re.search(rf"(?<![A-Za-z'’])([{allowed}])(?![A-Za-z'’])", cleaned)
    return lone.group(1) if lone else None


def parse_choice(text: str, letters: str = DEFAULT_LETTERS) -> str | None:
    """A string that is one option letter and nothing else ("B", "(b)", "B)")."""
    match = re.fullmatch(r"\s*\(?\s*([A-Za-z])\s*[).]?\s*", text)
    if not match or match.group(1).upper() not in letters:
        return None
    return match.group(1).upper()


# ---- text ---------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """Lower case, no accents, no punctuation, no articles, single spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    words = re.sub(r"[^\w\s]|_", " ", plain).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def text_in(segment: str) -> str | None:
    """A short segment as a text answer: markup, quotes and a final full stop removed."""
    cleaned = _TEXT_CMD.sub(r"\1", segment)
    cleaned = re.sub(r"\\boxed\s*\{|[*_`$]", "", cleaned).strip()
    cleaned = cleaned.strip(" \"'“”‘’{}").rstrip(".!").strip()
    return cleaned or None


# ---- where the final answer is ------------------------------------------------------


def _marked_segments(text: str) -> list[str]:
    """What follows each answer marker on its line (or on the next line), last first."""
    segments = []
    for match in _MARKER.finditer(text):
        rest = text[match.end() :]
        line, _, after = rest.partition("\n")
        if not line.strip():
            line = next((candidate for candidate in after.split("\n") if candidate.strip()), "")
        segments.append(line.strip())
    return segments[::-1]


def _boxed_segments(text: str) -> list[str]:
    """The contents of every \\boxed{...} (braces balanced), last first."""
    contents = []
    start = text.find(_BOXED)
    while start >= 0:
        depth, i = 1, start + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            contents.append(text[start + len(_BOXED) : i - 1])
        start = text.find(_BOXED, i if depth == 0 else start + 1)
    return contents[::-1]


def _bold_segments(text: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in _BOLD.finditer(text)][::-1]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def extract_number(text: str) -> float | None:
    for segments in (_marked_segments(text), _boxed_segments(text), _bold_segments(text)):
        for segment in segments:
            value = number_in(segment)
            if value is not None:
                return value
    found = numbers_in(text)
    return found[-1] if found else None


def extract_choice(text: str, letters: str = DEFAULT_LETTERS) -> str | None:
    for segments in (_marked_segments(text), _boxed_segments(text), _bold_segments(text)):
        for segment in segments:
            letter = choice_in(segment, letters)
            if letter is not None:
                return letter
    lines = _lines(text)
    for line in reversed(lines):
        letter = parse_choice(re.sub(r"[*_`]", "", line), letters)
        if letter is not None:
            return letter
    if lines:
        last = re.search(rf"\(([{re.escape(letters)}])\)|^([{re.escape(letters)}])\)", lines[-1])
        if last:
            return last.group(1) or last.group(2)
    return None


def extract_text(text: str) -> str | None:
    for segments in (_marked_segments(text), _boxed_segments(text), _bold_segments(text)):
        for segment in segments:
            found = text_in(segment)
            if found:
                return found
    lines = _lines(text)
    return text_in(lines[-1]) if lines else None


def extract(kind: Kind, text: str | None, letters: str = DEFAULT_LETTERS) -> Answer | None:
    """The final answer of the given kind in a reply, or None if there is none."""
    if not text:
        return None
    if kind == "number":
        number = extract_number(text)
        return None if number is None else Answer("number", number, format_number(number))
    if kind == "choice":
        letter = extract_choice(text, letters)
        return None if letter is None else Answer("choice", letter, letter)
    found = extract_text(text)
    if found is None or not normalize_text(found):
        return None
    return Answer("text", normalize_text(found), found)


def expected_answer(kind: Kind, answer: str, letters: str = DEFAULT_LETTERS) -> Answer:
    """A dataset's answer as an Answer; ValueError says why it is not one of its kind."""
    if kind == "number":
        number = parse_number(answer)
        if number is None:
            raise ValueError(f"{answer!r} is not a number")
        return Answer("number", number, format_number(number))
    if kind == "choice":
        letter = parse_choice(answer, letters)
        if letter is None:
            options = ", ".join(letters)
            raise ValueError(f"{answer!r} is not one option letter ({options})")
        return Answer("choice", letter, letter)
    normalized = normalize_text(answer)
    if not normalized:
        raise ValueError(f"{answer!r} has no words to compare")
    return Answer("text", normalized, answer.strip())


def infer_kind(answer: str) -> Kind:
    """number if the answer is one number, choice if it is one capital letter, else text."""
    if parse_number(answer) is not None:
        return "number"
    if re.fullmatch(r"\s*\(?[A-H][).]?\s*", answer):
        return "choice"
    return "text"


def matches(
    expected: Answer, got: Answer | None, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL
) -> bool:
    """Whether an answer read from a reply is the expected one."""
    if got is None or got.kind != expected.kind:
        return False
    if expected.kind == "number":
        return numbers_match(float(expected.value), float(got.value), rel_tol, abs_tol)
    return got.value == expected.value


# ---- the value a free answer states ---------------------------------------------------

YES_NO = ("yes", "no")
# A last line this short that holds one number states it ("So the ball costs 5 cents.").
SHORT_LINE_WORDS = 12


@dataclass(frozen=True)
class StatedValues:
    """The value each answer states, in order, and whether they are all the same."""

    values: tuple[Answer, ...]
    agree: bool


def stated_value(text: str | None) -> Answer | None:
    """The final value an answer to any question states, when it states one that can be
    compared: the first marked segment ("Final answer: X", then \\boxed{X}, then bold
    text; each last first) that is wholly a number, one option letter, or yes or no; else
    the one number of a short last line ("I get 6.", at most SHORT_LINE_WORDS words), as a
    reader takes it. None otherwise: the prose before the last line is never searched, since
    a figure said in passing is no answer, and neither is a last line of two numbers."""
    if not text:
        return None
    for segments in (_marked_segments(text), _boxed_segments(text), _bold_segments(text)):
        for segment in segments:
            found = _stated(segment)
            if found is not None:
                return found
    lines = _lines(text)
    last = lines[-1] if lines else ""
    numbers = numbers_in(last) if len(last.split()) <= SHORT_LINE_WORDS else []
    return Answer("number", numbers[0], format_number(numbers[0])) if len(numbers) == 1 else None


def stated_shown(text: str | None) -> str | None:
    """The value an answer states (stated_value), as text; None when it states none."""
    value = stated_value(text)
    return None if value is None else value.shown


def _stated(segment: str) -> Answer | None:
    cleaned = text_in(segment)
    if cleaned is None:
        return None
    # As written first (a \\frac keeps its braces), then without markup and quotes.
    number = parse_number(segment)
    number = number if number is not None else parse_number(cleaned)
    if number is not None:
        return Answer("number", number, format_number(number))
    letter = parse_choice(cleaned)
    if letter is not None:
        return Answer("choice", letter, letter)
    word = normalize_text(cleaned)
    return Answer("text", word, word) if word in YES_NO else None


def stated_values(texts: Sequence[str]) -> StatedValues | None:
    """Whether the answers agree by the values they state: None when there are fewer than
    two, or one of them states none (they cannot be compared by value); else each value
    and whether all are the same (numbers within REL_TOL or ABS_TOL; values of different
    kinds differ)."""
    values = [stated_value(text) for text in texts]
    if len(values) < 2 or any(value is None for value in values):
        return None
    read = tuple(value for value in values if value is not None)
    first = read[0]
    return StatedValues(read, all(matches(first, value) for value in read[1:]))
