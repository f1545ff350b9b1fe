"""The reads that grow with the store (the Review queue, its counts, Document trends, the Tuning
page's run matrix, exports) go to the read engine: with DATABASE_READ_URL set they are served by
the replica, so they take load off the primary. A read URL naming no server proves it: each of
them fails naming DATABASE_READ_URL, while the primary is up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import SecretStr

import services.store as store
from services.errors import DatabaseUnavailableError
from services.review.export import ExportFilters, count_export_records, export_records
from services.review.queue import queue_counts, review_queue
from services.scoring.run_matrix import load_run_matrix, question_texts, run_store_epoch
from services.settings import Settings


def _documents() -> Any:
    from app_pages.documents import cached_trends

    return cached_trends.__wrapped__(None, None, 1)  # type: ignore[attr-defined]


READS: dict[str, Callable[[], Any]] = {
    "review_queue": review_queue, "queue_counts": queue_counts, "load_run_matrix": load_run_matrix,
    "run_store_epoch": run_store_epoch, "question_texts": lambda: question_texts([1]),
    "export_records": export_records, "count_export_records": lambda: count_export_records(ExportFilters()),
    "document_trends": _documents,
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_that_grow_with_the_store_use_the_read_url(name, settings: Settings, clean_db, monkeypatch):
    assert READS[name]() is not None  # on the primary (no read URL): it works
    broken = settings.model_copy(update={"database_read_url": SecretStr("postgresql://nobody@127.0.0.1:1/none")})
    monkeypatch.setattr(store, "get_settings", lambda: broken)
    with pytest.raises(DatabaseUnavailableError, match="DATABASE_READ_URL"):
        READS[name]()


def test_the_run_store_epoch_changes_when_runs_are_truncated_not_when_one_is_added(clean_db, settings):  # type: ignore[no-untyped-def]
    """The Tuning page keeps its run matrix per epoch: a TRUNCATE (as tests' clean_db, or a store
    emptied) must give a new one, though runs is partitioned by month and has no file itself."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from tests.services.test_export import make_run
    from tests.services.test_export import store as store_runs

    store_runs(make_run(), created_at=datetime(2026, 10, 5, tzinfo=UTC))
    before = run_store_epoch()
    store_runs(make_run())
    assert run_store_epoch() == before
    with store.transaction(settings) as session:
        session.execute(text("TRUNCATE runs CASCADE"))
    assert run_store_epoch() != before
