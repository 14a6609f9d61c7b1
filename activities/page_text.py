"""An HTML page's title and readable text, read in one pass over its markup: time linear in
its length whatever the markup (unclosed tags, elements nested a hundred thousand deep,
stray `<` and quotes), memory the text and the elements left open.

    title, text = page_text(data, charset)     # the reply's bytes and its charset, if any

The text is what a reader sees: no scripts, styles, templates or other embedded content,
a line per block (paragraphs, headings, list items, table rows...), a table's cells apart,
whitespace collapsed (a <pre> keeps its lines, not their indent). The markup is read as
an HTML tokenizer does: `<!-- -->` comments, `<!...>` and `<?...>` declarations, tags and
their attributes (a quoted value may hold `>`), script and style as raw text up to their
end tag, title and textarea as text, character references decoded. A tag or comment that
the page leaves open at its end ends the page, as it does in a browser. Neither Python's
own html.parser (whose handling of unclosed tags is quadratic in the Pythons it ships
with: half a minute for 200 KB of `<a<a<a...`) nor a tree is used.

activities.web_tools reads a page in a process of its own (bounded.process), `answer`
being its work, so that even the linear cost of the largest page allowed is the worker's
for a bounded time, memory and CPU only.
"""

from __future__ import annotations

import codecs
import html
import json
import re
import sys
from array import array

from council.limits import PAGE_TITLE_CHARS

# Elements whose content is not the page's readable text, and those that begin a line.
DROPPED = frozenset(
    {
        "script", "style", "noscript", "template", "title", "meta", "link", "svg", "iframe",
        "object", "embed", "canvas",
    }
)  # fmt: skip
BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
        "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
        "table", "tr", "ul", "body", "html",
    }
)  # fmt: skip
CELLS = frozenset({"td", "th"})
# Elements that have no end tag (a stray one is ignored).
VOID = frozenset(
    {
        "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta",
        "param", "source", "track", "wbr",
    }
)  # fmt: skip
# Elements whose content runs to their end tag as text, never markup: raw (script, style)
# or with character references (title, textarea).
RAW = frozenset({"script", "style"})
ESCAPABLE = frozenset({"title", "textarea"})

_NAME = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
_UP_TO_VALUE_OR_END = re.compile(r"[^>=]*")
_BLANKS = re.compile(r"[\t\n\f\r ]*")
_SPACES = re.compile(r"\s+")
_END_TAGS: dict[str, re.Pattern[str]] = {
    name: re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE) for name in RAW | ESCAPABLE
}
# Where a page may say its own encoding: the start of an XML declaration (XHTML) and a
# <meta> in the first bytes (the HTML standard's prescan looks at 1024).
_PRESCAN_BYTES = 1024
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]+)""")
_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE
)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))  # fmt: skip


def page_text(data: bytes, charset: str | None = None) -> tuple[str, str]:
    """An HTML page's title (at most PAGE_TITLE_CHARS) and readable text. The charset is
    the reply's, else the page's own (a byte order mark, an XML declaration's or a
    <meta>'s), else UTF-8 where the bytes are UTF-8, else windows-1252."""
    reader = _Reader()
    reader.feed(decoded(data, charset))
    return reader.result()


def answer(data: bytes, argument: str) -> bytes:
    """The reading process's work (bounded.process): the page's bytes in, the charset in
    `argument` ("" for none), {"title", "text"} out as JSON."""
    title, text = page_text(data, argument or None)
    return json.dumps({"title": title, "text": text}, ensure_ascii=False).encode()


def decoded(data: bytes, charset: str | None) -> str:
    """The page's markup as text."""
    if charset:
        return _decode(data, charset).removeprefix("\ufeff")
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            return data[len(mark) :].decode(encoding, "replace")
    head = data[:_PRESCAN_BYTES]
    for pattern in (_XML_ENCODING, _META_CHARSET):
        found = pattern.search(head)
        declared = _known(found.group(1).decode("ascii")) if found is not None else None
        if declared is not None:
            return data.decode(declared, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("windows-1252", "replace")


def _decode(data: bytes, charset: str) -> str:
    return data.decode(_known(charset) or "utf-8", "replace")


def _known(label: str) -> str | None:
    """The codec a charset label names (None for one Python does not know). A page that
    names UTF-16 in its own bytes is read as UTF-8, as browsers do (its bytes were ASCII
    enough to say so)."""
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "utf-8" if name.startswith("utf-16") else name


class _Reader:
    """The text of a page as its markup is read: the open elements on a stack, with where
    each name stands in it, so that an end tag closes what it closes in one step however
    deep the page nests (16 bytes an open element: a name is kept once, its places as an
    array of integers)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.title: str | None = None
        self.open: list[str] = []
        self.places: dict[str, array[int]] = {}
        self.dropped = 0  # open elements whose content is not text
        self.pre = 0  # open <pre> elements

    def feed(self, markup: str) -> None:
        """Read the whole page: text up to each `<` that begins markup, then that markup."""
        start = at = 0
        find = markup.find
        while (lt := find("<", at)) >= 0:
            after = markup[lt + 1 : lt + 2]
            if not (after in ("!", "?", "/") or (after.isascii() and after.isalpha())):
                at = lt + 1  # a "<" of the text
                continue
            if lt > start:
                self.text(markup[start:lt])
            start = at = self.markup(markup, lt)
        if start < len(markup):
            self.text(markup[start:])

    def markup(self, page: str, lt: int) -> int:
        """Read the markup at `lt` (a comment, a declaration, a tag, a raw text element);
        where the page goes on after it (its end, for markup it leaves open)."""
        end = len(page)
        kind = page[lt + 1]
        if kind == "!" and page.startswith("<!--", lt):
            if page.startswith(("<!-->", "<!--->"), lt):
                return page.index(">", lt) + 1
            close = page.find("-->", lt + 4)
            return end if close < 0 else close + 3
        if kind == "!" and page.startswith("<![CDATA[", lt):
            close = page.find("]]>", lt + 9)
            self.text(page[lt + 9 : end if close < 0 else close], references=False)
            return end if close < 0 else close + 3
        if kind == "/":
            named = _NAME.match(page, lt + 2)
            if named is None:  # "</>" is nothing, "</ ...>" a comment
                close = page.find(">", lt + 2)
                return end if close < 0 else close + 1
            after = _tag_end(page, named.end())
            if after > 0:
                self.end(named.group().lower())
            return after if after > 0 else end
        if kind in "!?":  # a doctype, a processing instruction, a bogus comment
            close = page.find(">", lt + 2)
            return end if close < 0 else close + 1
        found = _NAME.match(page, lt + 1)
        assert found is not None  # (a letter follows the "<")
        name = sys.intern(found.group().lower())
        after = _tag_end(page, found.end())
        if after < 0:
            return end
        closed = page[after - 2] == "/"  # <br/>, <div/>: an element with nothing in it
        if closed or (name not in RAW and name not in ESCAPABLE):
            self.start(name, closed)
            return after
        close_tag = _END_TAGS[name].search(page, after)
        content = page[after : end if close_tag is None else close_tag.start()]
        self.raw(name, content)
        if close_tag is None:
            return end
        after_close = _tag_end(page, close_tag.start() + 2 + len(name))
        return after_close if after_close > 0 else end

    def text(self, data: str, references: bool = True) -> None:
        if self.dropped:
            return
        if references and "&" in data:
            data = html.unescape(data)
        self.pieces.append(data if self.pre else _SPACES.sub(" ", data))

    def start(self, name: str, closed: bool = False) -> None:
        self._opened(name)
        if closed or name in VOID:
            self._closed(name)
            return
        self.places.setdefault(name, array("q")).append(len(self.open))
        self.open.append(name)

    def end(self, name: str) -> None:
        """An end tag: the latest open element of that name closes, and every element
        opened inside it (none open: nothing happens)."""
        places = self.places.get(name)
        if not places:
            if name == "br":  # </br> is a line break (as in browsers)
                self.start(name)
            return
        depth = places[-1]
        while len(self.open) > depth:
            self._pop()

    def raw(self, name: str, content: str) -> None:
        if name == "title":
            if self.title is None:
                title = _squeeze(html.unescape(content[: PAGE_TITLE_CHARS * 8]))
                cut = len(title) > PAGE_TITLE_CHARS
                self.title = title[: PAGE_TITLE_CHARS - 1] + "…" if cut else title
            return
        self._opened(name)
        if name not in RAW:
            self.text(content)
        self._closed(name)

    def result(self) -> tuple[str, str]:
        while self.open:
            self._pop()
        lines = (_squeeze(line) for line in "".join(self.pieces).splitlines())
        return self.title or "", "\n".join(line for line in lines if line)

    def _pop(self) -> None:
        name = self.open.pop()
        self.places[name].pop()
        self._closed(name)

    def _opened(self, name: str) -> None:
        if name in BLOCKS:
            self._break("\n")
        if name in DROPPED:
            self.dropped += 1
        if name == "pre":
            self.pre += 1

    def _closed(self, name: str) -> None:
        if name == "pre":
            self.pre -= 1
        if name in DROPPED:
            self.dropped -= 1
        if name in BLOCKS:
            self._break("\n")
        elif name in CELLS:
            self._break(" ")

    def _break(self, text: str) -> None:
        # (A line break right after another would only make an empty line, which is left
        # out: not kept at all, so deep or flat markup costs no piece a tag.)
        if self.dropped or (text == "\n" and self.pieces and self.pieces[-1] == "\n"):
            return
        self.pieces.append(text)


def _tag_end(page: str, at: int) -> int:
    """Where a tag whose attributes begin at `at` ends (just past its `>`), or -1 when the
    page ends first. A quote opens a value only after `=`; it runs to the same quote."""
    if page.startswith(">", at):  # (most tags: no attributes)
        return at + 1
    end = len(page)
    while True:
        at = _past(_UP_TO_VALUE_OR_END, page, at)
        if at >= end:
            return -1
        if page[at] == ">":
            return at + 1
        at = _past(_BLANKS, page, at + 1)
        if at < end and page[at] in "\"'":
            close = page.find(page[at], at + 1)
            if close < 0:
                return -1
            at = close + 1


def _past(pattern: re.Pattern[str], page: str, at: int) -> int:
    """Where a run of what `pattern` matches (possibly none) ends."""
    found = pattern.match(page, at)
    assert found is not None  # (each pattern matches the empty string)
    return found.end()


def _squeeze(text: str) -> str:
    return " ".join(text.split())
