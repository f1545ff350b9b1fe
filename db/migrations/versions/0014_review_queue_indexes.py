"""Indexes the Review queue and its calibration need at production volume (issue 32), measured
with bench/volume.py on a million runs before this migration added them:

- runs_pending_queue serves the queue's first page in its order (most likely wrong first):
  1.33 s -> 0.066 s;
- runs_pending_queue_by_level the same order within one chosen level (a Level filter):
  4.9 s -> 0.32 s for LOW;
- runs_verdicts makes the calibration fit's reads of every verdict's confidence index-only.

On a large store the upgrade takes a while and blocks writes to runs while it builds them (a
million runs: tens of seconds each); build them beforehand with CREATE INDEX CONCURRENTLY and
the same names to avoid that (IF NOT EXISTS below then leaves them).

Revision ID: 0014
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The queue's order (services/review/queue._QUEUE_SQL): P(wrong) first, then confidence, then id.
_QUEUE_ORDER = "(coalesce(p_supported, final_confidence)), final_confidence, id"
INDEXES = {
    "runs_pending_queue": f"ON runs ({_QUEUE_ORDER}) WHERE status = 'pending'",
    "runs_pending_queue_by_level": f"ON runs (final_level, {_QUEUE_ORDER}) WHERE status = 'pending'",
    "runs_verdicts": "ON runs (status) INCLUDE (final_confidence) WHERE status IN ('approved', 'flagged', 'corrected')",
}


def upgrade() -> None:
    for name, definition in INDEXES.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} {definition}")


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
