"""Self-calibration: fit a collection's confidence mapping on questions it asks itself.

No verdicts and no qrels: services.scoring.pseudo_queries turns a seeded sample of the
collection's chunks into questions whose answer is known (the chunk's document), each is
searched as Search does, and whether the document came back in the top ten is the label
the mapping (services.scoring.mapping) is fitted to, per retrieval mode.

Before/after figures are measured on pseudo-questions the mapping was not fitted on (those
of every other chunk); the stored mapping is then refitted on the whole sample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from services.domain import RETRIEVAL_MODES, RetrievalResult
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.search import default_params, search_in_session
from services.scoring import qpp
from services.scoring.calibration import CalibrationReport, calibration_metrics
from services.scoring.confidence import components_from_raw, overall, retrieval_metrics
from services.scoring.mapping import METHODS, ConfidenceMapping, fit_mapping
from services.scoring.profiles import active_profile, save_profile
from services.scoring.pseudo_queries import DEFAULT_PSEUDO_QUERIES, PseudoQuery, sample_pseudo_queries
from services.scoring.weights import WeightsProfile
from services.settings import Settings, get_settings
from services.store import transaction

TOP_DOCUMENTS = 10  # "found" = the document among the first ten distinct documents
SEARCH_HITS = 50  # hits fetched so that ten distinct documents are there to look at


@dataclass(frozen=True)
class Outcome:
    """One searched question: its raw metrics (with QPP signals), weighted score and label."""

    raw: dict[str, Any]
    weighted: float
    found: bool


@dataclass(frozen=True)
class ModeCalibration:
    mode: str
    mapping: ConfidenceMapping
    before: CalibrationReport  # the weighted sum, on the held-out half
    after: CalibrationReport  # the mapping fitted on the other half, on the held-out half


@dataclass(frozen=True)
class SelfCalibration:
    collection: str
    pseudo_queries: int
    seed: int
    modes: tuple[ModeCalibration, ...]
    profile: WeightsProfile  # the profile with the new mappings
    profile_id: int | None  # its stored id; None when it was not saved
    skipped: dict[str, str] = field(default_factory=dict)  # mode -> why it has no new mapping

    def to_dict(self) -> dict[str, Any]:
        return {"collection": self.collection, "pseudo_queries": self.pseudo_queries, "seed": self.seed,
                "profile": self.profile.label, "profile_id": self.profile_id,
                "modes": {m.mode: {"found": m.mapping.positives, "method": m.mapping.method,
                                   "before": _summary(m.before), "after": _summary(m.after)} for m in self.modes},
                "skipped": self.skipped}


def _summary(report: CalibrationReport) -> dict[str, float | None]:
    return {"auroc": report.auroc, "ece": report.ece, "brier": report.brier}


def search_outcomes(texts: Sequence[str], documents: Sequence[set[str]], *, collection: str, mode: str,
                    profile: WeightsProfile, settings: Settings, vectors: Any = None,
                    passages: Sequence[str] | None = None,
                    on_each: Callable[[], None] | None = None) -> list[Outcome]:
    """Search each text as Search does and record whether one of its documents is in the top
    ten (or, given its passage, a chunk of the top ten documents that holds the passage)."""
    if vectors is None and mode != "bm25":
        vectors = embedding.encode(settings.embedding_model, list(texts))
    params = default_params(settings, mode=mode, k=SEARCH_HITS, collection=collection)
    outcomes = []
    with transaction(settings) as session:
        for i, (query, wanted) in enumerate(zip(texts, documents)):
            result = search_in_session(query, params, session=session, settings=settings,
                                       query_vector=None if vectors is None else vectors[i])
            raw = retrieval_metrics(result, top=10)
            found = came_back(result, wanted, None if passages is None else passages[i])
            outcomes.append(Outcome(raw, overall(components_from_raw(raw), profile), found))
            if on_each is not None:
                on_each()
    return outcomes


def came_back(result: RetrievalResult, documents: set[str], passage: str | None = None) -> bool:
    """Whether one of `documents` is among the first TOP_DOCUMENTS distinct documents of the
    result, or (given a passage) a chunk of those documents holds the passage."""
    top = set(list(dict.fromkeys(h.external_id for h in result.hits))[:TOP_DOCUMENTS])
    return bool(documents & top) or (passage is not None and any(
        passage in " ".join(h.text.split()) for h in result.hits if h.external_id in top))


def fit_outcomes(outcomes: Sequence[Outcome], *, method: str = "logistic") -> ConfidenceMapping:
    return fit_mapping([o.weighted for o in outcomes], [o.raw.get("qpp") or {} for o in outcomes],
                       [int(o.found) for o in outcomes], features=qpp.SIGNALS, method=method)


def halves_by_chunk(chunks: Sequence[int]) -> tuple[list[int], list[int]]:
    """Indexes of the questions of every other chunk, in order of first appearance, and of the
    rest: a chunk asked several questions is on one side only, so the held-out half measures
    questions about text the mapping never saw."""
    order = {chunk: i for i, chunk in enumerate(dict.fromkeys(chunks))}
    fit = [i for i, chunk in enumerate(chunks) if order[chunk] % 2 == 0]
    return fit, [i for i, chunk in enumerate(chunks) if order[chunk] % 2 == 1]


def held_out_reports(outcomes: Sequence[Outcome], chunks: Sequence[int], *,
                     method: str = "logistic") -> tuple[CalibrationReport, CalibrationReport]:
    """(weighted, mapped) against the labels of one half, the mapping fitted on the other (see
    halves_by_chunk: `chunks[i]` is the chunk question i was cut from)."""
    fit, test = halves_by_chunk(chunks)
    fit_half, test_half = [outcomes[i] for i in fit], [outcomes[i] for i in test]
    mapping = fit_outcomes(fit_half, method=method)
    labels = [int(o.found) for o in test_half]
    before = calibration_metrics([min(max(o.weighted, 0.0), 1.0) for o in test_half], labels)
    after = calibration_metrics([mapping(o.weighted, o.raw.get("qpp") or {}) for o in test_half], labels)
    return before, after


def fit_collection(collection: str, *, modes: Sequence[str] = RETRIEVAL_MODES, n: int = DEFAULT_PSEUDO_QUERIES,
                   seed: int = 0, method: str = "logistic", profile: WeightsProfile,
                   on_progress: Callable[[int, int], None] | None = None,
                   settings: Settings | None = None
                   ) -> tuple[list[PseudoQuery], list[ModeCalibration], dict[str, str]]:
    """Pseudo-questions of `collection`, searched in every mode, each mode's fitted mapping, and
    why a mode got none (all its questions found, or none); InputError when no mode got one."""
    if method not in METHODS:  # before a minute of searching, not after
        raise InputError(f"unknown mapping method '{method}' (use {' or '.join(METHODS)})")
    settings = settings or get_settings()
    with transaction(settings) as session:
        queries = sample_pseudo_queries(session, collection=collection, n=n, seed=seed)
    if not queries:
        raise InputError(f"collection '{collection}' has no text to ask questions of: ingest documents first")
    texts, wanted = [q.text for q in queries], [{q.document} for q in queries]
    vectors = embedding.encode(settings.embedding_model, texts) if set(modes) - {"bm25"} else None
    total, done = len(queries) * len(modes), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, total)

    calibrated, skipped = [], {}
    for mode in modes:
        outcomes = search_outcomes(texts, wanted, collection=collection, mode=mode, profile=profile,
                                   settings=settings, vectors=vectors, passages=[q.passage for q in queries],
                                   on_each=tick)
        try:
            before, after = held_out_reports(outcomes, [q.chunk_id for q in queries], method=method)
            calibrated.append(ModeCalibration(mode, fit_outcomes(outcomes, method=method), before, after))
        except InputError as exc:  # e.g. every question found: nothing to learn in this mode, the others stand
            skipped[mode] = str(exc)
    if not calibrated:
        reasons = set(skipped.values())
        raise InputError(reasons.pop() if len(reasons) == 1 else
                         "; ".join(f"{mode}: {reason}" for mode, reason in skipped.items()))
    return queries, calibrated, skipped


def self_calibrate(collection: str, *, modes: Sequence[str] = RETRIEVAL_MODES, n: int = DEFAULT_PSEUDO_QUERIES,
                   seed: int = 0, method: str = "logistic", created_by: str = "self-calibration",
                   activate: bool = True, on_progress: Callable[[int, int], None] | None = None,
                   settings: Settings | None = None) -> SelfCalibration:
    """Fit `collection`'s mappings on the active profile's weights and store them as the next
    version of that profile (other collections' mappings carried over), active by default."""
    base = active_profile().weights
    queries, calibrated, skipped = fit_collection(collection, modes=modes, n=n, seed=seed, method=method, profile=base,
                                         on_progress=on_progress, settings=settings)
    mappings = {c: dict(by_mode) for c, by_mode in base.mappings.items()}
    mappings[collection] = {**mappings.get(collection, {}), **{m.mode: m.mapping for m in calibrated}}
    found = ", ".join(f"{m.mode} {m.mapping.positives}/{m.mapping.n_fitted} found" for m in calibrated)
    profile_id, profile = save_profile(replace(base, mappings=mappings), created_by=created_by, activate=activate,
                                       notes=f"self-calibrated on '{collection}': {len(queries)} pseudo-questions "
                                             f"(seed {seed}, {method}); {found}")
    return SelfCalibration(collection, len(queries), seed, tuple(calibrated), profile, profile_id, skipped)
