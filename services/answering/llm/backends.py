"""Pick the answer backend from settings: see backend_name for the rule."""

from __future__ import annotations

from pydantic import SecretStr

from services.answering.llm.base import AnswerBackend, create_backend
from services.settings import Settings, get_settings

DEFAULT_CLAUDE_MODEL = "claude-sonnet-4-5"


def backend_name(settings: Settings) -> str:
    """LLM_BACKEND when set. Otherwise LLM_BASE_URL wins over ANTHROPIC_API_KEY: a team that runs its
    own model server set it so that text stays in the building, and a cloud key left in the
    environment must not quietly send the text out. With neither set, the offline backend."""
    if settings.llm_backend is not None:
        return settings.llm_backend
    if settings.llm_base_url:
        return "openai-compatible"
    if settings.anthropic_api_key is not None:
        return "anthropic"
    return "offline"


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def backend_for(settings: Settings | None = None) -> AnswerBackend:
    settings = settings or get_settings()
    name = backend_name(settings)
    if name == "anthropic":
        from services.answering.llm.anthropic_backend import AnthropicBackend  # noqa: F401  (registers)
        from services.answering.llm.cache import DatabaseCache

        return create_backend(
            "anthropic",
            api_key=_secret(settings.anthropic_api_key) or "",
            model=settings.llm_model or DEFAULT_CLAUDE_MODEL,
            max_tokens=settings.llm_max_tokens,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            cache=DatabaseCache(),
        )
    if name == "openai-compatible":
        from services.answering.llm.cache import DatabaseCache
        from services.answering.llm.openai_backend import OpenAICompatibleBackend  # noqa: F401  (registers)

        return create_backend(
            "openai-compatible",
            base_url=settings.llm_base_url or "",
            model=settings.llm_model or "",
            api_key=_secret(settings.llm_api_key),
            max_tokens=settings.llm_max_tokens,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            cache=DatabaseCache(settings),
        )
    from services.answering.offline import OfflineBackend  # noqa: F401  (registers)

    return create_backend("offline", embedding_model=settings.embedding_model)


def backend_label(settings: Settings | None = None) -> str:
    """What the sidebar shows, without loading any model."""
    settings = settings or get_settings()
    name = backend_name(settings)
    if name == "anthropic":
        return f"Claude ({settings.llm_model or DEFAULT_CLAUDE_MODEL})"
    if name == "openai-compatible":
        return f"OpenAI-compatible ({settings.llm_model or 'LLM_MODEL not set'})"
    return "offline (extractive)"
