"""The offline (extractive) backend, with the real embedding model on the demo robot manuals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import services
from services.answering.llm.base import create_backend, registered_backends
from services.answering.offline import MODEL_ID, PROMPT_VERSION, OfflineBackend
from services.corpus.chunking import chunk_text
from services.domain import Hit
from services.errors import InputError
from services.retrieval.expansion import expansion_terms

CORPUS = Path(services.__file__).parent / "demo_data" / "corpus"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def backend() -> OfflineBackend:
    return OfflineBackend(MODEL)


@pytest.fixture(scope="module")
def count_tokens():  # type: ignore[no-untyped-def]
    from services.retrieval.embedding import token_counter

    return token_counter(MODEL)


def hits(texts: list[str]) -> list[Hit]:
    return [Hit(chunk_id=100 + i, document_id=10 + i, external_id=f"doc-{i}", title=f"doc {i}", text=t,
                rank=i + 1, fused_score=1.0 / (i + 1)) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def corpus_hits(count_tokens):  # type: ignore[no-untyped-def]
    """The first chunks of some manual pages, as ingest would cut them."""

    def load(*names: str, per_file: int = 2) -> list[Hit]:
        texts = []
        for name in names:
            texts.extend(c.text for c in chunk_text((CORPUS / name).read_text(), count_tokens=count_tokens)[:per_file])
        return hits(texts)

    return load


SERVO = ("srvo-062-encoder-backup-lost.md", "srvo-063-pulsecoder-battery-low.md", "pulsecoder-battery-replacement.md")


def test_registered_and_named_for_what_it_is() -> None:
    assert "offline" in registered_backends()
    backend = create_backend("offline")
    assert isinstance(backend, OfflineBackend)
    assert (backend.name, backend.label, backend.is_llm, backend.model) == (
        "offline", "offline (extractive)", False, MODEL_ID)
    with pytest.raises(InputError):
        OfflineBackend(max_sentences=0)
    with pytest.raises(InputError):
        OfflineBackend(mmr_lambda=1.5)


def test_citations_quote_the_chunk_they_point_at(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    generation = backend.generate("What does SRVO-062 mean and how do I clear it?", chunks)
    assert generation.answer and generation.citations
    assert len(generation.citations) <= backend.max_sentences
    for citation in generation.citations:
        chunk = chunks[citation.marker - 1]
        assert citation.quote in chunk.text
        assert (citation.chunk_id, citation.document_id, citation.external_id) == (
            chunk.chunk_id, chunk.document_id, chunk.external_id)
    markers = [int(m) for m in re.findall(r"\[(\d+)\]", generation.answer)]
    assert markers == [c.marker for c in generation.citations]
    assert markers == sorted(markers)  # read in chunk rank order
    assert "SRVO-062" in generation.answer


def test_table_rows_are_answers_with_their_headers(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits("reducer-grease-replacement.md")
    generation = backend.generate("How much grease does axis J2 of a KX-40 take?", chunks)
    assert "1,050 ml" in generation.answer
    row = next(c for c in generation.citations if "1,050 ml" in c.quote)
    assert row.quote in chunks[row.marker - 1].text
    assert "Axis: J2; Quantity: 1,050 ml" in generation.answer


def test_mmr_does_not_pick_near_duplicates() -> None:
    chunks = hits([
        "The backup battery pack must be replaced every 2 years. It sits in the robot base.",
        "The backup battery pack has to be replaced every 2 years. Order part KR-P-0361.",
        "The replacement backup battery pack is part number KR-P-0361.",
        "Axis: J1; Quantity: 1,400 ml\nAxis: J2; Quantity: 1,050 ml",
    ])
    backend = OfflineBackend(MODEL, max_sentences=4)
    answer = backend.generate("How often is the backup battery pack replaced, and what is its part number?",
                              chunks).answer
    assert sum(d in answer for d in ("must be replaced every 2 years", "has to be replaced every 2 years")) == 1
    assert "part number KR-P-0361" in answer
    # Rows of one table are as similar as reworded sentences, but state different values.
    rows = backend.generate("How much grease do axes J1 and J2 take?", chunks).answer
    assert "1,400 ml" in rows and "1,050 ml" in rows


def test_extracted_sentence_is_supported_and_invented_one_is_not(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    query = "What does SRVO-062 mean?"
    extracted = backend.generate(query, chunks).answer
    grounded = backend.reflect(query, extracted, chunks)
    assert grounded.answer_grounded and not grounded.hallucination_detected
    assert min(grounded.sentence_support) >= 0.9

    invented = "SRVO-062 means that the encoder backup supply was lost. [1] The robot is painted purple on Tuesdays. [2]"
    reflection = backend.reflect(query, invented, chunks)
    assert len(reflection.sentence_support) == 2
    assert reflection.sentence_support[0] >= 0.6
    assert reflection.sentence_support[1] < 0.4
    assert reflection.hallucination_detected and not reflection.answer_grounded
    assert reflection.sources_cited == ("1", "2")
    # The judge names the invented name (services.judging): the reason agrees with the verdict.
    assert "'Tuesdays' appears in no context" in reflection.reflection_reason
    assert reflection.needs_regeneration and reflection.reflection_score < 0.5  # never approved
    assert reflection.reflection_score < grounded.reflection_score


def test_reflection_prefers_the_question_the_chunks_answer(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    scores = {}
    for query in ("What does SRVO-062 mean and how do I clear it?",
                  "How do I configure PROFINET I/O communication on the KR-C5 controller?"):
        answer = backend.generate(query, chunks).answer
        scores[query] = backend.reflect(query, answer, chunks)
    answered, unanswered = scores.values()
    # Both answers are quoted from the chunks, so both are grounded; the one the chunks answer is
    # more likely right. (The margin is small: the README's judge section says why. Since the
    # refit on grounded wrong restatements, judge-2026-11-28T14:13:21Z, this answer, which says
    # what SRVO-062 means but not how to clear it, reflects at 0.79, under the balanced preset's
    # 0.8: the loop tries once more.)
    assert answered.reflection_score > unanswered.reflection_score
    assert answered.answer_grounded and not answered.hallucination_detected
    query = "How do I configure PROFINET I/O communication on the KR-C5 controller?"
    grade = backend.grade(query, backend.generate(query, chunks).answer)
    assert grade.score <= 2 and "PROFINET" in grade.gaps  # grading says what the question asked for


def test_reflection_reason_names_missing_question_terms(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    answer = "The backup battery pack KR-P-0361 sits in the robot base. [1]"
    query = "What insulation resistance should a SRVO-021 motor have?"
    reflection = backend.reflect(query, answer, chunks)
    # Grounded, but not an answer: the judge doubts it and says why in terms of the question ...
    assert reflection.answer_grounded and reflection.needs_regeneration
    assert "what the question asks" in reflection.reflection_reason
    # ... and grading names the question's terms the answer leaves out, as refine_query picks them up.
    gaps = backend.grade(query, answer).gaps
    assert "SRVO-021" in gaps and "insulation" in gaps


def test_grades_order_answers_by_how_well_they_address_the_question(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    query = "At what battery voltage does SRVO-063 come up, and what is the part number of the battery pack?"
    good = backend.generate(query, corpus_hits(*SERVO)).answer
    partial = "The controller main board has its own memory backup battery, a coin cell. [1]"
    off_topic = "Reducer grease KG-R2 is supplied in 400 ml cartridges. [1]"
    grades = [backend.grade(query, a) for a in (good, partial, off_topic, "")]
    assert grades[0].score > grades[1].score > grades[2].score == grades[3].score == 1
    assert grades[0].score >= 4 and grades[0].label in ("GOOD", "EXCELLENT")
    assert "SRVO-063" in grades[1].gaps and "battery" not in grades[1].gaps
    assert 1 <= len(grades[1].refinements) <= 3
    assert grades[1].refinements[0].startswith("SRVO-063 ")  # the gap, with the question's other terms
    assert grades[3].gaps == grades[2].gaps


def test_identify_gaps_finds_what_neither_answer_nor_chunks_cover(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    query = "How do I configure PROFINET after SRVO-062 on the controller?"
    gaps = backend.identify_gaps(query, "", chunks)
    assert "PROFINET" in gaps
    assert "SRVO-062" not in gaps and "controller" not in gaps  # the chunks cover them
    covered = "What does SRVO-062 mean?"
    assert backend.identify_gaps(covered, backend.generate(covered, chunks).answer, chunks) == []


def test_refine_query_adds_gap_and_expansion_terms(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    query = "How do I clear the encoder alarm?"
    terms = expansion_terms(query, chunks)
    assert 1 <= len(terms) <= 5
    assert not {t.lower() for t in terms} & {"clear", "encoder", "alarm"}  # new terms only
    assert all(t in " ".join(c.text for c in chunks[:3]) or t.lower() in " ".join(c.text for c in chunks[:3]).lower()
               for t in terms)  # surface words, not stems
    # The offline judge's reason quotes what the answer lacks; those terms go in first.
    refined = backend.refine_query(query, reason="answer does not mention 'J2', 'interval' from the question", gaps=(),
                                   expansion_terms=terms)
    assert refined != query and refined.startswith(query + " J2 interval")
    assert any(t in refined for t in terms)
    assert len(refined) <= 300
    none: tuple[str, ...] = ()
    assert backend.refine_query(query, reason="", gaps=("quick master", "witness marks"),
                                expansion_terms=none) == query + " quick master witness marks"
    many = tuple(f"term{i}" for i in range(200))
    assert len(backend.refine_query(query, reason="", gaps=none, expansion_terms=many)) <= 300
    assert backend.refine_query(query, reason="", gaps=none, expansion_terms=none) == query
    # Gaps arrive as they are written, quotes and all: nothing is quoted and parsed back.
    refined = backend.refine_query(query, reason="sentence 2 is weakly supported (0.31)",
                                   gaps=("PROFINET", "operator's panel"), expansion_terms=("fieldbus",))
    assert refined == query + " PROFINET operator's panel fieldbus"
    # A gap is repeated even when the query has it (it weights the facet up); an expansion term only when new.
    assert backend.refine_query(query, reason="", gaps=("encoder",),
                                expansion_terms=("alarms", "battery")) == query + " encoder battery"


@pytest.mark.parametrize(("query", "expected"), [
    ("What does SRVO-062 mean and how do I clear it?",
     ["What does SRVO-062 mean?", "How do I clear SRVO-062?"]),
    ("What does SRVO-062 mean? How do I clear it?",
     ["What does SRVO-062 mean?", "How do I clear SRVO-062?"]),
    ("How often should reducer grease be replaced on axis J2 of a KX-40, and how much grease does J2 take?",
     ["How often should reducer grease be replaced on axis J2 of a KX-40?", "How much grease does J2 take?"]),
    ("My program keeps pausing with MOTN-023 on a linear move. What causes it and how do I avoid it?",
     ["What causes MOTN-023?", "How do I avoid MOTN-023?"]),
    ("What is the default RPI, the connection timeout and the retry count?",
     ["What is the default RPI?", "What is the connection timeout?", "What is the retry count?"]),
    ("How do I jog the robot in T1; how do I switch to AUTO?",
     ["How do I jog the robot in T1?", "How do I switch to AUTO?"]),
    ("How do I back up the controller and restore a single program?",
     ["How do I back up the controller?", "How do I restore a single program?"]),
    ("What is the difference between a SERVO-C0 alarm and a STOP-C1 alarm?",
     ["What is the difference between a SERVO-C0 alarm and a STOP-C1 alarm?"]),
    ("What insulation resistance should the motor and cable have when troubleshooting SRVO-021?",
     ["What insulation resistance should the motor and cable have when troubleshooting SRVO-021?"]),
    ("Which pirates from Denmark, Iceland and Norway settled in Normandy?",
     ["Which pirates from Denmark, Iceland and Norway settled in Normandy?"]),
    ("What is the maximum CALL nesting depth, and can it be increased?",
     ["What is the maximum CALL nesting depth?", "Can it be increased?"]),
])
def test_decompose(backend, query: str, expected: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert backend.decompose(query) == expected


def test_empty_inputs(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO)
    assert backend.generate("What does SRVO-062 mean?", []).answer == ""
    assert backend.generate("", chunks).answer == ""
    assert backend.generate("What does SRVO-062 mean?", hits(["## Meaning", "| a | b |\n|---|---|"])).answer == ""
    nothing = backend.reflect("What does SRVO-062 mean?", "", chunks)
    assert (nothing.reflection_score, nothing.answer_grounded, nothing.needs_regeneration) == (0.0, False, True)
    assert nothing.reflection_reason == "the answer abstains: it claims nothing to check"
    unsupported = backend.reflect("What does SRVO-062 mean?", "SRVO-062 means the encoder lost power. [1]", [])
    assert unsupported.hallucination_detected and unsupported.sentence_support == (0.0,)
    assert backend.grade("What does SRVO-062 mean?", "").score == 1
    assert backend.identify_gaps("", "", []) == []
    assert backend.decompose("") == [] and backend.decompose("   ") == []
    assert backend.refine_query("", reason="", gaps=(), expansion_terms=()) == ""


def test_an_off_topic_question_gets_no_answer(backend, corpus_hits) -> None:  # type: ignore[no-untyped-def]
    generation = backend.generate("What tip-dressing interval suits spot-welding guns?", corpus_hits(*SERVO))
    assert generation == type(generation)(answer="", citations=())


def test_deterministic(corpus_hits) -> None:  # type: ignore[no-untyped-def]
    chunks = corpus_hits(*SERVO, "mastering-single-axis.md")
    query = "Why must the controller stay on while the pulsecoder batteries are changed?"
    runs = []
    for _ in range(2):
        backend = OfflineBackend(MODEL)
        generation = backend.generate(query, chunks)
        runs.append((generation, backend.reflect(query, generation.answer, chunks),
                     backend.grade(query, generation.answer), backend.identify_gaps(query, generation.answer, chunks),
                     backend.decompose(query), expansion_terms(query, chunks)))
    assert runs[0] == runs[1]


def test_every_operation_is_logged(corpus_hits) -> None:  # type: ignore[no-untyped-def]
    backend = OfflineBackend(MODEL)
    chunks = corpus_hits(*SERVO)
    query = "What does SRVO-062 mean?"
    answer = backend.generate(query, chunks).answer
    backend.reflect(query, answer, chunks)
    backend.grade(query, answer)
    backend.identify_gaps(query, answer, chunks)
    backend.refine_query(query, reason="", gaps=(), expansion_terms=("battery",))
    backend.decompose(query)
    calls = backend.log.drain()
    assert [c.operation for c in calls] == ["generate", "reflect", "grade", "identify_gaps", "refine_query", "decompose"]
    assert all(c.backend == "offline" and c.model == MODEL_ID and c.prompt_version == PROMPT_VERSION for c in calls)
    assert all(c.outcome == "ok" and c.latency_ms >= 0 and c.temperature == 0.0 for c in calls)


def test_a_negated_question_is_covered_only_by_a_negated_sentence() -> None:
    from services.judging import _lexical as lex

    terms = lex.query_terms("Which axes did the controller not calibrate?")
    assert [t.surface for t in terms if t.negation] == ["not"]
    negated, positive = "The controller did not calibrate axes J5 and J6.", "The controller calibrated axes J1 to J6."
    assert lex.coverage(terms, negated) == 1.0 > lex.coverage(terms, positive)
    assert lex.missing(terms, [positive]) == ["not"]
    assert not any(t.negation for t in lex.query_terms("Which axes did the controller calibrate?"))
    # The stem of a negated auxiliary is phrasing, not something an answer should repeat.
    assert [t.surface for t in lex.query_terms("Which axis didn't move?")] == ["axis", "move", "not"]


def test_a_negated_question_needs_the_negation_in_its_best_matching_sentence() -> None:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradiction

    query = "Which axes did the controller not calibrate?"
    terms = lex.query_terms(query)
    negated, positive = "The controller did not calibrate axes J5 and J6.", "The controller calibrated axes J1 to J6."
    assert contradiction(query, terms, [negated]) is None
    found = contradiction(query, terms, [positive])
    assert found is not None and found.kind == "negated_question" and "negated" in found.reason
    # A negation in some other sentence of the answer does not turn the matching one around.
    assert contradiction(query, terms, [positive, "Grease is not needed."]) is not None
    asked_positive = "Which axes did the controller calibrate?"
    assert contradiction(asked_positive, lex.query_terms(asked_positive), [positive]) is None


def test_without_asks_for_a_condition_and_is_a_kind_of_its_own() -> None:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradiction

    # Issue 19, demo q06: "without false alarms" is a condition on the procedure.
    query = "How do I make collision detection more sensitive without getting false SRVO-045 alarms?"
    found = contradiction(query, lex.query_terms(query), ["SRVO-045 false collision alarms are typical."])
    assert found is not None and found.kind == "without_condition" and not found.hard
    both = "Which axes can not be mastered without a fixture?"
    found = contradiction(both, lex.query_terms(both), ["Axes J1 to J6 can be mastered with a fixture."])
    assert found is not None and found.kind == "negated_question" and found.hard


def test_a_question_word_turned_around_in_the_best_matching_sentence_is_a_contradiction() -> None:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradiction

    query = "Which axis has the lowest payload rating?"
    terms = lex.query_terms(query)
    highest = "Axis J6 has the highest payload rating of the arm."
    found = contradiction(query, terms, [highest])
    assert found is not None and (found.kind, found.asked, found.said) == ("opposite_word", "lowest", "highest")
    assert "'lowest'" in found.reason and "'highest'" in found.reason
    assert contradiction(query, terms, ["Axis J1 has the lowest payload rating of the arm."]) is None
    # Only the sentence that matches the question best decides.
    assert contradiction(query, terms, ["Axis J1 has the lowest payload rating.", "Its highest speed is 2 m/s."]) is None


def test_opposite_words_are_read_only_where_written_in_lower_case() -> None:
    from services.judging._opposites import turned_around

    assert turned_around("What happens before the battery swap?", "Calibration runs after the battery swap.") == (
        "before", "after")
    # Names: "South Carolina", "New York" are places, not directions or ages.
    assert turned_around("Which port in South Carolina was used?", "The North Carolina port was used.") is None
    assert turned_around("Which old port was used?", "The port of New York was used.") is None
    # A question naming both sides contrasts them; it does not ask about one.
    assert turned_around("Does it run before or after the swap?", "It runs after the swap.") is None
    # A sentence's first word is read in lower case.
    assert turned_around("What happens before the swap?", "After the swap, calibration runs.") == ("before", "after")


def test_a_one_part_question_needs_one_sentence_that_names_what_it_asks_about(backend) -> None:  # type: ignore[no-untyped-def]
    # "J6" and "payload rating" are both in the answer, but no one sentence says J6's rating.
    scattered = "Axis J1 carries a payload rating of 12 kg. [1] Axis J6 holds the tool flange. [1]"
    together = "Axis J6 carries a payload rating of 12 kg. [1] Axis J1 holds the tool flange. [1]"
    query = "What payload rating does axis J6 carry?"
    assert backend.grade(query, scattered).score < backend.grade(query, together).score
    assert "J6" in backend.grade(query, scattered).gaps and not backend.grade(query, together).gaps
    # A two-part question is answered by its parts: each may sit in a sentence of its own.
    two_part = "What payload rating does axis J1 carry and what does axis J6 hold?"
    assert not backend.grade(two_part, scattered).gaps


def test_a_year_ordinal_or_number_other_than_the_question_names_is_a_swapped_value() -> None:
    from services.judging._opposites import swapped_value

    assert swapped_value("Which robot was retired in 2014?", "The R-30 robot was retired in 2004.") == ("2014", "2004")
    assert swapped_value("What does the third axis carry?", "The second axis carries the tool.") == ("third", "second")
    assert swapped_value("What did Article 20 require?", "Article 12 required a recall.") == ("20", "12")
    assert swapped_value("Which check runs every three months?", "The check runs every 6 months.") == ("3", "6")
    assert swapped_value("Which check runs every three months?", "The check runs every 3 months.") is None
    # The question's own value, a decade and one of its years, or a value of another kind is no swap.
    assert swapped_value("Which robot was retired in 2014?", "In 2014 the R-30 was retired after 12 years.") is None
    assert swapped_value("What changed in the 1980s?", "In 1984 the line was automated.") is None
    assert swapped_value("Who first calibrated axis 3?", "Axis 3 was calibrated in 1999 by Ada.") is None
    # Digits inside a code name the code: SRVO-021 and KR-P-0361 are not two values.
    assert swapped_value("What does alarm SRVO-021 mean?", "Battery pack KR-P-0361 sits in the base.") is None


def test_a_word_replaced_inside_the_question_s_phrase_is_a_substitution() -> None:
    from services.judging._opposites import substituted

    assert substituted("What do killer B cells recognize?", "Killer T cells recognize antigens.") == ("B", "T")
    assert substituted("What does the upper arm motor drive?", "The forearm motor drives the wrist.") is None  # one side only
    # The question's last word has a phrase on one side only; two words of it are enough.
    assert substituted("What sits in the top of a driver?", "A plug sits in the top of a boiler.") == ("driver", "boiler")
    assert substituted("What is the name of a driver?", "A boiler is named.") is None
    # A name replaced by a name needs its phrase on one side only, reaching two content words.
    assert substituted("Who can enforce the American Union law?", "The European Union law is enforced by courts.") == (
        "American", "European")
    assert substituted("Who can enforce the american union law?", "The European union law is enforced.") is None
    # Spelling variants of one word are not a swap.
    assert substituted("Who made Robert of Jumieges earl?", "Robert of Jumièges was made earl.") is None
    assert substituted("How do they harmonize the rules?", "They harmonise the rules.") is None
    # Every content word present: nothing was replaced.
    assert substituted("What do killer T cells recognize?", "Killer T cells recognize antigens.") is None


def test_irregular_and_derived_forms_cover_a_question_term() -> None:
    from services.judging import _lexical as lex

    began = "Thus, on 1 August 1944, the Warsaw Uprising began."
    assert lex.coverage(lex.query_terms("When did the Warsaw Uprising begin?"), began) == 1.0
    assert not lex.missing(lex.query_terms("When was the caliphate abolished?"), ["the abolition of the caliphate in 1924"])
    # A shared beginning is not a shared root: "state" is not "station".
    assert lex.missing(lex.query_terms("Which state was named?"), ["The station was named."]) == ["state"]


def test_a_negating_prefix_turns_a_word_around() -> None:
    from services.judging._opposites import turned_around

    assert turned_around("How were non-local networks set up?", "Local area networks were set up ad hoc.") == (
        "non-local", "local")
    assert turned_around("Which checks are necessary?", "The checks were unnecessary.") == ("necessary", "unnecessary")
    assert turned_around("How are packets sent on a non shared medium?", "On a shared medium packets collide.") == (
        "non-shared", "shared")
    assert turned_around("Which two states are distinguishable?", "The two states are indistinguishable.") == (
        "distinguishable", "indistinguishable")
    # A root too short to be a word of its own, or a prefixed word the question also has, is no opposite.
    assert turned_around("Which unit failed?", "It failed.") is None
    assert turned_around("How are the takes recorded?", "The intakes are recorded.") is None
    assert turned_around("Is it legal or illegal?", "It is illegal.") is None


def test_unable_negates_a_question() -> None:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradiction

    query = "Which cells are unable to remember pathogens?"
    terms = lex.query_terms(query)
    assert any(t.negation for t in terms)
    assert contradiction(query, terms, ["Memory cells remember each pathogen."]) is not None
    assert contradiction(query, terms, ["Naive cells cannot remember pathogens."]) is None


def test_a_question_naming_both_ways_is_not_negated() -> None:
    from services.judging import _lexical as lex

    assert not any(t.negation for t in lex.query_terms("What decides whether or not the axis moves?"))
    assert not any(t.negation for t in lex.query_terms("What limits how fast a robot may or may not move?"))
    assert any(t.negation for t in lex.query_terms("Which axes may not move?"))


def test_a_negation_the_question_does_not_ask_about_makes_no_negated_question() -> None:
    from services.judging import _lexical as lex
    from services.judging._contradiction import contradiction

    def asks_negated(query: str) -> bool:
        return any(t.negation for t in lex.query_terms(query))

    # A why's negation is its premise: the answer gives a cause.
    assert not asks_negated("Why didn't the axis move?")
    why = "Why doesn't str.replace change my string?"
    assert contradiction(why, lex.query_terms(why), ["Strings are immutable, so str.replace returns a new string."]) is None
    # A negated condition asks nothing; a sentence stating the condition unnegated contradicts it.
    query = "Which element does list.pop() remove when I don't pass an index?"
    assert not asks_negated(query) and not asks_negated("If my class doesn't define __eq__, how does == decide?")
    terms = lex.query_terms(query)
    assert contradiction(query, terms, ["By default the last item is removed and returned."]) is None
    found = contradiction(query, terms, ["When you pass an index, list.pop() removes the item at that index."])
    assert found is not None and found.kind == "negated_question"
    # "When" that asks is not a condition.
    assert asks_negated("When didn't the controller calibrate axis J5?")
    assert asks_negated("What did the controller not calibrate, if anything?")


def test_negations_read_what_a_text_denies() -> None:
    from services.judging._lexical import negations

    # Contracted and fused forms deny alike: a claim with one where its context has another turns nothing around.
    assert negations("It doesn't move.") == negations("It does not move.") == negations("It can't move.") \
        == negations("It cannot move.") == {"not"}
    # A negator written as a name is no negation: a value, an operator.
    assert negations("It returns None if the key is absent.") == frozenset()
    assert negations("Bitwise NOT flips every bit.") == frozenset()
    assert negations("None of the axes moved. Not one.") == {"none", "not"}


SWAP = "The controller calibrated axes J1 to J4 after the battery swap. [1]"
RETIRED = "The R-30 controller was retired in 2004 after a recall. [1]"
KILLER = "Killer T cells recognize infected cells. [1]"
CHECK = "The brake check runs every 6 months on each axis. [1]"
BOILER = "A safety plug sits in the top of a boiler. [1]"


def _judge_both(backend, answer: str, asked: str, contradicting: str):  # type: ignore[no-untyped-def]
    chunks = hits([re.sub(r" \[1\]$", " Axes J5 and J6 were skipped.", answer)])
    return backend.reflect(asked, answer, chunks), backend.reflect(contradicting, answer, chunks)


@pytest.mark.parametrize(("answer", "asked", "contradicting", "named"), [
    (SWAP, "Which axes did the controller calibrate after the battery swap?",
     "Which axes did the controller not calibrate after the battery swap?", ("negated", "opposite")),
    (RETIRED, "Why was the R-30 controller retired in 2004?", "Why was the R-30 controller retired in 2014?",
     ("'2014'", "'2004'")),
    (KILLER, "What do killer T cells recognize?", "What do killer B cells recognize?", ("'B'", "'T'")),
])
def test_an_answer_contradicting_the_question_by_a_rule_that_holds_is_neither_approved_nor_graded_well(  # type: ignore[no-untyped-def]
        backend, answer: str, asked: str, contradicting: str, named: tuple[str, ...]) -> None:
    straight, contradicted = _judge_both(backend, answer, asked, contradicting)
    assert contradicted.reflection_score <= 0.4 < straight.reflection_score
    assert contradicted.needs_regeneration and all(word in contradicted.reflection_reason for word in named)
    assert backend.grade(contradicting, answer).score <= 2 < backend.grade(asked, answer).score


@pytest.mark.parametrize(("answer", "asked", "contradicting", "named"), [
    (SWAP, "Which axes did the controller calibrate after the battery swap?",
     "Which axes did the controller calibrate before the battery swap?", ("'before'", "'after'")),
    (CHECK, "Which brake check runs every six months?", "Which brake check runs every three months?", ("'3'", "'6'")),
    (BOILER, "What sits in the top of a boiler?", "What sits in the top of a driver?", ("'driver'", "'boiler'")),
])
def test_an_answer_contradicting_the_question_by_a_soft_rule_is_never_capped(  # type: ignore[no-untyped-def]
        backend, answer: str, asked: str, contradicting: str, named: tuple[str, ...]) -> None:
    from services.judging.judge import CONTRADICTION_CAP
    from services.judging.model import shipped_model

    # A soft rule is one signal of the judge's combination, never the cap: its weight is fitted
    # and held non-positive (the 14:13Z refit gives it 0, README), so it can only lower P.
    _, contradicted = _judge_both(backend, answer, asked, contradicting)
    assert CONTRADICTION_CAP < contradicted.reflection_score and shipped_model().coefficients["contradiction"] <= 0
    assert backend.grade(contradicting, answer).score > 2  # a soft flag does not cap the grade


def test_rule_kinds_are_hard_only_where_they_held_on_both_corpora() -> None:
    from services.judging._contradiction import RULES

    hard = {kind for kind, rule in RULES.items() if rule.hard}
    assert hard == {"negated_question", "negating_prefix", "swapped_year", "swapped_ordinal", "substituted_name"}
    assert all(rule.evidence.demo_right == 0 for rule in RULES.values() if rule.hard)


def test_words_naming_the_kind_of_answer_wanted_are_not_terms_an_answer_must_repeat() -> None:
    from services.judging import _lexical as lex

    surfaces = [t.surface for t in lex.query_terms("In what year was the name of the valve type changed?")]
    assert surfaces == ["valve", "changed"]
    answer = "The relief valve was renamed, and its design changed in 1952."
    assert lex.coverage(lex.query_terms("What type of valve changed in 1952?"), answer) == 1.0
