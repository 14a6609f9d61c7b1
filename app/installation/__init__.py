"""The installation: its commands, its packages and extras, and the files that hold its keys."""
