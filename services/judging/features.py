"""The judge's signals for one answer: what the fitted model (services.judging.model) combines.

Every signal is a number in [0, 1] or [-1, 1], named for what it measures. They are computed
for answers of every style alike (a concise span, a sentence, a restated question) so that
one model can weigh them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from services.judging._contradiction import contradiction
from services.judging._lexical import Term, coverage, query_terms
from services.judging._quotes import changed_quote
from services.judging._sentences import answer_sentences
from services.judging.answer_type import (
    CHOICE,
    Expected,
    chosen_option,
    expected_kind,
    type_fit,
    without_options,
    words_not_asked,
)
from services.judging.claims import answer_claims, is_abstention, is_concise, what_is_said
from services.judging.context_sentences import ContextSentence, context_sentences
from services.judging.evidence import ClaimEvidence, asked_weights, locality, read_claim
from services.judging.forms import FORM_SIGNALS, PHRASE_WORDS, answer_form, form_signals
from services.judging.nli import Entail
from services.judging.polarity import Polarity, read_polarity, statement
from services.judging.reader import Phrase, phrase_in, shipped_reader
from services.judging.semantic import (
    Embed,
    claim_relevance,
    claim_statement,
    evidence_margin_and_relevance,
    evidence_nearness,
    option_relevance,
    sentence_reader,
    similarity,
)
from services.retrieval.text import tokenize

FEATURES = (
    "abstains", "unsupported_atom", "atom_support", "word_support", "evidence_support",
    "question_coverage", "entity_coverage", "coverage_margin", "locality", "locality_margin", "type_fit",
    "option_margin", "option_relevance", "reversal", "contradiction", "similarity", "relevance", "evidence_margin",
    "evidence_relevance", "sentence_relevance", "evidence_nearness", "concise", "quote_changed",
    # The reader of the question (services.judging.reader) on a phrase or a restated question, its
    # logit / READER_SPAN clipped to [-1, 1]; 0 where it did not read (no reader, or the evidence
    # lacks a word).
    "reader",
    # For a "which A or B" question: the reader's logit for the option the answer picks less the
    # best other option's, each read as if it were the answer, / READER_SPAN clipped to [-1, 1]; 0
    # where the answer picks none or an option is not read. The reader was fitted to order a
    # question's options: this reads it as fitted, where "reader" asks its logit to mean the same
    # across questions.
    "option_reader",
    # Verdicts of models, where one is configured, as log-odds (0 when none ran: no evidence
    # either way): a language model backend's own reflection score and an NLI cross-encoder's
    # entailment of each claim by its evidence sentence.
    "model_log_odds", "nli_log_odds",
)
LOG_ODDS_LIMIT = 4.0  # a model's 0.99 counts as 0.98: no single verdict outweighs the rest


@dataclass(frozen=True)
class Reading:
    """The signals, and the per-claim evidence they were read from (for the reason and the UI)."""

    features: dict[str, float]
    claims: tuple[ClaimEvidence, ...]
    expected: Expected
    abstains: bool
    contradiction_reason: str | None
    # A sentence adding no word, name or number to the question (read whole for its signals).
    # Not a signal the model weighs: in the development set it marks answers that the
    # question's own words already hold (a search-style query naming its answer), right far
    # more often than wrong, which would teach the model to trust a restated question. The
    # judge caps it instead.
    adds_nothing: bool = False
    # (the claim's words, the context's words they replace) when a claim quotes a context but
    # for a word or three it swaps: "negative" for "positive", "2 + x" for "1 + x".
    changed_quote: tuple[str, str] | None = None
    bare_reply: str | None = None  # "yes" or "no" when that is the whole answer
    polarity: Polarity | None = None  # which way the contexts take the question, for a bare reply

    @property
    def reply_agrees(self) -> bool | None:  # a bare yes or no with or against the contexts; None: they take no side
        return self.polarity.agrees(self.bare_reply) if self.bare_reply is not None and self.polarity is not None else None


def read_answer(question: str, answer: str, contexts: Sequence[str], *, embed: Embed | None,
                entail: Entail | None = None, model_support: float | None = None) -> Reading:
    """The signals for `answer`; `entail` (an NLI model) and `model_support` (a language model's
    P(grounded)) add theirs when given."""
    words = read_words(question, answer, tuple(contexts))
    features = dict(words.features)
    if words.abstains:
        return Reading(features, (), words.expected, True, None, True)
    expected, pool, adding = words.expected, words.pool, words.adding
    if embed is not None and expected.kind == CHOICE:
        features["option_relevance"] = option_relevance(expected, question, answer, pool, embed,
                                                        sentence_reader(embed, contexts))
        features["option_reader"] = _option_reader_signal(question, answer, contexts, expected,
                                                          getattr(embed, "model_name", ""))
    if embed is not None and adding:
        sentences = sentence_reader(embed, contexts)
        answering = words.answering()
        features["similarity"] = similarity(question, adding, embed, sentences)
        features["relevance"] = claim_relevance(question, answering.claim.text, embed)
        features["evidence_margin"], features["evidence_relevance"] = evidence_margin_and_relevance(
            question, answering, pool, words.terms, embed, sentences)
        # A sentence asserts its evidence whole: one about something else answers nothing, however
        # well its words are grounded (a passage's sentence nearest the question's words, when
        # the passage that answers was not retrieved). A concise answer picks a phrase of its
        # sentence, which need not be about the question as a whole: locality reads that.
        features["sentence_relevance"] = 0.0 if words.features["concise"] else features["evidence_relevance"]
        features["evidence_nearness"] = evidence_nearness(question, answering, pool, embed, sentences)
        features["reader"] = _reader_signal(question, words, features, getattr(embed, "model_name", ""))
    if model_support is not None:
        features["model_log_odds"] = log_odds(model_support)
    if entail is not None and adding:
        pairs = [(r.evidence.text, claim_statement(question, r.claim.text)) for r in adding if r.evidence is not None]
        features["nli_log_odds"] = log_odds(float(entail(pairs).min())) if pairs else -LOG_ODDS_LIMIT
    return Reading(features, words.read, expected, False, words.contradiction_reason, words.adds_nothing,
                   words.swapped, words.bare_reply, _polarity(question, tuple(contexts)) if words.bare_reply else None)


@dataclass(frozen=True)
class Words:
    """What the answer's words say against the contexts' words: every signal but the semantic
    ones and the models', and what those read."""

    features: dict[str, float]  # copied before it is added to
    expected: Expected
    abstains: bool
    terms: tuple[Term, ...] = ()
    pool: tuple[ContextSentence, ...] = ()
    read: tuple[ClaimEvidence, ...] = ()
    adding: tuple[ClaimEvidence, ...] = ()
    contradiction_reason: str | None = None
    adds_nothing: bool = True
    swapped: tuple[str, str] | None = None
    bare_reply: str | None = None

    def answering(self) -> ClaimEvidence:
        return _answering(self.adding)


def reader_phrase(words: Words) -> Phrase | None:
    """Where the answering claim's additions stand in its evidence sentence: what the reader reads."""
    if not words.adding:
        return None
    answering = words.answering()
    return phrase_in(answering.evidence.text, answering.claim.added_words) if answering.evidence else None


READER_FORMS = ("phrase", "restated")  # a sentence of a passage picks no phrase of it
# The reader's logits are standardized on the groups it was fitted on (mean 0, deviation 1): past
# two deviations either way one says no more.
READER_SPAN = 2.0


def reader_input(question: str, words: Words, features: Mapping[str, float]) -> tuple[str, Phrase] | None:
    """What the reader reads of an answer whose words read `words` and `features`: None for a
    passage's sentence, a bare yes or no (read as its question's statement, which asks the reader
    nothing), an answer whose additions its evidence does not hold, and one whose additions span
    more words there than a phrase has (a passage's sentence restating the question)."""
    if words.bare_reply is not None or answer_form(features) not in READER_FORMS:
        return None
    if features.get("unsupported_atom"):  # its value is not where the evidence holds the phrase read ("7" of "7-inch")
        return None
    phrase = reader_phrase(words)
    if phrase is None or len(phrase.phrase.split()) > PHRASE_WORDS:
        return None
    return question, phrase


def reader_inputs(question: str, answer: str, contexts: Sequence[str]) -> tuple[str, Phrase] | None:
    """reader_input for `answer` on `contexts`, as read_answer will read it (intake reads a batch's at once)."""
    words = read_words(question, answer, tuple(contexts))
    return None if words.abstains else reader_input(question, words, words.features)


def _reader_signal(question: str, words: Words, features: Mapping[str, float], model_name: str) -> float:
    reader = shipped_reader(model_name) if model_name else None
    read = reader_input(question, words, features) if reader is not None else None
    if reader is None or read is None:
        return 0.0
    return float(np.clip(reader.read([read])[0] / READER_SPAN, -1.0, 1.0))


def _option_reader_signal(question: str, answer: str, contexts: Sequence[str], expected: Expected,
                          model_name: str) -> float:
    """The "option_reader" signal: each of the question's options read as if it were the answer."""
    reader = shipped_reader(model_name) if model_name else None
    chosen = chosen_option(expected, answer)
    if reader is None or chosen is None:
        return 0.0
    reads = []
    for option in expected.options:
        read = reader_inputs(question, option, contexts)
        if read is None:  # an option the reader cannot read leaves nothing to order
            return 0.0
        reads.append(read)
    logits = reader.read(reads)
    others = max(logit for i, logit in enumerate(logits) if i != chosen)
    return float(np.clip((logits[chosen] - others) / READER_SPAN, -1.0, 1.0))


def _answering(adding: Sequence[ClaimEvidence]) -> ClaimEvidence:
    """The claim that answers: the one whose evidence is most about the question."""
    return max(adding, key=lambda r: (r.question_coverage, r.locality))


# Intake reads a batch's answers on CRAG's chunks to learn what the judge will embed
# (services.intake.batch), then for real on the same chunks: the real reading finds the first
# here. A batch holds at most 512 records; 1,024 readings of SQuAD-sized contexts kept ~30 MB.
@lru_cache(maxsize=1024)
def read_words(question: str, answer: str, contexts: tuple[str, ...]) -> Words:
    """Every signal of `answer` that the words decide, with what the semantic ones read."""
    expected = expected_kind(question)
    features = dict.fromkeys(FEATURES + FORM_SIGNALS, 0.0)
    if is_abstention(answer, question):
        features["abstains"] = 1.0
        return Words(features, expected, True)
    said, bare_reply = what_is_said(question, answer)
    terms = query_terms(question)
    pool = context_sentences(contexts)
    asked = asked_weights(terms, pool, avoid=frozenset(s for option in expected.options for s in tokenize(option)))
    # The option an answer picks is what it adds: read it against the question without its options.
    unoptioned = without_options(question, expected.options)
    claims = answer_claims(unoptioned, said)
    restates = not any(c.added_stems or c.added_atoms for c in claims)
    if restates:
        # An answer drawn from the question's own words ("characteristic polynomial" for
        # "characteristic polynomial coefficients of a matrix", or the question restated with
        # it) picks one of the things the question names or only repeats them: its words are
        # what the contexts must support. Read against the question, a restatement adding
        # nothing has no signal at all and scores as the least likely right of all answers,
        # whatever its contexts say.
        claims = answer_claims("", said)
    read = tuple(read_claim(question, terms, c, pool, contexts, asked=asked, given=unoptioned) for c in claims)
    adding = tuple(r for r in read if r.claim.added_stems or r.claim.added_atoms)
    concise = is_concise(said) and bare_reply is None
    features["concise"] = float(concise)
    features.update(form_signals(unoptioned, said, bare_reply=bare_reply is not None))
    all_atoms = [a for r in adding for a in r.claim.added_atoms]
    missing_atoms = [a for r in adding for a in r.unsupported_atoms]
    features["unsupported_atom"] = float(bool(missing_atoms))
    features["atom_support"] = 1.0 - len(missing_atoms) / len(all_atoms) if all_atoms else 1.0
    if adding:
        features["word_support"] = min(r.word_support for r in adding)
        features["evidence_support"] = min(r.evidence_support for r in adding)
        answering = _answering(adding)
        features["question_coverage"] = answering.question_coverage
        # The names and codes the question asks about ("PROFINET", "SRVO-045") are what an
        # answer about something else most often lacks: their share in the evidence sentence.
        features["entity_coverage"] = _entity_coverage(terms, answering)
        # A name from the passage's wrong sentence is supported; its sentence is not the one
        # about the question. 0 when the evidence is the sentence that names most of it.
        features["coverage_margin"] = answering.question_coverage - answering.best_coverage
        features["locality"] = max(r.locality for r in adding)
        features["locality_margin"] = float(np.clip(max(r.locality - r.rival_locality for r in adding), -1.0, 1.0))
    features["type_fit"] = type_fit(expected, tuple(all_atoms), words_not_asked(unoptioned, said), said if concise else "")
    if expected.kind == CHOICE:
        features["option_margin"] = _option_margin(expected, answer, asked, pool)
    features["reversal"] = float(any(r.reversal for r in read))
    # Against the question without its options: the option a swap picks is not the question's word.
    swapped = next((c for c in (changed_quote(r.claim.text, contexts, unoptioned) for r in read) if c), None)
    features["quote_changed"] = float(swapped is not None)
    # The rules read a statement against the question it restates ("What did X not do?" against
    # "X did Y."). A concise answer restates nothing: on the development set they flagged its
    # right answers as often as its wrong ones (91 against 90, hard), and capped both.
    found = None if concise or bare_reply else contradiction(question, terms, [r.claim.text for r in read])
    if found is not None:
        features["contradiction"] = 1.0 if found.hard else 0.5
    # A concise answer picks something; a sentence that adds nothing to its question is capped.
    adds_nothing = not adding or (restates and not concise)
    return Words(features, expected, False, tuple(terms), tuple(pool), read, adding,
                 found.reason if found else None, adds_nothing, swapped, bare_reply)


def _polarity(question: str, contexts: tuple[str, ...]) -> Polarity:
    """The question's statement read as an answer to nothing: all of it is for the contexts to hold."""
    said = read_words("", statement(question), contexts)
    return read_polarity(said.read, said.swapped, said.features["word_support"])


def texts_read_alone(question: str, answer: str) -> list[str]:
    """What reading `answer` (read_answer, and adequacy.answer_relevance) embeds alone, whatever
    its contexts, give or take a claim: the question, with and without its options, each claim
    (services.judging.semantic) and the answer's plain text. Its contexts' sentences are read in
    their contexts. Intake encodes these with its batch's contexts (services.intake.batch), before
    CRAG decides which contexts the judge reads."""
    unoptioned = without_options(question, expected_kind(question).options)
    said = what_is_said(question, answer)[0]
    texts = [question, unoptioned, *(c.text for c in answer_claims(unoptioned, said)), " ".join(answer_sentences(answer))]
    return [t for t in dict.fromkeys(texts) if t.strip()]


def log_odds(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return float(np.clip(np.log(p / (1 - p)), -LOG_ODDS_LIMIT, LOG_ODDS_LIMIT))


def _option_margin(expected: Expected, answer: str, asked: Mapping[str, float],
                   pool: Sequence[ContextSentence]) -> float:
    """How much nearer the question's words the contexts put the chosen option than the other
    (-1..1; 0 when the answer names neither or both)."""
    chosen = chosen_option(expected, answer)
    if chosen is None:
        return 0.0
    reach = []
    for option in expected.options:
        own = tuple(tokenize(option))
        reach.append(max((locality(asked, own, s) for s in pool if set(own) & set(s.stems)), default=0.0))
    others = [r for i, r in enumerate(reach) if i != chosen]
    return float(np.clip(reach[chosen] - max(others, default=0.0), -1.0, 1.0))


def _entity_coverage(terms: Sequence[Term], answering: ClaimEvidence) -> float:
    entities = [t for t in terms if t.entity]
    if not entities:
        return 1.0
    if answering.evidence is None:
        return 0.0
    text = f"{answering.evidence.speaks_of} {answering.claim.text}"
    return coverage(entities, text)


