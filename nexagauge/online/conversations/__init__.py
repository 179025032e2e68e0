"""Conversations: ``conversation_relevance`` scored incrementally, one turn record at a time.

Turn records (:mod:`.turns`) go to their own topic keyed by conversation; :mod:`.stage` keeps each
conversation's window in a changelog-backed store (:mod:`.state`) and judges it (:mod:`.judging`).
Start with :mod:`.stage`. May import ``online.ingest`` and ``online.delivery``; never the stages.
"""
