"""The one typed settings object, read from the environment and `.env`."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr

from db import StoreSettings


class Settings(StoreSettings):
    """Everything configurable; field names map to upper-case environment variables."""

    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_batch_size: int = 64
    reranker_model: str | None = None
    # A cross-encoder NLI model (sentence_transformers.CrossEncoder by name or path) the judge
    # reads each claim against its evidence sentence with, when one is installed; none ships
    # offline here, and the judge stands on its own without it (services.judging.nli).
    judge_nli_model: str | None = None
    # The reader of the question fitted on the packaged model (services.judging.reader): off, the
    # judge reads phrases without it, as before 2026-12-04.
    judge_reader: bool = True

    # Which backend answers (services.answering.llm.backends.backend_name): LLM_BACKEND when set,
    # else an OpenAI-compatible server when LLM_BASE_URL is set, else Claude when
    # ANTHROPIC_API_KEY is set, else the offline extractive backend.
    llm_backend: Literal["offline", "anthropic", "openai-compatible"] | None = None
    anthropic_api_key: SecretStr | None = None
    llm_base_url: str | None = None  # e.g. http://localhost:11434/v1 (Ollama)
    llm_api_key: SecretStr | None = None  # only if the server checks one; local servers mostly do not
    llm_model: str | None = None  # unset = claude-sonnet-4-5 for Claude; a local server needs its model named
    llm_max_tokens: int = 1024
    llm_timeout_s: float = 60.0
    llm_max_retries: int = 3

    chunk_tokens: int = 200
    chunk_overlap_tokens: int = 40
    bm25_k1: float = Field(default=1.2, ge=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    rrf_k: int = 60
    max_query_chars: int = 2000
    # A hybrid or BM25 search of a collection holding at least search_slice_min_chunks chunks
    # runs its BM25 leg as search_slices statements at once, each over a range of chunk ids on
    # a connection of its own, and the dense leg beside them (services.retrieval.search): one
    # statement runs on one core. 1 = never; the default is one slice per core, up to 4. On 2
    # cores it doubled hybrid latency at 100k chunks, broke even at 400k (p95 better) and cut
    # p50 by 17% at a million (README, Sliced searches).
    search_slices: int = Field(default_factory=lambda: min(os.cpu_count() or 1, 4), ge=1, le=16)
    search_slice_min_chunks: int = Field(default=500_000, ge=0)
    max_upload_bytes: int = 20_000_000
    # After an ingest that adds or replaces documents, a collection holding at least this many
    # chunks re-fits its confidence mapping (services.scoring.recalibration); 0 = never.
    # Smaller collections give too few pseudo-questions for a stable fit.
    self_calibration_min_chunks: int = Field(default=1000, ge=0)

    # The HTTP API (`workbench api`): the largest request body, checked before it is
    # parsed (413 past it), and the most records one POST /runs may carry.
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_max_body_bytes: int = Field(default=4_000_000, ge=1_000)
    api_max_batch: int = Field(default=500, ge=1)
    # POST /assess answers while the client waits, so its work is bounded below a push's: at
    # most this many contexts and characters of context per request (422 past them; POST
    # /runs takes more, assessed in the background), and this many assessments at once (503
    # with Retry-After past it) so they cannot take every thread the API has.
    api_assess_max_contexts: int = Field(default=50, ge=1)
    api_assess_max_context_chars: int = Field(default=200_000, ge=1_000)
    api_assess_max_concurrent: int = Field(default=4, ge=1)
    api_assess_timeout_s: float = Field(default=60.0, gt=0)  # 504 past it; the work stops at its next step
    # Quotas per API key (429 with Retry-After past them; 0 turns one off): requests a second,
    # with a burst allowance, counted before the body is read; and records of the key still
    # waiting for their assessment, so one system's flood cannot fill the queue. The worker
    # takes turns over apps besides, so another app's runs do not wait behind the flood.
    api_rate_per_key: float = Field(default=500.0, ge=0)
    api_rate_burst: int = Field(default=1_000, ge=1)
    api_max_queued_per_key: int = Field(default=50_000, ge=0)
    # A request refused for its key (401) is answered this long after its headers arrived, as
    # PostgreSQL's auth_delay does: the wait costs the server a timer, not CPU, and a client
    # without a key can no longer make it set up and tear down hundreds of connections a second
    # (bench/api.py --attack). Missing and unknown keys wait alike, so timing tells them apart
    # no better than before.
    api_refusal_delay_ms: int = Field(default=250, ge=0, le=10_000)
    # GET /runs lists a review once it is this old, so one saved while a page is read is not
    # passed over by the page's cursor.
    api_verdict_settle_seconds: float = Field(default=1.0, ge=0, le=60)
    # Traces (POST /v1/traces): a trace is assembled into a run once its root span has arrived
    # and nothing more of it for OTLP_SETTLE_SECONDS (exports can arrive out of order), or,
    # when no root span comes, once nothing of it has arrived for OTLP_QUIET_SECONDS.
    otlp_settle_seconds: float = Field(default=2.0, ge=0)
    otlp_quiet_seconds: float = Field(default=60.0, ge=0)

    # Retention (`workbench prune`, services.review.retention): months of runs wholly older than
    # RETENTION_OLDER_THAN go, reviewed runs kept unless RETENTION_KEEP_REVIEWED is false. With
    # RETENTION_DAILY the process that runs the API prunes once a day (and creates the months
    # ahead); off by default: removing data is something a deployment turns on.
    retention_daily: bool = False
    retention_older_than: str = Field(default="90d", pattern=r"(?i)^\s*\d+\s*(d|days?|w|weeks?)\s*$")
    retention_keep_reviewed: bool = True

    # The app process loads the Tuning page's run matrix in the background when its first session
    # starts, so the page's first open does not wait for it (about 1 s of CPU and 124 MB of memory
    # at a million runs, bench/volume.py). Off: the first open loads it, behind a spinner.
    tuning_preload: bool = True

    # The answering loop's thresholds (services.answering.presets.configured): unset, each is the
    # preset's; set, it holds for every preset (`workbench ask` options override it per run).
    # A run stores the values it ran with in its config.
    reflection_min_score: float | None = Field(default=None, ge=0, le=1)  # seed 004: approves an answer
    max_refinement_attempts: int | None = Field(default=None, ge=0, le=10)  # retry cap: iterations = 1 + this
    crag_correct_threshold: float | None = Field(default=None, ge=0, le=1)  # CRAG upper: CORRECT at or above
    crag_incorrect_threshold: float | None = Field(default=None, ge=0, le=1)  # CRAG lower: INCORRECT at or below
    consensus_threshold: float | None = Field(default=None, ge=0, le=1)  # seed 003: a hit's relevance that agrees
    adaptive_k: bool | None = None  # seed 001's adaptive cut-off, for every preset
    # A collection of this store CRAG's corrective actions search when the corpus does not
    # answer (INCORRECT: answer from it alone; AMBIGUOUS: fuse it with the corpus).
    fallback_collection: str | None = None
    # Else a SearxNG instance (its JSON format enabled) CRAG searches instead; the key, when
    # set, goes as a bearer token. A search slower than the timeout is a warning on the run.
    web_search_url: str | None = None
    web_search_api_key: SecretStr | None = None
    web_search_timeout_s: float = Field(default=10.0, gt=0)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
