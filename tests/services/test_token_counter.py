"""services.retrieval.embedding.token_counter with the real packaged model's tokenizer."""

from __future__ import annotations

import copy

import pytest

from services.retrieval import embedding
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


def test_every_counter_shares_one_tokenizer_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A deep copy of the tokenizer takes 0.1 s: made per ingest, it cost a small file's ingest
    # more than encoding its chunks.
    embedding.load_model(MODEL)
    embedding.tokenizer_copy.cache_clear()
    made: list[object] = []
    real = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda thing, *memo: made.append(thing) or real(thing, *memo))

    counts = [token_counter(MODEL)("Huguenots fled to the Cape") for _ in range(3)]

    assert len(set(counts)) == 1 and counts[0] > 5
    assert len(made) == 1

