"""A process that used the Temporal client exits with its own status every time.

The SDK's Tokio threads can hand an RPC's result back while the interpreter finalizes
and abort it (exit status 134, or a segmentation fault). app.temporal.connection.run releases the
runtime and joins those threads before Python exits.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

from harness.processes import ROOT
from tests.temporal_fixtures import temporal_address

SCRIPT = textwrap.dedent(
    """
    import gc, sys, weakref
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from app.temporal import connection

    seen = {}

    async def main():
        client = await connection.connect(target_host=sys.argv[1])
        async for _ in client.list_workflows(page_size=5):
            pass
        await client.workflow_service.get_system_info(GetSystemInfoRequest())
        seen["runtime"] = weakref.ref(connection.runtime())
        return 7

    code = connection.run(main())
    released = seen["runtime"]() is None and connection._runtime is None
    sys.exit(code if released else 3)
    """
)


async def client_process(address: str) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SCRIPT, address, cwd=ROOT, stderr=asyncio.subprocess.DEVNULL
    )
    return await asyncio.wait_for(process.wait(), 60)


async def test_the_runtime_is_released_before_exit(temporal) -> None:
    assert await client_process(temporal_address(temporal)) == 7  # 3: still alive at exit


async def test_short_client_processes_exit_with_their_own_status(temporal) -> None:
    address = temporal_address(temporal)
    codes = []
    for _ in range(4):
        codes += await asyncio.gather(*(client_process(address) for _ in range(3)))
    assert codes == [7] * 12  # 134 or -11: the abort at interpreter exit
