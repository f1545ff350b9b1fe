"""Whole UTC days as [since, until) bounds: the one conversion the review, export and routes
filters and `workbench export --since/--until` share."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from services.errors import InputError
from services.review.days import day_end, day_range, day_start
from services.review.export import parse_when


def test_a_picked_range_covers_whole_days_end_included():
    assert day_range(date(2025, 5, 1), date(2025, 5, 31)) == (datetime(2025, 5, 1, tzinfo=UTC),
                                                              datetime(2025, 6, 1, tzinfo=UTC))
    assert day_range(date(2024, 2, 29), date(2024, 2, 29)) == (datetime(2024, 2, 29, tzinfo=UTC),
                                                               datetime(2024, 3, 1, tzinfo=UTC))
    assert day_range(date(2025, 12, 31), None) == (datetime(2025, 12, 31, tzinfo=UTC), None)
    assert day_range(None, date(2025, 12, 31)) == (None, datetime(2026, 1, 1, tzinfo=UTC))
    assert day_range(None, None) == (None, None)


def test_a_backwards_range_is_an_input_error():
    with pytest.raises(InputError, match="starts on 2025-05-02, after it ends on 2025-05-01"):
        day_range(date(2025, 5, 2), date(2025, 5, 1))


def test_the_last_representable_day_does_not_overflow():
    assert day_end(date.max) == datetime.max.replace(tzinfo=UTC)
    assert day_range(date.min, date.max) == (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


def test_the_command_line_bare_dates_are_the_same_days():
    for day in (date(2025, 5, 31), date(2000, 1, 1), date.max):
        assert parse_when(day.isoformat()) == day_start(day)
        assert parse_when(day.isoformat(), end=True) == day_end(day)
