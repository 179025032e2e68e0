"""Judges: what the metric nodes ask (:mod:`.base`), and the backends that answer.

:mod:`.llm` is the LLM judge (an OpenAI-compatible endpoint); :mod:`.local` the local judge (no
key, no network). Shared by both: the task contract (:mod:`.tasks`, :mod:`.scoring`), prompts as
data (:mod:`.promptlib`, ``prompts/``), token counts and the embedding service. Never imports
``online``, ``emit`` or ``cli``.
"""
