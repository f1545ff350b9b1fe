"""Sentence vectors for the judge, cached by text: a passage's sentences are judged against many answers."""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import cache

import numpy as np

from services.judging.features import Embed
from services.retrieval.embedding import encode

_CACHE_SIZE = 16_384


@cache
def cached_embedder(model_name: str) -> Embed:
    """texts -> unit vectors with `model_name`, encoding only texts not seen before, in one batch.
    One per model and process: generation, judging and every run share what was encoded."""
    vectors: OrderedDict[str, np.ndarray] = OrderedDict()
    lock = threading.Lock()

    def embed(texts: list[str]) -> np.ndarray:
        with lock:
            missing = list(dict.fromkeys(t for t in texts if t not in vectors))
            if missing:
                for text, vector in zip(missing, encode(model_name, missing), strict=True):
                    vectors[text] = vector
                while len(vectors) > _CACHE_SIZE:
                    vectors.popitem(last=False)
            for text in texts:
                vectors.move_to_end(text)
            return np.stack([vectors[t] for t in texts])

    return embed
