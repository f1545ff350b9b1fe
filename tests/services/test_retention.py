"""Retention on the real store (runs partitioned by month, migration 0016, their children too, 0021;
tests/services/test_retention_children.py): pruning drops or
rewrites whole months, keeps reviewed runs with everything recorded about them, leaves nothing
orphaned, says beforehand what would go, refuses bad ages; a run of a month without its table
still lands; a DELETE of runs still removes what the foreign keys used to."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from db.models import RUN_CHILDREN
from services.cli import app
from services.errors import InputError
from services.review.retention import ensure_month_partitions, parse_age, plan_prune, prune
from services.store import transaction

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)  # 90 days before: 2026-08-29; months before August go

_RUN = """
INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence,
                  components, weights_profile, config, created_at, reviewed_at, reviewer, trace_id, app)
VALUES (:q, 'balanced', 'offline', 'm', :status, 0.5, 'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', :at, :reviewed_at,
        :reviewer, :trace, :app) RETURNING id
"""
# Each row carries its run's created_at (`at`): the tables are partitioned by the run's month (0021).
_CHILDREN = (
    "INSERT INTO run_iterations (run_id, run_created_at, ordinal, query_used, retrieval, components, raw_metrics, "
    "retrieval_confidence, confidence, level, decision) "
    "VALUES (:r, :at, 0, 'q', '{}', ARRAY[0.5], '{}', 0.5, 0.5, 'LOW', 'COMPLETE')",
    "INSERT INTO run_events (run_id, run_created_at, seq, ts, elapsed_ms, event_type, message) "
    "VALUES (:r, :at, 1, :at, 0, 'e', '')",
    "INSERT INTO llm_calls (run_id, run_created_at, backend, model, operation, prompt_version, temperature, outcome) "
    "VALUES (:r, :at, 'offline', 'm', 'generate', 'v1', 0, 'ok')",
    "INSERT INTO run_intake (app, trace_id, payload, source, status, run_id) "
    "VALUES ('support', 'trace-' || :r, '{}', 'api', 'assessed', :r)",
)


def _store(at: datetime, *, verdict: str | None = None, history_only: bool = False, trace: str | None = None) -> int:
    """A run created `at` with one row in every child table; `verdict` reviews it, `history_only`
    gives it a review action (sent to review by hand) and no verdict."""
    with transaction() as session:
        run_id = int(session.execute(text(_RUN), {
            "q": f"question {at:%Y-%m-%d}", "status": verdict or "pending", "at": at,
            "reviewed_at": at + timedelta(days=1) if verdict else None, "reviewer": "ana" if verdict else None,
            "trace": trace, "app": "support" if trace else None}).scalar_one())
        for statement in _CHILDREN:
            session.execute(text(statement), {"r": run_id, "at": at})
        if verdict or history_only:
            session.execute(text(
                "INSERT INTO review_history (run_id, run_created_at, version, action, reviewer, previous_status, "
                "new_status) VALUES (:r, :at, 1, :action, 'ana', 'auto_accepted', :status)"),
                {"r": run_id, "at": at, "action": "approve" if verdict else "send_to_review",
                 "status": verdict or "pending"})
    return run_id


def _children_of(run_ids: list[int]) -> dict[str, int]:
    with transaction() as session:
        return {table: int(session.execute(text(f"SELECT count(*) FROM {table} WHERE run_id = ANY(:ids)"),
                                           {"ids": run_ids}).scalar_one()) for table in RUN_CHILDREN}


def _orphans() -> dict[str, int]:
    with transaction() as session:
        return {table: int(session.execute(text(
            f"SELECT count(*) FROM {table} c WHERE c.run_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id)")).scalar_one()) for table in RUN_CHILDREN}


def _run_ids() -> set[int]:
    with transaction() as session:
        return set(session.execute(text("SELECT id FROM runs")).scalars())


def _table(name: str) -> bool:
    with transaction() as session:
        return session.execute(text("SELECT to_regclass(:t)"), {"t": name}).scalar() is not None


@pytest.fixture()
def months(clean_db: None) -> dict[str, list[int]]:
    """June: two plain runs. July: two plain, one approved, one only sent to review. August
    (straddling the cutoff) and November: one plain each."""
    june = [_store(datetime(2026, 6, d, 9, tzinfo=UTC)) for d in (3, 30)]
    july_plain = [_store(datetime(2026, 7, 1, 0, tzinfo=UTC)), _store(datetime(2026, 7, 31, 23, 59, tzinfo=UTC))]
    july_kept = [_store(datetime(2026, 7, 10, tzinfo=UTC), verdict="approved", trace="kept-1"),
                 _store(datetime(2026, 7, 11, tzinfo=UTC), history_only=True)]
    august = [_store(datetime(2026, 8, 2, tzinfo=UTC))]
    november = [_store(datetime(2026, 11, 20, tzinfo=UTC))]
    return {"june": june, "july_plain": july_plain, "july_kept": july_kept, "august": august, "november": november}


def test_pruning_keeps_reviewed_runs_and_removes_the_rest_of_a_month(months: dict[str, list[int]]) -> None:
    kept_children = _children_of(months["july_kept"])
    assert all(kept_children.values())  # not vacuously kept

    report = prune(older_than=parse_age("90d"), now=NOW)

    stay = {*months["july_kept"], *months["august"], *months["november"]}
    assert _run_ids() == stay
    assert _children_of(months["july_kept"]) == kept_children  # history, iterations, events, calls, intake
    assert _children_of(months["june"] + months["july_plain"]) == dict.fromkeys(RUN_CHILDREN, 0)
    assert _orphans() == dict.fromkeys(RUN_CHILDREN, 0)
    # June had nothing to keep: its table is gone; July's holds only its reviewed runs.
    assert not _table("runs_2026_06") and _table("runs_2026_07")
    with transaction() as session:
        assert set(session.execute(text("SELECT id FROM runs_2026_07")).scalars()) == set(months["july_kept"])
        # The kept run is still found by its trace id, and the trace id is still unique for its app.
        assert session.execute(text("SELECT id FROM runs WHERE trace_id = 'kept-1'")).scalar() == months["july_kept"][0]
    assert [(m.partition, m.runs, m.remove, m.keep) for m in report.months] == [
        ("runs_2026_06", 2, 2, 0), ("runs_2026_07", 4, 2, 2)]
    assert report.runs_removed == 4 and report.children_removed["run_iterations"] == 4
    assert report.children_removed["review_history"] == 0  # the removed runs had none
    assert report.bytes_freed > 0

    again = prune(older_than=parse_age("90d"), now=NOW)  # nothing left to remove: a second prune changes nothing
    assert again.runs_removed == 0 and _run_ids() == stay


def test_drop_reviewed_removes_whole_months_reviewed_runs_and_their_history_too(months: dict[str, list[int]]) -> None:
    report = prune(older_than=parse_age("90d"), keep_reviewed=False, now=NOW)
    assert _run_ids() == {*months["august"], *months["november"]}
    assert not _table("runs_2026_06") and not _table("runs_2026_07")
    assert _orphans() == dict.fromkeys(RUN_CHILDREN, 0)
    assert report.runs_removed == 6 and report.children_removed["review_history"] == 2


def test_a_dry_run_says_what_would_go_and_changes_nothing(months: dict[str, list[int]]) -> None:
    before = _run_ids()
    report = prune(older_than=parse_age("13w"), dry_run=True, now=NOW)  # 91 days: the same months
    assert report.dry_run and _run_ids() == before and _table("runs_2026_11")
    assert [(m.month.isoformat(), m.runs, m.reviewed, m.remove, m.keep) for m in report.months] == [
        ("2026-06-01", 2, 0, 2, 0), ("2026-07-01", 4, 2, 2, 2)]
    assert not _table("runs_2026_06")  # the dry run did not even create the months' tables

    result = CliRunner().invoke(app, ["prune", "--older-than", "90d", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)  # against today's date: every stored month before the cutoff
    assert shown["dry_run"] is True and _run_ids() == before
    assert shown["runs_removed"] + shown["runs_kept"] == sum(m["runs"] for m in shown["months"])
    text_result = CliRunner().invoke(app, ["prune", "--older-than", "1d", "--dry-run", "--drop-reviewed"])
    assert text_result.exit_code == 0 and "would remove" in text_result.stdout and "reviewed runs too" in text_result.stdout
    assert _run_ids() == before


@pytest.mark.parametrize(("age", "says"), [
    ("banana", "like 90d or 12w"), ("-5d", "at least one day"), ("0d", "at least one day"), ("", "like 90d"),
    ("90", "like 90d"), ("3m", "like 90d"), ("99999999d", "at most"),
])
def test_bad_ages_are_refused_with_what_to_give(age: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        parse_age(age)


def test_the_cli_refuses_a_bad_age_and_removes_nothing(months: dict[str, list[int]]) -> None:
    before = _run_ids()
    for age in ("banana", "-90d"):
        result = CliRunner().invoke(app, ["prune", "--older-than", age])
        assert result.exit_code == 1 and result.stderr.startswith("error: ") and age in result.stderr
    assert _run_ids() == before


def test_ages_in_days_and_weeks() -> None:
    assert parse_age("90d") == timedelta(days=90) == parse_age(" 90 days ")
    assert parse_age("12w") == timedelta(weeks=12) == parse_age("12 Weeks")


def test_a_run_for_a_month_without_its_table_lands_and_moves_in_when_the_table_comes(clean_db: None) -> None:
    far = datetime(2031, 3, 5, tzinfo=UTC)
    assert not _table("runs_2031_03")
    run_id = _store(far, trace="far-1")  # no month table: the default partition takes it
    with transaction() as session:
        assert session.execute(text("SELECT tableoid::regclass::text FROM runs WHERE id = :r"),
                               {"r": run_id}).scalar() == "runs_default"
        made = ensure_month_partitions(now=datetime(2031, 2, 10, tzinfo=UTC), session=session)
    assert made == ["runs_2031_02", "runs_2031_03", "runs_2031_04"]
    with transaction() as session:
        assert session.execute(text("SELECT tableoid::regclass::text FROM runs WHERE id = :r"),
                               {"r": run_id}).scalar() == "runs_2031_03"
        assert session.execute(text("SELECT count(*) FROM runs_default")).scalar() == 0
        # Its children (it has no review history) moved into their month's tables with it (0021).
        for child in ("run_iterations", "run_events", "llm_calls"):
            assert session.execute(text(f"SELECT tableoid::regclass::text FROM {child} WHERE run_id = :r"),
                                   {"r": run_id}).scalar() == f"{child}_2031_03"
    assert _children_of([run_id]) == {**dict.fromkeys(RUN_CHILDREN, 1), "review_history": 0}
    with transaction() as session:  # a second call makes nothing twice
        assert ensure_month_partitions(now=datetime(2031, 3, 1, tzinfo=UTC), session=session)[0] == "runs_2031_03"
        for month in (2, 3, 4, 5):  # the months' tables both calls made, the children's too
            session.execute(text("SELECT runs_month_drop(:m)"), {"m": datetime(2031, month, 1, tzinfo=UTC)})


def test_deleting_runs_removes_their_children_as_the_foreign_keys_did(clean_db: None) -> None:
    gone, stays = _store(datetime(2026, 11, 2, tzinfo=UTC), verdict="flagged"), _store(datetime(2026, 10, 2, tzinfo=UTC),
                                                                                                   verdict="approved")
    with transaction() as session:
        session.execute(text("DELETE FROM runs WHERE id = :r"), {"r": gone})
        # The intake record stays, without its run (the key was ON DELETE SET NULL).
        assert session.execute(text("SELECT run_id FROM run_intake WHERE trace_id = :t"),
                               {"t": f"trace-{gone}"}).one() == (None,)
    assert _children_of([gone]) == dict.fromkeys(RUN_CHILDREN, 0)
    assert _children_of([stays]) == dict.fromkeys(RUN_CHILDREN, 1)


def test_a_trace_id_stays_unique_per_app_across_months(clean_db: None) -> None:
    from sqlalchemy.exc import IntegrityError

    _store(datetime(2026, 11, 2, tzinfo=UTC), trace="t-1")
    with pytest.raises(IntegrityError, match="runs_trace_id"):
        _store(datetime(2026, 12, 2, tzinfo=UTC), trace="t-1")
    with transaction() as session:  # another app may hold it
        session.execute(text(_RUN), {"q": "q", "status": "pending", "at": datetime(2026, 12, 3, tzinfo=UTC),
                                     "reviewed_at": None, "reviewer": None, "trace": "t-1", "app": "other"})


def test_plan_counts_runs_still_in_the_default_partition(clean_db: None) -> None:
    _store(datetime(2020, 1, 15, tzinfo=UTC))
    with transaction() as session:
        _cutoff, plans = plan_prune(older_than=timedelta(days=90), now=NOW, session=session)
    assert [(p.partition, p.runs, p.bytes) for p in plans] == [("runs_2020_01", 1, 0)]
