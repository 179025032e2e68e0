"""The online evaluator (``nexagauge serve``): Kafka in, scores out, nothing lost or counted twice.

Sub-systems: :mod:`.ingest` (bytes -> sampled cases), :mod:`.delivery` (consumer group, offsets,
markers, changelogs, DLQ), :mod:`.conversations` (turn records -> ``conversation_relevance``).
The wiring stays here: :mod:`.service` (start here), the stages :mod:`.rekey` and :mod:`.stage`,
one case's life (:mod:`.cases`), agent signals (:mod:`.signals`), rebalances and drain
(:mod:`.partitions`), adaptive concurrency (:mod:`.concurrency`), the executors (:mod:`.plans`)
and DLQ replay (:mod:`.replay`).
"""
