"""Delivery: at-least-once Kafka consumption that loses nothing and counts nothing twice.

The consumer-group loop, contiguous offset commits, group-wide emitted markers, changelog stores,
the dead-letter topic, broker health, shutdown deadlines and the evaluator's own log hygiene.
Start with :mod:`.consumer`. May import ``online.ingest`` (the poison error) and the layers
below ``online``; never ``online.conversations`` or the stages at ``online``'s top.
"""
