"""Demo runs: the demo questions through the real pipeline with every preset, answer-key
verdicts on some of them, and one action that removes them all again."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import text

from services.answering import pipeline
from services.answering.llm.backends import backend_for
from services.answering.presets import PRESETS
from services.corpus.ingest import IngestProgress, IngestSummary, ingest_paths
from services.demo._cores import one_torch_thread, start_store_and_model
from services.demo.answer_key import CORPUS_DIR, DemoQuestion, answer_key, demo_document_ids, key_verdict
from services.domain import RunStatus
from services.errors import InputError
from services.review.queue import ANSWER_KEY_REVIEWER, submit_review
from services.settings import Settings, get_settings
from services.store import transaction

DEMO_SOURCE = "demo"  # runs.source of every demo run: what removal deletes, and nothing else
COLLECTION = "default"  # the collection the Ask, Search and Review pages work on
# The answer key judges these presets' runs; the balanced preset's runs (the sidebar's default)
# stay as the pipeline routed them, so the queue holds real pending runs for a person to work.
KEYED_PRESETS = ("minimal", "research")


@dataclass(frozen=True)
class DemoProgress:
    """Where a load is: "start" (the store and the model), "handbook" while the handbook is
    ingested (documents; skipped when it is there already), then "runs"."""

    phase: str
    done: int
    total: int
    label: str  # the document just ingested, or the preset and question just answered


ProgressCallback = Callable[[DemoProgress], None]


@dataclass(frozen=True)
class DemoStatus:
    runs: int  # every stored run, demo or not
    demo_runs: int
    answer_key_verdicts: int  # current verdicts given by the answer key

    @property
    def store_empty(self) -> bool:
        return self.runs == 0


@dataclass(frozen=True)
class DemoSummary:
    runs: int
    by_status: dict[str, int]
    answer_key_verdicts: dict[str, int]  # approve / flag -> count
    replaced_runs: int  # demo runs of an earlier load, removed first
    corpus: IngestSummary | None  # None when the handbook was already there unchanged
    seconds: float
    by_preset: dict[str, int] = field(default_factory=dict)
    # wall seconds per phase: "start" (store and model), "handbook" (its ingest), "runs"
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"runs": self.runs, "by_preset": self.by_preset, "by_status": self.by_status,
                "answer_key_verdicts": self.answer_key_verdicts, "replaced_runs": self.replaced_runs,
                "corpus_documents_ingested": self.corpus.ingested if self.corpus else 0,
                "seconds": round(self.seconds, 1),
                "phase_seconds": {phase: round(s, 1) for phase, s in self.phase_seconds.items()}}


@dataclass(frozen=True)
class DemoRemoval:
    runs: int
    reviews: int  # review actions deleted with them (answer-key verdicts and anyone's reviews of demo runs)


_STATUS_SQL = """
SELECT count(*) AS runs,
       count(*) FILTER (WHERE source = :source) AS demo_runs,
       count(*) FILTER (WHERE reviewer = :answer_key) AS answer_key_verdicts
FROM runs
"""


def demo_status(*, settings: Settings | None = None) -> DemoStatus:
    with transaction(settings) as session:
        row = session.execute(text(_STATUS_SQL), {"source": DEMO_SOURCE, "answer_key": ANSWER_KEY_REVIEWER}).one()
    return DemoStatus(int(row.runs), int(row.demo_runs), int(row.answer_key_verdicts))


_REMOVE_SQL = """
WITH gone AS (DELETE FROM runs WHERE source = :source RETURNING id)
SELECT (SELECT count(*) FROM gone) AS runs,
       (SELECT count(*) FROM review_history WHERE run_id IN (SELECT id FROM gone)) AS reviews
"""


def remove_demo(*, settings: Settings | None = None) -> DemoRemoval:
    """Delete every demo run; their iterations, events, LLM calls and reviews go with them
    (ON DELETE CASCADE). The handbook's documents stay: they are the corpus, not the demo's runs."""
    with transaction(settings) as session:
        row = session.execute(text(_REMOVE_SQL), {"source": DEMO_SOURCE}).one()
    return DemoRemoval(int(row.runs), int(row.reviews))


def ensure_demo_corpus(*, settings: Settings | None = None,
                       on_progress: ProgressCallback | None = None) -> IngestSummary | None:
    """The handbook in the default collection (ingested when missing; unchanged documents are
    skipped). A collection holding other documents and none of the handbook's is refused: the
    demo questions asked of it would fill the queue with nonsense."""
    settings = settings or get_settings()
    with transaction(settings) as session:
        present = set(session.execute(text(
            "SELECT d.external_id FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = :name"),
            {"name": COLLECTION}).scalars())
    handbook = demo_document_ids()
    if present and not present & handbook:
        raise InputError(f"the '{COLLECTION}' collection holds {len(present):,} documents of your own and none of the "
                         "demo handbook's, so the demo questions have nothing to be answered from. Run the demo "
                         "on its own store: workbench --data-dir DIR demo")
    if handbook <= present:
        return None

    def ingest_progress(progress: IngestProgress) -> None:
        if on_progress is not None:
            total = progress.documents_total or len(handbook)  # the handbook is known before it is read
            on_progress(DemoProgress("handbook", progress.documents_done, total, progress.current))

    return ingest_paths([CORPUS_DIR], collection=COLLECTION, settings=settings, on_progress=ingest_progress)


def load_demo(
    *,
    presets: Sequence[str] = tuple(PRESETS),
    questions: Sequence[DemoQuestion] | None = None,
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> DemoSummary:
    """Answer every demo question with every preset through pipeline.run (source "demo"), then
    store the answer key's verdict on the runs of KEYED_PRESETS under ANSWER_KEY_REVIEWER.
    Demo runs of an earlier load are removed first, so loading twice does not double them."""
    settings = settings or get_settings()
    unknown = [p for p in presets if p not in PRESETS]
    if unknown or not presets:
        raise InputError(f"unknown preset(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(PRESETS)}")
    questions = tuple(questions) if questions is not None else answer_key()
    with one_torch_thread():
        phases: dict[str, float] = {}
        started = time.perf_counter()
        if on_progress is not None:
            on_progress(DemoProgress("start", 0, 1, "the store and the embedding model"))
        start_store_and_model(settings)
        phases["start"] = time.perf_counter() - started
        if on_progress is not None:
            on_progress(DemoProgress("start", 1, 1, "the store and the embedding model"))
        corpus = ensure_demo_corpus(settings=settings, on_progress=on_progress)
        phases["handbook"] = time.perf_counter() - started - phases["start"]
        replaced = remove_demo(settings=settings).runs
        summary = _answer_questions(presets, questions, on_progress, settings)
        phases["runs"] = time.perf_counter() - started - phases["start"] - phases["handbook"]
    return dataclasses.replace(summary, replaced_runs=replaced, corpus=corpus, seconds=time.perf_counter() - started,
                               phase_seconds=phases)


def _answer_questions(presets: Sequence[str], questions: Sequence[DemoQuestion],
                      on_progress: ProgressCallback | None, settings: Settings) -> DemoSummary:
    """Every question with every preset, preset by preset; one backend for them all, so the
    offline backend's cache of sentence vectors serves every run that retrieves a chunk again."""
    backend = backend_for(settings)
    total = len(questions) * len(presets)
    statuses: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    by_preset: Counter[str] = Counter()
    done = 0
    for preset in presets:
        for question in questions:
            run = pipeline.run(question.text, preset, backend=backend, collection=COLLECTION, source=DEMO_SOURCE,
                               settings=settings, requested_by=f"demo {question.query_id}")
            by_preset[preset] += 1
            if preset in KEYED_PRESETS:
                verdict = key_verdict(question, answer=run.final_answer,
                                      cited=(c.external_id for c in run.citations))
                review = submit_review(int(run.run_id or 0), expected_version=0, action=verdict.action,
                                       reviewer=ANSWER_KEY_REVIEWER, comment=verdict.comment,
                                       flag_reason=verdict.flag_reason, answer_key=True)
                verdicts[verdict.action] += 1
                statuses[review.new_status] += 1
            else:
                statuses[RunStatus(run.status).value] += 1
            done += 1
            if on_progress is not None:
                on_progress(DemoProgress("runs", done, total, f"{preset}: {question.query_id}"))
    return DemoSummary(done, dict(statuses), dict(verdicts), 0, None, 0.0, dict(by_preset))
