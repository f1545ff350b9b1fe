"""Fallback sources for CRAG: none by default, or a second collection in the same database."""

from __future__ import annotations

from dataclasses import dataclass

from services.corpus.stats import require_collection
from services.domain import RetrievalResult
from services.retrieval.search import default_params, search
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
