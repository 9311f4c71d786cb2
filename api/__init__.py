"""The admin service: Pulsar's admin v2 REST API over the control-plane database."""
