"""The record as every surface shows it: its view model, and its renderings in a terminal."""
