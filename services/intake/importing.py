"""Import a file of records into the intake: streamed, in batches, in one transaction.

Bad records do not stop the import: they come back line-numbered and the good ones land.
One transaction for the whole file means a failure of the store (or a file that turns out
unreadable half-way) leaves nothing half-imported; re-running after fixing the bad lines
adds only what is new, for records that carry trace ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.intake.intake import accept_records
from services.intake.readers import NumberedRun, RecordError, iter_records
from services.intake.schema import ExternalRun
from services.settings import Settings
from services.store import transaction

BATCH_RECORDS = 1_000
MAX_REPORTED_ERRORS = 1_000  # a binary file is bad on every line; keep the first ones and count the rest


@dataclass(frozen=True)
class ImportSummary:
    accepted: int  # new intake rows, queued for assessment
    duplicates: int  # records whose trace id was already in the intake (nothing new stored)
    errors: tuple[RecordError, ...]  # the first MAX_REPORTED_ERRORS bad records
    error_count: int  # all bad records
    intake_ids: tuple[int, ...]  # the new rows, in file order

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "error_count": self.error_count,
                "errors": [{"line": e.line, "reason": e.reason} for e in self.errors], "intake_ids": list(self.intake_ids)}


def import_file(source: Path | bytes, *, fmt: str | None = None, settings: Settings | None = None,
                batch_records: int = BATCH_RECORDS, judges: bool = True,
                mapping: dict[str, str] | None = None) -> ImportSummary:
    """Validate every record of a JSONL, CSV or Parquet file and queue the good ones, to be
    assessed with the judges on or (`judges=False`) off; `mapping` names the columns of a
    dataset in another shape (readers.iter_records)."""
    accepted = duplicates = error_count = 0
    errors: list[RecordError] = []
    intake_ids: list[int] = []
    batch: list[ExternalRun] = []

    def flush() -> None:
        nonlocal accepted, duplicates
        created = []
        for outcome in accept_records(batch, source="import", judges=judges, session=session):
            if outcome.created:
                created.append(outcome.intake_id)
            else:
                duplicates += 1
        accepted += len(created)
        intake_ids.extend(created)
        batch.clear()

    with transaction(settings) as session:
        for item in iter_records(source, fmt=fmt, mapping=mapping):
            if isinstance(item, NumberedRun):
                batch.append(item.run)
                if len(batch) >= batch_records:
                    flush()
            else:
                error_count += 1
                if len(errors) < MAX_REPORTED_ERRORS:
                    errors.append(item)
        flush()
    return ImportSummary(accepted, duplicates, tuple(errors), error_count, tuple(intake_ids))
