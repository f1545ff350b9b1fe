"""Balancing the judge's development set: as many right as wrong answers in each style, with
lengths alike, so that an answer's length tells nothing about whether it is right."""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.judge_set import JudgeCase


def balanced(cases: list[JudgeCase], comparisons: dict[str, str], seed: int) -> list[JudgeCase]:
    """As many right as wrong answers in each style, with lengths alike: the larger side of a
    style is cut down to the smaller one's size, keeping cases whose lengths follow the smaller
    side's (quantile by quantile); a right answer whose question has the wrong kind it is
    compared with is kept first, and the wrong kinds are cut evenly."""
    def key(case: JudgeCase) -> float:
        return random.Random(f"{seed}/{case.corpus}/{case.question_id}/{case.kind}/keep").random()

    kinds_of: dict[str, set[str]] = {}
    for case in cases:
        kinds_of.setdefault(case.question_id, set()).add(case.kind)

    def paired(case: JudgeCase) -> bool:
        return any(comparisons[w] == case.kind and w in kinds_of[case.question_id] for w in comparisons)

    kept: list[JudgeCase] = []
    for style in ("concise", "sentence", "restated", "reply"):
        right = [c for c in cases if c.style == style and c.label == 1]
        wrong = [c for c in cases if c.style == style and c.label == 0]
        if len(right) > len(wrong):
            first = sorted((c for c in right if paired(c)), key=key)[:len(wrong)]
            rest = [c for c in right if c not in first]
            right = first + _matched(rest, [len(c.answer) for c in wrong], len(wrong) - len(first), key)
        elif len(wrong) > len(right):
            quota = Counter(c.kind for c in _even_cut(wrong, len(right), key))
            wrong = [c for kind, n in sorted(quota.items())
                     for c in _matched([w for w in wrong if w.kind == kind], [len(r.answer) for r in right], n, key)]
        kept += right + wrong
    order = {id(c): i for i, c in enumerate(cases)}
    return sorted(kept, key=lambda c: order[id(c)])


def _matched(pool: list[JudgeCase], lengths: list[int], n: int, key) -> list[JudgeCase]:  # type: ignore[no-untyped-def]
    """`n` cases of `pool` whose answer lengths follow the distribution of `lengths`: for each
    of n evenly spaced quantiles, the unused case nearest in length (seeded among equals)."""
    if n <= 0 or not pool:
        return []
    ordered = sorted(lengths)
    targets = [ordered[min(len(ordered) - 1, int((i + 0.5) * len(ordered) / n))] for i in range(n)]
    free = sorted(pool, key=key)
    taken = []
    for target in targets:
        if not free:
            break
        best = min(range(len(free)), key=lambda i: abs(len(free[i].answer) - target))
        taken.append(free.pop(best))
    return taken


def _even_cut(cases: list[JudgeCase], n: int, key) -> list[JudgeCase]:  # type: ignore[no-untyped-def]
    """`n` of `cases`, taken round-robin over their kinds in seeded order (kinds stay even)."""
    by_kind: dict[str, list[JudgeCase]] = {}
    for case in sorted(cases, key=key):
        by_kind.setdefault(case.kind, []).append(case)
    queues = [by_kind[k] for k in sorted(by_kind)]
    taken: list[JudgeCase] = []
    while len(taken) < n:
        for queue in queues:
            if queue and len(taken) < n:
                taken.append(queue.pop(0))
    return taken
