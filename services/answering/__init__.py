"""Answering a question: the pipeline, the decision router, presets, stored runs, LLM backends."""
