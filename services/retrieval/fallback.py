"""Fallback sources for CRAG: none by default, a second collection in the same database, or a
web search (services.retrieval.web_search)."""

from __future__ import annotations

from dataclasses import dataclass

from services.corpus.stats import require_collection
from services.domain import RetrievalResult
from services.retrieval.search import default_params, search
from services.retrieval.web_search import WebSearchFallback
from services.settings import Settings


@dataclass(frozen=True)
class CollectionFallback:
    """Searches another collection of this store (e.g. a vendor knowledge base)."""

    collection: str
    settings: Settings

    @property
    def name(self) -> str:
        return f"collection:{self.collection}"

    def search(self, query: str, k: int) -> RetrievalResult:
        """The collection's top `k` hits; NotFoundError when it does not exist (a misnamed
        fallback must not pass for one that found nothing)."""
        require_collection(self.collection, settings=self.settings)
        return search(query, default_params(self.settings, collection=self.collection, k=k), settings=self.settings)


def configured_fallback(collection: str | None, settings: Settings) -> CollectionFallback | WebSearchFallback | None:
    """The fallback a run uses: the named collection, else the web search at WEB_SEARCH_URL, else none."""
    if collection:
        return CollectionFallback(collection, settings)
    if settings.web_search_url:
        key = settings.web_search_api_key.get_secret_value() if settings.web_search_api_key else None
        return WebSearchFallback(settings.web_search_url, key, settings.web_search_timeout_s)
    return None
