"""The HTML waterfall as a document (the browser tests are in tests/cli/test_view.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mastrace.analysis import SpanRow, TraceStore, render_html

from .conftest import TraceWriter


@pytest.fixture
def page(synthetic: tuple[Path, str, TraceWriter]) -> str:
    path, trace_id, _ = synthetic
    with TraceStore(path) as store:
        return render_html(store.spans(trace_id))


def test_one_bar_per_span_with_depth(page: str, synthetic: tuple[Path, str, TraceWriter]) -> None:
    """Every span has one bar carrying its span id and nesting depth."""
    bars = re.findall(r'class="span-bar kind-(\w+)" data-depth="(\d+)" data-span-id="([0-9a-f]+)"', page)
    ids = synthetic[2].ids
    assert len(bars) == len(ids) == 25
    depth = {sid: int(d) for _, d, sid in bars}
    assert (depth[ids["session"]], depth[ids["a0"]], depth[ids["a0_t1"]], depth[ids["a0_read"]]) == (
        0,
        1,
        2,
        3,
    )


def test_bars_are_coloured_by_kind(page: str, synthetic: tuple[Path, str, TraceWriter]) -> None:
    """Session, rounds, LLM calls, tools, events and errors get their own classes."""
    ids = synthetic[2].ids
    kind = {
        sid: k
        for k, sid in re.findall(r'class="span-bar kind-(\w+)" data-depth="\d+" data-span-id="(\w+)"', page)
    }
    assert [kind[ids[k]] for k in ("session", "a0", "a0_llm", "a0_q", "ans1", "b0_w1", "a0_step")] == [
        "session",
        "agent",
        "llm",
        "tool",
        "event",
        "error",
        "other",
    ]


def test_page_is_self_contained(page: str) -> None:
    """No external script, stylesheet or image is referenced."""
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert 'id="attr-panel"' in page and "<style>" in page


def test_values_cannot_close_the_script_tag() -> None:
    """An attribute containing `</script>` is escaped inside the embedded JSON."""
    row = SpanRow(
        trace_id="a" * 32,
        span_id="b" * 16,
        parent_span_id=None,
        name="x",
        start_us=0,
        end_us=10,
        duration=1e-5,
        attributes={"payload": "</script><script>alert(1)</script>"},
    )
    html = render_html([row])
    assert html.count("</script>") == 2
    assert "\\u003c/script\\u003e" in html


def test_render_trace_html_draws_what_render_html_draws(tmp_path: Path) -> None:
    """Read from the store with only the drawn spans in full, the page is `render_html`'s."""
    from mastrace.analysis import render_trace_html

    from .conftest import TraceWriter

    writer = TraceWriter(tmp_path / "store")
    writer.span("root", "coordination.session", 0, 100)
    for a in range(3):
        writer.span(f"r{a}", f"agent.a{a}.round_0", 1 + a, 60 + a, "root", **{"massgen.agent_id": f"a{a}"})
        for c in range(3):
            error = RuntimeError("boom") if (a, c) == (2, 2) else None
            writer.span(f"c{a}{c}", f"llm.openai.stream {a}.{c}", 2 + a + c, 5 + a + c, f"r{a}", error=error)
    writer.provider.shutdown()
    with TraceStore(tmp_path / "store") as store:
        trace_id = store.resolve("latest")
        everything = store.spans(trace_id)
        for limit in (1, 5, 9, 13, 20_000):
            assert render_trace_html(store, trace_id, max_spans=limit) == render_html(
                everything, max_spans=limit
            )


def test_the_garbage_collector_is_paused_only_while_a_view_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`render_trace_html` pauses Python's cyclic collector while it builds the page, and leaves it as
    it found it: running again afterwards (also after an error), still off if it was off."""
    import gc

    from mastrace.analysis import _html, render_trace_html
    from mastrace.exceptions import StoreError

    writer = TraceWriter(tmp_path / "store")
    writer.span("root", "coordination.session", 0, 10)
    writer.provider.shutdown()
    seen: list[bool] = []
    page_of = _html._page
    monkeypatch.setattr(_html, "_page", lambda *a: seen.append(gc.isenabled()) or page_of(*a))
    with TraceStore(tmp_path / "store") as store:
        tid = store.resolve("latest")
        assert gc.isenabled()
        render_trace_html(store, tid)
        assert seen == [False] and gc.isenabled()
        with pytest.raises(StoreError):
            render_trace_html(store, "f" * 32)
        assert gc.isenabled()
        gc.disable()
        try:
            render_trace_html(store, tid)
            assert not gc.isenabled()
        finally:
            gc.enable()
