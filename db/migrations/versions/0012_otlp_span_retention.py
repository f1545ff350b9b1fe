"""Span rows only while their trace is open: once a trace is closed (assembled, dropped or
refused) its otlp_spans rows are deleted, and otlp_traces keeps what is still needed of them,
the number of spans it had, the ids of every span seen (so a span sent again is known for a
repeat) and the number of spans that arrived late. At production volume otlp_spans then holds
the open traces only, instead of three rows for every trace ever received.

Revision ID: 0012
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_CLOSED_TRACES_SPANS = """
UPDATE otlp_traces t SET spans = s.spans, late_spans = s.late_spans, span_ids = s.span_ids
FROM (SELECT trace_id, count(*) FILTER (WHERE NOT late) AS spans, count(*) FILTER (WHERE late) AS late_spans,
             array_agg(span_id) AS span_ids
      FROM otlp_spans GROUP BY trace_id) s
WHERE t.trace_id = s.trace_id AND t.state <> 'open'
"""
_DELETE_CLOSED = "DELETE FROM otlp_spans s USING otlp_traces t WHERE t.trace_id = s.trace_id AND t.state <> 'open'"
# Downgrade: closed traces get their span ids back as rows; which of them were late is not
# known any more, so none is marked late.
_RESTORE_CLOSED = """
INSERT INTO otlp_spans (trace_id, span_id)
SELECT trace_id, unnest(span_ids) FROM otlp_traces WHERE state <> 'open'
ON CONFLICT DO NOTHING
"""


def upgrade() -> None:
    op.add_column("otlp_traces", sa.Column("spans", sa.Integer, nullable=False, server_default="0"))
    op.add_column("otlp_traces", sa.Column("late_spans", sa.Integer, nullable=False, server_default="0"))
    op.add_column("otlp_traces", sa.Column("span_ids", ARRAY(sa.Text), nullable=False, server_default="{}"))
    op.execute(_CLOSED_TRACES_SPANS)
    op.execute(_DELETE_CLOSED)
    op.drop_column("otlp_spans", "late")


def downgrade() -> None:
    op.add_column("otlp_spans", sa.Column("late", sa.Boolean, nullable=False, server_default=sa.false()))
    op.execute(_RESTORE_CLOSED)
    op.drop_column("otlp_traces", "span_ids")
    op.drop_column("otlp_traces", "late_spans")
    op.drop_column("otlp_traces", "spans")
