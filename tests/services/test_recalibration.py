"""When an ingest re-fits a collection's confidence mapping, on the real store: the rule (threshold
met / not met / nothing changed / off), the chunk count it reads, and a calibration that cannot be
done coming back as a warning instead of an error."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from services.corpus.ingest import IngestSummary, ingest_paths
from services.scoring.profiles import active_profile, list_profiles
from services.scoring.recalibration import (
    AFTER_INGEST,
    decide_recalibration,
    describe_calibration,
    list_collections,
    recalibrate,
    recalibration_decision,
)
from services.store import transaction
from tests._calibration_corpus import write_calibration_corpus


@pytest.fixture()
def small(clean_db, tmp_path: Path) -> IngestSummary:  # type: ignore[no-untyped-def]
    for name in ("boiler", "coffee", "fleet"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nThe {name} checklist is read before every shift starts.\n")
    return ingest_paths([tmp_path], collection="small")


def _with_min_chunks(settings, min_chunks: int):  # type: ignore[no-untyped-def]
    return settings.model_copy(update={"self_calibration_min_chunks": min_chunks})


def test_the_default_threshold_is_a_thousand_chunks(settings):  # type: ignore[no-untyped-def]
    assert type(settings)().self_calibration_min_chunks == 1000


@pytest.mark.parametrize(("changed", "chunks", "min_chunks", "recalibrate", "says"), [
    (5, 1200, 1000, True, "'c' holds 1,200 chunks and 5 documents changed"),
    (5, 1000, 1000, True, "holds 1,000 chunks"),  # "at least": the threshold itself is enough
    (5, 999, 1000, False, "'c' holds 999 chunks; automatic self-calibration starts at 1,000"),
    (0, 5000, 1000, False, "no document was added or replaced"),
    (5, 5000, 0, False, "automatic self-calibration is off"),
])
def test_recalibration_decision(changed, chunks, min_chunks, recalibrate, says):  # type: ignore[no-untyped-def]
    decision = recalibration_decision(collection="c", changed_documents=changed, chunks=chunks, min_chunks=min_chunks)
    assert decision.recalibrate is recalibrate
    assert says in decision.reason


def test_decide_counts_the_collections_chunks_and_the_changed_documents(small, settings, tmp_path):  # type: ignore[no-untyped-def]
    assert (small.ingested, small.chunks_added) == (3, 3)
    met = decide_recalibration(small, collection="small", settings=_with_min_chunks(settings, 3))
    assert (met.recalibrate, met.chunks, met.collection) == (True, 3, "small")
    not_met = decide_recalibration(small, collection="small", settings=_with_min_chunks(settings, 4))
    assert (not_met.recalibrate, not_met.chunks) == (False, 3)
    # the same files again: nothing added or replaced, so the fitted mapping still holds
    unchanged = ingest_paths([tmp_path], collection="small")
    assert (unchanged.ingested, unchanged.replaced, unchanged.unchanged) == (0, 0, 3)
    assert not decide_recalibration(unchanged, collection="small", settings=_with_min_chunks(settings, 1)).recalibrate
    # a replaced document counts as a change
    (tmp_path / "coffee.md").write_text("# coffee\n\nDescale the coffee machine every two weeks with citric acid.\n")
    replaced = ingest_paths([tmp_path], collection="small")
    assert replaced.replaced == 1
    assert decide_recalibration(replaced, collection="small", settings=_with_min_chunks(settings, 3)).recalibrate


def test_list_collections_counts_documents_and_chunks(small):  # type: ignore[no-untyped-def]
    sizes = {c.name: (c.documents, c.chunks) for c in list_collections()}
    assert sizes["small"] == (3, 3)
    assert "default" in sizes  # the main collection exists even when empty


def test_a_calibration_that_cannot_be_done_is_a_warning_and_stores_nothing(small, settings):  # type: ignore[no-untyped-def]
    decision = decide_recalibration(small, collection="small", settings=_with_min_chunks(settings, 1))
    outcome = recalibrate(decision)
    assert outcome.result is None
    assert outcome.warning is not None and outcome.warning.startswith("self-calibration of 'small' was not stored: ")
    assert "at least 50 pseudo-questions" in outcome.warning
    assert list_profiles() == []  # nothing stored, nothing activated


def test_a_decision_not_to_recalibrate_runs_nothing(small, settings):  # type: ignore[no-untyped-def]
    decision = decide_recalibration(small, collection="small", settings=_with_min_chunks(settings, 0))
    assert recalibrate(decision).result is None and recalibrate(decision).warning is None
    assert list_profiles() == []


def test_recalibrate_stores_the_collections_mappings_as_the_active_profile(clean_db, settings, tmp_path):  # type: ignore[no-untyped-def]
    summary = ingest_paths([write_calibration_corpus(tmp_path / "corpus.jsonl")], collection="cal")
    decision = decide_recalibration(summary, collection="cal", settings=_with_min_chunks(settings, 100))
    assert decision.recalibrate and decision.chunks == summary.chunks_added >= 100
    seen: list[tuple[int, int]] = []
    outcome = recalibrate(decision, on_progress=lambda done, total: seen.append((done, total)))
    assert outcome.warning is None and outcome.result is not None
    result = outcome.result
    active, active_id = active_profile()
    assert active_id == result.profile_id and set(active.mappings["cal"]) == {"bm25", "dense", "hybrid"}
    ((_, stored, _),) = [p for p in list_profiles() if p[0] == active_id]
    assert stored.mappings == active.mappings
    assert seen[-1] == (3 * result.pseudo_queries, 3 * result.pseudo_queries)  # every mode searched every question
    lines = describe_calibration(result)
    assert lines[0].startswith(f"stored {result.profile.label} (profile id {result.profile_id}) with 'cal' mappings")
    assert [line.split(":")[0] for line in lines[1:]] == ["bm25", "dense", "hybrid"]
    assert all("AUROC" in line and "ECE" in line and " -> " in line for line in lines[1:])
    with transaction() as session:
        created_by = session.scalar(text("SELECT created_by FROM weights_profiles WHERE id = :id"), {"id": active_id})
    assert created_by == AFTER_INGEST
