"""The API's assessment worker: a background thread that drains the intake queue, and one
that assembles traces whose spans are in (POST /v1/traces) into intake records, so POST
/runs and /v1/traces stay fast inserts and pushed runs still reach the review queue within
seconds.

It checks the queue about once a second while it is empty and drains it when it is not,
one batch per round (up to services.intake.assess.ASSESS_BATCH records, fewer when they carry
many contexts, assessed together: services.intake.batch) so that a shutdown waits for at most
that batch.
Any number of workers (API processes, `workbench intake process`) can run at once:
claiming skips rows another has locked. A failure of the store is logged and retried on
the next round.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from services.answering.llm.backends import backend_for
from services.answering.llm.base import AnswerBackend
from services.intake.assess import ASSESS_BATCH, ProcessSummary, process_queue
from services.intake.traces import AssemblySummary, assemble_ready_traces
from services.settings import Settings
from services.store import transaction

_log = logging.getLogger("workbench.api.worker")
POLL_SECONDS = 1.0
RECORDS_PER_ROUND = ASSESS_BATCH  # at most; one batch a round: one claim, one assessment, one commit
# The worker runs at the lowest CPU priority: accepting pushes is what clients wait for, and
# on a busy machine the assessment takes only the time the API and the store leave over.
WORKER_NICENESS = 19
# Traces are assembled by a thread of their own at normal priority: turning stored spans
# into queued records is intake, and must not wait behind the assessment's backlog.
ASSEMBLY_POLL_SECONDS = 0.25
ASSEMBLY_BATCH = 200


class AssessmentWorker:
    def __init__(self, settings: Settings, *, poll_seconds: float = POLL_SECONDS,
                 backend_factory: Callable[[Settings], AnswerBackend] = backend_for) -> None:
        self._settings = settings
        self._poll_seconds = poll_seconds
        self._backend_factory = backend_factory
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._assembler: threading.Thread | None = None
        self.rounds = 0  # for tests and logs: how many times the queue was looked at

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="workbench-assessment", daemon=True)
            self._thread.start()
        if self._assembler is None:
            self._assembler = threading.Thread(target=self._assemble, name="workbench-traces", daemon=True)
            self._assembler.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the thread to stop after the batch it is on, and wait for it."""
        self._stop.set()
        if self._assembler is not None:
            self._assembler.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                _log.warning("the assessment worker did not stop within %.0f s; leaving it to exit with the process",
                             timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def assembling(self) -> bool:
        """Whether the thread that assembles traces into runs is running."""
        return self._assembler is not None and self._assembler.is_alive()

    def _run(self) -> None:
        _lower_priority()
        backend: AnswerBackend | None = None
        while not self._stop.is_set():
            self.rounds += 1
            summary = ProcessSummary(0, 0, 0)
            try:
                backend = backend or self._backend_factory(self._settings)
                summary = process_queue(batch=RECORDS_PER_ROUND, max_batches=1, settings=self._settings,
                                        backend=backend)
            except Exception:  # the store is down, or a bug: log it, keep the API up, try again
                _log.exception("assessing queued runs failed; retrying in %.0f s", self._poll_seconds)
            if summary.assessed or summary.failed:
                _log.info("assessed %d, failed %d, %d still queued", summary.assessed, summary.failed, summary.remaining)
            if summary.remaining == 0 or not (summary.assessed or summary.failed):
                self._stop.wait(self._poll_seconds)

    def _assemble(self) -> None:
        """Traces whose spans are in (POST /v1/traces) into queued records, a batch at a time."""
        while not self._stop.is_set():
            done = AssemblySummary(0, 0)
            try:
                with transaction(self._settings) as session:
                    done = assemble_ready_traces(settle_seconds=self._settings.otlp_settle_seconds,
                                                 quiet_seconds=self._settings.otlp_quiet_seconds,
                                                 limit=ASSEMBLY_BATCH, session=session)
            except Exception:  # the store is down, or a bug: log it, keep the API up, try again
                _log.exception("assembling traces failed; retrying in %.0f s", self._poll_seconds)
                self._stop.wait(self._poll_seconds)
            if done.assembled or done.dropped:
                _log.info("traces: %d assembled into runs, %d dropped", done.assembled, done.dropped)
            if done.assembled + done.dropped < ASSEMBLY_BATCH:
                self._stop.wait(ASSEMBLY_POLL_SECONDS)


def _lower_priority() -> None:
    # Linux schedules threads individually: this lowers only the calling thread (and the
    # threads it starts later, such as the encoder's pool, which inherit it).
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)
    except (OSError, AttributeError):  # not Linux, or not permitted: run at normal priority
        pass
