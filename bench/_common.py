"""Shared helpers of the online benchmarks (ingest, online latency, memory, run_all).

The benchmarks import everything from here; each job lives in its own module:

- ``_machine``: :func:`machine` / :func:`machine_line` describe the machine (CPU model, cores,
  memory, load) for every report; :func:`rss_kib` / :func:`peak_rss_kib` read
  ``/proc/self/status``; :func:`exit_on_sigterm`.
- ``_traces``: :class:`RagApp` / :func:`sdk_trace_requests` build realistic RAG traces with the
  real ``@nexagauge.trace`` SDK from the benchmark cases in ``bench/data/rag_cases.jsonl`` and
  encode them exactly as an OTLP exporter sends them (``ExportTraceServiceRequest`` protobuf,
  what a collector's Kafka exporter writes with ``encoding: otlp_proto``);
  :func:`unique_messages` turns those templates into many distinct Kafka messages.
- ``_broker``: :class:`Broker` is Tansu on loopback plus topic creation and a bulk producer.
- ``_otlp_sink``: :class:`OtlpHttpSink` receives the evaluation spans ``nexagauge serve`` exports
  over OTLP/HTTP.
- ``_llm_child``: :class:`LlmServer` runs ``bench/llm_server.py`` (the loopback judge).
- ``_tables``: :func:`percentile` and :func:`table` for the reports.
"""

from __future__ import annotations

from _broker import MAX_MESSAGE, Broker
from _llm_child import LlmServer
from _machine import (
    cpu_model,
    exit_on_sigterm,
    load_line,
    machine,
    machine_line,
    mem_total_gib,
    peak_rss_kib,
    rss_kib,
)
from _otlp_sink import OtlpHttpSink, ReceivedSpan
from _tables import percentile, table
from _traces import (
    CASES,
    ROOT,
    SYSTEM_PROMPT,
    BuiltTrace,
    RagApp,
    load_cases,
    merge_requests,
    sdk_trace_requests,
    unique_messages,
)

__all__ = [
    "CASES",
    "MAX_MESSAGE",
    "ROOT",
    "SYSTEM_PROMPT",
    "Broker",
    "BuiltTrace",
    "LlmServer",
    "OtlpHttpSink",
    "RagApp",
    "ReceivedSpan",
    "cpu_model",
    "exit_on_sigterm",
    "load_cases",
    "load_line",
    "machine",
    "machine_line",
    "mem_total_gib",
    "merge_requests",
    "peak_rss_kib",
    "percentile",
    "rss_kib",
    "sdk_trace_requests",
    "table",
    "unique_messages",
]
