"""Turning files into a searchable corpus: extraction, chunking, ingestion, statistics."""
