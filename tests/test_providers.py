"""Several providers in one council, no proxy: two simulators with two keys stand in for
two providers (a call routed to the wrong one would be a 401); each gets exactly its
models' calls, and the record names the provider of every call. A config error stops the
worker at start with one line."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from council.models import DeliberationRecord
from harness.processes import ROOT, spawn, start_worker
from simulator import SimulatorConfig, SimulatorServer
from tests.temporal_fixtures import request, temporal_address
from workflows.deliberation import Deliberation

LOCAL_KEY = "local-key-3c9d"
CLOUD_KEY = "cloud-key-81fe"
CONFIG = """
[providers.local]
base_url = "{url}"
api_key_env = "LOCAL_KEY"
models = ["sim/atlas", "sim/bor*"]
"""


async def deliberate_on(
    temporal: WorkflowEnvironment, tmp_path: Path, local: SimulatorServer, default: dict[str, str]
) -> tuple[DeliberationRecord, str]:
    """A deliberation of the four sim models by a worker.py whose council.toml sends two of
    them to `local` (with LOCAL_KEY) and whose default provider is `default`'s; its record
    and the worker's log."""
    config = tmp_path / "council.toml"
    config.write_text(CONFIG.format(url=local.url))
    queue = f"providers-{uuid.uuid4().hex[:6]}"
    env = {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "COUNCIL_TASK_QUEUE": queue,
        "COUNCIL_CONFIG": str(config),
        "LOCAL_KEY": LOCAL_KEY,
        **default,
    }
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(max_rounds=1),
            id=f"providers-{uuid.uuid4().hex[:6]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )
        return await handle.result(), worker.log_text()
    finally:
        worker.stop()


async def test_each_provider_gets_exactly_its_models_calls(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    with (
        SimulatorServer(SimulatorConfig(api_key=LOCAL_KEY)) as local,
        SimulatorServer(SimulatorConfig(api_key=CLOUD_KEY)) as cloud,
    ):
        record, log = await deliberate_on(
            temporal,
            tmp_path,
            local,
            {"COUNCIL_LLM_BASE_URL": cloud.url, "COUNCIL_LLM_API_KEY": CLOUD_KEY},
        )

    assert record.errors == [], record.errors  # no call went to the wrong key
    local_calls = {e["model"] for e in local.log()["entries"]}
    cloud_calls = {e["model"] for e in cloud.log()["entries"]}
    assert local_calls == {"sim/atlas", "sim/borealis"}
    assert cloud_calls == {"sim/cirrus", "sim/drift"}
    assert all(e["status"] != 401 for e in local.log()["entries"] + cloud.log()["entries"])
    expected = {"sim/atlas": "local", "sim/borealis": "local"}
    for result in [*record.stage1, *record.stage2, *(r for n in record.rounds for r in n.reviews)]:
        assert result.provider == expected.get(result.model, "default"), result.model
    assert set(record.usage.by_provider) == {"local", "default"}
    assert record.usage.by_provider["local"].calls + record.usage.by_provider["default"].calls == (
        record.usage.calls
    )
    # The keys stay in the worker: not in its log, nor in the record.
    assert "models via default" in log and "local 127.0.0.1" in log
    for key in (LOCAL_KEY, CLOUD_KEY):
        assert key not in log and key not in record.model_dump_json()


async def test_a_model_routed_to_a_provider_with_the_wrong_key_fails_with_a_401(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    with SimulatorServer(SimulatorConfig(api_key=LOCAL_KEY)) as local:
        # The default provider is the same server, without its key.
        record, _ = await deliberate_on(
            temporal, tmp_path, local, {"COUNCIL_LLM_BASE_URL": local.url}
        )
    failed = {e.model: e for e in record.errors}
    assert set(failed) == {"sim/cirrus", "sim/drift"}
    assert all(e.error_type == "Unauthorized" and e.provider == "default" for e in failed.values())
    assert {r.model for r in record.stage1} == {"sim/atlas", "sim/borealis"}


def test_a_config_error_stops_the_worker_at_start_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "council.toml"
    cases = {
        '[providers.local]\nbase_url = "http://x/v1"\nmodels = ["a"]\nkey = "k"\n': (
            f"worker: {config}: providers.local.key is not a known key"
        ),
        '[providers.local]\nbase_url = "http://x/v1"\nmodels = ["a"]\napi_key_env = "NOPE_KEY"\n': (
            f"worker: {config}: providers.local.api_key_env names NOPE_KEY, which is not set"
        ),
        '[providers.local]\nbase_url = "http://x/v1"\nmodels = ["[a"]\n': (
            f"worker: {config}: providers.local.models: the pattern '[a' opens a bracket it "
            "does not close"
        ),
    }
    for text, expected in cases.items():
        config.write_text(text)
        process = spawn(
            "worker",
            [sys.executable, str(ROOT / "worker.py")],
            tmp_path / "worker.log",
            {"COUNCIL_CONFIG": str(config), "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        )
        code = process.popen.wait(timeout=60)
        lines = [line for line in process.log_text().splitlines() if line.strip()]
        assert code == 2 and lines[-1] == expected, lines
        assert "Traceback" not in process.log_text()
