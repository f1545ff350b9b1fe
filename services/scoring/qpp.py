"""Query-performance prediction: how sure a search can be, read off the shape of its scores.

The seven components look at the hits the fusion kept. The retrieval literature predicts a
query's success from each leg's raw score list instead, before fusion (search.LEG_SCORES
best scores per leg, descending). With s the leg's list, s_k its best QPP_K and mu_c the
mean of the whole list:

* NQC, normalized query commitment (Shtok et al., 2012): std(s_k) / mu_c. A query whose
  best documents stand apart from the rest has found something; the same spread at a
  higher level of score means less. NQC divides by the corpus's score for the query; the
  mean of the leg's best LEG_SCORES stands in for it (the whole corpus as one document has
  no BM25 score here, and its dense counterpart is a centroid nobody keeps).
* WIG, weighted information gain (Zhou & Croft, 2007): (mean(s_k) - mu_c) / sqrt(|q|),
  |q| the query's term count for BM25 (its scores add up over terms); a dense score is one
  cosine, so it is not divided.
* SMV, score magnitude and variance (Tao & Wu, 2014): mean(s_i * |ln(s_i / mean(s_k))|)
  over s_k, divided by mu_c.

Two pre-retrieval predictors (He & Ounis, 2004; Hauff et al., 2008), one per search:

* query_length: ln(1 + the query's content terms).
* query_idf: ln(1 + the summed idf of the query's terms), the BM25 leg's own idf (a term
  the corpus lacks at the largest idf): how much specific vocabulary the query names. It
  matters for transfer more than for ranking. Real questions name their subject; many
  pseudo-questions are a few generic words ("is assigned to it"), and on technical corpora
  real questions carry twice their content terms (median 8 vs 4). Fitted without it, the
  mapping reads a real question's modest weighted confidence as a generic pseudo-question's
  and says too little: it under-predicted every corpus's real questions.

Measured one by one as inputs to the self-calibrated mapping (bench/qpp.py, SQuAD half-dev
and our own python-reference and numpy-api sets): SIGNALS lists the ones kept, because the
mapping without any one of them ranks (AUROC) or calibrates (ECE) real questions worse on at
least two of the three; the others are here for the bench to keep measuring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

QPP_K = 10
LEGS = ("bm25", "dense")
# The signals the confidence mapping reads (see bench/qpp.py).
SIGNALS = ("nqc_bm25", "wig_dense", "query_idf")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def nqc(scores: Sequence[float], k: int = QPP_K) -> float:
    """std of the best k over the mean of all; 0 for fewer than two scores or a zero mean."""
    if len(scores) < 2:
        return 0.0
    reference = _mean(scores)
    return _std(scores[:k]) / reference if reference > 0 else 0.0


def wig(scores: Sequence[float], k: int = QPP_K, *, query_terms: int = 1) -> float:
    """How far the best k stand above the mean of all, per square root of query terms."""
    if len(scores) < 2:
        return 0.0
    return (_mean(scores[:k]) - _mean(scores)) / math.sqrt(max(query_terms, 1))


def smv(scores: Sequence[float], k: int = QPP_K) -> float:
    """Score magnitude and variance of the best k, over the mean of all (positive scores only:
    the log needs them; a cosine at or below 0 contributes nothing)."""
    if len(scores) < 2:
        return 0.0
    top = scores[:k]
    top_mean, reference = _mean(top), _mean(scores)
    if top_mean <= 0 or reference <= 0:
        return 0.0
    return _mean([s * abs(math.log(s / top_mean)) if s > 0 else 0.0 for s in top]) / reference


def query_length(query_terms: int) -> float:
    """ln(1 + content terms): 0 for a query of stop words only."""
    return math.log1p(max(query_terms, 0))


def all_signals(leg_scores: Mapping[str, Sequence[float]], *, query_terms: int,
                query_idf: float | None = None) -> dict[str, float]:
    """Every signal of every leg that ran, named <signal>_<leg>, and the query's when a leg ran
    (contexts given from outside were not searched here: they get no signals)."""
    out: dict[str, float] = {}
    for leg in LEGS:
        scores = list(leg_scores.get(leg) or ())
        if not scores:
            continue
        out[f"nqc_{leg}"] = nqc(scores)
        out[f"wig_{leg}"] = wig(scores, query_terms=query_terms if leg == "bm25" else 1)
        out[f"smv_{leg}"] = smv(scores)
    if out:
        out["query_length"] = query_length(query_terms)
        if query_idf is not None:
            out["query_idf"] = math.log1p(max(query_idf, 0.0))
    return out


def signals(leg_scores: Mapping[str, Sequence[float]], *, query_terms: int,
            query_idf: float | None = None) -> dict[str, float]:
    """The SIGNALS of the search (a leg that did not run has none)."""
    measured = all_signals(leg_scores, query_terms=query_terms, query_idf=query_idf)
    return {name: measured[name] for name in SIGNALS if name in measured}
