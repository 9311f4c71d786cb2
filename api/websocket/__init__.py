"""Pulsar's WebSocket API on the admin service: producers, consumers and readers in JSON frames.

``router`` serves ``/ws/v2/producer|consumer|reader/persistent/...``; ``frames`` encodes and
decodes Pulsar's frames; ``sessions`` runs one connection on the public ``sluice.Client``.
"""
