"""Build corpus.jsonl (BEIR) from the Python language reference topics shipped with CPython.

    .venv/bin/python bench/data/python-reference/build.py

The source is `pydoc_data.topics.topics` (topic name -> plain text, the pages `help()` shows).
Its text changes between Python releases, so the committed corpus records the version it was
built with (PYTHON_VERSION); rebuild only with that interpreter or the qrels may go stale.

Deterministic by construction: topics are read in sorted name order and every document id is
`<topic>-<n>`, n being the index of the paragraph group within its topic.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PYTHON_VERSION = "3.11.7"  # the interpreter corpus.jsonl was built with
OUT = Path(__file__).with_name("corpus.jsonl")

MIN_CHARS = 400  # a group ends at a section heading once it holds this; shorter ones merge into a neighbour
MAX_CHARS = 2500  # a group never grows past this (one over-long block is cut at line ends)
TARGET_CHARS = 1800  # past this a group ends at the next paragraph, heading or not
SMALLEST_TOPIC = 150  # a topic whose body is shorter answers nothing: dropped
# pydoc shows the "if" page for the keyword "else": the same text, kept once as "if"
DUPLICATE_TOPICS = {"else": "if"}
SHARED_BLOCK_CHARS = 40  # shorter blocks ("New in version 3.5.") may repeat between topics

_UNDERLINE = re.compile(r"^([*=\-~])\1+$")


@dataclass(frozen=True)
class Block:
    text: str
    level: int | None = None  # headings only: 0 for '*' (the topic), 1 '=', 2 '-', 3 '~'

    @property
    def is_heading(self) -> bool:
        return self.level is not None


def split_blocks(text: str) -> list[Block]:
    """Blank-line separated blocks; a heading is its line plus an underline of '*', '=', '-' or '~'."""
    blocks = []
    for raw in re.split(r"\n(?:[ \t]*\n)+", text.strip("\n")):
        raw = raw.rstrip()
        if not raw.strip():
            continue
        lines = raw.split("\n")
        if len(lines) == 2 and _UNDERLINE.match(lines[1]) and len(lines[1]) == len(lines[0]):
            blocks.append(Block(lines[0].strip(), level="*=-~".index(lines[1][0])))
        else:
            blocks.append(Block(raw))
    return blocks


def drop_blocks_shared_with_smaller_topics(topics: Mapping[str, list[Block]]) -> dict[str, list[Block]]:
    """The reference repeats whole topics inside bigger ones ("for" inside "compound", "customization"
    inside "specialnames"). Keep each shared paragraph once, in the most specific (shortest) topic,
    so a question has one place that answers it rather than two copies.

    Short blocks ("Note:", "is semantically equivalent to:") cannot be matched reliably, so a
    section whose paragraphs are mostly shared loses its short blocks too; a heading left with
    no body under it goes as well."""
    seen: set[str] = set()
    kept: dict[str, list[Block]] = {}
    by_size = sorted(topics, key=lambda name: (sum(len(b.text) for b in topics[name]), name))
    for name in by_size:
        blocks: list[Block] = []
        repeats_others = any(b.text in seen for b in topics[name] if not b.is_heading and len(b.text) >= SHARED_BLOCK_CHARS)
        for section in _sections(topics[name]):
            long = [b for b in section if not b.is_heading and len(b.text) >= SHARED_BLOCK_CHARS]
            shared = sum(len(b.text) for b in long if b.text in seen)
            # in a topic that repeats others, a section with nothing of its own left keeps no scraps
            keep_short = shared * 2 < sum(len(b.text) for b in long) if long else not repeats_others
            for block in section:
                is_long = len(block.text) >= SHARED_BLOCK_CHARS
                if block.is_heading or (is_long and block.text not in seen) or (not is_long and keep_short):
                    blocks.append(block)
        seen.update(b.text for b in topics[name] if not b.is_heading)
        kept[name] = _without_empty_headings(blocks)
    return kept


def _sections(blocks: list[Block]) -> Iterator[list[Block]]:
    """Runs of blocks that each start at a heading (of any level)."""
    section: list[Block] = []
    for block in blocks:
        if block.is_heading and section:
            yield section
            section = []
        section.append(block)
    if section:
        yield section


def _without_empty_headings(blocks: list[Block]) -> list[Block]:
    out: list[Block] = []
    for block in blocks:
        # a heading directly followed by one of its own level or above lost its whole body
        while block.level is not None and len(out) > 1 and out[-1].level is not None and out[-1].level >= block.level:
            out.pop()
        out.append(block)
    while len(out) > 1 and out[-1].is_heading:
        out.pop()
    return out


def group_blocks(blocks: list[Block]) -> list[str]:
    """Paragraph groups of MIN..MAX characters, preferring to start a group at a section heading."""
    groups: list[list[str]] = [[]]
    for block in blocks:
        for piece in _cut_long_block(block.text):
            current = groups[-1]
            size = sum(len(p) + 2 for p in current)
            starts_section = block.is_heading and size >= MIN_CHARS
            if current and (starts_section or size >= TARGET_CHARS or size + len(piece) > MAX_CHARS):
                groups.append([])
            groups[-1].append(piece)
    texts = ["\n\n".join(g) for g in groups if g]
    return _merge_small(texts)


def _cut_long_block(text: str) -> Iterator[str]:
    if len(text) <= MAX_CHARS:
        yield text
        return
    piece: list[str] = []
    for line in text.split("\n"):
        if piece and sum(len(x) + 1 for x in piece) + len(line) > MAX_CHARS:
            yield "\n".join(piece)
            piece = []
        piece.append(line)
    if piece:
        yield "\n".join(piece)


def _merge_small(texts: list[str]) -> list[str]:
    merged: list[str] = []
    for text in texts:
        if merged and (len(text) < MIN_CHARS or len(merged[-1]) < MIN_CHARS) and len(merged[-1]) + len(text) + 2 <= MAX_CHARS:
            merged[-1] = merged[-1] + "\n\n" + text
        else:
            merged.append(text)
    return merged


def build_documents(topics: Mapping[str, str]) -> list[dict[str, str]]:
    """BEIR corpus records for every topic, in sorted topic order."""
    for duplicate, original in DUPLICATE_TOPICS.items():
        if topics.get(duplicate) != topics.get(original):
            raise ValueError(f"topic {duplicate!r} no longer repeats {original!r}: review DUPLICATE_TOPICS")
    parsed = {}
    for name in sorted(set(topics) - set(DUPLICATE_TOPICS)):
        blocks = split_blocks(topics[name])
        if not blocks or blocks[0].level != 0:
            raise ValueError(f"topic {name!r} does not start with its heading")
        if sum(len(b.text) for b in blocks[1:]) >= SMALLEST_TOPIC:
            parsed[name] = blocks
    kept = drop_blocks_shared_with_smaller_topics(parsed)
    documents = []
    for name in sorted(kept):
        heading, body = kept[name][0].text, kept[name][1:]
        if not body:
            continue  # everything it says is said by a more specific topic
        groups = group_blocks(body)
        for n, text in enumerate(groups):
            title = heading if len(groups) == 1 else f"{heading} (part {n + 1} of {len(groups)})"
            documents.append({"_id": f"{name}-{n}", "title": title, "text": text})
    return documents


def main() -> None:
    import pydoc_data.topics

    if platform.python_version() != PYTHON_VERSION:
        print(f"warning: built with Python {PYTHON_VERSION}, running {platform.python_version()}: "
              "the topics text may differ and the qrels may no longer match", file=sys.stderr)
    documents = build_documents(pydoc_data.topics.topics)
    with OUT.open("w", encoding="utf-8", newline="\n") as out:
        for doc in documents:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sizes = sorted(len(d["text"]) for d in documents)
    print(f"{len(documents)} documents from {len({d['_id'].rsplit('-', 1)[0] for d in documents})} topics, "
          f"{sizes[0]}-{sizes[-1]} chars (median {sizes[len(sizes) // 2]}) -> {OUT}")


if __name__ == "__main__":
    main()
