"""With OIDC configured, nothing but the sign-in prompt is reachable without a login; signed-in
users get only what their role allows. AppTest cannot log in through a provider, so `at.user`
plays the identity the provider would have returned. A disabled button is no defence on its
own (a client can send the click anyway), so every refusal is also checked with a forged click
and against the database, and every permission is checked again the other way: as an admin.
AppTest will not click a disabled widget, so a forged click is played as the page drawn for an
admin and clicked by the non-admin: the server must decide by who clicks, not by what it drew."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from services.answering.runs import load_run
from services.corpus.ingest import ingest_uploads
from services.corpus.stats import list_documents
from services.review.queue import review_history
from services.scoring.profiles import active_profile, list_profiles, save_profile
from services.scoring.weights import DEFAULT_PROFILE
from tests.security._support import save_runs

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
# common.py and _private modules are parts of pages, not pages (app.py names the pages)
PAGES = sorted(p.name for p in (ROOT / "app_pages").glob("*.py") if p.name != "common.py" and not p.name.startswith("_"))
OIDC = {
    "auth": {"client_id": "workbench-test", "client_secret": "not-used", "redirect_uri": "http://localhost:8501/oauth2callback",
             "cookie_secret": "not-used", "server_metadata_url": "https://idp.example/.well-known/openid-configuration"},
    "workbench": {"admins": ["alice@x.org"], "reviewers": ["rita@x.org"]},
}
SIGNED_OUT = {"is_logged_in": False}
ALICE = {"is_logged_in": True, "email": "alice@x.org", "name": "Alice"}  # admin
BOB = {"is_logged_in": True, "email": "bob@x.org", "name": "Bob"}  # signed in, no role
RITA = {"is_logged_in": True, "email": "rita@x.org", "name": "Rita"}  # reviewer
PROMPT_TYPES = {"root", "main", "sidebar", "event", "vertical", "container", "title", "info", "button"}


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    st.cache_data.clear()  # cached counts and profile labels must not cross tests
    yield
    st.cache_data.clear()


def app_as(user: dict, script: str = APP) -> AppTest:
    at = AppTest.from_file(script, default_timeout=120)
    at.secrets.update(OIDC)
    at.user = dict(user)
    return at


def open_page(user: dict, page: str) -> AppTest:
    at = app_as(user).run()
    at.switch_page(f"app_pages/{page}").run()
    assert not at.exception, at.exception
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def assert_only_the_sign_in_prompt(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["RAG Confidence Workbench"]
    assert [i.value for i in at.info] == ["Sign in to review answers."]
    assert [b.key for b in at.button] == ["common.login"] and at.button[0].label == "Sign in"
    assert len(at.sidebar.children) == 0, "the sidebar (store, corpus, profile) is drawn only after sign-in"
    drawn = {node.type for node in at._tree}
    assert drawn <= PROMPT_TYPES, f"more than the sign-in prompt was drawn: {drawn - PROMPT_TYPES}"


# --- signed out ----------------------------------------------------------------------------------------------


@pytest.fixture()
def store_untouched() -> Iterator[mock.Mock]:
    """Fails the test if anything reaches for the database before sign-in."""
    import app_pages.common  # imported before patching, or it would bind the spy for good

    spy = mock.Mock(side_effect=AssertionError("the database was used before sign-in"))
    with mock.patch.object(app_pages.common, "get_engine", spy), mock.patch("services.store.get_engine", spy):
        yield spy


def test_signed_out_the_app_shows_only_the_sign_in_prompt(store_untouched):
    at = app_as(SIGNED_OUT).run()
    assert_only_the_sign_in_prompt(at)  # no "Ask" page title, no sidebar
    store_untouched.assert_not_called()


@pytest.mark.parametrize("page", PAGES)
def test_signed_out_every_page_run_directly_stops_at_the_prompt(page, store_untouched):
    """A page opened by its own URL (run as its own script) must gate itself, not rely on app.py."""
    at = app_as(SIGNED_OUT, str(ROOT / "app_pages" / page)).run()
    assert_only_the_sign_in_prompt(at)
    store_untouched.assert_not_called()


def test_the_default_test_user_without_a_login_flag_is_signed_out(store_untouched):
    """AppTest's default user has an email but no is_logged_in: an email alone is not a login."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets.update(OIDC)
    at.user = {"email": "alice@x.org"}
    assert_only_the_sign_in_prompt(at.run())


def test_signed_in_the_app_shows_the_pages_and_sidebar(clean_db):
    """The other side of the gate: the same secrets with a login reach the default page."""
    at = app_as(BOB).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Start here"] and not at.button(key="common.logout").disabled
    assert "Signed in as bob@x.org" in [c.value for c in at.sidebar.caption]


# --- the Corpus page: only admins delete -----------------------------------------------------------------------


@pytest.fixture()
def two_documents(clean_db) -> list[str]:  # type: ignore[no-untyped-def]
    summary = ingest_uploads([("alarm.md", b"# SRVO-062\nReplace the battery pack, then remaster J2."),
                              ("grease.md", b"# Reducer grease\nReplace J2 reducer grease every 20,000 hours.")])
    assert summary.ingested == 2
    return ["alarm.md", "grease.md"]


def _delete(at: AppTest, target: str, *, clicked_by: dict) -> None:
    """A target, the confirmation and the click, the click sent as `clicked_by`."""
    at.selectbox(key="corpus.delete_target").set_value(target)
    at.checkbox(key="corpus.delete_confirm").check()
    at.user = dict(clicked_by)
    at.button(key="corpus.delete").click().run()
    assert not at.exception, at.exception


def test_a_non_admin_cannot_delete_a_document(two_documents):
    at = open_page(BOB, "corpus.py")
    assert at.button(key="corpus.delete").disabled and at.checkbox(key="corpus.delete_confirm").disabled
    assert at.selectbox(key="corpus.delete_target").disabled
    assert not errors(at) and [d.external_id for d in list_documents()] == two_documents

    forged = open_page(ALICE, "corpus.py")
    _delete(forged, "alarm.md", clicked_by=BOB)
    assert errors(forged) == ["only administrators may delete documents; ask an admin (signed in as bob@x.org)"]
    assert [d.external_id for d in list_documents()] == two_documents


def test_an_admin_can_delete_a_document(two_documents):
    at = open_page(ALICE, "corpus.py")
    assert not at.button(key="corpus.delete").disabled
    _delete(at, "alarm.md", clicked_by=ALICE)
    assert not errors(at) and [d.external_id for d in list_documents()] == ["grease.md"]


# --- the Tuning page: only admins change the active profile --------------------------------------------------


@pytest.fixture()
def two_profiles(clean_db) -> dict[str, int]:  # type: ignore[no-untyped-def]
    default_id, _ = save_profile(DEFAULT_PROFILE, created_by="setup", activate=True)
    strict_id, _ = save_profile(dataclasses.replace(DEFAULT_PROFILE, name="strict", high=0.95), created_by="setup")
    return {"default": default_id, "strict": strict_id}


def open_profiles_tab(user: dict) -> AppTest:
    at = open_page(user, "tuning.py")
    at.session_state["tuning.tab"] = "Profiles"  # what clicking the tab does
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_non_admin_cannot_change_the_active_profile(two_profiles):
    at = open_profiles_tab(BOB)
    assert at.button(key="tuning.activate").disabled and at.checkbox(key="tuning.save.activate").disabled
    saved_before = [(pid, p.label) for pid, p, _ in list_profiles()]

    forged = open_profiles_tab(ALICE)
    forged.selectbox(key="tuning.activate.pick").set_value(two_profiles["strict"])
    forged.user = dict(BOB)
    forged.button(key="tuning.activate").click().run()
    assert any("only administrators may change the active weights profile" in e for e in errors(forged))
    assert active_profile()[1] == two_profiles["default"]

    forged = open_profiles_tab(ALICE)
    forged.text_input(key="tuning.save.name").input("sneaky")
    forged.checkbox(key="tuning.save.activate").check()
    forged.user = dict(BOB)
    forged.button(key="tuning.save").click().run()
    assert any("only administrators may change the active weights profile" in e for e in errors(forged))
    assert active_profile()[1] == two_profiles["default"]
    assert [(pid, p.label) for pid, p, _ in list_profiles()] == saved_before  # and nothing was saved half-way


def test_an_admin_can_change_the_active_profile(two_profiles):
    at = open_profiles_tab(ALICE)
    assert not at.button(key="tuning.activate").disabled
    at.selectbox(key="tuning.activate.pick").set_value(two_profiles["strict"])
    at.button(key="tuning.activate").click().run()
    assert not errors(at) and active_profile()[1] == two_profiles["strict"]


# --- the Review page: only people on the reviewer list save reviews -----------------------------------------------


def open_run(user: dict, run_id: int) -> AppTest:
    at = app_as(user, str(ROOT / "app_pages" / "review.py")).run()
    assert not at.exception, at.exception
    at.selectbox(key="review.pick").select(run_id).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("user, lands", [(BOB, False), (RITA, True), (ALICE, True)], ids=["not-listed", "reviewer", "admin"])
def test_only_listed_reviewers_and_admins_can_save_a_review(clean_db, user, lands):
    (run_id,) = save_runs(1)
    at = open_run(user, run_id)
    warned = [w.value for w in at.warning]
    assert any("bob@x.org is not on the reviewer list" in w for w in warned) != lands
    at.text_area(key=f"review.approve.comment.{run_id}").input("looks right")
    at.button(key="review.approve.save").click().run()
    assert not at.exception, at.exception
    if lands:
        assert not errors(at) and load_run(run_id).status == "approved"
        assert [h.reviewer for h in review_history(run_id)] == [user["email"]]
    else:
        assert errors(at) == ["bob@x.org is not on the reviewer list; ask an admin to add you"]
        assert review_history(run_id) == [] and load_run(run_id).status == "pending"
