"""Pick the answer backend from settings: Claude when a key is set, else offline."""

from __future__ import annotations

from services.answering.llm.base import AnswerBackend, create_backend
from services.settings import Settings, get_settings


def backend_for(settings: Settings | None = None) -> AnswerBackend:
    settings = settings or get_settings()
    if settings.anthropic_api_key is not None:
        from services.answering.llm.anthropic_backend import AnthropicBackend  # noqa: F401  (registers)
        from services.answering.llm.cache import DatabaseCache

        return create_backend(
            "anthropic",
            api_key=settings.anthropic_api_key.get_secret_value(),
            model=settings.llm_model,
            max_tokens=settings.llm_max_tokens,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            cache=DatabaseCache(),
        )
    from services.answering.llm.offline import OfflineBackend  # noqa: F401  (registers)

    return create_backend("offline", embedding_model=settings.embedding_model)


def backend_label(settings: Settings | None = None) -> str:
    """What the sidebar shows, without loading any model."""
    settings = settings or get_settings()
    return f"Claude ({settings.llm_model})" if settings.anthropic_api_key is not None else "offline (extractive)"
