"""Judge benchmark: how well scores tell right answers from wrong ones when other systems wrote
them (bench/judge_set.py's development set), per corpus and per kind of answer, for the answer
judge and three baselines side by side.

    python bench/judge.py [--corpora squad,python-reference,numpy-api,handbook] [--per-corpus 300]
                          [--seed 0] [--split test|train|all] [--scorers judge,legacy,word_support,length]
                          [--golds audited|evidence] [--distractors audited|drawn]
                          [--resamples 1000] [--dump cases.jsonl] [--against before.jsonl]

Scorers (higher = more likely right): judge (services.judging.judge_answer's P(supported));
legacy (the offline backend's reflection and grade as they were before services/judging/, at
LEGACY_REV, run from that revision's tree in a process of its own; blended as the pipeline
blends them, retrieval left out); word_support (share of the answer's content words found in the contexts);
length (characters: the development set is built so that it separates nothing, AUROC ~0.5).
A kind's AUROC compares its wrong answers with the right answers of the same form on the same
questions (judge_set.COMPARISONS); "cross_form" adds the issue's first pairing (right concise
against a restatement with a fabricated value), which length alone separates. --dump writes every built case (both splits) as JSONL, with
the scores of those that were scored.

Each AUROC of the judge comes with its 95% interval ("auroc_interval"): a percentile bootstrap
over whole questions (a question's answers share its passage and wording, so they move together;
resampling single answers would draw the interval too narrow). A corpus's kind rests on 40-150
wrong answers, so a cell moves by a few points with the draw; the interval says how many.
--against reads the --dump of another run (another commit's judge, the same set) and gives, per
corpus and kind, the judge's gain over it ("against": [gain, low, high]): both read on the same
resampled questions, which tells a change of 0.01 from the draw.

Last stdout line: {"by_corpus": {corpus: {"n", "auroc": {scorer: {"pooled", "by_kind"}}, "auroc_interval",
"against", "judge_auto_accept"}},
"pooled": {...}, "targets": {...}, ...}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import emit, log, machine, rounded, today  # noqa: E402
from bench._judge_sources import DISTRACTORS, GOLDS  # noqa: E402
from bench.judge_set import COMPARISONS, KINDS, PER_CORPUS, SEED, JudgeCase, build_cases  # noqa: E402

Scorer = Callable[[JudgeCase], float]
SCORERS = ("judge", "legacy", "word_support", "length")
# Across forms, as the issue first measured it: a right concise answer against the question
# restated with a fabricated value, or with a name of the same passage, on the same questions.
# Length alone separates these (the restatement is longer), so they are reported beside the
# per-kind figures, never as targets.
CROSS_FORM = {"fabricated_restated_vs_right_concise": ("fabricated_restated", "right_concise"),
              "same_passage_restated_vs_right_concise": ("same_passage_restated", "right_concise")}
# Resamples of the judge's 95% intervals: at 1,000 their ends moved by up to 0.02 between five seeds
# (numpy-api's test half, 2026-12-07: the pooled figure's by 0.003, a kind of 43 wrong answers' by 0.02).
INTERVAL_RESAMPLES = 1000
# The targets, on every corpus: AUROC floors (pooled and per kind), the length-only
# baseline's band, and the precision of what the judge auto-accepts.
TARGETS = {"pooled": 0.92, "fabricated_restated": 0.95, "fabricated_concise": 0.95, "changed_number": 0.95,
           "wrong_option": 0.80, "same_passage_name": 0.80, "same_passage_restated": 0.80, "reversed": 0.75,
           "length": (0.45, 0.55),
           "auto_accept_precision": 0.97}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="squad,python-reference,numpy-api,handbook")
    parser.add_argument("--per-corpus", type=int, default=PER_CORPUS, help="questions drawn per corpus (both splits)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--split", choices=("test", "train", "all"), default="test")
    parser.add_argument("--golds", choices=GOLDS, default="audited",
                        help="right answers: the audited answers (bench/data/gold-audit.jsonl) or the sets' spans as written")
    parser.add_argument("--distractors", choices=DISTRACTORS, default="audited",
                        help="same-passage wrong answers: those the audit found wrong (bench/data/distractor-audit.jsonl) or every draw")
    parser.add_argument("--scorers", default=",".join(SCORERS), help="comma-separated; empty scores nothing")
    parser.add_argument("--legacy-rev", default=LEGACY_REV,
                        help="the revision whose offline backend is the legacy scorer ('current': this tree's)")
    parser.add_argument("--resamples", type=int, default=INTERVAL_RESAMPLES,
                        help="bootstrap resamples of questions for the judge's intervals (0: none)")
    parser.add_argument("--dump", type=Path, default=None, help="write the built cases as JSONL")
    parser.add_argument("--against", type=Path, default=None,
                        help="a --dump of another run: the judge's gain over its judge, with its paired interval")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()

    corpora = args.corpora.split(",")
    log(f"building the development set: {', '.join(corpora)}, {args.per_corpus} questions each, seed {args.seed}")
    built = build_cases(corpora, args.per_corpus, args.seed, args.golds, args.distractors)
    cases = [c for c in built if args.split == "all" or c.split == args.split]
    log(f"{len(built)} cases built, {len(cases)} in the {args.split} split")

    requested = [s for s in args.scorers.split(",") if s]
    unknown = sorted(set(requested) - set(SCORERS))
    if unknown:
        raise SystemExit(f"unknown scorer(s) {', '.join(unknown)}; choose from {', '.join(SCORERS)}")
    scorers, unavailable, accepts = make_scorers(requested)
    before = judged_before(args.against, cases) if args.against is not None else None
    scores: dict[str, list[float]] = {}
    accepted: list[bool] = []
    if "legacy" in requested:
        began = time.perf_counter()
        log(f"legacy: the offline backend of {args.legacy_rev[:12]} on {len(cases)} cases")
        try:
            scores["legacy"] = legacy_scores(cases, args.legacy_rev)
            log(f"  legacy: {(time.perf_counter() - began) / max(1, len(cases)) * 1000:.1f} ms a case")
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            unavailable["legacy"] = str(exc)
    for name, scorer in scorers.items():
        began = time.perf_counter()
        values = []
        for i, case in enumerate(cases, 1):
            values.append(float(scorer(case)))
            if i % 250 == 0 or i == len(cases):
                log(f"  {name}: {i}/{len(cases)} ({(time.perf_counter() - began) / i * 1000:.1f} ms a case)")
        scores[name] = values
        if name == "judge" and accepts is not None:
            accepted = [accepts(case) for case in cases]

    result: dict[str, Any] = {"split": args.split, "golds": args.golds, "distractors": args.distractors, "corpora": corpora,
                              "per_corpus": args.per_corpus, "seed": args.seed, "scorers": list(scores),
                              "legacy_rev": args.legacy_rev if "legacy" in scores else None}
    for name, reason in unavailable.items():
        result[name] = f"unavailable: {reason}"
        log(f"{name} scorer unavailable: {reason}")
    by_corpus = {}
    for corpus in corpora:
        picked = [i for i, c in enumerate(cases) if c.corpus == corpus]
        by_corpus[corpus] = summarize([cases[i] for i in picked], {n: [v[i] for i in picked] for n, v in scores.items()},
                                      [accepted[i] for i in picked] if accepted else None, args.resamples,
                                      [before[i] for i in picked] if before is not None else None)
    result["by_corpus"] = by_corpus
    result["pooled"] = summarize(cases, scores, accepted or None, args.resamples, before)
    if args.against is not None:
        result["against"] = str(args.against)
    result["targets"] = {"thresholds": {k: list(v) if isinstance(v, tuple) else v for k, v in TARGETS.items()},
                         "scorer": "judge",
                         "met": {name: targets_met(summary) for name, summary in [*by_corpus.items(), ("pooled", result["pooled"])]}}
    result = print_rounded(result)
    for corpus, summary in [*result["by_corpus"].items(), ("pooled", result["pooled"])]:
        span = summary.get("auroc_interval", {}).get("judge", {}).get("pooled")
        gain = summary.get("against", {}).get("pooled")
        log(f"{corpus}: " + "; ".join(f"{n} {a['pooled']}" + (f" [{span[0]}, {span[1]}]" if n == "judge" and span else "")
                                      for n, a in summary["auroc"].items())
            + (f"; judge's gain {gain[0]:+.3f} [{gain[1]:+.3f}, {gain[2]:+.3f}]" if gain else ""))
    if args.dump is not None:
        dump(args.dump, built, cases, scores)
        log(f"wrote {len(built)} cases to {args.dump}")
    result.update({"machine": machine(), "date": today(), "wall_s": round(time.perf_counter() - started, 1)})
    emit(result)


# --- scorers ------------------------------------------------------------------------------------

def make_scorers(names: list[str]) -> tuple[dict[str, Scorer], dict[str, str], Callable[[JudgeCase], bool] | None]:
    """The scorers asked for that can run here, why the others cannot, and the judge's
    auto-accept decision (None without the judge)."""
    scorers: dict[str, Scorer] = {}
    unavailable: dict[str, str] = {}
    accepts = None
    for name in names:
        if name == "judge":
            try:
                scorer, accepts = _judge()
            except ImportError as exc:  # being written: the baselines still run
                unavailable[name] = f"{type(exc).__name__}: {exc}"
                continue
            scorers[name] = scorer
        elif name == "legacy":
            continue  # scored in one batch by legacy_scores
        elif name == "word_support":
            scorers[name] = _word_support()
        else:
            scorers[name] = lambda case: float(len(case.answer))
    return scorers, unavailable, accepts


def _judge() -> tuple[Scorer, Callable[[JudgeCase], bool]]:
    """The shipped judge's P(supported) and auto-accept, decided as services.judging.judge_answer
    decides, from each case's signals (read once per version of the judge's code, with the
    packaged embedding model: bench/_judge_readings.py)."""
    from bench._judge_readings import Reader
    from services.judging.judge import SUPPORTED, decide
    from services.judging.model import shipped_model
    from services.settings import get_settings

    model = shipped_model()
    reader = Reader(get_settings().embedding_model)

    def decided(case: JudgeCase) -> tuple[float, bool]:
        read = reader.read(case)
        if read.abstains or not any(c.strip() for c in case.contexts):
            return 0.0, False  # judge_answer: abstained, or nothing to check it against
        p, label = decide(read.features, adds_nothing=read.adds_nothing, model=model, reply_agrees=read.reply_agrees)
        return p, label == SUPPORTED

    return (lambda case: decided(case)[0]), (lambda case: decided(case)[1])


# The offline judge as it stood before services/judging/ replaced it (the 0.17): its
# reflect() and grade() are run from this commit's tree, so the baseline stays what it was.
LEGACY_REV = "0acb09e55d9f0eda8adac41b43cc114d92568edc"
# Run inside the extracted tree: score each case of a JSONL file with the offline backend's
# reflect() and grade(), blended as the pipeline blends them with retrieval left out.
_LEGACY_WORKER = r"""
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
from services.domain import Hit
from services.settings import get_settings
for module in ("services.answering.offline", "services.answering.llm.offline"):
    try:
        importlib.import_module(module)  # registers "offline"
        break
    except ModuleNotFoundError:
        continue
from services.answering.llm.base import create_backend
try:
    from services.scoring.blend import BLEND_WEIGHTS
except ImportError:
    from services.answering.decisions import BLEND_WEIGHTS
backend = create_backend("offline", embedding_model=get_settings().embedding_model)
wr, wg = BLEND_WEIGHTS["reflection"], BLEND_WEIGHTS["grade"]
with open(sys.argv[2], encoding="utf-8") as cases, open(sys.argv[3], "w", encoding="utf-8") as out:
    for n, line in enumerate(cases, 1):
        case = json.loads(line)
        hits = [Hit(chunk_id=-(i + 1), document_id=0, external_id=f"context-{i + 1}", title="", text=text,
                    rank=i + 1, fused_score=0.0) for i, text in enumerate(case["contexts"])]
        reflection = backend.reflect(case["question"], case["answer"], hits)
        grade = backend.grade(case["question"], case["answer"])
        backend.log.drain()
        out.write(json.dumps((wr * reflection.reflection_score + wg * (grade.score - 1) / 4) / (wr + wg)) + "\n")
        if n % 250 == 0:
            print(f"  legacy: {n} cases", file=sys.stderr, flush=True)
"""


def legacy_scores(cases: list[JudgeCase], rev: str) -> list[float]:
    """The legacy judge's score for each case: the offline backend of `rev` ("current": this
    tree's), run in a process of its own on that revision's services/ (git archive)."""
    import tempfile

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="judge-legacy-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        if rev == "current":
            (tree / "services").symlink_to(root / "services")
        else:
            archive = subprocess.run(["git", "-C", str(root), "archive", rev, "services"], capture_output=True, check=False)
            if archive.returncode != 0:
                raise RuntimeError(f"git archive {rev} failed: {archive.stderr.decode(errors='replace').strip()}")
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        inputs, outputs = Path(tmp) / "cases.jsonl", Path(tmp) / "scores.jsonl"
        with inputs.open("w", encoding="utf-8") as handle:
            for case in cases:
                handle.write(json.dumps({"question": case.question, "answer": case.answer, "contexts": case.contexts}) + "\n")
        from services.settings import get_settings

        env = {**os.environ, "HF_HUB_OFFLINE": "1", "EMBEDDING_MODEL": get_settings().embedding_model}
        subprocess.run([sys.executable, "-c", _LEGACY_WORKER, str(tree), str(inputs), str(outputs)],
                       cwd=tree, env=env, check=True)
        with outputs.open(encoding="utf-8") as handle:
            return [float(json.loads(line)) for line in handle]


def _word_support() -> Scorer:
    """Share of the answer's distinct content words (stemmed, stopwords out) the contexts hold."""
    from services.retrieval.text import tokenize

    context_words: dict[tuple[str, ...], set[str]] = {}

    def score(case: JudgeCase) -> float:
        words = set(tokenize(case.answer))
        if not words:
            return 0.0
        key = tuple(case.contexts)
        if key not in context_words:
            context_words[key] = {w for text in case.contexts for w in tokenize(text)}
        return len(words & context_words[key]) / len(words)

    return score


# --- figures ----------------------------------------------------------------------------------

def auroc(labels: list[int], values: list[float]) -> float | None:
    from sklearn.metrics import roc_auc_score

    # Unrounded until printed (print_rounded): 0.7996 prints as 0.800 and is under 0.80.
    return float(roc_auc_score(labels, values)) if len(set(labels)) == 2 else None


def auroc_interval(labels: list[int], values: list[float], questions: list[Any],
                   resamples: int = INTERVAL_RESAMPLES, seed: int = 0) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the AUROC, resampling whole questions (`questions`
    names each answer's); None without both labels or resamples."""
    import numpy as np

    drawn = _bootstrap(labels, [values], questions, resamples, seed)
    return None if drawn is None else [float(np.percentile(drawn[0], 2.5)), float(np.percentile(drawn[0], 97.5))]


def difference_interval(labels: list[int], before: list[float], after: list[float], questions: list[Any],
                        resamples: int = INTERVAL_RESAMPLES, seed: int = 0) -> list[float] | None:
    """[after's AUROC - before's, and its 95% interval]: both scorers read on the same resampled
    questions (a paired bootstrap), so what the draw moves in both cancels and a change of 0.01
    can be told from the draw where each figure's own interval is 0.05 wide."""
    import numpy as np

    drawn = _bootstrap(labels, [before, after], questions, resamples, seed)
    if drawn is None:
        return None
    gained = drawn[1] - drawn[0]
    measured = auroc(labels, after) - auroc(labels, before)  # type: ignore[operator]  # both labels: drawn
    return [measured, float(np.percentile(gained, 2.5)), float(np.percentile(gained, 97.5))]


def _bootstrap(labels: list[int], columns: list[list[float]], questions: list[Any], resamples: int,
               seed: int) -> Any:
    """Each column's AUROC on `resamples` draws of whole questions (an array: column x draw), the
    same draws for every column; None without both labels or resamples."""
    import numpy as np
    from scipy.stats import rankdata

    if resamples < 1 or len(set(labels)) < 2:
        return None
    by_question: dict[Any, list[int]] = {}
    for i, q in enumerate(questions):
        by_question.setdefault(q, []).append(i)
    groups = list(by_question.values())
    y, v = np.asarray(labels), np.asarray(columns, dtype=float)
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(resamples):
        picked = np.concatenate([groups[g] for g in rng.integers(len(groups), size=len(groups))])
        right = y[picked] == 1
        n_right = int(right.sum())
        n_wrong = len(picked) - n_right
        if n_right and n_wrong:  # Mann-Whitney: ties count a half, as roc_auc_score counts them
            ranks = [rankdata(column[picked]) for column in v]
            found.append([(r[right].sum() - n_right * (n_right + 1) / 2) / (n_right * n_wrong) for r in ranks])
    return np.asarray(found).T if found else None


def print_rounded(value: Any) -> Any:
    """`value` with every float in it rounded as printed (3 decimals), once the targets are read."""
    if isinstance(value, float):
        return rounded(value)
    if isinstance(value, dict):
        return {k: print_rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [print_rounded(v) for v in value]
    return value


def kind_pairs(cases: list[JudgeCase], comparisons: dict[str, str] = COMPARISONS) -> dict[str, list[int]]:
    """For each wrong kind present: the indexes of its cases and of the right answers of the
    kind it is compared with, on the questions that have it."""
    asked: dict[str, set[tuple[str, str]]] = {}
    for case in cases:
        if case.kind in comparisons:
            asked.setdefault(case.kind, set()).add((case.corpus, case.question_id))
    return {kind: [i for i, c in enumerate(cases)
                   if (c.kind == kind or c.kind == comparisons[kind]) and (c.corpus, c.question_id) in questions]
            for kind, questions in sorted(asked.items())}


def summarize(cases: list[JudgeCase], scores: dict[str, list[float]], accepted: list[bool] | None,
              resamples: int = 0, before: list[float] | None = None) -> dict[str, Any]:
    """`before`: another judge's scores of the same cases, which the judge's gain is read against."""
    labels = [c.label for c in cases]
    questions = [(c.corpus, c.question_id) for c in cases]
    pairs = kind_pairs(cases)
    crossed = {name: kind_pairs(cases, {wrong: right}).get(wrong, []) for name, (wrong, right) in CROSS_FORM.items()}
    summary: dict[str, Any] = {
        "n": {"cases": len(cases), "right": sum(labels), "wrong": len(labels) - sum(labels)},
        "n_by_kind": {k: sum(1 for c in cases if c.kind == k) for k in KINDS},
        "auroc": {name: {"pooled": auroc(labels, values),
                         "by_kind": {kind: auroc([labels[i] for i in idx], [values[i] for i in idx])
                                     for kind, idx in pairs.items()},
                         "cross_form": {name: auroc([labels[i] for i in idx], [values[i] for i in idx])
                                        for name, idx in crossed.items() if idx}}
                  for name, values in scores.items()},
    }
    if "judge" in scores and resamples:
        judged = scores["judge"]

        def interval(idx: list[int]) -> list[float] | None:
            return auroc_interval([labels[i] for i in idx], [judged[i] for i in idx], [questions[i] for i in idx], resamples)

        summary["auroc_interval"] = {"judge": {"pooled": interval(list(range(len(cases)))),
                                               "by_kind": {kind: interval(idx) for kind, idx in pairs.items()}}}
    if "judge" in scores and before is not None and resamples:
        after = scores["judge"]

        def gain(idx: list[int]) -> list[float] | None:
            return difference_interval([labels[i] for i in idx], [before[i] for i in idx], [after[i] for i in idx],
                                       [questions[i] for i in idx], resamples)

        summary["against"] = {"pooled": gain(list(range(len(cases)))),
                              "by_kind": {kind: gain(idx) for kind, idx in pairs.items()}}
    if accepted is not None:
        taken = [c for c, a in zip(cases, accepted) if a]
        right, taken_right = sum(labels), sum(c.label for c in taken)
        summary["judge_auto_accept"] = {
            "n": len(taken),
            "right": taken_right,
            "precision": rounded(taken_right / len(taken)) if taken else None,
            "share_of_right": rounded(taken_right / right) if right else None,
            "share_of_wrong_by_kind": {
                kind: rounded(sum(1 for c, a in zip(cases, accepted) if a and c.kind == kind) / n)
                for kind in KINDS if KINDS[kind][0] == 0 and (n := sum(1 for c in cases if c.kind == kind))},
        }
    return summary


def targets_met(summary: dict[str, Any]) -> dict[str, bool | None]:
    """Each target, met or not (None when its figure is missing: the judge did not run)."""
    judge = summary["auroc"].get("judge")
    met: dict[str, bool | None] = {}
    for target, floor in TARGETS.items():
        if target == "length":
            value = summary["auroc"].get("length", {}).get("pooled")
            met[target] = None if value is None else floor[0] <= value <= floor[1]  # type: ignore[index]
        elif target == "auto_accept_precision":
            accepted = summary.get("judge_auto_accept", {})
            # Unrounded: 64 right of 66 (0.9697) prints as 0.970 and is under 0.97.
            met[target] = None if not accepted.get("n") else accepted["right"] / accepted["n"] >= floor  # type: ignore[operator]
        else:
            value = None if judge is None else judge["pooled"] if target == "pooled" else judge["by_kind"].get(target)
            met[target] = None if value is None else value >= floor  # type: ignore[operator]
    return met


def judged_before(path: Path, cases: list[JudgeCase]) -> list[float]:
    """The judge's scores of `cases` in a --dump of another run; it must have scored every one."""
    known = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "judge" in row.get("scores", {}):
            known[_case_id(row)] = row["scores"]["judge"]
    scores = [known.get(_case_id(dataclasses.asdict(c))) for c in cases]
    missing = scores.count(None)
    if missing:
        raise SystemExit(f"{path} has no judge score for {missing} of the {len(cases)} cases: dump a run of "
                         "the same corpora, seed, questions a corpus and split")
    return [s for s in scores if s is not None]


def _case_id(row: dict[str, Any]) -> tuple[str, ...]:
    return row["corpus"], row["question_id"], row["kind"], row["answer"]


def dump(path: Path, built: list[JudgeCase], scored: list[JudgeCase], scores: dict[str, list[float]]) -> None:
    """Every built case as a JSON line, with its scores when it was scored."""
    position = {id(c): i for i, c in enumerate(scored)}
    with path.open("w", encoding="utf-8") as handle:
        for case in built:
            row = dataclasses.asdict(case)
            if id(case) in position:
                row["scores"] = {name: values[position[id(case)]] for name, values in scores.items()}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
