"""The COUNCIL_* settings (app.settings): one typed object, read once at start, every
variable named in one place, each bad value refused in one line that names its variable,
numbers in ASCII digits only, and no secret shown."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import starter
from app import settings as app_settings
from app.settings import Settings, SettingsError
from harness.processes import ROOT
from service import command as worker_command
from web import __main__ as web_main

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def settings_read_again() -> Iterator[None]:
    """After the test (and its changes to the environment are undone), the process's
    settings are the environment's again."""
    yield
    app_settings.load()


def test_unset_and_empty_variables_give_the_defaults() -> None:
    empty = {name: "" for name in Settings.variables().values()}
    for given in ({}, empty, {name: "  " for name in Settings.variables().values()}):
        settings = Settings.read(given)
        assert settings.task_queue == "council" and settings.ui_url is None
        assert settings.default_models == [] and settings.default_chairman is None
        assert (settings.web_host, settings.web_port) == ("127.0.0.1", 8080)
        assert settings.web_token is None and settings.payload_key is None
        assert settings.max_concurrent_calls == 200 and settings.metrics_port is None
        # (Each tenant's and run's share, and the calls that wait: activities.shares.)
        assert settings.max_calls_per_tenant is settings.max_calls_per_run is None
        assert settings.max_waiting_calls is None
        assert settings.log_level == "INFO" and settings.simulated is False
        assert (settings.quota_runs, settings.quota_bytes, settings.quota_window) == (
            300,
            256 * 1024 * 1024,
            3600,
        )


def test_each_variable_is_read_into_its_type() -> None:
    settings = Settings.read(
        {
            "COUNCIL_TASK_QUEUE": " mine ",
            "COUNCIL_UI_URL": "https://ui.example.com/",
            "COUNCIL_MODELS": "a/1, b/2,,c/3",
            "COUNCIL_CHAIRMAN": " b/2 ",
            "COUNCIL_DATA": "/tmp/council-data",
            "COUNCIL_SIMULATED": "yes",
            "COUNCIL_WEB_PORT": "9090",
            "COUNCIL_WEB_ALLOWED_HOSTS": "council.example, *.corp.example",
            "COUNCIL_CODEC_CORS_ORIGINS": "https://ui.example.com",
            "COUNCIL_MAX_CONCURRENT_CALLS": "8",
            "COUNCIL_MAX_CALLS_PER_SECOND": "2.5",
            "COUNCIL_MAX_CALLS_PER_TENANT": "6",
            "COUNCIL_MAX_CALLS_PER_RUN": "7",
            "COUNCIL_MAX_WAITING_CALLS": "0",
            "COUNCIL_METRICS_PORT": "9464",
            "COUNCIL_LOG_LEVEL": "debug",
            "COUNCIL_MCP_PROGRESS_SECONDS": "2.5",
            "UNRELATED": "x",
        }
    )
    assert settings.task_queue == "mine" and settings.ui_url == "https://ui.example.com"
    assert settings.default_models == ["a/1", "b/2", "c/3"] and settings.default_chairman == "b/2"
    assert settings.data_dir == Path("/tmp/council-data") and settings.simulated is True
    assert settings.web_port == 9090
    assert settings.web_allowed_hosts == ["council.example", "*.corp.example"]
    assert settings.codec_cors_origins == ["https://ui.example.com"]
    assert (settings.max_concurrent_calls, settings.max_calls_per_second) == (8, 2.5)
    assert (settings.max_calls_per_tenant, settings.max_calls_per_run) == (6, 7)
    assert settings.max_waiting_calls == 0
    assert (settings.metrics_port, settings.log_level) == (9464, "DEBUG")
    assert settings.mcp_progress_seconds == 2.5


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("COUNCIL_WEB_PORT", "70000", "COUNCIL_WEB_PORT must be a port number from 1 to 65535"),
        ("COUNCIL_WEB_PORT", "8⁰80", "COUNCIL_WEB_PORT must be a port number from 1 to 65535"),
        ("COUNCIL_METRICS_PORT", "٩٤٦٤", "COUNCIL_METRICS_PORT must be a port number, 1 to 65535"),
        ("COUNCIL_MAX_CONCURRENT_CALLS", "0", "COUNCIL_MAX_CONCURRENT_CALLS must be a positive"),
        ("COUNCIL_MAX_CALLS_PER_SECOND", "inf", "COUNCIL_MAX_CALLS_PER_SECOND must be a positive"),
        *(
            (name, value, f"{name} must be a whole number from 1 to COUNCIL_MAX_CONCURRENT_CALLS")
            for name in ("COUNCIL_MAX_CALLS_PER_TENANT", "COUNCIL_MAX_CALLS_PER_RUN")
            for value in ("0", "201", "٣", "half")
        ),
        ("COUNCIL_MAX_WAITING_CALLS", "-1", "COUNCIL_MAX_WAITING_CALLS must be a whole number"),
        ("COUNCIL_SIMULATED", "maybe", "COUNCIL_SIMULATED must be one of 1/0, true/false"),
        ("COUNCIL_LOG_LEVEL", "loud", "COUNCIL_LOG_LEVEL must be one of DEBUG, INFO"),
        ("COUNCIL_QUOTA_RUNS", "-1", "COUNCIL_QUOTA_RUNS must be a whole number of runs from 0"),
        ("COUNCIL_QUOTA_BYTES", "1e9", "COUNCIL_QUOTA_BYTES must be a whole number of bytes"),
        ("COUNCIL_QUOTA_WINDOW", "59", "COUNCIL_QUOTA_WINDOW must be a whole number of seconds"),
        *(
            (
                "COUNCIL_MCP_PROGRESS_SECONDS",
                value,
                "COUNCIL_MCP_PROGRESS_SECONDS must be a number of seconds from 0.5 to 60",
            )
            for value in ("0", "61", "١٠", "often")
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_its_variable(
    variable: str, value: str, message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.read({variable: value})
    text = str(caught.value)
    assert text.startswith(message) and f"(got {value!r})" in text and "\n" not in text


def test_no_secret_is_shown() -> None:
    secrets = {
        "COUNCIL_WEB_TOKEN": "web-token-d41d8",
        "COUNCIL_CODEC_TOKEN": "codec-token-98f0",
        "COUNCIL_PAYLOAD_KEY": "payload-key-00b2",
        "COUNCIL_PAYLOAD_OLD_KEYS": "k0:old-key-77aa",
    }
    settings = Settings.read(secrets)
    for value in secrets.values():
        assert value not in repr(settings) and value not in str(settings.model_dump())
    assert settings.secret("web_token") == "web-token-d41d8"
    # A bad value next to a secret: the line names the variable, never the secret.
    with pytest.raises(SettingsError) as caught:
        Settings.read({**secrets, "COUNCIL_WEB_PORT": "x"})
    assert not any(value in str(caught.value) for value in secrets.values())


def test_read_once_at_start_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNCIL_TASK_QUEUE", "first")
    assert app_settings.load().task_queue == "first"
    monkeypatch.setenv("COUNCIL_TASK_QUEUE", "second")
    assert app_settings.current().task_queue == "first"  # what the process started with
    assert app_settings.load().task_queue == "second"  # the next start reads again


@pytest.mark.parametrize("main", [starter.main, worker_command.main, web_main.main])
def test_every_entry_point_refuses_a_bad_setting_before_anything_starts(
    main, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing may try to connect
    monkeypatch.setenv("COUNCIL_MAX_CALLS_PER_SECOND", "lots")
    argv = ["list"] if main is starter.main else []
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "COUNCIL_MAX_CALLS_PER_SECOND must be a positive" in err


# Where a process's code lives: every COUNCIL_* it reads is read by app.settings, except
# the worker's provider settings (COUNCIL_LLM_*, activities.settings), the simulator's
# own, and the environment a command hands to the processes it starts.
SURFACES = (
    "app",
    "web",
    "mcp_server",
    "workflows",
    "service",
    "starter.py",
    "worker.py",
    "up.py",
)
READERS = ("get", "getenv", "__getitem__", "pop")


def reads_of_the_environment(path: Path) -> list[str]:
    """COUNCIL_* names read as env.get("..."), os.getenv("..."), os.environ["..."]."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        name = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in READERS and node.args:
                name = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = node.slice
        if isinstance(name, ast.Constant) and re.fullmatch(r"COUNCIL_\w+", str(name.value)):
            found.append(str(name.value))
    return found


def test_no_surface_reads_a_council_variable_itself() -> None:
    files = []
    for place in SURFACES:
        target = ROOT / place
        files += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    read = {
        str(path.relative_to(ROOT)): names
        for path in files
        if path.name != "settings.py" and (names := reads_of_the_environment(path))
    }
    assert read == {}


def test_the_check_sees_a_read(tmp_path: Path) -> None:
    """Control: a variable read from the environment directly is found."""
    sample = tmp_path / "sample.py"
    sample.write_text('import os\nqueue = os.environ.get("COUNCIL_TASK_QUEUE")\n')
    assert reads_of_the_environment(sample) == ["COUNCIL_TASK_QUEUE"]
