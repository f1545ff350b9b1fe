"""The backlog where people look, under AppTest on the real store: the Import runs page says how
many runs wait for assessment and since when, and so does the sidebar of every page."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from app_pages.common import backlog_line, cached_intake_backlog, wait_text
from services.intake.intake import accept_records
from services.intake.schema import ExternalRun
from services.intake.status import Backlog
from services.store import transaction
from tests.pages._support import open_page

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _queue(n: int, *, waited_s: int) -> None:
    runs = [ExternalRun.model_validate({"question": f"Question {i}?", "answer": "An answer.", "trace_id": f"w-{i}",
                                        "contexts": [{"text": "A passage."}]}) for i in range(n)]
    with transaction() as session:
        ids = [a.intake_id for a in accept_records(runs, source="api", session=session)]
        session.execute(text("UPDATE run_intake SET received_at = now() - make_interval(secs => :s) WHERE id = :id"),
                        {"s": waited_s, "id": min(ids)})


def test_wait_and_backlog_read_as_a_person_reads_them():
    assert [wait_text(s) for s in (0.2, 40, 200, 7500, 300_000)] == ["under a second", "40 s", "3 min", "2 h 5 min",
                                                                     "3 d 11 h"]
    assert backlog_line(Backlog(0, None, None, 0.0)) == "nothing waiting for assessment"
    assert backlog_line(Backlog(1, None, 12.0, 0.0)) == "1 run waiting for assessment, the oldest for 12 s"
    assert backlog_line(Backlog(1234, None, 7500.0, 0.0)) == "1,234 runs waiting for assessment, the oldest for 2 h 5 min"


def test_the_import_page_and_the_sidebar_show_the_backlog(clean_db):  # type: ignore[no-untyped-def]
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert "Intake — nothing waiting for assessment" in [str(getattr(e, "value", "")) for e in at.sidebar]

    _queue(3, waited_s=7500)
    cached_intake_backlog.clear()  # the sidebar's figures live 5 s
    at = AppTest.from_file(APP, default_timeout=120).run()
    sidebar = [str(getattr(e, "value", "")) for e in at.sidebar]
    assert "Intake — 3 runs waiting for assessment, the oldest for 2 h 5 min" in sidebar

    page = open_page(at, "import_runs", "Import runs")
    assert {m.label: m.value for m in page.metric}["Queued"] == "3"
    [caption] = [c.value for c in page.caption if c.value.startswith("Backlog:")]
    assert caption.startswith("Backlog: 3 runs waiting for assessment, the oldest for 2 h 5 min (accepted ")
