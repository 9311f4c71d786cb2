"""Alembic migrations of the control-plane schema, runnable from code or the ``alembic`` CLI.

``upgrade(url)`` / ``downgrade(url, revision)`` build the Alembic configuration in code, so an
installed Sluice can migrate without an ``alembic.ini`` in the working directory.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

HERE = Path(__file__).resolve().parent


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at this folder and ``url``."""
    config = Config()
    config.set_main_option("script_location", str(HERE))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision``."""
    command.downgrade(alembic_config(url), revision)
