"""The publish and subscribe rates: Pulsar's throttles on producers and subscribe requests."""
