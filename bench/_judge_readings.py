"""The judge's signals for the development set's cases, kept on disk between runs.

Reading an answer costs about half a second on this machine (its contexts' sentences are
embedded), so the 6,000 cases of bench/judge_set.py take most of an hour, and fitting
(bench/fit_judge.py, the train half) and measuring (bench/judge.py, the test half) used to
read them again each time. The signals depend only on the case and on the judge's own code,
so they are stored under a digest of that code (services/judging/, the set's builder and
the embedding model's name): any change to the judge starts a new file, and a fit or a
measurement of unchanged code reads what was read before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench._common import log
from bench.judge_set import JudgeCase

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / "bench" / ".cache"
_SOURCES = (ROOT / "services" / "judging", ROOT / "services" / "retrieval" / "embedding.py",
            ROOT / "bench" / "judge_set.py", ROOT / "bench" / "_judge_text.py",
            ROOT / "bench" / "_judge_sources.py", ROOT / "bench" / "_judge_balance.py", ROOT / "bench" / "_judge_replies.py")


@dataclass(frozen=True)
class Signals:
    """What the judge's decision reads from a Reading (services.judging.judge.decide)."""

    features: dict[str, float]
    abstains: bool
    adds_nothing: bool
    bare_reply: bool = False  # a bare yes or no: decided by its polarity, not fitted on
    reply_agrees: bool | None = None  # ...going with the way the contexts take the question, or not


def judge_digest(model_name: str) -> str:
    """A digest of everything a case's signals depend on besides the case itself."""
    digest = hashlib.sha256(model_name.encode())
    for source in _SOURCES:
        files = sorted(source.rglob("*")) if source.is_dir() else [source]
        for path in files:
            if path.suffix in (".py", ".toml", ".json", ".safetensors") and path.name != "judge_model.json":
                digest.update(str(path.relative_to(ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def case_key(case: JudgeCase) -> str:
    return hashlib.sha256(json.dumps([case.question, case.answer, case.contexts]).encode()).hexdigest()


class Reader:
    """Reads cases' signals, from the cache file of the judge's current code where it can."""

    def __init__(self, model_name: str, *, use_cache: bool = True) -> None:
        from services.judging.vectors import cached_embedder

        self.path = CACHE_DIR / f"judge-readings-{judge_digest(model_name)}.jsonl"
        self.use_cache = use_cache
        self.known: dict[str, Signals] = {}
        if use_cache and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.known[row["key"]] = Signals(row["features"], row["abstains"], row["adds_nothing"],
                                                     row["bare_reply"], row["reply_agrees"])
                except (ValueError, KeyError):  # a line cut short by an interrupted run: read it again
                    continue
            log(f"judge readings: {len(self.known)} cached in {self.path.name}")
        self.embed = cached_embedder(model_name)

    def read(self, case: JudgeCase) -> Signals:
        from services.judging.features import read_answer

        key = case_key(case)
        if key not in self.known:
            contexts = [c for c in case.contexts if c and c.strip()]  # as judge_answer reads them
            reading = read_answer(case.question, case.answer, contexts, embed=self.embed)
            signals = Signals(reading.features, reading.abstains, reading.adds_nothing, reading.bare_reply is not None,
                              reading.reply_agrees)
            self.known[key] = signals
            if self.use_cache:
                CACHE_DIR.mkdir(exist_ok=True)
                with self.path.open("a", encoding="utf-8") as cache:
                    cache.write(json.dumps({"key": key, **asdict(signals)}) + "\n")
        return self.known[key]


def read_cases(cases: Sequence[JudgeCase], *, model_name: str, use_cache: bool = True,
               progress: Callable[[int, int], None] | None = None) -> list[Signals]:
    """Each case's signals, from the cache where the judge's code has not changed since."""
    reader = Reader(model_name, use_cache=use_cache)
    out = []
    for i, case in enumerate(cases, 1):
        out.append(reader.read(case))
        if progress is not None:
            progress(i, len(cases))
    return out
