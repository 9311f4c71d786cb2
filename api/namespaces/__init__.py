"""Namespaces: ``/admin/v2/namespaces``."""
