"""Context propagation: threads, executors, asyncio helpers, and child processes (`tracing/_context.py`)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from opentelemetry import trace

import mastrace
from mastrace import semconv
from mastrace.testing import CapturedSpans, capture_spans
from mastrace.tracing import _context

AGENT_IDS = ["agent_a", "agent_b", "agent_c"]
tracer = mastrace.get_tracer()
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def agent_round(agent_id: str) -> str:
    """One agent round with an LLM call and a tool call inside, as a worker would run it."""
    with tracer.span(f"agent.{agent_id}.round_1"):
        with tracer.span("llm.openai.stream", attributes={semconv.MASSGEN_AGENT_ID: agent_id}):
            pass
        with tracer.span("mcp.filesystem.read_file", attributes={semconv.MASSGEN_AGENT_ID: agent_id}):
            pass
    return agent_id


async def agent_round_async(agent_id: str) -> str:
    """The async twin of `agent_round`."""
    with tracer.span(f"agent.{agent_id}.round_1"):
        with tracer.span("llm.openai.stream", attributes={semconv.MASSGEN_AGENT_ID: agent_id}):
            await asyncio.sleep(0)
        with tracer.span("mcp.filesystem.read_file", attributes={semconv.MASSGEN_AGENT_ID: agent_id}):
            await asyncio.sleep(0)
    return agent_id


def _parent_name(spans: CapturedSpans, name: str) -> str | None:
    parent = spans.parent_of(spans.one(name))
    return parent.name if parent is not None else None


def assert_session_tree(spans: CapturedSpans) -> None:
    """Every round is a child of the session and every llm/mcp span a child of its own agent's round."""
    session = spans.one(semconv.SPAN_COORDINATION_SESSION)
    assert spans.parent_of(session) is None
    for agent_id in AGENT_IDS:
        assert _parent_name(spans, f"agent.{agent_id}.round_1") == semconv.SPAN_COORDINATION_SESSION
    children = [s for s in spans.spans if s.name.startswith(("llm.", "mcp."))]
    assert len(children) == 2 * len(AGENT_IDS)
    for child in children:
        parent = spans.parent_of(child)
        assert parent is not None
        assert parent.name == f"agent.{child.attributes[semconv.MASSGEN_AGENT_ID]}.round_1"  # type: ignore[index]


# --- threads and executors (propagate_threads=True is the default) ---------------------------------
def test_thread_pool_submit_carries_the_context() -> None:
    """Rounds submitted to a ThreadPoolExecutor nest under the session that submitted them."""
    with capture_spans() as spans:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION), ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(agent_round, a) for a in AGENT_IDS]
            assert [f.result() for f in futures] == AGENT_IDS
        assert_session_tree(spans)


def test_thread_pool_map_carries_the_context() -> None:
    """Rounds run through ThreadPoolExecutor.map nest under the session."""
    with capture_spans() as spans:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION), ThreadPoolExecutor(max_workers=2) as pool:
            assert list(pool.map(agent_round, AGENT_IDS)) == AGENT_IDS
        assert_session_tree(spans)


def test_threading_thread_carries_the_context() -> None:
    """Rounds run on plain `threading.Thread`s nest under the session that started them."""
    with capture_spans() as spans:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            threads = [threading.Thread(target=agent_round, args=(a,)) for a in AGENT_IDS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert_session_tree(spans)


def test_threads_carry_every_context_variable() -> None:
    """A worker thread sees the caller's own context variables, not only the OpenTelemetry one."""
    seen: list[str] = []
    with capture_spans():
        token = request_id.set("req-42")
        try:
            thread = threading.Thread(target=lambda: seen.append(request_id.get()))
            thread.start()
            thread.join()
            with ThreadPoolExecutor(max_workers=1) as pool:
                seen.append(pool.submit(request_id.get).result())
        finally:
            request_id.reset(token)
    assert seen == ["req-42", "req-42"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup needs Python 3.11")
def test_task_group_carries_the_context() -> None:
    """Rounds started in an asyncio.TaskGroup nest under the session."""

    async def main() -> None:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined]
                for agent_id in AGENT_IDS:
                    group.create_task(agent_round_async(agent_id))

    with capture_spans() as spans:
        asyncio.run(main())
        assert_session_tree(spans)


def test_to_thread_carries_the_context() -> None:
    """Rounds run with asyncio.to_thread nest under the session."""

    async def main() -> list[str]:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            return list(await asyncio.gather(*(asyncio.to_thread(agent_round, a) for a in AGENT_IDS)))

    with capture_spans() as spans:
        assert asyncio.run(main()) == AGENT_IDS
        assert_session_tree(spans)


def test_run_in_executor_carries_the_context() -> None:
    """Rounds run with loop.run_in_executor (default executor) nest under the session."""

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            return list(
                await asyncio.gather(*(loop.run_in_executor(None, agent_round, a) for a in AGENT_IDS))
            )

    with capture_spans() as spans:
        assert asyncio.run(main()) == AGENT_IDS
        assert_session_tree(spans)


def test_wrap_carries_the_context_without_thread_patching() -> None:
    """With propagate_threads=False, `mastrace.wrap(fn)` still runs fn in the caller's context."""
    with capture_spans(propagate_threads=False) as spans:
        assert not _context.threads_patched()
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            threads = [threading.Thread(target=mastrace.wrap(agent_round), args=(a,)) for a in AGENT_IDS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert_session_tree(spans)


def test_wrapped_function_runs_on_several_threads_at_once() -> None:
    """One `mastrace.wrap`ped function can run concurrently on several threads and call itself."""
    barrier = threading.Barrier(3)

    def work(depth: int) -> str:
        if depth == 0:
            barrier.wait(timeout=30)
            return request_id.get()
        return bound(depth - 1)

    token = request_id.set("bound")
    try:
        bound = mastrace.wrap(work)
    finally:
        request_id.reset(token)
    with capture_spans(propagate_threads=False), ThreadPoolExecutor(max_workers=3) as pool:
        assert list(pool.map(bound, [1, 1, 1])) == ["bound"] * 3


def test_wrapped_function_calls_do_not_leak_context_changes() -> None:
    """Context variables one call of a wrapped function sets are not seen by the next call."""

    def bump() -> str:
        previous = request_id.get()
        request_id.set("changed")
        return previous

    bound = mastrace.wrap(bump)
    assert [bound(), bound()] == ["unset", "unset"]


def test_wrapped_function_submitted_to_a_patched_pool_nests_once() -> None:
    """A `mastrace.wrap`ped function submitted to a patched pool runs in the context it was bound to."""
    with capture_spans() as spans:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION), ThreadPoolExecutor(max_workers=1) as pool:
            bound = mastrace.wrap(agent_round)
            pool.submit(bound, AGENT_IDS[0]).result()
        assert _parent_name(spans, f"agent.{AGENT_IDS[0]}.round_1") == semconv.SPAN_COORDINATION_SESSION


def test_unpatched_thread_does_not_inherit_the_context() -> None:
    """Negative control: with propagate_threads=False a plain Thread starts with an empty context."""
    with capture_spans(propagate_threads=False) as spans:
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            thread = threading.Thread(target=agent_round, args=(AGENT_IDS[0],))
            thread.start()
            thread.join()
        assert _parent_name(spans, f"agent.{AGENT_IDS[0]}.round_1") is None


def test_reconfiguring_without_propagation_unpatches_threads() -> None:
    """configure(propagate_threads=False) after the default removes the thread patches."""
    original_submit = ThreadPoolExecutor.submit
    with capture_spans():
        assert _context.threads_patched()
        assert ThreadPoolExecutor.submit is not original_submit
    with capture_spans(propagate_threads=False):
        assert not _context.threads_patched()
        assert ThreadPoolExecutor.submit is original_submit


# --- asyncio helpers -------------------------------------------------------------------------------
def test_create_task_runs_in_a_copy_of_the_current_context() -> None:
    """`mastrace.create_task` nests the task's spans under the caller's span and isolates its changes."""

    async def child() -> str:
        request_id.set("changed-in-task")
        return await agent_round_async(AGENT_IDS[0])

    async def main() -> str:
        request_id.set("outer")
        with tracer.span(semconv.SPAN_COORDINATION_SESSION):
            await mastrace.create_task(child(), name="agent-task")
        return request_id.get()

    with capture_spans() as spans:
        assert asyncio.run(main()) == "outer"
        assert _parent_name(spans, f"agent.{AGENT_IDS[0]}.round_1") == semconv.SPAN_COORDINATION_SESSION


def test_create_task_without_a_running_loop_raises() -> None:
    """`mastrace.create_task` outside a running event loop raises RuntimeError."""
    coro = agent_round_async(AGENT_IDS[0])
    with pytest.raises(RuntimeError, match="running event loop"):
        mastrace.create_task(coro)
    coro.close()


def test_context_awaitable_runs_every_step_in_its_context() -> None:
    """`ContextAwaitable` runs each step of a coroutine in the given context, not the awaiting task's."""
    seen: list[str] = []

    async def body() -> str:
        for _ in range(3):
            seen.append(request_id.get())
            await asyncio.sleep(0)
        return "done"

    async def main() -> str:
        request_id.set("task")
        ctx = contextvars.copy_context()
        ctx.run(request_id.set, "pinned")
        return await _context.ContextAwaitable(ctx, body())

    assert asyncio.run(main()) == "done"
    assert seen == ["pinned"] * 3


def test_context_awaitable_forwards_cancellation() -> None:
    """Cancelling the task awaiting a `ContextAwaitable` raises CancelledError inside the coroutine."""
    cancelled: list[bool] = []

    async def body() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        task = asyncio.create_task(_await_in(contextvars.copy_context(), body()))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled == [True]


async def _await_in(ctx: contextvars.Context, coro: object) -> object:
    return await _context.ContextAwaitable(ctx, coro)  # type: ignore[arg-type]


# --- processes -------------------------------------------------------------------------------------
def test_inject_env_describes_the_current_span() -> None:
    """`inject_env()` sets TRACEPARENT to the current span's trace and span ids."""
    with capture_spans(), tracer.span(semconv.SPAN_COORDINATION_SESSION) as span:
        env = mastrace.inject_env({"PATH": "/bin"})
        ctx = span.span_context
    assert ctx is not None
    assert env["PATH"] == "/bin"
    version, trace_id, span_id, flags = env["TRACEPARENT"].split("-")
    assert (version, trace_id, span_id) == ("00", f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")
    assert int(flags, 16) & 0x01  # sampled


def test_inject_env_without_a_span_removes_a_stale_traceparent() -> None:
    """Outside any span, `inject_env()` drops TRACEPARENT/TRACESTATE inherited from the parent environment."""
    env = mastrace.inject_env({"TRACEPARENT": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "TRACESTATE": "a=b"})
    assert "TRACEPARENT" not in env
    assert "TRACESTATE" not in env


@pytest.mark.parametrize("value", ["", "garbage", "00-" + "0" * 32 + "-" + "0" * 16 + "-01"])
def test_context_from_env_ignores_missing_or_invalid_traceparent(value: str) -> None:
    """`context_from_env` returns None for an empty, malformed or all-zero TRACEPARENT."""
    assert _context.context_from_env({"TRACEPARENT": value}) is None


def test_configure_continues_the_trace_from_traceparent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose environment has TRACEPARENT parents its root spans on that remote span."""
    monkeypatch.setenv("TRACEPARENT", "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01")
    with capture_spans() as spans, tracer.span("child.root"):
        pass
    span = spans.one("child.root")
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id, span.parent.is_remote) == (
        int("ab" * 16, 16),
        int("cd" * 8, 16),
        True,
    )


CHILD_SCRIPT = textwrap.dedent("""
    import json, sys
    import mastrace

    mastrace.configure(local=sys.argv[1], service_name="child")
    with mastrace.get_tracer().span("child.work") as span:
        ctx = span.span_context
    print(json.dumps({"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}))
    mastrace.shutdown()
""")


def test_child_process_continues_the_trace(tmp_path: Path) -> None:
    """A child started with `env=mastrace.inject_env()` records its span in the caller's trace."""
    script = tmp_path / "child.py"
    script.write_text(CHILD_SCRIPT)
    store = tmp_path / "store"
    with capture_spans(), tracer.span(semconv.SPAN_COORDINATION_SESSION) as span:
        parent = span.span_context
        result = subprocess.run(
            [sys.executable, str(script), str(store)],
            env=mastrace.inject_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert parent is not None
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed["trace_id"] == f"{parent.trace_id:032x}"
    from mastrace.store import connect

    with connect(store) as db:
        rows = db.execute(
            "SELECT trace_id, parent_span_id FROM records WHERE span_name = 'child.work'"
        ).fetchall()
    assert rows == [(f"{parent.trace_id:032x}", f"{parent.span_id:016x}")]


def test_current_span_is_untouched_by_worker_threads() -> None:
    """Spans a worker thread opens never become the submitting thread's current span."""
    with capture_spans(), tracer.span(semconv.SPAN_COORDINATION_SESSION):
        before = trace.get_current_span()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(agent_round, AGENT_IDS))
        assert trace.get_current_span() is before
