"""The setup doctor: what stands between this machine and a deliberation, checked one
thing at a time (`starter.py doctor`, the page's /doctor).

Each check is a small function that returns a Check (doctor.checks); doctor.diagnose
runs them all, in a fixed order: the Temporal server, its namespace, the search
attributes, a worker on the task queue (doctor.temporal); the payload store
(doctor.store); council.toml, each provider
the councils use (whether one answers one request at a time: doctor.concurrency) and the
default council (doctor.providers). A check that cannot run
because an earlier one failed is skipped and says why. No key or key-shaped value ever
reaches a check's text.
"""

from doctor.checks import MARKS, Check, healthy, line
from doctor.run import diagnose

__all__ = ["MARKS", "Check", "diagnose", "healthy", "line"]
