"""Seed 002's strips to the generator (issue 30): with generate_from_strips the answer is
composed from CRAG's kept strips, in the chunk's own order; the judge still reads the chunks."""

from __future__ import annotations

from collections.abc import Sequence

from services.answering import pipeline
from services.answering.corrective import strips_only
from services.answering.llm.base import Generation
from services.answering.presets import get_preset
from services.domain import Hit
from services.scoring.crag import CragVerdict, KnowledgeStrip, RetrievalVerdict
from services.scoring.weights import DEFAULT_PROFILE
from tests.services.test_pipeline import ScriptedBackend, demo_docs  # noqa: F401  (fixture)


def _hit(chunk_id: int, text: str) -> Hit:
    return Hit(chunk_id=chunk_id, document_id=chunk_id, external_id=f"d{chunk_id}", title="", text=text, rank=chunk_id,
               fused_score=1.0 / chunk_id)


def _verdict(*strips: KnowledgeStrip) -> CragVerdict:
    return CragVerdict(RetrievalVerdict.CORRECT, 0.9, 0.9, {}, "", "use", strips=strips,
                       kept_chunk_ids=tuple(dict.fromkeys(s.chunk_id for s in strips)))


def test_strips_replace_each_chunks_text_in_the_chunks_own_order():
    chunks = [_hit(1, "Alpha is first. Beta is second. Gamma is third."), _hit(2, "Delta stands alone."),
              _hit(3, "Nothing relevant here.")]
    verdict = _verdict(KnowledgeStrip(1, "Gamma is third.", 0.9), KnowledgeStrip(2, "Delta stands alone.", 0.8),
                       KnowledgeStrip(1, "Alpha is first.", 0.7))
    stripped = strips_only(chunks, verdict)
    assert [(h.chunk_id, h.text) for h in stripped] == [(1, "Alpha is first. Gamma is third."),
                                                        (2, "Delta stands alone.")]
    assert strips_only(chunks, None) == chunks and strips_only(chunks, _verdict()) == chunks


def test_the_generator_reads_the_strips_and_the_judge_the_chunks(demo_docs):  # noqa: F811
    read: list[list[str]] = []

    class Recording(ScriptedBackend):
        def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
            read.append([c.text for c in chunks])
            return super().generate(query, chunks)

    question = "What does SRVO-062 mean?"
    config = get_preset("balanced", enable_adaptive_refinement=False, generate_from_strips=True)
    run = pipeline.run(question, "balanced", DEFAULT_PROFILE, backend=Recording((0.9,)), config=config)
    strips = run.iterations[0].crag.strips
    assert strips and read[0] and all(any(s.text in text for s in strips) for text in read[0])
    whole = {h.chunk_id: h.text for h in run.iterations[0].hits}
    assert sum(len(t) for t in read[0]) < sum(len(whole[cid]) for cid in run.iterations[0].crag.kept_chunk_ids)
    assert run.config["generate_from_strips"] is True
    # the judge's evidence comes from the whole chunks, not only from the strips
    evidence = [c.evidence for c in run.iterations[0].verdict.claims if c.evidence]
    assert all(any(e in whole[cid] for cid in whole) for e in evidence)

    read.clear()
    plain = pipeline.run(question, "balanced", DEFAULT_PROFILE, backend=Recording((0.9,)),
                         config=get_preset("balanced", enable_adaptive_refinement=False))
    assert plain.config["generate_from_strips"] is False
    assert read[0] == [whole[cid] for cid in plain.iterations[0].crag.kept_chunk_ids]
