"""The Tuning matrix's numbers in a narrow table kept by triggers (issue 32): one row per run.

The Tuning page's first open in a process read every run (month partitions, 1.4 GB of heap at a
million runs) with per-row JSON expressions (signals ->> 'reflection' and others): 13.1 s at a
million runs. `run_matrix_rows` holds, per run, its id, created_at and `numbers`: exactly what
services/scoring/run_matrix.py loads, as one fixed-width binary record (the layout below,
big-endian, as PostgreSQL's send functions write each value), so the load concatenates records
(string_agg) and numpy reads them as one array. Per-value output is what a million runs' read
waited for: a binary COPY of the same numbers as 17 columns took 1.5 s in the server alone (to
/dev/null, load 7) and a million CopyData messages 2-3 s more in the client; the records read as
16 values of 7 MB took 1.2 s in all at the same load (2026-11-27).

The record: the status, level and preset as int2 codes (their position in run_matrix_names(), 0
for a name outside it, which the reader then reads from runs by id); the final confidence, the
seven components, the reflection, grade and heuristic signals (float8, NaN when missing or not a
number); whether there is an answer and CRAG said CORRECT (bool); and the two numbers the
reflection-approved flag is computed from at read time (its fallback minimum is the code's
REFLECTION_MIN_SCORE, not frozen here): reflection_score and reflection_min_score, NULL as NaN
and a stored NaN as +Infinity (PostgreSQL orders NaN above every number, so >= compares alike).
run_matrix_record_layout() names the fields; the reader refuses a store whose layout is not its own.

Kept by statement-level triggers with transition tables on runs, as 0015's rollup is: every
writer (the pipeline, intake storing a run then updating it when assessed, reviewers' verdicts,
level changes, deletes, whatever writes runs next) is seen in its own transaction. An update
rewrites a row only when its record changed (a comment does not). TRUNCATE runs empties it (a
statement trigger on TRUNCATE). What fires nothing: a COPY under session_replication_role replica
(bench/_volume_build.py calls refresh_run_matrix_rows afterwards), dropping or rebuilding a
month's table (retention deletes the rows of the runs it removes, services/review/retention.py),
moving a month's rows out of runs_default (ids and values stay: nothing to do).

Not partitioned: a month pruned is a delete by id of a narrow table's rows (330k a month at a
million runs over 90 days), and one table keeps the load a single plain scan.

The upgrade fills it from every run: a million runs took 13.6-17.3 s (three upgrades of the bench
store, 2026-11-27 15:07-15:22Z, load 5.7-8.8): 197 MB with its key, 197 bytes a run.

Revision ID: 0017
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# Frozen copies of services.domain.STATUSES, services.scoring.weights.LEVELS and the presets
# run_matrix codes (a migration must not change when the code does; a name added later gets
# code 0 and is read by run id, so a new name costs a lookup, never a wrong code).
_NAMES = ("auto_accepted", "pending", "approved", "flagged", "corrected",
          "HIGH", "MEDIUM", "LOW", "VERY LOW",
          "balanced", "minimal", "research", "as-written", "full", "external")
_COMPONENTS = 7  # len(services.scoring.weights.COMPONENTS)

_NAMES_FUNCTIONS = """
CREATE FUNCTION run_matrix_names() RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY[""" + ", ".join(f"'{name}'" for name in _NAMES) + """]
$$;
CREATE FUNCTION run_matrix_code(name text) RETURNS int2 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CAST(coalesce(array_position(run_matrix_names(), name), 0) AS int2)
$$;
"""


def _signal(name: str) -> str:
    # A number only: a run whose signal is not one is stored with NaN, never refused.
    return (f"float8send(coalesce(CASE WHEN jsonb_typeof(r.signals -> '{name}') = 'number' "
            f"THEN CAST(r.signals ->> '{name}' AS float8) END, 'NaN'))")


def _compared(column: str) -> str:
    return (f"float8send(CASE WHEN r.{column} IS NULL THEN 'NaN' WHEN r.{column} = 'NaN' THEN 'Infinity' "
            f"ELSE r.{column} END)")


# The record's fields (name:type, numpy's letters) and how each is written from a row `r` of runs.
_RECORD = {
    "id:i8": "int8send(r.id)",
    "status:i2": "int2send(run_matrix_code(r.status))",
    "level:i2": "int2send(run_matrix_code(r.final_level))",
    "preset:i2": "int2send(run_matrix_code(r.preset))",
    "confidence:f8": "float8send(coalesce(r.final_confidence, 'NaN'))",
    **{f"c{i}:f8": f"float8send(coalesce(r.components[{i + 1}], 'NaN'))" for i in range(_COMPONENTS)},
    "reflection:f8": _signal("reflection"),
    "grade:f8": _signal("grade"),
    "heuristic:f8": _signal("heuristic"),
    "has_answer:b1": "boolsend(coalesce(r.final_answer <> '', false))",
    "crag_correct:b1": "boolsend(r.crag_verdict IS NOT DISTINCT FROM 'CORRECT')",
    "reflection_score:f8": _compared("reflection_score"),
    "reflection_min_score:f8": _compared("reflection_min_score"),
}
_LAYOUT = """
CREATE FUNCTION run_matrix_record_layout() RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT '""" + ",".join(_RECORD) + """'
$$;
"""
_DERIVED = {"id": "r.id", "created_at": "r.created_at", "numbers": " || ".join(_RECORD.values())}
_TYPES = {"id": "bigint PRIMARY KEY", "created_at": "timestamptz NOT NULL", "numbers": "bytea NOT NULL"}
_COLUMNS = ", ".join(_DERIVED)
_VALUES = ", ".join(_DERIVED.values())
_KEPT = [c for c in _DERIVED if c != "id"]
# The rows of `source` (runs or a transition table of it, as r) written; an unchanged row is not rewritten.
_UPSERT = ("INSERT INTO run_matrix_rows AS t (" + _COLUMNS + ") SELECT " + _VALUES + " FROM {source} r "
           "ORDER BY r.id "
           "ON CONFLICT (id) DO UPDATE SET (" + ", ".join(_KEPT) + ") = ROW(" + ", ".join(f"EXCLUDED.{c}" for c in _KEPT)
           + ") WHERE (" + ", ".join(f"t.{c}" for c in _KEPT) + ") IS DISTINCT FROM ("
           + ", ".join(f"EXCLUDED.{c}" for c in _KEPT) + ")")
_TRIGGERS = {
    "run_matrix_rows_insert": ("AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT",
                               _UPSERT.format(source="new_runs")),
    "run_matrix_rows_update": ("AFTER UPDATE ON runs REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT",
                               _UPSERT.format(source="new_runs")),
    "run_matrix_rows_delete": ("AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs FOR EACH STATEMENT",
                               "DELETE FROM run_matrix_rows WHERE id IN (SELECT id FROM old_runs)"),
    # A TRUNCATE naming both tables (tests' clean_db) has emptied this one already and holds it open:
    # TRUNCATE refuses then, and the DELETE finds nothing to do.
    "run_matrix_rows_truncate": ("AFTER TRUNCATE ON runs FOR EACH STATEMENT",
                                 "BEGIN\n        TRUNCATE run_matrix_rows;\n    EXCEPTION WHEN object_in_use THEN\n"
                                 "        DELETE FROM run_matrix_rows;\n    END"),
}

# Runs created in [low, high) (NULL: open) written again from runs, in id order (the order the
# reader wants them in: read by key ranges, they then arrive sorted). The lock waits for writers
# holding rows and holds back new ones: a run committed meanwhile is either in this statement's
# snapshot or written by its own trigger after the refresh (an upsert either way).
_REFRESH = """
CREATE FUNCTION refresh_run_matrix_rows(low timestamptz, high timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE run_matrix_rows IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM run_matrix_rows WHERE (low IS NULL OR created_at >= low) AND (high IS NULL OR created_at < high);
    """ + _UPSERT.format(source="runs").replace(
    " ORDER BY r.id", " WHERE (low IS NULL OR r.created_at >= low) AND (high IS NULL OR r.created_at < high) "
                      "ORDER BY r.id") + """;
END $$"""


def upgrade() -> None:
    op.execute(_NAMES_FUNCTIONS)
    op.execute(_LAYOUT)
    columns = ",\n    ".join(f"{c} {_TYPES[c]}" for c in _DERIVED)
    op.execute(f"CREATE TABLE run_matrix_rows (\n    {columns}\n)")
    for name, (trigger, body) in _TRIGGERS.items():
        op.execute(f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n    {body};\n"
                   "    RETURN NULL;\nEND $$")
        op.execute(f"CREATE TRIGGER {name} {trigger} EXECUTE FUNCTION {name}()")
    op.execute(_REFRESH)
    op.execute("SELECT refresh_run_matrix_rows(NULL, NULL)")
    op.execute("ANALYZE run_matrix_rows")


def downgrade() -> None:
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON runs")
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.execute("DROP FUNCTION IF EXISTS refresh_run_matrix_rows(timestamptz, timestamptz)")
    op.execute("DROP TABLE IF EXISTS run_matrix_rows")
    op.execute("DROP FUNCTION IF EXISTS run_matrix_code(text), run_matrix_names(), run_matrix_record_layout()")
