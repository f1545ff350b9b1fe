"""The Tuning page's kept run matrix: loaded on first use, then served while a newer one loads in
the background once it is older than its ttl, so no page open after the first waits for a load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app_pages._tuning_state import KeptMatrices


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def kept(loads: list[str], clock: Clock, started: list[Callable[[], None]]) -> KeptMatrices:
    def load() -> Any:
        loads.append(f"matrix {len(loads) + 1}")
        return loads[-1]

    return KeptMatrices(load, ttl_s=300, clock=clock, start=started.append)


def test_loaded_once_then_kept_within_the_ttl() -> None:
    loads: list[str] = []
    clock, started = Clock(), []
    matrices = kept(loads, clock, started)
    assert matrices.get("store") == "matrix 1"
    clock.now = 299
    assert matrices.get("store") == "matrix 1" and loads == ["matrix 1"] and not started


def test_a_stale_matrix_is_served_while_one_reload_runs_in_the_background() -> None:
    loads: list[str] = []
    clock, started = Clock(), []
    matrices = kept(loads, clock, started)
    matrices.get("store")
    clock.now = 301
    assert matrices.get("store") == "matrix 1"  # served at once, not loaded in the page's time
    assert matrices.get("store") == "matrix 1" and len(started) == 1  # one reload, however many opens
    started[0]()  # the background thread's work
    assert matrices.get("store") == "matrix 2" and matrices.age_s("store") == 0


def test_a_failed_reload_keeps_the_old_matrix_and_is_tried_again() -> None:
    clock, started = Clock(), []
    calls = []

    def load() -> Any:
        calls.append(clock.now)
        if len(calls) == 2:
            raise RuntimeError("store went away")
        return f"matrix at {clock.now}"

    matrices = KeptMatrices(load, ttl_s=300, clock=clock, start=started.append)
    matrices.get("store")
    clock.now = 400
    matrices.get("store")
    started[0]()
    assert matrices.get("store") == "matrix at 0.0" and len(started) == 2  # kept, and a new reload asked
    started[1]()
    assert matrices.get("store") == "matrix at 400"


def test_each_store_has_its_own_and_clear_forgets_them() -> None:
    loads: list[str] = []
    clock, started = Clock(), []
    matrices = kept(loads, clock, started)
    assert (matrices.get("a"), matrices.get("b"), matrices.get("a")) == ("matrix 1", "matrix 2", "matrix 1")
    matrices.get("c")  # at most two kept: the oldest goes
    assert matrices.age_s("a") is None and matrices.age_s("c") == 0
    matrices.clear()
    assert matrices.age_s("b") is None and matrices.get("b") == "matrix 4"
