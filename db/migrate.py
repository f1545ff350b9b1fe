"""Apply Alembic migrations to head; called on every start (a no-op when current)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# One process at a time runs migrations, even when several start together.
_MIGRATION_LOCK_KEY = 727_001


def alembic_config(*, embedding_dim: int) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["embedding_dim"] = embedding_dim
    return config


def upgrade_to_head(engine: Engine, *, embedding_dim: int) -> None:
    config = alembic_config(embedding_dim=embedding_dim)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})")
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
