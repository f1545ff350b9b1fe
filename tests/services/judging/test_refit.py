"""The judge refitted from reviewers' verdicts, on runs intake stored and reviewers judged, in the
real store: too few verdicts are refused with the counts, a refit is stored as a version and made
active only when it ranks the held-out verdicts better, and the Tuning page offers it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.errors import InputError
from services.judging.model import MIN_VERDICTS_TO_REFIT, shipped_model
from services.judging.refit import model_in_use, refit_judge
from services.review.queue import submit_review

QUESTION = "The maker of the robot arm has its head office in what city?"
CONTEXTS = ["Fanuc builds the robot arm used on line 3. The maker of the robot arm is headquartered in Osaka, "
            "close to the port. Its largest plant is in Nagoya, where 2,400 people work.",
            "Line 3 runs two shifts. The robot arm is serviced every 6 months."]
RIGHT = ["Osaka", "The maker of the robot arm has its head office in Osaka.", "Its head office is in Osaka."]
WRONG = ["Kobe", "The maker of the robot arm has its head office in Kobe.", "Nagoya", "Tokyo",
         "The maker of the robot arm has its head office in Nagoya."]
APP = str(Path(__file__).resolve().parents[3] / "app.py")


def _store(answer: str, trace_id: str, settings) -> int:  # type: ignore[no-untyped-def]
    from services.answering.llm.backends import backend_for
    from services.answering.runs import save_run
    from services.intake.assess import assess_record, imported_run
    from services.intake.schema import ExternalRun
    from services.store import transaction

    record = ExternalRun.model_validate({"question": QUESTION, "answer": answer, "trace_id": trace_id,
                                         "contexts": [{"text": c} for c in CONTEXTS]})
    with transaction() as session:
        assessment = assess_record(record, session=session, backend=backend_for(settings), judges=True)
        return save_run(imported_run(assessment, record, source="import", collection="default"), session=session)


def _reviewed(settings, *, right: int, wrong: int) -> None:  # type: ignore[no-untyped-def]
    """`right` approved runs and `wrong` flagged ones, cycling through the answers above."""
    for i in range(right):
        run_id = _store(RIGHT[i % len(RIGHT)], f"right-{i}", settings)
        submit_review(run_id, expected_version=0, action="approve", reviewer="rita")
    for i in range(wrong):
        run_id = _store(WRONG[i % len(WRONG)], f"wrong-{i}", settings)
        submit_review(run_id, expected_version=0, action="flag", reviewer="rita", flag_reason="wrong answer")


def test_too_few_verdicts_are_refused_with_the_counts(clean_db, settings):  # type: ignore[no-untyped-def]
    _reviewed(settings, right=3, wrong=2)
    with pytest.raises(InputError, match=rf"needs {MIN_VERDICTS_TO_REFIT} reviewed.*there are 5 \(3 approved\)"):
        refit_judge(created_by="test")
    assert model_in_use().version == shipped_model().version


def test_verdicts_on_runs_an_earlier_judge_read_are_left_out_and_counted(clean_db, settings):  # type: ignore[no-untyped-def]
    # A signal the judge did not read then is missing from the stored ones: fitted as 0 it would
    # read as that signal's worst, so those runs are left out, and the refusal says how many.
    from sqlalchemy import text

    from services.store import transaction

    _reviewed(settings, right=20, wrong=22)
    with transaction() as session:
        session.execute(text("UPDATE run_iterations SET verdict = verdict #- '{features,evidence_relevance}' "
                             "WHERE run_id IN (SELECT id FROM runs WHERE trace_id IN ('right-0', 'wrong-1', 'wrong-2'))"))
    with pytest.raises(InputError, match=r"there are 39 \(19 approved\); 3 verdicts on runs an earlier judge read were left out"):
        refit_judge(created_by="test")
    with transaction() as session:  # one of them read again by today's judge: enough to fit, two left out
        session.execute(text("UPDATE run_iterations SET verdict = jsonb_set(verdict, '{features,evidence_relevance}', "
                             "'0.5') WHERE run_id = (SELECT id FROM runs WHERE trace_id = 'wrong-2')"))
    refit = refit_judge(created_by="test", activate_if_better=False)
    assert (refit.verdicts, refit.left_out, refit.model.trained_on["left_out"]) == (40, 2, 2)
    assert refit.left_out_note == "; 2 verdicts on runs an earlier judge read were left out"  # page and CLI say it


def test_a_refit_is_stored_and_used_only_when_it_ranks_the_verdicts_better(clean_db, settings):  # type: ignore[no-untyped-def]
    _reviewed(settings, right=20, wrong=22)
    kept = refit_judge(created_by="test", activate_if_better=False)
    assert (kept.verdicts, kept.right, kept.activated) == (42, 20, False)
    assert model_in_use().version == shipped_model().version  # stored, not in use
    refit = refit_judge(created_by="test")
    assert refit.current_version == shipped_model().version and refit.model.version != kept.model.version
    assert refit.activated == (refit.refit_auroc > refit.current_auroc)
    assert model_in_use().version == (refit.model.version if refit.activated else shipped_model().version)
    assert refit.model.trained_on["verdicts"] == 42 and refit.model.trained_on["by"] == "test"


def test_the_tuning_page_refits_the_judge_and_plots_both_models(clean_db, settings):  # type: ignore[no-untyped-def]
    from app_pages.common import REVIEWER_KEY

    _reviewed(settings, right=20, wrong=22)
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    at.run()
    at.switch_page("app_pages/tuning.py").run()
    at.session_state["tuning.tab"] = "Fit from verdicts"
    at.run()
    assert not at.exception, at.exception
    assert any(shipped_model().version in c.value for c in at.caption)
    # the weights in use, pooled and per form, beside each other: the table the chart plots
    tables = [d.value for d in at.dataframe if list(d.value.columns[:1]) == ["signal"]]
    assert len(tables) == 1, [list(d.value.columns) for d in at.dataframe]
    weights = tables[0]
    assert list(weights.columns) == ["signal", "pooled", *shipped_model().by_form]
    pooled = dict(zip(weights["signal"], weights["pooled"], strict=True))
    assert pooled["(intercept)"] == pytest.approx(shipped_model().intercept, abs=1e-3)
    assert pooled["unsupported_atom"] == pytest.approx(shipped_model().coefficients["unsupported_atom"], abs=1e-3)
    charts = [c.key for c in at.get("plotly_chart")]
    assert "tuning.judge_weights.chart" in charts and "tuning.judge_refit.chart" not in charts, charts
    at.button(key="tuning.judge_refit").click().run()
    assert not at.exception, at.exception
    said = [m.value for m in (*at.success, *at.info)]
    assert any("fitted on 42 verdicts" in m and "20 approved" in m for m in said), said
    assert "tuning.judge_refit.chart" in [c.key for c in at.get("plotly_chart")], "the held-out AUROC of both models is plotted"
