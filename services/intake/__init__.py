"""Runs from other RAG systems: the record schema, file readers, traces, the intake queue, assessment, API keys.

    schema.py          ExternalRun / ExternalContext (pydantic), the JSON Schema
    readers.py         JSONL, CSV and Parquet into line-numbered records and line-numbered errors
    intake.py          accept records into run_intake (idempotent by trace id), status, claiming
    status.py          what the Import runs page shows of the intake: counts, recent failures
    importing.py       a whole file into the intake, streamed in batches
    otlp.py            OTLP/HTTP trace export bodies (protobuf, JSON, gzip) into plain spans
    span_facts.py      what one span says: OpenInference and gen_ai.* attributes read
    trace_runs.py      one trace's spans into one record, or the reason there is none
    traces.py          spans kept per open trace, each trace assembled once into the intake
    trace_status.py    what the Import runs page shows of the traces: counts, backlog, dropped
    trace_keys.py      exporters' API keys verified at most every 30 s, revocation still immediate
    context_scores.py  hits from a record's contexts: its own scores, else the model and corpus BM25
    chunk_scores.py    hits for chunks already in the corpus, scored as the search scores them
    assessment.py      score, CRAG, judge and blend given hits with the pipeline's own stages
    assess.py          assess_record / assess_chunks / process_queue: records become reviewable runs
    verdicts.py        reviewed imported runs, for the source system to pull back
    api_keys.py        create, list, revoke and verify the HTTP API's keys (stored hashed)
"""
