"""Document trends from a rollup kept by triggers, and each run's reflection minimum as a column (issue 32).

At a million runs the Document trends page took 115 s: its aggregate unnested the best
iteration's hits of every run in the date range. `document_day_rollup` holds what the page
sums, per (UTC day, runs' collection, listed collection, document): runs, retrieved, cited,
runs per status, low-confidence and troubled runs, the sum of final confidences (numeric:
exact however often runs come and go) and a title; the page sums at most documents x days rows.

Kept by triggers, not by the write path: runs are written by the pipeline (save_run), intake,
the bulk loader's COPY, reviewers' verdicts (status), deletes and whatever writes runs next;
a trigger sees every one of them, in the same transaction, and no writer can forget it.
Statement-level triggers with transition tables apply a whole statement's change (a COPY of
many runs, a bulk update) as one aggregated upsert in key order, so two writers lock rollup
rows in the same order (no deadlock between a run going pending -> approved and another going
back). A run deleted is subtracted by a row-level BEFORE DELETE trigger, while its best
iteration still exists (the cascade removes it afterwards). A row that falls to zero runs is
kept (it adds nothing to any sum).

What no trigger sees: TRUNCATE, and dropping or detaching a partition. Whoever does those
(retention) calls refresh_document_day_rollup(first_day, last_day) afterwards, which
recomputes those days from the runs under a lock that makes concurrent writers wait for it.
The upgrade fills the rollup with the same function.

`runs.reflection_min_score` is a stored generated column, CAST(config->>'reflection_min_score'
AS float8): the Tuning page's matrix reads a number instead of parsing every run's config JSON
(the first open took 32 s at a million runs). Generated, so the upgrade fills it for every
stored run and every writer (ORM, COPY, raw SQL) sets it without knowing; NULL where the config
names none (the reader falls back to REFLECTION_MIN_SCORE, as before). Adding it rewrites the
runs table under an exclusive lock: on a million runs that takes minutes (README, "A million
runs").

Revision ID: 0015
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# Frozen copies of services.domain.ANONYMOUS_CONTEXT and services.review.documents.OUTSIDE_CORPUS
# (a migration must not change when the code does); the rules are services/review/documents.py's.
_APPEARANCES = r"""
CREATE FUNCTION document_appearances(run_collection text, run_source text, citations jsonb, hits jsonb)
RETURNS TABLE (collection text, external_id text, retrieved boolean, cited boolean, title text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT d.collection, d.external_id, bool_or(d.retrieved), bool_or(d.cited), max(d.title)
    FROM (
        SELECT CASE WHEN COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0
                    THEN 'outside the corpus (' || run_source || ')' ELSE run_collection END,
               h ->> 'external_id', NULLIF(h ->> 'title', ''), true, false
        FROM jsonb_array_elements(COALESCE(hits, '[]')) h
        WHERE NOT (COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0
                   AND h ->> 'external_id' = 'context ' || (h ->> 'rank'))
        UNION ALL
        SELECT run_collection, c ->> 'external_id', NULL, false, true
        FROM jsonb_array_elements(COALESCE(citations, '[]')) c
    ) AS d(collection, external_id, title, retrieved, cited)
    WHERE d.external_id <> ''
    GROUP BY d.collection, d.external_id
$$"""

# What a run adds to its documents' rows, per column: the statuses and levels are counted in
# columns, not keyed, so a document has one row a day (a key per status and level made 466k rows
# for a million runs and 1.4 s to sum; frozen copies of the rules of services/review/documents.py).
_LOW = "c.final_level IN ('LOW', 'VERY LOW')"
_COUNTS = {
    "runs": "true", "retrieved": "a.retrieved", "cited": "a.cited",
    "approved": "c.status = 'approved'", "flagged": "c.status = 'flagged'", "corrected": "c.status = 'corrected'",
    "pending": "c.status = 'pending'", "auto_accepted": "c.status = 'auto_accepted'", "low_confidence": _LOW,
    # flagged or corrected by a reviewer, or low confidence and not approved (each run once)
    "troubled": f"c.status IN ('flagged', 'corrected') OR ({_LOW} AND c.status <> 'approved')",
}
_SUMS = {name: f"COALESCE(sum(c.sign) FILTER (WHERE {rule}), 0)" for name, rule in _COUNTS.items()} | {
    "confidence_sum": "sum(c.sign * CAST(c.final_confidence AS numeric))"}
# Adds the signed contributions of `changes` (sign, run_collection, source, status, final_level,
# final_confidence, created_at, citations, hits) to the rollup: one upsert, in key order.
_UPSERT = """
    INSERT INTO document_day_rollup AS t (run_collection, collection, external_id, day, """ + ", ".join(_SUMS) + """, title)
    SELECT c.run_collection, a.collection, a.external_id, CAST(c.created_at AT TIME ZONE 'UTC' AS date),
           """ + ", ".join(_SUMS.values()) + """, max(a.title)
    FROM ({changes}) AS c(sign, run_collection, source, status, final_level, final_confidence, created_at,
                          citations, hits)
    CROSS JOIN LATERAL document_appearances(c.run_collection, c.source, c.citations, c.hits) a
    GROUP BY 1, 2, 3, 4
    HAVING """ + " OR ".join(f"{total} <> 0" for total in _SUMS.values()) + """
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, run_collection, collection, external_id) DO UPDATE
    SET """ + ", ".join(f"{name} = t.{name} + EXCLUDED.{name}" for name in _SUMS) + """,
        title = GREATEST(t.title, EXCLUDED.title)"""

_RUN = "{alias}.collection, {alias}.source, {alias}.status, {alias}.final_level, {alias}.final_confidence, " \
       "{alias}.created_at, {alias}.citations"
_BEST_HITS = "(SELECT it.retrieval -> 'hits' FROM run_iterations it WHERE it.run_id = {alias}.id " \
             "AND it.ordinal = {alias}.best_iteration)"
_WHAT_COUNTS = ("collection", "source", "status", "final_level", "final_confidence", "created_at", "citations",
                "best_iteration")


def _run_changes(sign: int, alias: str) -> str:
    return f"SELECT {sign}, {_RUN.format(alias=alias)}, {_BEST_HITS.format(alias=alias)}"


_CHANGED = " OR ".join(f"o.{c} IS DISTINCT FROM n.{c}" for c in _WHAT_COUNTS)
_TRIGGER_FUNCTIONS = {
    "document_day_rollup_runs_insert": _UPSERT.format(changes=_run_changes(1, "n") + " FROM new_runs n"),
    "document_day_rollup_runs_update": _UPSERT.format(changes=(
        "SELECT -1, o.collection, o.source, o.status, o.final_level, o.final_confidence, o.created_at, o.citations, "
        f"{_BEST_HITS.format(alias='o')} FROM old_runs o JOIN new_runs n USING (id) WHERE {_CHANGED} "
        f"UNION ALL {_run_changes(1, 'n')} FROM old_runs o JOIN new_runs n USING (id) WHERE {_CHANGED}")),
    # The best iteration arriving, changing or going: the run without its old hits, with its new ones.
    "document_day_rollup_iterations_insert": _UPSERT.format(changes=(
        f"SELECT s.sign, {_RUN.format(alias='r')}, CASE WHEN s.sign > 0 THEN n.retrieval -> 'hits' END "
        "FROM new_iterations n JOIN runs r ON r.id = n.run_id AND r.best_iteration = n.ordinal "
        "CROSS JOIN (VALUES (-1), (1)) AS s(sign)")),
    "document_day_rollup_iterations_update": _UPSERT.format(changes=(
        f"SELECT s.sign, {_RUN.format(alias='r')}, "
        "CASE WHEN s.sign > 0 THEN n.retrieval -> 'hits' ELSE o.retrieval -> 'hits' END "
        "FROM old_iterations o JOIN new_iterations n USING (id) "
        "JOIN runs r ON r.id = n.run_id AND r.best_iteration = n.ordinal "
        "CROSS JOIN (VALUES (-1), (1)) AS s(sign) "
        "WHERE o.retrieval -> 'hits' IS DISTINCT FROM n.retrieval -> 'hits'")),
    # A run's delete cascading to its iterations finds no run here: the run's own trigger subtracted it.
    "document_day_rollup_iterations_delete": _UPSERT.format(changes=(
        f"SELECT s.sign, {_RUN.format(alias='r')}, CASE WHEN s.sign < 0 THEN o.retrieval -> 'hits' END "
        "FROM old_iterations o JOIN runs r ON r.id = o.run_id AND r.best_iteration = o.ordinal "
        "CROSS JOIN (VALUES (-1), (1)) AS s(sign)")),
}
_TRIGGERS = {
    "document_day_rollup_runs_insert": "AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs",
    "document_day_rollup_runs_update": "AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs",
    "document_day_rollup_iterations_insert":
        "AFTER INSERT ON run_iterations REFERENCING NEW TABLE AS new_iterations",
    "document_day_rollup_iterations_update":
        "AFTER UPDATE ON run_iterations REFERENCING OLD TABLE AS old_iterations NEW TABLE AS new_iterations",
    "document_day_rollup_iterations_delete":
        "AFTER DELETE ON run_iterations REFERENCING OLD TABLE AS old_iterations",
}
_DELETE_FUNCTION = f"""
CREATE FUNCTION document_day_rollup_runs_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{_UPSERT.format(changes="SELECT -1, " + _RUN.format(alias="OLD") + ", " + _BEST_HITS.format(alias="OLD"))};
    RETURN OLD;
END $$"""

# Days [first_day, last_day] (NULL: open) recomputed from the runs. The lock waits for writers
# holding rollup rows and holds back new ones, so a run committed meanwhile is counted once:
# either this statement's snapshot sees it, or its trigger's delta lands after the recompute.
_REFRESH = f"""
CREATE FUNCTION refresh_document_day_rollup(first_day date, last_day date) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE document_day_rollup IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM document_day_rollup
    WHERE (first_day IS NULL OR day >= first_day) AND (last_day IS NULL OR day <= last_day);
{_UPSERT.format(changes=(
    "SELECT 1, " + _RUN.format(alias="r") + ", it.retrieval -> 'hits' FROM runs r "
    "LEFT JOIN run_iterations it ON it.run_id = r.id AND it.ordinal = r.best_iteration "
    "WHERE (first_day IS NULL OR r.created_at >= CAST(first_day AS timestamp) AT TIME ZONE 'UTC') "
    "AND (last_day IS NULL OR r.created_at < CAST(last_day + 1 AS timestamp) AT TIME ZONE 'UTC')"))};
END $$"""


def upgrade() -> None:
    op.execute("ALTER TABLE runs ADD COLUMN reflection_min_score float8 "
               "GENERATED ALWAYS AS (CAST(config ->> 'reflection_min_score' AS float8)) STORED")
    op.execute("""
        CREATE TABLE document_day_rollup (
            day date NOT NULL,  -- the runs' created_at, UTC
            run_collection text NOT NULL,  -- the runs' collection (the page's collection filter)
            collection text NOT NULL,  -- where the document is listed: the runs' collection or outside the corpus
            external_id text NOT NULL,
            runs bigint NOT NULL,  -- runs whose best iteration retrieved it or whose answer cited it
            retrieved bigint NOT NULL,
            cited bigint NOT NULL,
            approved bigint NOT NULL,
            flagged bigint NOT NULL,
            corrected bigint NOT NULL,
            pending bigint NOT NULL,
            auto_accepted bigint NOT NULL,
            low_confidence bigint NOT NULL,  -- LOW or VERY LOW, any status
            troubled bigint NOT NULL,  -- flagged or corrected, or low confidence and not approved
            confidence_sum numeric NOT NULL,  -- exact under adding and taking away, so it never drifts
            title text,
            PRIMARY KEY (day, run_collection, collection, external_id)
        )""")
    op.execute(_APPEARANCES)
    for name, body in _TRIGGER_FUNCTIONS.items():
        op.execute(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n{body};\n"
                   "    RETURN NULL;\nEND $$")
        op.execute(f"CREATE TRIGGER {name} {_TRIGGERS[name]} FOR EACH STATEMENT EXECUTE FUNCTION {name}()")
    op.execute(_DELETE_FUNCTION)
    op.execute("CREATE TRIGGER document_day_rollup_runs_delete BEFORE DELETE ON runs "
               "FOR EACH ROW EXECUTE FUNCTION document_day_rollup_runs_delete()")
    op.execute(_REFRESH)
    op.execute("SELECT refresh_document_day_rollup(NULL, NULL)")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS document_day_rollup_runs_delete ON runs")
    op.execute("DROP FUNCTION IF EXISTS document_day_rollup_runs_delete()")
    for name, trigger in _TRIGGERS.items():
        table = trigger.split(" ON ")[1].split()[0]
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.execute("DROP FUNCTION IF EXISTS refresh_document_day_rollup(date, date)")
    op.execute("DROP FUNCTION IF EXISTS document_appearances(text, text, jsonb, jsonb)")
    op.execute("DROP TABLE IF EXISTS document_day_rollup")
    op.execute("ALTER TABLE runs DROP COLUMN IF EXISTS reflection_min_score")
