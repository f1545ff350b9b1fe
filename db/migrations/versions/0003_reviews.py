"""Review queue: current review state on runs (version-guarded) and append-only history.

Revision ID: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("review_version", sa.Integer, nullable=False, server_default="0"))
    op.add_column("runs", sa.Column("reviewer", sa.Text))
    op.add_column("runs", sa.Column("reviewed_at", sa.DateTime(timezone=True)))
    op.add_column("runs", sa.Column("corrected_answer", sa.Text))
    op.add_column("runs", sa.Column("flag_reason", sa.Text))
    op.add_column("runs", sa.Column("review_comment", sa.Text))
    op.create_table(
        "review_history",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("run_id", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("reviewer", sa.Text, nullable=False),
        sa.Column("previous_status", sa.Text, nullable=False),
        sa.Column("new_status", sa.Text, nullable=False),
        sa.Column("flag_reason", sa.Text),
        sa.Column("corrected_answer", sa.Text),
        sa.Column("comment", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        # One landed action per version: a second save of the same version cannot land.
        sa.UniqueConstraint("run_id", "version"),
    )
    op.create_index("review_history_run", "review_history", ["run_id", "version"])


def downgrade() -> None:
    op.drop_table("review_history")
    for column in ("review_comment", "flag_reason", "corrected_answer", "reviewed_at", "reviewer", "review_version"):
        op.drop_column("runs", column)
