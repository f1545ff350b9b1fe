"""Tests for services.corpus.chunking: sentence splitting, packing limits, overlap, termination."""

from __future__ import annotations

from itertools import pairwise

import pysbd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pysbd.lang.english import English
from pysbd.processor import Processor

from services.corpus.chunking import Chunk, chunk_text, split_sentences
from services.errors import InputError


def _words(text: str) -> int:
    return len(text.split())


def _sentence(tag: str, length: int) -> str:
    """A sentence of `length` words whose words are unique to it (so overlap is visible)."""
    return " ".join([tag.capitalize()] + [f"{tag}{i}" for i in range(1, length)]) + "."


def _numbered_text(paragraphs: list[list[list[str]]]) -> str:
    """Paragraphs of sentences; each sentence starts with its own number, so none repeats."""
    counter = iter(range(1_000_000))
    return "\n\n".join(
        " ".join(f"N{next(counter)} {' '.join(words)}." for words in sentences) for sentences in paragraphs
    )


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
_texts = st.lists(
    st.lists(st.lists(_word, min_size=0, max_size=11), min_size=1, max_size=8),
    min_size=1,
    max_size=5,
).map(_numbered_text)


# --- split_sentences ---------------------------------------------------------------------------


def test_split_sentences_keeps_abbreviations_and_splits_sentences() -> None:
    text = "Dr. Smith went to Washington. He arrived at 3 p.m. on Monday. It was fine!"
    assert split_sentences(text) == [
        "Dr. Smith went to Washington.",
        "He arrived at 3 p.m. on Monday.",
        "It was fine!",
    ]


def test_split_sentences_respects_blocks_and_unwraps_hard_wrapped_lines() -> None:
    text = "# Title\nThe Normans were\npeople of France.\n\n- first item\n- second item\n\n12. numbered"
    assert split_sentences(text) == [
        "# Title",
        "The Normans were people of France.",
        "- first item",
        "- second item",
        "12. numbered",
    ]


def test_split_sentences_of_blank_text_is_empty() -> None:
    assert split_sentences(" \n\n\t ") == []


# Abbreviations pysbd knows, near-misses ("edg." vs the regex "e.g"), numbers, punctuation.
_tricky = st.sampled_from(
    "Dr. Mr. no. No. St. e.g. i.e. U.S. p. pp. Jan. etc. vs. art. fig. a.m. 3 12.5 (1) the north "
    "Smith I was known . ? ! : , - Inc. co. al. et edg. e.g ave. Ph.D.".split()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_tricky, min_size=1, max_size=40).map(" ".join))
def test_fast_abbreviation_pass_matches_stock_pysbd(text: str) -> None:
    stock = [s.strip() for s in Processor(text, English).process() if s.strip()]
    assert split_sentences(text) == stock


# Words, and the marks pysbd cuts at besides a sentence's end: quotes, list parentheses, ellipses.
_marked = st.sampled_from(
    "Osaka the scott 'scott' \"None\" class’s it's a) b) (1) (a, b) … . ? ! , ; : - Less Robust 3 12.5 "
    "`a` ``allclose(a, b)`` ha. Ph.D. “quoted” ‘x’ Sturges' x=1".split()
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_marked, min_size=1, max_size=12).map(" ".join))
def test_one_sentence_shortcut_matches_stock_pysbd(text: str) -> None:
    stock = [s.strip() for s in Processor(text, English).process() if s.strip()]
    assert split_sentences(text) == stock


def test_a_block_with_no_sentence_mark_inside_skips_pysbd(monkeypatch: pytest.MonkeyPatch) -> None:
    import services.corpus.chunking as chunking

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("pysbd was asked to split a single sentence")

    monkeypatch.setattr(chunking, "Processor", refuse)
    assert split_sentences("The maker of the robot arm has its head office in Osaka.") == [
        "The maker of the robot arm has its head office in Osaka."]
    assert split_sentences("  Guinness Brewery\n\nset difference ") == ["Guinness Brewery", "set difference"]


def test_split_sentences_matches_stock_segmenter_on_prose() -> None:
    text = (
        "The U.S. Army's No. 3 unit, e.g. the one led by Gen. Smith, moved on Jan. 5. "
        "It reached St. Louis at 4 p.m. and stopped. Mr. and Mrs. Jones saw it (see fig. 2). "
        "Prices rose 2.5 percent vs. last year; the report, pp. 10-12, says so."
    )
    stock = pysbd.Segmenter(language="en", clean=False).segment(text)
    assert split_sentences(text) == [s.strip() for s in stock]


# --- chunk_text ----------------------------------------------------------------------------------


def test_empty_text_has_no_chunks() -> None:
    assert chunk_text("", count_tokens=_words) == []
    assert chunk_text(" \n\n ", count_tokens=_words) == []


def test_text_that_fits_is_one_chunk_with_blocks_on_lines() -> None:
    text = "# Title\nFirst  sentence here. Second one.\n\nNext paragraph."
    assert chunk_text(text, count_tokens=_words) == [
        Chunk(0, "# Title\nFirst sentence here. Second one.\nNext paragraph.", 9)
    ]


def test_sentences_are_packed_greedily_and_joined_by_space_or_newline() -> None:
    s = [_sentence(tag, 4) for tag in ("a", "b", "c", "d", "e")]
    text = f"{s[0]} {s[1]} {s[2]}\n\n{s[3]} {s[4]}"
    chunks = chunk_text(text, count_tokens=_words, max_tokens=12, overlap_tokens=0)
    assert [c.text for c in chunks] == [f"{s[0]} {s[1]} {s[2]}", f"{s[3]} {s[4]}"]
    assert [c.ordinal for c in chunks] == [0, 1]
    assert [c.token_count for c in chunks] == [12, 8]


def test_overlap_carries_trailing_sentences_within_budget() -> None:
    s = [_sentence(f"s{i}x", 5) for i in range(10)]
    chunks = chunk_text(" ".join(s), count_tokens=_words, max_tokens=20, overlap_tokens=10)
    assert [c.text for c in chunks] == [
        " ".join(s[0:4]),
        " ".join(s[2:6]),
        " ".join(s[4:8]),
        " ".join(s[6:10]),
    ]


def test_zero_overlap_partitions_the_sentences() -> None:
    s = [_sentence(f"s{i}x", 3) for i in range(9)]
    chunks = chunk_text(" ".join(s), count_tokens=_words, max_tokens=7, overlap_tokens=0)
    assert [c.text for c in chunks] == [" ".join(s[i : i + 2]) for i in range(0, 9, 2)]


def test_overlap_never_crowds_out_the_next_sentence() -> None:
    # Carrying 8 tokens would leave no room for the 9-token sentence that follows.
    s = [_sentence("a", 4), _sentence("b", 4), _sentence("c", 9)]
    chunks = chunk_text(" ".join(s), count_tokens=_words, max_tokens=10, overlap_tokens=8)
    assert [c.text for c in chunks] == [f"{s[0]} {s[1]}", s[2]]


def test_huge_sentence_is_cut_into_word_windows() -> None:
    words = [f"w{i}" for i in range(500)]
    chunks = chunk_text(" ".join(words), count_tokens=_words, max_tokens=50, overlap_tokens=0)
    assert all(c.token_count <= 50 for c in chunks)
    assert len(chunks) == 10
    assert " ".join(c.text for c in chunks).split() == words


def test_windows_are_checked_against_the_real_count() -> None:
    # A counter where joining words costs extra tokens: summed word counts underestimate.
    def count(text: str) -> int:
        return 2 * len(text.split()) - 1

    chunks = chunk_text(" ".join(f"w{i}" for i in range(40)), count_tokens=count, max_tokens=9)
    assert chunks and all(c.token_count <= 9 for c in chunks)
    assert all(count(c.text) <= 9 for c in chunks)


def test_only_a_single_overlong_word_may_exceed_the_limit() -> None:
    chunks = chunk_text("tiny Supercalifragilistic tiny", count_tokens=len, max_tokens=10, overlap_tokens=0)
    assert [c.text for c in chunks] == ["tiny", "Supercalifragilistic", "tiny"]
    assert [c.token_count for c in chunks] == [4, 20, 4]


def test_each_sentence_is_counted_once() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return _words(text)

    s = [_sentence(f"s{i}x", 5) for i in range(12)]
    chunk_text(" ".join(s + s[:3]), count_tokens=count, max_tokens=20, overlap_tokens=10)
    # Once per distinct sentence, and no whole-text check when it has too many words to fit.
    assert sorted(calls) == sorted(s)


def test_a_single_sentence_text_is_counted_once() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return 3 * _words(text)  # too many tokens to fit, though few enough words to try

    chunk_text("One two three four five.", count_tokens=count, max_tokens=10, overlap_tokens=0)
    assert calls.count("One two three four five.") == 1


def test_invalid_chunk_size_is_an_input_error() -> None:
    with pytest.raises(InputError, match="at least 1"):
        chunk_text("Hello.", count_tokens=_words, max_tokens=0)


@settings(max_examples=200, deadline=None)
@given(_texts, st.integers(min_value=1, max_value=40), st.integers(min_value=-5, max_value=80))
def test_chunks_never_exceed_limit_and_always_terminate(text: str, max_tokens: int, overlap: int) -> None:
    chunks = chunk_text(text, count_tokens=_words, max_tokens=max_tokens, overlap_tokens=overlap)
    assert chunks
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.token_count == _words(chunk.text)
        # Generated words are at most 8 characters, so only the limit matters.
        assert chunk.token_count <= max_tokens
    # Each chunk brings at least one new sentence or window, so progress is bounded by words.
    assert len(chunks) <= _words(text)


@settings(max_examples=200, deadline=None)
@given(_texts, st.integers(min_value=12, max_value=60), st.integers(min_value=0, max_value=30))
def test_every_sentence_lands_in_a_chunk_in_order(text: str, max_tokens: int, overlap: int) -> None:
    chunks = chunk_text(text, count_tokens=_words, max_tokens=max_tokens, overlap_tokens=overlap)
    position = 0
    for sentence in split_sentences(text):
        if _words(sentence) > max_tokens:
            continue  # windowed (pysbd can merge at words like "col."); covered below
        while position < len(chunks) and sentence not in chunks[position].text:
            position += 1
        assert position < len(chunks), f"sentence missing or out of order: {sentence!r}"
    for previous, current in pairwise(chunks):
        assert previous.text != current.text
        assert not previous.text.endswith(current.text)  # not just the carried-over tail


@settings(max_examples=100, deadline=None)
@given(_texts, st.integers(min_value=12, max_value=40))
def test_zero_overlap_reproduces_the_words_exactly(text: str, max_tokens: int) -> None:
    chunks = chunk_text(text, count_tokens=_words, max_tokens=max_tokens, overlap_tokens=0)
    assert " ".join(c.text for c in chunks).split() == text.split()


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400), st.integers(min_value=1, max_value=30), st.integers(min_value=0, max_value=40))
def test_arbitrary_text_never_breaks_chunking(text: str, max_tokens: int, overlap: int) -> None:
    chunks = chunk_text(text, count_tokens=len, max_tokens=max_tokens, overlap_tokens=overlap)
    assert all(c.token_count <= max_tokens or " " not in c.text for c in chunks)
    assert bool(chunks) == bool(text.split())
