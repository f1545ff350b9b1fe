"""What the API answers with: one response shape per endpoint, documented for /docs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from services.intake.schema import (
    MAX_ANSWER_CHARS,
    ExternalRun,
    StorableText,
)


class AcceptedRun(BaseModel):
    intake_id: int = Field(description="The record's id in the intake; GET /runs/{intake_id} follows it.")
    trace_id: str | None = Field(description="The trace id the record carried, if any.")
    created: bool = Field(description="False when this app already sent this trace id: nothing new was added.")
    status: str = Field(description="queued, assessed or failed.")


class PushResponse(BaseModel):
    app: str = Field(description="The app the key belongs to: the records are stored under it.")
    accepted: int = Field(description="Records stored now, queued for assessment.")
    duplicates: int = Field(description="Records whose trace id this app had already sent.")
    runs: list[AcceptedRun] = Field(description="One entry per pushed record, in the order sent.")


class RunStatusResponse(BaseModel):
    intake_id: int
    app: str = Field(description="The app whose key sent the record.")
    trace_id: str | None
    source: str = Field(description="api or import.")
    status: str = Field(description="queued (waiting for assessment), assessed, or failed (see error).")
    received_at: datetime
    error: str | None = Field(description="Why the assessment failed, when it did.")
    run_id: int | None = Field(description="The workbench run the assessment produced.")
    assessed_at: datetime | None
    confidence: float | None = Field(description="The run's final confidence, 0-1.")
    level: str | None = Field(description="HIGH, MEDIUM, LOW or VERY LOW.")
    review_status: str | None = Field(description="auto_accepted, pending (in the review queue), approved, flagged or corrected.")
    verdict: str | None = Field(description="The reviewer's verdict once there is one: approved, flagged or corrected.")


class HealthResponse(BaseModel):
    status: str = Field(description="ok, or unavailable when the database cannot be reached.")
    database: str = Field(description="ok or unreachable (the server log says why).")
    queued: int | None = Field(None, description="Records waiting for assessment (counted afresh below 10,000; "
                                                  "from 10,000 up, at most once a second).")
    oldest_queued_at: datetime | None = Field(None, description="When the record waiting longest was accepted; "
                                                                "null when none waits.")
    oldest_queued_age_s: float | None = Field(None, description="How many seconds that record has waited: how far "
                                                                "the assessment is behind the pushes.")


class ErrorResponse(BaseModel):
    detail: str = Field(description="What went wrong and what to do about it.")


class AssessRequest(ExternalRun):
    """The record POST /runs takes (one schema for both), scored by POST /assess without storing
    anything. The answer may be left out to assess the retrieval alone; `trace_id`,
    `reference` and `metadata` are accepted and ignored, and the answer's `ignored` says so."""

    answer: StorableText = Field("", max_length=MAX_ANSWER_CHARS,
                                 description="The answer to judge; leave it out to assess the retrieval alone.")

    def ignored_fields(self) -> list[str]:
        """The fields sent that only a stored run keeps."""
        return [name for name in ("trace_id", "reference", "metadata") if name in self.model_fields_set]


class AssessResponse(BaseModel):
    status: str = Field(description="The status a pushed run would get: auto_accepted, or pending (the review queue).")
    final_confidence: float = Field(description="The retrieval confidence blended with the judges' verdicts, 0-1.")
    final_level: str
    retrieval_confidence: float
    confidence: dict[str, Any] = Field(description="The seven-metric breakdown: components, contributions, raw "
                                                   "metrics, recommendations.")
    signals: dict[str, float] = Field(description="The blend's inputs.")
    not_computed: dict[str, str] = Field(description="Components or inputs the contexts could not give, and why.")
    scores: dict[str, str] = Field(description="Where each score came from: your record, or computed here.")
    judges: bool
    crag: dict[str, Any] | None = Field(description="CRAG's verdict on the contexts (null with judges off).")
    reflection: dict[str, Any] | None = Field(description="Grounding of the answer in the contexts (null without "
                                                          "an answer or with judges off).")
    grade: dict[str, Any] | None = Field(description="Adequacy 1-5 with the gaps behind it.")
    gaps: list[str]
    errors: list[dict[str, str]] = Field(description="Judges that failed (the rest of the assessment stands).")
    hits: list[dict[str, Any]] = Field(description="The contexts as scored hits, in your order.")
    backend: str
    model: str
    ignored: dict[str, str] = Field(default_factory=dict, description="Fields of the record that POST /assess does "
                                                                      "not use, and why.")


class ReviewedRunResponse(BaseModel):
    intake_id: int
    app: str = Field(description="The app whose key sent the record.")
    trace_id: str | None
    source: str
    run_id: int
    status: str = Field(description="approved, flagged, corrected, or pending when it was sent back to review.")
    verdict: str | None = Field(description="approved, flagged or corrected.")
    corrected_answer: str | None = Field(description="The reviewer's corrected answer, when there is one.")
    flag_reason: str | None
    comment: str | None
    reviewer: str | None
    reviewed_at: datetime
    review_version: int = Field(description="With run_id, identifies this review; a later review has a higher one.")
    final_confidence: float
    final_level: str


class ReviewedRunsResponse(BaseModel):
    runs: list[ReviewedRunResponse] = Field(description="Oldest review first (by review time, then run id).")
    next: str | None = Field(description="The page was full: pass this back as `cursor` for the next page at once. "
                                         "null: this page reached the end for now.")
    resume: str = Field(description="Where this page ended, whatever its size: keep it and poll with `cursor=<resume>` "
                                    "later for the reviews made since. A run reviewed again comes again, with its new "
                                    "review_version.")
