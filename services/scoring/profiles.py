"""Weights profiles as stored: the active one, versions, saving and activating."""

from __future__ import annotations

from sqlalchemy import func, select, update

from db.models import WeightsProfileRow
from services.errors import NotFoundError
from services.scoring.confidence import DEFAULT_PROFILE, WeightsProfile
from services.store import transaction


def _to_profile(row: WeightsProfileRow) -> WeightsProfile:
    return WeightsProfile(name=row.name, version=row.version, weights=dict(row.weights),
                          high=row.high, medium=row.medium, low=row.low)


def active_profile() -> tuple[WeightsProfile, int | None]:
    """The active profile and its id (the built-in default if none is stored)."""
    with transaction() as session:
        row = session.scalars(select(WeightsProfileRow).where(WeightsProfileRow.active)).first()
        return (_to_profile(row), row.id) if row else (DEFAULT_PROFILE, None)


def list_profiles() -> list[tuple[int, WeightsProfile, bool]]:
    with transaction() as session:
        rows = session.scalars(select(WeightsProfileRow).order_by(WeightsProfileRow.name, WeightsProfileRow.version))
        return [(r.id, _to_profile(r), r.active) for r in rows]


def get_profile(profile_id: int) -> WeightsProfile:
    with transaction() as session:
        row = session.get(WeightsProfileRow, profile_id)
        if row is None:
            raise NotFoundError(f"weights profile {profile_id} does not exist")
        return _to_profile(row)


def save_profile(profile: WeightsProfile, *, created_by: str = "", notes: str = "", activate: bool = False) -> tuple[int, WeightsProfile]:
    """Store `profile` as the next version of its name (versions are never overwritten)."""
    with transaction() as session:
        latest = session.scalar(select(func.max(WeightsProfileRow.version)).where(WeightsProfileRow.name == profile.name))
        version = (latest or 0) + 1
        if activate:
            session.execute(update(WeightsProfileRow).values(active=False).where(WeightsProfileRow.active))
        row = WeightsProfileRow(name=profile.name, version=version, weights=dict(profile.weights), high=profile.high,
                                medium=profile.medium, low=profile.low, active=activate, created_by=created_by,
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
