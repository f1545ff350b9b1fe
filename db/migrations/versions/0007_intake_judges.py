"""Whether an intake record is to be judged: the choice POST /runs?judges=false and
`workbench import --no-judges` make, kept with the record until the assessment reads it.

Revision ID: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Records queued before this column existed were pushed with the judges on (the default).
    op.add_column("run_intake", sa.Column("judges", sa.Boolean, nullable=False, server_default=sa.true()))


def downgrade() -> None:
    op.drop_column("run_intake", "judges")
