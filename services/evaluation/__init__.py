"""Evaluation: BEIR files in, retrieval and confidence figures out; evaluated questions answered for review."""
