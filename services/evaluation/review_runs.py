"""Answer evaluated questions with the pipeline and queue every run for review, to collect verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from services.answering.llm.base import AnswerBackend
from services.retrieval.beir_files import EvalQuery


def queue_evaluation_runs(
    queries: Sequence[EvalQuery],
    *,
    preset: str = "balanced",
    collection: str = "default",
    requested_by: str = "evaluation",
    on_progress: Callable[[int, int], None] | None = None,
    backend: AnswerBackend | None = None,
) -> list[int]:
    """Answer evaluated questions with the pipeline (source "eval") and put every run in the
    review queue as pending, returning the run ids in query order.

    Runs the pipeline would auto-accept are queued too: these runs exist to collect verdicts
    for calibration, and verdicts on the low-confidence runs alone would be a biased sample.
    """
    from services.answering import pipeline
    from services.answering.llm.backends import backend_for

    backend = backend or backend_for()
    run_ids: list[int] = []
    for done, query in enumerate(queries, start=1):
        run = pipeline.run(query.text, preset, backend=backend, collection=collection, source="eval",
                           force_pending=True, requested_by=requested_by)
        assert run.run_id is not None  # pipeline.run returns the stored run
        run_ids.append(run.run_id)
        if on_progress is not None:
            on_progress(done, len(queries))
    return run_ids
