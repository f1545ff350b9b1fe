"""Finding text: hybrid search, query text, entities, embeddings, reranking, fallback, BEIR file readers."""
