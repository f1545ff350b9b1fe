"""Query expansion by pseudo-relevance feedback: backend-independent, from the top hits only."""

from __future__ import annotations

from services.domain import Hit
from services.retrieval.expansion import PRF_DEPTH, expansion_terms

TEXTS = (
    "Alarm SRVO-063 appears when the pulsecoder battery voltage is low. SRVO-063 clears after the battery swap.",
    "Replace the pulsecoder battery pack while the controller stays on.",
    "The battery pack part number is KR-P-0361.",
    "Zeppelin mastering uses witness marks.",  # ranked below PRF_DEPTH
)
HITS = tuple(Hit(chunk_id=i, document_id=i, external_id=f"d{i}", title="", text=t, rank=i + 1, fused_score=0.1)
             for i, t in enumerate(TEXTS))


def test_terms_are_new_to_the_query_and_written_as_the_chunks_write_them():
    terms = expansion_terms("What does the alarm mean?", HITS)
    assert 1 <= len(terms) <= 5
    assert "SRVO-063" in terms and "battery" in terms  # a code stays whole, in its own case
    assert not {t.lower() for t in terms} & {"alarm", "mean", "alarms"}


def test_only_the_top_hits_are_read():
    assert PRF_DEPTH == 3
    terms = {t.lower() for t in expansion_terms("What does the alarm mean?", HITS, n=50)}
    assert "pulsecoder" in terms and "part" in terms  # "part" is only in the third hit
    assert not terms & {"zeppelin", "witness", "mastering"}
    assert expansion_terms("What does the alarm mean?", ()) == []

