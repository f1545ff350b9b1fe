"""API keys: shown once, stored hashed, verified, revoked; each of an app, with a scope."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from services.errors import ConflictError, InputError, NotAuthenticatedError, NotFoundError, PermissionDeniedError
from services.intake.api_keys import (
    DEFAULT_APP,
    app_to_read,
    create_api_key,
    hash_key,
    list_api_keys,
    move_api_key,
    require_push,
    revoke_api_key,
    verify_api_key,
)
from services.store import transaction


def test_a_created_key_verifies_and_only_its_hash_is_stored(clean_db, settings):
    with transaction(settings) as session:
        new = create_api_key(name=" support-bot ", created_by="ana", session=session)
    assert new.key.startswith("wb_") and len(new.key) > 40
    assert (new.info.name, new.info.created_by, new.info.prefix, new.info.active) == ("support-bot", "ana", new.key[:10], True)
    with transaction(settings) as session:
        stored = session.execute(text("SELECT key_hash, prefix FROM api_keys")).one()
        dump = str([tuple(r) for r in session.execute(text("SELECT * FROM api_keys"))])
    assert stored.key_hash == hash_key(new.key) and len(stored.key_hash) == 64
    assert new.key not in dump and new.key[10:] not in dump  # the key is nowhere, only its prefix
    with transaction(settings) as session:
        verified = verify_api_key(new.key, session=session)
    assert verified.key_id == new.info.key_id and verified.last_used_at is None  # as read before this use


def test_wrong_missing_and_revoked_keys_fail(clean_db, settings):
    with transaction(settings) as session:
        kept = create_api_key(name="kept", session=session)
        gone = create_api_key(name="gone", session=session)
    for bad in (None, "", "wb_not-a-key", kept.key + "x", "x" * 10_000):
        with transaction(settings) as session, pytest.raises(NotAuthenticatedError):
            verify_api_key(bad, session=session)
    with transaction(settings) as session:
        revoked = revoke_api_key(gone.info.key_id, session=session)
        again = revoke_api_key(gone.info.key_id, session=session)
    assert revoked.revoked_at is not None and again.revoked_at == revoked.revoked_at  # revoking twice changes nothing
    with transaction(settings) as session, pytest.raises(NotAuthenticatedError, match="revoked"):
        verify_api_key(gone.key, session=session)
    with transaction(settings) as session:
        assert verify_api_key(kept.key, session=session).name == "kept"
        listed = list_api_keys(session=session)
    assert [(k.name, k.active) for k in listed] == [("kept", True), ("gone", False)]
    assert listed[0].last_used_at is not None  # the use above was recorded


def test_last_used_is_written_at_most_once_a_minute(clean_db, settings):
    with transaction(settings) as session:
        new = create_api_key(name="busy", session=session)
    with transaction(settings) as session:
        verify_api_key(new.key, session=session)
    with transaction(settings) as session:
        first = session.execute(text("SELECT last_used_at, xmin::text FROM api_keys")).one()
    for _ in range(3):
        with transaction(settings) as session:
            verify_api_key(new.key, session=session)
    with transaction(settings) as session:
        later = session.execute(text("SELECT last_used_at, xmin::text FROM api_keys")).one()
    assert first.last_used_at is not None and tuple(later) == tuple(first)  # no new row version written


def test_bad_names_and_unknown_ids_are_refused(clean_db, settings):
    with transaction(settings) as session:
        with pytest.raises(InputError):
            create_api_key(name="  ", session=session)
        with pytest.raises(InputError):
            create_api_key(name="bad\x00name", session=session)
        with pytest.raises(NotFoundError):
            revoke_api_key(12345, session=session)
        with pytest.raises(NotFoundError):
            revoke_api_key(2**40, session=session)


def test_a_key_carries_its_app_and_scope_and_reads_only_what_its_scope_allows(clean_db, settings):
    with transaction(settings) as session:
        pusher = create_api_key(name="bot", app="support", session=session)
        reader = create_api_key(name="dash", app="support", scope="read", session=session)
        admin = create_api_key(name="ops", app="ops", scope="admin", session=session)
        before_apps = create_api_key(name="old-style", session=session)
        found = {k: verify_api_key(new.key, session=session) for k, new in
                 {"push": pusher, "read": reader, "admin": admin, "default": before_apps}.items()}
    assert [(k.app, k.scope) for k in found.values()] == [("support", "push"), ("support", "read"), ("ops", "admin"),
                                                           (DEFAULT_APP, "push")]
    require_push(found["push"])
    require_push(found["admin"])
    with pytest.raises(PermissionDeniedError, match="is a read key of app 'support'"):
        require_push(found["read"])
    assert app_to_read(found["push"]) == app_to_read(found["read"]) == app_to_read(found["read"], "support") == "support"
    with pytest.raises(PermissionDeniedError, match="reads the runs of app 'support' only"):
        app_to_read(found["push"], "ops")
    assert (app_to_read(found["admin"]), app_to_read(found["admin"], "support")) == (None, "support")
    with pytest.raises(InputError, match="an app's name"):
        app_to_read(found["admin"], "no spaces")


@pytest.mark.parametrize(("app", "scope"), [("", "push"), ("a b", "push"), ("-lead", "push"), ("x" * 101, "push"),
                                            ("ok", "root"), ("ok", "")])
def test_an_app_name_or_scope_that_cannot_be_is_refused(clean_db, settings, app, scope):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError), transaction(settings) as session:
        create_api_key(name="bot", app=app, scope=scope, session=session)


def test_a_key_from_before_apps_moves_to_its_own_app_with_what_it_sent(clean_db, settings):
    from services.intake.intake import accept_records, mark_assessed
    from services.intake.otlp import decode_export
    from services.intake.schema import ExternalRun
    from services.intake.traces import store_spans
    from tests._otlp import protobuf_body, rag_trace

    def record(trace_id: str) -> ExternalRun:
        return ExternalRun.model_validate({"question": "Q?", "answer": "A.", "trace_id": trace_id})

    with transaction(settings) as session:
        old = create_api_key(name="support-bot", session=session).info  # as migration 0013 left it: in "default"
        other = create_api_key(name="other-bot", session=session).info
        mine = accept_records([record("s-1"), record("s-2")], source="api", api_key_id=old.key_id, session=session)
        accept_records([record("o-1")], source="api", api_key_id=other.key_id, session=session)
        run_id = session.execute(text(
            "INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence, "
            "components, weights_profile, config, trace_id) VALUES ('q', 'external', 'external', 'm', 'pending', 0.5, "
            "'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', 's-1') RETURNING id")).scalar_one()
        mark_assessed(mine[0].intake_id, run_id=run_id, session=session)
        store_spans(decode_export(protobuf_body(rag_trace()), content_type="application/x-protobuf", content_encoding=None,
                                  max_bytes=10_000_000), api_key_id=old.key_id, session=session)
        moved = move_api_key(old.key_id, app="support", session=session)
    assert (moved.key.app, moved.records, moved.runs, moved.traces) == ("support", 2, 1, 1)
    with transaction(settings) as session:
        apps = session.execute(text("SELECT (SELECT array_agg(DISTINCT app ORDER BY app) FROM run_intake), "
                                    "(SELECT app FROM runs), (SELECT app FROM otlp_spans LIMIT 1)")).one()
    assert tuple(apps) == (["default", "support"], "support", "support")  # the other key's record stayed

    with transaction(settings) as session:  # a trace id the app already holds: nothing moves
        accept_records([record("o-1")], source="api", app="support", session=session)
    with pytest.raises(ConflictError, match="already holds trace ids key 2 sent \\('o-1'\\)"), \
            transaction(settings) as session:
        move_api_key(other.key_id, app="support", session=session)
    with pytest.raises(NotFoundError), transaction(settings) as session:
        move_api_key(99, app="support", session=session)
