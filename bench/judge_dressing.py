"""Does the judge read an answer the same when it comes dressed as other systems write it?

A language model's answer opens with where it got it ("According to the provided context, ..."),
hedges ("It seems that ..."), labels itself ("**Answer:** ..."), cites its source ("(source:
context 1)"), ends with a courtesy ("Let me know if you need anything else.") and answers a
yes/no question with "Yes, ...". None of that is a claim about the contexts. Over
the development set's test half (bench/judge_set.py), every right and wrong answer is judged as
built and in each dressing; per corpus and dressing the bench prints the AUROC (right above
wrong) as built and dressed, and how many answers' P(supported) moved by more than 0.05.
"Yes, " dresses only the answers to questions naming no wh-word and no options, and not the
bare replies (right_reply, wrong_reply), which are a yes or a no already.

    python bench/judge_dressing.py [--corpora squad,python-reference,numpy-api,handbook]

Last stdout line: {"by_corpus": {corpus: {dressing: {"n", "auroc_as_built", "auroc_dressed",
"moved"}}}, "model", "machine", "date"}
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import emit, log, machine, today  # noqa: E402
from bench.judge import auroc  # noqa: E402
from bench.judge_set import PER_CORPUS, JudgeCase, build_cases  # noqa: E402

MOVED = 0.05
REPLIES = ("right_reply", "wrong_reply")  # bench/judge_set.py's bare yes/no replies
DRESSINGS: dict[str, Callable[[str], str]] = {
    "yes": lambda answer: f"Yes, {answer}",
    "attribution": lambda answer: f"According to the provided context, {answer}",
    "hedge": lambda answer: f"It seems that {answer}",
    "courtesy": lambda answer: f"{answer.rstrip('.')}. Let me know if you need anything else!",
    "label": lambda answer: f"**Answer:** {answer}",
    "cited": lambda answer: f"{answer.rstrip('.')} (source: context 1).",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="squad,python-reference,numpy-api,handbook")
    parser.add_argument("--per-corpus", type=int, default=PER_CORPUS)
    parser.add_argument("--dressings", default=",".join(DRESSINGS))
    args = parser.parse_args()

    from bench._judge_readings import Reader
    from services.judging.answer_type import asks_yes_or_no
    from services.judging.judge import decide
    from services.judging.model import shipped_model
    from services.settings import get_settings

    model = shipped_model()
    reader = Reader(get_settings().embedding_model)

    def p_supported(case: JudgeCase) -> float:
        read = reader.read(case)
        if read.abstains:
            return 0.0
        return decide(read.features, adds_nothing=read.adds_nothing, model=model, reply_agrees=read.reply_agrees)[0]

    out: dict[str, dict[str, object]] = {}
    for corpus in args.corpora.split(","):
        cases = [c for c in build_cases([corpus], args.per_corpus, 0)
                 if c.split == "test" and c.kind != "abstention" and any(x.strip() for x in c.contexts)]
        out[corpus] = {}
        for name in args.dressings.split(","):
            dress = DRESSINGS[name]
            # "Yes, " goes before an answer to a yes/no question, not before a bare reply ("Yes, No")
            dressed_cases = [c for c in cases if name != "yes" or (asks_yes_or_no(c.question) and c.kind not in REPLIES)]
            log(f"{corpus}, {name}: {len(dressed_cases)} answers")
            labels = [c.label for c in dressed_cases]
            built = [p_supported(c) for c in dressed_cases]
            dressed = [p_supported(dataclasses.replace(c, answer=dress(c.answer))) for c in dressed_cases]
            out[corpus][name] = {"n": len(dressed_cases), "auroc_as_built": _rounded(auroc(labels, built)),
                                 "auroc_dressed": _rounded(auroc(labels, dressed)),
                                 "moved": sum(1 for a, b in zip(built, dressed, strict=True) if abs(a - b) > MOVED)}
    emit({"by_corpus": out, "model": model.version, "machine": machine(), "date": today()})


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


if __name__ == "__main__":
    main()
