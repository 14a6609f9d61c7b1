"""A user's input becoming a deliberation request: the front door, attachments, PDF text."""
