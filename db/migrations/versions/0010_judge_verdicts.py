"""The judge's verdict on each iteration's answer (services.judging), the run's P(supported),
by which the review queue orders what is most likely wrong first, and the judge's models
refitted from reviewers' verdicts (versions kept; at most one active).

Revision ID: 0010
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Runs stored before the judge existed have no verdict: they stay NULL, never a made-up P.
    op.add_column("runs", sa.Column("p_supported", sa.Float, nullable=True))
    op.add_column("run_iterations", sa.Column("verdict", JSONB, nullable=True))
    op.create_table(
        "judge_models",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("version", sa.Text, nullable=False, unique=True),
        sa.Column("model", JSONB, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_by", sa.Text, nullable=False, server_default=""),
        sa.Column("notes", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
    )
    op.create_index("judge_models_one_active", "judge_models", ["active"], unique=True,
                    postgresql_where=sa.text("active"))


def downgrade() -> None:
    op.drop_table("judge_models")
    op.drop_column("run_iterations", "verdict")
    op.drop_column("runs", "p_supported")
