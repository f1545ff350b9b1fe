"""Runs from other systems: API keys, the intake queue, and the trace id on assessed runs.

`run_intake` holds every accepted record (file import or HTTP API) until the assessment
turns it into a run; `runs.trace_id` and `runs.external` keep the source system's id and
metadata on that run so verdicts can flow back.

Revision ID: 0006
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_NOW = sa.func.now()


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        # The key itself is never stored: only its sha256 (hex) and a prefix people can recognise.
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.Text, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "run_intake",
        sa.Column("id", sa.BigInteger, primary_key=True),
        # Unique when given; PostgreSQL lets any number of rows leave it NULL.
        sa.Column("trace_id", sa.Text, unique=True),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("api_key_id", sa.Integer, sa.ForeignKey("api_keys.id", ondelete="SET NULL")),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default="queued"),
        sa.Column("error", sa.Text),
        sa.Column("run_id", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="SET NULL")),
        sa.Column("assessed_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("source IN ('import', 'api')", name="run_intake_source"),
        sa.CheckConstraint("status IN ('queued', 'assessed', 'failed')", name="run_intake_status"),
    )
    # The assessment claims the oldest queued rows; this keeps that cheap however many are done.
    op.create_index("run_intake_queued", "run_intake", ["id"], postgresql_where=sa.text("status = 'queued'"))
    op.add_column("runs", sa.Column("trace_id", sa.Text))
    op.add_column("runs", sa.Column("external", JSONB))
    op.create_index("runs_trace_id", "runs", ["trace_id"], unique=True)


def downgrade() -> None:
    op.drop_index("runs_trace_id", table_name="runs")
    op.drop_column("runs", "external")
    op.drop_column("runs", "trace_id")
    op.drop_table("run_intake")
    op.drop_table("api_keys")
