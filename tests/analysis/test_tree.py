"""The span tree: nesting, ordering, box-drawing rendering and error marks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mastrace.analysis import SpanRow, TraceStore, render_trace, render_tree
from mastrace.analysis._tree import build_tree, walk

from .conftest import TraceWriter


def _row(span_id: str, parent: str | None, start: int, name: str | None = None, **kw: object) -> SpanRow:
    return SpanRow(
        trace_id="t" * 32,
        span_id=span_id,
        parent_span_id=parent,
        name=name or span_id,
        start_us=start,
        end_us=start + 1000,
        duration=0.001,
        **kw,
    )  # type: ignore[arg-type]


def test_children_are_ordered_by_start_and_get_depths() -> None:
    """Children sort by start time and each node knows its depth."""
    roots = build_tree(
        [
            _row("root", None, 0),
            _row("late", "root", 50),
            _row("early", "root", 10),
            _row("leaf", "early", 20),
        ]
    )
    assert [(n.span.span_id, n.depth) for n in walk(roots)] == [
        ("root", 0),
        ("early", 1),
        ("leaf", 2),
        ("late", 1),
    ]


def test_span_with_missing_parent_becomes_a_root() -> None:
    """A span whose parent is not in the trace is shown as a root instead of being lost."""
    roots = build_tree([_row("a", None, 0), _row("orphan", "not-stored", 5)])
    assert [r.span.span_id for r in roots] == ["a", "orphan"]


def test_render_uses_box_drawing_and_marks_errors(synthetic: tuple[Path, str, TraceWriter]) -> None:
    """The text tree indents with box-drawing branches and marks failed spans with ✗ and the exception."""
    path, trace_id, _ = synthetic
    with TraceStore(path) as store:
        text = render_tree(store.spans(trace_id))
    lines = text.splitlines()
    assert lines[0].startswith("coordination.session  10.00s")
    assert any(line.startswith("├── agent.agent_a.round_0  5.00s") for line in lines)
    assert any(line.startswith("│   ├── Tool execution: t1") for line in lines)
    assert any(line.startswith("│   │   └── mcp.fs.read") for line in lines)
    failed = next(line for line in lines if "✗ mcp.fs.write" in line)
    assert failed.endswith("✗ PermissionError: read-only mount")
    assert len(lines) == 25


def test_render_shows_key_attributes(synthetic: tuple[Path, str, TraceWriter]) -> None:
    """Rounds show type, outcome, tokens and cost; votes show who they were for."""
    path, trace_id, _ = synthetic
    with TraceStore(path) as store:
        text = render_tree(store.spans(trace_id))
    round_line = next(line for line in text.splitlines() if "agent.agent_a.round_0" in line)
    assert (
        "type=initial_answer  outcome=answer  answer=agent1.1  in=1000  out=200  cached=400  cost=$0.01"
        in round_line
    )
    vote_line = next(line for line in text.splitlines() if "Agent vote: agent_a" in line)
    assert "• +6.20s" in vote_line and "voted_for=agent_b" in vote_line


def test_max_spans_cuts_the_output_with_a_note() -> None:
    """With `max_spans`, the rest is summarised in one line."""
    rows = [_row("root", None, 0)] + [_row(f"c{i}", "root", i + 1) for i in range(5)]
    text = render_tree(rows, max_spans=3)
    assert text.splitlines()[-1] == "… 3 more span(s) not shown (raise --max-spans)"
    assert len(text.splitlines()) == 4


def test_render_trace_prints_what_render_tree_prints_at_every_cut(tmp_path: Path) -> None:
    """`render_trace` reads only the printed spans in full; its text is `render_tree`'s, also when
    the limit cuts through a list of siblings or an orphan's subtree."""
    writer = TraceWriter(tmp_path / "store")
    writer.span("root", "coordination.session", 0, 100)
    for a in range(3):
        writer.span(f"r{a}", f"agent.a{a}.round_0", 1 + a, 60 + a, "root", **{"massgen.agent_id": f"a{a}"})
        for c in range(4):
            writer.span(f"c{a}{c}", f"llm.openai.stream {a}.{c}", 2 + a + c, 5 + a + c, f"r{a}")
    writer.span("tie1", "tie", 70, 80, "root")
    writer.span("tie2", "tie", 70, 80, "root")  # same start and end: ordered by span id
    writer.provider.shutdown()
    with TraceStore(tmp_path / "store") as store:
        trace_id = store.resolve("latest")
        everything = store.spans(trace_id)
        for limit in (None, 1, 2, 3, 7, 8, 15, 17, 18, 100):
            assert render_trace(store, trace_id, max_spans=limit) == render_tree(
                everything, max_spans=limit
            ), limit


def test_render_trace_handles_orphans_self_parents_and_cycles_like_render_tree(tmp_path: Path) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    from mastrace.store import LocalStoreExporter

    trace_id = 0xABC
    flags = TraceFlags(TraceFlags.SAMPLED)

    def span(span_id: int, parent: int | None, start: int) -> ReadableSpan:
        return ReadableSpan(
            name=f"s{span_id}",
            context=SpanContext(trace_id, span_id, False, flags),
            parent=SpanContext(trace_id, parent, False, flags) if parent else None,
            resource=Resource({}),
            attributes={},
            start_time=start * 1_000_000,
            end_time=start * 1_000_000 + 500_000,
        )

    exporter = LocalStoreExporter(tmp_path / "store")
    exporter.export(
        [
            span(1, None, 1),
            span(2, 1, 2),
            span(3, 99, 3),  # parent not in the trace: a root
            span(4, 3, 4),
            span(5, 5, 5),  # its own parent: a root
            span(6, 7, 6),  # 6 and 7 are each other's parent: never reached from a root
            span(7, 6, 7),
        ]
    )
    exporter.shutdown()
    with TraceStore(tmp_path / "store") as store:
        tid = store.resolve("latest")
        everything = store.spans(tid)
        for limit in (None, 1, 2, 3, 4, 5, 6):
            assert render_trace(store, tid, max_spans=limit) == render_tree(everything, max_spans=limit), (
                limit
            )


def _random_forest(tmp_path: Path, seed: int, max_segment_bytes: int) -> Path:
    """A trace of random shape written into many small segments: wide and deep parts, roots,
    orphans, self-parents, ties on start and end, errors."""
    import random

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    from mastrace.store import LocalStoreExporter

    rng = random.Random(seed)
    flags = TraceFlags(TraceFlags.SAMPLED)
    spans: list[ReadableSpan] = []
    ids = [rng.getrandbits(63) | 1 for _ in range(rng.randint(30, 400))]
    for n, span_id in enumerate(ids):
        roll = rng.random()
        if n == 0 or roll < 0.04:
            parent: int | None = None
        elif roll < 0.06:
            parent = rng.getrandbits(62) | 2  # not in the trace: an orphan root
        elif roll < 0.07:
            parent = span_id  # its own parent
        else:  # mostly recent spans as parents: deep chains and wide fans
            parent = ids[max(0, n - 1 - int(rng.expovariate(0.3)))] if rng.random() < 0.7 else ids[0]
        start = rng.choice([5, 5, 7]) if rng.random() < 0.2 else rng.randint(0, 10_000)  # ties
        ctx = SpanContext(0xABC, span_id, False, flags)
        spans.append(
            ReadableSpan(
                name=f"s{n}",
                context=ctx,
                parent=SpanContext(0xABC, parent, False, flags) if parent else None,
                resource=Resource({}),
                attributes={"massgen.round": n},
                status=Status(StatusCode.ERROR, "x") if rng.random() < 0.1 else Status(StatusCode.UNSET),
                start_time=start * 1_000_000,
                end_time=(start + rng.choice([1, 1, 3])) * 1_000_000,
            )
        )
    rng.shuffle(spans)  # written in any order, as concurrent tasks end them
    exporter = LocalStoreExporter(tmp_path / "store", max_segment_bytes=max_segment_bytes)
    for i in range(0, len(spans), 7):
        exporter.export(spans[i : i + 7])
    exporter.shutdown()
    return tmp_path / "store"


@pytest.mark.parametrize("skeletons", ["all", "none", "some"])
def test_render_trace_matches_render_tree_on_random_shapes_across_segments(
    tmp_path: Path, skeletons: str
) -> None:
    """The pruned, level-by-level walk finds exactly `build_tree`'s first spans, whatever the shape,
    and reads them from the segment files that hold them: through their skeleton files, from their
    JSON (a store written before skeleton files existed), or a mix of both."""
    from mastrace.store.reader import segment_files

    for seed in range(12 if skeletons == "all" else 4):  # the others are the rarer paths
        path = _random_forest(tmp_path / str(seed), seed, max_segment_bytes=4_000)
        assert len(segment_files(path)) > 3
        skeleton_files = sorted((path / "skeleton").iterdir())
        assert len(skeleton_files) == len(segment_files(path))
        for drop in {"all": [], "none": skeleton_files, "some": skeleton_files[seed % 2 :: 2]}[skeletons]:
            drop.unlink()
        with TraceStore(path) as store:
            tid = store.resolve("latest")
            everything = store.spans(tid)
            for limit in (None, 0, 1, 2, 3, 5, 10, 37, 100, 250, 1000):
                assert render_trace(store, tid, max_spans=limit) == render_tree(
                    everything, max_spans=limit
                ), (seed, limit)


def test_view_counts_the_errors_of_the_whole_trace(tmp_path: Path) -> None:
    from mastrace.analysis import render_trace_html

    path = _random_forest(tmp_path, 3, max_segment_bytes=4_000)
    with TraceStore(path) as store:
        tid = store.resolve("latest")
        errors = sum(s.is_error for s in store.spans(tid))
        assert errors > 0
        page = render_trace_html(store, tid, max_spans=5)
        assert f"· {errors} with errors" in page


def test_spans_from_named_files_fall_back_to_every_file(tmp_path: Path) -> None:
    """Reading the shown spans from the files that held them still works when a file went away."""
    path = _random_forest(tmp_path, 5, max_segment_bytes=4_000)
    with TraceStore(path) as store:
        tid = store.resolve("latest")
        ids = [s.span_id for s in store.spans(tid)][:20]
        got = store.spans(tid, only=ids, files=[str(path / "segments" / "gone.ndjson")])
        assert sorted(s.span_id for s in got) == sorted(ids)


def test_a_parent_cycle_is_shown_with_a_note_not_hidden() -> None:
    """Spans that are each other's parent (no root reaches them) hang under one of them, noted."""
    roots = build_tree([_row("a", None, 0), _row("x", "z", 10), _row("y", "x", 20), _row("z", "y", 30)])
    shown = [(n.span.span_id, n.depth, n.note) for n in walk(roots)]
    assert [s[:2] for s in shown] == [("a", 0), ("x", 0), ("y", 1), ("z", 2)]
    assert "parent cycle" in shown[1][2] and shown[2][2] == shown[3][2] == ""
    assert "⚠ in a parent cycle" in render_tree([_row("x", "y", 10), _row("y", "x", 20)])


def test_a_reused_span_id_is_shown_once_with_a_note() -> None:
    """Two different spans with one id: the one that ended last is shown, with a note; an exact
    copy is simply shown once."""
    first, second = _row("r", None, 0, name="first"), _row("r", None, 5, name="second")
    (root,) = build_tree([first, second, _row("c", "r", 7)])
    assert root.span.name == "second" and "stored 2 times with different content" in root.note
    assert [c.span.span_id for c in root.children] == ["c"]
    (plain,) = build_tree([first, first])
    assert plain.note == "" and plain.children == []


def _write(store: Path, rows: list[tuple[int, int | None, int, str]]) -> None:
    """Spans (id, parent, start ms, name) of one trace, written as the store's writer writes them."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    from mastrace.store import LocalStoreExporter

    flags = TraceFlags(TraceFlags.SAMPLED)
    exporter = LocalStoreExporter(store)
    exporter.export(
        [
            ReadableSpan(
                name=name,
                context=SpanContext(0xABC, span_id, False, flags),
                parent=SpanContext(0xABC, parent, False, flags) if parent else None,
                resource=Resource({}),
                start_time=start * 1_000_000,
                end_time=start * 1_000_000 + 500_000,
            )
            for span_id, parent, start, name in rows
        ]
    )
    exporter.shutdown()


def test_tree_and_view_of_a_store_note_cycles_and_reused_ids(tmp_path: Path) -> None:
    """From the skeleton files too: a cycle's spans and a reused id are drawn, with their notes."""
    from mastrace.analysis import render_trace_html

    store = tmp_path / "store"
    _write(store, [(1, None, 1, "root"), (2, 1, 2, "child"), (6, 7, 6, "six"), (7, 6, 7, "seven")])
    _write(store, [(2, 1, 3, "child again")])  # the same id, other content, ending later
    with TraceStore(store) as traces:
        trace_id = traces.resolve("latest")
        text = render_trace(traces, trace_id, max_spans=None)
        page = render_trace_html(traces, trace_id)
    lines = text.splitlines()
    assert len(lines) == 4 and "more span" not in text
    assert lines[1].startswith("└── child again") and "stored 2 times with different content" in lines[1]
    assert lines[2].startswith("six") and "in a parent cycle" in lines[2]
    assert lines[3].startswith("└── seven")
    assert page.count('class="row"') == 4 and page.count("in a parent cycle") >= 1
