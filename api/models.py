"""What the API answers with: one response shape per endpoint, documented for /docs."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class AcceptedRun(BaseModel):
    intake_id: int = Field(description="The record's id in the intake; GET /runs/{intake_id} follows it.")
    trace_id: str | None = Field(description="The trace id the record carried, if any.")
    created: bool = Field(description="False when this trace id was already stored: nothing new was added.")
    status: str = Field(description="queued, assessed or failed.")


class PushResponse(BaseModel):
    accepted: int = Field(description="Records stored now, queued for assessment.")
    duplicates: int = Field(description="Records whose trace id was already stored.")
    runs: list[AcceptedRun] = Field(description="One entry per pushed record, in the order sent.")


class RunStatusResponse(BaseModel):
    intake_id: int
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
    queued: int | None = Field(None, description="Records waiting for assessment.")


class ErrorResponse(BaseModel):
    detail: str = Field(description="What went wrong and what to do about it.")
