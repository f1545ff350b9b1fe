"""The Tuning page's judge refit: the model the judge scores answers with, and a refit of it from
reviewers' verdicts (services.judging.refit), measured against it before it is made active."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app_pages.common import as_plain, current_user
from services.auth import require_admin
from services.errors import InputError, WorkbenchError
from services.judging.forms import PHRASE_WORDS, RESTATES_AT
from services.judging.model import MIN_VERDICTS_TO_REFIT, JudgeModel
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
    _render_weights(model)
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


def _render_weights(model: JudgeModel) -> None:
    """Each signal's weight (log-odds per unit) in the pooled set and in each form's own set, as
    `workbench judge show` prints them: which signals move P(supported) for a phrase, a sentence
    or a restated question."""
    sets = {"pooled": (model.coefficients, model.intercept),
            **{form: (w.coefficients, w.intercept) for form, w in model.by_form.items()}}
    signals = sorted((name for name in model.coefficients
                      if any(abs(weights.get(name, 0.0)) > 1e-9 for weights, _ in sets.values())),
                     key=lambda name: -max(abs(weights.get(name, 0.0)) for weights, _ in sets.values()))
    with st.expander(f"The weights it reads answers with ({len(signals)} signals; one set per form of answer)"):
        st.caption(f"Log-odds of P(supported) per unit of each signal. An answer one of whose sentences repeats "
                   f"{RESTATES_AT:.0%} or more of the question's content words is a restated question; else one of "
                   f"{PHRASE_WORDS} words or fewer is a phrase, and the rest are sentences. A form with too few "
                   "answers to fit its own set reads the pooled one.")
        figure = go.Figure([go.Bar(name=name, x=signals, y=[weights.get(s, 0.0) for s in signals])
                            for name, (weights, _) in sets.items()])
        figure.update_layout(barmode="group", height=360, margin={"t": 20, "b": 120},
                             yaxis={"title": "weight (log-odds per unit)"})
        st.plotly_chart(figure, key="tuning.judge_weights.chart")
        rows = [{"signal": s, **{name: round(weights.get(s, 0.0), 3) for name, (weights, _) in sets.items()}}
                for s in signals]
        rows.append({"signal": "(intercept)", **{name: round(b, 3) for name, (_, b) in sets.items()}})
        st.dataframe(rows, hide_index=True)
