"""Increasing isotonic regression of 0/1 labels on scores, in numpy (pool adjacent violators).

The Review queue fits one on every verdict the first time a process opens it; importing
scikit-learn for that took longer than the page may (1.9 s of CPU here, the fit itself 0.05 s
at 100k verdicts). The result is the knots scikit-learn's IsotonicRegression(y_min=0, y_max=1,
out_of_bounds="clip") keeps as X_thresholds_ / y_thresholds_ (tests hold them equal), so
np.interp through them predicts what it predicts.
"""

from __future__ import annotations

import numpy as np


def isotonic_knots(scores: np.ndarray, labels: np.ndarray, *, pseudo_verdicts: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): the distinct scores where the fitted step function bends, ascending, with its values.

    `pseudo_verdicts` > 0 adds that many verdicts to each step, half of each label, before its
    value is taken ((k + 1) / (n + 2) for 2, Laplace's rule), and pools the steps again where
    that left one lower than the step before: a step of three flagged runs then reads 0.2, not
    0 (a certainty three verdicts cannot give). 0 is scikit-learn's fit."""
    order = np.argsort(scores, kind="mergesort")
    x, y = np.asarray(scores, dtype=np.float64)[order], np.asarray(labels, dtype=np.float64)[order]
    # Equal scores are one point: their mean label, weighted by how many share it.
    x, starts, weights = np.unique(x, return_index=True, return_counts=True)
    means = np.add.reduceat(y, starts) / weights
    values, sizes, counts = _pool_adjacent_violators(means.tolist(), weights.tolist())
    if pseudo_verdicts > 0:
        smoothed = (values * counts + pseudo_verdicts / 2) / (counts + pseudo_verdicts)
        values, spans, _ = _pool_adjacent_violators(smoothed.tolist(), (counts + pseudo_verdicts).tolist())
        sizes = np.add.reduceat(sizes, np.concatenate(([0], np.cumsum(spans)[:-1])))
    fitted = np.repeat(values, sizes)  # one value per distinct score
    # Keep the ends and every point where the value changes on either side; the rest lie on a flat
    # stretch that interpolation between its ends reproduces.
    keep = np.ones(len(x), dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return x[keep], np.clip(fitted[keep], 0.0, 1.0)


def _pool_adjacent_violators(means: list[float], weights: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blocks' values, sizes (in points) and weights: merge a block into the one before while it is lower."""
    values: list[float] = []
    block_weights: list[float] = []
    sizes: list[int] = []
    for mean, weight in zip(means, weights):
        value, total, size = mean, float(weight), 1
        while values and values[-1] >= value:
            previous, previous_weight = values.pop(), block_weights.pop()
            value = (previous * previous_weight + value * total) / (previous_weight + total)
            total += previous_weight
            size += sizes.pop()
        values.append(value)
        block_weights.append(total)
        sizes.append(size)
    return np.array(values), np.array(sizes), np.array(block_weights)
