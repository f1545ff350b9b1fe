"""Feature presets (seed 000): which evaluation steps run, thresholds and iteration caps, and
the thresholds a team sets over a preset (environment, `workbench ask` options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from services.answering.decisions import RouterThresholds
from services.errors import InputError
from services.scoring.blend import REFLECTION_MIN_SCORE
from services.scoring.confidence import CONSENSUS_THRESHOLD
from services.scoring.crag import CragConfig
from services.scoring.weights import LOOP_KEYS
from services.settings import Settings


@dataclass(frozen=True)
class FeatureConfig:
    enable_adaptive_refinement: bool = True
    enable_self_reflection: bool = True
    enable_crag_evaluation: bool = True
    enable_answer_grading: bool = True
    enable_gap_detection: bool = True
    enable_decomposition: bool = True
    min_confidence_threshold: float = 0.5
    max_refinement_attempts: int = 2
    reflection_min_score: float = REFLECTION_MIN_SCORE
    retrieval_mode: str = "hybrid"
    k: int = 8
    router: RouterThresholds = RouterThresholds()
    crag: CragConfig = CragConfig()
    # A hit's relevance at or above this counts towards the consensus component (seed 003).
    consensus_threshold: float = CONSENSUS_THRESHOLD
    # CRAG's corrective actions search this collection (services.retrieval.fallback); with
    # enable_fallback, FALLBACK_COLLECTION names it when the preset does not.
    fallback_collection: str | None = None
    enable_fallback: bool = True
    # Refining: how many gaps become gap-filling queries, and whether the grader's suggested
    # refinements join the queries (seed 000 asks 3 gap queries and uses the refinements).
    gap_query_limit: int = 2
    use_grader_refinements: bool = False
    # Seed 001: the answer reads only as many of the chunks as the question's kind needs
    # (services.retrieval.adaptive.cut_for_question). Off in balanced: with the offline
    # backend (balanced, 150 SQuAD questions a class, seed 13, and the demo questions) it
    # read 2.6 chunks instead of 3.9 and left AUROC where it was (0.745 vs 0.746), but lost
    # answers: SQuAD answer recall 0.853 vs 0.867, demo q08's relevant document, and 6 of
    # 549 iterations kept no chunk at all. Fewer chunks may still pay with an LLM backend;
    # the `full` preset and `workbench ask --adaptive-k` turn it on.
    adaptive_k: bool = False
    # Seed 002: the answer is composed from CRAG's knowledge strips (each kept chunk's relevant
    # sentences, in their order) instead of the whole chunks; the judge still reads the chunks.
    # Off in every preset: bench/pipeline.py --variants whole,strips (40 a class, balanced) lost
    # answers on SQuAD (recall 0.875 -> 0.800) and numpy-api (0.325 -> 0.275) and left AUROC
    # where it was (0.792 vs 0.797, 0.818 vs 0.814).
    generate_from_strips: bool = False
    # Seed 000 passes the gaps on as additional context: with gaps_as_context a refined
    # iteration searches each gap-filling query on its own (not fused into the question's
    # retrieval) and gives its best `gap_context_hits` passages to the generator after the
    # question's, once each, within `gap_context_tokens` (services.answering.gap_context).
    # Off, the gap queries join the fused retrieval pool. Off in balanced: bench/pipeline.py
    # --variants gaps-off,gaps-on (balanced, 40 a class) found no answer more on SQuAD or
    # numpy-api and moved AUROC inside its interval (+0.012, -0.032) for a search per gap query.
    gaps_as_context: bool = False
    gap_context_hits: int = 2
    gap_context_tokens: int = 400

    @property
    def max_iterations(self) -> int:
        return 1 + (self.max_refinement_attempts if self.enable_adaptive_refinement else 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS = {
    "minimal": FeatureConfig(
        enable_adaptive_refinement=False, enable_self_reflection=False, enable_crag_evaluation=False,
        enable_answer_grading=False, enable_gap_detection=False, enable_decomposition=False,
        max_refinement_attempts=0, enable_fallback=False,
    ),
    "balanced": FeatureConfig(enable_decomposition=False, min_confidence_threshold=0.5, max_refinement_attempts=2),
    "research": FeatureConfig(min_confidence_threshold=0.6, max_refinement_attempts=3, k=10),
}
# Presets to compare the loop with, chosen by name (`workbench ask --preset`, pipeline.run).
# Kept out of PRESETS, which the live demo answers every question with (75 runs) and the
# pages offer, until those name their own lists.
COMPARISON_PRESETS = {
    # The design notes' loop as they write it: seed 000's router (COMPLETE at >= 0.7, refine
    # in [0.4, 0.7), look elsewhere below 0.4 with fewer than 3 sources, decompose complex
    # questions), its 3 gap queries passed on as additional context and the grader's
    # refinements, seed 000's cap of 3 refinements, seed 002's CRAG thresholds and seed 004's
    # reflection minimum.
    "as-written": FeatureConfig(
        min_confidence_threshold=0.7, max_refinement_attempts=3, router=RouterThresholds(0.7, 0.4, 3),
        crag=CragConfig(correct_threshold=0.7, incorrect_threshold=0.3), reflection_min_score=0.8,
        gap_query_limit=3, use_grader_refinements=True, gaps_as_context=True,
    ),
    # Everything on: decomposition, the fallback source, the adaptive cut-off, the grader's
    # refinements, the gaps as additional context.
    "full": FeatureConfig(min_confidence_threshold=0.6, max_refinement_attempts=3, k=10, adaptive_k=True,
                          gap_query_limit=3, use_grader_refinements=True, gaps_as_context=True),
}
ALL_PRESETS = {**PRESETS, **COMPARISON_PRESETS}


def get_preset(name: str, **overrides: Any) -> FeatureConfig:
    try:
        config = ALL_PRESETS[name]
    except KeyError:
        raise InputError(f"unknown preset '{name}' (choose one of {', '.join(ALL_PRESETS)})") from None
    return replace(config, **overrides) if overrides else config


def with_thresholds(
    config: FeatureConfig,
    *,
    reflection_min_score: float | None = None,
    max_refinement_attempts: int | None = None,
    crag_correct_threshold: float | None = None,
    crag_incorrect_threshold: float | None = None,
    consensus_threshold: float | None = None,
    fallback_collection: str | None = None,
    adaptive_k: bool | None = None,
    gaps_as_context: bool | None = None,
) -> FeatureConfig:
    """`config` with every value given (not None) in place of the preset's; a value out of
    range, or a CRAG lower threshold above the upper one, is an InputError."""
    for name, value in (("reflection minimum", reflection_min_score), ("CRAG upper threshold", crag_correct_threshold),
                        ("CRAG lower threshold", crag_incorrect_threshold), ("consensus threshold", consensus_threshold)):
        if value is not None and not 0.0 <= value <= 1.0:
            raise InputError(f"the {name} must be between 0 and 1, not {value}")
    if max_refinement_attempts is not None and not 0 <= max_refinement_attempts <= 10:
        raise InputError(f"the retry cap must be between 0 and 10 refinements, not {max_refinement_attempts}")
    crag = replace(config.crag,
                   correct_threshold=config.crag.correct_threshold if crag_correct_threshold is None else crag_correct_threshold,
                   incorrect_threshold=(config.crag.incorrect_threshold if crag_incorrect_threshold is None
                                        else crag_incorrect_threshold))
    if crag.incorrect_threshold > crag.correct_threshold:
        raise InputError(f"the CRAG lower threshold {crag.incorrect_threshold} is above the upper one "
                         f"{crag.correct_threshold}")
    changes: dict[str, Any] = {"crag": crag}
    for name, value in (("reflection_min_score", reflection_min_score), ("consensus_threshold", consensus_threshold),
                        ("max_refinement_attempts", max_refinement_attempts), ("adaptive_k", adaptive_k),
                        ("gaps_as_context", gaps_as_context)):
        if value is not None:
            changes[name] = value
    if fallback_collection and config.enable_fallback:  # a preset without CRAG or with the fallback off ignores it
        changes["fallback_collection"] = fallback_collection
    return replace(config, **changes)


def configured(name: str, settings: Settings, loop: Mapping[str, Any] | None = None) -> FeatureConfig:
    """The preset with the thresholds set in the environment over it (services.settings), and
    over those the ones the weights profile sets (`loop`, from the Tuning page): the profile is
    the team's choice of the moment, the environment the deployment's default. Per-run options
    (`workbench ask`, the Ask page) go over all of these with with_thresholds."""
    config = with_thresholds(
        get_preset(name), reflection_min_score=settings.reflection_min_score,
        max_refinement_attempts=settings.max_refinement_attempts,
        crag_correct_threshold=settings.crag_correct_threshold,
        crag_incorrect_threshold=settings.crag_incorrect_threshold,
        consensus_threshold=settings.consensus_threshold, fallback_collection=settings.fallback_collection,
        adaptive_k=settings.adaptive_k)
    return with_thresholds(config, **{k: loop[k] for k in LOOP_KEYS if k in loop}) if loop else config
