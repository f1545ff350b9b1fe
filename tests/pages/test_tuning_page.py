"""The Tuning page under AppTest, on the real store: sliders re-score every stored run, invalid
thresholds are refused, calibration and fits appear with verdicts, profiles are saved as new
versions, activation is for admins only, and two profiles compare on the same runs."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from app_pages.common import cached_active_profile_label
from services.answering.runs import Run, save_run
from services.review.queue import submit_review
from services.scoring.confidence import overall
from services.scoring.profiles import active_profile, list_profiles, save_profile
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, LEVELS
from services.store import transaction
from tests.pages._support import open_page

APP = str(Path(__file__).resolve().parents[2] / "app.py")
OIDC = {"auth": {"client_id": "x"}, "workbench": {"admins": ["admin@x.org"]}}
TOP_ONLY = {f"tuning.w.{c}": (1.0 if c == "top_score" else 0.0) for c in COMPONENTS}


def _run(top: float, rest: float, index: int) -> Run:
    """A retrieval-only run (no reflection, grade or heuristic in the blend): confidence is the
    weighted components, and a HIGH run is auto-accepted (CRAG correct, reflection 0.9, answered)."""
    components = (top,) + (rest,) * 6
    confidence = overall(components, DEFAULT_PROFILE)
    return Run(query=f"question {index} <b>not markup</b>", preset="balanced", collection="default", source="ask",
               backend="offline", model="extractive", status="pending", final_answer="an answer", citations=(),
               final_confidence=confidence, final_level=DEFAULT_PROFILE.level(confidence), retrieval_confidence=confidence,
               components=components, reflection_score=0.9, grade=None, crag_verdict="CORRECT", signals={},
               route=("COMPLETE",), best_iteration=1, weights_profile=DEFAULT_PROFILE.label, weights_profile_id=None,
               config={"preset": "balanced"}, outcome_note="", latency_ms=1.0, iterations=(), events=())


@pytest.fixture()
def runs(clean_db) -> dict[str, list[int]]:
    """30 runs in three groups of 10 (default weights, top_score 0.30):
    strong_top: top_score 1.0, the rest ~0.5  -> ~0.66 LOW;  all weight on top_score -> 1.0 HIGH
    weak_top:   top_score 0.2, the rest ~0.88 -> ~0.68 LOW;  all weight on top_score -> 0.2 VERY LOW
    strong:     everything ~0.92              -> ~0.92 HIGH either way."""
    groups = {"strong_top": (1.0, 0.5), "weak_top": (0.2, 0.864), "strong": (None, 0.9)}
    ids: dict[str, list[int]] = {}
    with transaction() as session:
        for name, (top, rest) in groups.items():
            ids[name] = []
            for i in range(10):
                other = rest + 0.004 * i
                ids[name].append(save_run(_run(other if top is None else top, other, len(ids) * 10 + i), session=session))
    save_profile(DEFAULT_PROFILE, created_by="setup", activate=True)  # stored as default v1
    return ids


def _verdicts(ids: dict[str, list[int]]) -> None:
    """Reviewers approve the runs with a strong top score and flag the weak-top ones."""
    for rid in ids["strong_top"] + ids["strong"]:
        submit_review(rid, expected_version=0, action="approve", reviewer="rita")
    for rid in ids["weak_top"]:
        submit_review(rid, expected_version=0, action="flag", reviewer="rita", flag_reason="wrong answer")


def open_tuning(tab: str | None = None, *, secrets: dict | None = None) -> AppTest:
    """The app, then the Tuning page (through app.py's navigation, sidebar and all). Tests that
    act as someone sign in under OIDC (as_user), as they did when a pages/ folder made AppTest
    run a switched-to page on its own."""
    at = AppTest.from_file(APP, default_timeout=120)
    for section, values in (secrets or {}).items():
        at.secrets[section] = values
    at.run()
    at.switch_page("app_pages/tuning.py").run()
    assert not at.exception, at.exception
    if tab:
        open_tab(at, tab)
    return at


def open_tab(at: AppTest, label: str) -> None:
    """Switch tabs the way a click does: the tabs rerun the page and only the open one is drawn."""
    at.session_state["tuning.tab"] = label
    at.run()
    assert not at.exception, at.exception


def as_user(email: str):  # type: ignore[no-untyped-def]
    """Sign in under OIDC as `email` (AppTest cannot log in through a provider)."""
    return mock.patch("streamlit.user_info.UserInfoProxy.to_dict", return_value={"is_logged_in": True, "email": email})


def set_sliders(at: AppTest, values: dict[str, float]) -> None:
    for key, value in values.items():
        at.slider(key=key).set_value(value)
    at.run()
    assert not at.exception, at.exception


def metric(at: AppTest, label: str):  # type: ignore[no-untyped-def]
    return next(m for m in at.metric if m.label == label)


def specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def histogram_counts(at: AppTest) -> dict[str, int]:
    spec = next(s for s in specs(at) if s["layout"].get("barmode") == "stack")
    return {trace["name"]: int(sum(_values(trace["y"]))) for trace in spec["data"]}


def _values(data) -> list[float]:  # type: ignore[no-untyped-def]
    """Plotly JSON holds numpy arrays as {"dtype", "bdata"} (base64) or as plain lists."""
    if isinstance(data, dict):
        values = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
        if "shape" in data:
            values = values.reshape([int(n) for n in str(data["shape"]).split(",")])
        return values.tolist()
    return list(data)


def error_texts(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


# --- pure helpers -----------------------------------------------------------------------------

def test_profile_from_sliders_validates_thresholds_and_weights():
    from app_pages.tuning import profile_from_sliders, slider_values
    from services.errors import InputError

    values = slider_values(DEFAULT_PROFILE)
    assert profile_from_sliders(values, DEFAULT_PROFILE) == DEFAULT_PROFILE
    with pytest.raises(InputError, match="low ≤ medium ≤ high; now low 0.80, medium 0.70"):
        profile_from_sliders(values | {"tuning.t.low": 0.8}, DEFAULT_PROFILE)
    with pytest.raises(InputError, match="At least one weight"):
        profile_from_sliders(values | dict.fromkeys(TOP_ONLY, 0.0), DEFAULT_PROFILE)


def test_slider_values_keep_weight_ratios_within_the_slider_range():
    from app_pages.tuning import slider_values

    big = dataclasses.replace(DEFAULT_PROFILE, weights={c: 2.0 if c == "top_score" else 0.5 for c in COMPONENTS})
    values = slider_values(big)
    assert values["tuning.w.top_score"] == 1.0 and values["tuning.w.consensus"] == 0.25
    assert values["tuning.t.high"] == DEFAULT_PROFILE.high


def test_ceil_to_step_rounds_thresholds_up_onto_the_slider_grid():
    from app_pages._tuning_state import ceil_to_step

    assert ceil_to_step(0.8532) == pytest.approx(0.86)
    assert ceil_to_step(0.9000000000000001) == pytest.approx(0.90)  # float noise is not a step
    assert ceil_to_step(0.8999999999999999) == pytest.approx(0.90)
    assert ceil_to_step(1.0) == 1.0


# --- re-scoring -------------------------------------------------------------------------------

def test_all_weight_on_top_score_moves_strong_top_runs_up_and_weak_top_runs_down(runs):
    at = open_tuning()
    assert at.title[0].value == "Tune confidence weights"
    assert at.slider[0].key == "tuning.w.top_score"  # bench/ui.py moves the first slider
    assert at.slider(key="tuning.w.top_score").value == pytest.approx(0.30)
    assert int(metric(at, "Would auto-accept").value) == 10
    assert int(metric(at, "VERY LOW").value) == 0
    assert histogram_counts(at) == {"HIGH": 10, "MEDIUM": 0, "LOW": 20, "VERY LOW": 0}

    set_sliders(at, TOP_ONLY)
    assert int(metric(at, "Would auto-accept").value) == 20 and metric(at, "Would auto-accept").delta == "10"
    assert int(metric(at, "VERY LOW").value) == 10
    assert int(metric(at, "Would go to review").value) == 10
    assert int(metric(at, "Runs changing level").value) == 20
    assert histogram_counts(at) == {"HIGH": 20, "MEDIUM": 0, "LOW": 0, "VERY LOW": 10}
    changes = next(d.value for d in at.dataframe if "question" in d.value.columns)
    assert len(changes) == 20 and set(changes["to"]) == {"HIGH", "VERY LOW"}
    moved_up = changes[changes["to"] == "HIGH"]
    assert set(moved_up["run id"]) == set(runs["strong_top"]) and (moved_up["change"] > 0).all()
    assert changes["question"].str.contains("<b>").all()  # plain text in a dataframe, never markdown
    assert not any("<b>" in str(m.value) for m in at.markdown)
    # the normalized weights chart: all the weight on top score
    weights = next(s for s in specs(at) if s["layout"].get("title", {}).get("text") == "normalized weights")
    assert _values(weights["data"][0]["x"]) == [1.0, 0, 0, 0, 0, 0, 0]

    at.button(key="tuning.reset").click().run()
    assert at.slider(key="tuning.w.top_score").value == pytest.approx(0.30)
    assert int(metric(at, "Would auto-accept").value) == 10


def test_invalid_thresholds_show_an_error_and_keep_the_last_valid_profile(runs):
    at = open_tuning()
    set_sliders(at, {"tuning.t.high": 0.95})  # valid: the strong runs (~0.92) drop to MEDIUM
    assert histogram_counts(at)["HIGH"] == 0 and int(metric(at, "Would auto-accept").value) == 0
    set_sliders(at, {"tuning.t.low": 0.8})  # low 0.80 > medium 0.70
    assert any("low ≤ medium ≤ high" in e for e in error_texts(at))
    assert histogram_counts(at) == {"HIGH": 0, "MEDIUM": 10, "LOW": 20, "VERY LOW": 0}  # still high 0.95, low 0.5
    open_tab(at, "Profiles")
    assert at.button(key="tuning.save").disabled and any("Fix the sliders" in c.value for c in at.caption)
    set_sliders(at, {"tuning.t.low": 0.5})
    assert not error_texts(at) and not any("Fix the sliders" in c.value for c in at.caption)


def test_would_auto_accept_is_reconciled_with_the_review_queues_auto_accepted(runs):
    """Tuning applies the auto-accept rule again to every stored run; the Review queue counts
    statuses. The Tuning page quotes the queue's own number and breaks its count down by status,
    so the two pages cannot disagree without saying why."""
    strong = runs["strong"]  # the 10 runs the rule accepts under the default weights
    with transaction() as session:
        session.execute(text("UPDATE runs SET status = 'auto_accepted' WHERE id = ANY(:ids)"), {"ids": strong[:3]})
    for rid in strong[3:5]:
        submit_review(rid, expected_version=0, action="approve", reviewer="rita")
    review = open_page(AppTest.from_file(APP, default_timeout=120), "review", "Review queue")
    queue_count = int(next(m for m in review.metric if m.label == "Auto-accepted").value)
    assert queue_count == 3

    at = open_tuning()
    assert int(metric(at, "Would auto-accept").value) == 10
    note = next(c.value for c in at.caption if c.value.startswith("The Review queue shows"))
    assert f"The Review queue shows {queue_count} auto-accepted" in note
    assert "those 10 are: 2 approved, 3 auto-accepted, 5 pending." in note  # 2 + 3 + 5 = the metric

    set_sliders(at, {"tuning.t.high": 0.95})  # the strong runs (~0.92) drop to MEDIUM
    assert int(metric(at, "Would auto-accept").value) == 0
    note = next(c.value for c in at.caption if c.value.startswith("The Review queue shows"))
    assert "those 0 are: none." in note and "3 of the queue's auto-accepted runs would go to review" in note


def test_would_auto_accept_does_not_count_runs_a_reviewer_flagged_or_corrected(runs):
    strong = runs["strong"]  # the 10 runs the rule accepts under the default weights
    submit_review(strong[0], expected_version=0, action="flag", reviewer="rita", flag_reason="wrong answer")
    submit_review(strong[1], expected_version=0, action="correct", reviewer="rita", corrected_answer="the right one")
    submit_review(strong[2], expected_version=0, action="approve", reviewer="rita")
    at = open_tuning()
    assert int(metric(at, "Would auto-accept").value) == 8 and int(metric(at, "Would go to review").value) == 22
    note = next(c.value for c in at.caption if c.value.startswith("The Review queue shows"))
    assert "those 8 are: 1 approved, 7 pending." in note
    assert any("would also accept 1 corrected and 1 flagged by a reviewer" in w.value for w in at.warning)
    open_tab(at, "Compare profiles")  # the same count where two profiles are compared
    table = next(d.value for d in at.dataframe if "would auto-accept" in d.value.columns)
    assert table["would auto-accept"].tolist() == [8, 8] and table["would go to review"].tolist() == [22, 22]


def test_calibration_with_fewer_verdicts_than_the_fits_need_says_so_instead_of_figures(runs):
    for rid in runs["strong"][:2] + runs["weak_top"][:2]:  # 4 verdicts, both kinds: AUROC could be computed
        if rid in runs["strong"]:
            submit_review(rid, expected_version=0, action="approve", reviewer="rita")
        else:
            submit_review(rid, expected_version=0, action="flag", reviewer="rita", flag_reason="wrong answer")
    at = open_tuning("Calibration")
    assert any("needs at least 10 reviewed runs" in i.value and "4 of the 30" in i.value for i in at.info)
    assert not [m.label for m in at.metric if m.label in ("ECE", "Brier score", "AUROC")]
    assert not [m for m in at.metric if m.delta]  # no red or green arrows on noise
    open_tab(at, "Fit from verdicts")  # the next tab gives the same minimum
    assert any("at least 10 reviewed runs" in w.value for w in at.warning)


def test_without_verdicts_calibration_says_it_needs_reviewed_runs(runs):
    at = open_tuning("Calibration")
    assert any("needs reviewed runs" in i.value and "30" in i.value for i in at.info)
    assert not any(m.label == "ECE" for m in at.metric)


# --- calibration and fits -----------------------------------------------------------------------

def test_with_verdicts_the_reliability_diagram_and_metrics_appear(runs):
    _verdicts(runs)
    at = open_tuning("Calibration")
    assert not at.info
    reliability = [s for s in specs(at) if any(t.get("name") == "perfectly calibrated" for t in s["data"])]
    assert len(reliability) == 1
    assert sum(t["name"].startswith(("sliders (ECE", "active (default v1) (ECE")) for t in reliability[0]["data"]) == 2
    counts = next(t for t in reliability[0]["data"] if t["type"] == "bar")
    assert sum(_values(counts["y"])) == 30
    for label in ("ECE", "Brier score", "AUROC"):
        assert float(metric(at, label).value) >= 0
    before = float(metric(at, "AUROC").value)
    set_sliders(at, TOP_ONLY)  # the verdicts follow top_score: the ranking becomes perfect
    after = float(metric(at, "AUROC").value)
    assert after == pytest.approx(1.0) and after > before
    assert metric(at, "AUROC").delta.startswith("+")


def test_fit_weights_loads_them_into_the_sliders(runs):
    _verdicts(runs)
    at = open_tuning("Fit from verdicts")
    assert any(s["data"][-1].get("name", "").startswith("isotonic calibrated") for s in specs(at))  # calibrated curve
    # In-sample the plain isotonic fit is calibrated exactly; its pseudo-verdicts keep each step
    # off 0 and 1, so it is nearly so, and better than the raw score it calibrates.
    assert float(metric(at, "ECE").value) < 0.05 and metric(at, "ECE").delta.startswith("-")
    at.button(key="tuning.fit.weights").click().run()
    assert not at.exception and not at.warning
    fitted = next(d.value for d in at.dataframe if "fitted share" in d.value.columns)
    shares = fitted["fitted share"]
    assert shares.sum() == pytest.approx(1.0) and shares.iloc[0] == shares.max() > 0.5  # top score leads
    at.button(key="tuning.fit.load").click().run()
    assert not at.exception
    sliders = [at.slider(key=f"tuning.w.{c}").value for c in COMPONENTS]
    assert sliders == pytest.approx([round(share, 2) for share in shares])
    open_tab(at, "Effect on runs")
    assert int(metric(at, "Would auto-accept").value) == 20  # the strong-top runs now reach HIGH


def test_too_few_verdicts_is_a_warning(runs):
    for rid in runs["strong"][:3]:
        submit_review(rid, expected_version=0, action="approve", reviewer="rita")
    at = open_tuning("Fit from verdicts")
    assert any("at least 10 reviewed runs" in w.value for w in at.warning)  # the calibrator
    at.button(key="tuning.fit.weights").click().run()
    assert not at.exception
    assert any("at least 10 reviewed runs" in w.value for w in at.warning)


def test_recommended_threshold_becomes_the_high_threshold(runs):
    _verdicts(runs)
    at = open_tuning("Fit from verdicts")
    at.number_input(key="tuning.fit.target").set_value(1.0).run()
    assert float(metric(at, "Precision").value.rstrip("%")) == pytest.approx(100.0)
    assert float(metric(at, "Threshold").value) == pytest.approx(0.9, abs=1e-3)  # the lowest strong run
    at.button(key="tuning.fit.set_high").click().run()
    assert not at.exception
    assert at.slider(key="tuning.t.high").value == pytest.approx(0.90)


def test_widgets_in_a_closed_tab_keep_their_values(runs):
    _verdicts(runs)
    at = open_tuning("Fit from verdicts")
    at.radio(key="tuning.fit.method").set_value("logistic")
    at.number_input(key="tuning.fit.target").set_value(0.95).run()
    open_tab(at, "Profiles")
    at.text_input(key="tuning.save.name").input("strict").run()
    open_tab(at, "Fit from verdicts")
    assert at.radio(key="tuning.fit.method").value == "logistic"
    assert at.number_input(key="tuning.fit.target").value == pytest.approx(0.95)
    assert not at.exception and not at.warning  # no "default value and Session State" warning either
    assert any(s["data"][-1].get("name", "").startswith("logistic calibrated") for s in specs(at))
    open_tab(at, "Profiles")
    assert at.text_input(key="tuning.save.name").value == "strict"


# --- profiles -------------------------------------------------------------------------------------

def test_save_creates_a_new_version_with_the_slider_weights(runs):
    with as_user("rita@x.org"):  # signed in (not an admin): saving needs a name, not a role
        at = open_tuning("Profiles", secrets=OIDC)
        set_sliders(at, TOP_ONLY)
        assert at.text_input(key="tuning.save.name").value == "default"
        at.text_area(key="tuning.save.notes").input("top score only")
        at.button(key="tuning.save").click().run()
    assert not at.exception and not error_texts(at)
    assert "default v2" in at.success[0].value
    saved = {p.label: p for _, p, _ in list_profiles()}
    assert set(saved) == {"default v1", "default v2"}
    assert dict(saved["default v2"].weights) == {c: TOP_ONLY[f"tuning.w.{c}"] for c in COMPONENTS}
    assert dict(saved["default v1"].weights) == dict(DEFAULT_PROFILE.weights)  # never overwritten
    assert active_profile()[0].label == "default v1"  # saving alone does not activate


def test_save_without_a_reviewer_name_is_refused(runs):
    at = open_tuning("Profiles")
    assert at.button(key="tuning.save").disabled
    assert any("reviewer name" in c.value for c in at.caption)


def test_an_admin_activates_a_profile_and_the_sidebar_label_follows(runs):
    strict_id, _ = save_profile(dataclasses.replace(DEFAULT_PROFILE, name="strict", high=0.95), created_by="setup")
    assert cached_active_profile_label() == "default v1"  # cached for the sidebar
    with as_user("admin@x.org"):
        at = open_tuning("Profiles", secrets=OIDC)
        assert not at.button(key="tuning.activate").disabled
        at.selectbox(key="tuning.activate.pick").select(strict_id)
        at.button(key="tuning.activate").click().run()
    assert not at.exception and not error_texts(at)
    assert "strict v1 is now the active profile" in at.success[0].value
    assert active_profile()[1] == strict_id
    assert cached_active_profile_label() == "strict v1"  # the page cleared the sidebar's cache
    # deltas now compare with strict v1 (HIGH from 0.95: none of its runs is auto-accepted)
    with as_user("admin@x.org"):
        open_tab(at, "Effect on runs")
    assert metric(at, "Would auto-accept").value == "10" and metric(at, "Would auto-accept").delta == "10"


def test_a_non_admin_under_oidc_cannot_activate(runs):
    strict_id, _ = save_profile(dataclasses.replace(DEFAULT_PROFILE, name="strict", high=0.95), created_by="setup")
    with as_user("bob@x.org"):
        at = open_tuning("Profiles", secrets=OIDC)
    assert at.button(key="tuning.activate").disabled and at.checkbox(key="tuning.save.activate").disabled
    assert any("Only administrators" in c.value for c in at.caption)
    # the button is drawn for an admin, but bob clicks it (the admin list changed, a stale tab):
    # the callback checks who clicks, not who the page was drawn for
    with as_user("admin@x.org"):
        at = open_tuning("Profiles", secrets=OIDC)
    at.selectbox(key="tuning.activate.pick").select(strict_id)
    with as_user("bob@x.org"):
        at.button(key="tuning.activate").click().run()
    assert not at.exception
    assert any("only administrators may change the active weights profile" in e for e in error_texts(at))
    assert active_profile()[0].label == "default v1"


def test_profile_names_are_never_rendered_as_markdown(runs):
    from app_pages.common import as_plain

    name = "**bold** <b>x</b> [link](https://x.org)"
    save_profile(dataclasses.replace(DEFAULT_PROFILE, name=name), created_by="setup", activate=True)
    at = open_tuning("Compare profiles")
    label = f"{name} v1"
    assert any(as_plain(label) in c.value for c in at.caption)  # "Deltas compare with the active profile, ..."
    spec = next(s for s in specs(at) if s["data"][0]["type"] == "heatmap")
    assert "&lt;b&gt;x&lt;/b&gt;" in spec["layout"]["yaxis"]["title"]["text"]


# --- compare --------------------------------------------------------------------------------------

def test_compare_shows_level_counts_and_the_confusion_heatmap(runs):
    _verdicts(runs)
    at = open_tuning("Compare profiles")
    set_sliders(at, TOP_ONLY)
    assert at.selectbox(key="tuning.compare.a").value == "active"
    assert at.selectbox(key="tuning.compare.b").value == "sliders"
    heatmap = next(s for s in specs(at) if s["data"][0]["type"] == "heatmap")
    z = heatmap["data"][0]["z"]
    confusion = [_values(row) for row in z] if isinstance(z, list) else _values(z)
    assert heatmap["data"][0]["x"] == list(LEVELS)
    # rows: active (HIGH 10, LOW 20); columns: sliders (HIGH 20, VERY LOW 10)
    assert confusion == [[10, 0, 0, 0], [0, 0, 0, 0], [10, 0, 0, 10], [0, 0, 0, 0]]
    table = next(d.value for d in at.dataframe if "ECE" in d.value.columns)
    assert table["would auto-accept"].tolist() == [10, 20] and table["AUROC"].iloc[1] == pytest.approx(1.0)
    assert int(next(m for m in at.metric if m.label == "Runs changing level").value) == 20
