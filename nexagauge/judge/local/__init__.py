"""The local judge: claims, relevance and grounding with no API key and no network.

Sentences (``text.sentences``), an embedder (:mod:`.e5`), a relevance cross-encoder (:mod:`.ce`),
lexical and discourse cues, and calibrated decision models (:mod:`.decide`, :mod:`.calibrate`).
Start with :mod:`.judge`. May import ``judge``'s shared modules, ``judge.embeddings``, ``text``,
``schema`` and ``settings``; never ``online`` or ``judge.llm``.
"""
