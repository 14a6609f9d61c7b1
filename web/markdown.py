"""Model text rendered from Markdown, safely, on the server (markdown-it-py).

CommonMark with tables and strikethrough; raw HTML is text, never markup. A link keeps
its text and points only to http, https or mailto, with rel="noopener noreferrer
nofollow"; anything else (javascript:, data:, a relative path) is plain text. An image is
never loaded: it becomes a link to its address (with the same rule), its description as
the link's text. Code blocks are escaped, and the stylesheet lets them scroll.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

REL = "noopener noreferrer nofollow"
# Judged on the address as it is written into the page (after markdown-it decoded its
# entities and percent-encoded spaces and controls), so the browser reads the same scheme.
_SAFE_URL = re.compile(r"(?:https?|mailto):", re.IGNORECASE)


def safe_url(url: str) -> bool:
    """Whether a link may point to this address: http, https or mailto only."""
    return _SAFE_URL.match(url) is not None


def _link(href: str, text: str, **attrs: str) -> list[Token]:
    opening = Token("link_open", "a", 1, attrs={"href": href, "rel": REL, **attrs})
    return [opening, Token("text", "", 0, content=text), Token("link_close", "a", -1)]


def _safe_children(children: list[Token]) -> list[Token]:
    """An inline token's children with every unsafe link reduced to its text, every link
    marked rel=..., and every image replaced by a link to it (or by its text)."""
    out: list[Token] = []
    kept: list[bool] = []  # per open link: whether its tags stay
    for token in children:
        if token.type == "link_open":
            keep = safe_url(str(token.attrGet("href") or ""))
            kept.append(keep)
            if keep:
                token.attrSet("rel", REL)
                out.append(token)
        elif token.type == "link_close":
            if kept.pop() if kept else False:
                out.append(token)
        elif token.type == "image":
            src = str(token.attrGet("src") or "")
            alt = "".join(child.content for child in token.children or []) or src
            # An image inside a kept link would be a link inside a link: its text only.
            if safe_url(src) and not any(kept):
                out += _link(src, alt, **{"class": "image-link"})
            else:
                out.append(Token("text", "", 0, content=alt))
        else:
            out.append(token)
    return out


def _safe_links(state: Any) -> None:
    for token in state.tokens:
        if token.type == "inline" and token.children:
            token.children = _safe_children(token.children)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # Every link and image reaches _safe_links, which judges them all by one rule and
    # keeps the text of those it refuses.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.core.ruler.push("safe_links", _safe_links)
    return md


_MD = _parser()


def render(text: str | None) -> Markup:
    """Model text as safe HTML."""
    return Markup(_MD.render(text or ""))
