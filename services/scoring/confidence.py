"""Seven-metric retrieval confidence: raw metrics, [0,1] components, weighted total.

Split in two so stored runs re-score by a dot product: `components(hits)` is computed
once per retrieval and stored; `overall(components, profile)` is the weighted sum.

How each raw metric becomes a component in [0, 1], and why:

* Per-hit relevance r. RRF scores are rank-based and tiny (at most 2/61 with two legs)
  and say nothing about absolute relevance, so the top *fused* score is not comparable
  across queries. Instead each hit gets an absolute relevance:
  - with a reranker: sigmoid(cross-encoder logit);
  - else the mean of the evidence its legs give: dense cosine similarity mapped
    linearly from DENSE_FLOOR (0) to DENSE_CEIL (1), and the BM25 leg's matched idf
    share (the fraction of the query's idf mass the chunk contains; terms unseen in
    the corpus count at maximal idf, so questions about absent things score low).
* top_score   = max r                         (already in [0, 1])
* score_gap   = r(1) - r(2), divided by GAP_SCALE and clipped (one hit: gap = r(1))
* consensus   = count(r >= consensus threshold) / CONSENSUS_TARGET, clipped
* bm25_dense_agreement = share of the n hits that *both* legs ranked within their own
  top n (keyword and semantic search found the same evidence). A leg that ran but found
  nothing gives 0; a single-leg mode has no second opinion and gets a neutral 0.5.
* low_spread  = 1 - std(r) / SPREAD_SCALE, clipped (one hit: 1)
* entity_support = share of the query's entities (codes, parameters, names) that the top
  three hits mention: the entity links shared between the query and the evidence.
  A query naming no entities has no links to check and gets 0 (as the seed's
  `any(graph_boost > 0)` would be false). Seed 003 calls it graph_support; there is no graph
  here, only entity mentions, so it is named for what it measures.
* low_diversity = 1 - (unique documents - 1) / (hits - 1)  (one hit: 1)
* reranker_impact = 1 - Spearman(rerank order, fused order); reported, not weighted;
  None when no reranker ran.

The weighted sum ranks retrievals but is no probability. When the profile holds a mapping
self-calibration fitted for the retrieval's collection and mode (services.scoring.mapping),
the confidence is that mapping of the weighted sum and the query-performance signals of
each leg's raw scores (services.scoring.qpp, kept in the raw metrics as "qpp"); the
contributions are scaled to add up to it, and the weighted sum stays in the breakdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.domain import Hit, RetrievalResult
from services.retrieval.entities import mentions
from services.retrieval.text import tokenize
from services.scoring import qpp
from services.scoring.weights import COMPONENTS, INTERPRETATIONS, WeightsProfile

DENSE_FLOOR = 0.20  # seed 001's similarity floor: below it MiniLM matches are noise
DENSE_CEIL = 0.70  # relevant MiniLM question-passage pairs mostly lie above this
GAP_SCALE = 0.10
SPREAD_SCALE = 0.30
CONSENSUS_THRESHOLD = 0.75
CONSENSUS_TARGET = 3
GRAPH_TOP_HITS = 3
SINGLE_LEG_AGREEMENT = 0.5


@dataclass(frozen=True)
class ConfidenceBreakdown:
    overall: float
    weighted: float  # the weighted sum of the components, before any mapping
    level: str
    interpretation: str
    should_flag: bool
    components: dict[str, float]  # each in [0, 1], COMPONENTS order
    contributions: dict[str, float]  # normalized weight x component; sums to overall
    raw: dict[str, Any]  # the seed's metrics as measured
    recommendations: tuple[str, ...]
    profile: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall_confidence": self.overall,
            "weighted_confidence": self.weighted,
            "level": self.level,
            "interpretation": self.interpretation,
            "should_flag_for_review": self.should_flag,
            "components": self.components,
            "contributions": self.contributions,
            **self.raw,
            "recommendations": list(self.recommendations),
            "profile": self.profile,
        }


# --- per-hit relevance -----------------------------------------------------------------

def hit_relevance(hit: Hit) -> float:
    """Absolute relevance of one hit in [0, 1] (see the module docstring).

    Plain float arithmetic: numpy's per-call overhead dominated scoring ten hits.
    """
    if hit.rerank_score is not None:
        # np.exp, not math.exp: they differ in the last bit for ~2% of inputs, and
        # re-scoring a stored run must reproduce its stored relevance exactly.
        return float(1.0 / (1.0 + np.exp(-hit.rerank_score)))
    evidence = []
    if hit.dense_similarity is not None:
        evidence.append(_clip01((hit.dense_similarity - DENSE_FLOOR) / (DENSE_CEIL - DENSE_FLOOR)))
    if hit.matched_idf_share is not None:
        evidence.append(_clip01(hit.matched_idf_share))
    # sum() starts from 0 as np.mean's reduction does, so even a -0.0 comes out the same
    return sum(evidence) / len(evidence) if evidence else 0.0


def _clip01(value: float) -> float:
    """np.clip(value, 0.0, 1.0) for one float, without numpy's per-call cost (NaN passes through)."""
    if value < 0.0:
        return 0.0
    return 1.0 if value > 1.0 else value


# --- raw metrics and components ----------------------------------------------------------

def raw_metrics(hits: Sequence[Hit], query_entities: Sequence[str] = (), *, mode: str = "hybrid",
                collection: str | None = None, query: str = "",
                leg_scores: Mapping[str, Sequence[float]] | None = None,
                query_idf: float | None = None) -> dict[str, Any]:
    """The seed's metrics, measured on the hits as ranked, with the QPP signals of the search
    (its legs' raw scores, the query's idf) and where it ran (what a mapping is looked up by)."""
    relevance = [hit_relevance(h) for h in hits]
    ordered = sorted(relevance, reverse=True)
    n = len(hits)
    linked = _linked_entities(hits, query_entities)
    return {
        "hits": n,
        "top_score": ordered[0] if n else 0.0,
        "score_gap": ordered[0] - ordered[1] if n >= 2 else (ordered[0] if n else 0.0),
        # numpy's pairwise summation, so stored spreads reproduce to the last bit
        "score_spread": float(np.std(relevance)) if n else 0.0,
        "consensus_count": sum(1 for r in relevance if r >= CONSENSUS_THRESHOLD),
        "bm25_dense_agreement": _leg_agreement(hits, mode),
        "reranker_impact": _reranker_impact(hits),
        "document_diversity": len({h.document_id for h in hits}) / n if n else 0.0,
        "entity_support": bool(linked),
        "linked_entities": linked,
        "query_entities": list(query_entities),
        "relevance": [round(r, 6) for r in relevance],
        "mode": mode,
        "collection": collection,
        "qpp": qpp.signals(leg_scores or {}, query_terms=len(tokenize(query)), query_idf=query_idf),
    }


def retrieval_metrics(result: RetrievalResult, *, top: int | None = None) -> dict[str, Any]:
    """raw_metrics of a search's (first `top`) hits, with everything it knows about the search."""
    return raw_metrics(result.hits[:top], result.query_entities, mode=result.mode, query=result.query,
                       collection=result.params.get("collection"), leg_scores=result.leg_scores,
                       query_idf=result.query_idf)


def components_from_raw(raw: Mapping[str, Any]) -> np.ndarray:
    """Map raw metrics to the seven [0, 1] components (COMPONENTS order)."""
    n = raw["hits"]
    if n == 0:
        return np.zeros(len(COMPONENTS))
    unique_docs = round(raw["document_diversity"] * n)
    entities = raw["query_entities"]
    values = {
        "top_score": raw["top_score"],
        "score_gap": min(raw["score_gap"] / GAP_SCALE, 1.0),
        "consensus": min(raw["consensus_count"] / CONSENSUS_TARGET, 1.0),
        "bm25_dense_agreement": raw["bm25_dense_agreement"],
        "low_spread": 1.0 - min(raw["score_spread"] / SPREAD_SCALE, 1.0),
        "entity_support": len(raw["linked_entities"]) / len(entities) if entities else 0.0,
        "low_diversity": 1.0 if n == 1 else 1.0 - (unique_docs - 1) / (n - 1),
    }
    return np.clip(np.array([values[c] for c in COMPONENTS], dtype=np.float64), 0.0, 1.0)


def components(hits: Sequence[Hit], query_entities: Sequence[str] = (), *, mode: str = "hybrid") -> np.ndarray:
    return components_from_raw(raw_metrics(hits, query_entities, mode=mode))


def overall(component_vector: np.ndarray, profile: WeightsProfile) -> float:
    """The components weighted by `profile` (no default: every caller says which profile it
    scores with, normally services.scoring.profiles.active_profile)."""
    return float(np.dot(profile.weight_vector(), component_vector))


def mapped(weighted: float, raw: Mapping[str, Any], profile: WeightsProfile) -> float:
    """The confidence: `weighted` through the profile's mapping for the retrieval's collection
    and mode, or `weighted` itself where there is none."""
    mapping = profile.mapping_for(raw.get("collection"), raw.get("mode"))
    return mapping(weighted, raw.get("qpp") or {}) if mapping is not None else weighted


def confidence_from_raw(raw: Mapping[str, Any], profile: WeightsProfile) -> float:
    return mapped(overall(components_from_raw(raw), profile), raw, profile)


def score_retrieval(result: RetrievalResult, profile: WeightsProfile) -> ConfidenceBreakdown:
    return breakdown_from_raw(retrieval_metrics(result), profile, reranker=result.reranker)


def breakdown_from_raw(raw: Mapping[str, Any], profile: WeightsProfile, *, reranker: str = "none") -> ConfidenceBreakdown:
    vector = components_from_raw(raw)
    contributions = profile.weight_vector() * vector
    weighted = float(contributions.sum())
    total = mapped(weighted, raw, profile)
    if total != weighted:
        contributions = contributions * (total / weighted) if weighted > 0 else np.full(len(COMPONENTS), total / len(COMPONENTS))
    level = profile.level(total)
    return ConfidenceBreakdown(
        overall=total,
        weighted=weighted,
        level=level,
        interpretation=INTERPRETATIONS[level],
        should_flag=level != "HIGH",
        components=dict(zip(COMPONENTS, vector.tolist())),
        contributions=dict(zip(COMPONENTS, contributions.tolist())),
        raw=dict(raw),
        recommendations=recommendations(raw, level, reranker=reranker),
        profile=profile.label,
    )


def recommendations(raw: Mapping[str, Any], level: str, *, reranker: str = "none") -> tuple[str, ...]:
    """What a reviewer or the query author can do about this retrieval."""
    advice = {
        "HIGH": "CONFIDENT: strong retrieval; safe for an automated answer.",
        "MEDIUM": "MODERATE: medium confidence; review recommended for critical use.",
        "LOW": "WEAK: low confidence; review is mandatory before this answer is used.",
        "VERY LOW": "POOR: very low confidence; an expert should review or the question should be rephrased.",
    }
    out = [advice[level]]
    if raw["hits"] == 0:
        out.append("No results: the corpus has nothing matching this question. Add documents or rephrase.")
        return tuple(out)
    if raw["top_score"] < 0.5:
        out.append("The best match is weak: the corpus may not cover this; broaden the question or add documents.")
    if raw["bm25_dense_agreement"] < 0.3:
        out.append("Keyword (BM25) and semantic (dense) retrieval disagree: use the exact terms the documents "
                   "use (codes, parameter names), or compare the bm25 and dense modes.")
    if raw["consensus_count"] == 0 and raw["score_gap"] < 0.05:
        out.append("No clear winner and no strongly relevant passage: make the question more specific.")
    if raw["document_diversity"] > 0.6 and raw["hits"] > 2:
        out.append(f"Results are scattered over {round(raw['document_diversity'] * raw['hits'])} documents: "
                   "narrow the question to one topic.")
    missing = [e for e in raw["query_entities"] if e not in raw["linked_entities"]]
    if missing:
        out.append(f"Not found in the top results: {', '.join(missing[:5])}. Check the spelling or whether "
                   "the corpus covers them.")
    if reranker == "none":
        out.append("No reranker ran; top score uses dense similarity and keyword coverage.")
    return tuple(out)


# --- helpers ------------------------------------------------------------------------------

def _leg_agreement(hits: Sequence[Hit], mode: str) -> float:
    if mode != "hybrid":
        return SINGLE_LEG_AGREEMENT
    if not hits:
        return 0.0
    bm25 = [h.bm25_rank for h in hits]
    dense = [h.dense_rank for h in hits]
    if all(r is None for r in bm25) or all(r is None for r in dense):
        return 0.0  # one leg found nothing the fusion kept: the legs disagree completely
    n = len(hits)
    both = sum(1 for b, d in zip(bm25, dense) if b is not None and d is not None and b <= n and d <= n)
    return both / n


def _reranker_impact(hits: Sequence[Hit]) -> float | None:
    if len(hits) < 2 or any(h.rerank_score is None for h in hits):
        return None
    from scipy.stats import spearmanr

    by_rerank = [h.rank for h in hits]
    by_fused = np.argsort(np.argsort([-h.fused_score for h in hits], kind="stable")) + 1
    rho = spearmanr(by_rerank, by_fused).statistic
    return float(1.0 - rho) if np.isfinite(rho) else 0.0


def _linked_entities(hits: Sequence[Hit], query_entities: Sequence[str]) -> list[str]:
    top = [h.text for h in hits[:GRAPH_TOP_HITS]] + [h.title for h in hits[:GRAPH_TOP_HITS]]
    return [e for e in query_entities if any(mentions(t, e) for t in top)]
