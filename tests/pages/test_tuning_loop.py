"""The answering loop's thresholds on the Tuning page (issue 30): ticked beside the weights,
saved in the profile's version, and used by the next run once that profile is active."""

from __future__ import annotations

import dataclasses

import pytest

from app_pages._tuning_loop import SET_KEYS, VALUE_KEYS, loop_from_state, loop_state
from services.answering import pipeline
from services.answering.presets import get_preset
from services.errors import InputError
from services.scoring.profiles import active_profile, list_profiles, save_profile
from services.scoring.weights import DEFAULT_PROFILE, WeightsProfile
from tests.pages.test_tuning_page import OIDC, as_user, error_texts, open_tuning
from tests.services.test_pipeline import DOCS, ScriptedBackend

QUESTION = "What does SRVO-062 mean?"


@pytest.fixture()
def corpus(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_paths

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    save_profile(DEFAULT_PROFILE, created_by="setup", activate=True)


def test_a_threshold_changed_on_the_tuning_page_changes_the_next_runs_loop(corpus):
    before = pipeline.run(QUESTION, "balanced", backend=ScriptedBackend((0.3,)))
    assert len(before.iterations) == 3 and before.config["max_refinement_attempts"] == 2  # balanced's cap of 2
    assert before.iterations[0].crag.verdict != "INCORRECT"

    with as_user("admin@x.org"):
        at = open_tuning("Profiles", secrets=OIDC)
        assert at.slider(key=VALUE_KEYS["retry"]).disabled  # unticked: the preset's own
        at.checkbox(key=SET_KEYS["retry"]).check()
        at.checkbox(key=SET_KEYS["crag"]).check().run()
        assert not at.slider(key=VALUE_KEYS["retry"]).disabled
        at.slider(key=VALUE_KEYS["retry"]).set_value(0)
        at.slider(key=VALUE_KEYS["crag"]).set_value((1.0, 1.0))
        at.text_input(key="tuning.save.name").input("no retries")
        at.checkbox(key="tuning.save.activate").check()
        at.button(key="tuning.save").click().run()
    assert not at.exception and not error_texts(at)
    assert "no retries v1" in at.success[0].value

    profile = active_profile().weights
    assert profile.label == "no retries v1"
    assert dict(profile.loop) == {"max_refinement_attempts": 0, "crag_incorrect_threshold": 1.0,
                                  "crag_correct_threshold": 1.0}
    after = pipeline.run(QUESTION, "balanced", backend=ScriptedBackend((0.3,)))
    assert after.route == ("ACCEPT_BEST",) and after.config["max_refinement_attempts"] == 0
    assert after.iterations[0].crag.verdict == "INCORRECT"  # CRAG's thresholds at 1.0: nothing is correct
    assert after.config["profile"]["loop"] == dict(profile.loop)  # the run keeps the version it ran with
    # an unticked threshold stays the preset's: as-written keeps the notes' reflection minimum
    assert pipeline.run(QUESTION, "as-written", backend=ScriptedBackend((0.3,))).config["reflection_min_score"] == 0.8


def test_the_page_shows_the_active_profiles_loop_and_an_unsaved_change(corpus):
    save_profile(dataclasses.replace(DEFAULT_PROFILE, name="strict", loop={"reflection_min_score": 0.9}),
                 created_by="setup", activate=True)
    at = open_tuning()
    assert at.checkbox(key=SET_KEYS["reflection"]).value and at.slider(key=VALUE_KEYS["reflection"]).value == 0.9
    assert not at.checkbox(key=SET_KEYS["retry"]).value
    assert any("strict v1, sets reflection_min_score 0.9" in c.value for c in at.caption)


# --- without Streamlit -------------------------------------------------------------------------

def test_loop_state_round_trips_and_unticked_controls_set_nothing():
    reference = get_preset("balanced")
    loop = {"reflection_min_score": 0.7, "max_refinement_attempts": 1, "crag_incorrect_threshold": 0.2,
            "crag_correct_threshold": 0.8, "consensus_threshold": 0.4, "adaptive_k": True}
    assert loop_from_state(loop_state(loop, reference)) == loop
    nothing = loop_state({}, reference)
    assert loop_from_state(nothing) == {} and nothing[VALUE_KEYS["retry"]] == reference.max_refinement_attempts


def test_a_profile_refuses_loop_values_a_run_could_not_use():
    for loop, message in (({"reflection_min_score": 1.5}, "between 0 and 1"), ({"retries": 2}, "unknown loop"),
                          ({"max_refinement_attempts": 11}, "retry cap"), ({"adaptive_k": "yes"}, "true or false"),
                          ({"crag_correct_threshold": 0.5}, "together"),
                          ({"crag_correct_threshold": 0.3, "crag_incorrect_threshold": 0.5}, "above the upper")):
        with pytest.raises(InputError, match=message):
            WeightsProfile(loop=loop)


def test_the_loop_is_stored_with_its_version_and_leaves_the_mappings_alone(clean_db):
    save_profile(DEFAULT_PROFILE, created_by="setup")
    save_profile(dataclasses.replace(DEFAULT_PROFILE, loop={"adaptive_k": True}), created_by="setup")
    stored = {p.label: p for _, p, _ in list_profiles()}
    assert dict(stored["default v1"].loop) == {} and dict(stored["default v2"].loop) == {"adaptive_k": True}
    assert dict(stored["default v2"].mappings) == {}
    assert WeightsProfile.from_dict(stored["default v2"].to_dict()).loop == {"adaptive_k": True}
