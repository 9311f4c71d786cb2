"""``GET /admin/v2/whoami``: the caller's role and the tenants it may administer."""
