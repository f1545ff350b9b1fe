"""What the store needs to know: where PostgreSQL is and the vector dimension it holds."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    # pgserver runs postgres as a separate user when we are root and opens every parent
    # directory of the data dir to it, so root's data must not live under /root.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/rag-workbench")
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "rag-workbench"


class StoreSettings(BaseSettings):
    """The store's settings; the application's full settings (services/settings.py) extend these."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    database_url: SecretStr | None = None
    # A read replica of DATABASE_URL (or of the embedded server): searches and other read-only
    # paths run there, writes and migrations on the primary. Unset = everything on the primary.
    database_read_url: SecretStr | None = None
    workbench_data_dir: Path = Field(default_factory=_default_data_dir)
    embedding_dim: int = 384  # the vector column's width; must match the model, checked when it loads

    @property
    def embedded(self) -> bool:
        return self.database_url is None
