"""Who is acting: local reviewer names, or OIDC users with reviewer/admin allow-lists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.errors import PermissionDeniedError


@dataclass(frozen=True)
class AuthConfig:
    """Read from .streamlit/secrets.toml: [auth] enables OIDC; [workbench] holds allow-lists."""

    oidc: bool = False
    reviewers: frozenset[str] = frozenset()  # empty: any signed-in user may review
    admins: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CurrentUser:
    name: str
    email: str | None
    signed_in: bool
    may_review: bool
    is_admin: bool


def auth_config(secrets: Mapping[str, Any]) -> AuthConfig:
    auth = secrets.get("auth") or {}
    workbench = secrets.get("workbench") or {}
    oidc = bool(auth.get("client_id") or any(isinstance(v, Mapping) and v.get("client_id") for v in auth.values()))
    return AuthConfig(
        oidc=oidc,
        reviewers=frozenset(e.lower() for e in workbench.get("reviewers", ())),
        admins=frozenset(e.lower() for e in workbench.get("admins", ())),
    )


def resolve_user(config: AuthConfig, *, user_info: Mapping[str, Any] | None, local_name: str) -> CurrentUser:
    """Local mode trusts the typed name and everyone administers their own workbench;
    with OIDC the identity comes from the login and the allow-lists decide the roles."""
    if not config.oidc:
        name = local_name.strip()
        return CurrentUser(name=name, email=None, signed_in=bool(name), may_review=bool(name), is_admin=True)
    info = user_info or {}
    if not info.get("is_logged_in"):
        return CurrentUser(name="", email=None, signed_in=False, may_review=False, is_admin=False)
    email = str(info.get("email") or "").lower() or None
    name = str(info.get("name") or email or "signed-in user")
    is_admin = email is not None and email in config.admins
    may_review = is_admin or not config.reviewers or (email is not None and email in config.reviewers)
    return CurrentUser(name=email or name, email=email, signed_in=True, may_review=may_review, is_admin=is_admin)


def require_admin(user: CurrentUser, action: str) -> None:
    if not user.is_admin:
        raise PermissionDeniedError(f"only administrators may {action}; ask an admin (signed in as {user.name or 'nobody'})")


def require_reviewer(user: CurrentUser) -> None:
    if not user.may_review:
        if not user.signed_in:
            raise PermissionDeniedError("set your reviewer name in the sidebar (or sign in) before reviewing")
        raise PermissionDeniedError(f"{user.name} is not on the reviewer list; ask an admin to add you")
