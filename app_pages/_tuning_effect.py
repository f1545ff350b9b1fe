"""The Tuning page's "Effect on runs" tab: what the sliders' weights do to every stored run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from services.charts import tuning as charts
from services.scoring.tuning import RunMatrix, level_changes, level_indexes, triage
from services.scoring.weights import WeightsProfile

CHANGES_LIMIT = 200  # the largest moves; the count above the table says how many there are


def changes_frame(changes: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    columns = ["run id", "question", "from", "to", "before", "after", "change"]
    rows = [[c["run_id"], c["query"], c["old_level"], c["new_level"], c["old_score"], c["new_score"], c["delta"]]
            for c in changes]
    return pd.DataFrame(rows, columns=columns)



def render_effect(matrix: RunMatrix, active: WeightsProfile, profile: WeightsProfile, active_scores: np.ndarray,
                   scores: np.ndarray) -> None:
    before, after = triage(matrix, active_scores, active), triage(matrix, scores, profile)
    changed = int((level_indexes(active_scores, active) != level_indexes(scores, profile)).sum())
    cols = st.columns(4)
    cols[0].metric("Auto-accepted", after["auto_accepted"], delta=after["auto_accepted"] - before["auto_accepted"])
    cols[1].metric("Sent to review", after["review"], delta=after["review"] - before["review"], delta_color="inverse")
    cols[2].metric("VERY LOW", after["flagged_very_low"], delta=after["flagged_very_low"] - before["flagged_very_low"],
                   delta_color="inverse", help="expert review required")
    cols[3].metric("Runs changing level", changed)
    left, right = st.columns(2)
    left.plotly_chart(charts.score_histogram_figure(scores, profile), key="tuning.histogram")
    right.plotly_chart(charts.level_counts_figure(before["by_level"], after["by_level"],
                                                  before_name=f"active ({active.label})"), key="tuning.level_counts")
    if not changed:
        st.caption("No run changes level.")
        return
    changes = level_changes(matrix, active_scores, scores, active, profile, limit=CHANGES_LIMIT)
    st.caption(f"{changed:,} runs change level" + (f"; the {len(changes)} largest moves:" if changed > len(changes) else ":"))
    st.dataframe(changes_frame(changes), hide_index=True)

