"""The protocol changes made behind workflow.patched before worker versioning.

Since then every run is pinned to the build it started on (app.deployment): a protocol
change is a new build, and no run of this build took the old paths. The workflow marks
these patches deprecated (so that no marker is written any more); the next build drops
them.
"""

RETIRED = (
    "refine-by-default",
    "bounded-input",
    "real-models",
    "stragglers",
    "agreement",
    "own-time-and-echoes",
)
