"""Traces from OpenTelemetry exporters (POST /v1/traces): spans wait in otlp_spans until
their trace is assembled into one intake record; otlp_traces keeps every trace id seen and
what became of it (assembled, dropped with the reason, refused), so a trace is assembled
exactly once however often its spans are sent; spans that arrive after are marked late.

Revision ID: 0011
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_NOW = sa.func.now()


def upgrade() -> None:
    op.drop_constraint("run_intake_source", "run_intake", type_="check")
    op.create_check_constraint("run_intake_source", "run_intake", "source IN ('import', 'api', 'otlp')")
    op.create_table(
        "otlp_traces",
        sa.Column("trace_id", sa.Text, primary_key=True),  # 32 hex digits, as OTLP/JSON writes it
        sa.Column("service_name", sa.Text),
        sa.Column("api_key_id", sa.Integer, sa.ForeignKey("api_keys.id", ondelete="SET NULL")),
        sa.Column("judges", sa.Boolean, nullable=False, server_default=sa.true()),  # POST /v1/traces?judges=false
        sa.Column("first_received_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("last_received_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="open"),
        sa.Column("reason", sa.Text),
        sa.Column("intake_id", sa.BigInteger, sa.ForeignKey("run_intake.id", ondelete="SET NULL")),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("state IN ('open', 'assembled', 'dropped', 'refused')", name="otlp_traces_state"),
    )
    op.create_index("otlp_traces_open", "otlp_traces", ["last_received_at"], postgresql_where=sa.text("state = 'open'"))
    op.create_table(
        "otlp_spans",
        sa.Column("trace_id", sa.Text, sa.ForeignKey("otlp_traces.trace_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("span_id", sa.Text, primary_key=True),
        sa.Column("parent_span_id", sa.Text),
        # Arrived after its trace was closed (assembled, dropped or refused): counted, never assembled.
        sa.Column("late", sa.Boolean, nullable=False, server_default=sa.false()),
        # What the assembly reads of the span; emptied (NULL) once the trace is closed, the ids kept
        # so a span sent again is known for a repeat.
        sa.Column("facts", JSONB),
    )


def downgrade() -> None:
    op.drop_table("otlp_spans")
    op.drop_index("otlp_traces_open", table_name="otlp_traces")
    op.drop_table("otlp_traces")
    op.execute("DELETE FROM run_intake WHERE source = 'otlp'")
    op.drop_constraint("run_intake_source", "run_intake", type_="check")
    op.create_check_constraint("run_intake_source", "run_intake", "source IN ('import', 'api')")
