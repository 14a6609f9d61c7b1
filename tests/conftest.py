"""Shared fixtures: see the plugin modules listed below."""

pytest_plugins = ["tests.sim_fixtures", "tests.temporal_fixtures", "tests.web_fixtures"]
