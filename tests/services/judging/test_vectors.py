"""The judge's vectors with the real model: a context's sentences are read in one pass of the
context, each the mean of its own tokens; the context's vector from that pass is the one
`encode` gives it, so CRAG and the dense similarities see the same numbers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from services.judging import vectors
from services.judging.context_sentences import context_sentences, sentence_spans, unwrapped
from services.retrieval.embedding import encode, encode_tokens

MODEL = "all-MiniLM-L6-v2"
WRAPPED = ("The pulsecoder backup battery keeps the encoder's position while the robot is off.\n"
           "    when it runs low the controller raises SRVO-062. Replace the pack within two weeks.")


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """Each call of the model by the judge's embedder: which call, and its texts."""
    seen: list[tuple[str, list[str]]] = []
    for name in ("encode", "encode_tokens"):
        real = getattr(vectors, name)

        def counting(model: str, texts: Sequence[str], _real=real, _name=name, **options):  # type: ignore[no-untyped-def]
            seen.append((_name, list(texts)))
            return _real(model, texts, **options)

        monkeypatch.setattr(vectors, name, counting)
    return seen


def test_a_sentence_is_the_mean_of_its_tokens_in_its_context() -> None:
    embedder = vectors.SentenceEmbedder(MODEL)
    pool = context_sentences([WRAPPED])
    assert [s.text for s in pool][1].startswith("when it runs low")  # the hard wrap joined, as the judge reads it
    read = embedder.in_context([WRAPPED], pool)
    pass_ = encode_tokens(MODEL, [unwrapped(WRAPPED)])[0]
    for (text, start, end), vector in zip(sentence_spans(WRAPPED), read, strict=True):
        tokens = pass_.tokens[(pass_.spans[:, 0] >= start) & (pass_.spans[:, 1] <= end)]
        expected = tokens.mean(axis=0) / np.linalg.norm(tokens.mean(axis=0))
        assert np.abs(vector - expected).max() < 1e-5, text
    # read in its passage, a sentence is not the sentence read alone
    alone = encode(MODEL, [s.text for s in pool])
    assert all((read * alone).sum(axis=1) < 0.99)


def test_the_contexts_pass_gives_the_vector_encode_gives(calls) -> None:  # type: ignore[no-untyped-def]
    embedder = vectors.SentenceEmbedder(MODEL)
    embedder.prefetch(["What raises SRVO-062?"], [WRAPPED])
    assert [name for name, _ in calls] == ["encode_tokens"]  # the question rides in the contexts' call
    assert np.abs(embedder([WRAPPED])[0] - encode(MODEL, [WRAPPED])[0]).max() < 1e-5
    embedder.in_context([WRAPPED], context_sentences([WRAPPED]))
    embedder(["What raises SRVO-062?"])
    assert len(calls) == 1  # all of it was read in that one call


def test_a_sentence_past_what_the_model_reads_is_read_alone(calls) -> None:  # type: ignore[no-untyped-def]
    long = " ".join(f"Step {i} checks the cable of axis {i % 6 + 1} for wear." for i in range(40))
    pool = context_sentences([long])
    embedder = vectors.SentenceEmbedder(MODEL)
    read = embedder.in_context([long], pool)
    last = pool[-1].text
    assert np.abs(read[-1] - encode(MODEL, [last])[0]).max() < 1e-5
    assert calls[-1] == ("encode", [s.text for s in pool if s.text not in embedder._contexts[long]])
    assert 0 < len(embedder._contexts[long]) < len(pool)
