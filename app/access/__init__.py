"""Who and what a server of ours answers: Host names, access tokens, a request body's cap."""
