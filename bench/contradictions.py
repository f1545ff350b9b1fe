"""Contradiction rules of the offline judge: where each kind holds, on SQuAD 2.0 and on the handbook.

    python bench/contradictions.py [--per-class 500] [--seed 13]

For every rule kind of services/judging/_contradiction.py, each read on its own:
- SQuAD 2.0: how many first answers (balanced preset, iteration 1) it flags among the
  answerable and among the unanswerable questions, on bench/pipeline.py's sample (same seed,
  same size, same questions);
- the handbook (services/demo_data): how many right answers it flags. A right answer is a
  demo question's first answer when the question is answerable and the answer cites one of
  its relevant documents (qrels), or a probe's answer below: a sentence of the handbook that
  answers a question asked the other way round, as its users ask them.

Last stdout line: {"by_kind": {kind: {"squad_answerable", "squad_unanswerable", "demo_right",
"holds"}}, ...}; progress on stderr. The counts go into _contradiction.RULES.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import SQUAD_DIR, emit, log, machine, phase, prepare_store, shutdown_store, squad_sample, today  # noqa: E402

DEMO_DIR = Path(__file__).resolve().parent.parent / "services" / "demo_data"

# (question, a sentence of the handbook that answers it, that sentence's document). Written
# for this bench: the first is the case issue 19 reports; the others ask about a limit,
# a direction or an exception the way a handbook's reader does, and several are asked the
# way the handbook puts them, so a rule that flags them reads wording, not meaning.
PROBES = (
    ("How do I make collision detection less sensitive?",
     "Lower $SENS = lower threshold = more sensitive.", "collision-sensitivity-tuning.md"),
    ("Does a higher $SENS value make collision detection less sensitive?",
     "A lower $SENS value means a lower threshold, i.e. more sensitive detection.", "srvo-045-collision-detected.md"),
    ("Can I increase the CALL nesting depth beyond 16 levels?",
     "Only if flattening is not possible, increase $INTP_CFG.$MAX_CALL_DEPTH (up to 32) and perform a cold start.",
     "intp-220-call-nesting-too-deep.md"),
    ("How do I replace the pulsecoder battery pack without losing mastering data?",
     "This procedure replaces the pack without losing mastering data.", "pulsecoder-battery-replacement.md"),
    ("Can the robot run in AUTO without the teach pendant connected?",
     "Yes, with the bypass plug KR-P-0510 fitted in the pendant connector.", "faq.md"),
    ("Does a COMM-118 alarm stop the robot?",
     "A COMM-118 alarm never stops the robot, and production continues normally.", "comm-118-klink-host-disconnected.md"),
    ("Is re-mastering required after a firmware update?",
     "Programs, registers and mastering data are kept; re-mastering is not required.", "firmware-update-notes.md"),
    ("When is Quick Master not valid?",
     "Quick Master is not valid after a motor or reducer change, because the reference belongs to the old parts.",
     "mastering-multi-axis-fixture.md"),
    ("Is an RPI below 8 ms safe with firmware 5.4.0?",
     "Firmware 5.4.0 had false timeouts below 8 ms; use 5.4.1 or later.", "ethernet-ip-fieldbus-setup.md"),
    ("How long after the first SRVO-063 are the encoders still backed up?",
     "Kestrel guarantees at least 7 days of power-off backup after the first SRVO-063.",
     "srvo-063-pulsecoder-battery-low.md"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=500, help="answerable and unanswerable questions each")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir, created, settings = prepare_store(args.data_dir)
    from services.answering.llm.backends import backend_for
    from services.corpus.ingest import ingest_paths

    timings: dict[str, float] = {}
    try:
        with phase("ingest SQuAD and the handbook (real model)", timings):
            ingest_paths([SQUAD_DIR / "corpus.jsonl"], collection="squad")
            ingest_paths(sorted((DEMO_DIR / "corpus").glob("*.md")), collection="demo")
        backend = backend_for(settings)
        squad: dict[str, Counter[str]] = {"answerable": Counter(), "unanswerable": Counter()}
        with phase(f"SQuAD: {2 * args.per_class} first answers", timings):
            answerable, unanswerable = squad_sample(args.per_class, seed=args.seed)  # bench/pipeline.py's sample
            sample = {"answerable": answerable, "unanswerable": unanswerable}
            for label, group in sample.items():
                for i, question in enumerate(group, 1):
                    kinds, _ = first_answer_kinds(question["text"], "squad", backend, settings)
                    squad[label].update(kinds)
                    if i % 100 == 0:
                        log(f"  {label}: {i}/{len(group)}")
        with phase("handbook: demo questions and probes", timings):
            demo, flagged, right_reflections = demo_flags(backend, settings)
        by_kind = {}
        from services.judging._contradiction import RULES, Evidence

        for kind in RULES:
            evidence = Evidence(squad["answerable"][kind], squad["unanswerable"][kind], demo[kind])
            by_kind[kind] = {"squad_answerable": evidence.squad_answerable,
                             "squad_unanswerable": evidence.squad_unanswerable,
                             "demo_right": evidence.demo_right, "holds": evidence.holds}
        emit({
            "by_kind": by_kind,
            "handbook_flags": flagged,
            # What a soft penalty has to leave above the review threshold.
            "right_reflection": {"n": len(right_reflections),
                                 "median": round(statistics.median(right_reflections), 4),
                                 "min": round(min(right_reflections), 4)} if right_reflections else {},
            "questions_per_class": args.per_class, "seed": args.seed, "backend": backend.label,
            "timings_s": timings, "machine": machine(), "date": today(),
        })
    finally:
        shutdown_store(settings, data_dir, remove=created)


def first_answer_kinds(query: str, collection: str, backend, settings):  # type: ignore[no-untyped-def]
    """The rule kinds flagging the balanced preset's first answer, and that iteration."""
    from services.answering import pipeline
    from services.answering.presets import get_preset

    config = get_preset("balanced", enable_adaptive_refinement=False)  # iteration 1 only
    run = pipeline.run(query, "balanced", backend=backend, collection=collection, source="bench",
                       settings=settings, config=config)
    iteration = run.iterations[0]
    return kinds_of(query, iteration.answer), iteration


def kinds_of(query: str, answer: str) -> list[str]:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradictions
    from services.judging._sentences import answer_sentences

    return [c.kind for c in contradictions(query, lex.query_terms(query), answer_sentences(answer))]


def demo_flags(backend, settings):  # type: ignore[no-untyped-def]
    """Flags per kind on the handbook's right answers, which answers they were, and the
    reflection of the right first answers."""
    relevant: dict[str, set[str]] = {}
    for line in (DEMO_DIR / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query_id, document, _score = line.split("\t")
        relevant.setdefault(query_id, set()).add(document)
    counts: Counter[str] = Counter()
    flagged: dict[str, list[str]] = {}
    reflections: list[float] = []
    for line in (DEMO_DIR / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        if not question["metadata"]["answerable"]:
            continue
        kinds, iteration = first_answer_kinds(question["text"], "demo", backend, settings)
        cited = {c.external_id for c in iteration.citations}
        if not cited & relevant[question["_id"]]:
            log(f"  {question['_id']}: first answer cites none of its relevant documents; not a right answer")
            continue
        counts.update(kinds)
        if kinds:
            flagged[question["_id"]] = kinds
        elif iteration.reflection:  # unflagged: no contradiction rule moved its score
            reflections.append(iteration.reflection.reflection_score)
    for index, (query, answer, _document) in enumerate(PROBES, 1):
        kinds = kinds_of(query, answer)
        counts.update(kinds)
        if kinds:
            flagged[f"probe{index}"] = kinds
    return counts, flagged, reflections


if __name__ == "__main__":
    main()
