"""Entailment by a cross-encoder NLI model, when one is installed: P(evidence entails claim).

None ships offline here, so the judge never needs one; a team that has one names it in
JUDGE_NLI_MODEL (a model name or a local directory, loaded with sentence-transformers'
CrossEncoder). Its verdict enters the judge's combination as log-odds (features.py,
`nli_log_odds`), at the weight model.py says.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from services.errors import InputError

Entail = Callable[[Sequence[tuple[str, str]]], np.ndarray]  # (premise, hypothesis) pairs -> P(entailment)


@cache
def nli_scorer(name: str) -> Entail:
    """P(entailment) for (premise, hypothesis) pairs by the cross-encoder `name`; the label that
    means entailment is read from the model's own config, never assumed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    try:
        model = CrossEncoder(name, device="cpu")
    except (OSError, ValueError) as exc:
        raise InputError(f"the NLI model '{name}' could not be loaded ({exc}); unset JUDGE_NLI_MODEL "
                         "to judge without one") from exc
    labels = {int(i): str(label).lower() for i, label in model.model.config.id2label.items()}
    entailment = [i for i, label in labels.items() if label.startswith("entail")]
    if len(entailment) != 1:
        raise InputError(f"the NLI model '{name}' has no single entailment label (its labels: {sorted(labels.values())})")
    index = entailment[0]

    def entail(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        logits = np.asarray(model.predict(list(pairs), apply_softmax=False, convert_to_numpy=True), dtype=np.float64)
        logits = logits.reshape(len(pairs), -1)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return shifted[:, index] / shifted.sum(axis=1)

    return entail
