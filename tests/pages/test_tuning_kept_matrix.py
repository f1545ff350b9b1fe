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


def test_a_preload_loads_in_the_background_and_the_first_open_then_waits_for_nothing() -> None:
    loads: list[str] = []
    clock, started = Clock(), []
    matrices = kept(loads, clock, started)
    matrices.preload(lambda: "store")
    assert not loads and len(started) == 1  # nothing loaded in the caller's time
    started[0]()
    assert loads == ["matrix 1"] and matrices.age_s("store") == 0
    assert matrices.get("store") == "matrix 1" and loads == ["matrix 1"]


def test_a_failed_preload_keeps_nothing_and_the_page_loads_when_opened() -> None:
    loads: list[str] = []
    clock, started = Clock(), []
    matrices = kept(loads, clock, started)

    def store_down() -> str:
        raise RuntimeError("store went away")

    matrices.preload(store_down)
    started[0]()  # logged, not raised: the thread has no page
    assert matrices.age_s("store") is None
    assert matrices.get("store") == "matrix 1"


def test_the_app_preloads_the_stored_runs_matrix_once_per_process(clean_db, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    import app_pages._tuning_state as state
    from services.scoring.run_matrix import run_store_epoch
    from services.settings import get_settings
    from tests.services.test_documents import store_six_runs

    store_six_runs()
    monkeypatch.setenv("TUNING_PRELOAD", "true")
    get_settings.cache_clear()
    matrices = KeptMatrices(state.load_run_matrix, ttl_s=300)
    preloads: list[object] = []
    real_preload = matrices.preload
    monkeypatch.setattr(matrices, "preload", lambda epoch: (preloads.append(epoch), real_preload(epoch)))
    monkeypatch.setattr(state, "_MATRICES", matrices)
    monkeypatch.setattr(state, "_preloaded", False)
    app = str(Path(__file__).resolve().parents[2] / "app.py")
    before = set(threading.enumerate())
    try:
        AppTest.from_file(app, default_timeout=60).run()
        for thread in set(threading.enumerate()) - before:
            thread.join(timeout=60)
        epoch = run_store_epoch()
        assert matrices.age_s(epoch) is not None  # loaded by the preload, before any page asked
        assert len(matrices.get(epoch)) == 6
        AppTest.from_file(app, default_timeout=60).run()  # another session: no second preload
        assert len(preloads) == 1
    finally:
        get_settings.cache_clear()
