"""A web search API as CRAG's fallback source: a SearxNG instance's JSON (`/search?format=json`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from services.domain import Hit, RetrievalResult
from services.errors import WorkbenchError

EXPECTED_SHAPE = '{"results": [{"url": ..., "title": ..., "content": ...}, ...]}'


@dataclass(frozen=True)
class WebSearchFallback:
    """Searches the web through a SearxNG instance (WEB_SEARCH_URL; its JSON format enabled)."""

    url: str  # the instance, e.g. http://localhost:8888; /search is added unless the URL ends with it
    api_key: str | None = None  # sent as a bearer token, for an instance behind a proxy that checks one
    timeout_s: float = 10.0
    transport: httpx.BaseTransport | None = None  # tests and proxies; None = the network

    @property
    def name(self) -> str:
        return f"web:{urlsplit(self.url).netloc}"

    def search(self, query: str, k: int) -> RetrievalResult:
        """The first `k` results as hits; WorkbenchError, saying which, when the service times
        out, cannot be reached, answers with an error status or with something not SearxNG's JSON."""
        endpoint = self.url if self.url.rstrip("/").endswith("/search") else self.url.rstrip("/") + "/search"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with httpx.Client(timeout=self.timeout_s, transport=self.transport) as client:
                response = client.get(endpoint, params={"q": query, "format": "json"}, headers=headers)
                response.raise_for_status()
                data = response.json()
        except httpx.TimeoutException as exc:
            raise WorkbenchError(f"the web search at {endpoint} did not answer within {self.timeout_s:g} s") from exc
        except httpx.HTTPStatusError as exc:
            raise WorkbenchError(f"the web search at {endpoint} answered HTTP {exc.response.status_code}") from exc
        except httpx.HTTPError as exc:
            raise WorkbenchError(f"the web search at {endpoint} could not be reached: {exc}") from exc
        except ValueError as exc:  # the body is not JSON
            raise WorkbenchError(f"the web search at {endpoint} did not answer JSON (expected {EXPECTED_SHAPE})") from exc
        return RetrievalResult(query=query, mode="web", hits=tuple(self._hits(data, endpoint)[:k]), params={"source": self.name})

    def _hits(self, data: Any, endpoint: str) -> list[Hit]:
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list) or not all(isinstance(r, dict) and isinstance(r.get("url"), str)
                                                    for r in results):
            raise WorkbenchError(f"the web search at {endpoint} answered JSON that is not SearxNG's "
                                 f"(expected {EXPECTED_SHAPE})")
        hits = []
        for rank, item in enumerate((r for r in results if str(r.get("content") or "").strip()), start=1):
            page_id = _page_id(item["url"])
            hits.append(Hit(chunk_id=page_id, document_id=page_id, external_id=item["url"],
                            title=str(item.get("title") or item["url"]), text=str(item["content"]), rank=rank,
                            fused_score=1.0 / (60 + rank), origin=self.name))
        return hits


def _page_id(url: str) -> int:
    """Negative (never a chunk of the store) and stable per URL, so the same page found by two
    queries is fused as one hit."""
    return -int.from_bytes(hashlib.blake2b(url.encode("utf-8"), digest_size=6).digest(), "big") - 1
