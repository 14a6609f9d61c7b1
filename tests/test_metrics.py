"""The worker's Prometheus metrics: with COUNCIL_METRICS_PORT set, /metrics serves the
SDK's temporal_* series and the council_* series of the model calls and deliberations, on
loopback only unless COUNCIL_METRICS_HOST widens it. (127.0.0.2 is loopback too, but not
127.0.0.1: a socket bound to 127.0.0.1 refuses it, one bound to every address answers.)"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from council.models import DeliberationRecord
from harness.processes import ROOT, free_port, start_worker
from simulator import SimulatorServer
from tests.temporal_fixtures import FOUR_MODELS, request, worker_env
from tests.test_compose import SERVED_BY_THE_WORKER
from workflows.deliberation import Deliberation

# Another loopback address: what a socket bound to 127.0.0.1 alone does not answer on.
OTHER_LOOPBACK = "127.0.0.2"
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    found = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match["labels"] or ""))
            found.append((match["name"], labels, float(match["value"])))
    return found


def total(found, name: str, **labels: str) -> float:
    return sum(
        v for n, ls, v in found if n == name and all(ls.get(k) == x for k, x in labels.items())
    )


async def test_the_worker_serves_sdk_and_council_metrics(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    port = free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue, COUNCIL_METRICS_PORT=str(port))
    sim.set_faults({"sim/drift": {"errors": {"503": 1.0}, "max_faults": 1, "stages": ["stage1"]}})
    worker = await asyncio.to_thread(start_worker, env, tmp_path / "worker.log")
    try:
        record: DeliberationRecord = await temporal.client.execute_workflow(
            Deliberation.run,
            request(max_rounds=1),
            id=f"metrics-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
        # By default the metrics listen on loopback's 127.0.0.1 alone, as the page does.
        assert not answers(OTHER_LOOPBACK, port)
        assert f"Prometheus metrics on http://127.0.0.1:{port}/metrics" in worker.log_text()
    finally:
        worker.stop()
    found = samples(text)

    # The SDK's own series.
    assert any(name.startswith("temporal_") for name, _, _ in found)
    assert total(found, "temporal_workflow_completed_total") >= 1 or any(
        name.startswith("temporal_activity_execution") for name, _, _ in found
    )
    # Every model's calls, tokens and latency, by stage, matching the record's usage.
    for model in FOUR_MODELS:
        stage1 = total(found, "council_prompt_tokens_total", model=model, stage="stage1")
        assert stage1 > 0, model
        assert total(found, "council_prompt_tokens_total", model=model) == (
            record.usage.by_model[model].prompt_tokens
        )
        assert total(found, "council_completion_tokens_total", model=model) == (
            record.usage.by_model[model].completion_tokens
        )
        assert total(found, "council_model_calls_total", model=model, outcome="ok") == (
            record.usage.by_model[model].calls
        )
        assert total(found, "council_model_call_latency_seconds_count", model=model) >= 1
    # Latency buckets in seconds, so that a quantile of a call of a few seconds means
    # something (the SDK's default bounds are 50 to 10,000).
    bounds = {
        float(ls["le"])
        for n, ls, _ in found
        if n == "council_model_call_latency_seconds_bucket" and ls["le"] != "+Inf"
    }
    assert {0.5, 1.0, 5.0, 60.0} <= bounds, sorted(bounds)
    # The one 503 was retried, and is counted as such.
    assert (
        total(
            found,
            "council_model_call_retries_total",
            model="sim/drift",
            error_type="ProviderUnavailable",
        )
        == 1
    )
    assert total(found, "council_model_calls_total", model="sim/drift", outcome="retrying") == 1
    # Reported cost (the simulator reports 0), and the run's end by its reason.
    assert total(found, "council_model_cost_usd_count", model="sim/atlas") >= 1
    reason = str(record.iteration.terminated_reason)
    assert total(found, "council_deliberations_finished_total", reason=reason) == 1
    # How far the final review agreed, by level (the alpha, 1 when all ratings were equal).
    assert record.agreement is not None and record.agreement.level is not None
    assert total(found, "council_agreement_count", level=record.agreement.level) == 1
    # Every series the Grafana dashboard reads is served.
    served = {name for name, _, _ in found}
    assert set(SERVED_BY_THE_WORKER) <= served, set(SERVED_BY_THE_WORKER) - served


def test_a_bad_metrics_port_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "worker.py"],
        cwd=ROOT,
        env={"COUNCIL_METRICS_PORT": "eighty", "TEMPORAL_ADDRESS": "127.0.0.1:1", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == "worker: COUNCIL_METRICS_PORT must be a port number from 1 to 65535 (got 'eighty')\n"
    )


# Reviewers that disagree systematically: atlas and borealis rate every answer 1, drift
# every answer 5, cirrus all 1 but drift's 5 (Krippendorff's alpha -0.375).
AT_ODDS = {
    "sim/atlas": {"rating": 1},
    "sim/borealis": {"rating": 1},
    "sim/cirrus": {"rating": 1, "ratings_by_author": {"sim/drift": 5}},
    "sim/drift": {"rating": 5},
}


async def test_a_review_whose_alpha_is_negative_ends_the_run_with_metrics_on(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    """A metric takes no negative value: the agreement histogram once raised inside the
    workflow, whose task then failed for good (the run never ended). Nothing that only
    observes a run can fail it now, and the histogram counts a negative alpha as 0."""
    port = free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue, COUNCIL_METRICS_PORT=str(port))
    sim.set_faults(AT_ODDS)
    worker = await asyncio.to_thread(start_worker, env, tmp_path / "worker.log")
    try:
        record: DeliberationRecord = await asyncio.wait_for(
            temporal.client.execute_workflow(
                Deliberation.run,
                request(max_rounds=1),
                id=f"metrics-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
                result_type=DeliberationRecord,
            ),
            timeout=120,
        )
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
    finally:
        worker.stop()
    assert record.agreement is not None and record.agreement.alpha is not None
    assert record.agreement.alpha < 0 and record.agreement.level == "low"
    found = samples(text)
    assert total(found, "council_agreement_count", level="low") == 1
    assert total(found, "council_agreement_sum", level="low") == 0
    assert total(found, "council_observer_failures_total") == 0
    assert "Metric value cannot be negative" not in worker.log_text()


async def test_metrics_host_widens_where_the_metrics_listen(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    port = free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    env = worker_env(
        temporal, sim, queue, COUNCIL_METRICS_PORT=str(port), COUNCIL_METRICS_HOST="0.0.0.0"
    )
    worker = await asyncio.to_thread(start_worker, env, tmp_path / "worker.log")
    try:
        assert f"Prometheus metrics on http://0.0.0.0:{port}/metrics" in worker.log_text()
        async with httpx.AsyncClient() as http:
            for host in ("127.0.0.1", OTHER_LOOPBACK):
                reply = await http.get(f"http://{host}:{port}/metrics", timeout=10)
                assert reply.status_code == 200 and "temporal_" in reply.text, host
    finally:
        worker.stop()


def test_a_metrics_host_that_is_not_an_address_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "worker.py"],
        cwd=ROOT,
        env={"COUNCIL_METRICS_HOST": "localhost", "TEMPORAL_ADDRESS": "127.0.0.1:1", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "worker: COUNCIL_METRICS_HOST must be an IP address to listen on: 127.0.0.1 "
        "(loopback, the default), ::1, 0.0.0.0 (every IPv4 address), :: or one of this "
        "machine's (got 'localhost')\n"
    )
