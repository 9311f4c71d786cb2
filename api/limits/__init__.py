"""Dispatch-rate policies at namespace, topic and subscription level, and their provenance."""
