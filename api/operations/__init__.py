"""Subscription and topic operations: skip, clear-backlog, expire, reset-cursor, peek,
examine, internal stats, unload and lookup."""
