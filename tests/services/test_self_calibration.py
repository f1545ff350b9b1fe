"""Self-calibration on the real embedded Postgres: pseudo-questions a corpus asks of itself,
the legs' raw scores searches keep for them, and the profile version the fit is stored as."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text

from db.models import WeightsProfileRow
from services.corpus.extract import SourceDocument
from services.corpus.indexing import ensure_collection
from services.corpus.ingest import ingest_documents
from services.domain import RETRIEVAL_MODES
from services.errors import InputError
from services.evaluation.beir import BeirFiles, evaluate_beir
from services.retrieval.search import default_params, search
from services.retrieval.search_sql import LEG_SCORES
from services.retrieval.text import STOPWORDS, tokenize
from services.scoring.confidence import retrieval_metrics, score_retrieval
from services.scoring.mapping import ConfidenceMapping
from services.scoring.profiles import active_profile, save_profile
from services.scoring.pseudo_queries import QUESTIONS_PER_CHUNK, WINDOW_WORDS, pseudo_query, sample_pseudo_queries
from services.scoring.self_calibration import halves_by_chunk, self_calibrate
from services.scoring.weights import DEFAULT_PROFILE, WeightsProfile, mappings_from_dict
from services.store import transaction

COLLECTION = "selfcal"

# Varied documents: two sentences each, drawn from phrase lists small enough that every
# phrase recurs in several documents. A long window of a sentence names its document; a
# short one may not, so the pseudo-questions are a mix of found and missed.
_SUBJECTS = ["The harbor pilot", "A retired geologist", "The village baker", "Our night nurse",
             "The orchestra conductor", "A young beekeeper", "The lighthouse keeper", "The chess coach",
             "A marine biologist", "The train driver", "The museum curator", "A travelling tailor"]
_VERBS = ["repaired", "photographed", "catalogued", "painted", "measured", "sold", "borrowed", "inspected",
          "polished", "described", "restored", "weighed"]
_OBJECTS = ["an antique barometer", "the copper kettle", "a cracked violin", "the wooden canoe",
            "a faded tapestry", "the brass telescope", "an iron anchor", "the clay teapot", "a silver compass",
            "the leather saddle", "a glass lantern", "the marble statue"]
_PLACES = ["near the northern glacier", "behind the old mill", "beside the salt marsh", "inside the stone chapel",
           "under the railway bridge", "across the frozen lake", "at the busy fish market",
           "along the windy coast road", "on the crowded ferry deck", "in the quiet monastery garden"]
_TIMES = ["before the winter storms arrived", "after the autumn market closed", "during the long summer drought",
          "while the festival drums played", "when the spring floods receded", "as the evening bells rang"]
VARIED = 70

# Near-duplicates: one sentence, identical but for a made-up name (the rarest word, so the
# one a pseudo-question removes). Without it the question fits every member of the family
# equally well, and only some of them fit in a top ten: misses.
_FAMILIES = [
    "Engineer {name} checked the pressure valve on the cooling pump before the night shift began.",
    "Captain {name} signed the cargo manifest at the harbor office after the morning tide turned.",
]
_NAMES = ["Zorvath", "Quellin", "Brastow", "Yennick", "Morwell", "Tavrin", "Huxabel", "Delcourt", "Pennrose",
          "Vastrel", "Orrigan", "Kelmorth", "Fenwhistle", "Astravel", "Lunsbury", "Greythorn", "Ibbotsen",
          "Corvanne", "Whitlaw", "Drummerly"]


def _sentence(rng: random.Random) -> str:
    return (f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_PLACES)} {rng.choice(_TIMES)}.")


def corpus_documents() -> list[SourceDocument]:
    rng = random.Random(15)
    varied = [SourceDocument(f"v{i:03d}", f"Notebook page {i}", f"{_sentence(rng)} {_sentence(rng)}", "test")
              for i in range(VARIED)]
    families = [SourceDocument(f"f{f}-{name.lower()}", "Shift log", template.format(name=name), "test")
                for f, template in enumerate(_FAMILIES) for name in _NAMES]
    return varied + families


def _clear(engine, *collections: str) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM collections WHERE name = ANY(:names)"), {"names": list(collections)})


@pytest.fixture(scope="module")
def corpus(engine) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The corpus ingested once for the module (every test here only reads it)."""
    _clear(engine, COLLECTION)
    documents = corpus_documents()
    summary = ingest_documents(documents, collection=COLLECTION)
    assert summary.ingested == len(documents) and summary.chunks_added == len(documents)
    yield COLLECTION
    _clear(engine, COLLECTION)


def _clear_profiles(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE weights_profiles RESTART IDENTITY CASCADE"))


@pytest.fixture()
def no_profiles(engine) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """No stored weights profile before the test (the built-in default is active, as clean_db
    leaves it) nor after it (a profile mapping this module's collection is left to no one)."""
    _clear_profiles(engine)
    yield
    _clear_profiles(engine)


# --- one chunk's pseudo-question ----------------------------------------------------------

SENTENCE = "The copper kettle whistled loudly on the old iron stove every single morning.".split()
BODY = f"Tiny intro here. {' '.join(SENTENCE)} Short end."  # the only sentence of six words or more
DF = {stem: 5 for word in SENTENCE for stem in tokenize(word)}


def _check_question(result: tuple[str, str, str], df: dict[str, int]) -> None:
    """The passage is a run of the sentence's words around the removed word, and the question
    is that run without it."""
    question, removed, passage = result
    window = passage.split()
    starts = [i for i in range(len(SENTENCE)) if SENTENCE[i:i + len(window)] == window]
    assert starts, passage
    assert min(WINDOW_WORDS[0] + 1, len(SENTENCE)) <= len(window) <= WINDOW_WORDS[1] + 1
    gap = [i for i, word in enumerate(window) if word.strip(".") == removed]
    assert gap, (removed, passage)
    assert question == " ".join(window[:gap[0]] + window[gap[0] + 1:]).strip(".")
    assert removed.lower() not in STOPWORDS  # a stop word is never what is asked for
    assert tokenize(removed)[0] in df


def test_pseudo_query_removes_the_rarest_word_and_keeps_a_window_of_its_sentence():
    df = {**DF, "whistl": 1, "stove": 2}  # "whistled" is in the fewest chunks
    passages = set()
    for seed in range(30):
        result = pseudo_query(BODY, df, random.Random(seed))
        assert result is not None and result[1] == "whistled"
        _check_question(result, df)
        assert pseudo_query(BODY, df, random.Random(seed)) == result  # deterministic for a seed
        passages.add(result[2])
    assert len(passages) > 1  # the seed decides the window


def test_pseudo_query_asks_only_for_words_the_index_knows():
    only = {"stove": 40}  # common, but the only word of the sentence the index has seen
    for seed in range(10):
        result = pseudo_query(BODY, only, random.Random(seed))
        assert result is not None and result[1] == "stove"
        _check_question(result, only)


def test_pseudo_query_gives_none_when_there_is_nothing_to_ask():
    rng = random.Random(0)
    assert pseudo_query("Too short. Also short here.", DF, rng) is None  # no sentence of six words
    assert pseudo_query(BODY, {}, rng) is None  # no word the index knows
    codes = "abc123 def456 ghi789 jkl012 mno345 pqr678 stu901 vwx234"  # not prose
    assert all(pseudo_query(codes, {t: 1 for t in tokenize(codes)}, random.Random(s)) is None for s in range(10))


# --- a collection's sample --------------------------------------------------------------

def test_sample_is_deterministic_per_seed_and_differs_across_seeds(corpus):  # type: ignore[no-untyped-def]
    with transaction() as session:
        first = sample_pseudo_queries(session, collection=corpus, n=600, seed=0)
        again = sample_pseudo_queries(session, collection=corpus, n=600, seed=0)
        other = sample_pseudo_queries(session, collection=corpus, n=600, seed=1)
        few = sample_pseudo_queries(session, collection=corpus, n=20, seed=0)
        chunks: dict[int, str] = dict(session.execute(text(
            "SELECT c.id, c.text FROM chunks c JOIN collections k ON k.id = c.collection_id WHERE k.name = :c"),
            {"c": corpus}).tuples().all())
    assert first == again
    assert [q.text for q in first] != [q.text for q in other]
    assert len(first) >= 50 and len(other) >= 50
    assert 0 < len(few) <= 20
    documents = {d.external_id for d in corpus_documents()}
    for query in first:
        assert query.document in documents
        assert query.passage in " ".join(chunks[query.chunk_id].split())  # the chunk holds its passage
        assert query.removed in query.passage.split() or query.removed + "." in query.passage.split()
        assert len(query.text.split()) == len(query.passage.split()) - 1


def test_a_collection_with_fewer_chunks_than_wanted_asks_each_chunk_several_questions(corpus):  # type: ignore[no-untyped-def]
    with transaction() as session:
        chunks = session.scalar(text("SELECT count(*) FROM chunks c JOIN collections k ON k.id = c.collection_id "
                                     "WHERE k.name = :c"), {"c": corpus})
        once = sample_pseudo_queries(session, collection=corpus, n=chunks, seed=0)
        many = sample_pseudo_queries(session, collection=corpus, n=100 * chunks, seed=0)
        capped = sample_pseudo_queries(session, collection=corpus, n=chunks + 7, seed=0)
    per_chunk = [sum(1 for q in many if q.chunk_id == c) for c in {q.chunk_id for q in many}]
    assert len({q.chunk_id for q in once}) == len(once)  # enough chunks: one question each
    assert max(per_chunk) == QUESTIONS_PER_CHUNK  # up to the cap, never past it
    assert len(many) > 2 * len(once)
    assert len({(q.chunk_id, q.text) for q in many}) == len(many)  # no question asked twice
    assert len(capped) == chunks + 7  # never more than asked for


def test_held_out_halves_never_share_a_chunk():
    chunks = [5, 9, 5, 2, 9, 9, 7, 2, 5]
    fit, test = halves_by_chunk(chunks)
    assert sorted(fit + test) == list(range(len(chunks)))
    assert {chunks[i] for i in fit} == {5, 2} and {chunks[i] for i in test} == {9, 7}  # every other chunk
    assert not {chunks[i] for i in fit} & {chunks[i] for i in test}


def test_search_results_carry_each_legs_raw_scores(corpus):  # type: ignore[no-untyped-def]
    query = "the copper kettle behind the old mill"
    by_mode = {mode: search(query, default_params(mode=mode, k=10, collection=corpus)) for mode in RETRIEVAL_MODES}
    assert set(by_mode["hybrid"].leg_scores) == {"bm25", "dense"}
    assert set(by_mode["bm25"].leg_scores) == {"bm25"}  # bm25 mode runs no dense leg
    assert set(by_mode["dense"].leg_scores) == {"dense"}
    for mode, result in by_mode.items():
        for leg, scores in result.leg_scores.items():
            assert 1 < len(scores) <= LEG_SCORES, (mode, leg)
            assert list(scores) == sorted(scores, reverse=True), (mode, leg)
    # each leg's list starts at its best hit
    assert by_mode["bm25"].leg_scores["bm25"][0] == pytest.approx(by_mode["bm25"].hits[0].bm25_score)
    assert by_mode["dense"].leg_scores["dense"][0] == pytest.approx(by_mode["dense"].hits[0].dense_similarity)
    hybrid = by_mode["hybrid"]
    assert hybrid.leg_scores["bm25"][0] == pytest.approx(max(h.bm25_score or 0.0 for h in hybrid.hits))
    assert hybrid.leg_scores["dense"][0] == pytest.approx(max(h.dense_similarity or -1.0 for h in hybrid.hits))
    # the query's summed idf (Lucene's, as the BM25 leg weighs terms) comes with a BM25 leg
    with transaction() as session:
        n = session.scalar(text("SELECT n_chunks FROM bm25_stats s JOIN collections k ON k.id = s.collection_id "
                                "WHERE k.name = :c"), {"c": corpus})
        df = dict(session.execute(text("SELECT t.term, t.df FROM bm25_terms t JOIN collections k ON "
                                       "k.id = t.collection_id WHERE k.name = :c"), {"c": corpus}).tuples().all())
    expected = sum(math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in tokenize(query))
    assert by_mode["bm25"].query_idf == pytest.approx(expected, rel=1e-12)
    assert by_mode["hybrid"].query_idf == pytest.approx(expected, rel=1e-12)
    assert by_mode["dense"].query_idf is None
    # the QPP signals are those of the legs that ran, and the query's
    assert set(retrieval_metrics(by_mode["bm25"])["qpp"]) <= {"nqc_bm25", "wig_bm25", "smv_bm25", "query_length",
                                                             "query_idf"}
    assert "query_idf" in retrieval_metrics(hybrid)["qpp"]
    assert retrieval_metrics(hybrid)["qpp"]


def test_a_leg_that_matched_nothing_has_no_scores(corpus):  # type: ignore[no-untyped-def]
    result = search("xylophone zeppelin", default_params(mode="hybrid", k=10, collection=corpus))
    assert result.hits and set(result.leg_scores) == {"dense"}
    assert not any(name.endswith("_bm25") for name in retrieval_metrics(result)["qpp"])


# --- fitting and storing a collection's mappings ----------------------------------------

ELSEWHERE = ConfidenceMapping("isotonic", x=(0.2, 0.6), y=(0.1, 0.9), n_fitted=80, positives=40)
TUNED = WeightsProfile(name="tuned", weights={**DEFAULT_PROFILE.weights, "top_score": 0.5}, high=0.9, medium=0.6,
                       low=0.4, mappings={"elsewhere": {"hybrid": ELSEWHERE}, COLLECTION: {"dense": ELSEWHERE}})


def _stored_rows() -> list[WeightsProfileRow]:
    with transaction() as session:
        rows = list(session.scalars(select(WeightsProfileRow).order_by(WeightsProfileRow.id)))
        session.expunge_all()
        return rows


def test_self_calibrate_stores_the_next_active_version_with_the_collections_mappings(corpus, no_profiles):  # type: ignore[no-untyped-def]
    previous_id, _ = save_profile(TUNED, activate=True)
    ticks: list[tuple[int, int]] = []
    outcome = self_calibrate(corpus, n=200, seed=3, on_progress=lambda done, total: ticks.append((done, total)))

    assert outcome.collection == corpus and outcome.seed == 3 and 50 <= outcome.pseudo_queries <= 200
    assert ticks[-1] == (outcome.pseudo_queries * 3, outcome.pseudo_queries * 3)
    assert [m.mode for m in outcome.modes] == list(RETRIEVAL_MODES)
    assert outcome.profile_id != previous_id and active_profile().profile_id == outcome.profile_id
    profile = active_profile().weights
    assert profile == outcome.profile  # as stored, read back
    assert (profile.name, profile.version) == ("tuned", 2)
    assert (dict(profile.weights), profile.high, profile.medium, profile.low) == \
        (dict(TUNED.weights), TUNED.high, TUNED.medium, TUNED.low)
    assert set(profile.mappings[corpus]) == set(RETRIEVAL_MODES)
    for mode in RETRIEVAL_MODES:
        mapping = profile.mappings[corpus][mode]
        assert mapping.method == "logistic" and mapping.n_fitted == outcome.pseudo_queries
        assert 0 < mapping.positives < mapping.n_fitted  # the corpus gives both outcomes
    assert profile.mappings["elsewhere"] == {"hybrid": ELSEWHERE}  # other collections carried over

    previous, stored = _stored_rows()
    assert previous.id == previous_id and not previous.active  # the old version is kept as it was
    assert mappings_from_dict(previous.mappings) == TUNED.mappings
    assert stored.active and stored.created_by == "self-calibration"
    assert f"'{corpus}'" in stored.notes and f"{outcome.pseudo_queries} pseudo-questions" in stored.notes
    assert "seed 3" in stored.notes and "logistic" in stored.notes
    for mode in RETRIEVAL_MODES:
        mapping = profile.mappings[corpus][mode]
        assert f"{mode} {mapping.positives}/{mapping.n_fitted} found" in stored.notes
    assert json.loads(json.dumps(outcome.to_dict()))["modes"]["hybrid"]["found"] == \
        profile.mappings[corpus]["hybrid"].positives

    # a search in the collection is now scored through its mode's mapping
    for mode in RETRIEVAL_MODES:
        result = search("the brass telescope near the northern glacier", default_params(mode=mode, k=10, collection=corpus))
        breakdown = score_retrieval(result, profile)
        mapping = profile.mappings[corpus][mode]
        assert breakdown.overall == mapping(breakdown.weighted, retrieval_metrics(result)["qpp"]), mode
        assert breakdown.overall != pytest.approx(breakdown.weighted), mode
        assert sum(breakdown.contributions.values()) == pytest.approx(breakdown.overall)

    # calibrating one mode again replaces only that mode's mapping
    again = self_calibrate(corpus, modes=("bm25",), n=150, seed=4)
    latest = active_profile().weights
    assert active_profile().profile_id == again.profile_id and latest.version == 3
    assert latest.mappings[corpus]["bm25"] == again.modes[0].mapping != profile.mappings[corpus]["bm25"]
    assert latest.mappings[corpus]["dense"] == profile.mappings[corpus]["dense"]
    assert latest.mappings[corpus]["hybrid"] == profile.mappings[corpus]["hybrid"]
    assert latest.mappings["elsewhere"] == {"hybrid": ELSEWHERE}


def test_a_collection_with_no_chunks_is_an_input_error(engine, no_profiles):  # type: ignore[no-untyped-def]
    _clear(engine, "selfcal-empty")
    with transaction() as session:
        ensure_collection(session, "selfcal-empty")
    try:
        for name in ("selfcal-empty", "selfcal-never-made"):
            with pytest.raises(InputError, match=f"collection '{name}' has no text to ask questions of: ingest"):
                self_calibrate(name, n=100)
        assert _stored_rows() == []  # nothing stored, nothing activated
    finally:
        _clear(engine, "selfcal-empty")


# --- evaluation with self-calibration ---------------------------------------------------

def _beir_files(tmp_path: Path, queries: list[tuple[str, str, str]], corpus: list[SourceDocument] | None) -> BeirFiles:
    """BEIR files for (query id, text, relevant document) triples, with the corpus if given."""
    paths = BeirFiles(tmp_path / "queries.jsonl", tmp_path / "qrels.tsv",
                      None if corpus is None else tmp_path / "corpus.jsonl")
    paths.queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _d in queries), encoding="utf-8")
    paths.qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _t, d in queries),
                           encoding="utf-8")
    if corpus is not None and paths.corpus is not None:
        paths.corpus.write_text("".join(json.dumps({"_id": d.external_id, "title": d.title, "text": d.text}) + "\n"
                                        for d in corpus), encoding="utf-8")
    return paths


def test_evaluate_beir_reports_self_calibration_skipped_on_a_too_small_corpus(engine, tmp_path):  # type: ignore[no-untyped-def]
    tiny = corpus_documents()[:3]
    queries = [("q1", tiny[0].text.split(".")[0], tiny[0].external_id),
               ("q2", tiny[1].text.split(".")[0], tiny[1].external_id)]
    _clear(engine, "selfcal-tiny")
    try:
        outcome = evaluate_beir(_beir_files(tmp_path, queries, tiny), collection="selfcal-tiny",
                                profile=DEFAULT_PROFILE, modes=["bm25", "hybrid"], self_calibration=100)
    finally:
        _clear(engine, "selfcal-tiny")
    assert [r.mode for r in outcome.reports] == ["bm25", "hybrid"]
    for report in outcome.reports:
        assert report.metrics["mrr@10"] == 1.0  # the evaluation itself ran and stands
        assert report.self_calibrated is not None and set(report.self_calibrated) == {"skipped"}
        assert "at least 50 pseudo-questions" in str(report.self_calibrated["skipped"])
        assert report.to_dict()["self_calibrated"] == report.self_calibrated


def test_evaluate_beir_reports_figures_after_self_calibration(corpus, tmp_path, no_profiles):  # type: ignore[no-untyped-def]
    documents = corpus_documents()
    queries = [(f"q{i}", d.text.split(".")[0], d.external_id) for i, d in enumerate(documents[::10])]
    outcome = evaluate_beir(_beir_files(tmp_path, queries, None), collection=corpus, profile=DEFAULT_PROFILE,
                            modes=["bm25"], self_calibration=120)
    (report,) = outcome.reports
    assert report.confidence_ece is not None and 0.0 <= report.confidence_ece <= 1.0
    figures = report.self_calibrated
    assert figures is not None and set(figures) == {"confidence_auroc", "confidence_ece", "pseudo_queries",
                                                    "pseudo_found"}
    assert 50 <= int(figures["pseudo_queries"]) <= 120  # type: ignore[call-overload]
    assert 0 < int(figures["pseudo_found"]) < int(figures["pseudo_queries"])  # type: ignore[call-overload]
    assert 0.0 <= float(figures["confidence_ece"]) <= 1.0  # type: ignore[arg-type]
    assert _stored_rows() == []  # evaluation fits, but stores no profile
