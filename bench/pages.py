"""Page-load benchmark: the Corpus, Search and Evaluate pages' first load on a big store.

    python bench/pages.py --data-dir /tmp/store          # a store kept by bench/retrieval.py --keep
    DATABASE_URL=postgresql://... python bench/pages.py  # any store with the workbench schema

Each load is a fresh streamlit AppTest session: the app's root runs, the cached getters are
cleared (st.cache_data), then the page runs and is timed: what a user opening the page after
the cache expired waits for. The median of --loads loads counts (target < 1 s each). On the
Corpus page it also times turning to the next page of the documents list and a filter.

The pages show the "default" collection. With --collection NAME (default "bench", the one
bench/retrieval.py fills) that collection is renamed "default" for the timing and back after
(a "default" collection already there is set aside under DEFAULT_ASIDE and restored; a run
killed in between says so on the next run, and what to rename). Progress goes to stderr; the last stdout line is
one JSON object.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

from bench._common import emit_timed, log, machine, median, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402

PAGES = {"corpus": "corpus.py", "search": "search.py", "evaluate": "evaluate.py"}
TITLES = {"corpus": "Corpus", "search": "Search the corpus", "evaluate": "Evaluate retrieval"}
TARGET_S = 1.0
DEFAULT_ASIDE = "default (set aside by bench/pages.py)"


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    wall = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.environ.get("DATABASE_URL") and args.data_dir:
        log("DATABASE_URL is set: --data-dir is ignored")
    data_dir, created, settings = prepare_store(None if os.environ.get("DATABASE_URL") else args.data_dir)
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"bench": "pages", "date": today(), "machine": machine(),
                              "store": os.environ.get("DATABASE_URL", "").split("@")[-1] or str(data_dir)}
    try:
        result.update(run(args, timings))
    finally:
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    result["load_avg_1m"] = round(os.getloadavg()[0], 2)  # other work on the machine inflates every timing
    emit_timed(result, started=wall, timings=timings)
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="embedded server data dir (default: a fresh, empty one); ignored with DATABASE_URL")
    parser.add_argument("--collection", default="bench",
                        help="the collection the pages show, lent to them as 'default' (default: bench)")
    parser.add_argument("--loads", type=int, default=5, help="timed first loads per page (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep a data dir this run created")
    args = parser.parse_args(argv)
    if args.loads < 1:
        parser.error("--loads must be at least 1")
    return args


def run(args: argparse.Namespace, timings: dict[str, float]) -> dict[str, Any]:
    from services.corpus.stats import corpus_stats
    from services.store import get_engine

    with phase("start store and migrate", timings):
        get_engine()
    pages_dir = _pages_dir()
    out: dict[str, Any] = {"collection": args.collection, "loads": args.loads, "target_s": TARGET_S}
    with _lent_as_default(args.collection):
        stats = corpus_stats("default")
        out.update(documents=stats.documents, chunks=stats.chunks, terms=stats.terms, counts_estimated=stats.estimated)
        log(f"  the pages see {stats.chunks:,} chunks, {stats.documents:,} documents, {stats.terms:,} terms"
            + (" (documents and terms estimated)" if stats.estimated else ""))
        with phase("warm-up load (imports, model, connections)", timings):
            out["warmup_page_s"] = rounded(_first_load(pages_dir / PAGES["corpus"], "corpus")[0], 2)
        for name, file in PAGES.items():
            with phase(f"{name} page: {args.loads} first loads", timings):
                samples = []
                for _ in range(args.loads):
                    seconds, at = _first_load(pages_dir / file, name)
                    samples.append(seconds)
                out[f"{name}_load_s"] = rounded(median(samples), 3)
                out[f"{name}_load_runs_s"] = [rounded(s, 3) for s in samples]
                log(f"  {name}: median {median(samples):.3f} s of {', '.join(f'{s:.3f}' for s in samples)}")
                if name == "corpus":
                    out.update(_corpus_interactions(at))
    out["targets_met"] = {name: out[f"{name}_load_s"] < TARGET_S for name in PAGES}
    return out


def _pages_dir() -> Path:
    """pages/ (the folder may be renamed: the one holding the three page files)."""
    for candidate in [REPO / "pages", *sorted(p for p in REPO.iterdir() if p.is_dir())]:
        if all((candidate / file).exists() for file in PAGES.values()):
            return candidate
    raise SystemExit("no folder holds corpus.py, search.py and evaluate.py")


def _first_load(page: Path, name: str):  # type: ignore[no-untyped-def]
    """(seconds, AppTest): a fresh session, the root run, cold caches, then the page run timed."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(str(page.relative_to(REPO)))
    st.cache_data.clear()
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"the {name} page raised: {at.exception[0].message}")
    if not at.title or at.title[0].value != TITLES[name]:
        raise SystemExit(f"the {name} page did not draw its title")
    return seconds, at


def _corpus_interactions(at) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The documents list's next page and a filter, each a rerun of the already-open page."""
    out: dict[str, Any] = {}
    if not at.button(key="corpus.next").disabled:
        started = time.perf_counter()
        at.button(key="corpus.next").click().run()
        out["corpus_next_page_s"] = rounded(time.perf_counter() - started, 3)
    started = time.perf_counter()
    at.text_input(key="corpus.filter").input("zz9q").run()  # a filter that matches (almost) nothing: the whole scan
    out["corpus_filter_s"] = rounded(time.perf_counter() - started, 3)
    log(f"  corpus: next page {out.get('corpus_next_page_s')} s, filter {out['corpus_filter_s']} s")
    return out


@contextmanager
def _lent_as_default(collection: str) -> Iterator[None]:
    """The pages show "default": rename `collection` to it for the timing, and back after."""
    from sqlalchemy import text

    from services.store import transaction

    def rename(old: str, new: str) -> None:
        with transaction() as session:
            session.execute(text("UPDATE collections SET name = :new WHERE name = :old"), {"old": old, "new": new})

    def names() -> set[str]:
        with transaction() as session:
            return set(session.scalars(text("SELECT name FROM collections")))

    if DEFAULT_ASIDE in names():
        raise SystemExit(f"an earlier run was interrupted while lending a collection: its 'default' is the lent one; "
                         f"rename it back, then {DEFAULT_ASIDE!r} to 'default'")
    if collection == "default":
        yield
        return
    if collection not in names():
        raise SystemExit(f"no collection named {collection!r} in the store (collections: {sorted(names())}); if an "
                         "earlier run was interrupted, it is named 'default' now: pass --collection default")
    had_default = "default" in names()
    if had_default:
        rename("default", DEFAULT_ASIDE)
    rename(collection, "default")
    log(f"  collection {collection!r} lent to the pages as 'default'")
    try:
        yield
    finally:
        rename("default", collection)
        if had_default:
            rename(DEFAULT_ASIDE, "default")
        log(f"  collection {collection!r} has its name back")


if __name__ == "__main__":
    sys.exit(main())
