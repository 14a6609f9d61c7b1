"""Changes to the deliberation's protocol, for workflow.patched.

A run that started before a change replays its history without the change's marker, so
`workflow.patched(ID)` is False there and the workflow keeps the old behaviour; new runs
record the marker and take the new path. Remove a branch only when no run that started
before it can still be open (then move its ID to workflow.deprecate_patch).
"""

# Stage 2.5 runs at least min_rounds rounds, the quality gate compares each individual
# rating with the threshold, and a round whose every call failed ends the loop.
REFINE_BY_DEFAULT = "refine-by-default"

# Hostile input: each critique's text framed in the refinement prompt, and the critiques
# one prompt carries trimmed to a budget (the user's bounded in number and size).
BOUNDED_INPUT = "bounded-input"

# Real models: token limits per stage, reviews and refinements asked for as JSON where the
# provider takes a schema (the review prompt says what the JSON holds), and no critique
# from noise (a list of labels, a passing mention, a sentence about the reviewer's own
# answer).
REAL_MODELS = "real-models"

# Stragglers: once a quorum of a stage has replied, the late calls are awaited at most
# max(grace, factor x the median reply time), then cut (council.stragglers).
STRAGGLERS = "stragglers"

# Agreement: the chairman is told how far the latest review agreed and each dissenting
# critique (asked for a section on the disagreement when it was not high), and the run
# sets the CouncilAgreement search attribute when it ends.
AGREEMENT = "agreement"

# Faults are not slowness: the straggler rule judges a late call by its own time (from its
# request's sending, in its current attempt: council.stragglers), read from Temporal by the
# straggler watch; and a reply that repeats its prompt is no answer (council.echo).
OWN_TIME_AND_ECHOES = "own-time-and-echoes"
