"""The worker (`python worker.py`, `council-worker`): what it runs, and its command."""
