"""The set-based SQL behind `analyze`: one scan of the store, then queries on a small temp table.

`load_trace_sql` copies one trace out of `records` into the temp table `mt_spans` (the one scan
of the store), extracting the attributes the report needs into columns (the JSON is parsed once,
and only where it is read).
`OWNER_SQL` maps every span under an agent round (or presentation) to that round. The other
queries read only these two tables, so their cost does not depend on the size of the store.
"""

from __future__ import annotations

import json
from typing import Final

from .. import semconv
from ._kinds import AGENT_SPAN_SQL, RECORD_SPAN_SQL, TOOL_SPAN_SQL

__all__ = [
    "ANSWERS_SQL",
    "ERRORS_SQL",
    "FLOW_SQL",
    "LLM_USAGE_SQL",
    "ORPHAN_ROOT_SQL",
    "OWNER_SQL",
    "PHASES_SQL",
    "RECOVERY_SQL",
    "REPEATED_ERRORS_SQL",
    "ROOT_SQL",
    "ROUNDS_SQL",
    "ROUND_USAGE_SQL",
    "SESSION_SQL",
    "SLOWEST_SQL",
    "TOOLS_SQL",
    "TOTALS_SQL",
    "UNKNOWN_COST_SQL",
    "VOTES_SQL",
    "WRAPPERS_SQL",
    "load_trace_sql",
]

# Extracted attribute columns: column name -> attribute key.
ATTRIBUTE_COLUMNS: Final[dict[str, str]] = {
    "agent_attr": semconv.MASSGEN_AGENT_ID,
    "gen_ai_agent": semconv.GEN_AI_AGENT_ID,
    "round_no": semconv.MASSGEN_ROUND,
    "round_type": semconv.MASSGEN_ROUND_TYPE,
    "outcome": semconv.MASSGEN_OUTCOME,
    "answer_label": semconv.MASSGEN_ANSWER_LABEL,
    "voted_for": semconv.MASSGEN_VOTED_FOR,
    "voted_for_label": semconv.MASSGEN_VOTED_FOR_LABEL,
    "is_winner": semconv.MASSGEN_IS_WINNER,
    "error_message": semconv.MASSGEN_ERROR_MESSAGE,
    "interrupted": semconv.MASTRACE_INTERRUPTED,
    "m_in": semconv.MASSGEN_USAGE_INPUT,
    "m_out": semconv.MASSGEN_USAGE_OUTPUT,
    "m_reason": semconv.MASSGEN_USAGE_REASONING,
    "m_cached": semconv.MASSGEN_USAGE_CACHED_INPUT,
    "m_cost": semconv.MASSGEN_USAGE_COST,
}
# Read from coordination records only for the rows a table lists (see `_records`).
RECORD_KEYS: Final = (
    semconv.MASSGEN_AGENT_ID,
    semconv.MASSGEN_ANSWER_LABEL,
    semconv.MASSGEN_VOTED_FOR,
    semconv.MASSGEN_VOTED_FOR_LABEL,
    semconv.MASSGEN_VOTE_REASON,
    semconv.MASSGEN_WINNER,
    semconv.MASSGEN_VOTE_DISCARDED,
)
# Read from the root span only.
SESSION_KEYS: Final = (
    semconv.MASTRACE_CONFIG,
    semconv.MASTRACE_CONFIG_HASH,
    semconv.MASSGEN_TASK,
    semconv.MASSGEN_AGENT_IDS,
    semconv.MASSGEN_WINNER,
)
_NUMERIC = {"m_in", "m_out", "m_reason", "m_cached", "m_cost"}
_AGENT_FROM_NAME = r"regexp_extract(span_name, '^agent\.(.+)\.(round_[0-9]+|presentation)$', 1)"
# LLM attributes, read only when round spans carry no usage (see LLM_USAGE_SQL).
_LLM_KEYS = (
    semconv.MASSGEN_AGENT_ID,
    semconv.GEN_AI_AGENT_ID,
    semconv.MASSGEN_USAGE_INPUT,
    semconv.GEN_AI_USAGE_INPUT_TOKENS,
    semconv.MASSGEN_USAGE_OUTPUT,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.MASSGEN_USAGE_REASONING,
    semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    semconv.MASSGEN_USAGE_CACHED_INPUT,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    semconv.MASSGEN_USAGE_COST,
)
# An LLM span's price (instrumented SDK calls keep it in `mastrace.usage`, not under `massgen.*`).
_LLM_PRICE_PATH: Final = f"'$.\"{semconv.MASTRACE_USAGE}\".cost'"
# The development GenAI conventions' cost (another emitter's, or mastrace's under the opt-in).
_GEN_AI_COST_PATH: Final = f"'$.\"{semconv.GEN_AI_USAGE_COST_AMOUNT}\"'"


def _paths(keys: tuple[str, ...] | list[str], *extra: str) -> str:
    return "[" + ", ".join([*(f"'$.\"{key}\"'" for key in keys), *extra]) + "]"


def _attribute_type(column: str) -> str:
    if column in _NUMERIC:
        return "DOUBLE"
    return "BIGINT" if column == "round_no" else "VARCHAR"


def _attribute_spec() -> str:
    # json_transform reads every key in one pass and yields NULL (not an error) for a mistyped value.
    spec = {key: _attribute_type(column) for column, key in ATTRIBUTE_COLUMNS.items()}
    return "'" + json.dumps(spec).replace("'", "''") + "'"


def _attribute_selects() -> str:
    return ",\n       ".join(f'a."{key}" AS {column}' for column, key in ATTRIBUTE_COLUMNS.items())


def _hex_id(column: str) -> str:
    # Span ids as integers: joins and the recursive walk are several times faster than on strings.
    return f"TRY_CAST('0x' || {column} AS UBIGINT)"


# A tool span that is a framework's retry of the call before it (`mastrace.tool.attempt` > 1): not a call
# of its own. A retry follows a failed attempt, so a tool's errors are its failed spans less its retries.
_RETRY = (
    f"({TOOL_SPAN_SQL} AND contains(CAST(attributes AS VARCHAR), '{semconv.MASTRACE_TOOL_ATTEMPT}') "
    f"AND coalesce(TRY_CAST(json_extract_string(attributes, '$.\"{semconv.MASTRACE_TOOL_ATTEMPT}\"') "
    "AS BIGINT), 1) > 1)"
)


def load_trace_sql() -> str:
    """`CREATE TEMP TABLE mt_spans` for the trace given as the single `?` parameter.

    This is the one scan of the store; every other query reads temp tables. It adds span
    categories, integer ids and attribute columns. Attributes are parsed only where they are read:
    here for rounds, failed spans, the root and interrupted spans; coordination records later, for
    the rows a table shows. Tool and LLM spans (most of a large trace) keep no attributes unless
    they failed. (A tool call cut short by shutdown is reported through its interrupted round.)
    """
    error = f"(otel_status_code = 'ERROR' OR is_exception OR level >= {semconv.LEVEL_ERROR})"
    bulk = f"({TOOL_SPAN_SQL} OR span_name LIKE '{semconv.SPAN_LLM_PREFIX}%')"
    return f"""
CREATE OR REPLACE TEMP TABLE mt_spans AS
WITH raw AS (
    SELECT span_id, parent_span_id, span_name, span_type, level, service_name,
           -- what Logfire shows: the formatted message of a record Logfire wrote, else the name
           coalesce(nullif(message, ''), span_name) AS label,
           epoch_us(start_timestamp) AS start_us, epoch_us(end_timestamp) AS end_us, duration,
           is_exception, exception_type, exception_message, otel_status_code, otel_status_message,
           CASE WHEN NOT {bulk} OR {error} THEN attributes END AS attributes,
           {_RETRY} AS is_retry
    FROM records WHERE trace_id = ?
), base AS (
    SELECT *,
           {AGENT_SPAN_SQL} AS is_agent,
           {TOOL_SPAN_SQL} AS is_tool,
           span_name LIKE '{semconv.SPAN_LLM_PREFIX}%' AS is_llm,
           {RECORD_SPAN_SQL} AS is_record,
           {error} AS is_error,
           {_hex_id("span_id")} AS sid, {_hex_id("parent_span_id")} AS pid,
           CASE WHEN {AGENT_SPAN_SQL} OR {error} OR parent_span_id IS NULL
                     OR contains(CAST(attributes AS VARCHAR), '{semconv.MASTRACE_INTERRUPTED}')
                THEN json_transform(attributes, {_attribute_spec()}) END AS a
    FROM raw
)
SELECT * EXCLUDE (a, span_id, parent_span_id),
       {_attribute_selects()},
       coalesce(a."{semconv.MASSGEN_AGENT_ID}", a."{semconv.GEN_AI_AGENT_ID}",
                CASE WHEN is_agent THEN nullif({_AGENT_FROM_NAME}, '') END) AS agent_id
FROM base
"""


def _records(where: str) -> str:
    """The first `?` coordination records matching `where`, in time order, with their attributes."""
    fields = ", ".join(f'r."{key}" AS "{key}"' for key in RECORD_KEYS)
    spec = "'" + json.dumps(dict.fromkeys(RECORD_KEYS, "VARCHAR")) + "'"
    return f"""
SELECT start_us, sid, span_name, label, {fields}
FROM (
    SELECT *, json_transform(attributes, {spec}) AS r
    FROM (SELECT start_us, sid, span_name, label, attributes FROM mt_spans
          WHERE is_record AND {where} ORDER BY start_us, sid LIMIT ?)
)
ORDER BY start_us, sid
"""


SESSION_SQL: Final = f"""
SELECT json_extract_string(attributes, {_paths(list(SESSION_KEYS))}) AS a
FROM mt_spans WHERE sid = ? LIMIT 1
"""


# Every span under an agent round (or presentation), with that round's id, agent and bounds, and
# what the tool wall time needs of the span itself (so that query reads this table alone).
OWNER_SQL: Final = """
CREATE OR REPLACE TEMP TABLE mt_owner AS
WITH RECURSIVE walk(sid, owner, owner_agent, owner_start, owner_end,
                    is_tool, start_us, end_us, is_error, depth) AS (
    SELECT sid, sid, agent_id, start_us, end_us, false, start_us, end_us, is_error, 0
    FROM mt_spans WHERE is_agent
    UNION ALL
    SELECT c.sid, w.owner, w.owner_agent, w.owner_start, w.owner_end, c.is_tool, c.start_us, c.end_us,
           c.is_error, w.depth + 1
    FROM mt_spans c JOIN walk w ON c.pid = w.sid
    WHERE NOT c.is_agent AND w.depth < 256
)
SELECT * EXCLUDE (depth) FROM walk
"""

# One tool call, one row. A `Tool execution:` span is not a call of its own when it holds an `mcp.*`
# span (ToolMixin's wrapper: that MCP call) or when it is MassGen's zero-length record of an MCP call
# (`Tool execution: mcp__<server>__<tool>` in the same agent round as its `mcp.<server>.<tool>` span,
# or under the same parent outside rounds). Its interval still counts towards tool wall time; it is
# left out of call counts, the tool table and the slowest operations.
_EXECUTION = "Tool execution: "
_MCP_NAME = f"'{semconv.SPAN_MCP_PREFIX}' || replace(substr(s.span_name, {len(_EXECUTION) + 6}), '__', '.')"
WRAPPERS_SQL: Final = f"""
CREATE OR REPLACE TEMP TABLE mt_wrappers AS
WITH executions AS (
    SELECT s.sid, coalesce(o.owner, s.pid) AS scope, s.start_us = s.end_us AS is_record,
           CASE WHEN s.span_name LIKE '{_EXECUTION}mcp\\_\\_%' ESCAPE '\\'
                THEN {_MCP_NAME}
           END AS mcp_name
    FROM mt_spans s LEFT JOIN mt_owner o ON o.sid = s.sid
    WHERE s.is_tool AND s.span_name LIKE '{_EXECUTION}%'
), mcp AS (
    SELECT s.pid, coalesce(o.owner, s.pid) AS scope, s.span_name
    FROM mt_spans s LEFT JOIN mt_owner o ON o.sid = s.sid
    WHERE s.span_name LIKE '{semconv.SPAN_MCP_PREFIX}%'
)
SELECT e.sid FROM executions e JOIN mcp c ON c.pid = e.sid
UNION
SELECT e.sid FROM executions e JOIN mcp c ON c.scope = e.scope AND c.span_name = e.mcp_name
WHERE e.is_record
"""

# One failure, one row: a failed span whose failed child has the same exception type and message
# only passed that failure up (an exception leaving nested `with` blocks, a wrapper repeating its
# call's error), so the errors table lists the innermost span that failed.
_MESSAGE = "coalesce({t}.exception_message, {t}.otel_status_message, {t}.error_message)"
REPEATED_ERRORS_SQL: Final = f"""
CREATE OR REPLACE TEMP TABLE mt_repeated AS
SELECT DISTINCT p.sid
FROM mt_spans p JOIN mt_spans c ON c.pid = p.sid
WHERE p.is_error AND c.is_error
  AND c.exception_type IS NOT DISTINCT FROM p.exception_type
  AND {_MESSAGE.format(t="c")} IS NOT DISTINCT FROM {_MESSAGE.format(t="p")}
"""

# The root: the coordination session if there is one, else the earliest span without a parent.
ROOT_SQL: Final = f"""
SELECT sid, span_name, service_name, start_us, end_us, duration
FROM mt_spans WHERE pid IS NULL
ORDER BY (span_name = '{semconv.SPAN_COORDINATION_SESSION}') DESC, start_us, sid
LIMIT 1
"""

# When the root was not stored (its parent lives in another process's trace): the earliest orphan.
ORPHAN_ROOT_SQL: Final = """
SELECT sid, span_name, service_name, start_us, end_us, duration
FROM mt_spans s WHERE NOT EXISTS (SELECT 1 FROM mt_spans p WHERE p.sid = s.pid)
ORDER BY start_us, sid
LIMIT 1
"""

# A vote MassGen dropped (a new answer came after it): listed, not counted. Records keep their attributes.
_DISCARDED = (
    "coalesce(lower(json_extract_string(attributes, "
    f"'$.\"{semconv.MASSGEN_VOTE_DISCARDED}\"')) = 'true', false)"
)

# Three aggregates, each over only the rows it needs (most rows of a large trace are tool spans).
TOTALS_SQL: Final = f"""
SELECT * FROM (
    SELECT min(start_us) AS start_us, max(end_us) AS end_us, count(*) AS spans,
           count(*) FILTER (WHERE is_error) AS errors,
           count(*) FILTER (WHERE (is_error OR outcome = 'error' OR lower(interrupted) = 'true')
                                  AND sid NOT IN (SELECT sid FROM mt_repeated)) AS issues
    FROM mt_spans
), (
    SELECT count(DISTINCT span_name) AS tool_names FROM mt_spans
    WHERE is_tool AND sid NOT IN (SELECT sid FROM mt_wrappers)
), (
    SELECT count(*) FILTER (WHERE is_agent) AS rounds,
           count(*) FILTER (WHERE is_record) AS records,
           count(*) FILTER (WHERE is_record AND span_name LIKE 'Agent answer:%') AS answers,
           count(*) FILTER (WHERE is_record AND span_name LIKE 'Agent vote:%' AND NOT {_DISCARDED}) AS votes,
           count(*) FILTER (WHERE is_record AND span_name LIKE 'Agent vote:%' AND {_DISCARDED})
               AS discarded_votes,
           list(DISTINCT agent_id ORDER BY agent_id) FILTER (WHERE is_agent AND agent_id IS NOT NULL)
               AS agents,
           any_value(agent_id) FILTER (WHERE is_agent AND lower(is_winner) = 'true') AS winner_presenter,
           any_value(regexp_extract(span_name, '^Final answer from (.+)$', 1))
               FILTER (WHERE is_record AND span_name LIKE 'Final answer from %') AS winner_final
    FROM mt_spans WHERE is_record OR is_agent
), (
    SELECT any_value(json_extract_string(attributes, '$."{semconv.MASSGEN_WINNER}"')) AS winner_event,
           any_value(json_extract_string(attributes, '$."{semconv.MASSGEN_AGENT_ID}"')) AS winner_event_agent
    FROM mt_spans WHERE is_record AND span_name LIKE 'Winner selected:%'
)
"""

_PHASE = f"""CASE WHEN round_type IS NOT NULL THEN round_type
            WHEN span_name LIKE '{semconv.SPAN_AGENT_PREFIX}%.presentation' THEN 'presentation'
            WHEN span_name LIKE '{semconv.SPAN_AGENT_PREFIX}%.round_0' THEN 'initial_answer'
            ELSE 'voting' END"""

PHASES_SQL: Final = f"""
SELECT {_PHASE} AS phase, count(*) AS count, avg(duration) AS avg, max(duration) AS max,
       sum(duration) AS total, min(start_us) AS first_start
FROM mt_spans WHERE is_agent
GROUP BY 1
"""

# Tool wall time per round: the union of its tool spans' intervals, clipped to the round. With the
# intervals sorted by start, each adds only the part that ends after every earlier one has ended.
ROUNDS_SQL: Final = f"""
WITH tools AS (
    SELECT owner, greatest(start_us, owner_start) AS s, least(end_us, owner_end) AS e, is_error,
           sid NOT IN (SELECT sid FROM mt_wrappers) AS is_call,
           sid IN (SELECT sid FROM mt_spans WHERE is_retry) AS is_retry
    FROM mt_owner WHERE is_tool
), reach AS (
    SELECT owner, s, e,
           max(e) OVER (PARTITION BY owner ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
               AS reached
    FROM tools WHERE e > s
), wall AS (
    SELECT owner, sum(greatest(0, e - greatest(s, coalesce(reached, s)))) AS wall_us
    FROM reach GROUP BY owner
), calls AS (
    SELECT owner, count(*) FILTER (WHERE is_call AND NOT is_retry) AS tool_spans,
           greatest(0, count(*) FILTER (WHERE is_call AND is_error)
                       - count(*) FILTER (WHERE is_call AND is_retry)) AS tool_errors
    FROM tools GROUP BY owner
)
SELECT r.agent_id AS agent,
       row_number() OVER (PARTITION BY r.agent_id ORDER BY r.start_us, r.sid) AS segment,
       r.round_no AS round, {_PHASE} AS round_type, r.outcome,
       r.start_us, r.end_us, r.duration,
       coalesce(w.wall_us, 0) / 1e6 AS tool_wall,
       coalesce(c.tool_spans, 0) AS tool_spans, coalesce(c.tool_errors, 0) AS tool_errors
FROM mt_spans r
LEFT JOIN wall w ON w.owner = r.sid
LEFT JOIN calls c ON c.owner = r.sid
WHERE r.is_agent
ORDER BY r.agent_id, r.start_us, r.sid
LIMIT ?
"""

FLOW_SQL: Final = f"""
SELECT start_us, label AS name, "{semconv.MASSGEN_AGENT_ID}" AS agent,
       "{semconv.MASSGEN_ANSWER_LABEL}" AS answer_label,
       "{semconv.MASSGEN_VOTED_FOR}" AS voted_for, "{semconv.MASSGEN_VOTED_FOR_LABEL}" AS voted_for_label,
       "{semconv.MASSGEN_VOTE_REASON}" AS vote_reason, "{semconv.MASSGEN_WINNER}" AS winner
FROM ({_records("true")})
ORDER BY start_us, sid
"""

ANSWERS_SQL: Final = f"""
SELECT coalesce("{semconv.MASSGEN_ANSWER_LABEL}",
                regexp_extract(span_name, '^Agent answer: (.+)$', 1)) AS label,
       "{semconv.MASSGEN_AGENT_ID}" AS agent, start_us
FROM ({_records("span_name LIKE 'Agent answer:%'")})
ORDER BY start_us, sid
"""

VOTES_SQL: Final = f"""
SELECT coalesce("{semconv.MASSGEN_AGENT_ID}", regexp_extract(span_name, '^Agent vote: (.+) -> ', 1)) AS voter,
       coalesce("{semconv.MASSGEN_VOTED_FOR}", regexp_extract(span_name, ' -> (.+)$', 1)) AS voted_for,
       "{semconv.MASSGEN_VOTED_FOR_LABEL}" AS label, "{semconv.MASSGEN_VOTE_REASON}" AS reason, start_us,
       lower(coalesce("{semconv.MASSGEN_VOTE_DISCARDED}", '')) = 'true' AS discarded
FROM ({_records("span_name LIKE 'Agent vote:%'")})
ORDER BY start_us, sid
"""

SLOWEST_SQL: Final = """
WITH top AS (
    SELECT sid, label, agent_id, duration, start_us FROM mt_spans
    WHERE NOT is_agent AND sid <> ? AND duration > 0 AND sid NOT IN (SELECT sid FROM mt_wrappers)
    ORDER BY duration DESC, start_us LIMIT ?
)
SELECT top.label AS name, coalesce(top.agent_id, o.owner_agent) AS agent, top.duration, top.start_us
FROM top LEFT JOIN mt_owner o ON o.sid = top.sid
ORDER BY top.duration DESC, top.start_us
"""

TOOLS_SQL: Final = """
SELECT span_name AS name, count(*) FILTER (WHERE NOT is_retry) AS calls,
       greatest(0, count(*) FILTER (WHERE is_error) - count(*) FILTER (WHERE is_retry)) AS errors,
       count(*) FILTER (WHERE is_retry) AS retries,
       sum(duration) AS total, avg(duration) AS avg, max(duration) AS max
FROM mt_spans WHERE is_tool AND sid NOT IN (SELECT sid FROM mt_wrappers)
GROUP BY span_name
ORDER BY total DESC, name
LIMIT ?
"""

ERRORS_SQL: Final = """
SELECT s.label AS name, coalesce(s.agent_id, o.owner_agent) AS agent, s.is_exception,
       s.exception_type, coalesce(s.exception_message, s.otel_status_message, s.error_message) AS message,
       s.otel_status_code = 'ERROR' AS error_status, s.outcome = 'error' AS error_outcome,
       lower(s.interrupted) = 'true' AS interrupted, s.is_tool, s.is_agent, s.start_us
FROM mt_spans s LEFT JOIN mt_owner o ON o.sid = s.sid
WHERE (s.is_error OR s.outcome = 'error' OR lower(s.interrupted) = 'true')
  AND s.sid NOT IN (SELECT sid FROM mt_repeated)
ORDER BY s.start_us, s.sid
LIMIT ?
"""

_USAGE_COLUMNS = """
       sum({p}in) AS input, sum({p}out) AS output, sum({p}reason) AS reasoning,
       sum({p}cached) AS cached, round(fsum(m_cost), 12) AS cost"""

ROUND_USAGE_SQL: Final = f"""
SELECT agent_id AS agent, count(*) AS spans, sum(duration) AS time,{_USAGE_COLUMNS.format(p="m_")}
FROM mt_spans WHERE is_agent
GROUP BY agent_id ORDER BY agent_id
"""

UNKNOWN_COST_SQL: Final = f"""
SELECT coalesce(attributes->>'{semconv.MASSGEN_AGENT_ID}', attributes->>'{semconv.GEN_AI_AGENT_ID}') AS agent,
       list(DISTINCT attributes->>'{semconv.MASTRACE_COST_UNKNOWN_MODELS}') AS models
FROM records
WHERE trace_id = ? AND span_name LIKE '{semconv.SPAN_LLM_PREFIX}%'
  AND attributes->>'{semconv.MASTRACE_COST_UNKNOWN}' = 'true'
GROUP BY 1
"""

LLM_USAGE_SQL: Final = f"""
WITH llm AS (
    SELECT {_hex_id("span_id")} AS sid, duration,
           json_extract_string(attributes, {_paths(_LLM_KEYS, _LLM_PRICE_PATH, _GEN_AI_COST_PATH)}) AS a
    FROM records WHERE trace_id = ? AND span_name LIKE '{semconv.SPAN_LLM_PREFIX}%'
)
SELECT coalesce(l.a[1], l.a[2], o.owner_agent) AS agent, count(*) AS spans, sum(l.duration) AS time,
       sum(TRY_CAST(coalesce(l.a[3], l.a[4]) AS DOUBLE)) AS input,
       sum(TRY_CAST(coalesce(l.a[5], l.a[6]) AS DOUBLE)) AS output,
       sum(TRY_CAST(coalesce(l.a[7], l.a[8]) AS DOUBLE)) AS reasoning,
       sum(TRY_CAST(coalesce(l.a[9], l.a[10]) AS DOUBLE)) AS cached,
       round(fsum(TRY_CAST(coalesce(l.a[11], l.a[12], l.a[13]) AS DOUBLE)), 12) AS cost
FROM llm l LEFT JOIN mt_owner o ON o.sid = l.sid
GROUP BY 1 ORDER BY 1
"""


# Per agent: HTTP retries (events on LLM calls), enforcement retries (events on rounds), restarts and
# timeouts (MassGen's records). Read from `records` (mt_spans keeps no events), only the spans that
# can hold one; an agent is the span's own (`massgen.agent_id`, a record's `agent_id`), else the
# round the span is under.
_EVENT_NAMES = "json_extract_string(r.otel_events, '$[*].name')"
RECOVERY_SQL: Final = f"""
SELECT agent, sum(http) AS http_retries, sum(enforcement) AS enforcement_retries,
       sum(restart) AS restarts, sum(timeout) AS timeouts, sum(tool) AS tool_retries
FROM (
    SELECT coalesce(r.attributes->>'{semconv.MASSGEN_AGENT_ID}', r.attributes->>'agent_id',
                    o.owner_agent, '-') AS agent,
           (SELECT count(*) FROM unnest({_EVENT_NAMES}) AS e(n)
            WHERE n = '{semconv.EVENT_HTTP_RETRY}') AS http,
           (SELECT count(*) FROM unnest({_EVENT_NAMES}) AS e(n)
            WHERE n = '{semconv.EVENT_MASSGEN_ENFORCEMENT}') AS enforcement,
           CASE WHEN r.span_name LIKE 'Agent restart%' THEN 1 ELSE 0 END AS restart,
           CASE WHEN r.span_name LIKE 'Coordination event: agent_timeout%'
                     OR r.attributes->>'{semconv.MASSGEN_EVENT_TYPE}' = 'agent_timeout'
                THEN 1 ELSE 0 END AS timeout,
           CASE WHEN coalesce(TRY_CAST(r.attributes->>'{semconv.MASTRACE_TOOL_ATTEMPT}' AS BIGINT), 1) > 1
                THEN 1 ELSE 0 END AS tool
    FROM records r
    LEFT JOIN mt_owner o ON o.sid = TRY_CAST('0x' || r.span_id AS UBIGINT)
    WHERE r.trace_id = ?
      AND (contains(CAST(r.otel_events AS VARCHAR), '{semconv.EVENT_HTTP_RETRY}')
           OR contains(CAST(r.otel_events AS VARCHAR), '{semconv.EVENT_MASSGEN_ENFORCEMENT}')
           OR r.span_name LIKE 'Agent restart%' OR r.span_name LIKE 'Coordination event: agent_timeout%'
           OR r.attributes->>'{semconv.MASSGEN_EVENT_TYPE}' = 'agent_timeout'
           OR contains(CAST(r.attributes AS VARCHAR), '{semconv.MASTRACE_TOOL_ATTEMPT}'))
)
GROUP BY agent
HAVING sum(http) + sum(enforcement) + sum(restart) + sum(timeout) + sum(tool) > 0
ORDER BY agent
"""
