"""The per-key token bucket on a fake clock: a burst, then the rate; each key its own bucket;
the wait it names; a rate of 0 lets everything through."""

from __future__ import annotations

import pytest

from services.intake.quotas import KeyRates, QuotaExceededError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_and_each_key_has_its_own_bucket():
    clock = Clock()
    rates = KeyRates(rate=2.0, burst=3, clock=clock)
    assert [rates.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rates.take("a") == pytest.approx(0.5)  # the next token in half a second
    assert rates.take("b") == 0.0
    clock.now += 0.5
    assert rates.take("a") == 0.0 and rates.take("a") > 0
    clock.now += 60  # a quiet minute refills the burst, no more
    assert [rates.take("a") for _ in range(4)][-1] > 0


def test_the_refusal_says_how_long_to_wait_in_whole_seconds():
    rates = KeyRates(rate=0.25, burst=1, clock=Clock())
    rates.check("a", key_prefix="wb_abc")
    with pytest.raises(QuotaExceededError, match="wb_abc... is over its rate of 0.25 requests a second") as refused:
        rates.check("a", key_prefix="wb_abc")
    assert refused.value.retry_after == 4


def test_a_rate_of_zero_is_no_limit():
    rates = KeyRates(rate=0, burst=1, clock=Clock())
    assert all(rates.take("a") == 0 for _ in range(1_000))
