"""Every Prometheus metric name and label the evaluator exposes (the dashboards and alert rules in
``dashboards/`` are written against these; change them together).

Labels are bounded: ``service``, ``span_name``, ``model`` (allow-listed, capped, overflow -> "other"),
``metric`` (metric names of the graph), ``node``, ``reason``/``status``/``outcome`` (small enums).
Trace and session ids are never labels (they appear only as exemplars).
"""

from __future__ import annotations

PREFIX = "nexagauge"

# Scores -------------------------------------------------------------------------------------
#: histogram of metric scores in [0, 1]; labels: metric, service, span_name, model; trace-id exemplars
SCORE = f"{PREFIX}_score"
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: counter of judged claims; labels: metric (answer_relevancy|grounding), verdict (ACCEPTED|REJECTED), service, span_name, model
CLAIMS = f"{PREFIX}_claims_total"

# Pipeline -----------------------------------------------------------------------------------
SPANS_CONSUMED = f"{PREFIX}_spans_consumed_total"  # labels: topic
MESSAGES_CONSUMED = f"{PREFIX}_messages_consumed_total"  # labels: topic
TRACES_ASSEMBLED = (
    f"{PREFIX}_traces_assembled_total"  # labels: trigger (root_end|turn_end|inactivity|evicted)
)
TRACES_SAMPLED = f"{PREFIX}_traces_sampled_total"  # labels: rule
TRACES_NOT_SAMPLED = f"{PREFIX}_traces_not_sampled_total"
EVALUATIONS = f"{PREFIX}_evaluations_total"  # labels: status (ok|failed), service, span_name, model
#: labels: reason (a nexagauge.graph.skips.SkipReason code: rate_limit|budget_hour|not_eligible|
#: no_judge|...), node (the metric node a case did not get; "" for a whole evaluation)
SKIPPED = f"{PREFIX}_skipped_total"
EVALUATION_LATENCY = f"{PREFIX}_evaluation_latency_seconds"  # histogram, span end -> score emitted
LATE_SPANS = f"{PREFIX}_late_spans_total"
LATE_LOG_RECORDS = f"{PREFIX}_late_log_records_total"
EVICTED = f"{PREFIX}_evicted_traces_total"  # labels: reason (max_traces|max_spans)
BUFFER_TRACES = f"{PREFIX}_buffer_traces"  # gauge
BUFFER_SPANS = f"{PREFIX}_buffer_spans"  # gauge
CONSUMER_LAG = f"{PREFIX}_consumer_lag"  # gauge; labels: topic, partition
DLQ = f"{PREFIX}_dlq_messages_total"  # labels: reason
IN_FLIGHT = f"{PREFIX}_evaluations_in_flight"  # gauge
#: gauge: evaluations allowed to run at once now (AIMD between online.min_ and max_in_flight)
CONCURRENCY_LIMIT = f"{PREFIX}_concurrency_limit"
PAUSED_PARTITIONS = f"{PREFIX}_paused_partitions"  # gauge (backpressure)
LAST_EVALUATION = f"{PREFIX}_last_evaluation_timestamp_seconds"  # gauge (unix time)
#: counter of redelivered evaluations not counted again (emission idempotency); no labels
DUPLICATE_EVALUATIONS = f"{PREFIX}_duplicate_evaluations_total"
#: counter of evaluation spans handed to the OTLP exporter; labels: outcome (exported|failed)
EVALUATION_SPANS = f"{PREFIX}_evaluation_spans_total"
#: counter of gen_ai.evaluation.result log records handed to the OTLP log exporter; labels:
#: outcome (exported|failed)
EVALUATION_EVENTS = f"{PREFIX}_evaluation_events_total"

# Judge --------------------------------------------------------------------------------------
JUDGE_CALLS = f"{PREFIX}_judge_calls_total"  # labels: node, model, outcome (ok|error|cached)
JUDGE_TOKENS = f"{PREFIX}_judge_tokens_total"  # labels: node, model, direction (input|output)
JUDGE_COST = f"{PREFIX}_judge_cost_usd_total"  # labels: node, model
JUDGE_LATENCY = f"{PREFIX}_judge_latency_seconds"  # histogram; labels: node, model
BUDGET_REMAINING = f"{PREFIX}_budget_remaining_usd"  # gauge; labels: window (hour|day)
BUDGET_EXHAUSTED = f"{PREFIX}_budget_exhausted"  # gauge 0/1; labels: window
#: gauge: the judge circuit breaker (0 closed, 1 half-open: probing, 2 open: consumption paused)
JUDGE_BREAKER_STATE = f"{PREFIX}_judge_breaker_state"
JUDGE_BREAKER_OPENINGS = f"{PREFIX}_judge_breaker_openings_total"  # counter

# Broker -------------------------------------------------------------------------------------
#: gauge 0/1: the last broker health check (metadata request) succeeded
BROKER_UP = f"{PREFIX}_broker_up"
#: gauge: seconds since the broker last answered (computed at scrape time)
BROKER_CONTACT_AGE = f"{PREFIX}_broker_contact_age_seconds"
#: counter of the evaluator's own topics re-created after they vanished; labels: topic
TOPICS_RECREATED = f"{PREFIX}_topics_recreated_total"

# Agents (deterministic signals of every agent run, nexagauge.nodes.agent_signals) -------------
#: counter of agent runs; labels: agent, definitions (recorded|not_recorded: whether the run's
#: tool definitions were in the trace, i.e. whether undeclared tools could be checked)
AGENT_RUNS = f"{PREFIX}_agent_runs_total"
#: counter of tool calls; labels: agent, tool, outcome (ok|failed)
AGENT_TOOL_CALLS = f"{PREFIX}_agent_tool_calls_total"
#: counter of loops (one per tool + arguments repeated >= agents.loop_threshold times in a run);
#: labels: agent, tool
AGENT_LOOPS = f"{PREFIX}_agent_loops_total"
#: counter of calls to tools not in the run's declared definitions; labels: agent, tool
AGENT_UNDECLARED_TOOL_CALLS = f"{PREFIX}_agent_undeclared_tool_calls_total"
#: histogram of steps per run; labels: agent, kind (llm|tool)
AGENT_STEPS = f"{PREFIX}_agent_steps"
AGENT_STEPS_BUCKETS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0)
#: histogram of tool call durations (seconds); labels: agent, tool
AGENT_TOOL_LATENCY = f"{PREFIX}_agent_tool_latency_seconds"
AGENT_TOOL_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: histogram of the grounding score of answers whose context holds a tool result; labels: agent
AGENT_GROUNDING = f"{PREFIX}_agent_grounding_score"
