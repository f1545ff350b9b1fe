"""The rows recorded about a run live in their run's month (migration 0021): pruning a month drops
or swaps their month tables with the runs' table and keeps every row of the reviewed runs; a run
whose created_at changes takes them along; every writer gives them the run's created_at."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from db.models import RUN_CHILDREN, RUN_MONTH_CHILDREN
from services.answering.runs import save_run
from services.review.queue import send_to_review, submit_review
from services.review.retention import ensure_month_partitions, parse_age, prune
from services.store import transaction
from tests.services.test_retention import NOW, _children_of, _orphans, _store, _table, months  # noqa: F401
from tests.services.test_runs import make_run


def _rows(table: str, run_ids: list[int]) -> list[tuple[Any, ...]]:
    with transaction() as session:
        return [tuple(r) for r in session.execute(
            text(f"SELECT *, tableoid::regclass::text FROM {table} WHERE run_id = ANY(:ids) ORDER BY id"),
            {"ids": run_ids})]


def _oid(table: str) -> int | None:
    with transaction() as session:
        return session.execute(text("SELECT CAST(to_regclass(:t) AS oid)"), {"t": table}).scalar()


def _where(run_id: int) -> dict[str, set[tuple[str, datetime]]]:
    """Per child table: the (partition, run_created_at) of the run's rows."""
    with transaction() as session:
        return {child: {tuple(r) for r in session.execute(  # type: ignore[misc]
            text(f"SELECT tableoid::regclass::text, run_created_at FROM {child} WHERE run_id = :r"), {"r": run_id})}
            for child in RUN_MONTH_CHILDREN}


def _out_of_step() -> dict[str, int]:
    """Child rows whose run_created_at is not their run's created_at, per table."""
    with transaction() as session:
        return {child: int(session.execute(text(
            f"SELECT count(*) FROM {child} c JOIN runs r ON r.id = c.run_id "
            "WHERE c.run_created_at IS DISTINCT FROM r.created_at")).scalar_one()) for child in RUN_MONTH_CHILDREN}


def test_pruning_drops_the_childrens_month_tables_and_swaps_in_the_kept_runs_rows(
        months: dict[str, list[int]]) -> None:  # noqa: F811
    with transaction() as session:  # the months' tables, as prune makes them first
        ensure_month_partitions(now=NOW, session=session)
    kept = {child: _rows(child, months["july_kept"]) for child in RUN_MONTH_CHILDREN}
    assert all(kept.values()) and all(row[-1] == f"{child}_2026_07" for child in kept for row in kept[child])
    june = {child: len(_rows(child, months["june"])) for child in RUN_MONTH_CHILDREN}
    assert june == {**dict.fromkeys(RUN_MONTH_CHILDREN, 2), "review_history": 0}
    july_oids = {child: _oid(f"{child}_2026_07") for child in RUN_MONTH_CHILDREN}
    august = {child: _rows(child, months["august"]) for child in RUN_MONTH_CHILDREN}

    prune(older_than=parse_age("90d"), now=NOW)

    for child in RUN_MONTH_CHILDREN:
        assert not _table(f"{child}_2026_06"), child  # June kept nothing: its tables are gone
        assert _oid(f"{child}_2026_07") not in (None, july_oids[child]), child  # July's is a new table...
        assert _rows(child, months["july_kept"]) == kept[child]  # ...holding the kept runs' rows, every column
        with transaction() as session:
            assert set(session.execute(text(f"SELECT run_id FROM {child}_2026_07")).scalars()) <= set(months["july_kept"])
        assert _rows(child, months["august"]) == august[child]  # a month not pruned keeps its rows
    assert _children_of(months["june"] + months["july_plain"]) == dict.fromkeys(RUN_CHILDREN, 0)
    assert _orphans() == dict.fromkeys(RUN_CHILDREN, 0)


def test_dropping_reviewed_runs_too_drops_every_childs_month_table(months: dict[str, list[int]]) -> None:  # noqa: F811
    report = prune(older_than=parse_age("90d"), keep_reviewed=False, now=NOW)
    assert not any(_table(f"{child}_2026_{m}") for child in RUN_MONTH_CHILDREN for m in ("06", "07"))
    assert _orphans() == dict.fromkeys(RUN_CHILDREN, 0)
    assert report.children_removed == {"review_history": 2, "run_iterations": 6, "run_events": 6, "llm_calls": 6,
                                       "run_intake": 6}


def test_a_run_whose_created_at_changes_takes_its_rows_to_the_new_months_tables(clean_db: None) -> None:
    aged, stays = _store(datetime(2026, 11, 20, tzinfo=UTC), verdict="approved"), _store(datetime(2026, 11, 21, tzinfo=UTC))
    where_stays = _where(stays)
    september = datetime(2026, 9, 15, tzinfo=UTC)
    with transaction() as session:
        session.execute(text("SELECT runs_month_partition_add(:m)"), {"m": september})
        session.execute(text("UPDATE runs SET created_at = :at WHERE id = :r"), {"at": september, "r": aged})
    assert _where(aged) == {child: {(f"{child}_2026_09", september)} for child in RUN_MONTH_CHILDREN}
    assert _where(stays) == where_stays

    # To a month without tables: the run and its rows wait in the default partitions, and move in together.
    far = datetime(2041, 5, 2, tzinfo=UTC)  # a month no other test makes
    with transaction() as session:
        session.execute(text("UPDATE runs SET created_at = :at WHERE id = :r"), {"at": far, "r": aged})
    assert _where(aged) == {child: {(f"{child}_default", far)} for child in RUN_MONTH_CHILDREN}
    with transaction() as session:
        session.execute(text("SELECT runs_month_partition_add(:m)"), {"m": far})
        assert session.execute(text("SELECT tableoid::regclass::text FROM runs WHERE id = :r"), {"r": aged}).scalar() \
            == "runs_2041_05"
    assert _where(aged) == {child: {(f"{child}_2041_05", far)} for child in RUN_MONTH_CHILDREN}
    assert _out_of_step() == dict.fromkeys(RUN_MONTH_CHILDREN, 0)
    with transaction() as session:
        session.execute(text("SELECT runs_month_drop(:m)"), {"m": far})  # the session's store keeps no 2041 tables
        assert session.execute(text("SELECT count(*) FROM runs WHERE id = :r"), {"r": aged}).scalar() == 0
        session.execute(text("DELETE FROM run_intake WHERE run_id = :r"), {"r": aged})
    assert _orphans() == dict.fromkeys(RUN_CHILDREN, 0)


def test_every_writer_gives_the_childrens_rows_their_runs_created_at(clean_db: None) -> None:
    with transaction() as session:  # the pipeline's save_run: iterations, LLM calls, events
        reviewed = save_run(make_run(), session=session)
        sent = save_run(make_run(status="auto_accepted"), session=session)
    submit_review(reviewed, expected_version=0, action="approve", reviewer="ana")
    assert send_to_review(sent, reviewer="bo")
    with transaction() as session:
        counts = {child: int(session.execute(text(f"SELECT count(*) FROM {child} WHERE run_id = ANY(:ids)"),
                                             {"ids": [reviewed, sent]}).scalar_one()) for child in RUN_MONTH_CHILDREN}
    assert all(counts.values()), counts  # every table written, so the check below is not vacuous
    assert _out_of_step() == dict.fromkeys(RUN_MONTH_CHILDREN, 0)
