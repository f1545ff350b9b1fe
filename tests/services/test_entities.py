"""Entity mentions: the substring pre-check never changes what the word-boundary regex finds."""

from __future__ import annotations

import re

import pytest

from services.retrieval.entities import mentions


def _regex(text: str, entity: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(entity)}(?!\w)", text, re.IGNORECASE) is not None


@pytest.mark.parametrize(
    ("text", "entity", "expected"),
    [
        ("Alarm SRVO-062 fired.", "srvo-062", True),
        ("Alarm SRVO-0621 fired.", "srvo-062", False),  # no word boundary after it
        ("xSRVO-062 then SRVO-062", "srvo-062", True),  # the first occurrence fails the boundary, a later one counts
        ("Set $MCR.$GENOVERRIDE to 50.", "$mcr.$genoverride", True),
        ("Café in New York", "new york", True),  # non-ASCII text, ASCII entity
        ("İstanbul traffic", "istanbul", True),  # İ matches i case-insensitively, but lower() makes it two chars
        ("Kelvin: 300 \u212a", "k", True),  # the Kelvin sign matches k
        ("ſtrasse", "strasse", True),  # long s matches s
        ("Zürich lake", "zürich", True),  # non-ASCII entity: the regex alone decides
        ("Zurich lake", "zürich", False),
    ],
)
def test_mentions_agree_with_the_plain_regex(text, entity, expected):  # type: ignore[no-untyped-def]
    assert mentions(text, entity) is _regex(text, entity) is expected
