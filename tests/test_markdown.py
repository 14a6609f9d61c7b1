"""Model text rendered from Markdown (web/markdown.py): the elements a model writes become
those elements; hostile Markdown is inert (no markup of its own, no script, no image, no
link but http, https and mailto)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from web.markdown import REL, render, safe_url

pytestmark = pytest.mark.fast


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, of some HTML."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text = ""
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text += data

    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}

    def links(self) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.tags if tag == "a"]


WELL_FORMED = """# Plan

- first
- second

| option | cost |
|--------|------|
| a      | 1    |

```python
if a < b and c > d:
    print("<b>")
```

See [the docs](https://example.org/docs?a=1&b=2) or [write](mailto:x@example.org),
and ~~not this~~.
"""


def test_the_elements_a_model_writes_render_as_those_elements() -> None:
    html = str(render(WELL_FORMED))
    found = Elements(html)
    assert {"h1", "ul", "li", "table", "th", "td", "pre", "code", "a", "s"} <= found.names()
    # The code block is escaped: its text comes back exactly, with no tag from inside it.
    assert 'if a < b and c > d:\n    print("<b>")' in found.text
    assert ("b", {}) not in found.tags
    assert found.links() == [
        {"href": "https://example.org/docs?a=1&b=2", "rel": REL},
        {"href": "mailto:x@example.org", "rel": REL},
    ]


HOSTILE = {
    "script": "<script>window.__pwned = 1</script>",
    "img onerror": '<img src="x" onerror="window.__pwned = 1">',
    "inline handler": 'text <b onmouseover="window.__pwned = 1">bold</b>',
    "javascript link": "[x](javascript:window.__pwned=1)",
    "upper-case scheme": "[x](JaVaScRiPt:alert(1))",
    "entity in scheme": "[x](jav&#x61;script:alert(1))",
    "entity colon": "[x](javascript&colon;alert(1))",
    "space in scheme": "[x](<java script:alert(1)>)",
    "newline in scheme": "[x](<java\nscript:alert(1)>)",
    "tab in scheme": "[x](java\tscript:alert(1))",
    "leading space": "[x]( javascript:alert(1))",
    "reference link": "[x][r]\n\n[r]: javascript:alert(1)",
    "data link": "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "vbscript link": "[x](vbscript:msgbox)",
    "data autolink": "<data:text/html,<script>alert(1)</script>>",
    "javascript autolink": "<javascript:alert(1)>",
    "image": "![tracker](http://images.example/pixel.png)",
    "javascript image": "![x](javascript:alert(1))",
    "image in link": "[![pic](http://images.example/p.png)](https://example.org)",
    "link title": '[x](https://example.org "a\\" onmouseover=\\"alert(1)")',
    "fence info": '```" onmouseover="alert(1)\ncode\n```',
}


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_markdown_is_inert(source: str) -> None:
    html = str(render(source))
    found = Elements(html)
    assert not found.names() & {"script", "img", "iframe", "object", "embed", "svg", "b"}, html
    for tag, attrs in found.tags:
        assert not [name for name in attrs if name.startswith("on")], html
        if tag == "a":
            assert safe_url(attrs.get("href") or ""), html
            assert attrs.get("rel") == REL, html
    # Nothing the model wrote is lost: what was refused is shown as text.
    assert found.text.strip(), html


def test_a_refused_link_keeps_its_text_and_an_image_becomes_a_link_to_it() -> None:
    found = Elements(str(render("[click me](javascript:alert(1))")))
    assert found.links() == [] and found.text.strip() == "click me"

    found = Elements(str(render("![a chart](https://images.example/c.png)")))
    assert found.links() == [
        {"href": "https://images.example/c.png", "rel": REL, "class": "image-link"}
    ]
    assert found.text.strip() == "a chart"

    found = Elements(str(render("<data:text/html,hi> and <https://example.org/>")))
    assert [link["href"] for link in found.links()] == ["https://example.org/"]
    assert "data:text/html,hi" in found.text

    # An image inside a link: the link stays, the image is its text (no link in a link).
    found = Elements(str(render("[![pic](https://images.example/p.png)](https://example.org)")))
    assert [link["href"] for link in found.links()] == ["https://example.org"]
    assert found.text.strip() == "pic"


def test_raw_html_is_shown_as_text() -> None:
    source = '<script>window.__pwned = 1</script>\n\n<img src="x" onerror="y">'
    found = Elements(str(render(source)))
    assert [tag for tag, _ in found.tags] == ["p", "p"]
    assert found.text.split() == source.split()


def test_empty_text_renders_nothing() -> None:
    assert str(render("")) == "" and str(render(None)) == ""


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://example.org", True),
        ("HTTP://example.org", True),
        ("mailto:a@example.org", True),
        ("javascript:alert(1)", False),
        (" https://example.org", False),
        ("/relative", False),
        ("//example.org/protocol-relative", False),
        ("data:text/html,x", False),
        ("ftp://example.org", False),
    ],
)
def test_only_http_https_and_mailto_are_linked(url: str, allowed: bool) -> None:
    assert safe_url(url) is allowed
