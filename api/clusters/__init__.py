"""Clusters: ``/admin/v2/clusters`` (one local cluster)."""
