"""A reader of the question: how well a phrase answers it, read where its evidence sentence holds it.

Every other signal reads the question and the answer's sentence apart and compares them; which
of two grounded phrases of one sentence or docstring a question means ("values in the first array
that are not in the second": "set difference", not "input arrays") takes reading them together.
The packaged embedding model does that here as a cross-encoder: the question and the sentence go
through it as one input, the phrase marked in the sentence,

    [CLS] question [SEP] before [unused1] phrase [unused2] after [SEP]

(`before` and `after` at most the `context_tokens` of the sentence nearest the phrase that the
weights were fitted with: 8 a side ordered the test half's phrases as well as the whole sentence on
average, at a third fewer tokens; docs/judge-history.md), and a linear head on [CLS] gives a logit,
higher the better the phrase answers (standardized: mean 0 and deviation 1 over the phrases it was
fitted on). Its low-rank updates of every layer and the head were fitted by `bench/fit_reader.py` on groups drawn from the
train half of the development set (a question's gold phrase against phrases of the same passage,
a "which A or B" against its other option), on all four corpora; they ship in
`reader_model.safetensors` (1.3 MB) with their version in `reader_model.json`, and are merged into
a copy of the model once per process. They were fitted on all-MiniLM-L6-v2: with another
embedding model, or `JUDGE_READER=off`, the judge reads without it (the signal is 0).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from services.retrieval.embedding import load_model, tokenizer_copy

MODEL = "all-MiniLM-L6-v2"  # what the shipped weights were fitted on
WEIGHTS = Path(__file__).with_name("reader_model.safetensors")
META = WEIGHTS.with_suffix(".json")
MAX_TOKENS = 128  # question and sentence together; a longer sentence keeps the words nearest the phrase
QUESTION_TOKENS = 40
RANK, SCALE = 16, 2.0  # of the low-rank updates: W + SCALE * up @ down
# Every linear layer of each transformer block is updated.
TARGETS = ("attention.self.query", "attention.self.key", "attention.self.value",
           "attention.output.dense", "intermediate.dense", "output.dense")
MARKS = ("[unused1]", "[unused2]")  # around the phrase: tokens the vocabulary holds and the model never saw
_CACHE_SIZE = 4_096
# Inputs a forward pass, taken shortest first: a pass pads every input to its longest. Sorted by
# the sentence's characters alone (the question's length unseen) in passes of 64, 46% of what the
# model read was padding (bench/intake.py's short records, 2026-12-07); by tokens in passes of 16, 4%.
_BATCH = 16


@dataclass(frozen=True)
class Phrase:
    """A phrase where a sentence holds it: the sentence is before + phrase + after."""

    before: str
    phrase: str
    after: str


def phrase_in(sentence: str, words: Sequence[str]) -> Phrase | None:
    """The shortest span of `sentence` holding every one of `words` (an answer's added words, as
    written), whole words, any case; None when the sentence lacks one of them."""
    wanted = list(dict.fromkeys(w.lower() for w in words if w.strip()))
    if not wanted:
        return None
    found = sorted((start, end, i) for i, word in enumerate(wanted) for start, end in _whole_words(sentence, word))
    if len({i for _, _, i in found}) < len(wanted):
        return None
    best: tuple[int, int] | None = None
    last: dict[int, tuple[int, int]] = {}
    for start, end, i in found:  # each occurrence closing a window of the latest occurrence of every word
        last[i] = (start, end)
        if len(last) == len(wanted):
            span = (min(s for s, _ in last.values()), max(e for _, e in last.values()))
            if best is None or span[1] - span[0] < best[1] - best[0]:
                best = span
    assert best is not None
    return Phrase(sentence[:best[0]], sentence[best[0]:best[1]], sentence[best[1]:])


def _whole_words(sentence: str, word: str) -> list[tuple[int, int]]:
    """Where `word` (lower case) stands in `sentence` as a whole word, any case: what
    `(?<!\\w)word(?!\\w)` with IGNORECASE finds, without compiling a pattern for every word of
    every answer (a batch's distinct words overflow `re`'s cache of 512: compiling took 0.36 s of a
    400-record intake drain's 11.6 s under cProfile)."""
    lowered = sentence.lower()
    if len(lowered) != len(sentence):  # a letter whose lower case is longer: offsets would drift
        return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", sentence, re.IGNORECASE)]
    spans, start = [], lowered.find(word)
    while start >= 0:
        end = start + len(word)
        if _is_word_char(sentence, start - 1) or _is_word_char(sentence, end):
            start = lowered.find(word, start + 1)
        else:
            spans.append((start, end))
            start = lowered.find(word, end)
    return spans


def _is_word_char(text: str, at: int) -> bool:
    """Whether text[at] is what `\\w` matches (alphanumeric or "_"); False off either end."""
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def input_ids(tokenizer: Any, question: str, phrase: Phrase,
              context_tokens: int | None = None) -> tuple[list[int], list[int]]:
    """The model's input for (question, phrase): token ids and token types (0 question, 1 sentence);
    at most `context_tokens` of the sentence's on each side of the phrase where given."""
    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]) if text.strip() else []

    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    open_, close = tokenizer.convert_tokens_to_ids(list(MARKS))
    asked = ids(question)[:QUESTION_TOKENS]
    before, inside, after = ids(phrase.before), ids(phrase.phrase), ids(phrase.after)
    if context_tokens is not None:
        before, after = before[max(0, len(before) - context_tokens):], after[:context_tokens]
    room = MAX_TOKENS - len(asked) - 5
    inside = inside[:room]
    room -= len(inside)
    kept_before = min(len(before), max(room // 2, room - len(after)))
    kept_after = min(len(after), room - kept_before)
    first = [cls, *asked, sep]
    second = [*before[len(before) - kept_before:], open_, *inside, close, *after[:kept_after], sep]
    return first + second, [0] * len(first) + [1] * len(second)


def model_inputs(tokenizer: Any, pairs: Sequence[tuple[str, Phrase]], context_tokens: int | None = None) -> dict[str, Any]:
    """The padded tensors of a batch of (question, phrase): input_ids, token_type_ids, attention_mask."""
    return padded([input_ids(tokenizer, question, phrase, context_tokens) for question, phrase in pairs])


def padded(inputs: Sequence[tuple[list[int], list[int]]]) -> dict[str, Any]:
    """The tensors of a batch of input_ids' (token ids, token types), padded to the longest."""
    import torch

    ids = torch.zeros((len(inputs), max(len(tokens) for tokens, _ in inputs)), dtype=torch.long)
    types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
    for row, (tokens, kinds) in enumerate(inputs):
        ids[row, :len(tokens)], types[row, :len(kinds)], mask[row, :len(tokens)] = torch.tensor(tokens), torch.tensor(kinds), 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def stored_weights(path: Path = WEIGHTS) -> dict[str, Any]:
    """The fitted updates and head, as float32 tensors."""
    from safetensors.torch import load_file

    return {name: tensor.float() for name, tensor in load_file(str(path)).items()}


def reader_meta(path: Path = META) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


class PhraseReader:
    """(question, phrases) -> logits: the packaged model with the fitted updates merged into its
    weights (a copy: the embedder's own model is untouched), and the head."""

    def __init__(self, model_name: str, weights: Mapping[str, Any], context_tokens: int | None = None) -> None:
        import torch

        self._torch = torch
        base: Any = load_model(model_name)[0].auto_model
        self._bert = copy.deepcopy(base).eval()
        with torch.no_grad():
            for name, module in self._bert.named_modules():
                if f"{name}.down" in weights:
                    module.weight += SCALE * weights[f"{name}.up"] @ weights[f"{name}.down"]
        self._head_weight, self._head_bias = weights["head.weight"], weights["head.bias"]
        self._context_tokens = context_tokens
        self._tokenizer, self._tokenizer_lock = tokenizer_copy(model_name)
        self._read: OrderedDict[tuple[str, Phrase], float] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, question: str, phrases: Sequence[Phrase]) -> np.ndarray:
        return self.read([(question, p) for p in phrases])

    def read(self, pairs: Sequence[tuple[str, Phrase]]) -> np.ndarray:
        """One logit per (question, phrase), reading in batches only what was not read before
        (intake reads a whole batch's answers in one call, the judge then finds them here)."""
        with self._lock:
            missing = list(dict.fromkeys(p for p in pairs if p not in self._read))
            with self._tokenizer_lock:
                inputs = [input_ids(self._tokenizer, question, phrase, self._context_tokens) for question, phrase in missing]
            shortest_first = sorted(range(len(missing)), key=lambda i: len(inputs[i][0]))
            for start in range(0, len(missing), _BATCH):
                batch = shortest_first[start:start + _BATCH]
                for i, logit in zip(batch, self._logits([inputs[i] for i in batch]), strict=True):
                    self._read[missing[i]] = logit
            for pair in pairs:
                self._read.move_to_end(pair)
            read = np.asarray([self._read[p] for p in pairs], dtype=np.float64)
            while len(self._read) > _CACHE_SIZE:  # after reading them: a call may ask for more than it keeps
                self._read.popitem(last=False)
            return read

    def _logits(self, inputs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        """The head on [CLS]'s last state. The last block is run for [CLS] alone (its keys and values
        still from every token): the head reads nothing else, and that block's other rows were a
        sixth of the work (0.83-0.89 of the time, logits within 5e-7 of the whole model's)."""
        with self._torch.inference_mode():
            tensors = padded(inputs)
            hidden = self._bert.embeddings(input_ids=tensors["input_ids"], token_type_ids=tensors["token_type_ids"])
            mask = tensors["attention_mask"][:, None, None, :].bool()  # every head, every query: the keys to read
            *blocks, last = self._bert.encoder.layer
            for block in blocks:
                hidden = _block(block, hidden, mask)
            cls = _block(last, hidden, mask, queries=1)[:, 0]
            return (cls @ self._head_weight.T + self._head_bias).squeeze(-1).tolist()


def _block(block: Any, hidden: Any, mask: Any, queries: int | None = None) -> Any:
    """One BERT block in inference (transformers' BertLayer without dropout), for the first
    `queries` positions only where given; keys and values are every position's."""
    import torch.nn.functional as F

    attention, output = block.attention.self, block.attention.output
    rows = hidden.shape[0]
    asking = hidden if queries is None else hidden[:, :queries]

    def heads(states: Any) -> Any:
        return states.view(rows, -1, attention.num_attention_heads, attention.attention_head_size).transpose(1, 2)

    read = F.scaled_dot_product_attention(heads(attention.query(asking)), heads(attention.key(hidden)),
                                          heads(attention.value(hidden)), attn_mask=mask)
    attended = output.LayerNorm(output.dense(read.transpose(1, 2).reshape(rows, -1, attention.all_head_size)) + asking)
    return block.output.LayerNorm(block.output.dense(block.intermediate(attended)) + attended)


def reader_state(model_name: str) -> str:
    """One line on whether the judge reads with the reader, and which weights."""
    from services.settings import get_settings

    meta = reader_meta()
    if not get_settings().judge_reader:
        return f"reader of the question: off (JUDGE_READER=false); {meta['version']} is not read"
    if shipped_reader(model_name) is None:
        return f"reader of the question: not read: {meta['version']} was fitted on {MODEL}, the embedding model is {model_name}"
    return f"reader of the question: {meta['version']}, fitted on {MODEL} (rank {meta['rank']}, {meta['train_groups']} groups)"


@cache
def shipped_reader(model_name: str) -> PhraseReader | None:
    """The process's reader for the embedding model `model_name`: None for a model the weights
    were not fitted on, or when JUDGE_READER is off."""
    from services.settings import get_settings

    if model_name.split("/")[-1] != MODEL or not get_settings().judge_reader or not WEIGHTS.exists():
        return None
    return PhraseReader(model_name, stored_weights(), reader_meta().get("context_tokens"))
