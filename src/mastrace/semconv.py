"""Every span name, attribute key and metric name mastrace writes, in one place.

Three families live side by side on the same spans:

- `massgen.*`: the keys MassGen's Logfire tracing uses, so existing queries keep working;
- `gen_ai.*`, `mcp.*`, `jsonrpc.*`, `server.*`, `network.*`, `error.type`: the OpenTelemetry
  semantic conventions, the version pinned in `SEMCONV_VERSION` (the GenAI and MCP conventions
  of that release, read from its text and YAML model);
- `mastrace.*` and `logfire.*`: this SDK's own keys, and the ones Logfire reads to render a span.
  A key the conventions do not define never takes a `gen_ai.*` or `mcp.*` name.

Span names are the exception, on purpose: LLM calls keep MassGen's `llm.<provider>.stream` /
`llm.<provider>.chat` (the conventions suggest `chat <model>`), agent rounds `agent.<id>.round_<n>`,
MCP calls `mcp.<server>.<tool>`, so that the SQL of MassGen's analysis guide keeps working; viewers
that follow the conventions read the attributes (`gen_ai.operation.name`, ...), not the name.
"""

from __future__ import annotations

from typing import Final

SEMCONV_VERSION: Final = "1.41.0"
"""The OpenTelemetry semantic conventions release whose GenAI and MCP conventions mastrace follows
(the last release of `open-telemetry/semantic-conventions` that carries them; they continue in
`semantic-conventions-genai`). Spans are written in its "latest experimental" GenAI form, what
instrumentations emit under `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`."""
SEMCONV_SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
SEMCONV_OPT_IN_ENV: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
SEMCONV_OPT_IN_GEN_AI_LATEST: Final = "gen_ai_latest_experimental"


def latest_conventions() -> bool:
    """Whether `OTEL_SEMCONV_STABILITY_OPT_IN` (a comma-separated list) holds
    `gen_ai_latest_experimental`: then the development GenAI conventions that followed 1.41 are
    written (cost attributes, `cache_write` instead of `cache_creation`); otherwise 1.41's.

    The variable is read once, at the first call, and again at the first call after each
    `mastrace.configure()` (which calls `reread_conventions()`): not on every LLM call and round."""
    latest = _latest
    if latest is None:
        latest = _read_opt_in()
    return latest


def reread_conventions() -> None:
    """Make the next `latest_conventions()` read the environment again (`configure()` calls it)."""
    global _latest
    _latest = None


def _read_opt_in() -> bool:
    global _latest
    import os

    value = os.environ.get(SEMCONV_OPT_IN_ENV) or ""
    latest = SEMCONV_OPT_IN_GEN_AI_LATEST in (part.strip() for part in value.split(","))
    _latest = latest
    return latest


_latest: bool | None = None


# --- span names (templates are filled with str.format) ------------------------------------------
SPAN_COORDINATION_SESSION: Final = "coordination.session"
SPAN_AGENT_ROUND: Final = "agent.{agent_id}.round_{round}"
SPAN_AGENT_PRESENTATION: Final = "agent.{agent_id}.presentation"
SPAN_LLM_STREAM: Final = "llm.{provider}.stream"
SPAN_LLM_CHAT: Final = "llm.{provider}.chat"
SPAN_MCP_TOOL: Final = "mcp.{server}.{tool}"
SPAN_TOOL_EXECUTION: Final = "Tool execution: {name}"
SPAN_COORDINATION_EVENT: Final = "Coordination event: {event_type}"
SPAN_AGENT_ANSWER: Final = "Agent answer: {label}"
SPAN_AGENT_VOTE: Final = "Agent vote: {voter} -> {target}"
SPAN_WINNER_SELECTED: Final = "Winner selected: {label}"
SPAN_FINAL_ANSWER: Final = "Final answer from {agent_id}"
SPAN_AGENT_PREFIX: Final = "agent."
"""Every agent round and presentation span name starts with this (for `LIKE 'agent.%'`)."""
SPAN_LLM_PREFIX: Final = "llm."
SPAN_MCP_PREFIX: Final = "mcp."

# --- massgen.* (seed-compatible keys) -----------------------------------------------------------
MASSGEN_AGENT_ID: Final = "massgen.agent_id"
MASSGEN_ITERATION: Final = "massgen.iteration"
MASSGEN_ROUND: Final = "massgen.round"
MASSGEN_ROUND_TYPE: Final = "massgen.round_type"
MASSGEN_BACKEND: Final = "massgen.backend"
MASSGEN_NUM_CONTEXT_ANSWERS: Final = "massgen.num_context_answers"
MASSGEN_IS_WINNER: Final = "massgen.is_winner"
MASSGEN_OUTCOME: Final = "massgen.outcome"
MASSGEN_VOTED_FOR: Final = "massgen.voted_for"
MASSGEN_VOTED_FOR_LABEL: Final = "massgen.voted_for_label"
MASSGEN_ANSWER_LABEL: Final = "massgen.answer_label"
MASSGEN_ERROR_MESSAGE: Final = "massgen.error_message"
MASSGEN_USAGE_INPUT: Final = "massgen.usage.input"
MASSGEN_USAGE_OUTPUT: Final = "massgen.usage.output"
MASSGEN_USAGE_REASONING: Final = "massgen.usage.reasoning"
MASSGEN_USAGE_CACHED_INPUT: Final = "massgen.usage.cached_input"
MASSGEN_USAGE_COST: Final = "massgen.usage.cost"
MASSGEN_TASK: Final = "massgen.task"
MASSGEN_AGENT_IDS: Final = "massgen.agent_ids"
MASSGEN_NUM_AGENTS: Final = "massgen.num_agents"
MASSGEN_EVENT_TYPE: Final = "massgen.event_type"
MASSGEN_VOTE_REASON: Final = "massgen.vote.reason"
MASSGEN_WINNER: Final = "massgen.winner"

ROUND_TYPE_INITIAL_ANSWER: Final = "initial_answer"
ROUND_TYPE_VOTING: Final = "voting"
ROUND_TYPE_PRESENTATION: Final = "presentation"
OUTCOMES: Final = ("answer", "vote", "error")

# --- OpenTelemetry GenAI semantic conventions ---------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_OP_INVOKE_AGENT: Final = "invoke_agent"
GEN_AI_OP_EXECUTE_TOOL: Final = "execute_tool"
GEN_AI_OP_CHAT: Final = "chat"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
# The development GenAI conventions (after 1.41), written only under the opt-in (`latest_conventions`).
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
GEN_AI_USAGE_COST_AMOUNT: Final = "gen_ai.usage.cost.amount"
GEN_AI_USAGE_COST_CURRENCY: Final = "gen_ai.usage.cost.currency"
GEN_AI_USAGE_COST_SOURCE: Final = "gen_ai.usage.cost.source"
COST_SOURCE_LOCAL: Final = "local"
"""`gen_ai.usage.cost.source` for a price the emitter computed from a table of its own."""
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_TOOL_TYPE_FUNCTION: Final = "function"
GEN_AI_TOOL_TYPE_EXTENSION: Final = "extension"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_TOKEN_INPUT: Final = "input"
GEN_AI_TOKEN_OUTPUT: Final = "output"
OPENAI_REQUEST_SERVICE_TIER: Final = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER: Final = "openai.response.service_tier"
OPENAI_RESPONSE_SYSTEM_FINGERPRINT: Final = "openai.response.system_fingerprint"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"

# GenAI client metrics (histograms).
METRIC_GEN_AI_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_GEN_AI_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
TOKEN_USAGE_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                              16777216, 67108864)  # fmt: skip
DURATION_BUCKETS: Final = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                           40.96, 81.92)  # fmt: skip

# --- MCP semantic conventions (with JSON-RPC and network) ---------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_METHOD_TOOLS_CALL: Final = "tools/call"
MCP_METHOD_TOOLS_LIST: Final = "tools/list"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_METHOD_RESOURCES_LIST: Final = "resources/list"
MCP_METHOD_RESOURCES_READ: Final = "resources/read"
MCP_METHOD_PROMPTS_LIST: Final = "prompts/list"
MCP_METHOD_PROMPTS_GET: Final = "prompts/get"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
JSONRPC_PROTOCOL_VERSION: Final = "jsonrpc.protocol.version"
JSONRPC_VERSION: Final = "2.0"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_TRANSPORT_PIPE: Final = "pipe"
NETWORK_TRANSPORT_TCP: Final = "tcp"

# --- MASEval integration (maseval.*) ------------------------------------------------------------
SPAN_MASEVAL_RUN: Final = "maseval.run"
SPAN_MASEVAL_TASK: Final = "maseval.task"
SPAN_MASEVAL_REPETITION: Final = "maseval.repetition"
MASEVAL_EVENT_PREFIX: Final = "maseval.event."
MASEVAL_BENCHMARK: Final = "maseval.benchmark"
MASEVAL_N_TASK_REPEATS: Final = "maseval.n_task_repeats"
MASEVAL_NUM_WORKERS: Final = "maseval.num_workers"
MASEVAL_TASK_ID: Final = "maseval.task.id"
MASEVAL_TASK_QUERY: Final = "maseval.task.query"
MASEVAL_REPEAT_IDX: Final = "maseval.repeat_idx"
MASEVAL_STATUS: Final = "maseval.status"
MASEVAL_STATUS_COUNTS: Final = "maseval.status_counts"
MASEVAL_EVAL: Final = "maseval.eval"
MASEVAL_ERROR_MESSAGE: Final = "maseval.error_message"

# --- mastrace.* ---------------------------------------------------------------------------------
MASTRACE_CONFIG: Final = "mastrace.config"
MASTRACE_CONFIG_HASH: Final = "mastrace.config.hash"
MASTRACE_USAGE: Final = "mastrace.usage"
MASTRACE_INTERRUPTED: Final = "mastrace.interrupted"
MASTRACE_SCRUBBED: Final = "mastrace.scrubbed"
MASTRACE_TRUNCATED: Final = "mastrace.truncated"
MASTRACE_STREAM_COMPLETED: Final = "mastrace.stream.completed"
MASTRACE_STREAM_CHUNKS: Final = "mastrace.stream.chunks"
MASTRACE_USAGE_UNKNOWN: Final = "mastrace.usage.unknown"
"""True on an LLM call whose usage never reached the client (its stream was cut off before the usage
came, it ended without a response, or the provider sent none): its tokens are unknown, not 0 (the
server may have counted them). Rounds and sessions that include such a call carry it too."""
MASTRACE_REQUEST_PREFIX: Final = "mastrace.request."
"""Request parameters the conventions have no key for (`user`, `parallel_tool_calls`, ...)."""
MASTRACE_REQUEST_TOOL_CALL_IDS: Final = "mastrace.request.tool_call_ids"
"""The ids of the tool results sent back in a request (recorded without content capture)."""
MASTRACE_RESPONSE_TOOL_CALLS: Final = "mastrace.response.tool_calls"
"""The tool calls a response asked for, `[{"id", "name"}]` (recorded without content capture)."""
LEGACY_TIME_TO_FIRST_CHUNK: Final = "mastrace.stream.time_to_first_chunk_s"
"""Where stores written by earlier versions keep the time to first chunk (read, never written)."""
MASTRACE_TOOL_SUCCESS: Final = "mastrace.tool.success"
MASSGEN_TOOL_SUCCESS: Final = "tool.success"
"""MassGen's own outcome key on its `mcp.<server>.<tool>` spans (as MassGen writes it; False on error)."""
MASTRACE_MCP_SERVER: Final = "mastrace.mcp.server"
"""The MCP server's name as its span names use it (the conventions have no key for it)."""
MASTRACE_ARGS: Final = "mastrace.args"
MASTRACE_RETURN: Final = "mastrace.return"
MASTRACE_CODE_FUNCTION: Final = "code.function"
MASTRACE_CODE_NAMESPACE: Final = "code.namespace"
MASTRACE_UNREADABLE: Final = "mastrace.unreadable_attributes"
"""Set instead of a span's attributes when the mapping given could not be read at all."""

# --- OpenTelemetry exception event (semantic conventions) ---------------------------------------
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
EXCEPTION_ESCAPED: Final = "exception.escaped"

# --- Logfire rendering keys ---------------------------------------------------------------------
LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"
LOGFIRE_MSG: Final = "logfire.msg"
LOGFIRE_MSG_TEMPLATE: Final = "logfire.msg_template"
LOGFIRE_JSON_SCHEMA: Final = "logfire.json_schema"
LOGFIRE_LEVEL_NUM: Final = "logfire.level_num"
LOGFIRE_TAGS: Final = "logfire.tags"

LEVEL_INFO: Final = 9
LEVEL_WARN: Final = 13
LEVEL_ERROR: Final = 17

# --- cost, retries and MassGen's coordination bookkeeping ----------------------------------------
MASTRACE_COST_UNKNOWN: Final = "mastrace.cost.unknown"
"""True on a span whose cost (or part of it) has no known price: its cost is not a real $0."""
MASTRACE_COST_UNKNOWN_MODELS: Final = "mastrace.cost.unknown_models"
"""The model of an LLM call without a price (rounds and sessions carry `mastrace.cost.unknown`)."""
MASTRACE_COST_SOURCE: Final = "mastrace.cost.source"
"""Where an LLM call's cost came from: `provider`, `calculator`, `framework`, `genai-prices`."""
MASTRACE_HTTP_ATTEMPTS: Final = "mastrace.http.attempts"
"""HTTP requests an LLM call took (1 without retries); each retry is also an event on the call."""
EVENT_HTTP_RETRY: Final = "mastrace.http.retry"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
MASTRACE_RETRY_ATTEMPT: Final = "mastrace.retry.attempt"
MASTRACE_RETRY_DELAY: Final = "mastrace.retry.delay_s"
MASSGEN_VOTE_DISCARDED: Final = "massgen.vote.discarded"
"""True on a vote MassGen dropped because a new answer arrived after it (it is not counted)."""
OUTCOME_VOTE_DISCARDED: Final = "vote_discarded"
OUTCOME_PRESENTATION: Final = "presentation"
OUTCOME_TIMEOUT: Final = "timeout"
"""A round MassGen's orchestrator timed out (its `agent_timeout` event)."""
OUTCOME_INTERRUPTED: Final = "interrupted"
"""A round still running when its turn was interrupted (SIGINT, `KeyboardInterrupt`)."""
OUTCOME_CANCELLED: Final = "cancelled"
"""A round still running when its turn was cancelled or ended without it."""
OUTCOMES_CUT_SHORT: Final = (OUTCOME_TIMEOUT, OUTCOME_INTERRUPTED, OUTCOME_CANCELLED)
"""Outcomes of a round ended from outside before it finished (an exception leaving it later is not its)."""
EVENT_MASSGEN_TIMEOUT: Final = "massgen.timeout"
"""MassGen's orchestrator timed out the agent while this round ran (`massgen.timeout.reason` says why)."""
MASSGEN_TIMEOUT_REASON: Final = "massgen.timeout.reason"
"""MassGen's own words for a timeout, e.g. `Time limit exceeded (10.0s/10s)`."""
MASSGEN_FINISH_REASON: Final = "massgen.finish_reason"
"""How a coordination turn finished, as MassGen's `status.json` says it (set for `timeout`)."""
MASTRACE_TOOL_ATTEMPT: Final = "mastrace.tool.attempt"
"""Which attempt of one tool call an `mcp.*` span is: 1, then 2 for the framework's first retry ..."""
EVENT_MASSGEN_ENFORCEMENT: Final = "massgen.enforcement"
"""One of MassGen's enforcement retries (a workflow-tool mistake it asked the agent to redo)."""
MASSGEN_ENFORCEMENT_REASON: Final = "massgen.enforcement.reason"
MASSGEN_ENFORCEMENT_ATTEMPT: Final = "massgen.enforcement.attempt"
MASSGEN_ENFORCEMENT_MAX_ATTEMPTS: Final = "massgen.enforcement.max_attempts"
MASSGEN_ENFORCEMENT_TOOL_CALLS: Final = "massgen.enforcement.tool_calls"
MASSGEN_ENFORCEMENT_BUFFER_CHARS_LOST: Final = "massgen.enforcement.buffer_chars_lost"
MASSGEN_ENFORCEMENT_ERROR: Final = "massgen.enforcement.error_message"
MASSGEN_ENFORCEMENT_RETRIES: Final = "massgen.enforcement.retries"
"""Enforcement retries in a round (set on the round when there was at least one)."""
MASSGEN_FAILURE_REASON: Final = "massgen.failure_reason"
"""Why a coordination turn ended without a final answer (exception, cancellation, MassGen's own)."""

# -- value types of the keys above -----------------------------------------------------------------
# A backend that keeps every attribute value as text (ClickHouse's `otel_traces`, as the Collector
# writes it) loses the types; reading such a backend, these keys get theirs back. Any key not named
# here stays text.
INT_KEYS: Final = frozenset(
    {
        MASSGEN_ITERATION,
        MASSGEN_ROUND,
        MASSGEN_NUM_CONTEXT_ANSWERS,
        MASSGEN_USAGE_INPUT,
        MASSGEN_USAGE_OUTPUT,
        MASSGEN_USAGE_REASONING,
        MASSGEN_USAGE_CACHED_INPUT,
        MASSGEN_NUM_AGENTS,
        GEN_AI_REQUEST_MAX_TOKENS,
        GEN_AI_REQUEST_TOP_K,
        GEN_AI_REQUEST_SEED,
        GEN_AI_REQUEST_CHOICE_COUNT,
        GEN_AI_USAGE_INPUT_TOKENS,
        GEN_AI_USAGE_OUTPUT_TOKENS,
        GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        SERVER_PORT,
        MASEVAL_N_TASK_REPEATS,
        MASEVAL_NUM_WORKERS,
        MASEVAL_REPEAT_IDX,
        MASTRACE_STREAM_CHUNKS,
        LOGFIRE_LEVEL_NUM,
        MASTRACE_HTTP_ATTEMPTS,
        HTTP_RESPONSE_STATUS_CODE,
        MASTRACE_RETRY_ATTEMPT,
        MASSGEN_ENFORCEMENT_ATTEMPT,
        MASSGEN_ENFORCEMENT_MAX_ATTEMPTS,
        MASSGEN_ENFORCEMENT_BUFFER_CHARS_LOST,
        MASSGEN_ENFORCEMENT_RETRIES,
        MASTRACE_TOOL_ATTEMPT,
        "process.pid",
    }
)
FLOAT_KEYS: Final = frozenset(
    {
        MASSGEN_USAGE_COST,
        GEN_AI_REQUEST_TEMPERATURE,
        GEN_AI_REQUEST_TOP_P,
        GEN_AI_REQUEST_FREQUENCY_PENALTY,
        GEN_AI_REQUEST_PRESENCE_PENALTY,
        GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        MASTRACE_RETRY_DELAY,
        LEGACY_TIME_TO_FIRST_CHUNK,
    }
)
BOOL_KEYS: Final = frozenset(
    {
        MASSGEN_IS_WINNER,
        GEN_AI_REQUEST_STREAM,
        MASTRACE_INTERRUPTED,
        MASTRACE_TRUNCATED,
        MASTRACE_STREAM_COMPLETED,
        MASTRACE_TOOL_SUCCESS,
        MASSGEN_TOOL_SUCCESS,
        EXCEPTION_ESCAPED,
        MASTRACE_COST_UNKNOWN,
        MASTRACE_USAGE_UNKNOWN,
        MASSGEN_VOTE_DISCARDED,
    }
)
ARRAY_KEYS: Final = frozenset(
    {
        MASSGEN_AGENT_IDS,
        GEN_AI_REQUEST_STOP_SEQUENCES,
        GEN_AI_RESPONSE_FINISH_REASONS,
        LOGFIRE_TAGS,
        MASTRACE_COST_UNKNOWN_MODELS,
    }
)

# --- experiments and evaluations ------------------------------------------------------------------
SPAN_EXPERIMENT_RUN: Final = "experiment.run"
"""The root span `mastrace.experiment_run()` opens: one run (one task, one repetition) of an experiment."""
MASTRACE_EXPERIMENT_NAME: Final = "mastrace.experiment.name"
"""The experiment a run belongs to (on the run's root span)."""
MASTRACE_EXPERIMENT_TASK_ID: Final = "mastrace.experiment.task_id"
"""The task the run solves: runs of one configuration on one task are its repetitions."""
MASTRACE_EXPERIMENT_REPETITION: Final = "mastrace.experiment.repetition"
"""The run's repetition index (0, 1, ...) for its task and configuration."""
MASTRACE_EXPERIMENT_OUTCOME: Final = "mastrace.experiment.outcome"
"""How the run ended: `success`, `error` (it raised), or a status of the framework's own."""
OUTCOME_SUCCESS: Final = "success"
OUTCOME_ERROR: Final = "error"
GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
"""The GenAI conventions' evaluation event (recorded as a log-style span under the evaluated run)."""
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
MASTRACE_EVALUATION_EVALUATOR: Final = "mastrace.evaluation.evaluator"
"""Who scored: an evaluator's name or id (a metric, a judge model, a person)."""
MASTRACE_EVALUATION_EVALUATOR_VERSION: Final = "mastrace.evaluation.evaluator.version"
"""The evaluator's version (a judge prompt's revision, a metric's release), so scores of two versions are
told apart."""
MASTRACE_EVALUATION_EVALUATOR_TYPE: Final = "mastrace.evaluation.evaluator.type"
"""What kind of evaluator scored: e.g. `code`, `llm_judge`, `human` (free text)."""
MASTRACE_EVALUATION_VALUE: Final = "mastrace.evaluation.value"
"""An evaluator's result that is neither a number nor a boolean nor a text, kept as JSON."""
MASTRACE_EVALUATION_BOOLEAN: Final = "mastrace.evaluation.boolean"
"""True when the score came from a boolean (pass = 1.0, fail = 0.0): pass@k applies to it."""

# On a span link: what the link means to the UI (`vote`, `winner`, `retry`, ...); without it the
# kind is read from the linking span's name (`Agent vote: ...` is a vote).
MASTRACE_LINK_KIND: Final = "mastrace.link.kind"
