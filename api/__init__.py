"""The HTTP API (`workbench api`): other RAG systems push runs here; like pages/, it only
validates, authenticates and calls services."""
