"""Resource groups (Pulsar PIP-82): CRUD, and attaching tenants, namespaces and topics."""
