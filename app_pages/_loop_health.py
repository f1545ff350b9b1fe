"""Router paths' "Loop health" tab (seed 004's monitoring): per day and preset, the mean
reflection score, the iterations runs took, the hallucination rate, refinement success, CRAG's
verdicts and the fallback's use, counted by the database over the filtered runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from services.charts import loop_health as charts
from services.errors import WorkbenchError
from services.review.loop_health import HealthCell, LoopHealth, loop_health
from services.review.paths import RouteFilters

COLUMNS = ["preset", "runs", "mean reflection", "mean iterations", "hallucination rate", "judged",
           "refinement success", "refined", "CRAG correct", "CRAG ambiguous", "CRAG incorrect", "fallback use"]


def _rate(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def totals_frame(health: LoopHealth) -> pd.DataFrame:
    """One row per preset over the whole range, then all presets together."""
    rows = []
    for cell in [health.totals(p) for p in health.presets] + ([health.totals()] if len(health.presets) > 1 else []):
        shares = cell.verdict_shares()
        rows.append({"preset": cell.preset, "runs": cell.runs, "mean reflection": _rate(cell.mean_reflection),
                     "mean iterations": _rate(cell.mean_iterations), "hallucination rate": _rate(cell.hallucination_rate),
                     "judged": cell.counts["judged"], "refinement success": _rate(cell.refinement_success),
                     "refined": cell.counts["refined"], "CRAG correct": _rate(shares.get("CORRECT")),
                     "CRAG ambiguous": _rate(shares.get("AMBIGUOUS")), "CRAG incorrect": _rate(shares.get("INCORRECT")),
                     "fallback use": _rate(cell.fallback_use)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _caption(cell: HealthCell) -> str:
    return (f"{cell.runs:,} runs; {cell.counts['judged']:,} had their final answer judged, {cell.counts['refined']:,} "
            f"refined their query, {cell.counts['fallback_searched']:,} searched a fallback source "
            f"({cell.counts['fallback_answered']:,} answered from it through CRAG's action).")


def render_loop_health(filters: RouteFilters) -> None:
    # Status is a review state, not the loop's: the loop's health is read over every status.
    try:
        health = loop_health(presets=filters.presets, since=filters.since, until=filters.until)
    except WorkbenchError as exc:
        st.error(str(exc))
        return
    if health.n_runs == 0:
        st.info("No stored runs in this range: the loop's health is read from stored runs only.")
        return
    st.caption(_caption(health.totals()) + " Days are UTC; the status filter does not apply here.")
    st.subheader("Rates per day")
    st.plotly_chart(charts.rates_figure(health), key="routes.health.rates")
    st.caption("Hallucination rate: of the runs whose final answer the judge checked, the share where it found a "
               "claim with a word no context holds. Refinement success: of the runs that refined their query, the "
               "share where a later iteration's confidence passed the first one's.")
    st.subheader("Iterations per run")
    st.plotly_chart(charts.iterations_figure(health), key="routes.health.iterations")
    st.subheader("CRAG verdicts")
    st.plotly_chart(charts.verdicts_figure(health), key="routes.health.verdicts")
    st.dataframe(totals_frame(health), hide_index=True, key="routes.health.table")
