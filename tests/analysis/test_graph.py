"""The coordination graph of a run, built from span attributes and links: agents with their rounds,
answers and usage; votes (counted and discarded), restarts, the winner, tool and MCP calls, GenAI
handoffs; and its Mermaid, DOT and SVG exports, names escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore
from mastrace.analysis._graph import CoordinationGraph, build_graph

from .conftest import TraceWriter


def graph_of(store: Path, trace_id: str) -> CoordinationGraph:
    with TraceStore(store) as traces:
        return build_graph(trace_id, traces.spans(trace_id))


def edges(graph: CoordinationGraph) -> dict[tuple[str, str, str], int]:
    return {(e.source, e.target, e.kind): e.count for e in graph.edges}


def test_the_reference_session(synthetic: tuple[Path, str, TraceWriter]) -> None:
    store, trace_id, w = synthetic
    graph = graph_of(store, trace_id)
    assert [(n.id, n.kind) for n in graph.nodes] == [
        ("agent_a", "agent"),
        ("agent_b", "agent"),
        ("mcp:fs", "mcp"),
        ("mcp:late", "mcp"),
        ("mcp:search", "mcp"),
        ("mcp:x", "mcp"),
        ("tool:t1", "tool"),
        ("tool:t2", "tool"),
        ("tool:t3", "tool"),
    ]
    a, b = graph.node("agent_a"), graph.node("agent_b")
    assert a is not None and b is not None
    # The rounds' own usage, added by hand from conftest.write_session.
    assert (a.rounds, a.answers, a.input_tokens, a.output_tokens) == (2, 1, 1000 + 300, 200 + 50)
    assert a.cost == pytest.approx(0.01 + 0.002)
    assert (b.rounds, b.answers, b.input_tokens, b.output_tokens) == (3, 1, 500 + 300 + 200, 100 + 30 + 400)
    assert b.cost == pytest.approx(0.005 + 0.003 + 0.004)
    assert graph.winner == "agent_b" and b.presented and not a.winner
    assert edges(graph) == {
        ("agent_a", "agent_b", "vote"): 1,
        ("agent_b", "agent_b", "vote"): 1,
        ("agent_a", "mcp:fs", "mcp"): 1,
        ("agent_a", "mcp:late", "mcp"): 1,
        ("agent_a", "mcp:search", "mcp"): 2,
        ("agent_b", "mcp:fs", "mcp"): 2,
        ("agent_b", "mcp:x", "mcp"): 1,
        ("agent_a", "tool:t1", "tool"): 1,
        ("agent_a", "tool:t2", "tool"): 1,
        ("agent_a", "tool:t3", "tool"): 1,
    }
    vote = next(e for e in graph.edges if (e.source, e.kind) == ("agent_a", "vote"))
    assert vote.span_ids == [w.ids["vote_a"]] and vote.labels == ["agent2.1"]
    search = next(e for e in graph.edges if e.target == "mcp:search")
    assert sorted(search.span_ids) == sorted([w.ids["a0_q"], w.ids["a0_q2"]]) and search.labels == ["q", "q2"]
    assert graph.node("mcp:fs").calls == 3  # type: ignore[union-attr]


def test_discarded_votes_restarts_and_a_vote_found_through_its_link(
    writer: TraceWriter, tmp_path: Path
) -> None:
    w = writer
    w.span("session", "coordination.session", 0, 1000)
    w.log("ans_a", "Agent answer: a1", 10, "session", **{"massgen.agent_id": "agent_a"})
    discarded = {
        "massgen.agent_id": "agent_b",
        "massgen.voted_for": "agent_a",
        "massgen.vote.discarded": True,
    }
    w.log("v1", "Agent vote: agent_b -> a1", 20, "session", **discarded)
    w.log("ans_c", "Agent answer: c1", 30, "session", **{"massgen.agent_id": "agent_c"})
    w.log("r1", "Agent restart: agent_a", 40, "session", **{"massgen.agent_id": "agent_a"})
    w.log("r2", "Agent restart: agent_b", 41, "session", **{"massgen.agent_id": "agent_b"})
    # No voted_for attribute: the link to the answer span names the agent voted for.
    w.log(
        "v2", "Agent vote: agent_b -> c1", 50, "session", links=["ans_c"], **{"massgen.agent_id": "agent_b"}
    )
    graph = graph_of(tmp_path / "store", w.trace_id())
    assert edges(graph) == {
        ("agent_b", "agent_a", "vote_discarded"): 1,
        ("agent_b", "agent_c", "vote"): 1,
        ("agent_c", "agent_a", "restart"): 1,  # agent_c's answer came last before the restarts
        ("agent_c", "agent_b", "restart"): 1,
    }
    assert [(n.id, n.restarts, n.answers) for n in graph.nodes] == [
        ("agent_a", 1, 1),
        ("agent_b", 1, 0),
        ("agent_c", 0, 1),
    ]
    assert graph.winner is None


def test_genai_handoffs_sub_agents_tools_and_llm_usage(writer: TraceWriter, tmp_path: Path) -> None:
    """`invoke_agent` under another agent is a handoff; an agent without round usage adds up its
    LLM calls (tokens, and the cost in their usage record)."""
    w = writer
    invoke = {"gen_ai.operation.name": "invoke_agent"}
    w.span("session", "invoke_agent planner", 0, 1000, **invoke, **{"gen_ai.agent.name": "planner"})
    w.span("p_llm", "chat gpt-4o", 10, 100, "session", **{"gen_ai.operation.name": "chat",
           "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
           "mastrace.usage": '{"cost": 0.5}'})  # fmt: skip
    for i in range(2):
        key = f"r{i}"
        w.span(key, "invoke_agent researcher", 200 + i * 300, 400 + i * 300, "session", **invoke,
               **{"gen_ai.agent.id": "researcher"})  # fmt: skip
        w.span(f"{key}_llm", "chat gpt-4o", 210 + i * 300, 300 + i * 300, key,
               **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40 + i,
                  "gen_ai.usage.output_tokens": 7})  # fmt: skip
        w.span(f"{key}_tool", "execute_tool search", 310 + i * 300, 320 + i * 300, key,
               **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})  # fmt: skip
    graph = graph_of(tmp_path / "store", w.trace_id())
    assert edges(graph) == {("planner", "researcher", "handoff"): 2, ("researcher", "tool:search", "tool"): 2}
    planner, researcher = graph.node("planner"), graph.node("researcher")
    assert planner is not None and researcher is not None
    assert (planner.input_tokens, planner.output_tokens, planner.cost) == (100, 10, 0.5)
    assert (researcher.rounds, researcher.input_tokens, researcher.output_tokens) == (2, 81, 14)
    assert researcher.cost is None  # no price recorded: unknown, not $0


EVIL = '</text><script>x</script>"]; click n0 "javascript:alert(1)'


def test_exports_escape_every_name(writer: TraceWriter, tmp_path: Path) -> None:
    w = writer
    w.span("session", "coordination.session", 0, 1000)
    w.span("r", f"agent.{EVIL}.round_0", 0, 100, "session", **{"massgen.agent_id": EVIL})
    w.log("v", "Agent vote", 50, "session", **{"massgen.agent_id": "b", "massgen.voted_for": EVIL})
    w.log("win", "Winner selected: x", 60, "session", **{"massgen.winner": EVIL})
    graph = graph_of(tmp_path / "store", w.trace_id())
    mermaid = graph.to_mermaid()
    assert mermaid.startswith("flowchart LR\n")
    # Every label is one quoted string: no raw quote, bracket of markup or newline inside it.
    for line in mermaid.splitlines()[1:]:
        for label in re.findall(r'"([^"]*)"', line):
            assert "<script" not in label and "</text" not in label
        assert line.count('"') % 2 == 0
    assert "style n0 stroke:#16a34a" in mermaid  # the winner, by its node id
    dot = graph.to_dot()
    assert dot.startswith("digraph coordination {") and dot.rstrip().endswith("}")
    assert '\\"]; click n0 \\"javascript' in dot
    svg = graph.to_svg()
    root = ET.fromstring(svg)  # well-formed XML: nothing a name holds became markup
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    texts = [e.text for e in root.iter() if e.tag.endswith("text")]
    assert EVIL in texts
