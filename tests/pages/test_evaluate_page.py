"""The Evaluate page on a hand-made BEIR set (paths and uploads), its error messages, and
pushing evaluated questions into the review queue; on the real store and model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.common import as_plain
from services.answering.llm.base import Grade, Reflection
from services.answering.offline import OfflineBackend
from services.answering.runs import load_run
from services.corpus.ingest import ingest_paths
from services.corpus.stats import list_documents
from services.evaluation.beir import load_judged_queries
from services.evaluation.measures import evaluate
from services.evaluation.review_runs import queue_evaluation_runs
from services.retrieval.beir_files import EvalQuery, load_qrels, load_queries
from services.review.queue import review_queue
from services.scoring.weights import DEFAULT_PROFILE, WeightsProfile
from tests.pages._support import open_page
from tests.services.test_evaluation import TINY_DOCS, TINY_QUERIES

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
# The service test's hand-made set: its three judged questions, each judged on its own document.
QUERIES = [{"_id": q.query_id, "text": q.text} for q in TINY_QUERIES if q.query_id in {"q1", "q2", "q3"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n"


@pytest.fixture()
def evaluate_page(load_page):  # type: ignore[no-untyped-def]
    return load_page("evaluate")


@pytest.fixture()
def beir(clean_db, tmp_path: Path) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    paths = {"corpus": tmp_path / "corpus.jsonl", "queries": tmp_path / "queries.jsonl", "qrels": tmp_path / "qrels.tsv"}
    paths["corpus"].write_text("".join(json.dumps(d) + "\n" for d in TINY_DOCS), encoding="utf-8")
    paths["queries"].write_text("".join(json.dumps(q) + "\n" for q in QUERIES), encoding="utf-8")
    paths["qrels"].write_text(QRELS, encoding="utf-8")
    return paths


def _open_page() -> AppTest:
    return open_page(AppTest.from_file(APP, default_timeout=300), "evaluate", "Evaluate retrieval")


def _figures(at: AppTest) -> dict[str, dict]:
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    metrics = [s for s in specs if s["layout"].get("barmode") == "group"]
    calibration = [s for s in specs if any(t.get("name") == "perfectly calibrated" for t in s["data"])]
    assert len(metrics) == 1 and len(calibration) == 1, specs
    return {"metrics": metrics[0], "calibration": calibration[0]}


def _metrics_table(at: AppTest):  # type: ignore[no-untyped-def]
    (frame,) = [d.value for d in at.dataframe if "nDCG@10" in d.value.columns]
    return frame


def test_evaluating_from_paths_shows_metrics_and_calibration_per_mode(beir):  # type: ignore[no-untyped-def]
    at = _open_page()
    assert at.text_input(key="evaluate.collection").value == "eval"
    at.text_input(key="evaluate.corpus_path").input(str(beir["corpus"]))
    at.text_input(key="evaluate.queries_path").input(str(beir["queries"]))
    at.text_input(key="evaluate.qrels_path").input(str(beir["qrels"]))
    at.button(key="evaluate.run").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)

    assert sorted(d.external_id for d in list_documents("eval")) == ["d1", "d2", "d3"]  # the corpus was ingested
    figures = _figures(at)
    bars = figures["metrics"]["data"]
    assert [t["name"] for t in bars] == ["bm25", "dense", "hybrid"]
    assert all(t["type"] == "bar" and t["x"] == ["nDCG@10", "Recall@100", "MRR@10"] for t in bars)
    expected = {r.mode: r for r in evaluate(load_queries(beir["queries"]), load_qrels(beir["qrels"]), collection="eval",
                                            profile=DEFAULT_PROFILE)}
    for trace in bars:
        metrics = expected[trace["name"]].metrics
        assert trace["y"] == pytest.approx([metrics["ndcg@10"], metrics["recall@100"], metrics["mrr@10"]])
    curves = figures["calibration"]["data"][1:]
    assert [c["name"].split(" ")[0] for c in curves] == ["bm25", "dense", "hybrid"]
    assert all(sum(c["customdata"]) == 3 for c in curves)  # every judged query sits in some bin

    table = _metrics_table(at)
    assert table["mode"].tolist() == ["bm25", "dense", "hybrid"]
    assert table["queries"].tolist() == [3, 3, 3] and table["hit@10 rate"].tolist() == [1.0, 1.0, 1.0]
    # every query finds its document in the top 10, so AUROC is undefined and the page says so
    assert {m.label: m.value for m in at.metric if m.label.startswith("AUROC")} == {
        "AUROC · bm25": "n/a", "AUROC · dense": "n/a", "AUROC · hybrid": "n/a"}
    assert any(t.value.startswith("3 judged queries in collection eval; corpus: 3 ingested") for t in at.text)

    at.run()  # any later rerun keeps showing the last results
    assert not at.exception and _figures(at)["metrics"]["data"][0]["name"] == "bm25"
    assert len(at.session_state["evaluate.reports"]) == 3


def test_evaluating_uploaded_files_with_one_mode_and_a_limit(beir):  # type: ignore[no-untyped-def]
    at = _open_page()
    at.radio(key="evaluate.source").set_value("uploads").run()
    at.file_uploader(key="evaluate.corpus_upload").set_value(
        ("corpus.jsonl", beir["corpus"].read_bytes(), "application/jsonl"))
    at.file_uploader(key="evaluate.queries_upload").set_value(
        ("queries.jsonl", beir["queries"].read_bytes(), "application/jsonl"))
    at.file_uploader(key="evaluate.qrels_upload").set_value(
        ("qrels.tsv", beir["qrels"].read_bytes(), "text/tab-separated-values"))
    at.text_input(key="evaluate.collection").input("eval-upload")
    at.multiselect(key="evaluate.modes").set_value(["bm25"])
    at.number_input(key="evaluate.limit").set_value(2)
    at.button(key="evaluate.run").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)

    assert sorted(d.external_id for d in list_documents("eval-upload")) == ["d1", "d2", "d3"]
    figures = _figures(at)
    assert [t["name"] for t in figures["metrics"]["data"]] == ["bm25"]
    assert [c["name"].split(" ")[0] for c in figures["calibration"]["data"][1:]] == ["bm25"]
    assert _metrics_table(at)["queries"].tolist() == [2]
    assert [q.query_id for q in at.session_state["evaluate.queries"]] == ["q1", "q2"]


def test_bad_inputs_show_errors_not_tracebacks(beir, tmp_path):  # type: ignore[no-untyped-def]
    at = _open_page()
    at.text_input(key="evaluate.queries_path").input(str(beir["queries"]))
    at.text_input(key="evaluate.qrels_path").input(str(tmp_path / "missing.tsv"))
    at.button(key="evaluate.run").click().run()
    assert not at.exception and at.error[0].value == as_plain(f"qrels.tsv: no file at {tmp_path / 'missing.tsv'}")

    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"_id": "q1", "text": "caf\u00e9"}\n'.encode("latin-1"))
    at.text_input(key="evaluate.queries_path").input(str(latin))
    at.text_input(key="evaluate.qrels_path").input(str(beir["qrels"]))
    at.button(key="evaluate.run").click().run()
    assert not at.exception and "UTF-8 text" in at.error[0].value

    at.text_input(key="evaluate.queries_path").input(str(beir["queries"]))
    at.multiselect(key="evaluate.modes").set_value([])
    at.button(key="evaluate.run").click().run()
    assert not at.exception and at.error[0].value == "choose at least one retrieval mode"
    assert "evaluate.reports" not in at.session_state  # nothing half-evaluated is shown


def test_pushing_evaluated_questions_queues_pending_eval_runs(beir):  # type: ignore[no-untyped-def]
    at = _open_page()
    at.text_input(key="evaluate.corpus_path").input(str(beir["corpus"]))
    at.text_input(key="evaluate.queries_path").input(str(beir["queries"]))
    at.text_input(key="evaluate.qrels_path").input(str(beir["qrels"]))
    at.multiselect(key="evaluate.modes").set_value(["hybrid"])
    at.button(key="evaluate.run").click().run()
    at.checkbox(key="evaluate.push").check().run()
    assert at.number_input(key="evaluate.push_count").value == 3  # capped at the evaluated questions
    at.number_input(key="evaluate.push_count").set_value(2)
    at.selectbox(key="evaluate.push_preset").select("minimal")
    at.button(key="evaluate.push_run").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.success[0].value == "2 runs are waiting in the review queue."

    queued = review_queue()
    assert len(queued) == 2 and {q.status for q in queued} == {"pending"}
    runs = [load_run(q.run_id) for q in queued]
    assert sorted(r.query for r in runs) == sorted(q["text"] for q in QUERIES[:2])
    assert {(r.source, r.preset, r.collection) for r in runs} == {("eval", "minimal", "eval")}


class _ConfidentBackend(OfflineBackend):
    """The offline answers, with reflection and grade at their best: runs can auto-accept."""

    def reflect(self, query, answer, chunks):  # type: ignore[no-untyped-def]
        return Reflection(True, False, 1.0, ("1",), "fully grounded (test)", False)

    def grade(self, query, answer):  # type: ignore[no-untyped-def]
        return Grade(5)


def test_runs_the_pipeline_would_auto_accept_are_queued_too(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.scoring.profiles import save_profile

    corpus = tmp_path / "tides.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"t{i}", "title": "Tides", "text": text}) + "\n" for i, text in enumerate([
        "Ocean tides are caused by the gravitational pull of the moon and the sun on the sea.",
        "The moon's gravitational pull raises the sea into tides; the sun's pull adds spring tides.",
        "Tides rise and fall twice a day as the moon's gravity pulls on the ocean.",
    ])), encoding="utf-8")
    ingest_paths([corpus], collection="tides")
    save_profile(WeightsProfile(name="lenient", high=0.5, medium=0.4, low=0.3), activate=True)
    progress: list[tuple[int, int]] = []
    # A question its answer sentence adds to plainly (P 0.996 under the judges of 2026-12-07), not
    # one naming its own answer, whose P sat within 0.005 of the accept threshold and fell under it.
    query = EvalQuery("t1", "What pulls on the sea to cause ocean tides?")

    (run_id,) = queue_evaluation_runs([query], collection="tides", backend=_ConfidentBackend(),
                                      on_progress=lambda done, total: progress.append((done, total)))
    run = load_run(run_id)
    assert run.events[-1].data["would_auto_accept"], "the setup must produce a run the pipeline would auto-accept"
    assert (run.status, run.source) == ("pending", "eval")
    assert [q.run_id for q in review_queue()] == [run_id]
    assert progress == [(1, 1)]


def test_page_helpers_resolve_paths_and_uploads(beir, tmp_path, evaluate_page):  # type: ignore[no-untyped-def]
    from services.errors import InputError

    files = evaluate_page.files_from_paths("", f"  {beir['queries']} ", str(beir["qrels"]))
    assert files.corpus is None and files.queries == beir["queries"]
    with pytest.raises(InputError, match="give the path of the queries.jsonl file"):
        evaluate_page.files_from_paths(str(beir["corpus"]), " ", str(beir["qrels"]))
    upload_dir = tmp_path / "uploads"
    upload_dir.mkdir()
    uploaded = evaluate_page.files_from_uploads(upload_dir, {"corpus": None, "queries": b'{"_id": "q9", "text": "x"}\n',
                                                           "qrels": b"q9\td1\t1\n"})
    assert uploaded.corpus is None and uploaded.qrels == upload_dir / "qrels.tsv"
    assert uploaded.qrels.read_bytes() == b"q9\td1\t1\n"
    with pytest.raises(InputError, match="upload a qrels.tsv file"):
        evaluate_page.files_from_uploads(upload_dir, {"queries": b"{}", "qrels": None})
    assert evaluate_page.count_documents(beir["corpus"]) == 3
    queries, _ = load_judged_queries(files, limit=2)
    assert [q.query_id for q in queries] == ["q1", "q2"]
