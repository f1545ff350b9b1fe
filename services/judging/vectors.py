"""The judge's vectors, cached: texts read alone, and contexts' sentences read in their context.

A context's sentences are not embedded one by one: the context goes through the model once
and each sentence is the mean of its own tokens in that pass (the context's vector, what CRAG
and the dense similarities need, comes from the same pass). A sentence so read carries its
passage's meaning with it (cosine 0.78 on average to the sentence read alone, SQuAD
paragraphs), yet finds the sentence holding the answer as often (76.2% against 76.7% of 395
SQuAD questions); it costs no model tokens besides the context's own, where reading them alone
cost 40% more than the record (bench/intake.py, five contexts). A sentence the pass does not
read whole (past the model's 256 tokens) is read alone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import cache

import numpy as np

from services.judging.context_sentences import ContextSentence, sentence_spans, unwrapped
from services.retrieval.embedding import encode, encode_tokens

_CACHE_SIZE = 16_384  # texts read alone
_CONTEXT_CACHE_SIZE = 2_048  # contexts' sentences (a few to forty vectors each)


class SentenceEmbedder:
    """texts -> unit vectors with one model, encoding only what was not seen before, in one
    batch. One per model and process: generation, judging and every run share what was encoded."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self._texts: OrderedDict[str, np.ndarray] = OrderedDict()
        self._contexts: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Each text read alone."""
        with self._lock:
            self._encode(texts, ())
            for text in texts:
                self._texts.move_to_end(text)
            return np.stack([self._texts[t] for t in texts])

    def in_context(self, contexts: Sequence[str], sentences: Sequence[ContextSentence]) -> np.ndarray:
        """Each sentence of `contexts[s.context]` as that context's pass reads it."""
        with self._lock:
            self._encode((), [contexts[s.context] for s in sentences])
            for s in sentences:
                self._contexts.move_to_end(contexts[s.context])
            read = [self._contexts[contexts[s.context]].get(s.text) for s in sentences]
            self._encode([s.text for s, v in zip(sentences, read, strict=True) if v is None], ())
            return np.stack([self._texts[s.text] if v is None else v for s, v in zip(sentences, read, strict=True)])

    def has_read(self, context: str) -> bool:
        """Whether `context` went through the model whole, so its sentences are read in it."""
        return context in self._contexts

    def prefetch(self, texts: Iterable[str], contexts: Iterable[str]) -> None:
        """Encode, in one call of the model, `texts` to be read alone and `contexts` to be read
        with their sentences (each context's own vector is then known as a text too)."""
        with self._lock:
            self._encode(list(texts), list(contexts))

    def _encode(self, texts: Sequence[str], contexts: Sequence[str]) -> None:
        passes = list(dict.fromkeys(c for c in contexts if c not in self._contexts))
        alone = list(dict.fromkeys(t for t in texts if t not in self._texts and t not in passes))
        if alone and not passes:
            for text, vector in zip(alone, encode(self.model_name, alone), strict=True):
                self._texts[text] = vector
        elif passes:
            read = encode_tokens(self.model_name, [unwrapped(c) for c in passes] + alone)
            for context, pass_ in zip(passes, read[:len(passes)], strict=True):
                self._texts[context] = pass_.vector
                self._contexts[context] = {text: vector for text, start, end in sentence_spans(context)
                                           if (vector := pass_.mean_over(start, end)) is not None}
            for text, pass_ in zip(alone, read[len(passes):], strict=True):
                self._texts[text] = pass_.vector
        for kept, size in ((self._texts, _CACHE_SIZE), (self._contexts, _CONTEXT_CACHE_SIZE)):
            while len(kept) > size:
                kept.popitem(last=False)  # type: ignore[attr-defined]


@cache
def cached_embedder(model_name: str) -> SentenceEmbedder:
    """The process's embedder for `model_name`."""
    return SentenceEmbedder(model_name)
