"""Helpers the security tests share: row counts of every table, stored runs, hostile strings, Hypothesis settings."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from sqlalchemy import Engine, func, select, table, text

from services.answering.runs import Run, save_run
from services.scoring.confidence import overall
from services.scoring.weights import DEFAULT_PROFILE
from services.store import transaction

# What an attacker types into every text box: quotes, comments, statement separators, casts,
# placeholders in every paramstyle, LIKE wildcards, backslashes, NUL.
SQL_METACHARACTERS = (
    "'; DROP TABLE runs; --",
    "\"; DROP TABLE documents; --",
    "' OR '1'='1",
    "' OR 1=1 --",
    "1; DELETE FROM review_history",
    "') UNION SELECT version(), NULL --",
    "%s %(x)s :name $1 ? {0} {}",
    "%' AND '%'='",
    "\\'; SELECT pg_sleep(10); --",
    "/* unterminated comment",
    "$$; DROP TABLE chunks; $$",
    "::text[]",
)

# ... and what else arrives in text boxes and files: emoji (with joiners and flags), zero-width
# and bidi controls, escape sequences, NUL, unpaired surrogates (undecodable bytes on a command line).
HOSTILE_STRINGS = SQL_METACHARACTERS + (
    "😀", "👩‍👩‍👧", "🇺🇸", "\u200b", "\ufeff", "\u202e", "\x00", "\t", "\r\n", "\x1b[31m", "\ud800", "\udce9", "\u2028",
)
WORDS = ("servo", "encoder", "battery", "grease", "reducer", "axis", "remaster", "alarm", "zone", "fence", "torque")
MIN_CASES = 2_000  # generated cases per entry point
# Database round trips and model calls make examples slow; Hypothesis' timing checks do not apply.
SLOW_OK = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

# A partition's rows are counted with its table's (runs', its children's, chunks' by month or collection):
# a row a review adds lands in a month's table of review_history and in review_history alike.
_PUBLIC_TABLES = ("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                  "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1")


def table_counts(engine: Engine) -> dict[str, int]:
    """Rows in every table of the store (table names come from the catalog, quoted by SQLAlchemy)."""
    with engine.connect() as conn:
        names = [row[0] for row in conn.execute(text(_PUBLIC_TABLES))]
        return {name: conn.execute(select(func.count()).select_from(table(name))).scalar_one() for name in names}


def stored_run(query: str = "What does SRVO-062 mean?", **changes: object) -> Run:
    """A retrieval-only pending run, as the pipeline stores one (no iterations: enough for reviews and exports)."""
    components = (0.6,) * 7
    confidence = overall(components, DEFAULT_PROFILE)
    fields: dict[str, object] = dict(
        query=query, preset="balanced", collection="default", source="ask", backend="offline", model="extractive",
        status="pending", final_answer="Replace the battery pack, then remaster the axis.", citations=(),
        final_confidence=confidence, final_level=DEFAULT_PROFILE.level(confidence), retrieval_confidence=confidence,
        components=components, reflection_score=0.5, grade=None, crag_verdict="AMBIGUOUS", signals={},
        route=("COMPLETE",), best_iteration=1, weights_profile=DEFAULT_PROFILE.label, weights_profile_id=None,
        config={"preset": "balanced"}, outcome_note="", latency_ms=1.0, iterations=(), events=(),
    )
    fields.update(changes)
    return Run(**fields)  # type: ignore[arg-type]


def save_runs(count: int, **changes: object) -> list[int]:
    with transaction() as session:
        return [save_run(stored_run(f"question {i}", **changes), session=session) for i in range(count)]
