"""Does the judge catch a sentence turned around by words the development set never turns?

bench/judge_set.py's *reversed* kind swaps direction words from one list (bench/_judge_text.py's
_PAIRS: raise/lower, more/less, before/after ...), and the judge is fitted on it. A team's
hallucinated answers turn other words: "descending" for "ascending", "rows" for "columns",
"rejects" for "accepts", "twice" for "half". Over the development set's test half, every right
sentence answer holding a word of PAIRS below (none of them a pair of _PAIRS) is turned at one
such word, chosen with a seed, and judged beside the right sentence it came from. Per corpus,
and split by whether the judge's own lexicon knows the pair (services/judging/lexicon.toml: the
reversal signal can fire) or not (only a changed quote can tell): the AUROC (right above turned)
of the judge, of the word-overlap baseline and of length, and how many turned answers the judge
would auto-accept.

    python bench/judge_reversals.py [--corpora squad,python-reference,numpy-api,handbook] [--seed 7]

Last stdout line: {"by_corpus": {corpus: {"all" | "in_lexicon" | "not_in_lexicon": {"n_turned",
"auroc": {"judge", "word_support", "length"}, "auto_accepted"}}}, "missed": [...], "model", ...}
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import emit, log, machine, today  # noqa: E402
from bench._judge_text import REVERSALS as SET_REVERSALS  # noqa: E402
from bench.judge import _word_support, auroc  # noqa: E402
from bench.judge_set import PER_CORPUS, JudgeCase, build_cases  # noqa: E402

# Direction, order, role and quantity words a wrong answer turns, as pairs read both ways.
PAIRS = [
    ("ascending", "descending"), ("inclusive", "exclusive"), ("accepts", "rejects"), ("accepted", "rejected"),
    ("opens", "closes"), ("import", "export"), ("beginning", "end"), ("gains", "loses"), ("expands", "shrinks"),
    ("strong", "weak"), ("stronger", "weaker"), ("succeeds", "fails"), ("adds", "removes"), ("added", "removed"),
    ("same", "different"), ("horizontal", "vertical"), ("rows", "columns"), ("row", "column"), ("left", "right"),
    ("input", "output"), ("inputs", "outputs"), ("front", "back"), ("top", "bottom"), ("leading", "trailing"),
    ("lowercase", "uppercase"), ("sorted", "unsorted"), ("mutable", "immutable"), ("required", "optional"),
    ("public", "private"), ("success", "failure"), ("supported", "opposed"), ("rich", "poor"), ("cheap", "expensive"),
    ("warmer", "colder"), ("hot", "cold"), ("wet", "dry"), ("early", "late"), ("modern", "ancient"), ("young", "old"),
    ("legal", "illegal"), ("upstream", "downstream"), ("begins", "ends"), ("began", "ended"), ("twice", "half"),
    ("doubled", "halved"), ("double", "half"), ("many", "few"), ("large", "small"), ("long", "short"),
    ("wide", "narrow"), ("fast", "slow"), ("easy", "difficult"), ("simple", "complex"), ("inner", "outer"),
    ("internal", "external"), ("over", "under"), ("at least", "at most"), ("preserves", "discards"),
    ("keeps", "drops"), ("true", "false"), ("all", "none of the"), ("sometimes", "never"),
]
TURNS: dict[str, str] = {}
for _a, _b in PAIRS:
    if _a not in SET_REVERSALS and _b not in SET_REVERSALS:  # words the set's own kind never turns
        TURNS.setdefault(_a, _b)
        TURNS.setdefault(_b, _a)
# A word of its own, in lower case (a capital inside a sentence names something: "Old Town").
_TURNABLE = re.compile(r"(?<![\w$.\"'`-])(" + "|".join(sorted(map(re.escape, TURNS), key=len, reverse=True))
                       + r")(?![\w\"'`(-])")


def turned(case: JudgeCase, rng: random.Random) -> JudgeCase | None:
    """The right sentence with one word of TURNS turned, or None when it holds none."""
    found = [m for m in _TURNABLE.finditer(case.answer) if m.start() == 0 or not m.group(1)[0].isupper()]
    if not found:
        return None
    m = rng.choice(found)
    word, new = m.group(1), TURNS[m.group(1)]
    return dataclasses.replace(case, kind="turned", label=0, note=f"{word!r} turned to {new!r}", value=new,
                               answer=case.answer[:m.start()] + new + case.answer[m.end():])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="squad,python-reference,numpy-api,handbook")
    parser.add_argument("--per-corpus", type=int, default=PER_CORPUS)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    from bench._judge_readings import Reader
    from services.judging._opposites import OPPOSITES
    from services.judging.judge import SUPPORTED, decide
    from services.judging.model import shipped_model
    from services.settings import get_settings

    model = shipped_model()
    reader = Reader(get_settings().embedding_model)
    word_support = _word_support()

    def judged(case: JudgeCase) -> tuple[float, bool]:
        read = reader.read(case)
        if read.abstains:
            return 0.0, False
        p, label = decide(read.features, adds_nothing=read.adds_nothing, model=model, reply_agrees=read.reply_agrees)
        return p, label == SUPPORTED

    out: dict[str, dict[str, object]] = {}
    missed = []
    for corpus in args.corpora.split(","):
        rng = random.Random(f"{args.seed}/{corpus}")
        rights = [c for c in build_cases([corpus], args.per_corpus, 0) if c.split == "test" and c.kind == "right_sentence"]
        pairs = [(right, wrong) for right in rights if (wrong := turned(right, rng)) is not None]
        log(f"{corpus}: {len(pairs)} of {len(rights)} right sentences turned")
        out[corpus] = {}
        groups = {"all": pairs,
                  "in_lexicon": [p for p in pairs if p[1].value in OPPOSITES],
                  "not_in_lexicon": [p for p in pairs if p[1].value not in OPPOSITES]}
        for group, chosen in groups.items():
            cases = [c for pair in chosen for c in pair]
            if not cases:
                continue
            labels = [c.label for c in cases]
            scores = [judged(c) for c in cases]
            out[corpus][group] = {
                "n_turned": len(chosen),
                "auroc": {"judge": _rounded(auroc(labels, [p for p, _ in scores])),
                          "word_support": _rounded(auroc(labels, [word_support(c) for c in cases])),
                          "length": _rounded(auroc(labels, [float(len(c.answer)) for c in cases]))},
                "auto_accepted": sum(1 for c, (_, accepted) in zip(cases, scores, strict=True) if accepted and not c.label),
            }
            if group == "all":
                right_ps = sorted(p for c, (p, _) in zip(cases, scores, strict=True) if c.label)
                median_right = right_ps[len(right_ps) // 2]
                missed += [{"corpus": corpus, "p": round(p, 3), "turn": c.note, "answer": c.answer[:160]}
                           for c, (p, _) in zip(cases, scores, strict=True) if not c.label and p >= median_right]
    emit({"by_corpus": out, "missed": missed, "seed": args.seed, "model": model.version,
          "machine": machine(), "date": today()})


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


if __name__ == "__main__":
    main()
