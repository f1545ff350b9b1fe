"""The Tuning page's judge refit: the model the judge scores answers with, and a refit of it from
reviewers' verdicts (services.judging.refit), measured against it before it is made active."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app_pages.common import as_plain, current_user
from services.auth import require_admin
from services.errors import InputError, WorkbenchError
from services.judging.model import MIN_VERDICTS_TO_REFIT
from services.judging.refit import MIN_PER_CLASS, Refit, model_in_use, refit_judge

RESULT_KEY = "tuning.judge_refit.result"  # ("ok", Refit) or ("error", message)


def render_judge_refit() -> None:
    st.subheader("Refit the answer judge")
    model = model_in_use()
    st.caption(as_plain(
        f"The judge scores answers with {model.version} (auto-accept at P(supported) >= {model.accept_at:.2f}). "
        f"A refit reads the reviewed runs the judge scored (approved = right; flagged or corrected = wrong; at least "
        f"{MIN_VERDICTS_TO_REFIT}, {MIN_PER_CLASS} of each) and becomes the model in use only when it ranks them "
        "better than this one, both measured on held-out verdicts (5-fold)."))
    if st.button("Refit the judge from verdicts", key="tuning.judge_refit"):
        try:
            user = current_user()
            if not user.name:
                raise InputError("Set your reviewer name in the sidebar first: every stored judge model records who made it.")
            require_admin(user, "change the model the judge scores answers with")
            refit = refit_judge(created_by=user.name)
        except WorkbenchError as exc:
            st.session_state[RESULT_KEY] = ("error", str(exc))
        else:
            st.session_state[RESULT_KEY] = ("ok", refit)
    result = st.session_state.get(RESULT_KEY)
    if result is None:
        return
    if result[0] == "error":
        st.warning(as_plain(result[1]))
        return
    _render_refit(result[1])


def _render_refit(refit: Refit) -> None:
    verdict = (f"now in use: it ranks the verdicts better than {refit.current_version}" if refit.activated
               else f"stored, not in use: {refit.current_version} ranks the verdicts as well or better")
    (st.success if refit.activated else st.info)(as_plain(
        f"{refit.model.version}, fitted on {refit.verdicts} verdicts ({refit.right} approved){refit.left_out_note}, "
        f"{verdict}."))
    figure = go.Figure(go.Bar(x=[f"in use ({refit.current_version})", "refit"],
                              y=[refit.current_auroc, refit.refit_auroc],
                              text=[f"{refit.current_auroc:.3f}", f"{refit.refit_auroc:.3f}"], textposition="outside"))
    figure.update_layout(yaxis={"title": "held-out AUROC on the verdicts", "range": [0, 1.05]}, height=300,
                         margin={"t": 20, "b": 40})
    st.plotly_chart(figure, key="tuning.judge_refit.chart")
