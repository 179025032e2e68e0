"""The local demo: embedded broker and collector, the evaluator with the local judge, and a traced RAG app."""
