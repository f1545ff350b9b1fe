"""services.retrieval.embedding.token_counter with the real packaged model's tokenizer."""

from __future__ import annotations

import pytest

from services.retrieval.embedding import token_counter

MODEL = "all-MiniLM-L6-v2"


def test_counts_a_text_longer_than_the_model_takes_without_warning(capfd: pytest.CaptureFixture[str]) -> None:
    count_tokens = token_counter(MODEL)
    capfd.readouterr()  # loading the model may print; only the count's output matters

    assert count_tokens("word " * 400) == 400  # every word one token, no [CLS]/[SEP], not truncated
    assert count_tokens("Huguenots fled") > 2  # word pieces are counted, not words

    # transformers prints this through its own stderr handler, once per tokenizer copy: each
    # ingest made a copy, so each ingest told its user of "indexing errors" that never happen.
    assert "longer than the specified maximum sequence length" not in capfd.readouterr().err
