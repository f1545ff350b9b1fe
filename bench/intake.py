"""Intake assessment against its bound: queued records assessed with the judges on, and in the
same run the bare embedding model encoding exactly those records' texts.

    python bench/intake.py [--runs 400] [--shapes short,five] [--batch 128] [--torch-threads 1]
                           [--profile DIR] [--data-dir DIR]

Records are built from SQuAD 2.0 half-dev (../shared/data/squad2-halfdev; its text is read,
never committed): an answerable question, its gold answer (every other record the whole
sentence holding it, as a long restatement would), and
- `short`: one context, the gold paragraph's sentence that holds the answer;
- `five`: five contexts of about 100 words: a window of the gold paragraph around the
  answer and four paragraphs of the same article.
No context carries a dense similarity, so the assessment embeds every context, the question
and (for the judges) the answer: the records that cost the most to assess.

Per shape, in one process and one store: the records are queued (accept_records, as POST
/runs stores them), drained by process_queue with the judges on, at most `--batch` records a
batch (services.intake.assess: fewer when they carry many contexts),
timed from the first claim to the queue being empty; the bare model (sentence-transformers'
`SentenceTransformer.encode`, one call, batch 64) encodes the records' distinct questions,
answers and contexts just before and just after, and the bound is the mean of the two. The judge's
sentence cache is emptied before each shape, so nothing is encoded ahead of the clock. `ratio` is
assessment runs/s over the bound's runs/s; the target is 0.7. The product's own encoder (services.
retrieval.embedding.encode: the model run directly on token-sorted slices) encodes the same texts
beside it, before and after: `ratio_vs_direct_pass` is the assessment over that rate, what the
judges, the reader and the store cost beyond the encoding the assessment itself uses. Both figures come with the
1-minute load average read beside them: on a shared machine only the ratio is comparable
between runs.

Where the time goes: `cpu_ms_per_run` splits the drain's CPU time by the function spending it
(PARTS: the model, the judges, the reader of the question, scoring and CRAG, the store's
reads, writes and claims, and "other"), each part's time without the parts inside it;
`encode_calls` counts the model's calls. `ratio_cpu_model_only` is the bound over the model
alone encoding, in one call, every text the assessment encoded: the most the CPU ratio could be
were everything else free.
The bound encodes all `--runs` records in one call, and a call costs less a text the more texts
it holds: an assessment in batches smaller than `--runs` pays that difference too.
`--torch-threads 1` makes the CPU figures hold on a loaded machine (two threads spin while
waiting on each other when one is descheduled, which counts as CPU time).

Last stdout line: {"shapes": {shape: {...}}, ...}; each shape's line is printed as it ends.
`--profile DIR` writes a cProfile of each shape's assessment to DIR/intake-<shape>.prof.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (  # noqa: E402
    describe,
    emit,
    log,
    machine,
    phase,
    prepare_store,
    rounded,
    shutdown_store,
    squad_paragraphs,
    squad_questions,
    today,
)

SHAPES = ("short", "five")
CONTEXT_WORDS = 100
TARGET_RATIO = 0.7
WARMUP_RECORDS = 8
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")

def _sentence_with(text: str, answer: str) -> str:
    for sentence in _SENTENCE_END.split(text):
        if answer in sentence:
            return sentence.strip()
    return text[:300]


def _window(text: str, around: str, words: int) -> str:
    """About `words` words of `text`, holding `around` when it occurs."""
    tokens = text.split()
    at = text.find(around)
    centre = len(text[:at].split()) if at >= 0 else 0
    start = max(0, min(centre - words // 2, len(tokens) - words))
    return " ".join(tokens[start:start + words])


def build_records(n: int, shape: str, *, seed: int, offset: int = 0) -> list[dict[str, Any]]:
    """`n` record payloads of `shape` (trace ids bench-intake-<shape>-<offset + i>)."""
    paragraphs = squad_paragraphs()
    by_id = {p["_id"]: p for p in paragraphs}
    by_title: dict[str, list[dict[str, Any]]] = {}
    for p in paragraphs:
        by_title.setdefault(p["title"], []).append(p)
    questions = [q for q in squad_questions() if not q["metadata"]["is_impossible"] and q["metadata"]["gold_doc"] in by_id]
    rng = random.Random(seed)
    chosen = rng.sample(questions, n + offset)[offset:]
    records = []
    for i, q in enumerate(chosen):
        gold = by_id[q["metadata"]["gold_doc"]]
        answer = q["metadata"]["answers"][0]
        sentence = _sentence_with(gold["text"], answer)
        if shape == "short":
            contexts = [{"text": sentence, "document_id": gold["_id"], "rank": 1}]
        else:
            others = [p for p in by_title[gold["title"]] if p["_id"] != gold["_id"]]
            picked = rng.sample(others, min(4, len(others)))
            contexts = [{"text": _window(gold["text"], answer, CONTEXT_WORDS), "document_id": gold["_id"], "rank": 1}]
            contexts += [{"text": _window(p["text"], "", CONTEXT_WORDS), "document_id": p["_id"], "rank": r}
                         for r, p in enumerate(picked, start=2)]
        records.append({"question": q["text"], "answer": answer if i % 2 == 0 else sentence,
                        "trace_id": f"bench-intake-{shape}-{offset + i}", "contexts": contexts,
                        "metadata": {"app": "bench-intake"}})
    return records


def texts_of(records: list[dict[str, Any]]) -> list[str]:
    """What the bare model encodes for the bound: every distinct question, answer and context.
    Distinct: the assessment encodes a text once whatever number of records carry it (the
    judge's sentence cache), and records drawn from one article share passages, so a bound
    counting repeats would flatter the ratio."""
    return list(dict.fromkeys(t for r in records for t in (r["question"], r["answer"], *(c["text"] for c in r["contexts"]))))


def _queue(records: list[dict[str, Any]], settings: Any) -> None:
    from services.intake.intake import accept_records
    from services.intake.schema import ExternalRun
    from services.store import transaction

    with transaction(settings) as session:
        accept_records([ExternalRun.model_validate(r) for r in records], source="api", session=session)


def _encode_seconds(texts: list[str], settings: Any, *, stock: bool = False) -> tuple[float, float]:
    """Wall and CPU seconds (this process's, both torch threads) of encoding `texts` in one call:
    `stock`, by sentence-transformers' own encode at batch 64 (the bare model as anyone calls it);
    else by the product's encoder (services.retrieval.embedding.encode, the direct token-sorted pass)."""
    from services.retrieval.embedding import encode, load_model

    started, cpu = time.perf_counter(), time.process_time()
    if stock:
        load_model(settings.embedding_model).encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    else:
        encode(settings.embedding_model, texts)
    return time.perf_counter() - started, time.process_time() - cpu


# Where the assessment's CPU time goes, by the function that spends it (module, attribute,
# part). A part's time excludes the parts called inside it (the model inside a judge is the
# model's), so the parts add up to the drain's CPU time, "other" (commits, the loop, building
# the runs) being the rest.
# The judge's two calls of the model: texts read alone, and contexts read with their sentences' tokens.
MODEL_CALLS = ("encode", "encode_tokens")
PARTS = (
    ("services.judging.vectors", "encode", "model"),
    ("services.judging.vectors", "encode_tokens", "model"),
    ("services.intake.batch", "_prepare", "db_read"),  # known documents and BM25 statistics
    ("services.intake.batch", "stage_hits", "scoring_crag"),
    ("services.intake.batch", "record_judges", "judges"),  # what the judges will embed, recorded
    ("services.intake.batch", "judge_staged", "judges"),  # the judges for real, and the blend
    ("services.intake.batch", "_read_ahead", "reader"),  # the reader of the question, the batch's answers at once
    ("services.intake.assess", "store_runs", "db_write"),  # the batch's runs and intake rows
    ("services.intake.assess", "_store", "db_write"),  # a record stored alone
    ("services.intake.assess", "next_queued", "db_claim"),
)

ENCODE_CALLS: dict[str, int] = {}  # the model's calls in the last drain


class CpuParts:
    """Exclusive CPU seconds (this process's, every thread) spent under each part's functions."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = 0.0

    def enter(self, part: str) -> None:
        self._charge()
        self._stack.append(part)

    def leave(self) -> None:
        self._charge()
        self._stack.pop()

    def _charge(self) -> None:
        now = time.process_time()
        if self._stack:
            self.seconds[self._stack[-1]] = self.seconds.get(self._stack[-1], 0.0) + now - self._since
        self._since = now

    def wrap(self, fn: Any, part: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(part)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()
        return timed


def _drain(settings: Any, batch: int) -> tuple[float, float, Any, list[str], dict[str, float]]:
    """Wall and CPU seconds of draining the queue, its summary, every text the model encoded
    for it (the judge's sentence cache encodes all of a batch's texts: services.intake.batch),
    and its CPU seconds by part (PARTS, and "other")."""
    import importlib

    from services.intake.assess import process_queue
    from services.judging import vectors

    encoded: list[str] = []
    ENCODE_CALLS.clear()
    real = {name: getattr(vectors, name) for name in MODEL_CALLS}

    def noting(call: Any) -> Any:
        def noted(name: str, texts: Any, **options: Any) -> Any:
            encoded.extend(texts)
            ENCODE_CALLS["encode"] = ENCODE_CALLS.get("encode", 0) + 1
            return call(name, texts, **options)
        return noted

    for name, call in real.items():  # the real model; the texts written down
        setattr(vectors, name, noting(call))
    parts = CpuParts()
    originals = []
    for module_name, attribute, part in PARTS:  # each wrapped where its caller looks it up
        module = importlib.import_module(module_name)
        if hasattr(module, attribute):
            originals.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, parts.wrap(getattr(module, attribute), part))
    try:
        started, cpu = time.perf_counter(), time.process_time()
        parts.enter("other")
        summary = process_queue(judges=True, settings=settings, batch=batch)
        parts.leave()
        return time.perf_counter() - started, time.process_time() - cpu, summary, encoded, parts.seconds
    finally:
        for module, attribute, original in reversed(originals):
            setattr(module, attribute, original)
        for name, call in real.items():
            setattr(vectors, name, call)


def _tokens(texts: list[str], settings: Any) -> int:
    from services.retrieval.embedding import load_model

    model = load_model(settings.embedding_model)
    limit = model.max_seq_length  # what the model reads of a longer text
    return sum(min(len(ids), limit) for ids in model.tokenizer(texts, verbose=False)["input_ids"])


def measure_shape(shape: str, n: int, *, batch: int, settings: Any, seed: int, profile_dir: Path | None) -> dict[str, Any]:
    from services.judging.vectors import cached_embedder

    records = build_records(n, shape, seed=seed)
    texts = texts_of(records)
    # A few records of the shape first, so the clock sees neither a first-use import nor a cold cache of code paths.
    _queue(build_records(WARMUP_RECORDS, shape, seed=seed + 1, offset=n), settings)
    _drain(settings, batch)
    cached_embedder.cache_clear()  # nothing of these records' texts encoded ahead of the clock
    _queue(records, settings)
    load_before = os.getloadavg()[0]
    encode_before, encode_cpu_before = _encode_seconds(texts, settings, stock=True)
    direct_before, _ = _encode_seconds(texts, settings)
    profiler = cProfile.Profile() if profile_dir else None
    if profiler:
        profiler.enable()
    seconds, cpu, summary, encoded, by_part = _drain(settings, batch)
    if profiler:
        profiler.disable()
        profile_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
        profiler.dump_stats(str(profile_dir / f"intake-{shape}.prof"))  # type: ignore[operator]
    load_during = os.getloadavg()[0]
    direct_after, _ = _encode_seconds(texts, settings)
    encode_after, encode_cpu_after = _encode_seconds(texts, settings, stock=True)
    # The model alone on what the assessment encoded, in one call: the most the ratio could be
    # were everything else free (the judges read claims beside the records' texts, and a context
    # not encoded for its similarity, whole).
    _, encode_cpu_assessed = _encode_seconds(list(dict.fromkeys(encoded)), settings)
    load_after = os.getloadavg()[0]
    if summary.assessed + summary.failed != n or summary.failed:
        log(f"{shape}: assessed {summary.assessed}, failed {summary.failed} of {n}")
    bound = n / ((encode_before + encode_after) / 2)
    bound_direct = n / ((direct_before + direct_after) / 2)
    bound_cpu = n / ((encode_cpu_before + encode_cpu_after) / 2)
    rate, rate_cpu = summary.assessed / seconds, summary.assessed / cpu
    record_tokens, assessed_tokens = _tokens(texts, settings), _tokens(encoded, settings)
    return {
        "shape": shape, "runs": n, "assessed": summary.assessed, "failed": summary.failed, "batch": batch,
        "contexts_per_run": len(records[0]["contexts"]), "texts_encoded_for_bound": len(texts),
        "texts_in_records": sum(2 + len(r["contexts"]) for r in records),
        "assess_s": rounded(seconds, 2), "runs_per_s": rounded(rate, 2),
        "encode_s_before": rounded(encode_before, 2), "encode_s_after": rounded(encode_after, 2),
        "encode_bound_runs_per_s": rounded(bound, 2), "ratio": rounded(rate / bound, 3), "target_ratio": TARGET_RATIO,
        # the same texts through the product's own encoder, the one the assessment uses: the ratio
        # of what the judges, the reader and the store add to the encoding
        "encode_s_direct": [rounded(direct_before, 2), rounded(direct_after, 2)],
        "encode_direct_runs_per_s": rounded(bound_direct, 2), "ratio_vs_direct_pass": rounded(rate / bound_direct, 3),
        # this process's CPU seconds (Postgres's are not in them): steadier than wall time on a shared machine
        "assess_cpu_s": rounded(cpu, 2), "encode_cpu_s": [rounded(encode_cpu_before, 2), rounded(encode_cpu_after, 2)],
        "ratio_cpu": rounded(rate_cpu / bound_cpu, 3),
        "encode_cpu_s_assessment_texts": rounded(encode_cpu_assessed, 2),
        "ratio_cpu_model_only": rounded((encode_cpu_before + encode_cpu_after) / 2 / encode_cpu_assessed, 3),
        # what the model reads: the records' own texts (the bound), and what the assessment encoded
        # (contexts and questions, then the judges' claims and contexts), in model tokens a run
        "tokens_per_run_record_texts": rounded(record_tokens / n, 1),
        "tokens_per_run_assessment": rounded(assessed_tokens / n, 1),
        "texts_encoded_by_assessment": len(encoded), "encode_calls": ENCODE_CALLS.get("encode", 0),
        # CPU ms a run by part (PARTS): the model, the judges, the store's reads and writes, the rest
        "cpu_ms_per_run": {part: rounded(1000 * s / n, 2) for part, s in sorted(by_part.items())},
        "load_average_1min": [rounded(load_before, 2), rounded(load_during, 2), rounded(load_after, 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400, help="records per shape")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--batch", type=int, default=None, help="records a claim (default: process_queue's)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats of each shape here")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="torch's threads for the bound and the assessment alike (default: torch's own, "
                             "the cores); 1 keeps a loaded machine's CPU time free of threads waiting on each other")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        raise SystemExit(f"unknown shape(s) {sorted(unknown)}; choose from {SHAPES}")

    started = time.perf_counter()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    data_dir, created, settings = prepare_store(args.data_dir)
    from services.intake.assess import ASSESS_BATCH
    from services.retrieval.embedding import load_model
    from services.store import get_engine

    batch = args.batch or ASSESS_BATCH
    results: dict[str, Any] = {}
    try:
        with phase(f"store: {describe(settings)}; model {settings.embedding_model}"):
            get_engine(settings)
            load_model(settings.embedding_model)
        for shape in shapes:
            with phase(f"{shape}: {args.runs} records, batch {batch}"):
                results[shape] = measure_shape(shape, args.runs, batch=batch, settings=settings, seed=args.seed,
                                               profile_dir=args.profile)
            emit({**results[shape], "date": today()})
    finally:
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    emit({"shapes": results, "target_ratio": TARGET_RATIO, "torch_threads": _torch_threads(),
          "machine": machine(), "date": today(), "wall_s": rounded(time.perf_counter() - started, 1)})


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


if __name__ == "__main__":
    main()
