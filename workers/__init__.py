"""Broker workers: enforce the resolved dispatch limits on Redis Streams.

A worker owns topic partitions, runs one dispatcher per subscription per partition, follows
the admin service's change events, and publishes stats.  Celery tasks for reporting live here
too, as thin wrappers around the jobs in ``reports``.
"""
