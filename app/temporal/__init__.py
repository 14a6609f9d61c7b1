"""Connecting to Temporal, and the worker deployment every run is pinned to."""
