"""A run from outside: start it, find and read it, steer and stop it, list and search it,
follow it. Every surface (the CLI, the web page, the OpenAI-compatible API, the MCP
server) acts on deliberations through these modules, so one rule holds everywhere: ids
follow council.ids, only workflows of the Deliberation type are acted on, an id names one
deliberation for good, and a steering request applies within seconds or never. None of
them runs in a workflow.

runs.starting      start a run, its id, its thread, its page in the Temporal UI
runs.finding       find a run by id and read it: status, record, replies, attachments
runs.steering      steer a run (steering Updates within seconds or never), stop it
runs.listing       list and search runs, the stuck ones among them
runs.following     follow a run's progress, one follower per run in a process
runs.stuck         a run whose workflow task keeps failing, and ending it
runs.priority      who a run is for: its priority and fairness key
runs.quota         how much one tenant may start
runs.attributes    the search attributes a run starts with, registered on a server
runs.shared        one producer per key in a process, read by every subscriber
"""
