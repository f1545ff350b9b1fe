"""Pages of verdicts on the real store: the cursor round-trips, a page is an index range scan
from the cursor (never an OFFSET), and a review stamped before the last run of a page but
saved after the page was read is not passed over once the settle window holds."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from services.errors import InputError
from services.intake.intake import accept_records, mark_assessed
from services.intake.schema import ExternalRun
from services.intake.verdicts import _OF_APP, _OF_EVERY_APP, Position, reviewed_page
from services.store import transaction


def reviewed_runs(settings, count: int, *, app: str = "support") -> list[int]:  # type: ignore[no-untyped-def]
    """`count` runs of `app`, reviewed 10 s ago and unreviewed: stamp them with `review`."""
    records = [ExternalRun.model_validate({"question": f"Q{i}?", "answer": "A.", "trace_id": f"{app}-{i}"})
               for i in range(count)]
    with transaction(settings) as session:
        ids = []
        for accepted in accept_records(records, source="api", app=app, session=session):
            run_id = session.execute(text(
                "INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, "
                "retrieval_confidence, components, weights_profile, config, trace_id) VALUES ('q', 'external', "
                "'external', 'm', 'pending', 0.5, 'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', :t) RETURNING id"),
                {"t": accepted.trace_id}).scalar_one()
            mark_assessed(accepted.intake_id, run_id=run_id, session=session)
            ids.append(int(run_id))
    return ids


def review(settings, run_id: int, seconds_ago: float) -> None:  # type: ignore[no-untyped-def]
    """A review stamped `seconds_ago` (as submit_review stamps the time before it commits)."""
    with transaction(settings) as session:
        session.execute(text("UPDATE runs SET status = 'approved', reviewer = 'ana', review_version = review_version + 1, "
                             "reviewed_at = now() - make_interval(secs => :ago) WHERE id = :id"),
                        {"id": run_id, "ago": seconds_ago})


def test_a_cursor_round_trips_and_a_forged_one_is_refused():
    position = Position(datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC), 42)
    assert Position.decode(position.encode()) == position
    assert Position.since(datetime(2026, 1, 1)) == Position(datetime(2026, 1, 1, tzinfo=UTC), 0)  # naive is UTC
    for forged in ("", "!!!", "djE6eDox", position.encode()[:-3], "djI6MTox"):
        with pytest.raises(InputError, match="not a cursor"):
            Position.decode(forged)


def test_a_review_saved_after_a_page_was_read_is_not_passed_over_within_the_settle_window(clean_db, settings):
    early, late, latest = reviewed_runs(settings, 3)
    review(settings, early, seconds_ago=5)
    review(settings, latest, seconds_ago=0.3)
    start = Position.since(datetime.now(UTC) - timedelta(minutes=1))
    with transaction(settings) as session:
        settled = reviewed_page(start, app="support", settle_seconds=1.5, session=session)
        unsettled = reviewed_page(start, app="support", settle_seconds=0, session=session)
    assert [r.run_id for r in settled.runs] == [early] and [r.run_id for r in unsettled.runs] == [early, latest]
    review(settings, late, seconds_ago=0.6)  # its reviewer's clock read before `latest`'s; it commits only now
    time.sleep(1.6)
    with transaction(settings) as session:
        after_settled = reviewed_page(settled.resume, app="support", settle_seconds=1.5, session=session)
        after_unsettled = reviewed_page(unsettled.resume, app="support", settle_seconds=0, session=session)
    assert [r.run_id for r in after_settled.runs] == [late, latest]
    assert [r.run_id for r in after_unsettled.runs] == []  # without the window, `late` is lost for good


# One app's page may be read from either index: where the statistics say every reviewed run is
# that app's (earlier tests of a session leave such a table, analysed), the index over every
# app with `app` as a filter is as good a range scan from the cursor.
@pytest.mark.parametrize(("statement", "indexes"), [(_OF_APP, ("runs_reviewed_by_app", "runs_reviewed_external")),
                                                    (_OF_EVERY_APP, ("runs_reviewed_external",))])
def test_a_page_is_an_index_range_scan_from_the_cursor(clean_db, settings, statement, indexes):  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        # A handful of rows would make any plan cheap: leave the planner only the plans that read
        # the index in order (as it picks at volume, for a LIMIT), then check that one exists.
        for switch in ("seqscan", "bitmapscan", "hashjoin", "mergejoin", "sort"):
            session.execute(text(f"SET LOCAL enable_{switch} = off"))
        plan = "\n".join(row[0] for row in session.execute(text(f"EXPLAIN {statement.text}"), {
            "app": "support", "after_at": datetime.now(UTC), "after_id": 7, "settle": 1.0, "limit": 100}))
        # runs is partitioned by month (0016): each month's scan names its copy of the index on runs.
        for index, root in session.execute(text(
                "SELECT relname, pg_partition_root(oid)::regclass::text FROM pg_class WHERE relkind = 'i' AND relispartition")):
            plan = plan.replace(f"Index Scan using {index} ", f"Index Scan using {root} ")
    index = next((i for i in indexes if f"Index Scan using {i} " in plan), None)
    assert index is not None and "Sort  (cost" not in plan, plan  # no Sort node (a Merge Append's "Sort Key" is no sort)
    scan = plan.split(f"Index Scan using {index}")[1].split("\n")[1]
    assert "Index Cond:" in scan and "ROW(reviewed_at, id) > ROW(" in scan, plan  # the cursor is where the scan starts


@pytest.mark.parametrize("callers", ["on", "off"])
def test_a_page_gives_the_callers_plan_settings_back(clean_db, settings, callers):  # type: ignore[no-untyped-def]
    """A page is read with sorting and bitmap scans off (the cursor's index order, whatever the planner
    guesses); the transaction it ran in has its own settings again afterwards."""
    for run_id in reviewed_runs(settings, 3):
        review(settings, run_id, 10)
    with transaction(settings) as session:
        session.execute(text("SELECT set_config('enable_sort', :v, true), set_config('enable_bitmapscan', :v, true)"),
                        {"v": callers})
        page = reviewed_page(Position.since(datetime(2000, 1, 1, tzinfo=UTC)), app=None, session=session)
        after = session.execute(text("SELECT current_setting('enable_sort'), current_setting('enable_bitmapscan')")).one()
    assert len(page.runs) == 3 and tuple(after) == (callers, callers)
