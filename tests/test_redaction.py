"""The redaction rule (council.redaction) on its own: every 8 characters in a row of a
secret, wherever they start in it, and of its common encodings (base64 at each byte
alignment and in both alphabets, hex in either case, URL encoding, the secret reversed)
are redacted, a run of them as one REDACTED; a text still arriving holds back an ending
that may begin such a piece, and what it shows only grows; a cut keeps none of them.

The pieces a text holds are worked out by the tests' own code (tests.key_pieces)."""

from __future__ import annotations

import base64
import itertools
import logging
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from council.redaction import MIN_PIECE, REDACTED, Redactor, redact_logs
from tests.key_pieces import PIECE, encodings_of, leaked, windows
from tests.tiers import examples

pytestmark = pytest.mark.fast

# 44 characters, two of which URL encoding changes.
KEY = "sk-canary-7Qm2Xv9Lr4/Tz8Wb3+Nd6Hj1Kp0Ys5Fg2U"
OTHER = "tok_5Hq9Wm2Rz7Lx4Vb8Nc3Kd6"
REDACTOR = Redactor([KEY, OTHER])
PROPERTY = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
FORMS = encodings_of(KEY)


def test_the_tests_and_the_rule_agree_on_what_a_piece_is() -> None:
    assert PIECE == MIN_PIECE
    assert FORMS["URL-encoded"] != KEY  # the key has characters URL encoding changes


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_run_of_8_or_more_characters_of_every_form_is_one_redacted(name: str) -> None:
    form = FORMS[name]
    for start in range(len(form) - MIN_PIECE + 1):
        for stop in range(start + MIN_PIECE, len(form) + 1):
            text = f"before {form[start:stop]} after"
            assert REDACTOR.redact(text) == f"before {REDACTED} after", (name, start, stop)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_fewer_than_8_characters_of_a_form_are_left_as_they_are(name: str) -> None:
    form = FORMS[name]
    for start in range(len(form) - MIN_PIECE + 2):
        text = f"before {form[start : start + MIN_PIECE - 1]} after"
        assert REDACTOR.redact(text) == text, (name, start)


def test_the_parts_a_provider_echoed_leave_no_piece() -> None:
    """The issue's echoes: without the first character, from the eighth, the last 20."""
    for part in (KEY[1:], KEY[7:], KEY[-20:]):
        assert REDACTOR.redact(f"key: {part}!") == f"key: {REDACTED}!"


def test_adjacent_and_overlapping_pieces_of_several_forms_are_one_redacted() -> None:
    run = KEY[3:] + KEY[::-1][:12] + FORMS["hex"][5:40] + OTHER[2:]
    assert REDACTOR.redact(f"<{run}>") == f"<{REDACTED}>"
    apart = f"{KEY[3:20]} and {FORMS['base64 from byte 1'][:9]}"
    assert REDACTOR.redact(apart) == f"{REDACTED} and {REDACTED}"


@given(
    size=st.integers(6, len(KEY)),  # 6 bytes or more: 8 characters of base64 or more
    padded=st.booleans(),
    urlsafe=st.booleans(),
    data=st.data(),
)
@PROPERTY
def test_base64_of_any_part_of_the_key_leaves_no_8_characters_of_it(
    size: int, padded: bool, urlsafe: bool, data: st.DataObject
) -> None:
    """A part of the key, base64-encoded on its own (from any byte of the key), whatever
    its alignment: at most its last group (and padding) is left."""
    start = data.draw(st.integers(0, len(KEY) - size))
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    echo = encode(KEY.encode()[start : start + size]).decode()
    echo = echo if padded else echo.rstrip("=")
    shown = REDACTOR.redact(f"encoded: {echo}.")
    assert not windows(echo) & windows(shown), (echo, shown)
    assert REDACTED in shown


@given(size=st.integers(4, len(KEY)), upper=st.booleans(), data=st.data())
@PROPERTY
def test_hex_and_url_encoding_of_any_part_of_the_key_leave_no_8_characters_of_it(
    size: int, upper: bool, data: st.DataObject
) -> None:
    """4 characters of the key or more: 8 of hex or more."""
    start = data.draw(st.integers(0, len(KEY) - size))
    part = KEY[start : start + size]
    hexed = part.encode().hex()
    for echo in (hexed.upper() if upper else hexed, quote(part), quote(part, safe="")):
        shown = REDACTOR.redact(f"encoded: {echo}.")
        assert not windows(echo) & windows(shown), (echo, shown)


# Texts made of the keys' characters, their encodings' and a few others, with parts of
# the forms spliced in: partial matches everywhere.
ALPHABET = sorted(set("".join(FORMS.values()) + OTHER + " .é😀[]"))
fragments = st.one_of(
    st.text(alphabet=ALPHABET, max_size=12),
    st.sampled_from(sorted(FORMS.values()) + [OTHER]).flatmap(
        lambda form: st.tuples(st.integers(0, len(form)), st.integers(0, len(form))).map(
            lambda ends: form[min(ends) : max(ends)]
        )
    ),
)
texts = st.lists(fragments, max_size=12).map("".join)


def leaves_nothing(text: str) -> bool:
    return not leaked(text, KEY) and not leaked(text, OTHER)


@given(text=texts)
@PROPERTY
def test_a_redacted_text_holds_no_piece_and_a_text_without_one_is_unchanged(text: str) -> None:
    shown = REDACTOR.redact(text)
    assert leaves_nothing(shown), (text, shown)
    if leaves_nothing(text):
        assert shown == text
    # Everything outside the pieces is kept, in order.
    at = 0
    for kept in shown.split(REDACTED):
        at = text.index(kept, at) + len(kept)


@given(text=texts, data=st.data())
@PROPERTY
def test_a_streamed_text_shows_no_piece_only_grows_and_ends_as_the_whole_text_redacted(
    text: str, data: st.DataObject
) -> None:
    whole = REDACTOR.redact(text)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    shown = [REDACTOR.settled(text[:cut]) for cut in [*cuts, len(text)]]
    for before, after in itertools.pairwise(shown):
        assert after.startswith(before), (before, after)
    for live in shown:
        assert leaves_nothing(live) and whole.startswith(live), (live, whole)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_text_that_ends_as_a_piece_of_any_form_begins_is_held_back(name: str) -> None:
    form = FORMS[name]
    for start in range(len(form) - MIN_PIECE + 1):
        for size in range(1, MIN_PIECE):
            part = form[start : start + size]
            assert REDACTOR.settled(f"so far: {part}") == "so far: ", (name, start, size)
    assert REDACTOR.settled("so far: ") == "so far: "
    assert REDACTOR.unsettled("so far: ") == 0


@given(text=texts, data=st.data())
@PROPERTY
def test_secrets_shorter_than_a_piece_beside_longer_ones(text: str, data: st.DataObject) -> None:
    """Pieces of several lengths (a short secret counts whole), overlapping each other."""
    shorts = ["Xv9L", "Nd6Hj1", "5Hq"]  # each a part of one of the long secrets
    redactor = Redactor([KEY, OTHER, *shorts])
    whole = redactor.redact(text)
    cut = data.draw(st.integers(0, len(text)))
    for shown in (whole, redactor.settled(text[:cut])):
        assert leaves_nothing(shown) and not any(s in shown for s in shorts), shown
        assert whole.startswith(shown)


@given(text=texts, limit=st.integers(0, 120))
@PROPERTY
def test_a_cut_text_holds_no_piece(text: str, limit: int) -> None:
    cut = REDACTOR.cut(text + " " + KEY[5:] + " tail", limit)
    assert len(cut) <= limit and leaves_nothing(cut), cut


def test_a_secret_shorter_than_a_piece_counts_whole_and_no_secret_changes_nothing() -> None:
    short = Redactor(["abcd"])
    assert short.redact("xabcdx abc") == f"x{REDACTED}x abc"
    assert short.settled("so far ab") == "so far "
    assert Redactor([]).redact(KEY) == KEY and Redactor([]).settled(KEY) == KEY
    assert not Redactor([]) and Redactor([KEY])


def test_a_key_beyond_ascii_is_redacted_by_characters_and_by_its_utf8_encodings() -> None:
    key = "ключ-секрет-значение-42😀"
    redactor = Redactor([key])
    for name, form in encodings_of(key).items():
        text = f"😀 before {form[2:]} after é"
        assert redactor.redact(text) == f"😀 before {REDACTED} after é", name


def test_the_longest_reach_counts_the_encodings() -> None:
    """How far past a cut a key that began before it may reach: its hex is twice its
    length, and a cut reads that far to redact the whole run as one."""
    assert REDACTOR.longest == len(FORMS["hex"])
    text = "x" * 30 + FORMS["hex"] + " tail"
    assert REDACTOR.cut(text, 60) == "x" * 30 + REDACTED + " tail"


def test_log_lines_hold_no_part_and_no_encoding_of_a_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-logs-3Vq8Tz1Wm6Rx9Lb4Nc7Hd2"
    redact_logs([secret])
    caplog.set_level(logging.DEBUG)
    for name, form in encodings_of(secret).items():
        logging.getLogger("some.library").debug("%s: %s", name, form[3:])
    try:
        raise RuntimeError(f"said {secret[::-1][2:]}")
    except RuntimeError:
        logging.getLogger("council.anything").exception("failed")
    assert "RuntimeError" in caplog.text and "hex:" in caplog.text
    assert not leaked(caplog.text, secret), leaked(caplog.text, secret)
