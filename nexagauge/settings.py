"""One typed settings table for the evaluator (not imported by the SDK path).

Precedence, highest first: explicit arguments > ``NEXAGAUGE_*`` environment variables > config
file (TOML: ``--config``, ``NEXAGAUGE_CONFIG`` or ``./nexagauge.toml``) > defaults. Environment
names are ``NEXAGAUGE_<SECTION>_<FIELD>``, e.g. ``NEXAGAUGE_JUDGE_BASE_URL``,
``NEXAGAUGE_KAFKA_BOOTSTRAP_SERVERS``. The judge falls back to the standard ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``; OTLP export honours the standard ``OTEL_*`` variables (read by the exporter).

Example:
    >>> s = Settings(judge={"model": "gpt-4o-mini"})
    >>> s.judge.model
    'gpt-4o-mini'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from nexagauge.schema.rubrics import RubricLibrary


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JudgeOverride(_Section):
    """Per-node judge settings; any field left ``None`` inherits the global judge setting."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    temperature: float | None = None
    seed: int | None = None
    timeout_s: float | None = None


class JudgeSettings(_Section):
    """The LLM judge: any OpenAI-compatible endpoint (OpenAI, Azure, vLLM, Ollama, LiteLLM)."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    temperature: float = 0.0
    seed: int | None = 7
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    #: judge requests in flight at once (an evaluation makes ~3 calls, so keep this at least
    #: 3 x online.max_in_flight or the judge slots, not Kafka, bound online throughput)
    max_concurrency: int = 96
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    structured_output: Literal["auto", "json_schema", "json_object"] = "auto"
    #: the openai client's HTTP transport: "aiohttp" (openai's aiohttp transport, a third less
    #: client CPU per call) or "httpx" (openai's default); see nexagauge/judge/llm/http.py
    http_client: Literal["aiohttp", "httpx"] = "aiohttp"
    #: "auto": the LLM judge when an endpoint is configured, else the local judge
    mode: Literal["auto", "llm", "local", "none"] = "auto"
    price_table: Path | None = None
    nodes: dict[str, JudgeOverride] = Field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)

    def for_node(self, node: str) -> JudgeSettings:
        """The effective judge settings of one node (global values overridden per node)."""
        o = self.nodes.get(node)
        if o is None:
            return self
        upd = {k: v for k, v in o.model_dump().items() if v is not None}
        if o.api_key is not None:
            upd["api_key"] = o.api_key
        return self.model_copy(update=upd)


class EmbeddingSettings(_Section):
    """Embeddings: a packaged local model, or an OpenAI-compatible ``/v1/embeddings`` endpoint."""

    provider: Literal["local", "openai"] = "local"
    model: str = "all-MiniLM-L6-v2"
    model_path: Path | None = None  # a local sentence-transformers directory; default: packaged
    base_url: str | None = None
    api_key: SecretStr | None = None
    batch_size: int = Field(default=64, ge=1)
    device: str = "cpu"
    #: in-memory LRU of text -> vector, shared by every node of the process (0 disables it)
    cache_size: int = Field(default=50_000, ge=0)
    #: remote (``provider = "openai"``) request timeout and retries
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    #: remote (``provider = "openai"``) HTTP transport, as ``judge.http_client``
    http_client: Literal["aiohttp", "httpx"] = "aiohttp"


class CacheSettings(_Section):
    """Node results and judge answers cached by content (see ``nexagauge/graph/cache.py``)."""

    enabled: bool = True
    dir: Path = Path(".nexagauge-cache")
    #: ``disk`` (under ``dir``, kept across runs), ``memory`` (an LRU of ``memory_mb``, for a
    #: long-running service), ``auto``: disk for CLI runs, memory for ``nexagauge serve``
    backend: Literal["auto", "disk", "memory"] = "auto"
    memory_mb: float = Field(default=256.0, gt=0)


class RunSettings(_Section):
    """Offline runs (``nexagauge run`` / ``estimate``)."""

    max_cases_in_flight: int = 8
    chunk_max_tokens: int = 128
    refiner_similarity: float = 0.92
    #: pass/fail threshold per metric name (a score >= threshold passes)
    default_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    thresholds: dict[str, float] = Field(default_factory=dict)
    #: scrub each case after parsing, before any judge, cache or output sees it: secrets (the
    #: SDK's rules) and, with ``scrub_pii``, personal data (nexagauge/schema/scrub.py, docs/cli.md)
    scrub: bool = True
    scrub_pii: bool = False


class KafkaSettings(_Section):
    """Kafka client settings; TLS/SASL pass through to aiokafka."""

    bootstrap_servers: str = "127.0.0.1:9092"
    traces_topic: str = "otlp_spans"
    logs_topic: str = "otlp_logs"
    rekeyed_topic: str = "nexagauge_spans_by_trace"
    dlq_topic: str = "nexagauge_dlq"
    #: what a poison message's dead letter holds: the app's raw message ("raw", with whatever
    #: secrets the app sent: undecodable, so unscrubbed) or only a reference to it in its source
    #: topic ("reference"); a failed evaluation's letter holds the scrubbed case (online.scrub),
    #: or none under "reference"
    dlq_payload: Literal["raw", "reference"] = "raw"
    #: turns keyed by conversation id (the conversation stage's repartition topic, see docs/online.md)
    turns_topic: str = "nexagauge_turns"
    #: compacted changelog of the conversation stage's state, co-partitioned with ``turns_topic``
    conversation_changelog_topic: str = "nexagauge_turns_changelog"
    #: compacted topic of emitted evaluation keys, co-partitioned with the evaluator's input:
    #: group-wide deduplication (docs/online.md, "Delivery guarantees")
    emitted_topic: str = "nexagauge_emitted"
    #: how long emitted keys are kept (cleanup.policy=compact,delete); None = forever (compact)
    emitted_retention_s: float | None = Field(default=7 * 86400.0, gt=0)
    group_id: str = "nexagauge-evaluator"
    encoding: Literal["otlp_proto", "otlp_json"] = "otlp_proto"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    #: how long the broker may hold a fetch while no data is there (Kafka's own default, 500:
    #: Kafka answers as soon as data arrives, so this costs no latency there; each empty fetch of
    #: every consumer costs CPU, 100 ms made an idle serve burn ~19 ms of CPU per second)
    fetch_max_wait_ms: int = Field(default=500, ge=0)
    #: the stages' fetches (re-key, evaluator, conversations) ask the broker to hold the answer
    #: until this much data is there or ``fetch_max_wait_ms`` has passed: at a steady trickle of
    #: traces one fetch round brings a few of them instead of one each (rounds cost CPU in every
    #: stage: 8.4 -> 6.7-7.0 ms of serve CPU per evaluation at 8 traces/s in alternating runs of
    #: bench/online_latency.py); it adds at most ``fetch_max_wait_ms`` per hop to a lone trace's
    #: latency (p50 +0.2 s there). 1: answer at once
    fetch_min_bytes: int = Field(default=64 * 1024, ge=1)
    session_timeout_ms: int = Field(default=10_000, ge=1000)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    max_poll_interval_ms: int = Field(default=300_000, ge=1000)
    #: how the group assigns partitions, in order of preference: "range" gives a member partition
    #: p of every topic it reads (a trace's spans and GenAI log records meet without the re-key
    #: stage); add "roundrobin" after it while replacing members one at a time that ran a version
    #: before it (round-robin only: a group needs one protocol every member speaks)
    assignors: list[Literal["range", "roundrobin"]] = Field(default=["range"], min_length=1)
    #: create the evaluator's own topics (re-keyed spans, dead letters) when missing
    create_topics: bool = True
    #: partitions of topics the evaluator creates (the unit of parallelism of the group)
    topic_partitions: int = Field(default=12, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    #: broker health check (a metadata request; also re-creates vanished own topics) period, and
    #: how long without an answer before ``/readyz`` reports the broker lost (docs/online.md)
    health_check_interval_s: float = Field(default=2.0, gt=0)
    broker_unreachable_after_s: float = Field(default=10.0, gt=0)


class SamplingRule(_Section):
    """One sampling rule: matches spans; ``rate`` in [0, 1]; ``nodes`` limits which metrics run."""

    name: str
    service: str | None = None
    span_name: str | None = None
    attribute: dict[str, str] | None = None
    rate: float = Field(default=1.0, ge=0.0, le=1.0)
    always: bool = False
    nodes: list[str] | None = None


class SamplingSettings(_Section):
    default_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    rules: list[SamplingRule] = Field(default_factory=list)
    always_on_error: bool = True
    by_conversation: bool = True
    max_evaluations_per_second: float | None = None
    budget_usd_per_hour: float | None = None
    budget_usd_per_day: float | None = None


class OnlineSettings(_Section):
    """The online evaluator (``nexagauge serve``)."""

    target: str = "eval"
    nodes: list[str] | None = None
    #: evaluations running at once, at most; above it partitions are paused (backpressure).
    #: With ``adaptive_concurrency`` the number running adapts between ``min_in_flight`` and this
    #: to the judge's latency and throttling (AIMD, nexagauge/online/concurrency.py)
    max_in_flight: int = Field(default=128, ge=1)
    min_in_flight: int = Field(default=8, ge=1)
    adaptive_concurrency: bool = True
    trace_grace_s: float = Field(default=2.0, ge=0)
    #: how much longer than ``trace_grace_s`` a trace waits for content that comes in log records
    #: (an LLM span without output, e.g. openai-v2's default and "events" modes: logs travel in
    #: other batches than spans); handed on without it, it is counted as ``content_missing``
    log_content_wait_s: float = Field(default=5.0, ge=0)
    trace_inactivity_s: float = Field(default=30.0, gt=0)
    max_buffered_traces: int = Field(default=10_000, ge=1)
    max_buffered_spans: int = Field(default=200_000, ge=1)
    #: run the re-key stage (off when the producer partitions by trace id, e.g. the official
    #: collector's Kafka exporter with ``partition_traces_by_id: true``)
    rekey: bool = True
    #: also consume the logs topic (content events of the official OpenAI instrumentation)
    consume_logs: bool = True
    drain_timeout_s: float = Field(default=20.0, ge=0)
    evaluate_spans: Literal["auto", "root", "llm", "all"] = "auto"
    commit_interval_s: float = Field(default=1.0, gt=0)
    #: emission attempts (with exponential backoff) before the evaluation is dead-lettered
    emit_attempts: int = Field(default=3, ge=1)
    #: conversation stage (incremental conversation_relevance, docs/online.md "Conversations"):
    #: on when the node set can include conversation_relevance; conversations kept (LRU);
    #: how long a turn waits for earlier turns before it is judged; turns queued before pausing
    conversations: bool = True
    conversation_states: int = Field(default=10_000, ge=1)
    conversation_reorder_s: float = Field(default=2.0, ge=0)
    conversation_max_pending: int = Field(default=2_000, ge=1)
    #: drop at decode time the spans of traces no rule can sample (by trace or conversation id);
    #: a trace that later shows an error span or matches an ``always`` rule is assembled from
    #: that span on (its earlier spans are gone). Off: every trace is assembled in full.
    early_discard: bool = True
    #: judge circuit breaker (docs/online.md "Judge outages"): opens when ``failure_ratio`` of the
    #: last ``window`` judge requests failed transiently (5xx, 429, timeouts); then consumption
    #: pauses and the judge is probed after ``cooldown_s`` (doubling up to ``max_cooldown_s``)
    judge_breaker: bool = True
    judge_breaker_window: int = Field(default=20, ge=1)
    judge_breaker_failure_ratio: float = Field(default=0.8, gt=0.0, le=1.0)
    judge_breaker_cooldown_s: float = Field(default=1.0, gt=0)
    judge_breaker_max_cooldown_s: float = Field(default=30.0, gt=0)
    #: largest case (JSON bytes) a dead letter carries for ``nexagauge dlq replay``; a larger one
    #: is dead-lettered without it (ids and errors only, not replayable)
    dlq_max_case_bytes: int = Field(default=1024 * 1024, ge=0)
    #: judge instructions written in a span (geval criteria/steps, redteam rubrics): ``reject``
    #: (the span's case is invalid, with the reason; spans select ``[rubrics]`` by name) or
    #: ``trust`` (every app that can write a span may instruct the judge)
    span_rubrics: Literal["reject", "trust"] = "reject"
    #: repeated WARNING/ERROR log lines of one kind pass at most once per this many seconds
    #: (a broker outage otherwise floods the logs); 0 disables the limit
    log_repeat_interval_s: float = Field(default=10.0, ge=0)
    #: scrub each case as it is extracted from a trace, before sampling, judge, cache key, dead
    #: letter, turns topic and changelog: secrets (the SDK's rules) and, with ``scrub_pii``,
    #: personal data; log lines follow ``scrub_pii`` too (nexagauge/schema/scrub.py, docs/online.md)
    scrub: bool = True
    scrub_pii: bool = False
    #: deterministic agent signals (failed tool calls, loops, undeclared tools, steps, tool
    #: latency; ``[agents]``) on every agent trace, sampled or not: they cost no judge call, but
    #: every trace is then assembled and extracted (decode-time discard keeps every span)
    agent_signals: bool = True


class AgentSettings(_Section):
    """Agent signals (docs/agents.md): what counts as a loop, and the bounded metric labels."""

    #: a loop: the same tool called with the same arguments at least this many times in one run
    loop_threshold: int = Field(default=3, ge=2)
    #: distinct tool names kept as the ``tool`` label of the agent series (the first seen); the
    #: rest are reported as "other"
    top_tools: int = Field(default=20, ge=1)
    #: distinct agent names kept as the ``agent`` label; the rest are reported as "other"
    top_agents: int = Field(default=20, ge=1)


LabelName = Literal["service", "span_name", "model"]


def _all_labels() -> list[LabelName]:
    return ["service", "span_name", "model"]


class EmitSettings(_Section):
    """Where scores go: OTLP evaluation spans and the Prometheus endpoint (see docs/emit.md)."""

    otlp_endpoint: str | None = None  # None: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT or the default
    otlp_protocol: Literal["grpc", "http/protobuf"] = "grpc"
    #: gRPC only: None = from the endpoint scheme / OTEL_EXPORTER_OTLP_INSECURE
    otlp_insecure: bool | None = None
    otlp_timeout_s: float | None = Field(default=None, gt=0)
    #: "otlp": export evaluation spans; "memory": keep them in process (tests); "none": no spans
    span_exporter: Literal["otlp", "memory", "none"] = "otlp"
    service_name: str = "nexagauge-evaluator"
    #: gen_ai.evaluation.result per metric: "logs" (log-based events in the evaluated span's
    #: context, the current GenAI convention), "span_events" (events of the evaluation span, for
    #: a trace backend without logs) or "none"; never both (each result would count twice)
    result_events: Literal["logs", "span_events", "none"] = "logs"
    #: bound of gen_ai.evaluation.explanation (judge reasoning / failure message); 0 = never
    max_explanation_chars: int = Field(default=1000, ge=0)
    include_explanation: bool = True
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    #: which of service/span_name/model are populated on score series (others are "")
    label_allowlist: list[LabelName] = Field(default_factory=_all_labels)
    #: distinct values kept per bounded label; later new values become "other"
    max_label_values: int = Field(default=200, ge=1)
    #: optional value allow-lists per label, e.g. {"model": ["gpt-4o"]}; others become "other"
    label_values: dict[str, list[str]] = Field(default_factory=dict)
    #: trace-id exemplars on the score and latency histograms (OpenMetrics scrapes)
    exemplars: bool = True
    #: in-memory dedupe window (keys of recent evaluations) for idempotent emission
    dedupe_window: int = Field(default=100_000, ge=1)
    #: on-disk dedupe journal so a restarted process on the same volume does not double count
    dedupe_journal: bool = True
    dedupe_journal_path: Path | None = None  # default: <cache.dir>/emit/dedupe-journal
    dedupe_fsync: bool = False  # fsync each journal append (survives power loss, slower)


class Settings(BaseSettings):
    """All evaluator settings. See the module docstring for precedence and env names.

    Example:
        >>> s = Settings(judge={"base_url": "http://localhost:8000/v1"}, sampling={"default_rate": 0.05})
        >>> (s.judge.configured, s.sampling.default_rate, s.online.rekey)
        (True, 0.05, True)
    """

    model_config = SettingsConfigDict(
        env_prefix="NEXAGAUGE_",
        env_nested_delimiter="_",
        env_nested_max_split=1,
        extra="forbid",
        toml_file=None,
    )

    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    online: OnlineSettings = Field(default_factory=OnlineSettings)
    emit: EmitSettings = Field(default_factory=EmitSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    #: the evaluator's own judge rubrics (``[rubrics.geval.<name>]``, ``[rubrics.redteam.<name>]``),
    #: selected by name from records and spans (:mod:`nexagauge.schema.rubrics`)
    rubrics: RubricLibrary = Field(default_factory=RubricLibrary)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_path()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @model_validator(mode="after")
    def _openai_fallbacks(self) -> Settings:
        # Standard OpenAI variables are the last fallback before defaults.
        if self.judge.base_url is None and os.environ.get("OPENAI_BASE_URL"):
            self.judge.base_url = os.environ["OPENAI_BASE_URL"]
        if self.judge.api_key is None and os.environ.get("OPENAI_API_KEY"):
            self.judge.api_key = SecretStr(os.environ["OPENAI_API_KEY"])
        return self


_CONFIG_OVERRIDE: Path | None = None


def _config_path() -> Path | None:
    if _CONFIG_OVERRIDE is not None:
        return _CONFIG_OVERRIDE
    env = os.environ.get("NEXAGAUGE_CONFIG")
    if env:
        p = Path(env)
        if not p.is_file():
            raise FileNotFoundError(f"NEXAGAUGE_CONFIG points to {env!r}, which is not a file")
        return p
    p = Path("nexagauge.toml")
    return p if p.is_file() else None


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Build settings with the documented precedence; ``overrides`` are explicit arguments.

    Example:
        >>> load_settings(judge={"model": "gpt-4.1-mini"}).judge.model
        'gpt-4.1-mini'
    """
    global _CONFIG_OVERRIDE
    if config is not None and not Path(config).is_file():
        raise FileNotFoundError(f"config file {str(config)!r} does not exist")
    _CONFIG_OVERRIDE = Path(config) if config is not None else None
    try:
        return Settings(**overrides)
    finally:
        _CONFIG_OVERRIDE = None
