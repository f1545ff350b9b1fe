"""Build corpus.jsonl of the numpy-api evaluation set from the installed NumPy's docstrings.

    .venv/bin/python bench/data/numpy-api/build.py            # writes corpus.jsonl beside this file
    .venv/bin/python bench/data/numpy-api/build.py --out X    # elsewhere

One document per public function of `numpy`, `numpy.linalg`, `numpy.fft` and per method of
`numpy.random.Generator`, sorted by qualified name, which is also its `_id` and `title`.
The text keeps the summary, the extended summary and the Parameters, Returns and Notes
sections (Examples, See Also and the rest are dropped). The output depends only on the
NumPy release (NUMPY_VERSION is the one the committed file came from), never on dict order;
run it in its own interpreter (it refuses when SciPy, which edits a numpy docstring, is loaded).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
from pathlib import Path

import numpy as np

NUMPY_VERSION = "2.4.6"  # the committed corpus.jsonl was built from this release
MAX_CHARS = 2500  # a document stops at the last whole section (or entry) that fits
# Shorter documents (a summary and a line or two: np.shape, np.typename) are dropped. Not 400:
# that would also drop linalg.det, triu, union1d and array_split, which users do ask about.
MIN_CHARS = 250
KEPT_SECTIONS = ("Parameters", "Returns", "Notes")

_HEADER_RULE = re.compile(r"^-{3,}\s*$")
_SIGNATURE = re.compile(r"^[A-Za-z_][\w.]*\(")
_SAYS_ALIAS = r"(?:This function|`{name}`) is an alias (?:of|for)\b"  # "`amax` is an alias of `~numpy.max`"
# Aliases whose docstring does not say so (it is the other function's, word for word);
# build_corpus fails if it meets another pair of identical documents.
_SILENT_ALIASES = {
    "numpy.row_stack": "deprecated in NumPy 2.0 for numpy.vstack, whose docstring it carries",
    "numpy.linalg.tensordot": "numpy.tensordot under a second name, same docstring",
}


def public_functions() -> list[tuple[str, object]]:
    """(qualified name, callable) for every function the set covers, sorted by name."""
    found: dict[str, object] = {}
    top_level = {name: getattr(np, name) for name in np.__all__ if hasattr(np, name)}
    for name, obj in top_level.items():
        # One object under several names (np.abs is np.absolute): keep its own name only.
        if _is_function(obj) and getattr(obj, "__name__", name) == name:
            found[f"numpy.{name}"] = obj
    for module in (np.linalg, np.fft):
        for name in module.__all__:
            obj = getattr(module, name)
            if _is_function(obj) and not any(obj is other for other in top_level.values()):
                found[f"{module.__name__}.{name}"] = obj
    for name, obj in vars(np.random.Generator).items():
        if not name.startswith("_") and callable(obj) and not isinstance(obj, type):
            found[f"numpy.random.Generator.{name}"] = obj
    return sorted(found.items())


def _is_function(obj: object) -> bool:
    # Functions, builtins, ufuncs and the array-function dispatchers; classes
    # (scalar types, dtype, LinAlgError) and index helpers such as np.r_ are not.
    if isinstance(obj, type) or not callable(obj):
        return False
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)) or hasattr(obj, "_implementation")


def document_text(name: str, docstring: str) -> str | None:
    """The kept parts of a NumPy-style docstring; None for aliases and deprecated functions."""
    doc = inspect.cleandoc(docstring)
    preamble, sections = _split_sections(doc)
    if not preamble or ".. deprecated::" in preamble or re.search(_SAYS_ALIAS.format(name=re.escape(name)), doc):
        return None
    parts = [("\n\n", _blocks(preamble, by_entry=False))]
    for section in KEPT_SECTIONS:
        if section in sections:
            by_entry = section != "Notes"
            parts.append(("\n" if by_entry else "\n\n", [section, *_blocks(sections[section], by_entry=by_entry)]))
    return _fit(parts)


def _split_sections(doc: str) -> tuple[str, dict[str, str]]:
    """The text before the first section header, and each section's body by header name."""
    lines = doc.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and _SIGNATURE.match(lines[0]):
        while lines and lines[0].strip():
            lines.pop(0)  # builtins and ufuncs open with their call signature (it may wrap)
    headers = [i for i in range(len(lines) - 1) if lines[i].strip() and _HEADER_RULE.match(lines[i + 1])]
    preamble = "\n".join(lines[: headers[0]] if headers else lines).strip()
    sections: dict[str, str] = {}
    for at, start in enumerate(headers):
        end = headers[at + 1] if at + 1 < len(headers) else len(lines)
        sections.setdefault(lines[start].strip(), "\n".join(lines[start + 2 : end]).strip())
    return preamble, sections


def _blocks(body: str, *, by_entry: bool) -> list[str]:
    """Paragraphs of prose, or (Parameters/Returns) one block per entry and its description."""
    if not by_entry:
        return [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    entries: list[list[str]] = []
    for line in body.splitlines():
        if line and not line[0].isspace():
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    return ["\n".join(entry).strip() for entry in entries]


def _fit(parts: list[tuple[str, list[str]]]) -> str:
    """Join whole parts (separator, blocks) while they fit MAX_CHARS; a part that does not fit
    adds its leading blocks that do, then the document ends (never cut inside a paragraph or
    a parameter's entry)."""
    text = ""
    for at, (separator, blocks) in enumerate(parts):
        if len(_join(text, separator.join(blocks))) <= MAX_CHARS:
            text = _join(text, separator.join(blocks))
            continue
        taken: list[str] = []
        for block in blocks:
            if len(_join(text, separator.join([*taken, block]))) > MAX_CHARS:
                break
            taken.append(block)
        if len(taken) > (0 if at == 0 else 1):  # more than a bare section header
            text = _join(text, separator.join(taken))
        break
    return text


def _join(text: str, more: str) -> str:
    return f"{text}\n\n{more}" if text else more


def build_corpus() -> tuple[list[dict[str, str]], dict[str, int]]:
    if "scipy" in sys.modules:
        # SciPy appends its Array API notes to numpy.sinc's docstring when it is imported.
        raise SystemExit("run build.py in its own interpreter: scipy is loaded and has rewritten numpy docstrings")
    records: list[dict[str, str]] = []
    skipped = {"no docstring": 0, "alias or deprecated": 0, "too short": 0}
    first_with_text: dict[str, str] = {}
    for qualified_name, obj in public_functions():
        if qualified_name in _SILENT_ALIASES:
            skipped["alias or deprecated"] += 1
            continue
        doc = getattr(obj, "__doc__", None)
        if not doc or not doc.strip():
            skipped["no docstring"] += 1
            continue
        text = document_text(qualified_name.rsplit(".", 1)[-1], doc)
        if text is None:
            skipped["alias or deprecated"] += 1
        elif len(text) < MIN_CHARS:
            skipped["too short"] += 1
        else:
            if text in first_with_text:
                raise SystemExit(f"{qualified_name} has the same document as {first_with_text[text]}: "
                                 "an alias? add it to _SILENT_ALIASES")
            first_with_text[text] = qualified_name
            records.append({"_id": qualified_name, "title": qualified_name, "text": text})
    return records, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("corpus.jsonl"))
    args = parser.parse_args(argv)
    if np.__version__ != NUMPY_VERSION:
        print(f"warning: numpy {np.__version__} is not {NUMPY_VERSION}, the release corpus.jsonl was built from; "
              "the documents will differ", file=sys.stderr)
    records, skipped = build_corpus()
    with args.out.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    lengths = sorted(len(r["text"]) for r in records)
    print(f"numpy {np.__version__}: {len(records)} documents -> {args.out}", file=sys.stderr)
    print(f"skipped: {skipped}; text chars min {lengths[0]}, median {lengths[len(lengths) // 2]}, max {lengths[-1]}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
