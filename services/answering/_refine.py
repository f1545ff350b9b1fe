"""The offline backend's query refinement: the question plus the terms it was missing."""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.judging._lexical import stems

MAX_QUERY_CHARS = 300
# A judge's reason quotes what the answer lacks or says instead: "answer does not mention
# 'J2', 'interval'", "the question asks about 'lowest' but ... says 'highest'".
_QUOTED = re.compile(r"(?<!\w)['\"‘“]([^'\"‘’“”\n]{1,60})['\"’”](?!\w)")


def refine(query: str, *, reason: str = "", gaps: Sequence[str] = (), expansion_terms: Sequence[str] = (),
           max_chars: int = MAX_QUERY_CHARS) -> str:
    """The query followed by the terms the reason quotes, the gaps, then the expansion words,
    each once (by stems), as many as fit in `max_chars`.

    Quoted and gap terms go in even when the query has them: repeating a facet the answer
    missed weights it up. Expansion terms go in word by word (split at spaces and commas), and
    only the words new to the query ("50" of "Super Bowl 50" when it names the Super Bowl)."""
    query = " ".join(query.split())
    named = [m.group(1).strip() for m in _QUOTED.finditer(reason)]
    words = [word for term in expansion_terms for word in term.replace(",", " ").split()]
    candidates = [(term, False) for term in (*named, *gaps)] + [(word, True) for word in words]
    query_stems = stems(query)
    added: list[str] = []
    added_stems: set[str] = set()
    for term, must_be_new in candidates:
        term_stems = stems(term)
        if not term_stems or term_stems <= added_stems or (must_be_new and term_stems <= query_stems):
            continue
        if len(query) + len(" ".join(added + [term])) + 1 > max_chars:
            continue
        added.append(term)
        added_stems |= term_stems
    return " ".join([query, *added]) if added else query
