"""The coordination graph of a run: who answered, who voted for whom, which new answer restarted
whom, who won, which tools and MCP servers each agent used, and which agent handed work to which.

Built from the spans' attributes, names and links only (never from timing or overlap), so it is the
same whichever order the spans were written in:

- an **agent** is a span's `massgen.agent_id`, `gen_ai.agent.id` or `gen_ai.agent.name`, or the
  nearest ancestor's; its node adds up the usage of its rounds (`massgen.usage.*`), or of its LLM
  calls when its rounds carry none, and counts its answers, rounds and restarts;
- a **vote** (`Agent vote: ...`, `massgen.voted_for`) is an edge voter → agent voted for, counted
  or discarded (`massgen.vote.discarded`); a vote for an unknown agent falls back to the answer
  span it links to;
- the **winner** is `massgen.winner` (`Winner selected: ...`) or a presentation span with
  `massgen.is_winner`;
- a **restart** (`Agent restart: <agent>`) is an edge from the agent whose answer came last
  before it in the trace's record order to the agent restarted;
- a **tool** call (`gen_ai.tool.name`, `Tool execution: <name>`) is an edge agent → tool, an
  **MCP** call (`mcp.<server>.<tool>`, `mastrace.mcp.server`) an edge agent → server;
- a **handoff** is an `invoke_agent` span (`gen_ai.operation.name`) of one agent under a span of
  another: an edge caller → callee.

`to_mermaid()`, `to_dot()` and `to_svg()` export it; every name in them is escaped.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from .. import semconv
from ._kinds import format_cost
from ._spans import SpanRow, loads_as

__all__ = ["CoordinationGraph", "GraphEdge", "GraphNode", "build_graph"]

_AGENT_KEYS: Final = (semconv.MASSGEN_AGENT_ID, semconv.GEN_AI_AGENT_ID, semconv.GEN_AI_AGENT_NAME)
_RESTART: Final = re.compile(r"^Agent restart: (?P<agent>.+)$")
_TOOL_EXECUTION: Final = semconv.SPAN_TOOL_EXECUTION.split("{", 1)[0]
_VOTE: Final = semconv.SPAN_AGENT_VOTE.split("{", 1)[0]
_ANSWER: Final = semconv.SPAN_AGENT_ANSWER.split("{", 1)[0]
_WINNER: Final = semconv.SPAN_WINNER_SELECTED.split("{", 1)[0]
EDGE_KINDS: Final = ("vote", "vote_discarded", "restart", "handoff", "tool", "mcp")


@dataclass
class GraphNode:
    """An agent, a tool or an MCP server of the run."""

    id: str
    kind: str  # "agent", "tool" or "mcp"
    label: str
    rounds: int = 0
    answers: int = 0
    restarts: int = 0
    winner: bool = False
    presented: bool = False
    input_tokens: float = 0
    output_tokens: float = 0
    cost: float | None = None
    calls: int = 0
    """For a tool or MCP server: the calls it received."""
    span_ids: list[str] = field(default_factory=list)
    """The spans the node stands for (an agent's rounds and records, a tool's calls)."""


@dataclass
class GraphEdge:
    """`count` interactions of one kind from `source` to `target` (node ids)."""

    source: str
    target: str
    kind: str  # one of EDGE_KINDS
    count: int = 0
    span_ids: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    """What the edge carries: answer labels voted for, tool names of an MCP server."""


@dataclass
class CoordinationGraph:
    """Agents, tools and MCP servers as nodes; votes, restarts, handoffs and calls as edges."""

    trace_id: str
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)

    @property
    def winner(self) -> str | None:
        """The winning agent's id, when the run chose one."""
        return next((n.id for n in self.nodes if n.winner), None)

    def node(self, node_id: str) -> GraphNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def layout(self, width: int = 900) -> dict[str, tuple[float, float]]:
        """Node positions: agents on a circle (one agent in the middle), tools and MCP servers in a
        column on the right; deterministic, in node order."""
        agents = [n for n in self.nodes if n.kind == "agent"]
        others = [n for n in self.nodes if n.kind != "agent"]
        height = self.height()
        cx, cy = (width - 250) / 2, height / 2
        rx, ry = max(0.0, cx - 110), max(0.0, cy - 52)
        out: dict[str, tuple[float, float]] = {}
        for i, n in enumerate(agents):
            angle = -math.pi / 2 + 2 * math.pi * i / max(1, len(agents))
            k = 1.0 if len(agents) > 1 else 0.0
            out[n.id] = (round(cx + k * rx * math.cos(angle), 1), round(cy + k * ry * math.sin(angle), 1))
        step = (height - 40) / max(1, len(others))
        for i, n in enumerate(others):
            out[n.id] = (width - 120, round(20 + step * (i + 0.5), 1))
        return out

    def height(self) -> int:
        others = sum(1 for n in self.nodes if n.kind != "agent")
        return max(440, 44 * others + 40)

    def to_dict(self, width: int = 900) -> dict[str, Any]:
        """As JSON-ready data, with each node's position (`x`, `y`) in a `width` × `height` box."""
        positions = self.layout(width)
        nodes = []
        for n in self.nodes:
            x, y = positions[n.id]
            nodes.append({**asdict(n), "x": x, "y": y})
        return {
            "trace_id": self.trace_id,
            "winner": self.winner,
            "width": width,
            "height": self.height(),
            "nodes": nodes,
            "edges": [asdict(e) for e in self.edges],
        }

    def to_mermaid(self) -> str:
        """The graph as a Mermaid flowchart (`flowchart LR`)."""
        ids = {n.id: f"n{i}" for i, n in enumerate(self.nodes)}
        lines = ["flowchart LR"]
        for n in self.nodes:
            text = _mermaid_text(_node_caption(n))
            shape = {"agent": ("([", "])"), "tool": ("[", "]"), "mcp": ("[(", ")]")}[n.kind]
            lines.append(f'    {ids[n.id]}{shape[0]}"{text}"{shape[1]}')
        arrows = {"vote": "-->", "vote_discarded": "-.->", "restart": "==>", "handoff": "-->"}
        for e in self.edges:
            arrow = arrows.get(e.kind, "-->")
            label = _mermaid_text(_edge_caption(e))
            lines.append(f'    {ids[e.source]} {arrow}|"{label}"| {ids[e.target]}')
        winner = self.winner
        if winner is not None:
            lines.append(f"    style {ids[winner]} stroke:#16a34a,stroke-width:3px")
        return "\n".join(lines) + "\n"

    def to_dot(self) -> str:
        """The graph in Graphviz's DOT language."""
        lines = ["digraph coordination {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
        shapes = {"agent": "ellipse", "tool": "box", "mcp": "cylinder"}
        styles = {"vote_discarded": "dashed", "restart": "bold"}
        for n in self.nodes:
            extra = ', penwidth=3, color="#16a34a"' if n.winner else ""
            lines.append(
                f"  {_dot_id(n.id)} [label={_dot_id(_node_caption(n))}, shape={shapes[n.kind]}{extra}];"
            )
        for e in self.edges:
            style = f", style={styles[e.kind]}" if e.kind in styles else ""
            lines.append(
                f"  {_dot_id(e.source)} -> {_dot_id(e.target)} [label={_dot_id(_edge_caption(e))}{style}];"
            )
        return "\n".join([*lines, "}"]) + "\n"

    def to_svg(self, width: int = 900) -> str:
        """The graph as a self-contained inline SVG (no script, no external resource; text escaped)."""
        pos = self.layout(width)
        height = self.height()
        colours = {
            "vote": "#2563eb",
            "vote_discarded": "#94a3b8",
            "restart": "#dc2626",
            "handoff": "#7c3aed",
            "tool": "#d97706",
            "mcp": "#0891b2",
        }
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="coordination-graph" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            'font-family="system-ui, sans-serif" font-size="12">',
            "<defs>",
        ]
        for kind, colour in colours.items():
            out.append(
                f'<marker id="arrow-{kind}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
                f'markerHeight="7" orient="auto-start-reverse">'
                f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
            )
        out.append("</defs>")
        for e in self.edges:
            d, (lx, ly) = _edge_path(
                pos[e.source], pos[e.target], _bend(self.edges, e), e.kind in ("tool", "mcp")
            )
            dash = ' stroke-dasharray="5 4"' if e.kind == "vote_discarded" else ""
            out.append(
                f'<path class="edge edge-{e.kind}" d="{d}" fill="none" stroke="{colours[e.kind]}" '
                f'stroke-width="{min(6, 1.2 + e.count * 0.6):.1f}"{dash} marker-end="url(#arrow-{e.kind})"/>'
            )
            out.append(
                f'<text class="edge-label" x="{lx:.1f}" y="{ly:.1f}" text-anchor="middle" '
                f'fill="{colours[e.kind]}">{_escape(_edge_caption(e))}</text>'
            )
        for n in self.nodes:
            x, y = pos[n.id]
            fill = {"agent": "#eff6ff", "tool": "#fffbeb", "mcp": "#ecfeff"}[n.kind]
            stroke = (
                "#16a34a" if n.winner else {"agent": "#2563eb", "tool": "#d97706", "mcp": "#0891b2"}[n.kind]
            )
            if n.kind == "agent":
                out.append(
                    f'<ellipse class="node node-agent" cx="{x}" cy="{y}" rx="96" ry="34" fill="{fill}" '
                    f'stroke="{stroke}" stroke-width="{3 if n.winner else 1.5}"/>'
                )
            else:
                out.append(
                    f'<rect class="node node-{n.kind}" x="{x - 95}" y="{y - 16}" width="190" height="32" '
                    f'rx="6" '
                    f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
                )
            lines = _node_caption(n).split("\n")
            top = y - 7 * (len(lines) - 1)
            for i, line in enumerate(lines):
                weight = ' font-weight="600"' if i == 0 else ' fill="#475569"'
                out.append(
                    f'<text x="{x}" y="{top + 14 * i + 4:.1f}" text-anchor="middle"{weight}>'
                    f"{_escape(line)}</text>"
                )
        out.append("</svg>")
        return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _mermaid_text(text: str) -> str:
    # Mermaid's quoted labels take entity codes: quotes and markup characters must not pass raw.
    return (
        text.replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("\n", "<br/>")
    )


def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}"


def _node_caption(n: GraphNode) -> str:
    if n.kind != "agent":
        return f"{n.label}\n{n.calls} call(s)"
    facts = []
    if n.winner:
        facts.append("winner")
    if n.answers:
        facts.append(f"{n.answers} answer(s)")
    if n.restarts:
        facts.append(f"{n.restarts} restart(s)")
    usage = []
    if n.input_tokens or n.output_tokens:
        usage.append(f"{_short(n.input_tokens)} in / {_short(n.output_tokens)} out")
    if n.cost is not None:
        usage.append(format_cost(n.cost))
    lines = [n.label]
    if facts:
        lines.append(", ".join(facts))
    if usage:
        lines.append(" · ".join(usage))
    return "\n".join(lines)


def _edge_caption(e: GraphEdge) -> str:
    word = {
        "vote": "vote",
        "vote_discarded": "discarded vote",
        "restart": "restart",
        "handoff": "handoff",
        "tool": "call",
        "mcp": "call",
    }[e.kind]
    return f"{e.count} {word}{'s' if e.count != 1 else ''}"


def _bend(edges: Sequence[GraphEdge], edge: GraphEdge) -> float:
    """How far an edge bows out: edges between the same two nodes (either way) fan out."""
    same = [e for e in edges if {e.source, e.target} == {edge.source, edge.target}]
    # The perpendicular flips with the direction: A → B and B → A bow to opposite sides.
    return (same.index(edge) + 1) * 24.0 if edge.source != edge.target else 40.0


def _rim(ux: float, uy: float, box: bool) -> float:
    """The distance from a node's centre to its outline in direction (ux, uy)."""
    if box:  # a 190 × 32 box
        return min(97 / abs(ux) if ux else math.inf, 18 / abs(uy) if uy else math.inf)
    return 1 / math.sqrt((ux / 98) ** 2 + (uy / 36) ** 2)


def _edge_path(
    a: tuple[float, float], b: tuple[float, float], bend: float, box_b: bool = False
) -> tuple[str, tuple[float, float]]:
    (x1, y1), (x2, y2) = a, b
    if (x1, y1) == (x2, y2):  # a loop above the node
        return (
            f"M{x1 - 20:.1f},{y1 - 30:.1f} C{x1 - 50:.1f},{y1 - 90:.1f} {x1 + 50:.1f},{y1 - 90:.1f} "
            f"{x1 + 20:.1f},{y1 - 30:.1f}",
            (x1, y1 - 78),
        )
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length

    sx, sy = x1 + ux * _rim(ux, uy, False), y1 + uy * _rim(ux, uy, False)
    ex, ey = x2 - ux * _rim(ux, uy, box_b), y2 - uy * _rim(ux, uy, box_b)
    mx, my = (sx + ex) / 2 - uy * bend, (sy + ey) / 2 + ux * bend
    label = ((sx + ex) / 2 - uy * bend / 2 * 1.0, (sy + ey) / 2 + ux * bend / 2 * 1.0)
    return f"M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}", label


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _own_agent(span: SpanRow) -> str | None:
    for key in _AGENT_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def build_graph(trace_id: str, spans: Sequence[SpanRow]) -> CoordinationGraph:
    """The coordination graph of one trace from its spans (with their attributes and links)."""
    by_id = {s.span_id: s for s in spans}
    ordered = sorted(spans, key=lambda s: (s.start_us, s.end_us, s.span_id))
    agent_of: dict[str, str | None] = {}

    def agent(span: SpanRow) -> str | None:
        chain: list[str] = []
        current: SpanRow | None = span
        found: str | None = None
        while current is not None and current.span_id not in agent_of:
            chain.append(current.span_id)
            found = _own_agent(current)
            if found is not None:
                break
            parent = current.parent_span_id
            current = by_id.get(parent) if parent and parent not in chain else None
        else:
            if current is not None:
                found = agent_of[current.span_id]
        for span_id in chain:
            agent_of[span_id] = found
        return found

    graph = CoordinationGraph(trace_id)
    nodes: dict[str, GraphNode] = {}
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    round_usage: set[str] = set()
    llm_usage: dict[str, list[SpanRow]] = {}
    answer_agent: dict[str, str] = {}  # answer span id -> its agent
    last_answerer: str | None = None

    def agent_node(agent_id: str) -> GraphNode:
        if agent_id not in nodes:
            nodes[agent_id] = GraphNode(agent_id, "agent", agent_id)
        return nodes[agent_id]

    def edge(source: str, target: str, kind: str, span_id: str, label: str | None = None) -> None:
        e = edges.get((source, target, kind))
        if e is None:
            e = edges[(source, target, kind)] = GraphEdge(source, target, kind)
        e.count += 1
        e.span_ids.append(span_id)
        if label and label not in e.labels:
            e.labels.append(label)

    def add_usage(node: GraphNode, span: SpanRow, keys: tuple[str, str, str]) -> None:
        a = span.attributes
        node.input_tokens += _number(a.get(keys[0])) or 0
        node.output_tokens += _number(a.get(keys[1])) or 0
        value = a.get(keys[2])
        if keys[2] == semconv.MASTRACE_USAGE:  # an instrumented call's usage record: its cost
            record = loads_as(value, {}) if isinstance(value, str) else value
            value = record.get("cost") if isinstance(record, dict) else None
        cost = _number(value)
        if cost is not None:
            node.cost = (node.cost or 0.0) + cost

    for span in ordered:
        a, name = span.attributes, span.name
        who = agent(span)
        own = _own_agent(span)
        operation = a.get(semconv.GEN_AI_OPERATION_NAME)
        is_agent_span = (
            name.startswith(semconv.SPAN_AGENT_PREFIX) or operation == semconv.GEN_AI_OP_INVOKE_AGENT
        )
        if is_agent_span and own is not None:
            node = agent_node(own)
            node.rounds += 1
            node.span_ids.append(span.span_id)
            if a.get(semconv.MASSGEN_IS_WINNER) is True:
                node.winner = node.presented = True
            elif a.get(semconv.MASSGEN_ROUND_TYPE) == semconv.ROUND_TYPE_PRESENTATION:
                node.presented = True
            if any(k in a for k in (semconv.MASSGEN_USAGE_INPUT, semconv.MASSGEN_USAGE_OUTPUT)):
                round_usage.add(own)
                add_usage(
                    node,
                    span,
                    (
                        semconv.MASSGEN_USAGE_INPUT,
                        semconv.MASSGEN_USAGE_OUTPUT,
                        semconv.MASSGEN_USAGE_COST,
                    ),
                )
        if operation == semconv.GEN_AI_OP_INVOKE_AGENT and own is not None and span.parent_span_id:
            parent = by_id.get(span.parent_span_id)
            caller = agent(parent) if parent is not None else None
            if caller is not None and caller != own:
                agent_node(caller)
                edge(caller, own, "handoff", span.span_id)
        if name.startswith(_ANSWER) and who is not None:
            agent_node(who).answers += 1
            agent_node(who).span_ids.append(span.span_id)
            answer_agent[span.span_id] = who
            last_answerer = who
        elif name.startswith(_VOTE) and who is not None:
            target = a.get(semconv.MASSGEN_VOTED_FOR)
            if not isinstance(target, str) or not target:
                linked = [answer_agent.get(str(link.get("span_id"))) for link in span.links]
                target = next((t for t in linked if t), None)
            if target:
                agent_node(who)
                agent_node(target)
                discarded = a.get(semconv.MASSGEN_VOTE_DISCARDED) is True
                label = a.get(semconv.MASSGEN_VOTED_FOR_LABEL)
                edge(who, target, "vote_discarded" if discarded else "vote", span.span_id, label)
        elif name.startswith(_WINNER):
            winner = a.get(semconv.MASSGEN_WINNER) or who
            if isinstance(winner, str) and winner:
                agent_node(winner).winner = True
        elif (m := _RESTART.match(span.label)) is not None:
            restarted = own or m.group("agent")
            node = agent_node(restarted)
            node.restarts += 1
            edge(last_answerer or restarted, restarted, "restart", span.span_id)
        if span.span_type == "log" or who is None:
            continue
        tool = a.get(semconv.GEN_AI_TOOL_NAME)
        server = a.get(semconv.MASTRACE_MCP_SERVER)
        if not isinstance(server, str) and name.startswith(semconv.SPAN_MCP_PREFIX) and name.count(".") >= 2:
            server = name.split(".")[1]
        if isinstance(server, str) and server:
            target = f"mcp:{server}"
            if target not in nodes:
                nodes[target] = GraphNode(target, "mcp", f"MCP {server}")
            attempt = a.get(semconv.MASTRACE_TOOL_ATTEMPT)
            if not (isinstance(attempt, int) and attempt > 1):  # a retry is not a call of its own
                nodes[target].calls += 1
            nodes[target].span_ids.append(span.span_id)
            tool_name = tool if isinstance(tool, str) else name.split(".", 2)[-1]
            edge(who, target, "mcp", span.span_id, tool_name)
        elif (isinstance(tool, str) and tool) or name.startswith(_TOOL_EXECUTION):
            tool_name = tool if isinstance(tool, str) and tool else name[len(_TOOL_EXECUTION) :]
            if tool_name.startswith("mcp__"):  # MassGen's name for an MCP tool: its mcp.* span counts
                continue
            target = f"tool:{tool_name}"
            if target not in nodes:
                nodes[target] = GraphNode(target, "tool", tool_name)
            nodes[target].calls += 1
            nodes[target].span_ids.append(span.span_id)
            edge(who, target, "tool", span.span_id)
        elif operation in ("chat", "text_completion", "generate_content") or name.startswith(
            semconv.SPAN_LLM_PREFIX
        ):
            llm_usage.setdefault(who, []).append(span)
    for who, calls in llm_usage.items():
        if who in round_usage:
            continue  # the rounds carry the agent's usage already
        node = agent_node(who)
        for span in calls:
            add_usage(
                node,
                span,
                (
                    semconv.GEN_AI_USAGE_INPUT_TOKENS,
                    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
                    semconv.MASTRACE_USAGE,
                ),
            )
    agents = sorted((n for n in nodes.values() if n.kind == "agent"), key=lambda n: n.id)
    others = sorted((n for n in nodes.values() if n.kind != "agent"), key=lambda n: (n.kind, n.id))
    graph.nodes = agents + others
    graph.edges = sorted(edges.values(), key=lambda e: (EDGE_KINDS.index(e.kind), e.source, e.target))
    return graph
