"""The LLM judge: any OpenAI-compatible chat endpoint, asked through the ``openai`` client.

Request bodies (:mod:`.wire`), retries, client-side limits, the circuit breaker, answer
validation and the corrective re-ask, usage and pricing, and the judge-answer cache.
Start with :mod:`.client`. May import ``judge``'s shared modules (base, tasks, promptlib,
jsonschema, tokens), ``graph.cache``, ``schema`` and ``settings``; never ``online`` or ``judge.local``.
"""
