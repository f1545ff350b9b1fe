"""Runs as range partitions by month of created_at (issue 32, retention): `workbench prune`
removes a month by dropping its table (services/review/retention.py), not row by row.

Design, and why:

- The key becomes (id, created_at): PostgreSQL requires a partitioned table's unique keys to
  hold the partition key. Ids still come from runs_id_seq alone and stay unique in practice;
  a lookup by id alone probes each month's key index (a few dozen months: cheap).
- review_history, run_iterations, run_events, llm_calls and run_intake no longer reference
  runs by a foreign key. A key to (id, created_at) would need every writer (the pipeline, the
  intake, the bulk loader's COPY) to carry the run's created_at in each child row, and a
  referenced partition cannot be dropped while the key points at it anyway. Instead, as the
  chunks' postings do since 0009, the references are kept by the code that removes runs:
  * `DELETE FROM runs ...` still removes a run's children (and clears run_intake.run_id), as
    the keys' ON DELETE CASCADE / SET NULL did: a statement trigger on runs (runs_children_gone)
    does it for every deleted row, built here from the keys it replaces;
  * dropping a month's table fires no trigger: prune deletes the children of the runs it drops
    in the same transaction (tests/services/review/test_retention.py checks nothing is orphaned).
  What is lost: the database no longer refuses a child row naming a run that does not exist.
- (trace_id, app) stays unique across months: a unique index on a partitioned table must hold
  created_at (it would then be unique per instant only), so runs_trace_id is a plain index and
  a trigger (runs_trace_id_unique) refuses a second run of one app with one trace id with the
  same error (unique_violation on "runs_trace_id"), serialised per key by an advisory lock.
- A run never fails for want of a partition: runs_default takes rows of any month without one.
  runs_month_partition_add(month) creates a month's table (moving in any of its rows the default
  holds) and is called here for every month holding runs and the next ones, and by the daily
  retention job and prune for the months ahead.
- Months are UTC months: runs_YYYY_MM holds [YYYY-MM-01 00:00Z, next month 00:00Z).

The conversion copies every column runs has at upgrade time (CREATE TABLE ... LIKE), its
indexes (each recreated by its own definition on the partitioned table), CHECK constraints,
foreign keys to other tables and triggers, so what migrations before this one added comes along
(0015's row-level rollup delete trigger becomes a statement trigger: _rollup_delete_by_statement).
It rewrites the table once with runs locked: 65,491 runs took 9.4 s (2026-11-27, load 9.5).

Revision ID: 0016
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

MONTHS_AHEAD = 2  # partitions exist for this month and the next two

# CREATE TABLE ... (LIKE) + ATTACH rather than PARTITION OF: attaching locks runs SHARE UPDATE
# EXCLUSIVE, so a month created while the API writes runs does not block it (as in 0009).
# Rows of the month already in the default partition move into the new table before it is
# attached (the attach would fail on them); they keep their ids, and no run trigger fires.
_PARTITION_FUNCTION = """
CREATE FUNCTION runs_month_table(month timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT 'runs_' || to_char(date_trunc('month', month, 'UTC') AT TIME ZONE 'UTC', 'YYYY_MM')
$$;
CREATE FUNCTION runs_month_partition_add(month timestamptz) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := date_trunc('month', month, 'UTC');
    high timestamptz := date_trunc('month', month, 'UTC') + interval '1 month';
    name text := runs_month_table(month);
    columns text := runs_stored_columns();
    moved bigint;
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN name;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)', name);
    EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM runs_default WHERE created_at >= %L AND created_at < %L',
                   name, columns, columns, low, high);
    GET DIAGNOSTICS moved = ROW_COUNT;
    EXECUTE format('DELETE FROM runs_default WHERE created_at >= %L AND created_at < %L', low, high);
    EXECUTE format('ALTER TABLE runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, low, high);
    -- Row triggers saw the rows leave the default and not arrive: a rollup kept by them (0015) is recomputed.
    IF moved > 0 AND to_regprocedure('refresh_document_day_rollup(date, date)') IS NOT NULL THEN
        PERFORM refresh_document_day_rollup(CAST(low AT TIME ZONE 'UTC' AS date),
                                            CAST(high AT TIME ZONE 'UTC' AS date) - 1);
    END IF;
    RETURN name;
END $$;
"""
# What retention (services/review/retention.py) does to a month's table, by the table's name made
# here (identifiers cannot be bound). Lock: reviews of the month wait until the prune commits.
# Keep only: the table replaced by one holding the month's runs whose ids are not in the session's
# temporary table retention_gone; the detach and attach take runs' locks only at the end.
_RETENTION_FUNCTIONS = """
CREATE FUNCTION runs_month_lock(month timestamptz) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('LOCK TABLE %I IN SHARE MODE', runs_month_table(month));
    RETURN runs_month_table(month);
END $$;
CREATE FUNCTION runs_month_drop(month timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TABLE %I', runs_month_table(month));
END $$;
CREATE FUNCTION runs_month_keep_only(month timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := date_trunc('month', month, 'UTC');
    name text := runs_month_table(month);
    kept text := runs_month_table(month) || '_kept';
    columns text := runs_stored_columns();
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)', kept);
    EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I WHERE id NOT IN (SELECT id FROM retention_gone)',
                   kept, columns, columns, name);
    EXECUTE format('ALTER TABLE runs DETACH PARTITION %I', name);
    EXECUTE format('DROP TABLE %I', name);
    EXECUTE format('ALTER TABLE %I RENAME TO %I', kept, name);
    EXECUTE format('ALTER TABLE runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   name, low, low + interval '1 month');
END $$;
"""
# The columns a row of runs is copied by: all but generated ones (which the copy computes again).
_STORED_COLUMNS_FUNCTION = """
CREATE FUNCTION runs_stored_columns() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
    WHERE attrelid = 'runs'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
$$;
"""

# What a foreign key's ON DELETE did, done for all of a statement's deleted runs at once.
_ON_DELETE = {
    "c": "DELETE FROM {table} WHERE {column} IN (SELECT id FROM gone);",
    "n": "UPDATE {table} SET {column} = NULL WHERE {column} IN (SELECT id FROM gone);",
}

_TRACE_UNIQUE = """
CREATE FUNCTION runs_trace_id_unique() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Two transactions adding one key wait for each other here; the second then sees the first's row.
    PERFORM pg_advisory_xact_lock(727016, hashtext(NEW.app || chr(31) || NEW.trace_id));
    IF EXISTS (SELECT 1 FROM runs WHERE trace_id = NEW.trace_id AND app = NEW.app AND id <> NEW.id) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "runs_trace_id"'
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'runs_trace_id', TABLE = 'runs',
                  DETAIL = format('Key (trace_id, app)=(%s, %s) already exists.', NEW.trace_id, NEW.app);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER runs_trace_id_unique BEFORE INSERT OR UPDATE OF trace_id, app ON runs
    FOR EACH ROW WHEN (NEW.trace_id IS NOT NULL AND NEW.app IS NOT NULL) EXECUTE FUNCTION runs_trace_id_unique();
"""
# Unique indexes the partitioned table cannot have as such, and what keeps them unique instead.
_UNIQUE_BY_TRIGGER = {"runs_trace_id"}
_ON_TABLE = re.compile(r" ON (ONLY )?(\w+\.)?\"?(runs_unpartitioned|runs_partitioned)\"? ")


def _rows(sql: str) -> list[sa.Row]:
    return list(op.get_bind().execute(sa.text(sql)))


def _take_apart(table: str, *, own_triggers: tuple[str, ...] = ()) -> dict[str, list[sa.Row]]:
    """Drop `table`'s indexes, foreign keys, triggers and key, returning their definitions, so
    a new table can take the names (triggers of other migrations, e.g. 0015's, come along)."""
    parts = {
        "indexes": _rows(f"""SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition,
                                    indisunique AS is_unique
                             FROM pg_index WHERE indrelid = '{table}'::regclass AND NOT indisprimary"""),
        "keys": _rows(f"""SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
                          WHERE conrelid = '{table}'::regclass AND contype = 'f'"""),
        "triggers": [t for t in _rows(f"""SELECT tgname AS name, pg_get_triggerdef(oid) AS definition FROM pg_trigger
                                          WHERE tgrelid = '{table}'::regclass AND NOT tgisinternal
                                          AND tgparentid = 0""") if t.name not in own_triggers],
    }
    for trigger in parts["triggers"]:
        op.execute(f'DROP TRIGGER "{trigger.name}" ON {table}')
    for ix in parts["indexes"]:
        op.execute(f'DROP INDEX "{ix.name}"')
    for key in parts["keys"]:
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{key.name}"')
    op.execute(f"ALTER TABLE {table} DROP CONSTRAINT runs_pkey")
    return parts


def _put_back(parts: dict[str, list[sa.Row]], *, unique: set[str]) -> None:
    """The definitions `_take_apart` returned, on runs; indexes named in `unique` made unique, others not."""
    for ix in parts["indexes"]:
        definition = _ON_TABLE.sub(" ON runs ", ix.definition).replace("CREATE UNIQUE INDEX", "CREATE INDEX")
        op.execute(definition.replace("CREATE INDEX", "CREATE UNIQUE INDEX") if ix.name in unique else definition)
    for key in parts["keys"]:
        op.execute(f'ALTER TABLE runs ADD CONSTRAINT "{key.name}" {key.definition}')
    for trigger in parts["triggers"]:
        op.execute(_ON_TABLE.sub(" ON runs ", trigger.definition))


# 0015's rollup subtracts a deleted run in a row-level BEFORE DELETE trigger (while its best iteration
# is still there). On a partitioned table a row that changes month (UPDATE of created_at) is moved as
# a delete and an insert: the row trigger would subtract it on top of the UPDATE statement trigger's
# -old +new. Here it becomes a statement trigger on the deleted rows, which moves do not fire; it runs
# before runs_children_gone (same event, name order), while the iterations still exist. Its body is
# the insert trigger's, read from the database, with the sign and the transition table turned.
# The trigger keeps its name (what disables it by name still finds it); its function is a new one.
_ROLLUP_ROW_TRIGGER = "document_day_rollup_runs_delete"
_ROLLUP_STATEMENT_FUNCTION = "document_day_rollup_runs_deleted"


def _rollup_delete_by_statement(parts: dict[str, list[sa.Row]]) -> None:
    if not any(t.name == _ROLLUP_ROW_TRIGGER for t in parts["triggers"]):
        return
    parts["triggers"] = [t for t in parts["triggers"] if t.name != _ROLLUP_ROW_TRIGGER]
    body = op.get_bind().execute(sa.text(
        "SELECT prosrc FROM pg_proc WHERE proname = 'document_day_rollup_runs_insert'")).scalar_one()
    for old, new in (("SELECT 1, n.", "SELECT -1, n."), ("FROM new_runs n", "FROM old_runs n")):
        if body.count(old) != 1:
            raise RuntimeError(f"0016 turns the rollup's insert trigger into its delete trigger and expected "
                               f"{old!r} once in it; update _rollup_delete_by_statement for 0015's new text")
        body = body.replace(old, new)
    op.execute(f"CREATE FUNCTION {_ROLLUP_STATEMENT_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $${body}$$")
    op.execute(f"CREATE TRIGGER {_ROLLUP_ROW_TRIGGER} AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs "
               f"FOR EACH STATEMENT EXECUTE FUNCTION {_ROLLUP_STATEMENT_FUNCTION}()")


def _copy_rows(source: str) -> None:
    columns = op.get_bind().execute(sa.text("SELECT runs_stored_columns()")).scalar_one()
    op.execute(f"INSERT INTO runs ({columns}) SELECT {columns} FROM {source}")


def upgrade() -> None:
    referencing = _rows("""
        SELECT c.conname, c.conrelid::regclass::text AS tbl, a.attname AS col, c.confdeltype AS on_delete
        FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        WHERE c.contype = 'f' AND c.confrelid = 'runs'::regclass ORDER BY 2""")
    unknown = [r for r in referencing if r.on_delete not in _ON_DELETE]
    if unknown:
        raise RuntimeError(f"0016 keeps ON DELETE CASCADE or SET NULL of keys to runs by a trigger; these keys do "
                           f"something else: {[r.conname for r in unknown]} (extend _ON_DELETE first)")
    for ref in referencing:
        op.execute(f'ALTER TABLE {ref.tbl} DROP CONSTRAINT "{ref.conname}"')

    op.execute("ALTER TABLE runs RENAME TO runs_unpartitioned")
    surprising = [ix.name for ix in _rows("""SELECT indexrelid::regclass::text AS name FROM pg_index
        WHERE indrelid = 'runs_unpartitioned'::regclass AND indisunique AND NOT indisprimary""")
                  if ix.name not in _UNIQUE_BY_TRIGGER]
    if surprising:
        raise RuntimeError(f"0016 cannot keep these unique indexes on runs across months: {surprising}")
    parts = _take_apart("runs_unpartitioned")

    op.execute("CREATE TABLE runs (LIKE runs_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
               "INCLUDING GENERATED INCLUDING STATISTICS INCLUDING COMMENTS) PARTITION BY RANGE (created_at)")
    op.execute("ALTER SEQUENCE runs_id_seq OWNED BY runs.id")
    op.execute("ALTER TABLE runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id, created_at)")
    op.execute("CREATE TABLE runs_default PARTITION OF runs DEFAULT")
    op.execute(_STORED_COLUMNS_FUNCTION)
    op.execute(_PARTITION_FUNCTION)
    op.execute(_RETENTION_FUNCTIONS)
    op.execute(f"""SELECT runs_month_partition_add(month) FROM (
        SELECT DISTINCT date_trunc('month', created_at, 'UTC') AS month FROM runs_unpartitioned
        UNION SELECT date_trunc('month', now(), 'UTC') + make_interval(months => m)
        FROM generate_series(0, {MONTHS_AHEAD}) m) months ORDER BY month""")
    # Rows first, then indexes: one build per index beats maintaining them row by row; and the
    # triggers last, so the copy is not counted again by what they keep (0015's rollup).
    _copy_rows("runs_unpartitioned")
    op.execute("DROP TABLE runs_unpartitioned")
    _rollup_delete_by_statement(parts)
    _put_back(parts, unique=set())

    actions = "\n    ".join(_ON_DELETE[r.on_delete].format(table=r.tbl, column=r.col) for r in referencing)
    op.execute(f"""CREATE FUNCTION runs_children_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {actions or 'NULL;'}
    RETURN NULL;
END $$""")
    op.execute("CREATE TRIGGER runs_children_gone AFTER DELETE ON runs REFERENCING OLD TABLE AS gone "
               "FOR EACH STATEMENT EXECUTE FUNCTION runs_children_gone()")
    op.execute(_TRACE_UNIQUE)
    op.execute("ANALYZE runs")


# The keys 0002, 0003 and 0006 made, as they were before this migration.
_KEYS_BEFORE = (
    ("review_history", "review_history_run_id_fkey", "run_id", "CASCADE"),
    ("run_iterations", "run_iterations_run_id_fkey", "run_id", "CASCADE"),
    ("run_events", "run_events_run_id_fkey", "run_id", "CASCADE"),
    ("llm_calls", "llm_calls_run_id_fkey", "run_id", "CASCADE"),
    ("run_intake", "run_intake_run_id_fkey", "run_id", "SET NULL"),
)
_OWN_TRIGGERS = ("runs_children_gone", "runs_trace_id_unique")


def downgrade() -> None:
    rollup = op.get_bind().execute(sa.text(f"SELECT to_regprocedure('{_ROLLUP_STATEMENT_FUNCTION}()')")).scalar()
    for trigger in _OWN_TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger} ON runs")
    if rollup is not None:
        op.execute(f"DROP TRIGGER {_ROLLUP_ROW_TRIGGER} ON runs")
        op.execute(f"DROP FUNCTION {_ROLLUP_STATEMENT_FUNCTION}()")
    op.execute("ALTER TABLE runs RENAME TO runs_partitioned")
    parts = _take_apart("runs_partitioned", own_triggers=_OWN_TRIGGERS)
    op.execute("CREATE TABLE runs (LIKE runs_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
               "INCLUDING GENERATED INCLUDING STATISTICS INCLUDING COMMENTS)")
    op.execute("ALTER SEQUENCE runs_id_seq OWNED BY runs.id")
    _copy_rows("runs_partitioned")
    op.execute("DROP TABLE runs_partitioned")  # and its partitions
    op.execute("DROP FUNCTION runs_children_gone(), runs_trace_id_unique(), runs_month_partition_add(timestamptz), "
               "runs_month_lock(timestamptz), runs_month_drop(timestamptz), runs_month_keep_only(timestamptz), "
               "runs_month_table(timestamptz), runs_stored_columns()")
    op.execute("ALTER TABLE runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id)")
    _put_back(parts, unique=_UNIQUE_BY_TRIGGER)
    if rollup is not None:
        op.execute(f"CREATE TRIGGER {_ROLLUP_ROW_TRIGGER} BEFORE DELETE ON runs "
                   f"FOR EACH ROW EXECUTE FUNCTION {_ROLLUP_ROW_TRIGGER}()")
    # A child row whose run is gone could not have a key again: such rows go, as the keys would have done.
    for table, name, column, on_delete in _KEYS_BEFORE:
        if on_delete == "CASCADE":
            op.execute(f"DELETE FROM {table} c WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.{column})")
        else:
            op.execute(f"UPDATE {table} c SET {column} = NULL WHERE {column} IS NOT NULL "
                       f"AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.{column})")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}) REFERENCES runs (id) "
                   f"ON DELETE {on_delete}")
