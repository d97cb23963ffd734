"""`mastrace graph`: the coordination graph of a demo run as Mermaid, DOT, SVG and JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from .conftest import Runner


def test_graph_formats_agree_on_the_demo_run(mastrace_cli: Runner, demo_store: Path) -> None:
    """Three agents, their votes and MCP servers; the winner is the agent the votes chose."""
    data = json.loads(mastrace_cli("graph", "latest", "--format", "json", store=demo_store).stdout)
    agents = [n["id"] for n in data["nodes"] if n["kind"] == "agent"]
    assert agents == ["agent_a", "agent_b", "agent_c"]
    votes = [e for e in data["edges"] if e["kind"] == "vote"]
    assert sum(e["count"] for e in votes) == 3  # each agent votes once
    received: dict[str, int] = {}
    for e in votes:
        received[e["target"]] = received.get(e["target"], 0) + e["count"]
    assert data["winner"] == max(received, key=lambda agent: received[agent])
    mcp = {n["id"] for n in data["nodes"] if n["kind"] == "mcp"}
    assert mcp == {"mcp:search", "mcp:filesystem"}

    mermaid = mastrace_cli("graph", "latest", "--format", "mermaid", store=demo_store)
    assert mermaid.returncode == 0, mermaid.stderr
    lines = mermaid.stdout.splitlines()
    assert lines[0] == "flowchart LR"
    assert sum(1 for line in lines if "-->|" in line and "vote" in line) == len(votes)
    dot = mastrace_cli("graph", "latest", "--format", "dot", store=demo_store).stdout
    assert dot.startswith("digraph coordination {")
    assert sum(1 for line in dot.splitlines() if " -> " in line) == len(data["edges"])
    svg = mastrace_cli("graph", "latest", "--format", "svg", store=demo_store).stdout
    root = ET.fromstring(svg)
    assert len([e for e in root.iter() if e.tag.endswith("ellipse")]) == 3


def test_graph_of_an_unknown_run_is_a_usage_error(mastrace_cli: Runner, demo_store: Path) -> None:
    result = mastrace_cli("graph", "ffffffffffff", store=demo_store)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
