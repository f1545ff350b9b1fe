"""Answering a question: the pipeline, the decision router, presets, stored runs, the offline backend, LLM backends (llm/)."""
