"""The judge's development set: answers as other systems write them, right and wrong, each with
its contexts, built from SQuAD 2.0 half-dev, python-reference, numpy-api and the demo handbook.

    python bench/judge_set.py [--corpora handbook,numpy-api] [--per-corpus 300] [--seed 0]

prints the counts per corpus and kind and the length-only AUROC (stderr). Pure and seeded:
build_cases(corpora, per_corpus, seed) gives the same cases for the same arguments. Each
question yields up to seventeen kinds of answer (KINDS); right and wrong come in the same styles
(concise, sentence, restated, a bare yes/no reply) in equal numbers per corpus, so length cannot
tell them apart.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._judge_balance import balanced  # noqa: E402
from bench._judge_replies import reply_cases  # noqa: E402
from bench._judge_sources import CORPORA, DISTRACTORS, Corpus, Question, Value, also_right, load, passage  # noqa: E402
from bench._judge_text import (  # noqa: E402
    change_number,
    contains,
    double_figure,
    find_spans,
    question_class,
    question_options,
    restate,
    reverse_direction,
    value_dimension,
    value_form,
    value_shape,
    value_type,
    value_unit,
    with_options,
)

# kind -> (label, style)
KINDS: dict[str, tuple[int, str]] = {
    "right_concise": (1, "concise"), "right_sentence": (1, "sentence"), "right_restated": (1, "restated"),
    "right_option": (1, "concise"), "fabricated_restated": (0, "restated"), "fabricated_concise": (0, "concise"),
    "changed_number": (0, "sentence"), "same_passage_name": (0, "concise"), "same_passage_restated": (0, "restated"),
    "wrong_option": (0, "concise"),
    "reversed": (0, "sentence"), "abstention": (0, "concise"), "other_passage": (0, "sentence"),
    "nothing_retrieved": (0, "sentence"), "right_reply": (1, "reply"), "wrong_reply": (0, "reply"),
    "wrong_type": (0, "concise"),
}
# Each wrong kind is compared with the right kind of the same form, on the same questions.
COMPARISONS: dict[str, str] = {
    "fabricated_restated": "right_restated", "fabricated_concise": "right_concise", "same_passage_name": "right_concise",
    "same_passage_restated": "right_restated",
    "abstention": "right_concise", "wrong_option": "right_option", "changed_number": "right_sentence",
    "reversed": "right_sentence", "other_passage": "right_sentence",
    "nothing_retrieved": "right_sentence", "wrong_reply": "right_reply", "wrong_type": "right_concise",
}
ABSTENTIONS = ("I don't know.", "The provided context does not say.", "Not enough information to answer.", "")
MAX_SENTENCE_CHARS = 400


@dataclass(frozen=True)
class JudgeCase:
    """One answer to judge: right (label 1) or wrong (0), with the contexts it is judged on."""

    corpus: str
    question_id: str
    kind: str
    style: str
    question: str
    answer: str
    contexts: list[str]
    label: int
    split: str  # train / test: every case of a question on one side (test_half)
    note: str = ""
    value: str = ""  # what the case turns on: the gold span, or the value put in its place


def _stable_hash(corpus: str, question_id: str) -> str:
    return hashlib.sha256(f"{corpus}/{question_id}".encode()).hexdigest()


# The draw bench/judge.py and bench/fit_judge.py measure and fit on unless told otherwise;
# bench/fit_reader.py --undrawn keeps these questions out of what it trains on.
PER_CORPUS, SEED = 300, 0


def test_half(corpus: Corpus) -> frozenset[str]:
    """The question ids of the corpus's test half: the half of its questions whose stable hash
    of corpus and id sorts first (the same whatever sample is drawn; 50/50 exactly). Ranked over
    the questions the spans as written locate, so that a question the audit leaves out moves no
    other across the halves."""
    ranked = sorted(load(corpus.name, "evidence").questions, key=lambda q: _stable_hash(corpus.name, q.qid))
    return frozenset(q.qid for q in ranked[:len(ranked) // 2])


def drawn(corpus: Corpus, per_corpus: int = PER_CORPUS, seed: int = SEED) -> list[Question]:
    """The questions build_cases draws from `corpus` for these arguments."""
    pool = sorted(corpus.questions, key=lambda q: q.qid)
    return random.Random(f"{seed}/{corpus.name}").sample(pool, min(per_corpus, len(pool)))


def build_cases(corpora: list[str] | tuple[str, ...], per_corpus: int = PER_CORPUS, seed: int = SEED,
                golds: str = "audited", distractors: str = "audited") -> list[JudgeCase]:
    """Up to `per_corpus` questions a corpus, drawn with `seed`, and their cases, balanced so
    that each style holds as many right answers as wrong ones; `golds` as _judge_sources.load;
    `distractors` "audited" leaves out a same-passage draw the audit found to answer its question
    (with the right option asked beside it), "drawn" keeps every draw."""
    if distractors not in DISTRACTORS:
        raise SystemExit(f"unknown distractors {distractors!r}; choose from {', '.join(DISTRACTORS)}")
    cases: list[JudgeCase] = []
    for name in corpora:
        corpus = load(name, golds)
        picked = drawn(corpus, per_corpus, seed)
        test = test_half(corpus)
        answering = also_right(name) if distractors == "audited" else frozenset()
        built = [case for q in picked
                 for case in _cases(corpus, q, "test" if q.qid in test else "train", question_rng(seed, q), answering)]
        kept = balanced(built, COMPARISONS, seed)
        # Drawn apart and after the balance, so that every other case stays what it was; on the
        # contexts of the right concise answer it is compared with.
        concise = {c.question_id: c for c in kept if c.kind == "right_concise"}
        cases += kept + [case for q in picked if q.qid in concise
                         for case in _wrong_type(corpus, q, concise[q.qid], random.Random(f"{seed}/{name}/{q.qid}/type"))]
    return cases


def question_rng(seed: int, q: Question) -> random.Random:
    """The draws of question `q`'s cases: build_cases's and distractor_draws's are the same."""
    return random.Random(f"{seed}/{q.corpus}/{q.qid}")


def distractor_draws(name: str, per_corpus: int = PER_CORPUS, seed: int = SEED, golds: str = "audited") -> dict[str, str]:
    """Question id -> the wrong answer drawn from its own passage (or its other option), for every
    question build_cases draws from corpus `name`: what bench/data/distractor-audit.jsonl reads."""
    corpus = load(name, golds)
    draws = {}
    for q in drawn(corpus, per_corpus, seed):
        cases = _cases(corpus, q, "", question_rng(seed, q))
        draws.update((q.qid, c.value) for c in cases if c.kind == "wrong_option")
    return draws


def _cases(corpus: Corpus, q: Question, split: str, rng: random.Random,
           answering: frozenset[tuple[str, str]] = frozenset()) -> list[JudgeCase]:
    gold, start, end = passage(corpus.docs[q.doc], q.start, q.end)
    vtype = value_type(q.answer)
    fabricated = _fabricated(corpus, q, gold, vtype, rng)
    options = question_options(q.question)
    real_choice = options is not None and q.answer.lower() in (o.lower() for o in options)
    if real_choice and options is not None:
        distractor = next(o for o in options if o.lower() != q.answer.lower())
    else:
        distractor = _same_passage(corpus, q, gold, (start, end), vtype, rng)
    contexts = _contexts(corpus, q, gold, fabricated, rng)
    out: list[tuple[str, str, str, str, str, list[str]]] = []  # kind, question, answer, note, value, contexts

    def add(kind: str, answer: str, note: str = "", value: str = "", question: str = q.question,
            contexts: list[str] = contexts) -> None:
        out.append((kind, question, answer, note, value, contexts))

    add("right_concise", q.answer, value=q.answer)
    add("right_restated", restate(q.question, q.answer), value=q.answer)
    if fabricated is not None:
        value, source = fabricated
        note = f"{value!r} from {source}, which no context holds"
        add("fabricated_concise", value, note, value)
        add("fabricated_restated", restate(q.question, value), note, value)
    if distractor is not None and (q.qid, distractor) in answering:
        rng.random()  # the option order's draw, taken all the same: every case after it stays as it was
    elif distractor is not None:
        note = f"{distractor!r} is in the passage but does not answer"
        add("same_passage_name", distractor, note, distractor)
        # The question restated around it, as a generator writes it: every word is in the
        # passage or the question, so only which name the passage pairs with the question tells.
        add("same_passage_restated", restate(q.question, distractor), note, distractor)
        first, second = (q.answer, distractor) if rng.random() < 0.5 else (distractor, q.answer)
        asked = q.question if real_choice else with_options(q.question, first, second)
        add("right_option", q.answer, value=q.answer, question=asked)
        add("wrong_option", distractor, f"the other option, {distractor!r}", distractor, question=asked)
    sentence = _sentence(gold, q.answer, q.question)
    if sentence is not None:
        add("right_sentence", sentence, value=q.answer)
        s, e = find_spans(sentence, q.answer)[0]
        changed = change_number(sentence, s, e, rng, avoid=gold)
        if changed is not None:
            add("changed_number", changed[0], f"{changed[1]!r} changed to {changed[2]!r}", changed[2])
        flipped = reverse_direction(sentence, (s, e)) or double_figure(sentence, (s, e), rng)
        if flipped is not None:
            how = "doubled" if re.fullmatch(r"[\d.,]+\w*", flipped[1]) else "reversed"
            add("reversed", flipped[0], f"{flipped[1]!r} {how} to {flipped[2]!r}", flipped[2])
        turned = flipped or changed
        if turned is not None:
            # Drawn apart, so that the other kinds stay the cases they were before replies came.
            for kind, asked, reply in reply_cases(sentence, turned[0], random.Random(f"{corpus.name}/{q.qid}/reply")):
                add(kind, reply, f"{turned[1]!r} turned to {turned[2]!r} in the asked sentence", question=asked)
        # A RAG system answering from the wrong retrieved passage: every word is in the
        # contexts, and none of it is about the question.
        elsewhere = _other_passage_sentence([c for c in contexts if c != gold], sentence, rng)
        if elsewhere is not None:
            add("other_passage", elsewhere, "a sentence of another retrieved passage", "")
        # Retrieval missed the passage and the system answered anyway, with the sentence of what
        # it did retrieve that shares most words with the question: grounded, on no answer.
        missed = _missed_retrieval(corpus, q, gold, contexts, rng)
        if missed is not None:
            add("nothing_retrieved", missed[0], "the passage holding the answer was not retrieved", "",
                contexts=missed[1])
    add("abstention", rng.choice(ABSTENTIONS), "abstains", "")
    return [JudgeCase(q.corpus, q.qid, kind, KINDS[kind][1], question, answer, given, KINDS[kind][0], split, note, value)
            for kind, question, answer, note, value, given in out]


# --- values put in the gold one's place ------------------------------------------------------

# A question asking for a person or a place answered with a figure or a date its passage holds,
# one asking for a time or a count answered with a name of it: grounded, of the wrong kind.
_WRONG_TYPES = {"who": ("number", "date"), "where": ("number", "date"), "when": ("name",), "how-many": ("name",)}
# The wh-word that opens the question asks (question_class finds one anywhere: "Why does x == x
# come out False when ...?" is no when-question), a "when" only before its verb ("when
# converting an array to text, how ...?" states a condition).
_ASKED = re.compile(r"^\s*(?:(?:in|on|at|during|from|by|for|to|with)\s+)?"
                    r"(?P<word>who|whom|whose|where|when(?=\s+(?:did|was|were|is|are|does|do|will|had|has|have)\b)"
                    r"|how\s+(?:many|much)|(?:what|which)\s+(?:year|century|decade|date|month|day))\b", re.IGNORECASE)


def _wrong_type(corpus: Corpus, q: Question, right: JudgeCase, rng: random.Random) -> list[JudgeCase]:
    """The passage's value of a kind the question does not ask for, nearest the gold's length
    (a who answered "1998"), when the question asks for a kind and the passage holds one; on
    the contexts of `right`, the question's right concise answer."""
    opening = _ASKED.match(q.question)
    wrong = _WRONG_TYPES.get(question_class(opening.group("word"))) if opening else None
    if wrong is None or value_type(q.answer) in wrong:
        return []
    gold, _, _ = passage(corpus.docs[q.doc], q.start, q.end)
    candidates = sorted({v.text for v in corpus.values
                         if v.doc == q.doc and v.type in wrong and contains(gold, v.text) and not _asked_or_answered(q, v.text)})
    if not candidates:
        return []
    nearest = min(abs(len(c) - len(q.answer)) for c in candidates)
    value = rng.choice([c for c in candidates if abs(len(c) - len(q.answer)) == nearest])
    return [JudgeCase(q.corpus, q.qid, "wrong_type", KINDS["wrong_type"][1], q.question, value, right.contexts, 0, right.split,
                      f"{value!r} is in the passage but not of the kind asked", value)]


def _answers(q: Question) -> list[str]:
    return [q.answer.lower(), *(a.lower() for a in q.alternatives)]


def _asked_or_answered(q: Question, text: str) -> bool:
    """Whether `text` is words of the question, or an accepted answer's or holds one: no wrong value."""
    low = text.lower()
    return low in q.question.lower() or any(low in a or a in low for a in _answers(q))


def _near(value: str, answer: str) -> bool:
    return abs(len(value) - len(answer)) <= max(3, 0.35 * len(answer))


def _closest(candidates: list[Value], q: Question, vtype: str, rng: random.Random) -> Value | None:
    """A candidate of the best tier, drawn with `rng`: for figures, dates and codes the same
    shape, unit, dimension (time, length ...), form, then a length near the gold's; for names
    the same question class (who, where ...), then length; for phrases another question's
    answer, then length."""
    if not candidates:
        return None
    shape, unit, qclass = value_shape(q.answer), value_unit(q.answer), question_class(q.question)

    dimension, form = value_dimension(q.answer), value_form(q.answer)

    def tier(v: Value) -> tuple[bool, ...]:
        near = _near(v.text, q.answer)
        if vtype in ("number", "date", "code"):
            return (v.shape == shape, v.unit == unit, value_dimension(v.text) == dimension, value_form(v.text) == form,
                    near, v.qclass == qclass, v.qclass is not None)
        if vtype == "name":
            return v.qclass == qclass, near, v.qclass is not None, v.shape == shape
        return v.qclass is not None, near, v.qclass == qclass, v.shape == shape

    best = max(map(tier, candidates))
    pool = sorted({v.text: v for v in candidates if tier(v) == best}.values(), key=lambda v: (v.text, v.doc))
    return rng.choice(pool)


def _fabricated(corpus: Corpus, q: Question, gold: str, vtype: str, rng: random.Random) -> tuple[str, str] | None:
    """A value of the gold's type from another document that the gold passage does not hold."""
    low_gold, answer = gold.lower(), q.answer.lower()
    excluded = {a.lower() for a in q.alternatives} | {answer}
    asked = q.question.lower()
    candidates = [v for v in corpus.values
                  if v.type == vtype and v.doc != q.doc and v.text.lower() not in excluded
                  and v.text.lower() not in low_gold and answer not in v.text.lower() and v.text.lower() not in asked]
    chosen = _closest(candidates, q, vtype, rng)
    return (chosen.text, chosen.doc) if chosen is not None else None


def _figures(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)*", text))


def _same_passage(corpus: Corpus, q: Question, gold: str, span: tuple[int, int], vtype: str,
                  rng: random.Random) -> str | None:
    """A value of the gold's type that the same passage holds and that is not the answer (another
    question's answer on it first); for a phrase answer, a phrase of the passage of its length."""
    from services.retrieval.text import tokenize

    gold_words = {w for a in _answers(q) for w in tokenize(a)}

    def unrelated(text: str) -> bool:
        if _asked_or_answered(q, text):
            return False
        if vtype in ("number", "date"):
            return not (_figures(text) & _figures(q.answer))
        return not (set(tokenize(text)) & gold_words)

    candidates = [v for v in corpus.values if v.doc == q.doc and v.type == vtype and unrelated(v.text)
                  and contains(gold, v.text)]
    chosen = _closest(candidates, q, vtype, rng)
    if vtype == "other" and (chosen is None or not _near(chosen.text, q.answer)):
        phrase = _phrase(gold, span, len(q.answer.split()), unrelated, rng)
        if phrase is not None:
            return phrase
    return chosen.text if chosen is not None else None


def _phrase(gold: str, span: tuple[int, int], n_words: int, unrelated, rng: random.Random) -> str | None:  # type: ignore[no-untyped-def]
    """A run of `n_words` words of one line of the passage away from the answer, starting and
    ending on a content word, without punctuation inside."""
    from services.retrieval.text import STOPWORDS

    runs = []
    for line in re.finditer(r"[^\n.;:!?]+", gold):
        if line.start() <= span[1] and span[0] <= line.end():
            continue
        words = re.findall(r"[A-Za-z][\w'-]*", line.group())
        for i in range(len(words) - n_words + 1):
            run = words[i:i + n_words]
            if run[0].lower() in STOPWORDS or run[-1].lower() in STOPWORDS:
                continue
            text = " ".join(run)
            if text in gold and unrelated(text):
                runs.append(text)
    return rng.choice(sorted(set(runs))) if runs else None


# --- the answer's sentence and the contexts ----------------------------------------------------

def _sentence(gold: str, answer: str, question: str) -> str | None:
    """The passage's sentence holding the answer, Markdown marks and table pipes taken out."""
    from services.corpus.chunking import split_sentences
    from services.retrieval.text import tokenize

    asked = set(tokenize(question))
    best = None
    for sentence in _table_rows_and_sentences(gold, split_sentences):
        sentence = re.sub(r"^(?:#+|[-*+]|\d{1,3}[.)])\s+", "", sentence)
        if "*" not in answer:
            sentence = sentence.replace("**", "")
        if "`" not in answer:
            sentence = sentence.replace("`", "")
        if len(sentence) <= MAX_SENTENCE_CHARS and find_spans(sentence, answer):
            score = len(asked & set(tokenize(sentence)))
            if best is None or score > best[0]:
                best = (score, sentence)
    return None if best is None or best[1].strip() == answer.strip() else best[1]


def _missed_retrieval(corpus: Corpus, q: Question, gold: str, contexts: list[str],
                      rng: random.Random) -> tuple[str, list[str]] | None:
    """Contexts without the gold passage (the other two and one more of another document), and
    the sentence of them sharing most words with the question."""
    from services.corpus.chunking import split_sentences
    from services.retrieval.text import tokenize

    others = [c for c in contexts if c != gold]
    docs = sorted(d for d in corpus.docs if d != q.doc)
    if not docs:
        return None
    text = corpus.docs[rng.choice(docs)]
    at = rng.randrange(len(text))
    extra = passage(text, at, at + 1)[0]
    if q.answer.lower() in extra.lower():
        return None
    given = others + [extra]
    asked = set(tokenize(q.question))
    found = [re.sub(r"^(?:#+|[-*+]|\d{1,3}[.)])\s+", "", s).replace("**", "").replace("`", "").strip()
             for c in given for s in _table_rows_and_sentences(c, split_sentences)]
    found = [s for s in found if len(s.split()) >= 4 and len(s) <= MAX_SENTENCE_CHARS]
    if not found:
        return None
    best = max(found, key=lambda s: (len(asked & set(tokenize(s))), -abs(len(s) - 120), s))
    return best, given


def _other_passage_sentence(others: list[str], like: str, rng: random.Random) -> str | None:
    """A sentence of the other passages about as long as `like` (the right sentence)."""
    from services.corpus.chunking import split_sentences

    found = sorted({re.sub(r"^(?:#+|[-*+]|\d{1,3}[.)])\s+", "", s).replace("**", "").replace("`", "").strip()
                    for text in others for s in _table_rows_and_sentences(text, split_sentences)})
    near = [s for s in found if _near(s, like) and len(s.split()) >= 4]
    return rng.choice(near) if near else None


def _table_rows_and_sentences(text: str, split_sentences) -> list[str]:  # type: ignore[no-untyped-def]
    """The sentences of `text`, a Markdown table row being one ("| J3 | 33 Ω |" -> "J3, 33 Ω");
    rules between header and rows are left out."""
    out: list[str] = []
    prose: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            out += split_sentences("\n".join(prose)) if prose else []
            prose = []
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-*:?", cell) for cell in cells):
                out.append(", ".join(cells))
        else:
            prose.append(line)
    return out + (split_sentences("\n".join(prose)) if prose else [])


def _contexts(corpus: Corpus, q: Question, gold: str, fabricated: tuple[str, str] | None,
              rng: random.Random) -> list[str]:
    """The gold passage and two passages of other documents (of the same article when the corpus
    has articles), none from the fabricated value's document nor holding it; seeded order."""
    barred = {q.doc} | ({fabricated[1]} if fabricated else set())
    others = sorted(d for d in corpus.docs if d not in barred)
    title = corpus.titles.get(q.doc, "")
    same_article = [d for d in others if title and corpus.titles.get(d) == title]
    contexts = [gold]
    for pool in (same_article, others):
        pool = list(pool)
        rng.shuffle(pool)
        for doc in pool:
            if len(contexts) == 3:
                break
            text = corpus.docs[doc]
            at = rng.randrange(len(text))
            body = passage(text, at, at + 1)[0]
            if body not in contexts and not (fabricated and fabricated[0].lower() in body.lower()):
                contexts.append(body)
    rng.shuffle(contexts)
    return contexts


def length_auroc(cases: list[JudgeCase]) -> float | None:
    """AUROC of the answer's length (characters) as a right-vs-wrong score; None with one class."""
    from sklearn.metrics import roc_auc_score

    labels = [c.label for c in cases]
    if len(set(labels)) < 2:
        return None
    return float(roc_auc_score(labels, [len(c.answer) for c in cases]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--per-corpus", type=int, default=PER_CORPUS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    cases = build_cases(args.corpora.split(","), args.per_corpus, args.seed)
    for name in args.corpora.split(","):
        mine = [c for c in cases if c.corpus == name]
        auroc = length_auroc(mine)
        print(f"{name}: {len(mine)} cases, {sum(c.label for c in mine)} right; length AUROC "
              f"{auroc:.3f} (test {length_auroc([c for c in mine if c.split == 'test']) or 0:.3f})", file=sys.stderr)
        print("  " + ", ".join(f"{k} {n}" for k, n in sorted(Counter(c.kind for c in mine).items())), file=sys.stderr)


if __name__ == "__main__":
    main()
