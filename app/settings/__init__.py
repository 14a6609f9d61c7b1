"""The settings: the COUNCIL_* variables, council.toml and its councils, the CLI's council flags."""
