"""The one typed settings object, read from the environment and `.env`."""

from __future__ import annotations

import os
from functools import lru_cache
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


class Settings(BaseSettings):
    """Everything configurable; field names map to upper-case environment variables."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    database_url: SecretStr | None = None
    workbench_data_dir: Path = Field(default_factory=_default_data_dir)

    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_dim: int = 384  # must match the model; checked when the model loads
    embedding_batch_size: int = 64
    reranker_model: str | None = None

    anthropic_api_key: SecretStr | None = None
    llm_model: str = "claude-sonnet-4-5"
    llm_max_tokens: int = 1024
    llm_timeout_s: float = 60.0
    llm_max_retries: int = 3

    chunk_tokens: int = 200
    chunk_overlap_tokens: int = 40
    bm25_k1: float = Field(default=1.2, ge=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    rrf_k: int = 60
    max_query_chars: int = 2000
    max_upload_bytes: int = 20_000_000

    @property
    def embedded(self) -> bool:
        return self.database_url is None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
