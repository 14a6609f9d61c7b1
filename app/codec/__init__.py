"""Payload encryption and the codec server that shows payloads to the Temporal UI."""
