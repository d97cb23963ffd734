"""Every span name and attribute key mastrace writes, in one place.

Three families live side by side on the same spans:

- `massgen.*`: the keys MassGen's Logfire tracing uses, so existing queries keep working;
- `gen_ai.*` and `mcp.*`: the OpenTelemetry GenAI and MCP semantic conventions;
- `mastrace.*` and `logfire.*`: this SDK's own keys, and the ones Logfire reads to render a span.
"""

from __future__ import annotations

from typing import Final

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
MASSGEN_VOTE_REASON: Final = "massgen.vote_reason"
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
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_REQUEST_PREFIX: Final = "gen_ai.request."
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"

# --- MCP semantic conventions -------------------------------------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_METHOD_TOOLS_CALL: Final = "tools/call"
MCP_METHOD_TOOLS_LIST: Final = "tools/list"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_SERVER_NAME: Final = "mcp.server.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_METHOD_RESOURCES_LIST: Final = "resources/list"
MCP_METHOD_RESOURCES_READ: Final = "resources/read"
MCP_METHOD_PROMPTS_LIST: Final = "prompts/list"
MCP_METHOD_PROMPTS_GET: Final = "prompts/get"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_PROMPT: Final = "gen_ai.prompt"
GEN_AI_COMPLETION: Final = "gen_ai.completion"
TOOL_SUCCESS: Final = "tool.success"
ERROR_TYPE: Final = "error.type"

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
MASTRACE_TIME_TO_FIRST_CHUNK: Final = "mastrace.stream.time_to_first_chunk_s"
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
