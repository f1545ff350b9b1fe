"""OTLP trace intake: N exporters send traces to POST /v1/traces for a fixed time against a
real `workbench api` (uvicorn in its own process), then every trace sent is looked for as a
run in run_intake once the API's worker has assembled it.

    python bench/otlp.py [--exporters 20] [--seconds 30] [--traces-per-export 1] [--data-dir DIR]

Each exporter is a thread with the stock OTLP/HTTP exporter (opentelemetry-exporter-otlp-
proto-http, protobuf) and its own OpenTelemetry SDK tracer; a trace is a root CHAIN span
(question, answer), a RETRIEVER span with five scored documents and an LLM span (model,
tokens, messages), as openinference-instrumentation writes them. The endpoint carries
`?judges=false`, as bench/api.py pushes runs: the figure is intake, not assessment.

Last stdout line: {"spans_per_s", "traces_per_s", "runs_assembled_per_s", "sent", "stored",
"lost", "api_cpu_ms_per_trace", ...}. `sent` counts traces in exports answered SUCCESS,
`stored` those found in run_intake, `lost` the sent ones missing there after the worker had
`--drain-seconds` to assemble them: it must be 0. `runs_assembled_per_s` is the traces
assembled over the time from the first span received to the last trace assembled.

Before the clock starts, one trace is sent and its run waited for until the worker has
assessed it: the worker loads the embedding model at its first record (about 4-6 s of CPU),
which, inside the 30 s, read as 1 ms or more of the API's CPU per trace. The CPU
milliseconds per trace sent, while sending, are what a busy shared machine inflates least:
the API process's (`api_cpu_ms_per_trace`), split into its threads at normal priority
(`api_intake_cpu_ms_per_trace`: HTTP, decoding, storing spans, assembling traces) and the
assessment worker's, which runs at the lowest priority on whatever CPU is left
(`api_assessment_cpu_ms_per_trace`); the embedded Postgres's, backends that exited during
the window included (`postgres_cpu_ms_per_trace`; None with DATABASE_URL); and the
exporters'.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import describe, emit, log, machine, percentile, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402
from bench.api import _free_port, _start_api, _wait_healthy  # noqa: E402

SERVICE = "bench-otlp"
SPANS_PER_TRACE = 3
_STORED = "SELECT trace_id FROM run_intake WHERE source = 'otlp'"
_ASSEMBLY = """
SELECT count(*) FILTER (WHERE state = 'assembled') AS assembled, count(*) FILTER (WHERE state = 'open') AS open,
       count(*) FILTER (WHERE state IN ('dropped', 'refused')) AS not_runs,
       EXTRACT(EPOCH FROM max(closed_at) - min(first_received_at)) AS seconds
FROM otlp_traces WHERE service_name = :service
"""


def _api_cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU seconds of the API server's process (every thread, ended ones too) and
    of its threads at the worker's lowest priority (the assessment and the threads it
    started; they live as long as the worker), from /proc (Linux)."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    niced = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm)": fields[0] is the state
        if int(fields[16]) > 0:  # nice
            niced += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return times.user + times.system, niced


def _postgres_cpu_seconds(settings: Any, data_dir: Path) -> float | None:
    """The embedded server's CPU seconds so far: the postmaster, its live children, and the
    children it has reaped (backends of connections closed meanwhile)."""
    import psutil

    from bench._common import server_cpu_seconds
    from db.embedded import postgres_pid

    live = server_cpu_seconds(settings, data_dir)
    pid = postgres_pid(data_dir) if live is not None else None
    if pid is None:
        return None
    reaped = psutil.Process(pid).cpu_times()
    return live + reaped.children_user + reaped.children_system


def _trace(tracer: Any, exporter: int, i: int) -> None:
    question = f"Exporter {exporter} question {i}: how do I clear alarm SRVO-062 after a battery change?"
    answer = "Replace the pulsecoder battery with the controller on, then remaster the affected axes."
    with tracer.start_as_current_span("RetrievalQA") as root:
        root.set_attributes({"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer})
        with tracer.start_as_current_span("VectorStoreRetriever") as retriever:
            retriever.set_attributes({"openinference.span.kind": "RETRIEVER", "input.value": question})
            for rank in range(5):
                retriever.set_attributes({
                    f"retrieval.documents.{rank}.document.content":
                        f"Passage {rank}: SRVO-062 BZAL alarm means the pulsecoder backup battery ran low; replace it.",
                    f"retrieval.documents.{rank}.document.id": f"srvo-062-{rank}.md",
                    f"retrieval.documents.{rank}.document.score": round(0.9 - rank / 10, 3)})
        with tracer.start_as_current_span("ChatModel") as llm:
            llm.set_attributes({"openinference.span.kind": "LLM", "llm.model_name": "bench-model",
                                "llm.token_count.prompt": 420, "llm.token_count.completion": 24,
                                "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": question,
                                "llm.output_messages.0.message.role": "assistant",
                                "llm.output_messages.0.message.content": answer})


def _send(endpoint: str, key: str, exporters: int, seconds: float, per_export: int, *, at_least_one: bool = False,
          service: str = SERVICE) -> list[dict[str, Any]]:
    """Every export's outcome: its trace ids, whether it succeeded, ms."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()
    start = threading.Barrier(exporters + 1)
    stop_at: list[float] = []

    def exporter(number: int) -> None:
        made = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(made))
        tracer = provider.get_tracer("bench")
        otlp = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        mine, i = [], 0
        start.wait()
        while time.monotonic() < stop_at[0] or (at_least_one and not mine):
            for _ in range(per_export):
                _trace(tracer, number, i)
                i += 1
            spans = made.get_finished_spans()
            made.clear()
            began = time.perf_counter()
            result = otlp.export(spans)
            mine.append({"trace_ids": {format(s.context.trace_id, "032x") for s in spans},
                         "spans": len(spans), "ok": result is SpanExportResult.SUCCESS,
                         "ms": (time.perf_counter() - began) * 1000})
        otlp.shutdown()
        with lock:
            outcomes.extend(mine)

    threads = [threading.Thread(target=exporter, args=(n,)) for n in range(exporters)]
    for thread in threads:
        thread.start()
    stop_at.append(time.monotonic() + seconds)
    start.wait()
    for thread in threads:
        thread.join()
    return outcomes


def _cpu_per_trace(before: dict[str, float | None], after: dict[str, float | None], traces: int
                   ) -> dict[str, float | None]:
    """CPU ms per trace sent, while sending, of each part (`<part>_cpu_ms_per_trace`)."""
    out: dict[str, float | None] = {}
    for part, began in before.items():
        ended = after[part]
        out[f"{part}_cpu_ms_per_trace"] = (rounded((ended - began) * 1000 / traces, 2)
                                           if traces and began is not None and ended is not None else None)
    return out


def _cpu_now(server_pid: int, settings: Any, data_dir: Path) -> dict[str, float | None]:
    total, assessment = _api_cpu_seconds(server_pid)
    return {"api": total, "api_intake": total - assessment, "api_assessment": assessment,
            "postgres": _postgres_cpu_seconds(settings, data_dir), "exporters": time.process_time()}


def _warm_up(endpoint: str, key: str, settings: Any, timeout_s: float = 300.0) -> None:
    """One trace sent, and waited for until the worker has assessed its run (model loaded)."""
    from sqlalchemy import text

    from services.store import transaction

    sent = _send(endpoint, key, 1, 0.0, 1, at_least_one=True, service=f"{SERVICE}-warm-up")
    trace_ids = [t for o in sent for t in o["trace_ids"]]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with transaction(settings) as session:
            done = session.execute(text("SELECT count(*) FROM run_intake WHERE trace_id = ANY(:ids) "
                                        "AND status <> 'queued'"), {"ids": trace_ids}).scalar_one()
        if done == len(trace_ids):
            return
        time.sleep(0.5)
    raise SystemExit(f"the warm-up trace was not assessed within {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exporters", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--traces-per-export", type=int, default=1)
    parser.add_argument("--drain-seconds", type=float, default=120.0, help="how long the worker may take to assemble")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args()

    data_dir, created, settings = prepare_store(args.data_dir)  # the API server inherits the store
    from sqlalchemy import text

    from services.intake.api_keys import create_api_key
    from services.store import get_engine, transaction

    timings: dict[str, float] = {}
    server = None
    try:
        with phase(f"store: {describe(settings)}", timings):
            get_engine(settings)
            with transaction(settings) as session:
                session.execute(text("DELETE FROM otlp_traces WHERE service_name LIKE :s || '%'"), {"s": SERVICE})
                session.execute(text("DELETE FROM run_intake WHERE source = 'otlp'"))
                key = create_api_key(name="bench-otlp", created_by="bench/otlp.py", session=session).key
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        with phase(f"start workbench api on port {port}", timings):
            server = _start_api(port, data_dir)
            _wait_healthy(base_url, server)
        endpoint = f"{base_url}/v1/traces?judges=false"
        with phase("warm-up: one trace, assessed (the worker loads its model)", timings):
            _warm_up(endpoint, key, settings)
        load_before = os.getloadavg()[0]
        # Where the CPU goes while sending (the machine may be shared): the API server's
        # threads, Postgres, and this process (the exporters); per trace, so loaded and quiet
        # runs compare.
        cpu_before = _cpu_now(server.pid, settings, data_dir)
        with phase(f"{args.exporters} exporters send {args.traces_per_export} trace(s) per export for {args.seconds:.0f} s",
                   timings):
            outcomes = _send(endpoint, key, args.exporters, args.seconds, args.traces_per_export)
        load_during = os.getloadavg()[0]
        cpu_after = _cpu_now(server.pid, settings, data_dir)
        sent = {t for o in outcomes if o["ok"] for t in o["trace_ids"]}
        with phase(f"wait for the worker to assemble {len(sent):,} traces", timings):
            deadline = time.monotonic() + args.drain_seconds
            while True:
                with transaction(settings) as session:
                    assembly = session.execute(text(_ASSEMBLY), {"service": SERVICE}).one()
                if assembly.open == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        with transaction(settings) as session:
            stored = {row[0] for row in session.execute(text(_STORED))}
        failed = [o for o in outcomes if not o["ok"]]
        if failed:
            log(f"{len(failed)} exports were not answered SUCCESS (the exporter logs why)")
        latencies = [o["ms"] for o in outcomes if o["ok"]]
        spans = sum(o["spans"] for o in outcomes if o["ok"])
        result = {
            "spans_per_s": rounded(spans / args.seconds, 1),
            "traces_per_s": rounded(len(sent) / args.seconds, 1),
            "runs_assembled_per_s": rounded(assembly.assembled / float(assembly.seconds), 1) if assembly.seconds else None,
            "export_p50_ms": rounded(percentile(latencies, 50), 1),
            "export_p95_ms": rounded(percentile(latencies, 95), 1),
            **_cpu_per_trace(cpu_before, cpu_after, len(sent)),
            "sent": len(sent),
            "stored": len(stored & sent),
            "lost": len(sent - stored),
            "still_open": int(assembly.open),
            "not_runs": int(assembly.not_runs),  # dropped or refused: must be 0 for these traces
            "failed_exports": len(failed),
            "exporters": args.exporters,
            "traces_per_export": args.traces_per_export,
            "spans_per_trace": SPANS_PER_TRACE,
            "seconds": args.seconds,
            "judges": False,
            "store": "embedded" if settings.embedded else "external",
            "load_average_1min_before": rounded(load_before, 1),
            "load_average_1min_after": rounded(load_during, 1),
            "machine": machine(),
            "date": today(),
        }
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except Exception:  # noqa: BLE001 - a server that will not stop is killed
                server.kill()
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    emit(result)


if __name__ == "__main__":
    main()
