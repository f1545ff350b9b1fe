"""Answering pipeline: weights profiles, runs, iterations, events, LLM call log and cache.

Revision ID: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_NOW = sa.func.now()


def upgrade() -> None:
    op.create_table(
        "weights_profiles",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("weights", JSONB, nullable=False),
        sa.Column("high", sa.Float, nullable=False),
        sa.Column("medium", sa.Float, nullable=False),
        sa.Column("low", sa.Float, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_by", sa.Text, nullable=False, server_default=""),
        sa.Column("notes", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.UniqueConstraint("name", "version"),
    )
    # At most one active profile.
    op.create_index("weights_profiles_one_active", "weights_profiles", ["active"], unique=True,
                    postgresql_where=sa.text("active"))
    op.execute(
        "INSERT INTO weights_profiles (name, version, weights, high, medium, low, active, created_by, notes) VALUES "
        "('default', 1, '{\"top_score\": 0.30, \"score_gap\": 0.20, \"consensus\": 0.15, "
        "\"bm25_dense_agreement\": 0.15, \"low_spread\": 0.10, \"graph_support\": 0.05, \"low_diversity\": 0.05}', "
        "0.85, 0.70, 0.50, true, 'system', 'the design note''s weights and thresholds')"
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("preset", sa.Text, nullable=False),
        sa.Column("collection", sa.Text, nullable=False, server_default="default"),
        sa.Column("source", sa.Text, nullable=False, server_default="ask"),
        sa.Column("backend", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("final_answer", sa.Text, nullable=False, server_default=""),
        sa.Column("citations", JSONB, nullable=False, server_default="[]"),
        sa.Column("final_confidence", sa.Float, nullable=False),
        sa.Column("final_level", sa.Text, nullable=False),
        sa.Column("retrieval_confidence", sa.Float, nullable=False),
        sa.Column("components", ARRAY(sa.Float), nullable=False),
        sa.Column("reflection_score", sa.Float),
        sa.Column("grade", sa.Integer),
        sa.Column("crag_verdict", sa.Text),
        sa.Column("signals", JSONB, nullable=False, server_default="{}"),
        sa.Column("route", ARRAY(sa.Text), nullable=False, server_default="{}"),
        sa.Column("best_iteration", sa.Integer, nullable=False, server_default="0"),
        sa.Column("iterations_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("weights_profile_id", sa.Integer, sa.ForeignKey("weights_profiles.id")),
        sa.Column("weights_profile", sa.Text, nullable=False),
        sa.Column("config", JSONB, nullable=False),
        sa.Column("outcome_note", sa.Text, nullable=False, server_default=""),
        sa.Column("latency_ms", sa.Float, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
    )
    op.create_index("runs_status_created", "runs", ["status", "created_at"])
    op.create_table(
        "run_iterations",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("run_id", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("query_used", sa.Text, nullable=False),
        sa.Column("sub_queries", JSONB, nullable=False, server_default="[]"),
        sa.Column("retrieval", JSONB, nullable=False),
        sa.Column("components", ARRAY(sa.Float), nullable=False),
        sa.Column("raw_metrics", JSONB, nullable=False),
        sa.Column("retrieval_confidence", sa.Float, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("level", sa.Text, nullable=False),
        sa.Column("crag", JSONB),
        sa.Column("answer", sa.Text, nullable=False, server_default=""),
        sa.Column("citations", JSONB, nullable=False, server_default="[]"),
        sa.Column("reflection", JSONB),
        sa.Column("grade", JSONB),
        sa.Column("gaps", JSONB, nullable=False, server_default="[]"),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("decision_reason", sa.Text, nullable=False, server_default=""),
        sa.Column("signals", JSONB, nullable=False, server_default="{}"),
        sa.Column("latency_ms", JSONB, nullable=False, server_default="{}"),
        sa.Column("errors", JSONB, nullable=False, server_default="[]"),
        sa.UniqueConstraint("run_id", "ordinal"),
    )
    op.create_table(
        "run_events",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("run_id", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("elapsed_ms", sa.Float, nullable=False),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("data", JSONB, nullable=False, server_default="{}"),
    )
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("run_id", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="CASCADE"), index=True),
        sa.Column("iteration", sa.Integer),
        sa.Column("backend", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("prompt_version", sa.Text, nullable=False),
        sa.Column("temperature", sa.Float, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("latency_ms", sa.Float, nullable=False, server_default="0"),
        sa.Column("cached", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("cache_key", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
    )
    op.create_table(
        "llm_cache",
        sa.Column("cache_key", sa.Text, primary_key=True),
        sa.Column("backend", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("prompt_version", sa.Text, nullable=False),
        sa.Column("response", JSONB, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
    )


def downgrade() -> None:
    for table in ("llm_cache", "llm_calls", "run_events", "run_iterations", "runs", "weights_profiles"):
        op.drop_table(table)
