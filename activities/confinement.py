"""Where a stdio tool server runs: confined, so that it can read no process of the worker
and no file that holds a key. A server is someone else's code; the worker holds the
providers' keys in its environment and memory.

A stdio server (council.toml's `[tools.NAME] command = [...]`) starts inside bubblewrap
(`bwrap`, Debian's `bubblewrap`):

- a PID namespace and a /proc of its own: the worker and every other process of the
  machine are not there, so no `/proc/*/environ`, `cmdline` or `mem` of theirs to read;
- the file system read-only, but for a /tmp of its own and the entry's `cwd`; the files and
  folders that hold keys or the council's data hidden (`hidden`: the worker's council.toml,
  its `.env`, its data directory and payload store, the Temporal client's profile);
- no capability even as root (no mount of its own can be undone), no new privileges, a
  session of its own, killed with the worker;
- the environment its entry gives it and no other (activities.mcp_tools: PATH, HOME, LANG
  and its `env`).

Where bwrap is missing, or cannot make its namespaces on this machine, a stdio server is
not started unless its entry says `trusted = true` (then it runs as the worker's user,
with the same small environment). The worker itself is made non-dumpable
(`protect_this_process`): no other process of its user may read its memory or environment.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from activities.tool_failure import ToolFailure

if TYPE_CHECKING:  # (the MCP SDK takes a second to import: loaded where a server starts)
    from mcp import StdioServerParameters

BWRAP = "bwrap"
# How long the check that bwrap can make its namespaces here may take.
PROBE_SECONDS = 10.0
# prctl(2): whether the process may be dumped, and so read by another of its user.
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


@functools.cache
def sandbox() -> tuple[str | None, str]:
    """bwrap's path when it can confine a server here, and why not when it cannot (asked
    once a process: it makes the namespaces of a server once, around `true`)."""
    path = shutil.which(BWRAP)
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = [path, *_isolation(), "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_SECONDS, env={})
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bwrap could not run ({error})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"bwrap cannot confine a process here ({said[-1] if said else 'no reason'})"
    return path, ""


# The sandbox's own /tmp, over the machine's.
SANDBOX_TMP = Path("/tmp")


def _isolation() -> list[str]:
    """What a confined server gets whatever its entry: its own PID namespace, no capability,
    its own session, its death with the worker; the file system read-only, and a /proc (of
    its namespace), a /dev and a /tmp of its own (mounts apply in order: these come after
    the file system they cover)."""
    return [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        str(SANDBOX_TMP),
    ]


@dataclass(frozen=True)
class Confinement:
    """How this process starts stdio servers: the paths hidden from them (each one that
    exists is covered: a folder by an empty one, a file by an unreadable one)."""

    hidden: tuple[Path, ...] = field(default_factory=tuple)

    @classmethod
    def hiding(cls, paths: Iterable[Path | None]) -> Confinement:
        return cls(tuple(dict.fromkeys(Path(p).absolute() for p in paths if p is not None)))

    def wrap(self, server: StdioServerParameters, trusted: bool) -> StdioServerParameters:
        """The server's start, confined; as it is for a `trusted` entry. ToolFailure (final)
        where it cannot be confined here and is not trusted."""
        if trusted:
            return server
        bwrap, why = sandbox()
        if bwrap is None:
            raise ToolFailure(
                f"a stdio tool server runs confined, and here {why}: install bubblewrap "
                "(apt-get install bubblewrap), or set trusted = true in its [tools] entry to "
                "run it with the worker's own rights"
            )
        program = _program(server)
        args = _isolation()
        # What the server's own /tmp would cover (a checkout under /tmp, say), read-only: its
        # program and the virtual environment it belongs to, the files its arguments name
        # (a relative one from its cwd) and its cwd, which is the worker's unless its entry
        # names one (that one writable).
        cwd = Path(server.cwd).absolute() if server.cwd is not None else None
        here = cwd or Path.cwd()
        words = [program, *_environment_of(program), *server.args]
        for folder in dict.fromkeys([*_folders_of(words, here), here]):
            if folder == cwd:
                args += ["--bind", str(cwd), str(cwd)]
            elif _covered(folder):
                args += ["--ro-bind", str(folder), str(folder)]
        for path in self.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        # Only the environment the entry gives it (bwrap's own is cleared and set anew).
        args += ["--clearenv"]
        for name, value in (server.env or {}).items():
            args += ["--setenv", name, value]
        args += ["--chdir", str(here)]
        return server.model_copy(
            update={"command": bwrap, "args": [*args, "--", program, *server.args]}
        )


def _program(server: StdioServerParameters) -> str:
    """The server's program as a path (found on its PATH); FileNotFoundError, as its start
    would raise, where there is none."""
    path = (server.env or {}).get("PATH")
    found = shutil.which(server.command, path=path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), server.command)
    return str(Path(found).absolute())


def _environment_of(program: str) -> Iterator[str]:
    """The virtual environment whose interpreter or script `program` is (its libraries
    beside it: under /tmp they would be covered by the server's own /tmp)."""
    root = Path(program).parent.parent
    if (root / "pyvenv.cfg").is_file():
        yield str(root)


def _covered(folder: Path) -> bool:
    """Whether the server's own /tmp covers `folder` (the rest of the file system it sees
    as it is, read-only: binding a folder there again would only undo what covers it)."""
    return folder.is_relative_to(SANDBOX_TMP) and folder != SANDBOX_TMP


def _folders_of(words: Iterable[str], here: Path) -> Iterator[Path]:
    """The folder of each word that names a file or folder (a script, its directory), a
    relative one read from `here`."""
    for word in words:
        path = here / word  # an absolute word stays itself
        if word and path.exists():
            yield path if path.is_dir() else path.parent


def protect_this_process() -> bool:
    """Make this process non-dumpable (Linux): no process of its user but root may read its
    memory or its environment, or attach to it. Whether it is now."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
