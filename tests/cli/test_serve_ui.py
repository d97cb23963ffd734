"""`mastrace serve`'s web UI: the live runs list, a run's waterfall and report, in headless Chromium."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

import mastrace
from mastrace.serve import IntakeServer, start_intake

from .conftest import MASTRACE, clean_env
from .test_view import run_chromium

XSS = "<img src=x onerror=\"document.title='PWNED'\">"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[IntakeServer]:
    running = start_intake(tmp_path / "store", http_port=0, grpc_port=None)
    yield running
    running.stop()


def _get(server: IntakeServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}") as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _write_run(store: Path, name: str, root: str = "coordination.session") -> str:
    mastrace.configure(local=store, service_name="ui")
    tracer = mastrace.get_tracer("ui")
    with (
        tracer.span(root, attributes={"massgen.task": name}) as session,
        tracer.span(f"agent.a.round_0 {name}"),
    ):
        pass
    mastrace.shutdown()
    assert session.span_context is not None
    return f"{session.span_context.trace_id:032x}"


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_runs_api_sees_runs_written_after_it_started(server: IntakeServer) -> None:
    status, body = _get(server, "/api/runs")
    assert status == 200 and json.loads(body) == []
    first = _write_run(server.intake.store, "first")
    assert [r["trace_id"] for r in json.loads(_get(server, "/api/runs")[1])] == [first]
    second = _write_run(server.intake.store, "second")
    assert [r["trace_id"] for r in json.loads(_get(server, "/api/runs")[1])] == [second, first]


def test_a_run_has_a_live_page_a_static_view_and_a_report(server: IntakeServer) -> None:
    trace_id = _write_run(server.intake.store, "deep link")
    status, page = _get(server, f"/runs/{trace_id}")
    assert status == 200 and "../api/runs/" in page  # the page reads its spans from the API
    status, view = _get(server, f"/runs/{trace_id}/view")
    assert status == 200 and "agent.a.round_0 deep link" in view
    status, report = _get(server, f"/runs/{trace_id}/report")
    assert status == 200 and trace_id in report
    assert _get(server, "/runs/" + "0" * 32 + "/view")[0] == 404
    assert _get(server, "/api/runs/" + "0" * 32 + "/spans")[0] == 404


def test_the_spans_api_gives_skeletons_new_spans_matches_and_details(server: IntakeServer) -> None:
    trace_id = _write_run(server.intake.store, "api")
    status, body = _get(server, f"/api/runs/{trace_id}/spans")
    reply = json.loads(body)
    assert status == 200 and reply["count"] == 2 and reply["trace_id"] == trace_id
    names = {s["name"]: s for s in reply["spans"]}
    assert set(names) == {"coordination.session", "agent.a.round_0 api"}
    assert "attributes" not in names["coordination.session"]  # details are fetched per span
    # A cursor past the newest span (beyond the margin for late writers) returns nothing new.
    later = reply["newest_us"] + 60_000_000
    assert json.loads(_get(server, f"/api/runs/{trace_id}/spans?since_us={later}")[1])["spans"] == []
    assert _get(server, f"/api/runs/{trace_id}/spans?since_us=soon")[0] == 400
    matches = json.loads(_get(server, f"/api/runs/{trace_id}/spans?q=api")[1])["matches"]
    assert set(matches) == {s["span_id"] for s in reply["spans"]}  # the task and the name say "api"
    session = names["coordination.session"]["span_id"]
    status, body = _get(server, f"/api/runs/{trace_id}/spans/{session}")
    assert status == 200 and json.loads(body)["attributes"]["massgen.task"] == "api"
    assert _get(server, f"/api/runs/{trace_id}/spans/{'0' * 16}")[0] == 404


def test_the_runs_page_in_chromium_lists_runs_and_runs_no_script_from_spans(
    server: IntakeServer, tmp_path: Path
) -> None:
    trace_id = _write_run(server.intake.store, XSS, root=f"session {XSS}")
    result = run_chromium(
        tmp_path, "--virtual-time-budget=4000", "--dump-dom", f"http://127.0.0.1:{server.http_port}/"
    )
    assert result.returncode == 0, result.stderr
    dom = Elements()
    dom.feed(result.stdout)
    rows = [a for tag, a in dom.tags if tag == "tr" and "run" in a.get("class", "").split()]
    assert [r.get("data-trace-id") for r in rows] == [trace_id]  # fetched and drawn by the page's script
    assert not [a for tag, a in dom.tags if tag == "img"]  # the span's markup stayed text...
    assert f"session {XSS}" in "".join(dom.text)  # ...and is shown as such
    assert "PWNED" not in result.stdout.split("<title>")[1].split("</title>")[0]
    assert "1 run(s), live" in "".join(dom.text)


def test_runs_can_be_searched_by_span_content_and_errors(server: IntakeServer) -> None:
    calm = _write_run(server.intake.store, "calm")
    mastrace.configure(local=server.intake.store, service_name="ui")
    tracer = mastrace.get_tracer("ui")
    with (
        pytest.raises(RuntimeError),
        tracer.span("coordination.session") as failing,
        tracer.span("agent.agent_z.round_2", attributes={"massgen.agent_id": "agent_z"}),
    ):
        raise RuntimeError("boom")
    mastrace.shutdown()
    assert failing.span_context is not None
    failed = f"{failing.span_context.trace_id:032x}"

    def ids(query: str) -> list[str]:
        return [r["trace_id"] for r in json.loads(_get(server, "/api/runs" + query)[1])]

    assert set(ids("")) == {calm, failed}
    assert ids("?q=agent_z") == [failed]  # an attribute value
    assert ids("?q=round_0%20calm") == [calm]  # a span name
    assert ids("?errors=1") == [failed]
    assert ids("?q=calm&errors=1") == []


def _serve_banner(store: Path, **env: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`mastrace serve` in a process of its own, and its banner lines (read until the UI's address).

    Stopped with SIGTERM: a suite started in the background (`cmd &` in a script) ignores SIGINT, and
    so do the processes it starts."""
    process = subprocess.Popen(
        [str(MASTRACE), "serve", "--store", str(store), "--http-port", "0", "--grpc-port", "-1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**clean_env(), **env},
    )  # fmt: skip
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if "web UI on" in line or len(lines) > 20:
            break
    return process, lines


def test_serve_prints_the_address_of_its_ui(tmp_path: Path) -> None:
    """The banner names the UI's address, which answers the runs page; with a token it carries it in
    the fragment of the sign-in page's address."""
    process, lines = _serve_banner(tmp_path / "store")
    try:
        found = re.search(r"web UI on (http://127\.0\.0\.1:\d+/)$", lines[-1])
        assert found is not None, lines
        with urllib.request.urlopen(found.group(1)) as reply:
            assert reply.status == 200 and "<title>mastrace runs</title>" in reply.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    process, lines = _serve_banner(tmp_path / "store", MASTRACE_SERVE_TOKEN="0123456789abcdef0123")
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    assert lines[-1].endswith("/signin#token=0123456789abcdef0123"), lines
    assert "?" not in lines[-1]  # the token is in the fragment, never in a request line


def test_the_spans_api_gives_each_row_its_kind_and_key_attributes(server: IntakeServer) -> None:
    """Rows carry the waterfall's kind (session, agent, llm, tool, event) and model/tokens/cost/outcome."""
    mastrace.configure(local=server.intake.store, service_name="ui")
    tracer = mastrace.get_tracer("ui")
    round_attrs = {"massgen.agent_id": "a", "massgen.outcome": "vote", "massgen.usage.input": 7,
                   "massgen.usage.cost": 0.25, "mastrace.cost.unknown": True}  # fmt: skip
    with tracer.span("coordination.session") as root, tracer.span("agent.a.round_0", attributes=round_attrs):
        with tracer.span("llm.openai.chat", attributes={"gen_ai.request.model": "m-1"}):
            pass
        with tracer.span("mcp.fs.read"):
            tracer.event("Coordination event: x")
    mastrace.shutdown()
    assert root.span_context is not None
    status, body = _get(server, f"/api/runs/{root.span_context.trace_id:032x}/spans")
    assert status == 200
    rows = {r["name"]: (r["kind"], r.get("keys", {})) for r in json.loads(body)["spans"]}
    assert rows == {
        "coordination.session": ("session", {}),
        "agent.a.round_0": (
            "agent",
            {"in": 7.0, "cost": 0.25, "cost_unknown": True, "outcome": "vote", "agent": "a"},
        ),
        "llm.openai.chat": ("llm", {"model": "m-1"}),
        "mcp.fs.read": ("tool", {}),
        "Coordination event: x": ("event", {}),
    }
    assert _get(server, "/static/ui.js")[0] == 200 and _get(server, "/static/../../etc/passwd")[0] == 404
    assert _get(server, "/static/nothing.js")[0] == 404


def _strict_json(text: str) -> object:
    """JSON as a browser's `JSON.parse` reads it: no NaN or Infinity."""

    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), float("-inf")])
def test_a_number_json_cannot_hold_never_breaks_a_page(server: IntakeServer, odd: float) -> None:
    """A sender's NaN or infinite cost and tokens: runs, spans, span details, the report and the diff
    still answer 200 with JSON a browser parses, and the cost reads as unknown, never `$nan`."""
    mastrace.configure(local=server.intake.store, service_name="ui")
    tracer = mastrace.get_tracer("ui")
    odd_usage = {"massgen.agent_id": "a", "massgen.usage.cost": odd, "massgen.usage.input": odd}
    with tracer.span("coordination.session") as session:
        with tracer.span("agent.a.round_0", attributes=odd_usage) as round_span:
            pass
        with tracer.span("llm.openai.chat", attributes={"mastrace.usage": {"cost": odd, "input_tokens": 3}}):
            pass
    mastrace.shutdown()
    trace_id = f"{session.span_context.trace_id:032x}"
    span_id = f"{round_span.span_context.span_id:016x}"
    for path in (
        "/api/runs",
        f"/api/runs/{trace_id}/spans",
        f"/api/runs/{trace_id}/spans/{span_id}",
        f"/api/diff?a={trace_id}&b={trace_id}",
    ):
        status, body = _get(server, path)
        assert status == 200, (path, body[:300])
        _strict_json(body)
    (run,) = _strict_json(_get(server, "/api/runs")[1])  # type: ignore[misc]
    assert run["cost_text"] == "—", run
    status, page = _get(server, f"/runs/{trace_id}/report")
    assert status == 200 and "$nan" not in page.lower() and "$inf" not in page.lower()
