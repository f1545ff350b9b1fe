"""Bad eval files, generated: at least 2,000 queries files, qrels files and query/qrels/limit
combinations, and not one exception other than an InputError naming its line. Every line of a
queries file is either a query (unique id, searchable text) or a warning; a byte-order mark
never becomes part of an id; a qrels pair counts once; a limit gives at most that many queries."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from services.errors import InputError
from services.evaluation.beir import BeirFiles, load_judged_queries
from services.retrieval.beir_files import read_qrels, read_queries
from services.retrieval.search import clean_query
from tests.security._support import HOSTILE_STRINGS, MIN_CASES, SLOW_OK

pytestmark = pytest.mark.slow
CASES: Counter[str] = Counter()
FOLDER = Path(tempfile.mkdtemp(prefix="eval-properties-"))

plain_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters='"\ufeff'),
                    min_size=1, max_size=6)
ids = st.one_of(st.sampled_from(["q1", "q2", "q3", "d1", "d2"]), plain_ids, st.integers(0, 5))
texts = st.one_of(st.text(max_size=30), st.sampled_from(HOSTILE_STRINGS), st.sampled_from(["", "   ", "\t\n"]),
                  st.integers(1_990, 2_010).map(lambda n: "w" * n))
query_lines = st.one_of(
    st.builds(lambda i, t: json.dumps({"_id": i, "text": t}), ids, texts),
    st.builds(lambda i: json.dumps({"_id": i}), ids),  # no text
    st.builds(lambda i: json.dumps({"_id": i, "text": None}), ids),
    st.sampled_from(["", "  ", "{", "[]", "null", '{"text": "no id"}', '{"_id": true, "text": "bool id"}']),
    st.text(max_size=20).filter(lambda t: "\n" not in t and "\r" not in t),  # a lone CR ends a line when read
)
boms = st.sampled_from(["", "\ufeff"])
endings = st.sampled_from(["\n", "\r\n"])


def _write(name: str, text: str) -> Path:
    path = FOLDER / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


@pytest.fixture(autouse=True, scope="module")
def _report_counts():  # type: ignore[no-untyped-def]
    yield
    print(f"\ngenerated cases: {dict(sorted(CASES.items()))}")


def test_every_line_of_a_queries_file_is_a_query_or_a_warning():
    CASES["queries_file"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(st.lists(query_lines, max_size=8), boms, endings)
    def check(lines: list[str], bom: str, ending: str) -> None:
        CASES["queries_file"] += 1
        path = _write("queries.jsonl", bom + ending.join(lines))
        try:
            strict = read_queries(path)
        except InputError as exc:
            assert "line " in str(exc)
            strict = None
        loose = read_queries(path, strict=False)
        assert len(loose.queries) + len(loose.warnings) == sum(1 for line in lines if line.strip())
        assert len({q.query_id for q in loose.queries}) == len(loose.queries)
        assert all(not q.query_id.startswith("\ufeff") and clean_query(q.text, max_chars=2_000) == q.text
                   for q in loose.queries)
        if strict is not None:
            assert strict == loose

    check()
    assert CASES["queries_file"] >= MIN_CASES


qrels_rows = st.one_of(
    st.builds(lambda q, d, s: f"{q}\t{d}\t{s}", plain_ids.filter(lambda t: "\t" not in t), plain_ids.filter(lambda t: "\t" not in t),
              st.integers(-1, 3)),
    st.sampled_from(["q1\td1\t1", "q1\td1\t2", "q2\td2\t1"]),
)
BAD_ROWS = ("q1\td1", "q1\td1\thigh", "q1", "q1\td1\t1.5")
bad_rows = st.sampled_from(BAD_ROWS)


def test_a_qrels_file_reads_right_or_fails_naming_its_line():
    CASES["qrels_file"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(st.lists(st.one_of(qrels_rows, qrels_rows, qrels_rows, bad_rows), max_size=8), boms, st.booleans(), endings)
    def check(rows: list[str], bom: str, header: bool, ending: str) -> None:
        CASES["qrels_file"] += 1
        lines = (["query-id\tcorpus-id\tscore"] if header else []) + rows
        path = _write("qrels.tsv", bom + ending.join(lines) + ending)
        try:
            qrels, warnings = read_qrels(path)
        except InputError as exc:
            assert "line " in str(exc) and any(row in BAD_ROWS for row in rows)
            return
        expected: dict[str, dict[str, int]] = {}
        for row in rows:
            query_id, doc_id, score = row.split("\t")
            expected.setdefault(query_id, {}).setdefault(doc_id, int(score))
        assert qrels == expected
        assert len(warnings) == len(rows) - sum(map(len, expected.values()))

    check()
    assert CASES["qrels_file"] >= MIN_CASES


def test_judged_queries_respect_the_limit_or_refuse_it():
    CASES["judged_queries"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(st.lists(query_lines, max_size=6), st.lists(qrels_rows, max_size=6), boms,
           st.one_of(st.none(), st.integers(-3, 6)))
    def check(lines: list[str], rows: list[str], bom: str, limit: int | None) -> None:
        CASES["judged_queries"] += 1
        files = BeirFiles(_write("q.jsonl", bom + "\n".join(lines)), _write("qrels.tsv", bom + "\n".join(rows)))
        warnings: list[str] = []
        try:
            queries, qrels = load_judged_queries(files, limit, warnings)
        except InputError as exc:
            assert str(exc).strip()
            return
        assert limit is None or 1 <= len(queries) <= limit
        assert queries and all(qrels.get(q.query_id) for q in queries)
        assert len({q.query_id for q in queries}) == len(queries)

    check()
    assert CASES["judged_queries"] >= MIN_CASES
