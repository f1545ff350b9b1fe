"""Building a store of many runs for bench/volume.py: a few real template runs, then COPY.

The templates are real: SQuAD questions with five ~120-word contexts each (the gold paragraph
and four others of its article) go through intake with the judges on, as another system's
answers would (a correct answer, a wrong one, an abstention). Every stored row of a template
(runs, run_iterations, run_events, llm_calls, run_intake) is then read back with COPY TO and
written again N times with COPY FROM, varying what differs between real runs: id, question
suffix, app, source, trace id, creation time over 90 days, components and confidences
(jittered, so re-scoring and the queue's order see a spread), and the review: a tenth
reviewed (approved, flagged, corrected) with one review_history row each. Columns are read
from the catalog, so a column added by a migration rides along as the template has it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import SQUAD_DIR, read_jsonl

APPS = ("support-bot", "docs-search", "sales-assist", "hr-helper", "field-service")
SOURCES = (("api", 0.55), ("import", 0.25), ("otlp", 0.15), ("ask", 0.05))  # ask: the workbench's own, no intake row
REVIEWERS = ("ana", "bo", "chen", "dara", "eli", "fay")
VERDICTS = (("approved", 0.6), ("flagged", 0.25), ("corrected", 0.15))
CHILD_TABLES = ("run_iterations", "run_events", "llm_calls")  # rows keyed by run_id, copied per run
SPAN_DAYS = 90
REVIEWED_SHARE = 0.1


def template_records(count: int, *, seed: int = 7) -> list[dict[str, Any]]:
    """`count` intake records: SQuAD questions, five contexts each; a correct answer (the
    gold paragraph's sentence holding the answer), a wrong one, or an abstention."""
    rng = random.Random(seed)
    paragraphs = {p["_id"]: p for p in read_jsonl(SQUAD_DIR / "corpus.jsonl")}
    by_title: dict[str, list[dict[str, Any]]] = {}
    for paragraph in paragraphs.values():
        by_title.setdefault(paragraph["title"], []).append(paragraph)
    questions = [q for q in read_jsonl(SQUAD_DIR / "queries.jsonl") if not q["metadata"]["is_impossible"]]
    records = []
    for i, question in enumerate(rng.sample(questions, count)):
        gold = paragraphs[question["metadata"]["gold_doc"]]
        others = [p for p in by_title[gold["title"]] if p["_id"] != gold["_id"]]
        contexts = [gold, *rng.sample(others, min(4, len(others)))]
        kind = ("correct", "wrong", "abstain")[0 if i % 6 < 4 else 1 if i % 6 == 4 else 2]
        if kind == "correct":
            answer = _sentence_with(gold["text"], question["metadata"]["answers"][0])
        elif kind == "wrong":
            answer = _sentence_with(contexts[-1]["text"], "")
        else:
            answer = ""
        records.append({
            "question": question["text"], "answer": answer, "trace_id": f"template-{i}",
            "contexts": [{"text": p["text"], "document_id": f"squad/{p['_id']}", "source": p["title"], "rank": rank,
                          "score": round(1.0 / (60 + rank), 5), "dense_similarity": round(0.8 - 0.07 * rank, 3)}
                         for rank, p in enumerate(contexts, start=1)],
            "metadata": {"app": APPS[i % len(APPS)], "model": "gpt-4o-mini", "user": f"u{i}"},
        })
    return records


def _sentence_with(text: str, needle: str) -> str:
    sentences = [s.strip() + "." for s in text.split(". ") if s.strip()]
    return next((s for s in sentences if needle and needle in s), sentences[0])


def make_templates(count: int) -> list[int]:
    """Import and assess the template records (judges on); their run ids."""
    from services.intake.assess import process_queue
    from services.intake.importing import import_file
    from services.store import transaction

    body = "".join(json.dumps(r) + "\n" for r in template_records(count)).encode("utf-8")
    import_file(body, fmt="jsonl", judges=True)
    process_queue()
    with transaction() as session:
        from sqlalchemy import text

        return list(session.scalars(text("SELECT run_id FROM run_intake WHERE trace_id LIKE 'template-%' "
                                         "AND run_id IS NOT NULL ORDER BY run_id")))


# --- COPY text format ---------------------------------------------------------------------

def esc(value: Any) -> str:
    """A value as a COPY text field (\\N for NULL)."""
    if value is None:
        return "\\N"
    s = value if isinstance(value, str) else str(value)
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def unesc(field: str) -> str | None:
    if field == "\\N":
        return None
    out, i = [], 0
    while i < len(field):
        ch = field[i]
        if ch == "\\" and i + 1 < len(field):
            nxt = field[i + 1]
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def columns_of(cursor: Any, table: str) -> list[str]:
    # Generated columns (runs.reflection_min_score, 0015) are computed by the store on COPY FROM, never written.
    cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                   "AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position", (table,))
    return [row[0] for row in cursor.fetchall()]


def read_rows(cursor: Any, table: str, columns: list[str], where: str, run_ids: list[int]) -> list[list[str]]:
    """The rows as raw COPY text fields (already escaped), so they are written back unchanged."""
    quoted = ", ".join(f'"{c}"' for c in columns)
    lines: list[str] = []
    ids = ",".join(str(int(i)) for i in run_ids)  # integers from our own query
    with cursor.copy(f"COPY (SELECT {quoted} FROM {table} WHERE {where} IN ({ids}) ORDER BY id) TO STDOUT") as copy:
        buffer = b"".join(bytes(chunk) for chunk in copy)
    lines = buffer.decode("utf-8").split("\n")
    return [line.split("\t") for line in lines if line]


# --- the generated runs --------------------------------------------------------------------

def _pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    roll, total = rng.random(), 0.0
    for value, share in weighted:
        total += share
        if roll < total:
            return value
    return weighted[-1][0]


def _level(score: float) -> str:
    return "HIGH" if score >= 0.85 else "MEDIUM" if score >= 0.70 else "LOW" if score >= 0.50 else "VERY LOW"


def run_variants(n: int, *, first_run_id: int, now: datetime, seed: int = 11) -> Iterator[dict[str, Any]]:
    """What differs per generated run (the rest is its template's)."""
    rng = random.Random(seed)
    for i in range(n):
        created = now - timedelta(seconds=rng.random() * SPAN_DAYS * 86400)
        app = APPS[rng.randrange(len(APPS))]
        reviewed = rng.random() < REVIEWED_SHARE
        verdict = _pick(rng, VERDICTS) if reviewed else None
        yield {"i": i, "run_id": first_run_id + i, "created_at": created, "app": app,
               "source": _pick(rng, SOURCES), "jitter": rng.uniform(-0.25, 0.25), "verdict": verdict,
               "reviewer": REVIEWERS[rng.randrange(len(REVIEWERS))] if reviewed else None,
               "reviewed_at": min(now, created + timedelta(seconds=rng.random() * 3 * 86400)) if reviewed else None}


def clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def runs_row(template: dict[str, str | None], raw: list[str], columns: list[str], v: dict[str, Any]) -> str:
    """One runs row: the template's fields with this run's differences."""
    jitter = v["jitter"]
    confidence = clamp(float(template["final_confidence"] or 0.5) + jitter)
    components = template["components"] or "{}"
    jittered = ",".join(f"{clamp(float(c) + jitter * 0.8):.4f}" for c in components.strip("{}").split(",") if c)
    p_supported = template["p_supported"]
    external = json.loads(template["external"] or "{}")
    external["app"] = v["app"]
    status = v["verdict"] or template["status"]
    new = {
        "id": str(v["run_id"]), "app": esc(v["app"]), "query": esc(f"{template['query']} [{v['app']} #{v['i']}]"),
        "source": v["source"], "trace_id": esc(f"{v['app']}-{v['i']:09d}"), "external": esc(json.dumps(external)),
        "created_at": v["created_at"].isoformat(), "final_confidence": f"{confidence:.4f}",
        "final_level": _level(confidence), "components": "{" + jittered + "}", "status": status,
        "p_supported": "\\N" if p_supported is None else f"{clamp(float(p_supported) + jitter):.4f}",
        "review_version": "1" if v["verdict"] else "0", "reviewer": esc(v["reviewer"]),
        "reviewed_at": v["reviewed_at"].isoformat() if v["reviewed_at"] else "\\N",
        "flag_reason": "wrong answer" if v["verdict"] == "flagged" else "\\N",
        "corrected_answer": esc("A reviewer's corrected answer.") if v["verdict"] == "corrected" else "\\N",
        "review_comment": esc("checked against the source") if v["verdict"] else "\\N",
    }
    return "\t".join(new.get(c, raw[k]) for k, c in enumerate(columns))


def child_row(raw: list[str], columns: list[str], overrides: dict[str, str]) -> str:
    return "\t".join(overrides.get(c, raw[k]) for k, c in enumerate(columns))


def history_row(v: dict[str, Any], history_id: int, previous: str) -> str:
    verdict = v["verdict"]
    action = {"approved": "approve", "flagged": "flag", "corrected": "correct"}[verdict]
    return "\t".join([str(history_id), str(v["run_id"]), "1", action, v["reviewer"], previous, verdict,
                      "wrong answer" if verdict == "flagged" else "\\N",
                      "A reviewer's corrected answer." if verdict == "corrected" else "\\N",
                      "checked against the source", v["reviewed_at"].isoformat(), v["created_at"].isoformat()])


HISTORY_COLUMNS = ("id", "run_id", "version", "action", "reviewer", "previous_status", "new_status", "flag_reason",
                   "corrected_answer", "comment", "created_at", "run_created_at")


def batched(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def now_utc() -> datetime:
    return datetime.now(UTC)


ProgressFn = Callable[[int, int], None]


def bulk_load(n: int, template_ids: list[int], *, batch: int = 20_000, progress: ProgressFn | None = None) -> dict[str, int]:
    """COPY `n` runs made from the templates into the store; rows written per table."""
    from services.store import get_engine

    raw = get_engine().raw_connection()
    try:
        conn = raw.driver_connection
        assert conn is not None
        with conn.cursor() as cursor:
            return _load(conn, cursor, n, template_ids, batch, progress)
    finally:
        raw.close()


def _load(conn: Any, cursor: Any, n: int, template_ids: list[int], batch: int,
          progress: ProgressFn | None) -> dict[str, int]:
    tables = {"runs": columns_of(cursor, "runs"), "run_intake": columns_of(cursor, "run_intake"),
              **{t: columns_of(cursor, t) for t in CHILD_TABLES}}
    templates = [dict(zip(tables["runs"], (unesc(f) for f in row)))
                 for row in read_rows(cursor, "runs", tables["runs"], "id", template_ids)]
    raw_runs = read_rows(cursor, "runs", tables["runs"], "id", template_ids)
    children: dict[str, dict[int, list[list[str]]]] = {}
    for table in (*CHILD_TABLES, "run_intake"):
        rows = read_rows(cursor, table, tables[table], "run_id", template_ids)
        run_col = tables[table].index("run_id")
        grouped: dict[int, list[list[str]]] = {}
        for row in rows:
            grouped.setdefault(int(row[run_col]), []).append(row)
        children[table] = grouped
    next_id = {}
    for table in (*tables, "review_history"):
        cursor.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")  # our own table names
        next_id[table] = int(cursor.fetchone()[0])
    # Runs are partitioned by month (0016): give each month of the spread its table first, or
    # nearly every run would land in runs_default.
    cursor.execute("SELECT runs_month_partition_add(m) FROM generate_series(date_trunc('month', now() - "
                   "interval '100 days', 'UTC'), now(), interval '1 month') AS m")
    conn.commit()
    cursor.execute("SELECT current_setting('is_superuser')")
    if cursor.fetchone()[0] == "on":  # foreign keys hold by construction; their per-row checks only slow the load
        cursor.execute("SET session_replication_role = replica")
    written = {t: 0 for t in (*tables, "review_history")}
    now = now_utc()
    for chunk in batched(run_variants(n, first_run_id=next_id["runs"], now=now), batch):
        out: dict[str, list[str]] = {t: [] for t in written}
        for v in chunk:
            k = v["i"] % len(templates)
            template, run_id = templates[k], str(v["run_id"])
            tid = int(template["id"] or 0)
            out["runs"].append(runs_row(template, raw_runs[k], tables["runs"], v))
            for table in CHILD_TABLES:
                for raw in children[table].get(tid, []):
                    # The run's created_at: the children are partitioned by its month (0021).
                    over = {"id": str(next_id[table]), "run_id": run_id, "run_created_at": v["created_at"].isoformat()}
                    if table == "run_events":
                        over["ts"] = v["created_at"].isoformat()
                    if table == "llm_calls":
                        over["created_at"] = v["created_at"].isoformat()
                    out[table].append(child_row(raw, tables[table], over))
                    next_id[table] += 1
            if v["source"] in ("api", "import", "otlp"):
                for raw in children["run_intake"].get(tid, [])[:1]:
                    over = {"id": str(next_id["run_intake"]), "run_id": run_id, "source": v["source"],
                            "trace_id": esc(f"{v['app']}-{v['i']:09d}"), "received_at": v["created_at"].isoformat(),
                            "assessed_at": v["created_at"].isoformat(), "app": esc(v["app"])}
                    out["run_intake"].append(child_row(raw, tables["run_intake"], over))
                    next_id["run_intake"] += 1
            if v["verdict"]:
                out["review_history"].append(history_row(v, next_id["review_history"], template["status"] or "pending"))
                next_id["review_history"] += 1
        for table, lines in out.items():
            if not lines:
                continue
            columns = tables.get(table, list(HISTORY_COLUMNS))
            quoted = ", ".join(f'"{c}"' for c in columns)
            with cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
                for start in range(0, len(lines), 2000):
                    copy.write(("\n".join(lines[start:start + 2000]) + "\n").encode("utf-8"))
            written[table] += len(lines)
        conn.commit()
        if progress:
            progress(written["runs"], n)
    cursor.execute("SET session_replication_role = DEFAULT")
    # Under the replica role no trigger fired, the Document trends rollup's (0015) included: count
    # every day again from the runs, as the migration does (a million runs: about two minutes).
    cursor.execute("SELECT to_regprocedure('refresh_document_day_rollup(date, date)') IS NOT NULL")
    if cursor.fetchone()[0]:
        cursor.execute("SELECT refresh_document_day_rollup(NULL, NULL)")
    # And the Tuning matrix's numbers (0017), written again from every run.
    cursor.execute("SELECT to_regprocedure('refresh_run_matrix_rows(timestamptz, timestamptz)') IS NOT NULL")
    if cursor.fetchone()[0]:
        cursor.execute("SELECT refresh_run_matrix_rows(NULL, NULL)")
    # And the drill-down's index of each document's runs (0018).
    cursor.execute("SELECT to_regprocedure('refresh_document_run_index(timestamptz, timestamptz)') IS NOT NULL")
    if cursor.fetchone()[0]:
        cursor.execute("SELECT refresh_document_run_index(NULL, NULL)")
    for table in written:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    conn.commit()
    conn.autocommit = True
    cursor.execute("VACUUM ANALYZE runs, run_iterations, run_intake, review_history, run_events")
    conn.autocommit = False
    return written
