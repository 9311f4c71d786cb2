"""``python -m sluice.admin_cli``: run ``sluice-admin``."""

from sluice.admin_cli.runner import main

raise SystemExit(main())
