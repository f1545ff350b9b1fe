"""The tables recorded about a run are range-partitioned by the run's month too (issue 32.4), so
pruning a month drops (or swaps) their month tables with the runs' table instead of deleting their
rows one by one: those rows are more than four fifths of a run's bytes, and deleting them took 18.7
of a month's 21.5 s prune on a 200k store, and never gave their space back (README, Retention).

Design, and why:

- review_history, run_iterations, run_events and llm_calls get `run_created_at`, their run's
  created_at, as the partition key (NOT NULL: every row of theirs has a run). Their months are the
  runs' months: `review_history_2026_11` holds the rows of the runs in `runs_2026_11`, and
  `<table>_default` those of runs waiting in runs_default. Writers give it (save_run, intake's
  COPY, reviews, the bulk loader): a BEFORE INSERT trigger cannot fill it, because a row is routed
  to its partition before such a trigger runs and PostgreSQL refuses to move it afterwards.
- Keys hold the partition key, as PostgreSQL requires: (id, run_created_at), and review_history's
  (run_id, version) and run_iterations' (run_id, ordinal) become (..., run_created_at), which is
  as unique, a run having one created_at. Ids still come from each table's sequence alone.
- run_intake stays one table, pruned by run as before: a record exists before its run (queued,
  run_id NULL until assessed), its (app, trace_id) must stay unique across all time for intake's
  ON CONFLICT (a unique key of a partitioned table would have to hold the month), and otlp_traces
  refers to it by id (a key to a partitioned table would have to hold the month too).
- runs_month_partition_add, runs_month_drop and runs_month_keep_only (0016) do the same to the
  children's month tables, so the months stay in step wherever a month is created, moved out of the
  default, dropped or rewritten (retention, the daily prune, the bulk loader).
- A run whose created_at changes (an UPDATE of runs: tests age runs so) takes its children along:
  a statement trigger on runs (runs_children_follow) sets their run_created_at, and PostgreSQL
  moves each row to its new month's table.
- A child row whose run does not exist (possible since 0016 dropped the keys, never written by
  the code) has no month and is not carried over.

The iteration triggers (0015's rollup, 0018's drill-down index, 0020's WHEN) are put back on the
partitioned run_iterations after the rows are copied, as 0016 did for runs, so the copy is not
counted again.

Revision ID: 0021
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CHILDREN = ("review_history", "run_iterations", "run_events", "llm_calls")
KEY = "run_created_at"

# Children's month tables made as 0016 makes the runs' (CREATE TABLE ... LIKE, then ATTACH), their
# rows of the month moved in from the child's default partition first. Rows are routed on insert
# and a standalone table has no triggers yet, so neither the move nor the attach fires any.
_CHILD_FUNCTIONS = """
CREATE FUNCTION run_children() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['review_history', 'run_iterations', 'run_events', 'llm_calls']
$$;
CREATE FUNCTION run_child_month_table(child text, month timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT child || '_' || to_char(date_trunc('month', month, 'UTC') AT TIME ZONE 'UTC', 'YYYY_MM')
$$;
CREATE FUNCTION table_stored_columns(t regclass) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
    WHERE attrelid = t AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
$$;
CREATE FUNCTION run_child_month_add(child text, month timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := date_trunc('month', month, 'UTC');
    high timestamptz := date_trunc('month', month, 'UTC') + interval '1 month';
    name text := run_child_month_table(child, month);
    columns text := table_stored_columns(child::regclass);
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)', name, child);
    EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I WHERE run_created_at >= %L AND run_created_at < %L',
                   name, columns, columns, child || '_default', low, high);
    EXECUTE format('DELETE FROM %I WHERE run_created_at >= %L AND run_created_at < %L', child || '_default', low, high);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', child, name, low, high);
END $$;
CREATE FUNCTION runs_month_bytes(month timestamptz) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint
    FROM unnest(runs_month_table(month) || ARRAY(SELECT run_child_month_table(c, month) FROM unnest(run_children()) c)) t
$$;
"""
# 0016's functions, now doing the children's month tables as well (downgrade puts 0016's back).
_RUNS_FUNCTIONS = """
CREATE OR REPLACE FUNCTION runs_month_partition_add(month timestamptz) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := date_trunc('month', month, 'UTC');
    high timestamptz := date_trunc('month', month, 'UTC') + interval '1 month';
    name text := runs_month_table(month);
    columns text := runs_stored_columns();
    moved bigint;
BEGIN
    PERFORM run_child_month_add(child, month) FROM unnest(run_children()) child;
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
CREATE OR REPLACE FUNCTION runs_month_drop(month timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    child text;
BEGIN
    EXECUTE format('DROP TABLE %I', runs_month_table(month));
    FOREACH child IN ARRAY run_children() LOOP
        PERFORM run_child_month_add(child, month);  -- a month's table the children lacked takes its rows first
        EXECUTE format('DROP TABLE %I', run_child_month_table(child, month));
    END LOOP;
END $$;
CREATE OR REPLACE FUNCTION runs_month_keep_only(month timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    low timestamptz := date_trunc('month', month, 'UTC');
    child text;
BEGIN
    PERFORM runs_month_swap('runs', runs_month_table(month), runs_stored_columns(), 'id', low);
    FOREACH child IN ARRAY run_children() LOOP
        PERFORM run_child_month_add(child, month);
        PERFORM runs_month_swap(child, run_child_month_table(child, month), table_stored_columns(child::regclass),
                                'run_id', low);
    END LOOP;
END $$;
-- `parent`'s month table `name` replaced by one holding its rows whose `run` column is not in the
-- session's temporary table retention_gone; the detach and attach take the parent's locks at the end.
CREATE FUNCTION runs_month_swap(parent text, name text, columns text, run text, low timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    kept text := name || '_kept';
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)', kept, parent);
    EXECUTE format('INSERT INTO %I (%s) SELECT %s FROM %I WHERE %I NOT IN (SELECT id FROM retention_gone)',
                   kept, columns, columns, name, run);
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, name);
    EXECUTE format('DROP TABLE %I', name);
    EXECUTE format('ALTER TABLE %I RENAME TO %I', kept, name);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, name, low, low + interval '1 month');
END $$;
"""
_NEW_FUNCTIONS = ("run_children()", "run_child_month_table(text, timestamptz)", "table_stored_columns(regclass)",
                  "run_child_month_add(text, timestamptz)", "runs_month_bytes(timestamptz)",
                  "runs_month_swap(text, text, text, text, timestamptz)")


def _follow_function() -> str:
    """A run moved to another month (its created_at updated) takes its children's rows along."""
    updates = "\n    ".join(
        f"UPDATE {child} c SET {KEY} = n.created_at FROM new_runs n WHERE c.run_id = n.id AND c.{KEY} <> n.created_at;"
        for child in CHILDREN)
    return f"""CREATE FUNCTION runs_children_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_runs o JOIN new_runs n USING (id) WHERE o.created_at <> n.created_at) THEN
        RETURN NULL;
    END IF;
    {updates}
    RETURN NULL;
END $$"""


_FOLLOW_TRIGGER = ("CREATE TRIGGER runs_children_follow AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs "
                   "NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION runs_children_follow()")


def _rows(sql: str) -> list[sa.Row]:
    return list(op.get_bind().execute(sa.text(sql)))


def _take_apart(table: str) -> dict[str, list[sa.Row]]:
    """Drop `table`'s keys, other indexes and triggers, returning their definitions, so the new
    table can take their names."""
    parts = {
        "keys": _rows(f"""SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
                          WHERE conrelid = '{table}'::regclass AND contype IN ('p', 'u') ORDER BY contype"""),
        "indexes": _rows(f"""SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition
                             FROM pg_index i WHERE indrelid = '{table}'::regclass
                             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)"""),
        "triggers": _rows(f"""SELECT tgname AS name, pg_get_triggerdef(oid) AS definition FROM pg_trigger
                              WHERE tgrelid = '{table}'::regclass AND NOT tgisinternal AND tgparentid = 0"""),
    }
    for trigger in parts["triggers"]:
        op.execute(f'DROP TRIGGER "{trigger.name}" ON {table}')
    for ix in parts["indexes"]:
        op.execute(f'DROP INDEX "{ix.name}"')
    for key in parts["keys"]:
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{key.name}"')
    return parts


def _put_back(table: str, parts: dict[str, list[sa.Row]], *, key: dict[str, str]) -> None:
    """The definitions `_take_apart` returned, on `table`; `key` rewrites the keys' column lists."""
    on_table = re.compile(rf" ON (ONLY )?(\w+\.)?\"?{table}_(unpartitioned|partitioned)\"? ")
    for constraint in parts["keys"]:
        definition = constraint.definition
        for old, new in key.items():
            definition = definition.replace(old, new)
        op.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{constraint.name}" {definition}')
    for ix in parts["indexes"]:
        op.execute(on_table.sub(f" ON {table} ", ix.definition))
    for trigger in parts["triggers"]:
        op.execute(on_table.sub(f" ON {table} ", trigger.definition))


def _rebuild(table: str, *, partitioned: bool) -> None:
    """`table` made again, partitioned by its run's month or back to one table, with every row,
    key, index and trigger; the rows are copied before the indexes and triggers come back."""
    old = f"{table}_{'unpartitioned' if partitioned else 'partitioned'}"
    op.execute(f"ALTER TABLE {table} RENAME TO {old}")
    parts = _take_apart(old)
    like = (f"LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING STATISTICS "
            "INCLUDING COMMENTS")
    sequence = op.get_bind().execute(sa.text(f"SELECT pg_get_serial_sequence('{old}', 'id')")).scalar_one()
    if partitioned:
        op.execute(f"CREATE TABLE {table} ({like}, {KEY} timestamptz NOT NULL) PARTITION BY RANGE ({KEY})")
        op.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
    else:
        op.execute(f"CREATE TABLE {table} ({like})")
        op.execute(f"ALTER TABLE {table} DROP COLUMN {KEY}")
    op.execute(f"ALTER SEQUENCE {sequence} OWNED BY {table}.id")
    if partitioned:
        op.execute(f"SELECT run_child_month_add('{table}', month) FROM _run_months")
        columns = op.get_bind().execute(sa.text(f"SELECT table_stored_columns('{old}')")).scalar_one()
        selected = ", ".join(f"c.{c}" for c in columns.split(", "))
        op.execute(f"INSERT INTO {table} ({columns}, {KEY}) SELECT {selected}, r.created_at "
                   f"FROM {old} c JOIN runs r ON r.id = c.run_id")
    else:
        columns = op.get_bind().execute(sa.text(f"SELECT table_stored_columns('{table}')")).scalar_one()
        op.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {old}")
    op.execute(f"DROP TABLE {old}")  # and its partitions
    key = {")": f", {KEY})"} if partitioned else {f", {KEY})": ")"}
    _put_back(table, parts, key=key)
    op.execute(f"ANALYZE {table}")


def _migration_0016() -> ModuleType:
    """0016's module, whose function definitions the downgrade puts back."""
    path = Path(__file__).with_name("0016_runs_by_month.py")
    spec = importlib.util.spec_from_file_location("migration_0016", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    op.execute(_CHILD_FUNCTIONS)
    # The runs' months (every month table of runs): the children get the same ones.
    op.execute("""CREATE TEMP TABLE _run_months AS
        SELECT CAST(replace(substr(c.relname, 6), '_', '-') || '-01 00:00+00' AS timestamptz) AS month
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'runs'::regclass AND c.relname ~ '^runs_[0-9]{4}_[0-9]{2}$'""")
    for table in CHILDREN:
        _rebuild(table, partitioned=True)
    op.execute("DROP TABLE _run_months")
    op.execute(_RUNS_FUNCTIONS)
    op.execute(_follow_function())
    op.execute(_FOLLOW_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER runs_children_follow ON runs")
    op.execute("DROP FUNCTION runs_children_follow()")
    previous = _migration_0016()
    op.execute("DROP FUNCTION runs_month_partition_add(timestamptz), runs_month_drop(timestamptz), "
               "runs_month_keep_only(timestamptz), runs_month_lock(timestamptz), runs_month_table(timestamptz)")
    op.execute(previous._PARTITION_FUNCTION)
    op.execute(previous._RETENTION_FUNCTIONS)
    for table in CHILDREN:
        _rebuild(table, partitioned=False)
    op.execute("DROP FUNCTION " + ", ".join(_NEW_FUNCTIONS))
