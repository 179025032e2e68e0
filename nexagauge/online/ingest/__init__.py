"""Ingest: from Kafka message bytes to the sampled evaluation cases of whole traces.

Decode OTLP (one bad span costs only itself), assemble traces, read spans in every vocabulary,
decide span roles once (:mod:`.roles`), extract cases and sample them. Start with :mod:`.extract`.
May import: ``nexagauge.sdk.conventions``, ``schema``, ``settings``, ``text`` — nothing else of
``online`` (delivery, conversations and the stages build on ingest, never the reverse).
"""
