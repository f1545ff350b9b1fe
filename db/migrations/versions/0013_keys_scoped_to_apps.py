"""Keys belong to an app: every API key names the app (the system) it speaks for and its scope
(push, read or admin); what a key pushes is stored under its app, and trace ids are unique
per app instead of across the store, so one system can neither read another's runs nor
shadow its trace ids.

Existing keys, queued and assessed records, assessed runs and traces move to the app
DEFAULT_APP ("default") with the scope they had in effect (push: they pushed and read);
`workbench api-key create NAME --app APP` makes keys for other apps (README: *Keys and apps*).

Also: the queued rows by app (the worker takes turns over apps) and by key (the backlog
quota counts them), the intake row of a run (GET /runs joins it), and reviewed runs by
(reviewed_at, id), per app and across them, for GET /runs' keyset cursor.

Revision ID: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

DEFAULT_APP = "default"
_APP_NAME = "app ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'"
# Runs that came from another system: the ones with an intake row, and any with a trace id.
_EXTERNAL_RUNS = f"""
UPDATE runs SET app = '{DEFAULT_APP}'
WHERE trace_id IS NOT NULL OR id IN (SELECT run_id FROM run_intake WHERE run_id IS NOT NULL)
"""
_REVIEWED = "reviewed_at IS NOT NULL AND app IS NOT NULL"


def _add_app(table: str, *, nullable: bool = False) -> None:
    """An `app` column, existing rows in DEFAULT_APP; new rows must name theirs."""
    op.add_column(table, sa.Column("app", sa.Text, nullable=True))
    if not nullable:
        op.execute(f"UPDATE {table} SET app = '{DEFAULT_APP}'")
        op.alter_column(table, "app", nullable=False)


def upgrade() -> None:
    _add_app("api_keys")
    op.add_column("api_keys", sa.Column("scope", sa.Text, nullable=False, server_default="push"))
    op.create_check_constraint("api_keys_scope", "api_keys", "scope IN ('push', 'read', 'admin')")
    op.create_check_constraint("api_keys_app", "api_keys", _APP_NAME)

    _add_app("run_intake")
    op.drop_constraint("run_intake_trace_id_key", "run_intake", type_="unique")
    op.create_unique_constraint("run_intake_app_trace_id", "run_intake", ["app", "trace_id"])
    op.drop_index("run_intake_queued", table_name="run_intake")
    op.create_index("run_intake_queued", "run_intake", ["app", "id"], postgresql_where=sa.text("status = 'queued'"))
    op.create_index("run_intake_queued_by_key", "run_intake", ["api_key_id"], postgresql_where=sa.text("status = 'queued'"))
    op.create_index("run_intake_run_id", "run_intake", ["run_id"])

    _add_app("runs", nullable=True)  # the workbench's own runs belong to no app
    op.execute(_EXTERNAL_RUNS)
    op.drop_index("runs_trace_id", table_name="runs")
    # trace_id first: the Review page finds a run by trace id alone (and by its start).
    op.create_index("runs_trace_id", "runs", ["trace_id", "app"], unique=True)
    op.create_index("runs_reviewed_by_app", "runs", ["app", "reviewed_at", "id"], postgresql_where=sa.text(_REVIEWED))
    op.create_index("runs_reviewed_external", "runs", ["reviewed_at", "id"], postgresql_where=sa.text(_REVIEWED))

    _add_app("otlp_traces")
    _add_app("otlp_spans")
    op.drop_constraint("otlp_spans_trace_id_fkey", "otlp_spans", type_="foreignkey")
    op.drop_constraint("otlp_spans_pkey", "otlp_spans", type_="primary")
    op.drop_constraint("otlp_traces_pkey", "otlp_traces", type_="primary")
    op.create_primary_key("otlp_traces_pkey", "otlp_traces", ["app", "trace_id"])
    op.create_primary_key("otlp_spans_pkey", "otlp_spans", ["app", "trace_id", "span_id"])
    # ON UPDATE too: `workbench api-key move` moves a key's open traces to another app with their spans.
    op.create_foreign_key("otlp_spans_trace_fkey", "otlp_spans", "otlp_traces", ["app", "trace_id"], ["app", "trace_id"],
                          ondelete="CASCADE", onupdate="CASCADE")


def downgrade() -> None:
    # Trace ids were unique across the store before: two apps holding one cannot go back.
    shared = op.get_bind().execute(sa.text("""
        SELECT 'run_intake' AS t, trace_id FROM run_intake WHERE trace_id IS NOT NULL GROUP BY trace_id HAVING count(*) > 1
        UNION ALL SELECT 'runs', trace_id FROM runs WHERE trace_id IS NOT NULL GROUP BY trace_id HAVING count(*) > 1
        UNION ALL SELECT 'otlp_traces', trace_id FROM otlp_traces GROUP BY trace_id HAVING count(*) > 1
        LIMIT 5""")).all()
    if shared:
        listed = ", ".join(f"{row.trace_id!r} in {row.t}" for row in shared)
        raise RuntimeError(f"cannot downgrade below 0013: trace ids held by more than one app ({listed}); "
                           "delete or rename one app's rows first")
    op.drop_constraint("otlp_spans_trace_fkey", "otlp_spans", type_="foreignkey")
    op.drop_constraint("otlp_spans_pkey", "otlp_spans", type_="primary")
    op.drop_constraint("otlp_traces_pkey", "otlp_traces", type_="primary")
    op.create_primary_key("otlp_traces_pkey", "otlp_traces", ["trace_id"])
    op.create_primary_key("otlp_spans_pkey", "otlp_spans", ["trace_id", "span_id"])
    op.create_foreign_key("otlp_spans_trace_id_fkey", "otlp_spans", "otlp_traces", ["trace_id"], ["trace_id"],
                          ondelete="CASCADE")
    op.drop_column("otlp_spans", "app")
    op.drop_column("otlp_traces", "app")

    op.drop_index("runs_reviewed_external", table_name="runs")
    op.drop_index("runs_reviewed_by_app", table_name="runs")
    op.drop_index("runs_trace_id", table_name="runs")
    op.create_index("runs_trace_id", "runs", ["trace_id"], unique=True)
    op.drop_column("runs", "app")

    op.drop_index("run_intake_run_id", table_name="run_intake")
    op.drop_index("run_intake_queued_by_key", table_name="run_intake")
    op.drop_index("run_intake_queued", table_name="run_intake")
    op.create_index("run_intake_queued", "run_intake", ["id"], postgresql_where=sa.text("status = 'queued'"))
    op.drop_constraint("run_intake_app_trace_id", "run_intake", type_="unique")
    op.create_unique_constraint("run_intake_trace_id_key", "run_intake", ["trace_id"])
    op.drop_column("run_intake", "app")

    op.drop_constraint("api_keys_app", "api_keys", type_="check")
    op.drop_constraint("api_keys_scope", "api_keys", type_="check")
    op.drop_column("api_keys", "scope")
    op.drop_column("api_keys", "app")
