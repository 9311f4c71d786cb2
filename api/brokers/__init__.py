"""Broker-level endpoints: dynamic configuration, health and readiness."""
