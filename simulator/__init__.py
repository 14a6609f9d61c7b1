"""An OpenAI-compatible server with simulated council members, for the offline demo,
tests and benchmarks. Everything it serves is labelled as simulated.

    python -m simulator --port 8800 [--faults JSON-or-file] [--latency S] [--seed N]

In-process: `with SimulatorServer() as sim: ...` (see simulator.server). Importing this
package starts nothing.
"""

from simulator.config import SimulatorConfig
from simulator.faults import FaultConfig, FaultSpec
from simulator.personas import DEFAULT_MODELS, PERSONAS, persona_for
from simulator.server import SimulatorServer, build_app

__all__ = [
    "DEFAULT_MODELS",
    "PERSONAS",
    "FaultConfig",
    "FaultSpec",
    "SimulatorConfig",
    "SimulatorServer",
    "build_app",
    "persona_for",
]
