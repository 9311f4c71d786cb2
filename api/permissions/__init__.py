"""Pulsar's permission API: produce and consume grants of roles on namespaces and topics."""
