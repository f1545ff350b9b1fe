"""A per-document index of runs for the Document trends drill-down, kept by triggers (issue 32).

The drill-down (services/review/documents.document_runs: the newest runs one document appeared
in) unnested the best iteration's hits of every run since the first day it needed: 24.6-57.9 s
at a million runs for a document seen in 930 runs over 90 days. `document_run_index` holds one
row per (listed collection, document, run): the run's created_at and id, the document's best
rank in the run's best iteration (NULL when only cited) and whether the final answer cited it.
The drill-down walks its key backwards from the newest and joins runs by (id, created_at) for
the columns it shows.

A run's documents are derived once, by 0015's document_appearances (the rollup uses it too); it
now returns the best rank as well (a rank that is not an integer counts as none: a write is never
refused for it). It is replaced here with that column added; the rollup's triggers read it by
column name and are unchanged.

Kept by statement-level triggers with transition tables, as the rollup and 0017's run_matrix_rows:
a run inserted adds its documents; a run whose collection, source, citations, best iteration or
created_at changed (a move to another month included) has its rows written again; a deleted run
loses its rows; the best iteration arriving, changing its hits or going writes its run's rows
again; TRUNCATE runs empties it. Verdicts and level changes do not touch it (the drill-down reads
status and level from runs). What fires nothing: a COPY under session_replication_role replica
(bench/_volume_build.py calls refresh_document_run_index afterwards), dropping or rebuilding a
month's table (retention deletes the rows of the runs it removes), moving a month's rows out of
runs_default (they keep id and created_at).

The upgrade indexes every run (the key and the run_id index built after the fill): a million runs
took 130.4 s (2026-11-27 15:26Z, load 4.7 -> 9.8) and 911 MB, 911 bytes a run (about five
documents a run); the drill-down of a document's newest 200 runs then reads 200 index entries and
probes runs 200 times: 2.7-17 ms for a document in 45,801 runs (load 7.7).

Revision ID: 0018
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# 0015's function, as it was (for the downgrade), and with the best rank (frozen copies of
# services.domain.ANONYMOUS_CONTEXT and services.review.documents.OUTSIDE_CORPUS).
_APPEARANCES_0015 = r"""
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
_APPEARANCES = r"""
CREATE FUNCTION document_appearances(run_collection text, run_source text, citations jsonb, hits jsonb)
RETURNS TABLE (collection text, external_id text, retrieved boolean, cited boolean, title text, best_rank integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT d.collection, d.external_id, bool_or(d.retrieved), bool_or(d.cited), max(d.title), min(d.rank)
    FROM (
        SELECT CASE WHEN COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0
                    THEN 'outside the corpus (' || run_source || ')' ELSE run_collection END,
               h ->> 'external_id', NULLIF(h ->> 'title', ''), true, false,
               CASE WHEN h ->> 'rank' ~ '^-?[0-9]{1,9}$' THEN CAST(h ->> 'rank' AS integer) END
        FROM jsonb_array_elements(COALESCE(hits, '[]')) h
        WHERE NOT (COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0
                   AND h ->> 'external_id' = 'context ' || (h ->> 'rank'))
        UNION ALL
        SELECT run_collection, c ->> 'external_id', NULL, false, true, NULL
        FROM jsonb_array_elements(COALESCE(citations, '[]')) c
    ) AS d(collection, external_id, title, retrieved, cited, rank)
    WHERE d.external_id <> ''
    GROUP BY d.collection, d.external_id
$$"""

# The rows of the runs `{runs}` (as r: runs or a transition table of it, with the condition
# `{where}`), each with its best iteration's hits.
_ADD = """INSERT INTO document_run_index AS t (collection, external_id, created_at, run_id, best_rank, cited)
    SELECT a.collection, a.external_id, r.created_at, r.id, a.best_rank, a.cited
    FROM {runs} r
    LEFT JOIN run_iterations it ON it.run_id = r.id AND it.ordinal = r.best_iteration
    CROSS JOIN LATERAL document_appearances(r.collection, r.source, r.citations, it.retrieval -> 'hits') a
    WHERE {where}
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (collection, external_id, created_at, run_id) DO UPDATE
    SET best_rank = EXCLUDED.best_rank, cited = EXCLUDED.cited"""
_WHAT_COUNTS = ("collection", "source", "citations", "best_iteration", "created_at")
_CHANGED = "(" + " OR ".join(f"o.{c} IS DISTINCT FROM n.{c}" for c in _WHAT_COUNTS) + ")"
# Runs whose best iteration is among `{iterations}` (a transition table of run_iterations) written
# again: a change to another iteration does not matter; a run deleted with its iterations is gone.
_BEST_OF = "SELECT r.* FROM {iterations} n JOIN runs r ON r.id = n.run_id AND r.best_iteration = n.ordinal"
_REDO_BEST = ("DELETE FROM document_run_index WHERE run_id IN (SELECT b.id FROM (" + _BEST_OF + ") b);\n    "
              + _ADD.format(runs="(" + _BEST_OF + ")", where="true"))

_FUNCTIONS = {
    "document_run_index_runs_insert": _ADD.format(runs="new_runs", where="true"),
    "document_run_index_runs_update": (
        f"DELETE FROM document_run_index WHERE run_id IN (SELECT o.id FROM old_runs o JOIN new_runs n USING (id) "
        f"WHERE {_CHANGED});\n    "
        + _ADD.format(runs="new_runs", where=f"r.id IN (SELECT o.id FROM old_runs o JOIN new_runs n USING (id) "
                                             f"WHERE {_CHANGED})")),
    "document_run_index_runs_delete": "DELETE FROM document_run_index WHERE run_id IN (SELECT id FROM old_runs)",
    # A TRUNCATE naming both tables has emptied this one already and holds it open: the DELETE is a no-op.
    "document_run_index_runs_truncate": ("BEGIN\n        TRUNCATE document_run_index;\n"
                                         "    EXCEPTION WHEN object_in_use THEN\n"
                                         "        DELETE FROM document_run_index;\n    END"),
    "document_run_index_iterations_insert": _REDO_BEST.replace("{iterations}", "new_iterations"),
    # Only a change of the hits matters; a run whose best iteration went has its citations left.
    "document_run_index_iterations_update": _REDO_BEST.replace(
        "{iterations}", "(SELECT n.run_id, n.ordinal FROM old_iterations o JOIN new_iterations n USING (id) "
                        "WHERE o.retrieval -> 'hits' IS DISTINCT FROM n.retrieval -> 'hits')"),
    "document_run_index_iterations_delete": _REDO_BEST.replace("{iterations}", "old_iterations"),
}
_TRIGGERS = {
    "document_run_index_runs_insert": "AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs",
    "document_run_index_runs_update": "AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs",
    "document_run_index_runs_delete": "AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs",
    "document_run_index_runs_truncate": "AFTER TRUNCATE ON runs",
    "document_run_index_iterations_insert": "AFTER INSERT ON run_iterations REFERENCING NEW TABLE AS new_iterations",
    "document_run_index_iterations_update":
        "AFTER UPDATE ON run_iterations REFERENCING OLD TABLE AS old_iterations NEW TABLE AS new_iterations",
    "document_run_index_iterations_delete": "AFTER DELETE ON run_iterations REFERENCING OLD TABLE AS old_iterations",
}

_RANGE = "(low IS NULL OR {alias}.created_at >= low) AND (high IS NULL OR {alias}.created_at < high)"
# Runs created in [low, high) (NULL: open) indexed again from runs. The lock waits for writers
# holding rows and holds back new ones: a run committed meanwhile is either in this statement's
# snapshot or indexed by its own trigger after the refresh (an upsert either way).
_REFRESH = """
CREATE FUNCTION refresh_document_run_index(low timestamptz, high timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE document_run_index IN SHARE ROW EXCLUSIVE MODE;
    IF low IS NULL AND high IS NULL THEN
        TRUNCATE document_run_index;
    ELSE
        DELETE FROM document_run_index r WHERE """ + _RANGE.format(alias="r") + """;
    END IF;
    """ + _ADD.format(runs="runs", where=_RANGE.format(alias="r")) + """;
END $$"""


def upgrade() -> None:
    op.execute("DROP FUNCTION document_appearances(text, text, jsonb, jsonb)")
    op.execute(_APPEARANCES)
    # The key and the run_id index are built after the first fill: one build beats maintaining them row by row.
    op.execute("""
        CREATE TABLE document_run_index (
            collection text NOT NULL,  -- as document_trends lists it: the run's collection or outside the corpus
            external_id text NOT NULL,
            created_at timestamptz NOT NULL,  -- the run's
            run_id bigint NOT NULL,
            best_rank integer,  -- the document's best rank in the run's best iteration; NULL when only cited
            cited boolean NOT NULL
        )""")
    op.execute(_ADD.format(runs="runs", where="true").split(" ON CONFLICT")[0])
    op.execute("ALTER TABLE document_run_index ADD PRIMARY KEY (collection, external_id, created_at, run_id)")
    op.execute("CREATE INDEX document_run_index_run ON document_run_index (run_id)")
    for name, body in _FUNCTIONS.items():
        op.execute(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n    {body};\n"
                   "    RETURN NULL;\nEND $$")
        op.execute(f"CREATE TRIGGER {name} {_TRIGGERS[name]} FOR EACH STATEMENT EXECUTE FUNCTION {name}()")
    op.execute(_REFRESH)
    op.execute("ANALYZE document_run_index")


def downgrade() -> None:
    for name, trigger in _TRIGGERS.items():
        table = trigger.split(" ON ")[1].split()[0]
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.execute("DROP FUNCTION IF EXISTS refresh_document_run_index(timestamptz, timestamptz)")
    op.execute("DROP TABLE IF EXISTS document_run_index")
    op.execute("DROP FUNCTION document_appearances(text, text, jsonb, jsonb)")
    op.execute(_APPEARANCES_0015)
