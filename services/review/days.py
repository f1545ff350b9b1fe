"""Whole UTC days as datetime bounds, for the date filters of review, export and routes.

A picked range [start, end] of days becomes [since, until): `since` the first instant of
`start`, `until` the first instant after `end`, so the end day is included whole.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from services.errors import InputError


def day_start(day: date) -> datetime:
    """Midnight UTC at the start of `day`."""
    return datetime.combine(day, time(), UTC)


def day_end(day: date) -> datetime:
    """The exclusive end of `day`: midnight UTC at the start of the next day."""
    if day == date.max:  # the day after it is past what a datetime can hold
        return datetime.max.replace(tzinfo=UTC)
    return day_start(day + timedelta(days=1))


def day_range(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    """The days from `start` to `end`, both included, as (since, until); an open side stays None."""
    if start is not None and end is not None and start > end:
        raise InputError(f"the date range starts on {start.isoformat()}, after it ends on {end.isoformat()}; "
                         "pick a start on or before the end")
    return (day_start(start) if start is not None else None, day_end(end) if end is not None else None)
