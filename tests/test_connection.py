"""Any Temporal cluster through the SDK's environment configuration: TEMPORAL_* variables
and TOML profiles map to Client.connect options; a worker and the CLI run against a dev
server in a non-default namespace, configured by variables and by a profile."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, TLSConfig

from app.codec.encryption import new_key
from app.temporal import connection
from council.models import DeliberationRecord
from harness import processes
from simulator import SimulatorServer
from tests.temporal_fixtures import FOUR_MODELS

NAMESPACE = "council-prod"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any TEMPORAL_* or COUNCIL_* setting, plus extra."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "COUNCIL_"))}
    return {**base, **extra}


# ---- option mapping ---------------------------------------------------------------------


def test_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    # HOME and XDG_CONFIG_HOME point at an empty directory: no default profile file either.
    options = connection.connect_options({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    assert options == {"target_host": "localhost:7233", "namespace": "default"}


def test_variables_map_to_connect_options() -> None:
    options = connection.connect_options(
        {
            "TEMPORAL_ADDRESS": "temporal.internal:7233",
            "TEMPORAL_NAMESPACE": "council",
            "TEMPORAL_GRPC_META_X_TEAM": "research",
        }
    )
    assert options == {
        "target_host": "temporal.internal:7233",
        "namespace": "council",
        "rpc_metadata": {"x-team": "research"},
    }
    # Empty variables count as unset (a compose file passes `${TEMPORAL_TLS:-}`).
    assert connection.connect_options(
        {"TEMPORAL_ADDRESS": "", "TEMPORAL_TLS": "", "TEMPORAL_API_KEY": " "}
    ) == {
        "target_host": "localhost:7233",
        "namespace": "default",
    }


def test_api_key_turns_tls_on_unless_told_otherwise() -> None:
    cloud = connection.connect_options(
        {
            "TEMPORAL_ADDRESS": "council.a1b2c.tmprl.cloud:7233",
            "TEMPORAL_NAMESPACE": "council.a1b2c",
            "TEMPORAL_API_KEY": "tc-key",
        }
    )
    assert cloud["api_key"] == "tc-key" and cloud["tls"] is True
    assert (
        cloud["target_host"] == "council.a1b2c.tmprl.cloud:7233"
        and cloud["namespace"] == "council.a1b2c"
    )
    plain = connection.connect_options({"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"})
    assert plain["api_key"] == "k" and plain["tls"] is False


@pytest.fixture(scope="module")
def client_certificate(tmp_path_factory) -> dict[str, Path]:
    """A real client certificate and key (self-signed), and a CA file, as PEM files."""
    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "council-worker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    files = {
        "cert": folder / "client.pem",
        "key": folder / "client.key",
        "ca": folder / "ca.pem",
    }
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files["ca"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def test_tls_client_certificate_from_variables(client_certificate: dict[str, Path]) -> None:
    options = connection.connect_options(
        {
            "TEMPORAL_ADDRESS": "temporal.example.com:7233",
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(client_certificate["cert"]),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(client_certificate["key"]),
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(client_certificate["ca"]),
            "TEMPORAL_TLS_SERVER_NAME": "temporal.example.com",
        }
    )
    tls = options["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.client_cert == client_certificate["cert"].read_bytes()
    assert tls.client_private_key == client_certificate["key"].read_bytes()
    assert tls.server_root_ca_cert == client_certificate["ca"].read_bytes()
    assert tls.domain == "temporal.example.com"
    # The same material inline, as a secret store would inject it.
    inline = connection.connect_options(
        {
            "TEMPORAL_TLS_CLIENT_CERT_DATA": client_certificate["cert"].read_text(),
            "TEMPORAL_TLS_CLIENT_KEY_DATA": client_certificate["key"].read_text(),
        }
    )
    assert inline["tls"].client_cert == client_certificate["cert"].read_bytes()


def test_tls_client_certificate_from_a_profile(
    tmp_path: Path, client_certificate: dict[str, Path]
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        f"""
[profile.default]
address = "localhost:7233"

[profile.prod]
address = "temporal.example.com:7233"
namespace = "council"

[profile.prod.tls]
client_cert_path = "{client_certificate["cert"]}"
client_key_path = "{client_certificate["key"]}"
server_name = "temporal.example.com"

[profile.cloud]
address = "council.a1b2c.tmprl.cloud:7233"
namespace = "council.a1b2c"
api_key = "tc-profile-key"
"""
    )
    prod = connection.connect_options(
        {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "prod"}
    )
    assert prod["target_host"] == "temporal.example.com:7233" and prod["namespace"] == "council"
    assert prod["tls"].client_cert == client_certificate["cert"].read_bytes()
    assert prod["tls"].client_private_key == client_certificate["key"].read_bytes()
    cloud = connection.connect_options(
        {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "cloud"}
    )
    assert cloud["api_key"] == "tc-profile-key" and cloud["tls"] is True
    # Variables override the profile.
    overridden = connection.connect_options(
        {
            "TEMPORAL_CONFIG_FILE": str(config),
            "TEMPORAL_PROFILE": "prod",
            "TEMPORAL_NAMESPACE": "staging",
        }
    )
    assert (
        overridden["namespace"] == "staging"
        and overridden["target_host"] == "temporal.example.com:7233"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS must be true or false (got 'maybe')"),
        (
            {"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml"},
            "TEMPORAL_CONFIG_FILE: no such file: /nonexistent/temporal.toml",
        ),
        ({"TEMPORAL_PROFILE": "nope"}, "TEMPORAL_PROFILE: Profile 'nope' not found"),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/client.pem"},
            "TEMPORAL_TLS_CLIENT_CERT_PATH: cannot read /nonexistent/client.pem",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": "/a.pem", "TEMPORAL_TLS_CLIENT_CERT_DATA": "x"},
            "Cannot specify both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_CERT_DATA",
        ),
    ],
)
def test_bad_configuration_is_one_line_naming_the_variable(
    env: dict[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(connection.ConfigError) as caught:
        connection.connect_options({"HOME": str(tmp_path), **env})
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bad_toml_names_the_problem(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "x"\napi_key = "tc-secret-in-file\n')
    with pytest.raises(connection.ConfigError) as caught:
        connection.connect_options({"TEMPORAL_CONFIG_FILE": str(config)})
    text = str(caught.value)
    assert "Temporal client configuration" in text and "TOML parse error at line 3" in text
    assert "\n" not in text and "tc-secret-in-file" not in text  # the error does not quote the line


async def test_api_key_reaches_the_server(temporal, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dev server accepts any key without TLS: the key travels in the request headers."""
    address = temporal.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    monkeypatch.setenv("TEMPORAL_API_KEY", "tc-test-api-key")
    monkeypatch.setenv("TEMPORAL_TLS", "false")
    client = await connection.connect()
    assert client.api_key == "tc-test-api-key"
    assert (await client.count_workflows()).count >= 0
    # With TLS on against a plaintext server, the error names the address, not the key.
    monkeypatch.setenv("TEMPORAL_TLS", "true")
    with pytest.raises(connection.ServerUnreachable) as caught:
        await connection.connect()
    assert address in str(caught.value) and "tc-test-api-key" not in str(caught.value)


async def test_a_missing_namespace_is_one_line(temporal) -> None:
    address = temporal.client.service_client.config.target_host
    env = clean_env(TEMPORAL_ADDRESS=address, TEMPORAL_NAMESPACE="council-nowhere")
    for command in (["starter.py", "list"], ["worker.py"]):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            cwd=processes.ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 2, err.decode()
        assert err.decode().endswith(
            "TEMPORAL_NAMESPACE: there is no namespace 'council-nowhere' on the Temporal server "
            f"at {address}\n"
        )
        assert err.decode().count("\n") == 1


# ---- a worker and the CLI in a non-default namespace -------------------------------------


@pytest.fixture(scope="module")
def prod_server(tmp_path_factory) -> Iterator[processes.Process]:
    """A second dev server whose only extra namespace is council-prod (no UI)."""
    folder = tmp_path_factory.mktemp("prod")
    server = processes.start_temporal(
        folder / "temporal.db",
        port=processes.free_port(),
        ui_port=None,
        namespaces=(NAMESPACE,),
        log_path=folder / "temporal.log",
    )
    yield server
    server.stop()


async def run_starter(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "starter.py",
        *args,
        cwd=processes.ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode, out.decode(), err.decode()


async def test_worker_and_cli_in_a_namespace_by_variables_and_by_profile(
    prod_server: processes.Process, simulator: SimulatorServer, tmp_path: Path
) -> None:
    simulator.set_faults(None)
    address = prod_server.extra["address"]
    queue = f"council-ns-{uuid.uuid4().hex[:6]}"
    key = new_key()
    config = tmp_path / "temporal.toml"
    config.write_text(f'[profile.prod]\naddress = "{address}"\nnamespace = "{NAMESPACE}"\n')
    common = {
        "COUNCIL_TASK_QUEUE": queue,
        "COUNCIL_PAYLOAD_KEY": key,
        "COUNCIL_MODELS": ",".join(FOUR_MODELS),
        "COUNCIL_STORE": str(tmp_path / "store"),
    }
    by_profile = clean_env(TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="prod", **common)
    by_variables = clean_env(TEMPORAL_ADDRESS=address, TEMPORAL_NAMESPACE=NAMESPACE, **common)

    # The worker finds the server and namespace through the profile, registers the search
    # attributes there, and encrypts.
    log = tmp_path / "worker.log"
    worker = processes.spawn(
        "worker",
        [sys.executable, str(processes.ROOT / "worker.py")],
        log,
        {
            **{k: "" for k in os.environ if k.startswith(("TEMPORAL_", "COUNCIL_"))},
            **{k: v for k, v in by_profile.items() if k.startswith(("TEMPORAL_", "COUNCIL_"))},
            "COUNCIL_LLM_BASE_URL": simulator.url,
        },
    )
    try:
        processes.wait_for(
            lambda: "worker ready" in worker.log_text(), "worker", worker, timeout=60
        )
        assert f"namespace {NAMESPACE}" in worker.log_text()
        runs = await asyncio.gather(
            *(
                run_starter(
                    env,
                    "start",
                    "Is tea better than coffee?",
                    "--max-rounds",
                    "1",
                    "--wait",
                    "--json",
                )
                for env in (by_variables, by_profile)
            )
        )
        ids = []
        for code, out, err in runs:
            assert code == 0, err
            ids.append(DeliberationRecord.model_validate_json(out).id)
        code, out, err = await run_starter(by_profile, "list", "--json")
        assert code == 0, err
        listed = {row["id"]: row for row in json.loads(out)}
        for wid in ids:
            assert listed[wid]["status"] == "completed"
            assert (
                listed[wid]["reason"] != "-"
            )  # CouncilTerminationReason, registered by the worker
    finally:
        worker.stop()
    assert "payloads encrypted" in worker.log_text()
    assert key not in worker.log_text()

    # The runs are in council-prod, not in default.
    in_prod = await Client.connect(
        address, namespace=NAMESPACE, data_converter=pydantic_data_converter
    )
    in_default = await Client.connect(address, data_converter=pydantic_data_converter)
    for wid in ids:
        assert (await in_prod.get_workflow_handle(wid).describe()).status.name == "COMPLETED"
        with pytest.raises(RPCError, match="not found"):
            await in_default.get_workflow_handle(wid).describe()
