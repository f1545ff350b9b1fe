"""Everything that thinks: retrieval, scoring, ingestion, the pipeline, review, exports."""
