"""Who may use the page, /v1 and the MCP server over HTTP: the principals, each an access
token and the name it goes by.

- COUNCIL_WEB_TOKEN: one token for everyone who holds it, the principal `shared` (a team
  that wants one tenant).
- COUNCIL_WEB_TOKENS: named tokens, `NAME=TOKEN` pairs separated by commas;
  COUNCIL_WEB_TOKENS_FILE: a file of them, one `NAME=TOKEN` a line (blank lines and lines
  starting with `#` are passed over). Each is a principal of its own.

A principal is a tenant (runs.priority): its runs carry its name as their fairness key
and are counted against its quota (runs.quota), and the worker gives it its own share
of the model calls (activities.shares), whichever surface, sign-in or session it comes
through. The name is what history, records and logs may hold; the token never is.

The rules, each refused at start in one line that names the setting and never a token:
a name is 1 to MAX_NAME_CHARS letters, digits and `- _ .` (starting with a letter or a
digit), once only, and none of RESERVED; a named token is at least MIN_TOKEN_CHARS
printable ASCII characters without spaces or commas, and no two principals share one.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The principal of COUNCIL_WEB_TOKEN.
SHARED = "shared"
# Tenants that other callers have already: COUNCIL_WEB_TOKEN's, batch work's
# (runs.priority.BATCH) and the MCP server's on stdio (mcp_server.runs).
RESERVED = {
    SHARED: "the tenant of COUNCIL_WEB_TOKEN",
    "batch": "the tenant of batch work",
    "mcp": "the tenant of the MCP server on stdio",
}
MAX_NAME_CHARS = 32
MIN_TOKEN_CHARS = 16
MAX_PRINCIPALS = 1000
NAME_RULE = f"1 to {MAX_NAME_CHARS} letters, digits and - _ . (starting with a letter or a digit)"
TOKEN_RULE = (
    f"at least {MIN_TOKEN_CHARS} printable ASCII characters without spaces or commas "
    """(python3 -c "import secrets; print(secrets.token_urlsafe(32))")"""
)
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_NAME_CHARS - 1}}}")
_TOKEN = re.compile(rf"[!-~]{{{MIN_TOKEN_CHARS},}}")


@dataclass(frozen=True)
class Principal:
    """A token and the name it goes by; its tenant is the name."""

    name: str
    token: str = field(repr=False)

    @property
    def tenant(self) -> str:
        return self.name

    def matches(self, given: str) -> bool:
        """Whether `given` is this principal's token (compared in constant time)."""
        return hmac.compare_digest(given.encode(), self.token.encode())


@dataclass(frozen=True)
class Principals:
    """Every principal a server knows (none: the server needs no token)."""

    all: tuple[Principal, ...] = ()

    @classmethod
    def of(cls, shared: str | None = None, named: Iterable[Principal] = ()) -> Principals:
        """COUNCIL_WEB_TOKEN's principal (when set) and the named ones."""
        found = [Principal(SHARED, shared)] if shared else []
        return cls((*found, *named))

    def __bool__(self) -> bool:
        return bool(self.all)

    def __iter__(self) -> Iterator[Principal]:
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)

    def matching(self, given: str) -> Principal | None:
        """The principal whose token `given` is: every token compared, in constant time, so
        that the time taken says nothing of which one (or how much of it) matched."""
        found = None
        for principal in self.all:
            if principal.matches(given):
                found = principal
        return found

    def named(self, name: str) -> Principal | None:
        return next((p for p in self.all if p.name == name), None)

    def tokens(self) -> list[str]:
        return [principal.token for principal in self.all]


def parse(text: str, *, lines: bool = False) -> list[Principal]:
    """Named tokens: `NAME=TOKEN` separated by commas (`lines`: one a line, blank lines
    and `#` comments passed over). ValueError with one line, naming no token."""
    items = text.splitlines() if lines else text.split(",")
    found: list[Principal] = []
    for number, item in enumerate(items, 1):
        entry = item.strip()
        if not entry or (lines and entry.startswith("#")):
            continue
        where = f"line {number}" if lines else f"entry {number}"
        name, equals, token = (part.strip() for part in entry.partition("="))
        if not equals or not name:
            raise ValueError(f"{where} must be NAME=TOKEN")
        # Nothing of an entry is shown until it is read (its name could be a token written
        # the wrong way round).
        if not _NAME.fullmatch(name):
            raise ValueError(f"{where}: its name must be {NAME_RULE}")
        if not _TOKEN.fullmatch(token) or "," in token:
            raise ValueError(f"{where}: its token must be {TOKEN_RULE}")
        found.append(Principal(name, token))
    if len(found) > MAX_PRINCIPALS:
        raise ValueError(f"at most {MAX_PRINCIPALS} named tokens")
    return found


def read_file(path: str) -> list[Principal]:
    """The named tokens of a file (parse, one a line); ValueError with one line."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
        raise ValueError(f"cannot read {path[:200]}: {why}") from None
    found = parse(text, lines=True)
    if not found:
        raise ValueError(f"{path[:200]} holds no NAME=TOKEN line")
    return found


def conflict(
    named: Sequence[Principal], before: Sequence[Principal] = (), held: Mapping[str, str] = {}
) -> str | None:
    """Why these named tokens cannot stand beside the named tokens read `before` and the
    tokens `held` otherwise (token -> the setting that holds it: COUNCIL_WEB_TOKEN's); None
    when they can. A reserved name, a name twice, a token twice: one line naming names and
    settings, never a token."""
    seen = {p.name for p in before}
    tokens = {**held, **{p.token: p.name for p in before}}
    for principal in named:
        name = principal.name
        if name.lower() in RESERVED:
            return f"the name {name} is taken ({RESERVED[name.lower()]}): choose another"
        if name in seen:
            return f"the name {name} is given twice: each name once"
        if principal.token in tokens:
            other = tokens[principal.token]
            return f"{name} has the same token as {other}: give each its own"
        seen.add(name)
        tokens[principal.token] = name
    return None
