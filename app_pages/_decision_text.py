"""The decision view's words, built without Streamlit: the "why this score" strip, how the
signals blend into the run's confidence, the heading of each passage, the correction that
replaces an answer, and hints chosen by where the run came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app_pages._claim_evidence import p_supported_text
from services.answering.runs import Run
from services.domain import Hit, RunStatus
from services.review.queue import Review
from services.scoring.blend import blend_terms
from services.scoring.confidence import ConfidenceBreakdown, hit_relevance
from services.scoring.crag import RetrievalVerdict

# runs.source of runs another system answered (the intake's sources); every other source is the
# workbench's own pipeline (the Ask page, the demo, evaluation and batch runs).
OUTSIDE_SOURCES = ("import", "api", "otlp")
SIGNAL_NAMES = {"retrieval": "retrieval confidence", "reflection": "reflection", "grade": "answer grade",
                "heuristic": "word-overlap estimate (no judge ran)"}
CRAG_ACTIONS = {"refine_and_use": "use the passages, keeping their relevant strips",
                "combine_with_fallback": "add passages from the fallback source",
                "use_fallback": "replace the passages with the fallback source's"}
_ROUNDING = 0.005  # the strip shows two decimals: a smaller difference is not a different number


@dataclass(frozen=True)
class WhyItem:
    label: str
    value: str
    detail: str = ""  # the reason behind the value, in plain words; "" when the value says it all


def came_from_outside(run: Run) -> bool:
    """Whether another system answered this run (imported, pushed or traced), not the workbench."""
    return run.source in OUTSIDE_SOURCES or "assessment" in run.config


def corrected_answer(history: Sequence[Review]) -> Review | None:
    """The review whose correction stands (the latest one); None when nobody corrected the run."""
    return next((h for h in reversed(history) if h.corrected_answer), None)


def why_items(run: Run, breakdown: ConfidenceBreakdown | None) -> tuple[WhyItem, ...]:
    """Each signal behind the run's confidence, then the confidence itself, in plain words."""
    best = run.best()
    level = f" ({breakdown.level})" if breakdown is not None else ""
    items = [WhyItem("Retrieval confidence", f"{run.retrieval_confidence:.2f}{level}")]
    crag = best.crag if best is not None else None
    if crag is None:
        items.append(WhyItem("CRAG verdict", "not run", _not_run(run, "CRAG")))
    else:
        action = CRAG_ACTIONS.get(crag.action, crag.action.replace("_", " "))
        outcome = f" ({crag.action_outcome})" if crag.action_outcome else ""
        items.append(WhyItem("CRAG verdict", crag.verdict.value.lower(), f"{crag.reasoning}; action: {action}{outcome}"))
    reflection = best.reflection if best is not None else None
    items.append(WhyItem("Reflection", f"{reflection.reflection_score:.2f}", reflection.reflection_reason)
                 if reflection is not None else WhyItem("Reflection", "not run", _not_run(run, "Reflection")))
    grade = best.grade if best is not None else None
    if grade is not None:
        gaps = f"; missing: {', '.join(grade.gaps)}" if grade.gaps else ""
        items.append(WhyItem("Answer grade", f"{grade.score}/5", f"{grade.label.lower()}{gaps}"))
    else:
        items.append(WhyItem("Answer grade", "not run", _not_run(run, "Grading")))
    items.append(WhyItem("Judge P(supported)", p_supported_text(run.p_supported)))
    items.append(WhyItem("Confidence", f"{run.final_confidence:.2f} ({run.final_level})"))
    return tuple(items)


def _not_run(run: Run, what: str) -> str:
    assessment = run.config.get("assessment")
    if assessment is not None and not assessment.get("judges"):
        return f"{what} did not run: this run was assessed with the judges off."
    return f"{what} did not run: the {run.preset} preset leaves it out."


def blend_sentence(run: Run, breakdown: ConfidenceBreakdown | None) -> str:
    """How the signals make the run's confidence, with the numbers the strip shows."""
    terms = blend_terms(run.signals)
    if not terms:
        return f"Confidence {run.final_confidence:.2f}: no signals were stored with this run."
    parts = []
    for term in terms:
        value = f"{run.grade}/5 → {term.value:.2f}" if term.signal == "grade" and run.grade else f"{term.value:.2f}"
        parts.append(f"{SIGNAL_NAMES.get(term.signal, term.signal)} {value} × {term.share:.2f}")
    blended = sum(t.share * t.value for t in terms)
    text = f"Confidence {run.final_confidence:.2f} = {' + '.join(parts)} (each signal that ran, by its share of the blend)."
    if abs(blended - run.final_confidence) >= _ROUNDING:
        if not run.final_answer and run.final_confidence <= run.retrieval_confidence + _ROUNDING:
            text = (f"Confidence {run.final_confidence:.2f}: there is no answer, so the blend "
                    f"({' + '.join(parts)} = {blended:.2f}) is capped at the retrieval confidence.")
        else:
            text += f" The blend gives {blended:.2f}; the stored confidence was scored under other weights."
    if breakdown is not None and abs(breakdown.overall - run.retrieval_confidence) >= _ROUNDING:
        text += (f" Under the run's weights profile the retrieval confidence re-scores to {breakdown.overall:.2f} "
                 "(the chart below).")
    if run.p_supported is not None:
        text += " The judge's P(supported) is not in the blend: it orders the queue and decides auto-accept."
    return text


def passage_scores(hit: Hit, *, cited: bool) -> str:
    """"relevance 0.81 · dense 0.66 · BM25 7.10" (plain text): the scores a passage was ranked by."""
    parts = [f"relevance {hit_relevance(hit):.2f}"]
    if hit.dense_similarity is not None:
        parts.append(f"dense similarity {hit.dense_similarity:.2f}")
    if hit.bm25_score is not None:
        parts.append(f"BM25 {hit.bm25_score:.2f}")
    if hit.rerank_score is not None:
        parts.append(f"rerank {hit.rerank_score:.2f}")
    if cited:
        parts.append("cited in the answer")
    return " · ".join(parts)


def reviewer_hints(run: Run, breakdown: ConfidenceBreakdown | None) -> tuple[str, ...]:
    """Hints for the person reading this run. The retrieval's recommendations speak to whoever
    asked the question (rephrase it, add documents): right for the workbench's own runs, wrong
    for an answer another system gave, where the reviewer can only check it."""
    if not came_from_outside(run):
        if breakdown is None:
            return ()
        # The first line is the retrieval level's advice ("review recommended..."): moot once the
        # auto-accept rule, which reads more than retrieval, has accepted the run.
        accepted = run.status == RunStatus.AUTO_ACCEPTED
        return breakdown.recommendations[1:] if accepted else breakdown.recommendations
    best = run.best()
    hits = best.hits if best is not None else ()
    hints = []
    if not hits:
        hints.append("The record came with no passages: check the answer against the source system's documents, "
                      "or flag it as not supported by the sources.")
    if not run.final_answer.strip():
        hints.append("The source system gave no answer: approve only if the passages do not hold one; flag it as "
                     "an incomplete answer if they do.")
    verdict = best.verdict if best is not None else None
    if verdict is not None and any(c.unsupported for c in verdict.claims):
        hints.append("The highlighted words appear in no passage: check them before approving.")
    if best is not None and best.crag is not None and best.crag.verdict == RetrievalVerdict.INCORRECT:
        hints.append("CRAG found the passages do not answer the question: an answer drawn from them is unlikely "
                     "to be supported.")
    if hits and breakdown is not None and breakdown.level in ("LOW", "VERY LOW"):
        hints.append(f"The passages match the question weakly (retrieval {breakdown.level}): check they hold what "
                     "the answer says.")
    return tuple(hints)
