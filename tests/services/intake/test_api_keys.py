"""API keys: shown once, stored hashed, verified, revoked."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from services.errors import InputError, NotAuthenticatedError, NotFoundError
from services.intake.api_keys import create_api_key, hash_key, list_api_keys, revoke_api_key, verify_api_key
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
