"""What `analyze`, `runs` and `diff` say about cost and votes: significant digits, an unknown cost
shown as unknown with its models named (never `$0`), votes MassGen discarded shown and not counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from mastrace.analysis import TraceStore, build_report, render_markdown
from mastrace.analysis._kinds import format_cost
from mastrace.analysis._tree import render_runs

from .conftest import TraceWriter, agent, usage


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.00018, "$0.00018"),
        (0.000183456, "$0.000183"),
        (0.028908, "$0.0289"),
        (0.1, "$0.10"),
        (1234.567, "$1,234.57"),
        (0.0, "$0"),
        (5e-9, "$0.000000005"),
        (-0.002, "-$0.002"),
        (None, "-"),
        (float("nan"), "—"),  # not a number a cost can be: unknown, as a sender may have recorded it
        (float("inf"), "—"),
        (float("-inf"), "—"),
    ],
)
def test_costs_print_with_enough_digits_to_be_non_zero(value: float | None, text: str) -> None:
    """One small call's cost never rounds to $0.0000."""
    assert format_cost(value) == text


def test_a_partly_unpriced_cost_shows_the_known_part_and_names_the_models() -> None:
    """A cost with unpriced calls keeps its known part and names the unpriced models; with no known
    part it is `—` with the models, never `$0`."""
    assert format_cost(0.0369, ["house-model-c"]) == "$0.0369 + unpriced: house-model-c"
    assert format_cost(0.5, ["house-model", "fake-c"]) == "$0.50 + unpriced: house-model, fake-c"
    assert format_cost(0.0, ["m"]) == "— (no price for m)"
    assert format_cost(None, ["m"]) == "— (no price for m)"
    assert format_cost(float("nan"), ["m"]) == "— (no price for m)"


def _session(w: TraceWriter, *, unknown: bool) -> str:
    w.span("session", "coordination.session", 0, 10_000, **{"massgen.task": "t"})
    a0 = {**agent("agent_a", 0, "initial_answer"), "massgen.outcome": "answer", **usage(100, 10, 0, 0.00018)}
    b0 = {**agent("agent_b", 0, "initial_answer"), "massgen.outcome": "answer", **usage(100, 10, 0, 0.0)}
    w.span("a0", "agent.agent_a.round_0", 100, 2_000, "session", **a0)
    w.span("b0", "agent.agent_b.round_0", 100, 2_500, "session", **b0, **{"mastrace.cost.unknown": unknown})
    w.span("b0_llm", "llm.openai.stream", 200, 2_400, "b0", **{"massgen.agent_id": "agent_b",
           "gen_ai.usage.input_tokens": 100, "mastrace.cost.unknown": unknown,
           "mastrace.cost.unknown_models": ["house-model"] if unknown else []})  # fmt: skip
    w.log("ans1", "Agent answer: agent1.1", 2_000, "session", **{"massgen.agent_id": "agent_a",
          "massgen.answer_label": "agent1.1"})  # fmt: skip
    w.log("v_old", "Agent vote: agent_b -> agent1.1", 2_100, "session", **{"massgen.agent_id": "agent_b",
          "massgen.voted_for_label": "agent1.1", "massgen.vote.reason": "first seen",
          "massgen.vote.discarded": True})  # fmt: skip
    w.log("ans2", "Agent answer: agent2.1", 2_500, "session", **{"massgen.agent_id": "agent_b",
          "massgen.answer_label": "agent2.1"})  # fmt: skip
    w.log("v_new", "Agent vote: agent_b -> agent2.1", 3_000, "session", **{"massgen.agent_id": "agent_b",
          "massgen.voted_for_label": "agent2.1", "massgen.vote.reason": "more complete"})  # fmt: skip
    return w.trace_id()


def test_analyze_shows_an_unknown_cost_and_names_the_model(writer: TraceWriter, tmp_path: Path) -> None:
    """The overview keeps the known part and names the unpriced model; the agent whose only call has
    no price shows its cost as unknown (house-model), never `$0`."""
    trace_id = _session(writer, unknown=True)
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, trace_id)
        runs = render_runs(store.runs())
    text = render_markdown(report)
    assert "| Total Cost | $0.00018 + unpriced: house-model |" in text
    row = next(line for line in text.splitlines() if line.startswith("| agent_b |") and "—" in line)
    assert "no price for house-model" in row and "$0 " not in row
    assert "| agent_a |" in text and "$0.00018" in text
    assert "$0.00018 + unpriced: house-model" in runs


def test_analyze_prices_a_fully_priced_run(writer: TraceWriter, tmp_path: Path) -> None:
    """Without unpriced calls, the total is the sum with significant digits."""
    trace_id = _session(writer, unknown=False)
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, trace_id)
    assert report.overview.cost_unknown_models == []
    assert "| Total Cost | $0.00018 |" in render_markdown(report)


def test_discarded_votes_are_listed_but_not_counted(writer: TraceWriter, tmp_path: Path) -> None:
    """MassGen counts one vote here (the second); the discarded one is shown as such, with reasons."""
    trace_id = _session(writer, unknown=False)
    with TraceStore(tmp_path / "store") as store:
        report = build_report(store, trace_id)
    assert (report.overview.votes, report.overview.discarded_votes) == (1, 1)
    assert [(v.label, v.discarded, v.reason) for v in report.votes] == [
        ("agent1.1", True, "first seen"),
        ("agent2.1", False, "more complete"),
    ]
    text = render_markdown(report)
    assert "| Total Votes | 1 |" in text and "| Discarded Votes | 1 |" in text
    assert "| first seen | discarded (a new answer came after it) |" in text


def test_the_tree_shows_an_unknown_cost_as_unknown(writer: TraceWriter, tmp_path: Path) -> None:
    """`mastrace tree` writes `cost=— (no price for ...)` on the call, never `cost=$0`."""
    from mastrace.analysis import render_tree

    trace_id = _session(writer, unknown=True)
    with TraceStore(tmp_path / "store") as store:
        text = render_tree(store.spans(trace_id))
    line = next(line for line in text.splitlines() if "llm.openai.stream" in line)
    assert "cost=— (no price for house-model)" in line and "cost=$0" not in line


def test_diff_and_runs_carry_the_cost_as_printed(writer: TraceWriter, tmp_path: Path) -> None:
    """The UI's JSON has the costs formatted by mastrace: unknown stays unknown in a diff."""
    from mastrace.analysis import diff_reports

    unknown = _session(writer, unknown=True)
    writer.offset_ms = 60_000
    writer.spans.clear()
    known = _session(writer, unknown=False)
    with TraceStore(tmp_path / "store") as store:
        data = diff_reports(build_report(store, known), build_report(store, unknown)).to_dict()
        runs = {r.trace_id: r.cost_text for r in store.runs()}
    assert data["total"]["cost_text_a"] == "$0.00018"
    assert (
        data["total"]["cost_text_b"] == "$0.00018 + unpriced: house-model"
        and data["total"]["cost_text_delta"] == "—"
    )
    assert runs == {known: "$0.00018", unknown: "$0.00018 + unpriced: house-model"}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the anthropic SDK dates its models
def test_llm_calls_priced_without_agent_spans_cost_what_they_cost(
    tmp_path: Path, peer: str, instrumented_llms: None
) -> None:
    """A program of plain SDK calls (no agent spans) priced by genai-prices: `runs` and the report
    total the calls' prices instead of showing no cost at all, and each call's line in `tree` and
    the UI's waterfall shows its own price."""
    import mastrace
    from genai_peer import anthropic_client
    from mastrace.store import query

    mastrace.configure(local=tmp_path / "store", synchronous=True)
    with mastrace.get_tracer().span("my.app.run"):
        for _ in range(3):
            anthropic_client(peer).messages.create(
                model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
    mastrace.shutdown()
    priced = query(
        "SELECT sum((attributes->'mastrace.usage'->>'cost')::DOUBLE) AS cost FROM records "
        "WHERE attributes->>'mastrace.cost.source' = 'genai-prices'",
        tmp_path / "store",
    )[0]["cost"]
    assert priced > 0
    with TraceStore(tmp_path / "store") as store:
        (run,) = store.runs()
        report = build_report(store, run.trace_id)
    assert run.cost == pytest.approx(priced) and run.cost_text == format_cost(priced)
    assert report.overview.total_cost == pytest.approx(priced)
    assert sum(row.cost or 0 for row in report.usage) == pytest.approx(priced)

    from mastrace.analysis import render_tree
    from mastrace.serve._ui_pages import waterfall_rows

    with TraceStore(tmp_path / "store") as store:
        calls = [s for s in store.spans(run.trace_id) if s.name.startswith("llm.")]
        text = render_tree(store.spans(run.trace_id))
        lines = [line for line in text.splitlines() if "llm." in line]
        rows = [r for r in waterfall_rows(store, run.trace_id) if r["kind"] == "llm"]
    each = [s.attributes["mastrace.usage"]["cost"] for s in calls]
    assert len(each) == len(lines) == len(rows) == 3 and all(c > 0 for c in each)
    assert [line.count(f"cost={format_cost(c)}") for line, c in zip(lines, each, strict=True)] == [1, 1, 1]
    assert [r["keys"]["cost"] for r in rows] == pytest.approx(each)
    assert "cost=" not in next(line for line in text.splitlines() if "my.app.run" in line)


@pytest.mark.parametrize("order", [(0.1, 0.2, 0.3), (0.3, 0.2, 0.1), (0.2, 0.3, 0.1)])
def test_a_cost_total_does_not_depend_on_the_order_spans_are_read(
    tmp_path: Path, order: tuple[float, float, float]
) -> None:
    """Floating-point costs summed in another order (another DuckDB version, thread or page size)
    give the same total (to 1e-12 USD), in `runs`, the report and its per-agent rows."""
    import math

    w = TraceWriter(tmp_path / "store")
    w.span("session", "coordination.session", 0, 10_000, **{"massgen.task": "t"})
    for i, cost in enumerate(order):
        attrs = {**agent("agent_a", i, "initial_answer"), **usage(10, 1, 0, cost)}
        w.span(f"a{i}", f"agent.agent_a.round_{i}", 100 + i * 1_000, 900 + i * 1_000, "session", **attrs)
    with TraceStore(tmp_path / "store") as store:
        (run,) = store.runs()
        report = build_report(store, run.trace_id)
    exact = round(math.fsum(order), 12)  # 0.6; summed left to right, (0.1 + 0.2) + 0.3 is 0.6000000000000001
    assert run.cost == exact
    assert report.overview.total_cost == exact
    assert [row.cost for row in report.usage] == [exact]
