"""Benchmarks and experiments of the local judge (``nexagauge/judge/local/``): accuracy on the labelled sets, agreement, throughput, candidate models and signals, cross-encoder training.

Each module is a script run from the repository root (``python bench/local_judge/eval.py``); they
import each other as ``local_judge.<name>`` with ``bench/`` on ``sys.path``, and ``nexagauge``.
``RECORD.md`` is the experiment record; ``results/`` holds the committed runs it and the tests quote.
"""
