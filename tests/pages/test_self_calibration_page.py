"""Self-calibration in the UI, on the real store and model: the Tuning page's "Self-calibrate" tab
(admins only; per-mode before/after reliability diagrams and figures; a too-small collection is an
error), saving slider weights keeps the active profile's mappings, and the Corpus page
self-calibrates after an ingest that makes the collection big enough."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from streamlit.testing.v1 import AppTest

from services.corpus.ingest import ingest_paths
from services.scoring.mapping import ConfidenceMapping
from services.scoring.profiles import active_profile, list_profiles, save_profile
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE
from services.settings import get_settings
from tests._calibration_corpus import calibration_documents, write_calibration_corpus
from tests.pages._support import frame_by_first_column, open_page

APP = str(Path(__file__).resolve().parents[2] / "app.py")
OIDC = {"auth": {"client_id": "x"}, "workbench": {"admins": ["admin@x.org"]}}
MODES = ["bm25", "dense", "hybrid"]
TAB = "Self-calibrate"
STEP = ConfidenceMapping("isotonic", x=(0.0, 1.0), y=(0.2, 0.9), n_fitted=100, positives=60)


def as_user(email: str):  # type: ignore[no-untyped-def]
    """Sign in under OIDC as `email` (AppTest cannot log in through a provider)."""
    return mock.patch("streamlit.user_info.UserInfoProxy.to_dict", return_value={"is_logged_in": True, "email": email})


def open_tab(email: str, tab: str = TAB) -> AppTest:
    with as_user(email):
        at = AppTest.from_file(APP, default_timeout=300)
        for section, values in OIDC.items():
            at.secrets[section] = values
        open_page(at, "tuning", "Tune confidence weights")
        at.session_state["tuning.tab"] = tab
        at.run()
    assert not at.exception, at.exception
    return at


def unescaped(markdown: str) -> str:
    """A message as read: pages escape markdown in messages that quote names (pages.common.as_plain)."""
    return markdown.replace("\\", "")


def specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


@pytest.fixture()
def calibration_corpus(clean_db, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    """150 one-chunk documents in "cal" (enough for 100+ pseudo-questions, some missed) and one
    document in "default" (far too few)."""
    ingest_paths([write_calibration_corpus(tmp_path / "corpus.jsonl")], collection="cal")
    (tmp_path / "tiny.md").write_text("# Tiny\n\nThe boiler checklist is read before every shift starts.\n")
    ingest_paths([tmp_path / "tiny.md"])
    return "cal"


# --- the Self-calibrate tab ---------------------------------------------------------------------

def test_an_admin_self_calibrates_and_sees_each_modes_before_and_after(calibration_corpus):  # type: ignore[no-untyped-def]
    at = open_tab("admin@x.org")
    assert any("holds no confidence mappings: its scores are weighted sums of the components, not probabilities"
               in unescaped(i.value) for i in at.info)
    picker = at.selectbox(key="tuning.selfcal.collection")
    assert set(picker.options) >= {"cal (150 documents, 150 chunks)", "default (1 documents, 1 chunks)"}
    picker.select("cal")
    at.number_input(key="tuning.selfcal.n").set_value(300)
    with as_user("admin@x.org"):
        at.run()
        at.button(key="tuning.selfcal.run").click().run()
    assert not at.exception, at.exception
    assert not at.error

    active, active_id = active_profile()
    assert sorted(active.mappings["cal"]) == MODES
    ((_, _, is_active),) = [p for p in list_profiles() if p[0] == active_id]
    assert is_active
    success = unescaped(at.success[0].value)
    assert success.startswith(f"Stored {active.label} (now active) with mappings for 'cal' (bm25, dense, hybrid)")
    # the coverage note follows the new active profile
    assert any("maps scores to probabilities for: cal (bm25, dense, hybrid)" in unescaped(i.value) for i in at.info)

    figures = frame_by_first_column(at, "mode")
    assert figures["mode"].tolist() == MODES
    for column in ("AUROC before", "AUROC after", "ECE before", "ECE after"):
        assert figures[column].between(0.0, 1.0).all(), column
    found = {m: f"{active.mappings['cal'][m].positives}/{active.mappings['cal'][m].n_fitted}" for m in MODES}
    assert dict(zip(figures["mode"], figures["found"])) == found

    charts = [s for s in specs(at) if s["layout"].get("title", {}).get("text") in MODES]
    assert [c["layout"]["title"]["text"] for c in charts] == MODES
    for chart in charts:
        assert chart["layout"]["xaxis"]["title"]["text"] == "confidence (predicted probability)"
        assert chart["layout"]["yaxis"]["title"]["text"] == "share found"
        names = [t.get("name", "") for t in chart["data"]]
        assert any(n.startswith("before: weighted sum (ECE ") for n in names)
        assert any(n.startswith("after: logistic mapping (ECE ") for n in names)
        assert "perfectly calibrated" in names
    hybrid = next(c for c in charts if c["layout"]["title"]["text"] == "hybrid")
    after_ece = float(figures.set_index("mode").loc["hybrid", "ECE after"])
    assert any(t.get("name") == f"after: logistic mapping (ECE {after_ece:.3f})" for t in hybrid["data"])


def test_too_small_a_collection_is_an_error_and_stores_nothing(calibration_corpus):  # type: ignore[no-untyped-def]
    at = open_tab("admin@x.org")
    at.selectbox(key="tuning.selfcal.collection").select("default")
    with as_user("admin@x.org"):
        at.run()
        at.button(key="tuning.selfcal.run").click().run()
    assert not at.exception, at.exception
    assert any("self-calibration needs at least 50 pseudo-questions" in unescaped(e.value) for e in at.error)
    assert list_profiles() == []
    assert not [s for s in specs(at) if s["layout"].get("title", {}).get("text") in MODES]


def test_only_an_admin_may_self_calibrate(calibration_corpus):  # type: ignore[no-untyped-def]
    at = open_tab("bob@x.org")
    assert at.button(key="tuning.selfcal.run").disabled
    assert any("Only administrators can self-calibrate" in c.value for c in at.caption)
    # drawn for an admin, clicked by bob (a stale tab, a changed admin list): the run the click
    # starts is bob's, so the button is disabled in it and nothing runs
    at = open_tab("admin@x.org")
    at.selectbox(key="tuning.selfcal.collection").select("cal")
    with as_user("bob@x.org"):
        at.button(key="tuning.selfcal.run").click().run()
    assert not at.exception, at.exception
    assert not at.success and not at.get("progress")
    assert list_profiles() == []


# --- saving slider weights keeps the mappings -----------------------------------------------------

def test_profile_from_sliders_keeps_the_base_profiles_mappings():
    from app_pages.tuning import profile_from_sliders, slider_values

    base = dataclasses.replace(DEFAULT_PROFILE, mappings={"cal": {"hybrid": STEP}})
    tuned = profile_from_sliders(slider_values(base) | {"tuning.w.top_score": 0.9}, base)
    assert tuned.weights["top_score"] == 0.9
    assert tuned.mappings == {"cal": {"hybrid": STEP}}


def test_saving_the_sliders_keeps_the_active_profiles_mappings(clean_db):  # type: ignore[no-untyped-def]
    save_profile(dataclasses.replace(DEFAULT_PROFILE, mappings={"cal": {"hybrid": STEP, "bm25": STEP}}),
                 created_by="setup", activate=True)
    at = open_tab("rita@x.org", "Profiles")
    assert any("keeps the confidence mappings of default v1 (cal)" in unescaped(c.value) for c in at.caption)
    with as_user("rita@x.org"):
        for component in COMPONENTS:
            at.slider(key=f"tuning.w.{component}").set_value(1.0 if component == "top_score" else 0.0)
        at.run()
        at.button(key="tuning.save").click().run()
    assert not at.exception, at.exception
    assert "default v2" in at.success[0].value
    saved = {p.label: p for _, p, _ in list_profiles()}
    assert saved["default v2"].weights["top_score"] == 1.0 and saved["default v2"].weights["consensus"] == 0.0
    assert saved["default v2"].mappings == {"cal": {"hybrid": STEP, "bm25": STEP}}


# --- the Corpus page --------------------------------------------------------------------------------

@pytest.fixture()
def min_chunks(monkeypatch) -> Iterator[None]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SELF_CALIBRATION_MIN_CHUNKS", "100")
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("SELF_CALIBRATION_MIN_CHUNKS")
    get_settings.cache_clear()


def _upload(at: AppTest, files: list[tuple[str, bytes, str]]) -> None:
    at.file_uploader(key="corpus.uploads").set_value(files)
    at.run()
    at.button(key="corpus.ingest").click().run()
    assert not at.exception, at.exception


def test_an_ingest_that_makes_the_corpus_big_enough_self_calibrates_it(clean_db, min_chunks):  # type: ignore[no-untyped-def]
    at = open_page(AppTest.from_file(APP, default_timeout=300), "corpus", "Corpus")
    corpus = "".join(json.dumps(row) + "\n" for row in calibration_documents()).encode()
    _upload(at, [("corpus.jsonl", corpus, "application/jsonl")])
    active, active_id = active_profile()
    assert active_id is not None and sorted(active.mappings["default"]) == MODES
    (success,) = at.success
    assert unescaped(success.value).startswith(f"Self-calibrated after the ingest: stored {active.label} (profile id "
                                               f"{active_id}) with 'default' mappings")
    assert unescaped(success.value).endswith("it is now the active profile.")
    figures = next(t.value for t in at.text if t.value.startswith("bm25: AUROC"))
    assert [line.split(":")[0] for line in figures.splitlines()] == MODES
    assert not at.warning

    _upload(at, [("corpus.jsonl", corpus, "application/jsonl")])  # nothing changed: no new version
    assert active_profile()[1] == active_id and not at.success


def test_a_calibration_that_fails_after_an_ingest_is_a_warning(clean_db, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SELF_CALIBRATION_MIN_CHUNKS", "1")
    get_settings.cache_clear()
    try:
        at = open_page(AppTest.from_file(APP, default_timeout=300), "corpus", "Corpus")
        _upload(at, [("tiny.md", b"# Tiny\n\nThe boiler checklist is read before every shift starts.\n", "text/markdown")])
    finally:
        monkeypatch.delenv("SELF_CALIBRATION_MIN_CHUNKS")
        get_settings.cache_clear()
    assert any("self-calibration of 'default' was not stored: self-calibration needs at least 50" in unescaped(w.value)
               for w in at.warning)
    assert any(t.value.startswith("Last ingest: 1 ingested") for t in at.text)  # the ingest stands
    assert list_profiles() == []
