"""The audit log: ``GET /admin/v2/audit``."""
