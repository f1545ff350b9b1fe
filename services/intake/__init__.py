"""Runs from other RAG systems: the record schema, file readers, the intake queue, API keys.

    schema.py    ExternalRun / ExternalContext (pydantic), the JSON Schema
    readers.py   JSONL, CSV and Parquet into line-numbered records and line-numbered errors
    intake.py    accept records into run_intake (idempotent by trace id), status, claiming
    importing.py a whole file into the intake, streamed in batches
    api_keys.py  create, list, revoke and verify the HTTP API's keys (stored hashed)
"""
