"""The COUNCIL_* settings (app.settings): one typed object, read once at start, every
variable named in one place, each bad value refused in one line that names its variable,
numbers in ASCII digits only, and no secret shown."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

import starter
from activities.settings import GatewaySettings
from app.settings import environment as app_settings
from app.settings.environment import Settings, SettingsError
from council.config import DefaultProvider
from harness.processes import ROOT
from service import command as worker_command
from simulator.settings import SimulatorSettings
from web import __main__ as web_main

pytestmark = pytest.mark.fast

PER_SECOND = "COUNCIL_MAX_CALLS_PER_SECOND"
CONNECT = "COUNCIL_LLM_CONNECT_TIMEOUT"
WINDOW = "COUNCIL_LLM_CONTEXT_WINDOW"
OUTPUT = "COUNCIL_LLM_STRUCTURED_OUTPUT"
AT_ONCE = "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS"
RATE = "COUNCIL_LLM_MAX_REQUESTS_PER_SECOND"


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
        assert settings.metrics_host == "127.0.0.1"  # loopback, as the page
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
            "COUNCIL_METRICS_HOST": " [::] ",
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
    assert settings.metrics_host == "::"
    assert settings.mcp_progress_seconds == 2.5


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("COUNCIL_WEB_PORT", "70000", "COUNCIL_WEB_PORT must be a port number from 1 to 65535"),
        ("COUNCIL_WEB_PORT", "8⁰80", "COUNCIL_WEB_PORT must be a port number from 1 to 65535"),
        ("COUNCIL_METRICS_PORT", "٩٤٦٤", "COUNCIL_METRICS_PORT must be a port number from 1 to"),
        *(
            (
                "COUNCIL_METRICS_HOST",
                value,
                f"COUNCIL_METRICS_HOST must be an IP address to listen on: 127.0.0.1 (loopback, "
                f"the default), ::1, 0.0.0.0 (every IPv4 address), :: or one of this "
                f"machine's (got {value!r})",
            )
            for value in ("localhost", "0.0.0.0:9464", "256.1.1.1")
        ),
        (
            "COUNCIL_MAX_CONCURRENT_CALLS",
            "0",
            "COUNCIL_MAX_CONCURRENT_CALLS must be a whole number",
        ),
        (
            "COUNCIL_MAX_CALLS_PER_SECOND",
            "inf",
            f"{PER_SECOND} must be a number of calls per second",
        ),
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
        (
            "COUNCIL_WEB_SEARCH_RUNS",
            "0",
            "COUNCIL_WEB_SEARCH_RUNS must be a whole number of runs from 1 to 1000000",
        ),
        *(
            (
                "COUNCIL_MCP_PROGRESS_SECONDS",
                value,
                "COUNCIL_MCP_PROGRESS_SECONDS must be a number of seconds from 0.5 to 60",
            )
            for value in ("0", "61", "١٠", "often")
        ),
        # The default provider's, in the same object and the same words.
        ("COUNCIL_LLM_STREAM", "maybe", "COUNCIL_LLM_STREAM must be one of 1/0, true/false"),
        ("COUNCIL_LLM_CONNECT_TIMEOUT", "0", f"{CONNECT} must be a number of seconds above 0"),
        ("COUNCIL_LLM_READ_TIMEOUT", "١٢", "COUNCIL_LLM_READ_TIMEOUT must be a number of seconds"),
        ("COUNCIL_LLM_CONTEXT_WINDOW", "4⁰⁹⁶", f"{WINDOW} must be a number of tokens from 256 to"),
        ("COUNCIL_LLM_STRUCTURED_OUTPUT", "xml", f"{OUTPUT} must be one of auto, json_schema"),
        ("COUNCIL_LLM_MAX_CONCURRENT_REQUESTS", "0", f"{AT_ONCE} must be a whole number from 1"),
        ("COUNCIL_LLM_MAX_REQUESTS_PER_SECOND", "1e5", f"{RATE} must be a number of requests"),
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
        "COUNCIL_LLM_API_KEY": "sk-llm-5e1f",
        "OPENROUTER_API_KEY": "sk-or-c0ffee",
    }
    settings = Settings.read(secrets)
    for value in secrets.values():
        assert value not in repr(settings) and value not in str(settings.model_dump())
    assert settings.secret("web_token") == "web-token-d41d8"
    # A bad value next to a secret: the line names the variable, never the secret.
    with pytest.raises(SettingsError) as caught:
        Settings.read({**secrets, "COUNCIL_WEB_PORT": "x"})
    assert not any(value in str(caught.value) for value in secrets.values())


def test_the_default_providers_variables_are_fields_of_the_same_object() -> None:
    settings = Settings.read(
        {
            "COUNCIL_LLM_BASE_URL": " http://127.0.0.1:11434/v1 ",
            "COUNCIL_LLM_API_KEY": " ",
            "OPENROUTER_API_KEY": "sk-or-c0ffee",
            "COUNCIL_LLM_STREAM": "off",
            "COUNCIL_LLM_EXTRA_HEADERS": '{"api-key": "azure-key-1"}',
            "COUNCIL_LLM_CONTEXT_WINDOW": "32_768",
            "COUNCIL_LLM_STRUCTURED_OUTPUT": "JSON_Object",
            "COUNCIL_LLM_MAX_REQUESTS_PER_SECOND": "2.5",
            "COUNCIL_LLM_IMAGES": "yes",
        }
    )
    gateway = GatewaySettings.of(settings.llm)
    assert gateway.base_url == "http://127.0.0.1:11434/v1" and not gateway.stream
    # COUNCIL_LLM_API_KEY unset (white space only): OPENROUTER_API_KEY's key.
    assert gateway.api_key == "sk-or-c0ffee" and settings.llm.key_variable == "OPENROUTER_API_KEY"
    assert gateway.extra_headers == {"api-key": "azure-key-1"}
    assert (gateway.context_window, gateway.structured_output) == (32768, "json_object")
    assert gateway.max_requests_per_second == 2.5 and gateway.sees_images("any")
    assert "sk-or" not in repr(settings) and "azure-key-1" not in repr(settings)
    assert {"sk-or-c0ffee", "azure-key-1"} <= set(settings.secrets())
    # Unset, the worker's defaults (OpenRouter, streaming, no key).
    default = GatewaySettings.of(Settings.read({}).llm)
    assert default == GatewaySettings()


def test_a_flag_that_stands_in_for_a_variable_keeps_its_rule_and_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert web_main.parse_args(["--port", "8090"]).port == 8090
    for value in ("0", "8⁰80"):
        with pytest.raises(SystemExit):
            web_main.parse_args(["--port", value])
        err = capsys.readouterr().err
        assert f"--port: must be a port number from 1 to 65535 (got {value!r})" in err


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
    assert err.count("\n") == 1 and "COUNCIL_MAX_CALLS_PER_SECOND must be a number of calls" in err


# Every COUNCIL_* variable is read by the settings object (app.settings; the simulator's
# own, tooling's, by simulator.settings): no other code reads one from the environment, or
# from a mapping of variables it was handed. Writing one into the environment of a process
# it starts is fine.
SETTINGS_MODULES = {"app/settings/environment.py", "simulator/settings.py"}
READERS = ("get", "getenv", "pop")
VARIABLE = re.compile(r"COUNCIL_\w+|OPENROUTER_API_KEY")


def python_files() -> list[Path]:
    """Every module of the code base: all but the tests and virtual environments."""
    skipped = ("tests", "data", ".git", "node_modules")
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not any(part in skipped or part.startswith(".venv") for part in path.parts)
        and path.relative_to(ROOT).parts[0] not in skipped
    )


def variable_names(tree: ast.Module) -> dict[str, str]:
    """Module-level names that hold a variable's name (DATASETS_ENV = "COUNCIL_...")."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str) and VARIABLE.fullmatch(node.value.value):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names[target.id] = node.value.value
        elif isinstance(node, ast.Assign) and "variables()" in ast.unparse(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = ast.unparse(node.value)
    return names


def reads_of_the_environment(path: Path, named: dict[str, str] | None = None) -> list[str]:
    """Where `path` reads a COUNCIL_* variable itself: env.get("..."), os.getenv("..."),
    os.environ["..."], "..." in os.environ, or the same through a name that holds it;
    one `line: variable` each."""
    tree = ast.parse(path.read_text())
    named = {**(named or {}), **variable_names(tree)}

    def variable(node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value if VARIABLE.fullmatch(node.value) else None
        if isinstance(node, ast.Name):
            return named.get(node.id)
        if isinstance(node, ast.Attribute):
            return named.get(node.attr)
        return None

    found = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in READERS and node.args:
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            key = node.left
        if (name := variable(key)) is not None:
            found.append(f"{node.lineno}: {name}")
    return found


def test_no_code_reads_a_council_variable_but_the_settings() -> None:
    files = python_files()
    named: dict[str, str] = {}
    for path in files:
        named.update(variable_names(ast.parse(path.read_text())))
    reads = [
        f"{where}:{read}"
        for path in files
        if (where := str(path.relative_to(ROOT))) not in SETTINGS_MODULES
        for read in reads_of_the_environment(path, named)
    ]
    assert reads == [], "read outside the settings: " + "; ".join(reads)


def test_the_check_sees_a_read(tmp_path: Path) -> None:
    """Control: each way of reading a variable from the environment is found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n"
        'QUEUE = "COUNCIL_TASK_QUEUE"\n'
        'queue = os.environ.get("COUNCIL_TASK_QUEUE")\n'
        'port = os.getenv("COUNCIL_WEB_PORT")\n'
        "again = env[QUEUE]\n"
        'key = "OPENROUTER_API_KEY" in os.environ\n'
        'os.environ["COUNCIL_DATA"] = "written, not read"\n'
    )
    assert reads_of_the_environment(sample) == [
        "3: COUNCIL_TASK_QUEUE",
        "4: COUNCIL_WEB_PORT",
        "5: COUNCIL_TASK_QUEUE",
        "6: OPENROUTER_API_KEY",
    ]


def variables_read() -> set[str]:
    """Every variable a settings model reads."""
    models: list[type[BaseModel]] = [Settings, DefaultProvider, SimulatorSettings]
    return {
        field.validation_alias
        for model in models
        for field in model.model_fields.values()
        if isinstance(field.validation_alias, str)  # (not the nested provider's own field)
    }


def test_every_variable_is_documented_for_users() -> None:
    """A variable the code reads is named in the README or a guide under docs/, so that
    nobody has to read the code to find it."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = set(VARIABLE.findall("\n".join(p.read_text(encoding="utf-8") for p in docs)))
    assert {"COUNCIL_TASK_QUEUE", "COUNCIL_LLM_API_KEY", "COUNCIL_SIM_DISAGREE"} <= variables_read()
    assert sorted(variables_read() - named) == []


# pydantic-settings is read through its public API only (its package's own names, custom
# sources through settings_customise_sources): a private name may change in any release
# and stop every process at start.
def private_uses(path: Path) -> list[str]:
    """Where a module that imports pydantic_settings touches a private part of it: a
    submodule, an underscore name imported, passed as a keyword or looked up, or a method
    of one of its classes overridden under an underscore name. One `line: name` each."""
    import pydantic_settings

    tree = ast.parse(path.read_text())
    bases: dict[str, type] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pydantic_settings"):
            if node.module != "pydantic_settings":
                found.append(f"{node.lineno}: {node.module}")
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{node.lineno}: {alias.name}")
                elif isinstance(value := getattr(pydantic_settings, alias.name, None), type):
                    bases[alias.asname or alias.name] = value
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: {alias.name}"
                for alias in node.names
                if alias.name.startswith("pydantic_settings.")
            ]
    if not bases:
        return found  # (the imports: in order)

    def private(name: str) -> bool:
        return name.startswith("_") and not name.endswith("__")

    def theirs(name: str) -> bool:
        return private(name) and any(hasattr(base, name) for base in bases.values())

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [f"{node.lineno}: {k.arg}" for k in node.keywords if k.arg and private(k.arg)]
        elif isinstance(node, ast.Attribute) and theirs(node.attr):
            found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.ClassDef):
            inherited = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in bases]
            found += [
                f"{item.lineno}: {item.name}"
                for item in node.body
                if inherited
                and isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and any(hasattr(bases[b], item.name) for b in inherited)
                and private(item.name)
            ]
    return sorted(found, key=lambda where: int(where.split(":")[0]))


def test_the_settings_use_only_pydantic_settings_public_api() -> None:
    users = [p for p in python_files() if "pydantic_settings" in p.read_text()]
    assert ROOT / "app/settings/environment.py" in users
    found = [f"{p.relative_to(ROOT)}:{where}" for p in users for where in private_uses(p)]
    assert found == []


def test_the_check_sees_a_private_use(tmp_path: Path) -> None:
    """Control: each way the settings once touched pydantic-settings' private API."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from pydantic_settings import BaseSettings, EnvSettingsSource\n"
        "from pydantic_settings.sources.utils import parse_env_vars\n"
        "class Variables(EnvSettingsSource):\n"
        "    def _load_env_vars(self):\n"
        "        return parse_env_vars({}, True, True, None)\n"
        "    def _ours(self):\n"
        "        return self._apply_case_sensitive\n"
        "class Settings(BaseSettings):\n"
        "    pass\n"
        "Settings(_build_sources=((), {}))\n"
    )
    assert private_uses(sample) == [
        "2: pydantic_settings.sources.utils",
        "4: _load_env_vars",
        "7: _apply_case_sensitive",
        "10: _build_sources",
    ]


def test_the_settings_read_only_what_they_are_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings.read reads the mapping it is given, never the environment or a .env file
    behind it; constructed bare, the defaults."""
    monkeypatch.setenv("COUNCIL_TASK_QUEUE", "from-the-environment")
    assert Settings.read({"COUNCIL_WEB_PORT": "9091"}).task_queue == "council"
    assert Settings().task_queue == "council"
    assert Settings.read().task_queue == "from-the-environment"


# The scripts of the local stack and the tool servers' side read no variable themselves:
# demo.py and up.py take their settings from the settings object and make's QUESTION and
# SIM_LATENCY as arguments; a stdio tool server inherits from the environment its caller
# hands in (the worker's ToolBox: activities may not import the settings, app/).
HANDED_IN = ("demo.py", "up.py", "activities/mcp_tools.py")


def environment_reads(path: Path) -> list[str]:
    """Where a module reads the process's environment itself: os.environ[...], its get or
    pop, `in os.environ`, os.getenv, or os.environ handed to a function that reads it.
    Handing it all on to a child ({**os.environ}) is not reading it. One `line: code`
    each."""

    def environ(node: ast.expr) -> bool:
        return ast.unparse(node) == "os.environ"

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        read = (
            (isinstance(node, ast.Subscript) and environ(node.value))
            or (isinstance(node, ast.Compare) and any(environ(c) for c in node.comparators))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (
                    (environ(node.func.value) and node.func.attr in READERS)
                    or ast.unparse(node.func) == "os.getenv"
                )
            )
            or (isinstance(node, ast.Call) and any(environ(a) for a in node.args))
        )
        if read:
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {code}" for line, code in sorted(found)]


def test_the_scripts_and_the_tool_servers_read_no_variable_themselves() -> None:
    reads = [f"{name}:{r}" for name in HANDED_IN for r in environment_reads(ROOT / name)]
    assert reads == []


def test_the_environment_check_sees_a_read(tmp_path: Path) -> None:
    """Control: each way these modules once read a variable is found; handing the whole
    environment on is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n"
        'question = os.environ.get("QUESTION")\n'
        'inherited = {n: os.environ[n] for n in ("PATH",) if n in os.environ}\n'
        'pace = os.getenv("SIM_LATENCY")\n'
        "latency = sim_latency(os.environ)\n"
        "child = {**os.environ}\n"
    )
    assert [line.split(":")[0] for line in environment_reads(sample)] == ["2", "3", "3", "4", "5"]


def test_up_takes_make_ups_latency_as_its_argument() -> None:
    import up

    assert up.sim_latency(" ") == ("2-5", (2.0, 5.0))
    assert up.sim_latency("0")[0] == "0"
    with pytest.raises(ValueError, match=r"^SIM_LATENCY must be "):
        up.sim_latency("soon")
    assert up.main(["--latency", "soon"]) == 2
