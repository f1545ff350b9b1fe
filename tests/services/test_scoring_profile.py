"""One scoring profile everywhere: after a non-default profile is activated, every surface that
shows a retrieval's confidence shows the same number for the same retrieval, and a stored run
is re-derived under the profile it was scored with (issue 19, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from app_pages.common import REVIEWER_KEY
from services.answering import pipeline
from services.answering.offline import OfflineBackend
from services.answering.presets import get_preset
from services.answering.runs import load_run
from services.cli import app
from services.retrieval.search import default_params, search
from services.scoring.confidence import score_retrieval
from services.scoring.profiles import active_profile, profile_for_run, save_profile
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, WeightsProfile

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
QUERY = "What makes a volcano erupt?"
K = 10  # what evaluation scores (a query's top 10) and the Search page's default
# Weights on one component only: its total cannot coincide with the default profile's by accident.
TOP_ONLY = WeightsProfile(name="top-only", weights={c: 1.0 if c == "top_score" else 0.0 for c in COMPONENTS},
                          high=0.95, medium=0.8, low=0.6)
DOCS = [  # more documents than K, fewer than any leg's search depth (50): every surface sees every chunk
    ("volcano", "Volcanoes", "A volcano erupts when magma rises through the crust and escapes as lava and ash."),
    ("magma", "Magma chambers", "Magma collects in chambers under a volcano until gas pressure pushes it upward."),
    ("tides", "Tides", "Ocean tides are caused by the gravitational pull of the moon and the sun on the sea."),
    ("plants", "Photosynthesis", "Plants use chlorophyll to turn sunlight, water and carbon dioxide into glucose."),
    ("quakes", "Earthquakes", "Earthquakes happen when tectonic plates slip past each other along a fault."),
    ("rain", "Rain", "Rain falls when water droplets in clouds grow heavy enough to overcome rising air."),
    ("stars", "Stars", "Stars shine because nuclear fusion in their cores turns hydrogen into helium."),
    ("bread", "Bread", "Yeast ferments sugar in dough and the carbon dioxide makes bread rise."),
    ("rust", "Rust", "Iron rusts when it reacts with oxygen and water to form iron oxide."),
    ("wind", "Wind", "Wind is air moving from areas of high pressure to areas of low pressure."),
    ("ice", "Glaciers", "Glaciers form where more snow falls each winter than melts each summer."),
    ("geyser", "Geysers", "A geyser erupts when groundwater heated by magma boils and bursts out of a vent."),
]


@pytest.fixture()
def beir(clean_db, tmp_path: Path) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    st.cache_data.clear()  # corpus stats and profile labels are cached process-wide
    paths = {"corpus": tmp_path / "corpus.jsonl", "queries": tmp_path / "queries.jsonl", "qrels": tmp_path / "qrels.tsv"}
    paths["corpus"].write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCS),
                               encoding="utf-8")
    paths["queries"].write_text(json.dumps({"_id": "q1", "text": QUERY}) + "\n", encoding="utf-8")
    paths["qrels"].write_text("query-id\tcorpus-id\tscore\nq1\tvolcano\t1\n", encoding="utf-8")
    return paths


def _breakdown_total(at: AppTest) -> float:
    """The total marked on the page's stacked breakdown chart (the unrounded overall confidence)."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    (breakdown,) = [s for s in specs if s["layout"].get("barmode") == "stack" and len(s["data"]) == len(COMPONENTS)]
    (line,) = breakdown["layout"]["shapes"]
    return float(line["x0"])


def _evaluate_page(beir: dict[str, Path]) -> float:
    """The Evaluate page on the BEIR set, in the default collection: the query's hybrid confidence."""
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/evaluate.py").run()
    at.text_input(key="evaluate.corpus_path").input(str(beir["corpus"]))
    at.text_input(key="evaluate.queries_path").input(str(beir["queries"]))
    at.text_input(key="evaluate.qrels_path").input(str(beir["qrels"]))
    at.text_input(key="evaluate.collection").input("default")
    at.multiselect(key="evaluate.modes").set_value(["hybrid"])
    at.button(key="evaluate.run").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    (report,) = at.session_state["evaluate.reports"]
    (query,) = report.per_query
    return float(query["confidence"])


def _search_page() -> float:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search.query").input(QUERY)
    assert at.radio(key="search.mode").value == "hybrid" and at.slider(key="search.k").value == K
    at.button[0].click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert f"weights profile: {TOP_ONLY.name} v1" in [c.value for c in at.caption]
    return _breakdown_total(at)


def _cli_search() -> tuple[float, str]:
    """`workbench search --json`: the overall confidence and the profile it names."""
    result = CliRunner().invoke(app, ["search", QUERY, "--mode", "hybrid", "--k", str(K), "--json"])
    assert result.exit_code == 0, result.output
    confidence = json.loads(result.stdout)["confidence"]
    return float(confidence["overall_confidence"]), confidence["profile"]


def _open_run(page: str, run_id: int) -> AppTest:
    """The Ask or Review page showing the stored run (through app.py: Ask links to Review)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[REVIEWER_KEY] = "ana"
    at.session_state["ask.run_id"] = run_id
    at.run()
    at.switch_page(f"app_pages/{page}").run()
    if page == "review.py":
        at.selectbox(key="review.pick").select(run_id).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    return at


def test_every_surface_scores_the_same_retrieval_with_the_active_profile(beir):  # type: ignore[no-untyped-def]
    profile_id, stored = save_profile(TOP_ONLY, created_by="test", activate=True)
    assert active_profile() == (stored, profile_id)

    evaluated = _evaluate_page(beir)  # ingests the corpus into the default collection first
    searched = _search_page()
    cli, cli_profile = _cli_search()
    assert cli_profile == stored.label
    run = pipeline.run(QUERY, "minimal", config=get_preset("minimal", k=K), backend=OfflineBackend())
    assert run.run_id is not None and run.weights_profile == stored.label and run.weights_profile_id == profile_id
    asked = load_run(run.run_id).iterations[0].retrieval_confidence  # as stored by the pipeline
    shown_on_ask = _breakdown_total(_open_run("ask.py", run.run_id))
    reviewed = _breakdown_total(_open_run("review.py", run.run_id))

    numbers = {"evaluation": evaluated, "search page": searched, "cli search": cli, "ask (stored)": asked,
               "ask page": shown_on_ask, "review page": reviewed}
    for surface, value in numbers.items():
        assert value == pytest.approx(evaluated, abs=1e-9), (surface, numbers)
    result = search(QUERY, default_params(mode="hybrid", k=K))
    assert score_retrieval(result, stored).overall == pytest.approx(evaluated, abs=1e-9)
    under_default = score_retrieval(result, DEFAULT_PROFILE).overall
    assert abs(under_default - evaluated) > 0.01, "the test profile must score differently from the default"

    # The stored run keeps its profile: activating another one changes new scores, not its breakdown.
    save_profile(DEFAULT_PROFILE, created_by="test", activate=True)
    assert _breakdown_total(_open_run("review.py", run.run_id)) == pytest.approx(asked, abs=1e-9)
    assert _cli_search() == (pytest.approx(under_default, abs=1e-9), DEFAULT_PROFILE.label)


def test_a_run_is_re_derived_under_its_stored_profile_then_its_row_then_the_active_one(clean_db):
    strict = WeightsProfile(name="strict", high=0.95)
    strict_id, strict_stored = save_profile(strict, created_by="test")
    active_id, active = save_profile(TOP_ONLY, created_by="test", activate=True)
    copy = WeightsProfile(name="copy", version=7, high=0.9)

    # 1. the copy stored in the run's config, whatever the id says
    assert profile_for_run(stored=copy.to_dict(), profile_id=strict_id) == copy
    # 2. an unreadable or missing copy: the stored row the run names
    for unreadable in (None, {}, {"name": "x"}, {**copy.to_dict(), "high": 2.0}):
        assert profile_for_run(stored=unreadable, profile_id=strict_id) == strict_stored
    # 3. no copy and no row (never stored, or an id that no longer exists): the active profile
    assert profile_for_run(stored=None, profile_id=None) == active
    assert profile_for_run(stored=None, profile_id=strict_id + active_id + 100) == active
    assert active_profile().weights == active


def test_with_no_stored_profile_the_built_in_default_is_active(clean_db):
    assert active_profile() == (DEFAULT_PROFILE, None)
    weights, profile_id = active_profile()  # unpacks, as the pipeline does
    assert (weights, profile_id) == (DEFAULT_PROFILE, None)
    assert profile_for_run(stored=None, profile_id=None) == DEFAULT_PROFILE
