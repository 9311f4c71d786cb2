"""Tenants: ``/admin/v2/tenants``."""
