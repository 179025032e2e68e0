"""Every span attribute, event and value name nexa-gauge writes or reads: the single source.

Why one module: the SDK writes these names, the online evaluator reads them (from our SDK and from
third-party instrumentations) and the emitter writes evaluation spans with them. A name typed twice
drifts; a name imported from here cannot. Never hard-code an attribute name anywhere else.

This module is stdlib-only (it is imported by ``import nexagauge`` and by the evaluator alike).

Layout (``docs/attributes.md`` is generated from this file; ``tests/sdk/test_docs.py`` fails when the
two disagree):

* ``# == Section: <title>`` comment lines open a section of the docs page.
* ``#:`` comment lines directly above a constant document it (one or more lines).
* Constants whose names end with ``_PREFIX`` are key prefixes (``prefix + suffix``); those ending
  with ``_TEMPLATE`` are ``str.format`` templates (``{i}`` = zero-based index).

Example::

    from nexagauge.sdk import conventions as C
    span.set_attribute(C.GEN_AI_CONVERSATION_ID, "session-42")
"""

from __future__ import annotations

from typing import Final

# == Section: (a) OpenTelemetry GenAI semantic conventions (written and read)
#: JSON array of chat messages sent to the model, in the parts layout:
#: ``[{"role": "user", "parts": [{"type": "text", "content": "..."}]}]``.
#: The SDK writes the traced call's input as one ``user`` message.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
#: JSON array of output messages in the parts layout:
#: ``[{"role": "assistant", "parts": [{"type": "text", "content": "..."}], "finish_reason": "stop"}]``.
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
#: JSON array of system-instruction parts: ``[{"type": "text", "content": "..."}]``.
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
#: Conversation (session) id; set from ``nexagauge.session(session_id=...)``.
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
#: JSON array of retrieved documents: ``[{"id": "doc-1", "score": 0.9, "content": "..."}]``
#: (``content`` is what the grounding metric evaluates against; ``metadata`` optional).
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
#: The query text of a retrieval operation.
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
#: Operation name (see the ``OPERATION_*`` values below); the SDK default is ``invoke_workflow``.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
#: Model name requested.
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
#: Model name that actually answered.
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
#: Id of the model response.
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
#: String array of finish reasons, one per choice.
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
#: Provider name (``openai``, ``anthropic``, ...).
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
#: Deprecated predecessor of ``gen_ai.provider.name`` (read only, for older instrumentations).
GEN_AI_SYSTEM: Final = "gen_ai.system"
#: Whether the request was streamed (bool).
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
#: Seconds from the call start to the first streamed chunk (double). The SDK writes it on streams.
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
#: Agent name (for ``invoke_agent`` spans).
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
#: Workflow name (for ``invoke_workflow`` spans).
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
#: Tool name (for ``execute_tool`` spans).
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
#: Id of one tool call (the model's ``tool_call`` id; on ``execute_tool`` spans).
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
#: Arguments of one tool call (JSON text; on ``execute_tool`` spans).
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
#: Result of one tool call (opt-in in the conventions; absent when the call failed).
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
#: JSON array of the tool definitions available to an agent or model
#: (``[{"type": "function", "name": ...}]`` or the OpenAI ``{"function": {"name": ...}}`` shape).
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
#: Tool type (``function``, ``extension``, ``datastore``).
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
#: Prefix of all token-usage attributes.
GEN_AI_USAGE_PREFIX: Final = "gen_ai.usage."
#: Input (prompt) tokens used (int).
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
#: Output (completion) tokens used (int).
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
#: Input tokens served from the provider cache (int).
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
#: Deprecated name of input tokens (read only).
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
#: Deprecated name of output tokens (read only).
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
#: Event carrying one evaluation result, attached to the evaluated span (or an evaluation span).
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
#: Name of the evaluation metric (``answer_relevancy``, ``grounding``, ...).
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
#: Numeric score of the evaluation (double, in [0, 1] for nexa-gauge metrics).
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
#: Human-readable label of the score (``pass``/``fail``, ``relevant``, ...).
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
#: Free-text explanation of the score (the judge's reasoning, when requested).
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
#: Error class when an evaluation (or the traced call) failed (OpenTelemetry general convention).
ERROR_TYPE: Final = "error.type"
#: OpenTelemetry exception event recorded on a span whose call raised.
EXCEPTION_EVENT: Final = "exception"
#: Exception event attribute: exception class.
EXCEPTION_TYPE: Final = "exception.type"
#: Exception event attribute: exception message (scrubbed).
EXCEPTION_MESSAGE: Final = "exception.message"
#: Exception event attribute: formatted traceback (scrubbed).
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
#: Exception event attribute: true when the exception left the span's scope.
EXCEPTION_ESCAPED: Final = "exception.escaped"

# == Section: (a) GenAI values: operation names, roles, part types
#: ``gen_ai.operation.name`` value: chat completion.
OPERATION_CHAT: Final = "chat"
#: ``gen_ai.operation.name`` value: legacy text completion.
OPERATION_TEXT_COMPLETION: Final = "text_completion"
#: ``gen_ai.operation.name`` value: multimodal content generation.
OPERATION_GENERATE_CONTENT: Final = "generate_content"
#: ``gen_ai.operation.name`` value: embeddings.
OPERATION_EMBEDDINGS: Final = "embeddings"
#: ``gen_ai.operation.name`` value: retrieval (written by ``nexagauge.retrieval``).
OPERATION_RETRIEVAL: Final = "retrieval"
#: ``gen_ai.operation.name`` value: agent invocation.
OPERATION_INVOKE_AGENT: Final = "invoke_agent"
#: ``gen_ai.operation.name`` value: tool execution.
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
#: ``gen_ai.operation.name`` value: workflow invocation (default of ``@nexagauge.trace``).
OPERATION_INVOKE_WORKFLOW: Final = "invoke_workflow"
#: Message role value: system.
ROLE_SYSTEM: Final = "system"
#: Message role value: user.
ROLE_USER: Final = "user"
#: Message role value: assistant.
ROLE_ASSISTANT: Final = "assistant"
#: Message role value: tool.
ROLE_TOOL: Final = "tool"
#: Message key: role of the message.
MSG_ROLE: Final = "role"
#: Message key: list of parts of the message.
MSG_PARTS: Final = "parts"
#: Output message key: finish reason.
MSG_FINISH_REASON: Final = "finish_reason"
#: Part key: part type.
PART_TYPE: Final = "type"
#: Part key: the text content of a ``text`` part.
PART_CONTENT: Final = "content"
#: Part type value: text.
PART_TYPE_TEXT: Final = "text"
#: Part type value: a tool call the model asked for (``id``, ``name``, ``arguments``).
PART_TYPE_TOOL_CALL: Final = "tool_call"
#: Part type value: the result of a tool call sent back to the model (``id``, ``response``).
PART_TYPE_TOOL_CALL_RESPONSE: Final = "tool_call_response"
#: Tool-call part key: call id.
PART_TOOL_CALL_ID: Final = "id"
#: Tool-call part key: tool name.
PART_TOOL_NAME: Final = "name"
#: Tool-call part key: arguments (an object or JSON text).
PART_TOOL_ARGUMENTS: Final = "arguments"
#: Tool-call-response part key: the result.
PART_TOOL_RESPONSE: Final = "response"
#: Finish reason value written for a completed call.
FINISH_REASON_STOP: Final = "stop"
#: Finish reason value written when the traced call raised.
FINISH_REASON_ERROR: Final = "error"
#: Finish reason value (nexa-gauge) written when the consumer abandoned a stream early.
FINISH_REASON_ABANDONED: Final = "abandoned"
#: Retrieval document key: id.
DOC_ID: Final = "id"
#: Retrieval document key: relevance score.
DOC_SCORE: Final = "score"
#: Retrieval document key: text content.
DOC_CONTENT: Final = "content"
#: Retrieval document key: metadata object.
DOC_METADATA: Final = "metadata"

# == Section: (b) nexa-gauge namespace written by the SDK
#: Prefix of every nexa-gauge attribute.
NG_PREFIX: Final = "nexagauge."
#: Version of the nexa-gauge SDK that wrote the span (also marks spans made by ``@nexagauge.trace``).
NG_SDK_VERSION: Final = "nexagauge.sdk.version"
#: End-user id; set from ``nexagauge.session(user_id=...)``.
NG_USER_ID: Final = "nexagauge.user.id"
#: Bool ``true`` on the span that ends a conversation turn (``@trace(turn_end=True)``); the online
#: evaluator assembles and evaluates the trace when it sees it instead of waiting for inactivity.
NG_TURN_END: Final = "nexagauge.turn.end"
#: Prefix of the per-call evaluation knob blocks (JSON objects of the data schema).
NG_EVAL_PREFIX: Final = "nexagauge.eval."
#: JSON ``relevance`` block: ``{"scoring_mode": "scale_1_5", "include_reasoning": true}``.
NG_EVAL_RELEVANCE: Final = "nexagauge.eval.relevance"
#: JSON ``grounding`` block (same knobs as relevance).
NG_EVAL_GROUNDING: Final = "nexagauge.eval.grounding"
#: JSON ``geval`` block: knobs plus ``metrics`` naming rubrics of the evaluator's ``[rubrics.geval]``.
NG_EVAL_GEVAL: Final = "nexagauge.eval.geval"
#: JSON ``redteam`` block: knobs plus ``metrics`` naming rubrics of the evaluator's ``[rubrics.redteam]``.
NG_EVAL_REDTEAM: Final = "nexagauge.eval.redteam"
#: JSON ``task_completion`` block (agents; off by default): ``{"enabled": true}`` turns it on.
NG_EVAL_TASK_COMPLETION: Final = "nexagauge.eval.task_completion"
#: Bool: the traced callable returned a stream (generator / async generator).
NG_STREAM: Final = "nexagauge.stream"
#: Number of chunks the stream yielded before it ended or was abandoned (int).
NG_STREAM_CHUNK_COUNT: Final = "nexagauge.stream.chunk_count"
#: Bool ``true`` when the consumer stopped iterating before the stream was exhausted.
NG_STREAM_ABANDONED: Final = "nexagauge.stream.abandoned"
#: String array of attribute names whose value was truncated to the size limit.
NG_TRUNCATED: Final = "nexagauge.truncated"
#: Prefix of ``nexagauge.original_length.<attribute>`` (int): length in characters before truncation.
NG_ORIGINAL_LENGTH_PREFIX: Final = "nexagauge.original_length."
#: String array of ``<attribute>:<rule>`` for every scrubbing rule that changed a value
#: (``rule`` is a default pattern name such as ``api_key``, or ``hook`` for the user hook).
NG_SCRUBBED: Final = "nexagauge.scrubbed"
#: Marker text appended to a truncated value; ``{original}`` = original length in characters.
TRUNCATION_MARKER_TEMPLATE: Final = "...[truncated by nexagauge, {original} chars]"
#: Replacement text of a scrubbed secret; ``{rule}`` = the rule that matched.
SCRUBBED_REPLACEMENT_TEMPLATE: Final = "[scrubbed:{rule}]"

# == Section: (b) nexa-gauge namespace written by the evaluator on evaluation spans
#: Name of the span the evaluator emits per evaluated trace/span.
NG_EVALUATION_SPAN_NAME: Final = "nexagauge.evaluation"
#: Prefix of every evaluation attribute.
NG_EVALUATION_PREFIX: Final = "nexagauge.evaluation."
#: Prefix of per-metric scores: ``nexagauge.evaluation.score.<metric>`` (double in [0, 1]).
NG_EVALUATION_SCORE_PREFIX: Final = "nexagauge.evaluation.score."
#: Prefix of per-metric errors: ``nexagauge.evaluation.error.<metric>`` (why the score is absent).
NG_EVALUATION_ERROR_PREFIX: Final = "nexagauge.evaluation.error."
#: Prefix of per-metric-node skips: ``nexagauge.evaluation.skipped.<node>`` = the bounded reason
#: code (``not_eligible``, ``no_judge``, ``disabled``...; ``nexagauge.graph.skips.SkipReason``).
NG_EVALUATION_SKIPPED_PREFIX: Final = "nexagauge.evaluation.skipped."
#: Prefix of per-metric-node skip texts: ``nexagauge.evaluation.skip_reason.<node>`` = why, for
#: people (``not eligible: no context``).
NG_EVALUATION_SKIP_REASON_PREFIX: Final = "nexagauge.evaluation.skip_reason."
#: Hex trace id of the evaluated application trace.
NG_EVALUATION_TRACE_ID: Final = "nexagauge.evaluation.trace_id"
#: Hex span id of the evaluated application span.
NG_EVALUATION_SPAN_ID: Final = "nexagauge.evaluation.span_id"
#: Case id of the evaluated case (derived from trace/span ids).
NG_EVALUATION_CASE_ID: Final = "nexagauge.evaluation.case_id"
#: Stable fingerprint (hash) of the evaluator configuration that produced the scores.
NG_EVALUATION_CONFIG_FINGERPRINT: Final = "nexagauge.evaluation.config_fingerprint"
#: Judge model used by the evaluation.
NG_EVALUATION_JUDGE_MODEL: Final = "nexagauge.evaluation.judge_model"
#: Judge cost of the evaluation in USD (double): every judge call made for it, counted once.
NG_EVALUATION_COST_USD: Final = "nexagauge.evaluation.cost_usd"
#: Judge input (prompt) tokens of the evaluation (int): every judge call made for it, once.
NG_EVALUATION_INPUT_TOKENS: Final = "nexagauge.evaluation.input_tokens"
#: Judge output (completion) tokens of the evaluation (int): every judge call made for it, once.
NG_EVALUATION_OUTPUT_TOKENS: Final = "nexagauge.evaluation.output_tokens"
#: String array (on a grounding ``gen_ai.evaluation.result``): the context sources that
#: supported a claim (``tool:lookup_order#call_1``, ``doc:kb-7``), de-duplicated.
NG_EVALUATION_SUPPORTED_BY: Final = "nexagauge.evaluation.supported_by"
#: String array (on a grounding ``gen_ai.evaluation.result``): the context sources that
#: contradicted a claim, de-duplicated.
NG_EVALUATION_CONTRADICTED_BY: Final = "nexagauge.evaluation.contradicted_by"
#: Evaluation status: ``ok`` or ``failed``.
NG_EVALUATION_STATUS: Final = "nexagauge.evaluation.status"
#: Agent signals on the evaluation span (nexagauge.nodes.agent_signals): prefix of
#: ``tool_calls``, ``llm_steps``, ``failed_tool_calls``, ``loops``, ``undeclared_tool_calls``
#: and ``tool_definitions`` (``recorded`` / ``not_recorded``).
NG_EVALUATION_AGENT_PREFIX: Final = "nexagauge.evaluation.agent."
#: ``gen_ai.evaluation.name`` of an agent signal record (one per signal and agent run, in the
#: agent span's context): the run's tool calls (score value = how many).
AGENT_SIGNAL_TOOL_CALLS: Final = "agent.tool_calls"
#: Agent signal record: the run's LLM calls (score value = how many).
AGENT_SIGNAL_LLM_STEPS: Final = "agent.llm_steps"
#: Agent signal record: failed tool calls (score value = how many; label ``pass``/``fail``).
AGENT_SIGNAL_TOOL_FAILURES: Final = "agent.tool_failures"
#: Agent signal record: loops, a tool called with the same arguments >= the loop threshold
#: times (score value = how many loops; label ``pass``/``fail``).
AGENT_SIGNAL_LOOPS: Final = "agent.loops"
#: Agent signal record: calls to tools not in the declared definitions (score value = how
#: many; label ``pass``/``fail``, or ``not_recorded`` without a score when no definitions were
#: recorded).
AGENT_SIGNAL_UNDECLARED_TOOLS: Final = "agent.undeclared_tools"
#: Agent signal record: the slowest tool call (score value = its seconds).
AGENT_SIGNAL_TOOL_LATENCY: Final = "agent.tool_latency"
#: ``gen_ai.evaluation.score.label`` of ``agent.undeclared_tools`` when the trace recorded no
#: tool definitions (undeclared tools cannot be told apart: neither pass nor fail).
AGENT_DEFINITIONS_NOT_RECORDED: Final = "not_recorded"
#: Tool description (``execute_tool`` spans written by ``@nexagauge.tool``).
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"

# == Section: (c) Third-party instrumentations read by the online evaluator
#: OpenInference: input of the span (text or JSON, see ``input.mime_type``).
OI_INPUT_VALUE: Final = "input.value"
#: OpenInference: mime type of ``input.value`` (``text/plain`` or ``application/json``).
OI_INPUT_MIME_TYPE: Final = "input.mime_type"
#: OpenInference: output of the span.
OI_OUTPUT_VALUE: Final = "output.value"
#: OpenInference: mime type of ``output.value``.
OI_OUTPUT_MIME_TYPE: Final = "output.mime_type"
#: OpenInference: span kind (``LLM``, ``CHAIN``, ``RETRIEVER``, ``AGENT``, ``TOOL``, ...).
OI_SPAN_KIND: Final = "openinference.span.kind"
#: OpenInference span kind value: LLM call.
OI_SPAN_KIND_LLM: Final = "LLM"
#: OpenInference span kind value: chain.
OI_SPAN_KIND_CHAIN: Final = "CHAIN"
#: OpenInference span kind value: agent.
OI_SPAN_KIND_AGENT: Final = "AGENT"
#: OpenInference span kind value: tool execution.
OI_SPAN_KIND_TOOL: Final = "TOOL"
#: OpenInference span kind value: retriever.
OI_SPAN_KIND_RETRIEVER: Final = "RETRIEVER"
#: OpenInference (also OpenTelemetry general ``session.id``): session id.
OI_SESSION_ID: Final = "session.id"
#: OpenInference (also OpenTelemetry general ``user.id``): user id.
OI_USER_ID: Final = "user.id"
#: OpenInference: model name.
OI_LLM_MODEL_NAME: Final = "llm.model_name"
#: OpenInference: provider.
OI_LLM_PROVIDER: Final = "llm.provider"
#: OpenInference: ``llm.input_messages.{i}.`` + message suffix.
OI_LLM_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
#: OpenInference: ``llm.output_messages.{i}.`` + message suffix.
OI_LLM_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
#: OpenInference message suffix: role.
OI_MESSAGE_ROLE: Final = "message.role"
#: OpenInference message suffix: text content.
OI_MESSAGE_CONTENT: Final = "message.content"
#: OpenInference message suffix: ``message.contents.{j}.`` + content suffix (multi-part content).
OI_MESSAGE_CONTENTS_PREFIX: Final = "message.contents."
#: OpenInference content suffix: text of one part.
OI_MESSAGE_CONTENT_TEXT: Final = "message_content.text"
#: OpenInference content suffix: type of one part (``text``, ``image``).
OI_MESSAGE_CONTENT_TYPE: Final = "message_content.type"
#: OpenInference: ``retrieval.documents.{i}.`` + document suffix.
OI_RETRIEVAL_DOCUMENTS_PREFIX: Final = "retrieval.documents."
#: OpenInference document suffix: content.
OI_DOCUMENT_CONTENT: Final = "document.content"
#: OpenInference document suffix: id.
OI_DOCUMENT_ID: Final = "document.id"
#: OpenInference document suffix: score.
OI_DOCUMENT_SCORE: Final = "document.score"
#: OpenInference document suffix: metadata (JSON).
OI_DOCUMENT_METADATA: Final = "document.metadata"
#: OpenInference message suffix: ``message.tool_calls.{j}.`` + tool-call suffix.
OI_MESSAGE_TOOL_CALLS_PREFIX: Final = "message.tool_calls."
#: OpenInference message suffix: id of the call a ``tool`` message answers.
OI_MESSAGE_TOOL_CALL_ID: Final = "message.tool_call_id"
#: OpenInference tool-call suffix: call id.
OI_TOOL_CALL_ID: Final = "tool_call.id"
#: OpenInference tool-call suffix: tool name.
OI_TOOL_CALL_FUNCTION_NAME: Final = "tool_call.function.name"
#: OpenInference tool-call suffix: arguments (JSON text).
OI_TOOL_CALL_FUNCTION_ARGUMENTS: Final = "tool_call.function.arguments"
#: OpenInference: ``llm.tools.{i}.`` + ``tool.json_schema`` (tool definitions given to the model).
OI_LLM_TOOLS_PREFIX: Final = "llm.tools."
#: OpenInference tool-definition suffix: the JSON schema of one tool.
OI_TOOL_JSON_SCHEMA: Final = "tool.json_schema"
#: OpenInference: agent name (AGENT spans, e.g. of the ``openai-agents`` instrumentor).
OI_AGENT_NAME: Final = "agent.name"
#: OpenInference (TOOL spans): tool name.
OI_TOOL_NAME: Final = "tool.name"
#: OpenInference (TOOL spans): parameters of the tool (JSON).
OI_TOOL_PARAMETERS: Final = "tool.parameters"
#: OpenInference: prompt token count.
OI_LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
#: OpenInference: completion token count.
OI_LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
#: OpenLLMetry (Traceloop): JSON input of a workflow/task span.
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
#: OpenLLMetry (Traceloop): JSON output of a workflow/task span.
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
#: OpenLLMetry (Traceloop): entity name.
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
#: OpenLLMetry (Traceloop): span kind (``workflow``, ``task``, ``agent``, ``tool``).
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
#: OpenLLMetry (Traceloop) span kind value: agent.
TRACELOOP_SPAN_KIND_AGENT: Final = "agent"
#: OpenLLMetry (Traceloop) span kind value: tool.
TRACELOOP_SPAN_KIND_TOOL: Final = "tool"
#: OpenLLMetry (Traceloop): workflow name.
TRACELOOP_WORKFLOW_NAME: Final = "traceloop.workflow.name"
#: OpenLLMetry (Traceloop): ``traceloop.association.properties.<key>`` (e.g. ``session_id``, ``user_id``).
TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX: Final = "traceloop.association.properties."
#: OpenLLMetry: event recorded per vector-DB query result (retrieved document).
DB_QUERY_RESULT_EVENT: Final = "db.query.result"
#: OpenLLMetry ``db.query.result`` event attribute: document id.
DB_QUERY_RESULT_ID: Final = "db.query.result.id"
#: OpenLLMetry ``db.query.result`` event attribute: document text.
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
#: OpenLLMetry ``db.query.result`` event attribute: distance / score.
DB_QUERY_RESULT_DISTANCE: Final = "db.query.result.distance"
#: OpenLLMetry ``db.query.result`` event attribute: metadata (JSON).
DB_QUERY_RESULT_METADATA: Final = "db.query.result.metadata"
#: Legacy GenAI (OpenLLMetry): ``gen_ai.prompt.{i}.role`` / ``.content``.
LEGACY_GEN_AI_PROMPT_PREFIX: Final = "gen_ai.prompt."
#: Legacy GenAI (OpenLLMetry): ``gen_ai.completion.{i}.role`` / ``.content`` / ``.finish_reason``.
LEGACY_GEN_AI_COMPLETION_PREFIX: Final = "gen_ai.completion."
#: Legacy GenAI suffix: role.
LEGACY_ROLE_SUFFIX: Final = "role"
#: Legacy GenAI suffix: content.
LEGACY_CONTENT_SUFFIX: Final = "content"
#: Legacy GenAI suffix: ``tool_calls.{j}.`` + ``id`` / ``name`` / ``arguments`` (tool calls of a
#: completion, or of an assistant message in the prompt).
LEGACY_TOOL_CALLS_SUFFIX_PREFIX: Final = "tool_calls."
#: Legacy GenAI suffix: id of the call a ``tool`` prompt message answers.
LEGACY_TOOL_CALL_ID_SUFFIX: Final = "tool_call_id"
#: Official OpenAI instrumentation log event: user message (body ``{"content": ...}``).
EVENT_GEN_AI_USER_MESSAGE: Final = "gen_ai.user.message"
#: Official OpenAI instrumentation log event: system message.
EVENT_GEN_AI_SYSTEM_MESSAGE: Final = "gen_ai.system.message"
#: Official OpenAI instrumentation log event: assistant message.
EVENT_GEN_AI_ASSISTANT_MESSAGE: Final = "gen_ai.assistant.message"
#: Official OpenAI instrumentation log event: tool message.
EVENT_GEN_AI_TOOL_MESSAGE: Final = "gen_ai.tool.message"
#: Official OpenAI instrumentation log event: one model choice (body ``{"message": {...}}``).
EVENT_GEN_AI_CHOICE: Final = "gen_ai.choice"
#: Newer GenAI event carrying ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as attributes.
EVENT_GEN_AI_CLIENT_INFERENCE_OPERATION_DETAILS: Final = "gen_ai.client.inference.operation.details"
#: Log record attribute naming the event (OpenTelemetry events API).
EVENT_NAME: Final = "event.name"
