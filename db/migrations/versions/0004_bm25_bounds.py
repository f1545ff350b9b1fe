"""BM25 term bounds for MaxScore pruning: the largest tf and the shortest chunk per term.

Revision ID: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("bm25_terms", sa.Column("max_tf", sa.Integer))
    op.add_column("bm25_terms", sa.Column("min_dl", sa.Integer))
    # A term whose postings are all gone bounds nothing: 0 / 0 make its upper bound 0.
    op.execute("""
        UPDATE bm25_terms t SET max_tf = coalesce(x.max_tf, 0), min_dl = coalesce(x.min_dl, 0)
        FROM bm25_terms t2
        LEFT JOIN (SELECT term_id, max(tf) AS max_tf, min(dl) AS min_dl FROM bm25_postings GROUP BY term_id) x
               ON x.term_id = t2.id
        WHERE t2.id = t.id
    """)
    op.alter_column("bm25_terms", "max_tf", nullable=False)
    op.alter_column("bm25_terms", "min_dl", nullable=False)


def downgrade() -> None:
    op.drop_column("bm25_terms", "min_dl")
    op.drop_column("bm25_terms", "max_tf")
