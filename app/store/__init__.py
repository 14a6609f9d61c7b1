"""The payload store, its prune, and DATA, where Council keeps what it stores."""
