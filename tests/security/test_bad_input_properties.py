"""Bad queries, reviews and export filters, generated: at least 2,000 cases per entry point
(`clean_query`, `submit_review`, `ExportFilters` with `parse_when`; `search` on the real store for
a smaller sample), and not one exception other than a WorkbenchError. Queries are cleaned or
refused and searching never writes; reviews land or are refused with the history matching;
export filters validate and select exactly what they say, SQL metacharacters included. Each
property runs inside a plain test that asserts how many cases it generated. Uploads are in
test_bad_input_upload_properties.py, eval queries, qrels and limits in test_bad_input_eval_properties.py.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from services.corpus.ingest import ingest_uploads
from services.domain import STATUSES, RetrievalResult
from services.errors import ConflictError, InputError, NotFoundError
from services.retrieval.search import clean_query, default_params, search
from services.retrieval.text import unstorable_char
from services.review.export import DATE_FIELDS, VERDICTS, ExportFilters, export_records, parse_when
from services.review.export_formats import export_bytes, read_export
from services.review.queue import ACTIONS, FLAG_REASONS, MAX_COMMENT_CHARS, review_history, submit_review
from services.scoring.weights import DEFAULT_PROFILE
from tests.security._support import HOSTILE_STRINGS, MIN_CASES, SLOW_OK, SQL_METACHARACTERS, WORDS, save_runs, table_counts

CASES: Counter[str] = Counter()
MAX_QUERY_CHARS = 2_000


@pytest.fixture(autouse=True, scope="module")
def _report_counts():  # type: ignore[no-untyped-def]
    yield
    print(f"\ngenerated cases: {dict(sorted(CASES.items()))}")  # shown with -s; the tests assert the minimums


# --- (c) queries -----------------------------------------------------------------------------------


query_pieces = st.one_of(
    st.text(max_size=30),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=8),  # control characters
    st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", max_size=8),  # whitespace only
    st.tuples(st.text(min_size=1, max_size=4), st.integers(1, 30_000)).map(lambda t: t[0] * t[1]),  # up to ~100 KB
    st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
)
queries = st.lists(query_pieces, max_size=5).map("".join)


def check_cleaned(query: str) -> str | None:
    try:
        cleaned = clean_query(query, max_chars=MAX_QUERY_CHARS)
    except InputError as exc:
        assert str(exc).strip()
        return None
    assert cleaned and cleaned == cleaned.strip() and len(cleaned) <= MAX_QUERY_CHARS
    assert unstorable_char(cleaned) is None and not any(ord(c) < 0x20 and c not in "\t\n\r" for c in cleaned)
    assert clean_query(cleaned, max_chars=MAX_QUERY_CHARS) == cleaned  # cleaning is idempotent
    return cleaned


def test_clean_query_cleans_or_refuses_every_generated_query():
    CASES["clean_query"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(queries)
    def clean(query: str) -> None:
        CASES["clean_query"] += 1
        check_cleaned(query)

    clean()
    assert CASES["clean_query"] >= MIN_CASES


SEARCH_DOCS = {
    "srvo-062.md": "# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster the axis.",
    "grease.md": "# Reducer grease\nReplace the J2 reducer grease every 20,000 hours.",
    "dsz.md": "# DSZ safe zones\nDual-check safety zones fence the robot in; 'quoted' -- and; semicolons.",
}


@pytest.fixture()
def search_corpus(clean_db, engine):  # type: ignore[no-untyped-def]
    summary = ingest_uploads([(name, body.encode()) for name, body in SEARCH_DOCS.items()])
    assert summary.ingested == len(SEARCH_DOCS)
    return table_counts(engine)


def test_search_returns_hits_or_an_input_error_and_never_writes(search_corpus, engine):
    CASES["search_bm25"] = CASES["search_hybrid"] = 0

    def check(query: str, mode: str) -> None:
        try:
            result = search(query, default_params(mode=mode, k=5))
        except InputError:
            assert check_cleaned(query) is None, "search refuses exactly what clean_query refuses"
            return
        assert isinstance(result, RetrievalResult) and result.query == check_cleaned(query)
        assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1)) and len(result.hits) <= 5
        assert {h.external_id for h in result.hits} <= set(SEARCH_DOCS)

    @hypothesis_settings(SLOW_OK, max_examples=300)
    @given(queries)
    def bm25(query: str) -> None:
        CASES["search_bm25"] += 1
        check(query, "bm25")

    @hypothesis_settings(SLOW_OK, max_examples=50)
    @given(queries)
    def hybrid(query: str) -> None:
        CASES["search_hybrid"] += 1
        check(query, "hybrid")

    bm25()
    hybrid()
    assert table_counts(engine) == search_corpus, "searching never writes"
    assert CASES["search_bm25"] >= 300 and CASES["search_hybrid"] >= 50


# --- (d) submit_review ------------------------------------------------------------------------------

texts = st.one_of(st.text(max_size=40), st.sampled_from(HOSTILE_STRINGS), st.sampled_from(["ana", "  ben  ", "", "   "]),
                  st.integers(MAX_COMMENT_CHARS - 2, MAX_COMMENT_CHARS + 2).map(lambda n: "c" * n))


@st.composite
def review_calls(draw: st.DrawFn) -> dict[str, object]:
    return {
        "run": draw(st.integers(0, 7)),  # 0-3: stored runs; 4-7: ids that do not exist
        "action": draw(st.one_of(st.sampled_from(list(ACTIONS) * 3), st.text(max_size=8), st.sampled_from(SQL_METACHARACTERS))),
        "reviewer": draw(texts),
        "comment": draw(texts),
        "flag_reason": draw(st.one_of(st.none(), st.sampled_from(FLAG_REASONS), texts)),
        "corrected_answer": draw(st.one_of(st.none(), texts)),
        "version": draw(st.one_of(st.just("current"), st.just("current"), st.integers(-(2**70), 2**70))),
    }


def test_submit_review_lands_or_refuses_and_history_matches(clean_db, engine):
    CASES["submit_review"] = 0
    run_ids = save_runs(4)
    missing = [0, -5, 2**70, max(run_ids) + 1000]
    versions = dict.fromkeys(run_ids, 0)
    landed: dict[int, list[dict[str, object]]] = {rid: [] for rid in run_ids}
    before = table_counts(engine)

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(review_calls())
    def review(call: dict[str, object]) -> None:
        CASES["submit_review"] += 1
        index = int(call["run"])  # type: ignore[call-overload]
        run_id = run_ids[index] if index < len(run_ids) else missing[index - len(run_ids)]
        version = call["version"]
        expected = versions.get(run_id, 0) if version == "current" else int(version)  # type: ignore[call-overload]
        fields = {k: call[k] for k in ("action", "reviewer", "comment", "flag_reason", "corrected_answer")}
        try:
            saved = submit_review(run_id, expected_version=expected, **fields)  # type: ignore[arg-type]
        except InputError as exc:
            assert str(exc).strip()
            return
        except NotFoundError:
            assert run_id not in versions
            return
        except ConflictError as exc:
            assert run_id in versions and expected != versions[run_id], "a save at the current version must land"
            assert str(exc).strip()
            return
        assert run_id in versions and expected == versions[run_id]
        versions[run_id] += 1
        assert saved.version == versions[run_id] and saved.new_status == ACTIONS[str(call["action"])]
        assert saved.comment == call["comment"] and saved.reviewer == str(call["reviewer"]).strip()
        landed[run_id].append(fields)

    review()
    assert CASES["submit_review"] >= MIN_CASES
    after = table_counts(engine)
    n_landed = sum(map(len, landed.values()))
    assert n_landed > 0
    assert after["review_history"] - before["review_history"] == n_landed
    assert {k: v for k, v in after.items() if k != "review_history"} == {k: v for k, v in before.items() if k != "review_history"}
    for rid in run_ids:  # every landed comment round-trips through the store byte for byte
        assert [h.comment for h in review_history(rid)] == [f["comment"] for f in landed[rid]]


# --- (e) export filters -------------------------------------------------------------------------------

offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
moments = st.one_of(st.none(), st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                                            timezones=st.one_of(st.none(), offsets)))
names = st.one_of(st.none(), st.text(max_size=20), st.sampled_from(HOSTILE_STRINGS),
                  st.sampled_from(["ana", "ben", DEFAULT_PROFILE.label, "default"]))
when_strings = st.one_of(
    st.text(max_size=20), st.sampled_from(HOSTILE_STRINGS),
    st.dates().map(str), st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["9999-12-31", "0001-01-01", "2025-02-30", "2025-05-31T25:00", "2025-05-31T14:00:00+99:00", "now"]),
)


junk = st.one_of(st.text(max_size=8), st.sampled_from(SQL_METACHARACTERS))


@st.composite
def export_calls(draw: st.DrawFn) -> dict[str, object]:
    """Mostly valid choices, so that many filter sets pass validation and reach the query."""
    valid_statuses = st.lists(st.sampled_from(STATUSES), max_size=3)
    return {
        "statuses": tuple(draw(st.one_of(valid_statuses, valid_statuses, valid_statuses, st.lists(junk, min_size=1, max_size=2)))),
        "verdict": draw(st.one_of(st.none(), st.none(), st.sampled_from(VERDICTS), junk)),
        "reviewer": draw(names), "profile": draw(names), "collection": draw(names),
        "since": draw(moments), "until": draw(moments),
        "date_field": draw(st.one_of(st.sampled_from(DATE_FIELDS * 4), junk)),
        "when": draw(when_strings), "end": draw(st.booleans()),
        "query": draw(st.integers(0, 3)) == 0,  # one in four valid filter sets also runs the query
        "fmt": draw(st.sampled_from(["csv", "jsonl", "parquet"])),
    }


def _selected(record: dict[str, object], filters: ExportFilters) -> bool:
    when = record["reviewed_at" if filters.date_field == "reviewed" else "created_at"]
    moment = datetime.fromisoformat(str(when)) if when else None
    return ((not filters.statuses or record["status"] in filters.statuses)
            and filters.verdict in (None, record["status"])
            and filters.reviewer in (None, record["reviewer"])
            and filters.profile in (None, record["weights_profile"])
            and filters.collection in (None, record["collection"])
            and (filters.since is None or (moment is not None and moment >= filters.since))
            and (filters.until is None or (moment is not None and moment < filters.until)))


def test_export_filters_validate_and_select_exactly_what_they_say(clean_db, engine):
    CASES["export_filters"] = CASES["export_queries"] = CASES["parse_when"] = 0
    run_ids = save_runs(6)
    for rid, reviewer in zip(run_ids[:3], ("ana", "ben", "' OR '1'='1")):
        submit_review(rid, expected_version=0, action="approve", reviewer=reviewer)
    submit_review(run_ids[3], expected_version=0, action="flag", reviewer="ana", flag_reason="wrong answer")
    everything = export_records()
    before = table_counts(engine)

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(export_calls())
    def export(call: dict[str, object]) -> None:
        CASES["export_filters"] += 1
        CASES["parse_when"] += 1
        try:
            bound = parse_when(str(call["when"]), end=bool(call["end"]))
            assert isinstance(bound, datetime)
        except InputError as exc:
            assert str(exc).strip()
        fields = {k: call[k] for k in ("statuses", "verdict", "reviewer", "profile", "collection", "since", "until", "date_field")}
        try:
            filters = ExportFilters(**fields)  # type: ignore[arg-type]
        except InputError as exc:
            assert str(exc).strip()
            return
        if not call["query"]:
            return
        CASES["export_queries"] += 1
        records = export_records(filters)
        assert [r["run_id"] for r in records] == [r["run_id"] for r in everything if _selected(r, filters)]
        fmt = str(call["fmt"])
        assert read_export(export_bytes(records, fmt), fmt) == records

    export()
    assert CASES["export_filters"] >= MIN_CASES and CASES["parse_when"] >= MIN_CASES and CASES["export_queries"] > 50
    assert table_counts(engine) == before, "exporting never writes"
    reviewer_injection = export_records(ExportFilters(reviewer="' OR '1'='1"))
    assert [r["run_id"] for r in reviewer_injection] == [run_ids[2]]  # the literal name, not a tautology
