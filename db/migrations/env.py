"""Alembic environment: runs on the connection db.migrate hands over."""

from alembic import context

from db.models import Base

target_metadata = Base.metadata
connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=target_metadata)
with context.begin_transaction():
    context.run_migrations()
