"""The Tuning page's "Effect on runs" tab: what the sliders' weights do to every stored run.

Its counts are what the auto-accept rule would do under the sliders, applied again to every
stored run whatever happened to it since; the Review queue counts runs by their status now.
The two differ (a reviewed run keeps its verdict; a run stored pending stays pending), so the
tab names its counts "would" and says how they break down by status now."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from services.charts import tuning as charts
from services.scoring.tuning import RunMatrix, auto_accepted, level_changes, level_indexes, question_texts, triage
from services.scoring.weights import WeightsProfile

CHANGES_LIMIT = 200  # the largest moves; the count above the table says how many there are
QUEUE_AUTO_ACCEPTED = "auto_accepted"  # the status the Review queue's Auto-accepted counts
REJECTED = ("flagged", "corrected")  # a reviewer's verdict that the answer was wrong: the rule cannot overrule it
WOULD_AUTO_ACCEPT_HELP = ("Stored runs the auto-accept rule (HIGH confidence, CRAG correct, reflection approved, an "
                          "answer) accepts under these weights, except runs a reviewer flagged or corrected. The "
                          "Review queue's Auto-accepted counts runs whose status is auto-accepted.")


def changes_frame(changes: Sequence[Mapping[str, Any]], questions: Mapping[int, str]) -> pd.DataFrame:
    """The level changes shown, each with its question (the run matrix holds no text: `questions`
    are read for these rows only)."""
    columns = ["run id", "question", "from", "to", "before", "after", "change"]
    rows = [[c["run_id"], questions.get(c["run_id"], ""), c["old_level"], c["new_level"], c["old_score"],
             c["new_score"], c["delta"]] for c in changes]
    return pd.DataFrame(rows, columns=columns)


def auto_accepted_by_status(matrix: RunMatrix, scores: np.ndarray, profile: WeightsProfile) -> dict[str, int]:
    """The runs triage would auto-accept at `scores` (its rule: tuning.auto_accepted), counted by
    their status now; one pass over the accepted runs, not one per status (a million runs)."""
    accepted = auto_accepted(matrix, level_indexes(scores, profile))
    statuses, counts = np.unique(matrix.statuses[accepted].astype(str), return_counts=True)
    return {str(status): int(n) for status, n in zip(statuses, counts) if n}


def would_auto_accept(by_status: Mapping[str, int]) -> int:
    """The runs the rule would accept, less those a reviewer flagged or corrected: their verdict stands."""
    return sum(n for status, n in by_status.items() if status not in REJECTED)


def rejected_note(by_status: Mapping[str, int]) -> str:
    """The runs the rule would accept against a reviewer's verdict: a sign the weights are too lenient."""
    rejected = {status: n for status, n in by_status.items() if status in REJECTED}
    if not rejected:
        return ""
    parts = " and ".join(f"{n:,} {status}" for status, n in sorted(rejected.items()))
    return (f"Under these weights the rule would also accept {parts} by a reviewer; they are not counted in "
            "Would auto-accept, since the verdict stands, but they are runs these weights get wrong.")


def queue_auto_accepted(matrix: RunMatrix) -> int:
    """What the Review queue shows as Auto-accepted: runs whose status is auto-accepted."""
    return int((matrix.statuses == QUEUE_AUTO_ACCEPTED).sum())


def auto_accept_note(would: Mapping[str, int], queue_count: int) -> str:
    """Why Would auto-accept here and Auto-accepted in the Review queue differ, in numbers."""
    total = sum(would.values())
    parts = ", ".join(f"{n:,} {status.replace('_', '-')}" for status, n in sorted(would.items())) or "none"
    note = (f"The Review queue shows {queue_count:,} auto-accepted: runs by their status now (auto-accepted when "
            f"stored, not reviewed since). Would auto-accept applies the rule again to every stored run under these "
            f"weights; by their status now, those {total:,} are: {parts}.")
    dropped = queue_count - would.get(QUEUE_AUTO_ACCEPTED, 0)
    if dropped:
        note += f" {dropped:,} of the queue's auto-accepted runs would go to review under these weights."
    return note


def render_effect(matrix: RunMatrix, active: WeightsProfile, profile: WeightsProfile, active_scores: np.ndarray,
                   scores: np.ndarray) -> None:
    before, after = triage(matrix, active_scores, active), triage(matrix, scores, profile)
    by_status = auto_accepted_by_status(matrix, scores, profile)
    accepted = would_auto_accept(by_status)
    accepted_before = would_auto_accept(auto_accepted_by_status(matrix, active_scores, active))
    changed = int((level_indexes(active_scores, active) != level_indexes(scores, profile)).sum())
    cols = st.columns(4)
    cols[0].metric("Would auto-accept", accepted, delta=accepted - accepted_before, help=WOULD_AUTO_ACCEPT_HELP)
    cols[1].metric("Would go to review", len(matrix) - accepted, delta=accepted_before - accepted,
                   delta_color="inverse")
    cols[2].metric("VERY LOW", after["flagged_very_low"], delta=after["flagged_very_low"] - before["flagged_very_low"],
                   delta_color="inverse", help="expert review required")
    cols[3].metric("Runs changing level", changed)
    standing = {status: n for status, n in by_status.items() if status not in REJECTED}
    st.caption(auto_accept_note(standing, queue_auto_accepted(matrix)))
    if note := rejected_note(by_status):
        st.warning(note)
    left, right = st.columns(2)
    left.plotly_chart(charts.score_histogram_figure(scores, profile), key="tuning.histogram")
    right.plotly_chart(charts.level_counts_figure(before["by_level"], after["by_level"],
                                                  before_name=f"active ({active.label})"), key="tuning.level_counts")
    if not changed:
        st.caption("No run changes level.")
        return
    changes = level_changes(matrix, active_scores, scores, active, profile, limit=CHANGES_LIMIT)
    st.caption(f"{changed:,} runs change level" + (f"; the {len(changes)} largest moves:" if changed > len(changes) else ":"))
    st.dataframe(changes_frame(changes, question_texts([c["run_id"] for c in changes])), hide_index=True)

