"""BM25 term bounds from each term's competitive (tf, dl) pairs instead of its largest tf and
shortest chunk (issue 32, the 100k BM25 figures).

MaxScore (services/retrieval/search_sql.py) leaves out the postings of the terms whose upper
bounds sum below the top `depth`'s lower bound, so the tighter a term's bound, the fewer
postings a search reads. A term's impact in a chunk, tf / (tf + k1 (1 - b) + k1 b dl / avgdl),
rises with tf and falls with dl; 0004 bounded it by the largest tf over the shortest chunk,
a pair no posting need hold (a term seen 8 times in a long chunk and once in a short one is
bounded as if seen 8 times in the short one). Here each term keeps, for every tf it has, the
shortest chunk holding it that often (`impact_tf[i]`, `impact_dl[i]`, ascending tf): the
largest impact over those pairs is the term's exact largest impact, for any k1, b and average
length, so the bound can be computed at search time for the parameters searched with. It is
Lucene's "competitive impacts" idea, without pruning the pairs another one dominates (a term
has 1.6 pairs on average at 100k SQuAD chunks, 18 at most).

Measured on the 100k-chunk bench store (200 SQuAD questions, bench/retrieval.py's sample;
docs/bm25-history.md, *Exact term bounds*): the share of a query's postings MaxScore sums fell from 0.389 to 0.338,
and a BM25 search's server CPU from a median 6.58 to 6.03 ms (eight passes each, alternated),
with the same hits (the only differences are tied scores ordered otherwise by a 1e-15 rounding).

Removing a document leaves the pairs as they were, as 0004's bounds did: a stale pair still
bounds, only more loosely. The upgrade derives the pairs from the postings (100k chunks: 1 s).

Revision ID: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("bm25_terms", sa.Column("impact_tf", sa.ARRAY(sa.Integer), server_default="{}", nullable=False))
    op.add_column("bm25_terms", sa.Column("impact_dl", sa.ARRAY(sa.Integer), server_default="{}", nullable=False))
    op.execute("""
        UPDATE bm25_terms t SET impact_tf = x.tfs, impact_dl = x.dls
        FROM (SELECT term_id, array_agg(tf ORDER BY tf) AS tfs, array_agg(dl ORDER BY tf) AS dls
              FROM (SELECT term_id, tf, min(dl) AS dl FROM bm25_postings GROUP BY term_id, tf) per_tf
              GROUP BY term_id) x
        WHERE x.term_id = t.id
    """)
    # Every writer gives the pairs (services/corpus/indexing.py): a term without them would bound
    # nothing, and the search would take it for a term without postings.
    for column in ("impact_tf", "impact_dl"):
        op.alter_column("bm25_terms", column, server_default=None)
    op.drop_column("bm25_terms", "max_tf")
    op.drop_column("bm25_terms", "min_dl")


def downgrade() -> None:
    op.add_column("bm25_terms", sa.Column("max_tf", sa.Integer))
    op.add_column("bm25_terms", sa.Column("min_dl", sa.Integer))
    op.execute("""
        UPDATE bm25_terms SET max_tf = coalesce((SELECT max(tf) FROM unnest(impact_tf) tf), 0),
                              min_dl = coalesce((SELECT min(dl) FROM unnest(impact_dl) dl), 0)
    """)
    op.alter_column("bm25_terms", "max_tf", nullable=False)
    op.alter_column("bm25_terms", "min_dl", nullable=False)
    op.drop_column("bm25_terms", "impact_dl")
    op.drop_column("bm25_terms", "impact_tf")
