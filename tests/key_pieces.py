"""The tests' own account of a key's pieces: the key and its common encodings, each
computed here (not by council.redaction), and the 8-character pieces of them a text holds.
"""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import quote, quote_plus

PIECE = 8


def encodings_of(key: str) -> dict[str, str]:
    """The key and its common encodings, by name: those a provider may echo it in."""
    data = key.encode()
    forms = {
        "the key": key,
        "the key reversed": key[::-1],
        "hex": binascii.hexlify(data).decode(),
        "HEX": binascii.hexlify(data).decode().upper(),
        "URL-encoded": quote(key, safe=""),
        "URL-encoded but '/'": quote(key),
        "URL-encoded as a form field": quote_plus(key),
    }
    for name in ("URL-encoded", "URL-encoded but '/'"):
        forms[f"{name}, lower-case escapes"] = re.sub(
            "%[0-9A-F]{2}", lambda escape: escape[0].lower(), forms[name]
        )
    for skip in range(3):  # base64 of the key at each of the three byte alignments
        forms[f"base64 from byte {skip}"] = base64.b64encode(data[skip:]).decode().rstrip("=")
        forms[f"URL-safe base64 from byte {skip}"] = (
            base64.urlsafe_b64encode(data[skip:]).decode().rstrip("=")
        )
    return forms


def windows(text: str) -> set[str]:
    """Every PIECE characters in a row of the text."""
    return {text[i : i + PIECE] for i in range(len(text) - PIECE + 1)}


def leaked(text: str, key: str) -> dict[str, list[str]]:
    """The 8-character pieces of the key and of its encodings that the text holds, by the
    encoding they are pieces of."""
    found = {}
    for name, form in encodings_of(key).items():
        if hits := sorted(w for w in windows(form) if w in text):
            found[name] = hits
    return found
