"""A weights profile's self-calibrated confidence mappings, per collection and retrieval mode
(services.scoring.mapping): fitted on the collection's own pseudo-questions.

Revision ID: 0008
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Profiles stored before self-calibration existed map nothing: their scores stay the weighted sums.
    op.add_column("weights_profiles", sa.Column("mappings", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")))


def downgrade() -> None:
    op.drop_column("weights_profiles", "mappings")
