"""SQL written for DuckDB 2 (and Logfire) reads the same on DuckDB 1.x, the only DuckDB of Python 3.10.

`parenthesize_arrows` is exercised on whatever DuckDB is installed (it only needs the tokenizer);
the queries are then run through `query()` so that on DuckDB 1.x they prove the rewrite is what
makes them work, and on DuckDB 2 that it changes nothing they mean.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from mastrace.store import LocalStoreExporter, query
from mastrace.store._sql_compat import parenthesize_arrows


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT 1 FROM records WHERE a LIKE 'x' AND attributes->>'k' IS NOT NULL",
            "SELECT 1 FROM records WHERE a LIKE 'x' AND (attributes->>'k') IS NOT NULL",
        ),
        ("SELECT attributes->'a'->>'b' FROM t", "SELECT (attributes->'a'->>'b') FROM t"),
        ("SELECT records.attributes->>'k' FROM records", "SELECT (records.attributes->>'k') FROM records"),
        ("SELECT json(x)->>'k' FROM t", "SELECT (json(x)->>'k') FROM t"),
        ("SELECT (a || b)->>'k' FROM t", "SELECT ((a || b)->>'k') FROM t"),
        ("SELECT a->0 FROM t", "SELECT (a->0) FROM t"),
        # `::` binds tighter than any arrow on DuckDB 1: the chain keeps the reading it already has.
        ("SELECT attributes->>'k'::int FROM t", "SELECT attributes->>'k'::int FROM t"),
        # A keyword before `(` is not a function call: only the parenthesised operand is taken.
        (
            "SELECT 1 FROM t WHERE x AND (a)->>'k' = 'v'",
            "SELECT 1 FROM t WHERE x AND ((a)->>'k') = 'v'",
        ),
    ],
)
def test_arrow_chains_are_parenthesized(sql: str, expected: str) -> None:
    assert parenthesize_arrows(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'a->>''k''' AS s",  # an arrow inside a string
        "-- attributes->>'k'\nSELECT 1",  # inside a comment
        "SELECT list_transform([1, 2], x -> x + 1)",  # a lambda: its right side is not a key
        "SELECT attributes->>name FROM t",  # a key that is not a constant
        "SELECT 1",
        "SELECT attributes->>'unterminated",  # invalid SQL: left for DuckDB to report
    ],
)
def test_everything_else_is_left_alone(sql: str) -> None:
    assert parenthesize_arrows(sql) == sql


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with a session span and two agent spans, one of them with token usage."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(tmp_path)))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("coordination.session", attributes={"massgen.num_agents": 2}):
        with tracer.start_as_current_span(
            "agent.a.round_0", attributes={"massgen.agent_id": "a", "massgen.usage.input": 7}
        ):
            pass
        with tracer.start_as_current_span("agent.b.round_0", attributes={"massgen.agent_id": "b"}):
            pass
    provider.shutdown()
    return tmp_path


def test_a_filter_on_an_arrow_after_and_selects_the_right_rows(store: Path) -> None:
    rows = query(
        "SELECT attributes->>'massgen.agent_id' AS agent, SUM((attributes->'massgen.usage.input')::int) AS n "
        "FROM records WHERE span_name LIKE 'agent.%' AND attributes->>'massgen.usage.input' IS NOT NULL "
        "GROUP BY attributes->>'massgen.agent_id'",
        path=store,
    )
    assert rows == [{"agent": "a", "n": 7}]
