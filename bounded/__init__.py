"""Work that a hostile input could make long or large (reading a PDF, turning a fetched
page into text), run in a process of its own within CPU, memory and wall-clock limits:
`bounded.process`. It imports nothing of ours, so that both the runtime (`app/`) and the
activities (`activities/`) can use it.
"""
