"""Weights profiles as stored: the one to score with, a stored run's, versions, saving and activating.

Every surface that scores a retrieval (Search, `workbench search`, evaluation, the pipeline)
scores with `active_profile()`; every surface that re-derives a stored run's breakdown (Ask,
Review) uses `profile_for_run`. Nothing falls back to the built-in default on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from db.models import WeightsProfileRow
from services.errors import NotFoundError, WorkbenchError
from services.scoring.weights import DEFAULT_PROFILE, WeightsProfile, mappings_from_dict
from services.store import transaction


class ScoringProfile(NamedTuple):
    """The profile to score with and its stored id (None: the built-in default, nothing stored).

    A NamedTuple, not a dataclass, so `weights, profile_id = active_profile()` unpacks as the
    pipeline does.
    """

    weights: WeightsProfile
    profile_id: int | None


# A profile's loop thresholds ride in its mappings column under a key no collection can have
# (collection names are never blank: services.corpus.indexing), so they are versioned with the
# weights without a migration of their own.
LOOP_KEY = " "


def _to_profile(row: WeightsProfileRow) -> WeightsProfile:
    stored = dict(row.mappings or {})
    loop = stored.pop(LOOP_KEY, None) or {}
    return WeightsProfile(name=row.name, version=row.version, weights=dict(row.weights),
                          high=row.high, medium=row.medium, low=row.low, mappings=mappings_from_dict(stored),
                          loop=dict(loop))


def _stored_mappings(profile: WeightsProfile) -> dict[str, Any]:
    return profile.mappings_dict() | ({LOOP_KEY: dict(profile.loop)} if profile.loop else {})


def active_profile(*, session: Session | None = None) -> ScoringProfile:
    """The profile to score with: the active stored one, else the built-in default."""
    if session is None:
        with transaction() as own:
            return active_profile(session=own)
    row = session.scalars(select(WeightsProfileRow).where(WeightsProfileRow.active)).first()
    return ScoringProfile(_to_profile(row), row.id) if row else ScoringProfile(DEFAULT_PROFILE, None)


def profile_for_run(*, stored: Mapping[str, Any] | None, profile_id: int | None,
                    session: Session | None = None) -> WeightsProfile:
    """The weights a stored run was scored with, so its breakdown adds up to its stored numbers.

    One rule, first that applies:
    1. `stored`, the copy of the profile the pipeline keeps in the run's config, if it reads
       as a valid profile (it survives the profile row being edited or deleted);
    2. the stored profile row `profile_id` (versions are never overwritten, so it is the same
       weights), if it still exists;
    3. the active profile, as for a new retrieval (a run from before profiles were stored).
    """
    if stored:
        try:
            return WeightsProfile.from_dict(stored)
        except (KeyError, TypeError, ValueError, WorkbenchError):
            pass  # unreadable: fall through to the row the run names
    if session is None:
        with transaction() as own:
            return profile_for_run(stored=None, profile_id=profile_id, session=own)
    row = session.get(WeightsProfileRow, profile_id) if profile_id is not None else None
    return _to_profile(row) if row is not None else active_profile(session=session).weights


def list_profiles() -> list[tuple[int, WeightsProfile, bool]]:
    with transaction() as session:
        rows = session.scalars(select(WeightsProfileRow).order_by(WeightsProfileRow.name, WeightsProfileRow.version))
        return [(r.id, _to_profile(r), r.active) for r in rows]


def save_profile(profile: WeightsProfile, *, created_by: str = "", notes: str = "", activate: bool = False) -> tuple[int, WeightsProfile]:
    """Store `profile` as the next version of its name (versions are never overwritten)."""
    with transaction() as session:
        latest = session.scalar(select(func.max(WeightsProfileRow.version)).where(WeightsProfileRow.name == profile.name))
        version = (latest or 0) + 1
        if activate:
            session.execute(update(WeightsProfileRow).values(active=False).where(WeightsProfileRow.active))
        row = WeightsProfileRow(name=profile.name, version=version, weights=dict(profile.weights), high=profile.high,
                                medium=profile.medium, low=profile.low, mappings=_stored_mappings(profile),
                                active=activate, created_by=created_by,
                                notes=notes)
        session.add(row)
        session.flush()
        return row.id, _to_profile(row)


def activate_profile(profile_id: int) -> None:
    with transaction() as session:
        if session.get(WeightsProfileRow, profile_id) is None:
            raise NotFoundError(f"weights profile {profile_id} does not exist")
        session.execute(update(WeightsProfileRow).values(active=False).where(WeightsProfileRow.active))
        session.execute(update(WeightsProfileRow).values(active=True).where(WeightsProfileRow.id == profile_id))
