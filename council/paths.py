"""Files a user names by path (an attachment, a dataset): a URL is not one.

The council reads files from disk and fetches nothing, so a URL given where a path goes
is refused by saying so, rather than as a file that does not exist.
"""

from __future__ import annotations

import re

# A scheme and `//`: http://, https://, ftp://, s3://, file://.
_URL = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*://")


def url_problem(given: str) -> str | None:
    """What to say of a path that is a URL; None for anything else."""
    if not _URL.match(given):
        return None
    return (
        f"{given} is a URL, and the council does not fetch URLs: download it first and give "
        "the file's path"
    )
