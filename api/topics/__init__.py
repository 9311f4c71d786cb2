"""Persistent topics and their subscriptions: ``/admin/v2/persistent``."""
