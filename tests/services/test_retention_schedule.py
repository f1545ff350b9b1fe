"""The daily prune (RETENTION_DAILY): a thread that prunes as `workbench prune` does and creates
the months ahead, skips a turn another process holds, and refuses a bad age when it starts."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from services.errors import InputError
from services.review.retention_schedule import _PRUNE_LOCK_KEY, DailyPrune
from services.settings import Settings
from services.store import get_engine
from tests.services.test_retention import NOW, _run_ids, _table, months  # noqa: F401 - the fixture


def _wait_for(condition, seconds: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_daily_prune_prunes_and_creates_the_months_ahead(months: dict[str, list[int]], settings: Settings) -> None:  # noqa: F811
    daily = DailyPrune(settings, every_s=3600, first_after_s=0.0, clock=lambda: NOW)
    daily.start()
    try:
        _wait_for(lambda: bool(daily.reports))
    finally:
        daily.stop()
    assert len(daily.reports) == 1 and daily.reports[0].runs_removed == 4
    assert _run_ids() == {*months["july_kept"], *months["august"], *months["november"]}
    assert _table("runs_2027_01")  # November's month and the two after it
    with pytest.raises(InputError):
        DailyPrune(settings.model_copy(update={"retention_older_than": "-1d"}))


def test_a_turn_another_process_holds_is_skipped(months: dict[str, list[int]], settings: Settings) -> None:  # noqa: F811
    before = _run_ids()
    with get_engine(settings).connect() as holder:
        holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PRUNE_LOCK_KEY})
        daily = DailyPrune(settings, clock=lambda: NOW)
        assert daily.run_once() is None and daily.skipped == 1
        holder.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PRUNE_LOCK_KEY})
    assert _run_ids() == before
    assert daily.run_once() is not None and _run_ids() != before  # the lock free again, the turn prunes
