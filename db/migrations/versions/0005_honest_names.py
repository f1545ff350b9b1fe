"""Names that say what they measure: graph_support -> entity_support, WEB_FALLBACK -> FALLBACK_SEARCH.

There is no graph (the component counts entity mentions) and no web (the fallback searches
another collection). Stored profiles, runs, iterations and events are renamed in place so
old runs re-score and read back under the new names.

Revision ID: 0005
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _rename(old_key: str, new_key: str, old_decision: str, new_decision: str) -> None:
    rename_key = f"((%s) - '{old_key}') || jsonb_build_object('{new_key}', (%s) -> '{old_key}')"
    op.execute(f"UPDATE weights_profiles SET weights = {rename_key % ('weights', 'weights')} WHERE weights ? '{old_key}'")
    nested = "config -> 'profile' -> 'weights'"
    op.execute(f"UPDATE runs SET config = jsonb_set(config, '{{profile,weights}}', {rename_key % (nested, nested)}) "
               f"WHERE ({nested}) ? '{old_key}'")
    op.execute(f"UPDATE run_iterations SET raw_metrics = {rename_key % ('raw_metrics', 'raw_metrics')} "
               f"WHERE raw_metrics ? '{old_key}'")
    op.execute(f"UPDATE runs SET route = array_replace(route, '{old_decision}', '{new_decision}') "
               f"WHERE '{old_decision}' = ANY(route)")
    op.execute(f"UPDATE run_iterations SET decision = '{new_decision}' WHERE decision = '{old_decision}'")
    op.execute(f"UPDATE run_events SET data = jsonb_set(data, '{{decision}}', '\"{new_decision}\"') "
               f"WHERE data ->> 'decision' = '{old_decision}'")


def upgrade() -> None:
    _rename("graph_support", "entity_support", "WEB_FALLBACK", "FALLBACK_SEARCH")


def downgrade() -> None:
    _rename("entity_support", "graph_support", "FALLBACK_SEARCH", "WEB_FALLBACK")
