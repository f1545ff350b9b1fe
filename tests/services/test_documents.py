"""Confidence trends per document on the real store: hand-made runs with known counts, mean
confidences, statuses and weeks; the fix-first order; the drill-down; the chart builders."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import text

from services.answering.llm.base import Citation
from services.answering.runs import Iteration, Run, save_run
from services.charts.documents import SEGMENTS, document_trend_figure, fix_first_figure
from services.domain import Hit, RetrievalResult
from services.errors import InputError
from services.review.documents import DocumentTrend, WeekPoint, document_runs, document_trends, outside_corpus
from services.store import transaction

WEEK_1 = date(2025, 5, 5)  # a Monday
WEEK_2 = date(2025, 5, 12)
QUOTED = "o'brien; DROP TABLE runs.md"  # ids are bound values, never SQL


def _iteration(ordinal: int, hits: Sequence[str], cited: Sequence[str], confidence: float) -> Iteration:
    """`hits` are external ids in rank order (an id may repeat: several chunks of one document)."""
    found = tuple(Hit(chunk_id=100 * ordinal + rank, document_id=0, external_id=doc, title=f"Title of {doc}",
                      text=f"chunk {rank} of {doc}", rank=rank, fused_score=1 / (60 + rank))
                  for rank, doc in enumerate(hits, start=1))
    return Iteration(
        ordinal=ordinal, query_used="q", sub_queries=(), retrieval=RetrievalResult("q", "hybrid", found),
        components=(0.5,) * 7, raw_metrics={}, retrieval_confidence=confidence, confidence=confidence,
        level="MEDIUM", crag=None, answer="a",
        citations=tuple(Citation(marker=i, chunk_id=i, document_id=0, external_id=doc, quote="q")
                        for i, doc in enumerate(cited, start=1)),
        reflection=None, grade=None, gaps=(), decision="COMPLETE", decision_reason="", signals={}, latency_ms={},
    )


def make_run(query: str, *, hits: Sequence[str], cited: Sequence[str] = (), confidence: float, level: str,
             status: str, collection: str = "default", earlier_hits: Sequence[str] = ()) -> Run:
    """A run whose best iteration (ordinal 1) retrieved `hits`; `earlier_hits` go in a first
    iteration that was not the best, and must not count."""
    best = _iteration(1, hits, cited, confidence)
    iterations = ((_iteration(0, earlier_hits, (), 0.1),) if earlier_hits else ()) + (best,)
    return Run(
        query=query, preset="balanced", collection=collection, source="ask", backend="offline", model="m",
        status=status, final_answer="a", citations=best.citations, final_confidence=confidence, final_level=level,
        retrieval_confidence=confidence, components=best.components, reflection_score=None, grade=None,
        crag_verdict=None, signals={}, route=("COMPLETE",), best_iteration=1, weights_profile="default v1",
        weights_profile_id=None, config={}, outcome_note="", latency_ms=1.0, iterations=iterations, events=(),
    )


def store(run: Run, created_at: datetime) -> int:
    with transaction() as session:
        run_id = save_run(run, session=session)
        session.execute(text("UPDATE runs SET created_at = :t WHERE id = :id"), {"t": created_at, "id": run_id})
    return run_id


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2025, 5, day, hour, tzinfo=UTC)


def store_six_runs() -> dict[str, int]:
    """Six runs over two weeks; the expected figures per document are worked out in the tests."""
    return {
        "A": store(make_run("qa", hits=("a", "b", "b"), cited=("a",), confidence=0.9, level="HIGH",
                            status="approved"), at(6)),
        "B": store(make_run("qb", hits=("a", "c"), cited=("c",), confidence=0.3, level="LOW", status="pending"), at(7)),
        "C": store(make_run("qc", hits=("b",), cited=("z",), confidence=0.5, level="MEDIUM", status="flagged"), at(13)),
        "D": store(make_run("qd", hits=("b", "c"), cited=("b",), confidence=0.2, level="VERY LOW",
                            status="flagged"), at(14)),
        "E": store(make_run("qe", hits=(QUOTED,), earlier_hits=("c",), confidence=0.8, level="HIGH",
                            status="auto_accepted"), at(15)),
        "F": store(make_run("qf", hits=("a",), confidence=0.1, level="LOW", status="pending", collection="other"),
                   at(16)),
    }


@pytest.fixture()
def runs(clean_db) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return store_six_runs()


def trends(**filters: object) -> list[DocumentTrend]:
    with transaction() as session:
        return document_trends(session=session, **filters)  # type: ignore[arg-type]


def test_counts_confidence_statuses_and_weeks_per_document(runs):  # type: ignore[no-untyped-def]
    by_id = {t.external_id: t for t in trends(collection="default")}
    assert set(by_id) == {"a", "b", "c", "z", QUOTED}  # E's first iteration retrieved c: not counted for E

    b = by_id["b"]  # A (two chunks: counted once), C, D
    assert (b.runs, b.retrieved, b.cited) == (3, 3, 1)
    assert b.mean_confidence == pytest.approx((0.9 + 0.5 + 0.2) / 3)
    assert (b.approved, b.flagged, b.corrected, b.pending, b.auto_accepted) == (1, 2, 0, 0, 0)
    assert (b.low_confidence, b.troubled, b.low_not_flagged) == (1, 2, 0)  # D is flagged and low: once
    assert b.troubled_share == pytest.approx(2 / 3)
    assert b.title == "Title of b"
    assert b.weeks == (WeekPoint(WEEK_1, 1, pytest.approx(0.9), 0), WeekPoint(WEEK_2, 2, pytest.approx(0.35), 2))

    c = by_id["c"]  # B (retrieved and cited), D
    assert (c.runs, c.retrieved, c.cited, c.pending, c.flagged) == (2, 2, 1, 1, 1)
    assert c.mean_confidence == pytest.approx(0.25)
    assert (c.low_confidence, c.troubled, c.low_not_flagged) == (2, 2, 1)

    a = by_id["a"]  # A, B; F is in another collection
    assert (a.runs, a.retrieved, a.cited, a.approved, a.pending, a.troubled) == (2, 2, 1, 1, 1, 1)
    assert a.mean_confidence == pytest.approx(0.6)

    z = by_id["z"]  # cited by C without being among its hits
    assert (z.runs, z.retrieved, z.cited, z.flagged, z.troubled, z.title) == (1, 0, 1, 1, 1, "")

    quoted = by_id[QUOTED]
    assert (quoted.runs, quoted.auto_accepted, quoted.troubled, quoted.mean_confidence) == (1, 1, 0, 0.8)
    assert quoted.weeks == (WeekPoint(WEEK_2, 1, 0.8, 0),)


def test_fix_first_order_most_troubled_runs_then_share_then_volume(runs):  # type: ignore[no-untyped-def]
    assert [t.external_id for t in trends(collection="default")] == ["c", "b", "z", "a", QUOTED]
    everywhere = [(t.collection, t.external_id) for t in trends()]
    assert everywhere == [("default", "c"), ("default", "b"), ("default", "z"), ("other", "a"), ("default", "a"),
                          ("default", QUOTED)]
    assert [t.external_id for t in trends(collection="default", limit=2)] == ["c", "b"]
    assert [t.external_id for t in trends(collection="default", min_runs=2)] == ["c", "b", "a"]
    assert trends(collection="nowhere") == []


def test_the_time_window_selects_runs_by_creation(runs):  # type: ignore[no-untyped-def]
    second_week = {t.external_id: t for t in trends(collection="default", since=at(12, 0))}
    assert set(second_week) == {"b", "c", "z", QUOTED}
    assert (second_week["b"].runs, second_week["b"].mean_confidence) == (2, pytest.approx(0.35))
    assert second_week["c"].runs == 1 and second_week["c"].weeks == (WeekPoint(WEEK_2, 1, 0.2, 1),)
    first_week = {t.external_id: t.runs for t in trends(collection="default", until=at(12, 0))}
    assert first_week == {"a": 2, "b": 1, "c": 1}


def test_no_runs_no_documents(clean_db):  # type: ignore[no-untyped-def]
    assert trends() == []


def _outside_run(query: str, status: str) -> Run:
    """An imported run: its contexts' documents are not in the corpus (negative document ids, as intake gives)."""
    run = make_run(query, hits=("vendor-kb-7", "context 2"), confidence=0.3, level="LOW", status=status)
    best = run.iterations[-1]
    hits = tuple(dataclasses.replace(h, document_id=-(i + 1)) for i, h in enumerate(best.hits))
    best = dataclasses.replace(best, retrieval=dataclasses.replace(best.retrieval, hits=hits))
    return dataclasses.replace(run, source="import", iterations=(best,))


def test_documents_outside_the_corpus_are_listed_as_such_by_source_not_under_default(clean_db):  # type: ignore[no-untyped-def]
    pending = store(_outside_run("q1", "pending"), at(6))
    store(make_run("q2", hits=("vendor-kb-7",), confidence=0.9, level="HIGH", status="approved"), at(7))  # a corpus doc, same id
    listed = {(t.collection, t.external_id): t for t in trends()}
    assert set(listed) == {("outside the corpus (import)", "vendor-kb-7"), ("default", "vendor-kb-7")}  # "context 2": no document
    assert outside_corpus("import") == "outside the corpus (import)"
    assert (listed[("outside the corpus (import)", "vendor-kb-7")].runs, listed[("default", "vendor-kb-7")].runs) == (1, 1)
    with transaction() as session:
        outside = document_runs("vendor-kb-7", collection="outside the corpus (import)", session=session)
        inside = document_runs("vendor-kb-7", collection="default", session=session)
    assert [r.run_id for r in outside] == [pending] and [r.source for r in inside] == ["ask"]


def test_trouble_is_a_reviewers_flag_or_correction_or_low_confidence_not_approved(clean_db):  # type: ignore[no-untyped-def]
    for status, level in (("approved", "LOW"), ("corrected", "HIGH"), ("flagged", "MEDIUM"), ("pending", "VERY LOW"),
                          ("approved", "HIGH")):
        store(make_run(f"{status} {level}", hits=("doc",), confidence=0.5, level=level, status=status), at(6))
    (doc,) = trends()
    assert (doc.runs, doc.low_confidence, doc.flagged, doc.corrected, doc.rejected) == (5, 2, 1, 1, 2)
    assert (doc.troubled, doc.low_not_flagged) == (3, 1)  # the approved LOW run is no trouble


def test_bad_arguments_are_input_errors(clean_db):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="min_runs"):
        trends(min_runs=0)
    with pytest.raises(InputError, match="limit"):
        trends(limit=0)


def test_drill_down_lists_the_runs_a_document_appeared_in(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:
        b_runs = document_runs("b", collection="default", session=session)
        z_runs = document_runs("z", collection="default", session=session)
        a_other = document_runs("a", collection="other", session=session)
        c_late = document_runs("c", collection="default", since=at(12, 0), session=session)
    assert [(r.run_id, r.best_rank, r.cited, r.status) for r in b_runs] == [
        (runs["D"], 1, True, "flagged"), (runs["C"], 1, False, "flagged"), (runs["A"], 2, False, "approved")]
    assert (b_runs[0].query, b_runs[0].final_confidence, b_runs[0].final_level, b_runs[0].source) == (
        "qd", 0.2, "VERY LOW", "ask")
    assert [(r.run_id, r.best_rank, r.cited) for r in z_runs] == [(runs["C"], None, True)]
    assert [r.run_id for r in a_other] == [runs["F"]]
    assert [r.run_id for r in c_late] == [runs["D"]]  # E retrieved c only in an iteration that was not its best


# --- chart builders -----------------------------------------------------------------------

def _trend(external_id: str, *, flagged: int, low: int, ok: int, collection: str = "default") -> DocumentTrend:
    runs = flagged + low + ok
    return DocumentTrend(collection=collection, external_id=external_id, title="", runs=runs, retrieved=runs, cited=0,
                         mean_confidence=0.5, approved=ok, flagged=flagged, corrected=0, pending=low, auto_accepted=0,
                         low_confidence=low, troubled=flagged + low,
                         weeks=(WeekPoint(WEEK_1, runs - 1, 0.7, 0), WeekPoint(WEEK_2, 1, 0.2, 1)))


def test_fix_first_figure_stacks_flagged_low_and_the_rest_first_document_on_top():
    trends_ = [_trend("worst", flagged=3, low=1, ok=0), _trend("next", flagged=1, low=0, ok=4),
               _trend("third", flagged=0, low=1, ok=1, collection="other")]
    fig = fix_first_figure(trends_, top=2)
    assert fig.layout.title.text == "Documents to fix first" and fig.layout.barmode == "stack"
    assert fig.layout.xaxis.title.text == "runs that retrieved or cited the document"
    assert fig.layout.yaxis.title.text == "document"
    assert [trace.name for trace in fig.data] == [name for _, name, _ in SEGMENTS]
    assert all(trace.orientation == "h" for trace in fig.data)
    assert [list(trace.y) for trace in fig.data] == [["next", "worst"]] * 3  # top-2 only, the first drawn on top
    assert [list(trace.x) for trace in fig.data] == [[1, 3], [0, 1], [4, 0]]
    assert list(fix_first_figure(trends_).data[0].y)[0] == "other / third"  # other collections are named


def test_document_trend_figure_has_confidence_and_runs_per_week():
    fig = document_trend_figure(_trend("pump.md", flagged=1, low=0, ok=3))
    runs, confidence = fig.data
    assert (runs.type, runs.name, runs.yaxis) == ("bar", "runs", "y2")
    assert (confidence.type, confidence.name) == ("scatter", "mean confidence")
    assert list(confidence.x) == [WEEK_1, WEEK_2] and list(confidence.y) == [0.7, 0.2]
    assert list(runs.y) == [3, 1]
    assert fig.layout.title.text == "pump.md: confidence per week"
    assert fig.layout.xaxis.title.text == "week (Monday, UTC)"
    assert fig.layout.yaxis.title.text == "mean final confidence" and fig.layout.yaxis2.title.text == "runs"


def test_trend_counts_must_add_up():
    with pytest.raises(ValueError, match="inconsistent"):
        DocumentTrend(collection="default", external_id="x", title="", runs=2, retrieved=1, cited=0,
                      mean_confidence=0.5, approved=1, flagged=0, corrected=0, pending=0, auto_accepted=0,
                      low_confidence=0, troubled=0, weeks=())


def test_imported_runs_count_their_named_documents_not_anonymous_contexts(clean_db):  # type: ignore[no-untyped-def]
    """Through the real import and assessment: a context's document_id (or else its source) is its
    document; a context naming neither is no document to fix and is left out."""
    from services.intake.assess import process_queue
    from services.intake.importing import import_file

    contexts = [{"text": "Replace the pulsecoder battery with power on.", "document_id": "srvo-062.md", "rank": 1},
                {"text": "Remaster the axis after a battery loss.", "source": "https://wiki/remaster", "rank": 2},
                {"text": "Unrelated words about grease.", "rank": 3}]
    records = [{"question": "How do I clear SRVO-062?", "answer": "Replace the battery.", "trace_id": f"t-{i}",
                "contexts": contexts[: 3 - i]} for i in range(2)]
    data = "".join(json.dumps(record) + "\n" for record in records).encode()
    assert import_file(data, fmt="jsonl").accepted == 2
    assert process_queue(judges=False).assessed == 2

    found = {t.external_id: t for t in trends()}
    assert set(found) == {"srvo-062.md", "https://wiki/remaster"}
    assert (found["srvo-062.md"].runs, found["srvo-062.md"].retrieved, found["srvo-062.md"].cited) == (2, 2, 0)
    assert {t.collection for t in found.values()} == {"outside the corpus (import)"}  # the corpus holds neither
    with transaction() as session:
        imported = document_runs("srvo-062.md", collection="outside the corpus (import)", session=session)
        assert document_runs("srvo-062.md", collection="default", session=session) == []
        assert document_runs("context 3", collection="outside the corpus (import)", session=session) == []
    assert [(r.source, r.best_rank) for r in imported] == [("import", 1), ("import", 1)]
