"""Retention deletes a month's iterations without the two triggers that would redo, row set by
row set, what it recomputes anyway (issue 32.4).

Pruning a month (services/review/retention.py) deletes the removed runs' iterations, then drops
or rewrites the month's table of runs, then recounts the month's days in the Document trends
rollup (`refresh_document_day_rollup`) and deletes the removed runs' rows of the drill-down's
index (`document_run_index`). The statement triggers on deleted iterations (0015's rollup, 0018's
index) did the same work first, for nothing: their result is recounted or deleted in the same
transaction. They now fire only when the transaction has not set `workbench.pruning` to 'on'
(set_config(..., true), which ends with the transaction); retention sets it around its deletes
of iterations and nothing else does. A writer that sets it itself takes on retention's duty:
recounting what its deletes touched.

Measured on a store of 30,000 runs (bench/volume.py --runs 30000, 2026-11-28T16:25Z, load 0.8-1.2): deleting
the 9,364 iterations of a month's unreviewed runs took 1.14-1.17 s with the triggers, 0.10 s
without (README, Retention).

Revision ID: 0020
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

PRUNING_SETTING = "workbench.pruning"
_TRIGGERS = ("document_day_rollup_iterations_delete", "document_run_index_iterations_delete")
_EVENT = "AFTER DELETE ON run_iterations REFERENCING OLD TABLE AS old_iterations FOR EACH STATEMENT"
_UNLESS_PRUNING = f"WHEN (current_setting('{PRUNING_SETTING}', true) IS DISTINCT FROM 'on')"


def _recreate(when: str) -> None:
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON run_iterations")
        op.execute(f"CREATE TRIGGER {name} {_EVENT} {when} EXECUTE FUNCTION {name}()")


def upgrade() -> None:
    _recreate(_UNLESS_PRUNING)


def downgrade() -> None:
    _recreate("")
