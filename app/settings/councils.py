"""What a council starts with, on every surface (the CLI, the page, the API, MCP): a
named council's options from council.toml, or the default council.

The default council's members and chairman come from the first of these that says:
COUNCIL_MODELS / COUNCIL_CHAIRMAN; the council of a local stack that is running now on
the same Temporal server, namespace and task queue (`make up` on the simulator writes it
to DATA/default-council.json, DATA being COUNCIL_DATA or the checkout's data/, and removes
it when it stops); `[councils.default]`; the built-in members. Its other options come from
`[councils.default]`. So a CLI or an MCP server in another shell starts the same council
that `make up`'s page offers. The file also says where that stack's worker sends its
model calls (the simulator's base URL, never a key), so that `doctor` in another shell
checks that provider.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from app.settings import environment as app_settings
from app.settings.environment import Settings
from app.temporal.connection import DEFAULT_ADDRESS, DEFAULT_NAMESPACE
from council.config import DEFAULT_COUNCIL, Config

# OpenRouter ids; COUNCIL_MODELS (comma-separated) or [councils.default] replaces them.
DEFAULT_MODELS = (
    "openai/gpt-4o-mini",
    "anthropic/claude-3.5-haiku",
    "google/gemini-2.0-flash-001",
    "meta-llama/llama-3.3-70b-instruct",
)


LOCAL_COUNCIL_FILE = "default-council.json"
_LOOPBACK = {"localhost", "127.0.0.1", "[::1]", "::1"}


class LocalCouncil(BaseModel):
    """The default council of a local stack, and where that stack runs."""

    temporal_address: str
    namespace: str
    task_queue: str
    models: list[str]
    chairman: str | None = None
    # The default provider's base URL of the stack's worker (COUNCIL_LLM_BASE_URL there).
    base_url: str | None = None
    pid: int  # the process that wrote it: the file counts while it runs


class UnknownCouncil(LookupError):
    """A council name the configuration does not define (the message lists the known)."""


def listed(value: str | None) -> list[str]:
    """A comma-separated list of model ids (COUNCIL_MODELS) as a list."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


Env = Settings | Mapping[str, str] | None


def council_options(config: Config, name: str | None = None, env: Env = None) -> dict[str, Any]:
    """The start options of a council: the named one, or the default council (`env`: the
    settings, or the variables to read them from; the process's by default)."""
    if name is not None and name != DEFAULT_COUNCIL:
        try:
            return config.council(name)
        except KeyError:
            known = ", ".join(council_names(config))
            raise UnknownCouncil(f"no council {name!r} (known: {known})") from None
    options = dict(config.councils.get(DEFAULT_COUNCIL, {}))
    settings = app_settings.of(env)
    models = list(settings.default_models)
    chairman = settings.default_chairman or ""
    if not models:
        local = running_local_council(env)
        if local is not None:
            models, chairman = local.models, chairman or local.chairman or ""
    if models:
        options["models"] = models
        options.pop("chairman", None)
    options.setdefault("models", list(DEFAULT_MODELS))
    if chairman:
        options["chairman"] = chairman
    return options


def local_council_path(env: Env = None) -> Path:
    """Where a local stack's default council is written: DATA/default-council.json."""
    return app_settings.of(env).data() / LOCAL_COUNCIL_FILE


def _place(env: Env) -> tuple[str, str, str]:
    """The Temporal server (a loopback name as any other), namespace and task queue."""
    temporal = env if isinstance(env, Mapping) else os.environ
    address = (temporal.get("TEMPORAL_ADDRESS") or "").strip() or DEFAULT_ADDRESS
    host, _, port = address.rpartition(":")
    if host.lower() in _LOOPBACK:
        address = f"loopback:{port}"
    namespace = (temporal.get("TEMPORAL_NAMESPACE") or "").strip() or DEFAULT_NAMESPACE
    return address.lower(), namespace, app_settings.of(env).task_queue


def write_local_council(
    path: Path,
    models: list[str],
    chairman: str | None,
    env: Env = None,
    base_url: str | None = None,
) -> LocalCouncil:
    """Record the default council of the local stack this process runs (on the server,
    namespace and task queue of `env`), and the base URL its worker calls, until
    remove_local_council."""
    address, namespace, queue = _place(env)
    local = LocalCouncil(
        temporal_address=address,
        namespace=namespace,
        task_queue=queue,
        models=models,
        chairman=chairman,
        base_url=base_url,
        pid=os.getpid(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(local.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)
    return local


def remove_local_council(path: Path) -> None:
    """Remove the file, if this process wrote it."""
    with contextlib.suppress(OSError, ValueError, ValidationError):
        if LocalCouncil.model_validate_json(path.read_bytes()).pid == os.getpid():
            path.unlink()


def running_local_council(env: Env = None) -> LocalCouncil | None:
    """The default council of a local stack that runs now where `env` points; None when
    there is none (no file, one left by a stack that is gone, or another server's)."""
    try:
        local = LocalCouncil.model_validate_json(local_council_path(env).read_bytes())
    except (OSError, ValueError, ValidationError):
        return None
    here = (local.temporal_address, local.namespace, local.task_queue)
    if here != _place(env) or not _alive(local.pid):
        return None
    return local


def _alive(pid: int) -> bool:
    if pid <= 0:  # 0 and below name process groups, not a process
        return False
    try:
        os.kill(pid, 0)  # signal 0: only whether the process exists
    except PermissionError:  # it does, under another user
        return True
    except (OSError, OverflowError):
        return False
    return True


def council_names(config: Config) -> list[str]:
    """Every council a user can pick: the default first, then the named ones."""
    return [DEFAULT_COUNCIL, *(n for n in config.council_names() if n != DEFAULT_COUNCIL)]
