"""Loop health (issue 30) on the real store: the grouped SQL counts what the stored runs hold,
per UTC day and preset, and the figures draw it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from sqlalchemy import text

from services.answering import pipeline
from services.answering.llm.base import Citation, Generation
from services.answering.runs import Run, load_run
from services.charts import loop_health as charts
from services.domain import Hit
from services.review.loop_health import loop_health
from tests.services.test_pipeline import (  # noqa: F401  (fixtures)
    ScriptedBackend,
    _crag_forced,
    demo_docs,
    vendor_collection,
)


class Inventing(ScriptedBackend):
    """Answers with a name and a number no context holds: the judge finds an unsupported claim."""

    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
        first = chunks[0]
        return Generation("SRVO-062 means the Zorblax 9000 controller overheated at 451 degrees [1]",
                          (Citation(1, first.chunk_id, first.document_id, first.external_id, first.text[:40]),))


def _expected(run: Run) -> Counter[str]:
    """What the SQL should count for one run, read the slow way from the run itself."""
    best = run.best()
    assert best is not None
    refined = "REFINE_QUERY" in run.route
    outcomes = [it.crag.action_outcome for it in run.iterations if it.crag]
    return Counter({
        "runs": 1, "reflected": run.reflection_score is not None, "judged": best.verdict is not None,
        "hallucinated": bool(best.verdict and any(c.unsupported for c in best.verdict.claims)),
        "refined": refined,
        "refined_up": refined and max(it.confidence for it in run.iterations[1:]) > run.iterations[0].confidence,
        "crag_correct": run.crag_verdict == "CORRECT", "crag_ambiguous": run.crag_verdict == "AMBIGUOUS",
        "crag_incorrect": run.crag_verdict == "INCORRECT",
        "fallback_searched": any(o.startswith(("discarded", "fused", "fallback ")) and "unavailable" not in o
                                 and "already" not in o for o in outcomes) or "FALLBACK_SEARCH" in run.route,
        "fallback_answered": any(o.startswith(("discarded ", "fused ")) for o in outcomes),
    })


@pytest.fixture()
def stored(vendor_collection, settings, engine):  # type: ignore[no-untyped-def]  # noqa: F811
    runs = [
        pipeline.run("How often is J2 grease replaced?", "balanced", backend=ScriptedBackend((0.3, 0.6, 0.2))),
        pipeline.run("What does SRVO-062 mean?", "minimal", backend=ScriptedBackend()),
        pipeline.run("What does SRVO-062 mean?", "balanced", backend=Inventing((0.9,))),
        pipeline.run("What does SRVO-062 mean?", "balanced", backend=ScriptedBackend((0.9,)),
                     settings=_crag_forced(settings, "INCORRECT", fallback_collection="vendor")),
    ]
    with engine.begin() as conn:  # the first run a day earlier: days are grouped apart
        conn.execute(text("UPDATE runs SET created_at = created_at - interval '1 day' WHERE id = :id"),
                     {"id": runs[0].run_id})
    return [load_run(r.run_id) for r in runs]


def test_the_sql_counts_what_the_stored_runs_hold(stored):
    health = loop_health()
    assert health.n_runs == 4 and health.presets == ("balanced", "minimal")
    for cell in health.cells:
        mine = [r for r in stored if r.preset == cell.preset and r.created_at.date() == cell.day]
        assert mine, cell
        expected = sum((_expected(r) for r in mine), Counter())
        assert {k: cell.counts[k] for k in expected} == dict(expected), cell
        assert cell.iterations == Counter(len(r.iterations) for r in mine)
        reflections = [r.reflection_score for r in mine if r.reflection_score is not None]
        assert cell.mean_reflection == (pytest.approx(sum(reflections) / len(reflections)) if reflections else None)
    assert len({c.day for c in health.cells}) == 2
    everything = health.totals()
    # none of these is vacuous: each rate has a run that counts towards it
    assert everything.counts["hallucinated"] >= 1 and everything.counts["refined"] == 1
    assert everything.counts["fallback_answered"] == 1 and everything.counts["crag_incorrect"] >= 1
    assert 0 < everything.hallucination_rate < 1


def test_filters_bound_the_presets_and_days(stored):
    assert loop_health(presets=("minimal",)).n_runs == 1
    newest = max(r.created_at for r in stored)
    assert loop_health(since=newest).n_runs == 1
    assert loop_health(until=min(r.created_at for r in stored)).n_runs == 0


def test_the_figures_draw_a_line_per_preset_and_stack_to_the_runs(stored):
    health = loop_health()
    rates = charts.rates_figure(health)
    assert {t.name for t in rates.data} == {"balanced", "minimal"} and len(rates.data) == 2 * len(charts.RATES)
    iterations = charts.iterations_figure(health)
    assert sum(sum(t.y) for t in iterations.data) == 4  # every run once, in its iterations' bar
    verdicts = charts.verdicts_figure(health)
    for preset_row in (1, 2):
        bars = [t for t in verdicts.data if t.yaxis == ("y" if preset_row == 1 else "y2")]
        assert all(sum(day) <= 1.0 + 1e-9 for day in zip(*(t.y for t in bars)))
