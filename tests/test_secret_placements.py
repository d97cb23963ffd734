"""Every sample of the secret rule table, in every place a value can leave the process, checked in
the bytes that leave: the local store's files, the OTLP requests a loopback receiver got, what Logfire
exports, what `mastrace serve` stores from a plain OpenTelemetry app, and what `push`, `export`,
`view` and the serve UI's JSON API give out of the store.

Placements: an attribute under an ordinary key, `set_attribute` inside prose, a nested dict, a
dataclass, a pydantic model, an exception (message, stack trace, status), the span name, an event,
a link's attributes, a gathered config snapshot, and the resource (`OTEL_RESOURCE_ATTRIBUTES`).
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import io
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pydantic
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Link

import mastrace
from mastrace import ConfigurableMixin, CoordinationMixin, Registry
from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._finder import compiled_rules
from mastrace.scrubbing._table import RULES, SecretRule, expand

SAMPLES: list[tuple[SecretRule, str]] = [(rule, expand(sample)) for rule in RULES for sample in rule.samples]
PROBE = "probe"  # the attribute naming (sample index, placement) on each span


_WORD = re.compile(r"-*(?:[A-Z]+|[a-z]+)-*")  # a plain word (`PRIVATE`, `KEY-----`) is no evidence of a leak


def secret_chunks(rule: SecretRule, sample: str) -> list[str]:
    """The pieces of `sample` that must never leave: what scrubbing removes, split at whitespace
    and quotes (JSON escapes a newline, so a PEM body is looked for line by line)."""
    removed: list[str] = []
    for compiled in compiled_rules():
        if compiled.kind == rule.id and compiled.regex is not None:
            for m in compiled.regex.finditer(sample.lower() if compiled.on_low else sample):
                start = m.end("p") if "p" in m.re.groupindex and m.group("p") is not None else m.start()
                removed.append(sample[start : m.end()])
    removed += [sample[hit.start : hit.end] for hit in Scrubber()._find(sample)]
    chunks = {c for part in removed for c in re.split(r"[\s\"'\\]+", part) if len(c) >= 6}
    distinctive = {c for c in chunks if not _WORD.fullmatch(c)}
    chunks = distinctive or {part for part in removed if len(part) >= 6}
    assert chunks, f"{rule.id}: nothing secret found in its own sample {sample!r}"
    return sorted(chunks)


CHUNKS = [secret_chunks(rule, sample) for rule, sample in SAMPLES]


@dataclasses.dataclass
class EndpointConfig:
    url: str
    headers: dict[str, str]


class ModelConfig(pydantic.BaseModel):
    base_url: str
    extra: dict[str, Any]


class Component(ConfigurableMixin):
    def __init__(self, secret: str) -> None:
        self.secret = secret

    def gather_config(self) -> dict[str, Any]:
        return {**super().gather_config(), "endpoint": self.secret, "notes": ["plain", self.secret]}


class Orchestrator(CoordinationMixin):
    def __init__(self, registry: Registry) -> None:
        self.mastrace_registry = registry


def _attribute(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("work", attributes={PROBE: probe, "note": s}):
        pass


def _set_attribute(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("work", attributes={PROBE: probe}) as span:
        span.set_attribute("detail", f"the tool answered: {s} (done)")


def _nested(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("work", attributes={PROBE: probe, "config": {"llm": {"endpoint": s, "list": [1, s]}}}):
        pass


def _dataclass(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("work", attributes={PROBE: probe, "cfg": EndpointConfig(s, {"x-note": s})}):
        pass


def _pydantic(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("work", attributes={PROBE: probe, "cfg": ModelConfig(base_url=s, extra={"n": s})}):
        pass


def _exception(t: mastrace.Tracer, probe: str, s: str) -> None:
    with pytest.raises(RuntimeError), t.span("work", attributes={PROBE: probe}):
        raise RuntimeError(f"request failed: {s}")


def _span_name(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span(f"fetch {s}", attributes={PROBE: probe}):
        pass


def _event(t: mastrace.Tracer, probe: str, s: str) -> None:
    t.event("note", **{PROBE: probe, "message_text": s})


def _link(t: mastrace.Tracer, probe: str, s: str) -> None:
    with t.span("target") as target:
        pass
    ctx = target.span_context
    assert ctx is not None
    with t.span("work", attributes={PROBE: probe}, links=[Link(ctx, {"why": s})]):
        pass


def _config(t: mastrace.Tracer, probe: str, s: str) -> None:
    registry = Registry(benchmark=False)
    registry.register("models", "main", Component(s))
    with Orchestrator(registry).coordination_session("task", ["a"], **{PROBE: probe}):
        pass


PLACEMENTS: dict[str, Callable[[mastrace.Tracer, str, str], None]] = {
    "attribute": _attribute,
    "set_attribute": _set_attribute,
    "nested_dict": _nested,
    "dataclass": _dataclass,
    "pydantic": _pydantic,
    "exception": _exception,
    "span_name": _span_name,
    "event": _event,
    "link": _link,
    "config_snapshot": _config,
}


class Receiver:
    """A loopback OTLP/HTTP endpoint that keeps every request body it gets."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # Logfire's token check, should it ask
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path.endswith("/v1/traces"):
                    receiver.bodies.append(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> Iterator[tuple[bytes, bytes]]:
        """(the span's own bytes, its resource's bytes) for every span received."""
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = resource_spans.resource.SerializeToString()
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield span.SerializeToString(), resource

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _emit_all() -> int:
    """Every sample in every placement; one trace per placement (read back by `export` and `view`)."""
    tracer = mastrace.get_tracer("placements")
    tried = 0
    for name, place in PLACEMENTS.items():
        with tracer.span(f"placement {name}"):
            for i, (_rule, sample) in enumerate(SAMPLES):
                place(tracer, f"{i}:{name}", sample)
                tried += 1
    return tried


def _probe_of(blob: bytes) -> tuple[int, str] | None:
    m = re.search(rb"(\d+):(" + b"|".join(p.encode() for p in PLACEMENTS) + rb")", blob)
    return (int(m.group(1)), m.group(2).decode()) if m else None


def _leaks(blobs: list[bytes], where: str) -> tuple[set[tuple[int, str]], list[str]]:
    """The (sample, placement) pairs seen in `blobs`, and a note for every secret chunk found."""
    seen: set[tuple[int, str]] = set()
    leaks: list[str] = []
    all_chunks = [(i, chunk.encode()) for i, chunks in enumerate(CHUNKS) for chunk in chunks]
    for blob in blobs:
        probe = _probe_of(blob)
        if probe is not None:
            seen.add(probe)
        for i, chunk in all_chunks:
            if chunk in blob:
                leaks.append(f"{where}: {SAMPLES[i][0].id} chunk {chunk[:24]!r} in span {probe}")
    return seen, leaks


def test_no_sample_leaves_in_any_placement(tmp_path: Path, receiver: Receiver) -> None:
    """Every sample × placement reaches the store and the OTLP receiver scrubbed; none leaks."""
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=receiver.url, service_name="placements")
    tried = _emit_all()
    result = mastrace.force_flush(timeout=30)
    mastrace.shutdown()
    assert result.complete, result

    rows = [line for f in sorted(store.rglob("*.ndjson")) for line in f.read_bytes().splitlines()]
    seen_store, leaks = _leaks(rows, "store")
    seen_otlp, otlp_leaks = _leaks([span for span, _ in receiver.spans()], "otlp")
    leaks += otlp_leaks
    every = {(i, name) for i in range(len(SAMPLES)) for name in PLACEMENTS}
    assert tried == len(SAMPLES) * len(PLACEMENTS) == len(every) >= 3000
    assert seen_store == every, f"{len(every - seen_store)} placements missing from the store"
    assert seen_otlp == every, f"{len(every - seen_otlp)} placements missing at the receiver"
    assert not leaks, "\n".join(leaks[:40])


def test_no_sample_leaves_through_logfire(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same placements through Logfire's provider and its OTLP exporter: nothing leaks."""
    import logfire

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url + "/v1/traces")
    mastrace.configure(logfire=True, local=False, service_name="placements")
    try:
        tried = _emit_all()
        logfire.force_flush(timeout_millis=30_000)
    finally:
        mastrace.shutdown()
        logfire.shutdown(timeout_millis=5_000, flush=False)
    seen, leaks = _leaks([span for span, _ in receiver.spans()], "logfire")
    every = {(i, name) for i in range(len(SAMPLES)) for name in PLACEMENTS}
    assert tried == len(every)
    assert seen == every, f"{len(every - seen)} placements missing at the receiver"
    assert not leaks, "\n".join(leaks[:40])


def test_resource_attributes_are_scrubbed(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample in `OTEL_RESOURCE_ATTRIBUTES`: not in the store's rows, nor in OTLP's resource."""
    pairs = [f"probe.{i}={quote(sample, safe='')}" for i, (_, sample) in enumerate(SAMPLES)]
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", ",".join(["deployment.environment=ci", *pairs]))
    store = tmp_path / "store"
    mastrace.configure(local=store, otlp=receiver.url, service_name="resource")
    with mastrace.get_tracer("r").span("one"):
        pass
    assert mastrace.force_flush(timeout=30).complete
    mastrace.shutdown()
    rows = [line for f in sorted(store.rglob("*.ndjson")) for line in f.read_bytes().splitlines()]
    resources = [resource for _, resource in receiver.spans()]
    assert rows and resources
    assert all(b"deployment.environment" in blob for blob in [*rows, *resources])  # kept as it was
    leaks = [
        f"{where}: {SAMPLES[i][0].id} {chunk[:24]!r}"
        for where, blobs in (("store", rows), ("otlp", resources))
        for blob in blobs
        for i, chunks in enumerate(CHUNKS)
        for chunk in chunks
        if chunk.encode() in blob
    ]
    assert not leaks, "\n".join(leaks[:40])


def test_resource_attributes_are_scrubbed_for_logfire(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logfire

    secret = SAMPLES[0][1]
    chunks = CHUNKS[0]
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"team=agents,deploy.key={quote(secret, safe='')}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url + "/v1/traces")
    mastrace.configure(logfire=True, local=False, service_name="resource")
    try:
        with mastrace.get_tracer("r").span("one"):
            pass
        logfire.force_flush(timeout_millis=30_000)
    finally:
        mastrace.shutdown()
        logfire.shutdown(timeout_millis=5_000, flush=False)
    resources = [resource for _, resource in receiver.spans()]
    assert resources and all(b"agents" in r for r in resources)
    assert not [c for r in resources for c in chunks if c.encode() in r]
    assert "deploy.key" in __import__("os").environ["OTEL_RESOURCE_ATTRIBUTES"]  # restored as it was


@pytest.mark.parametrize("prose", ["Réponse de l'agent — voir ", "日本語のメモ 🙂 ", "naïve\u00a0text: "])
def test_every_sample_is_scrubbed_inside_non_ascii_prose(prose: str) -> None:
    """Non-ASCII text is searched on an ASCII copy: every sample of the rule table is still found
    there, before, after and between accented, CJK and emoji characters."""
    from mastrace.scrubbing._engine import ScrubTrail

    scrubber = Scrubber()
    for (rule, sample), chunks in zip(SAMPLES, CHUNKS, strict=True):
        text = f"{prose}{sample} — fin ✓"
        out = scrubber.scrub_attribute("note", text, ("attributes",), ScrubTrail())
        assert not scrubber.is_plain_text(text), rule.id
        leaked = [c for c in chunks if c in out]
        assert not leaked, f"{rule.id}: {leaked} left in {out!r}"


_PROBES = re.compile(r"(\d+):(" + "|".join(PLACEMENTS) + r")\b")
_ALL_CHUNKS = [(i, chunk) for i, chunks in enumerate(CHUNKS) for chunk in chunks]


def _scan(documents: list[str], where: str) -> tuple[set[tuple[int, str]], list[str]]:
    """The (sample, placement) probes seen in whole documents, and a note for every secret chunk found
    in them as written or HTML-escaped."""
    seen: set[tuple[int, str]] = set()
    leaks: list[str] = []
    for document in documents:
        seen.update((int(m.group(1)), m.group(2)) for m in _PROBES.finditer(document))
        for i, chunk in _ALL_CHUNKS:
            if chunk in document or html.escape(chunk) in document:
                leaks.append(f"{where}: {SAMPLES[i][0].id} chunk {chunk[:24]!r}")
    return seen, leaks


def _cli(*args: str) -> str:
    """Run a `mastrace` command in this process; its standard output."""
    from mastrace.cli import main

    out = io.StringIO()
    code = main(list(args), stdout=out)
    assert code == 0, (args, out.getvalue())
    return out.getvalue()


def _carries(placement: str, span_name: str) -> bool:
    """Whether a span of that name, in that placement's trace, is the one carrying a sample."""
    if placement == "span_name":
        return span_name.startswith("fetch ")
    return span_name == {"event": "note", "config_snapshot": "coordination.session"}.get(placement, "work")


def test_no_sample_leaves_through_push_export_view_or_the_ui(tmp_path: Path, receiver: Receiver) -> None:
    """From a store holding every sample × placement: `push` to an OTLP receiver, `export` in both
    formats, `view` and the serve UI's JSON API (runs, spans, each span's details) give out none."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from mastrace.serve._ui import ui_routes

    store = tmp_path / "store"
    mastrace.configure(local=store, service_name="placements")
    tried = _emit_all()
    assert mastrace.force_flush(timeout=30).complete
    mastrace.shutdown()
    every = {(i, name) for i in range(len(SAMPLES)) for name in PLACEMENTS}
    assert tried == len(every)

    _cli("push", "--to", receiver.url, "--store", str(store))
    seen_push, leaks = _leaks([span for span, _ in receiver.spans()], "push")

    # The UI's span details cost a store query each: every sample is asked for in one placement (its
    # index modulo the placements), which covers every placement; the lists hold every span.
    names = list(PLACEMENTS)
    with TestClient(Starlette(routes=ui_routes(store))) as client:
        runs = client.get("/api/runs").json()
        traces = [run["trace_id"] for run in runs]
        documents = [json.dumps(runs)]
        asked: set[tuple[int, str]] = set()
        for trace_id in traces:
            spans = client.get(f"/api/runs/{trace_id}/spans").json()["spans"]
            documents.append(json.dumps(spans))
            placement = next(s["name"] for s in spans if s.get("parent") is None).removeprefix("placement ")
            carrying = [s for s in spans if _carries(placement, s["name"])]
            assert len(carrying) == len(SAMPLES), placement
            for i, span in enumerate(carrying):
                if names[i % len(names)] == placement:
                    documents.append(client.get(f"/api/runs/{trace_id}/spans/{span['span_id']}").text)
                    asked.add((i, placement))
    assert len(traces) == len(PLACEMENTS) and {name for _, name in asked} == set(PLACEMENTS)
    assert {i for i, _ in asked} == set(range(len(SAMPLES)))
    seen_ui, ui_leaks = _scan(documents, "ui json")

    exported, views = [], []
    for trace_id in traces:
        for fmt in ("otlp-json", "jaeger-json"):
            exported.append(_cli("export", trace_id, "--format", fmt, "--store", str(store)))
        page = tmp_path / f"{trace_id}.html"
        _cli("view", trace_id, "-o", str(page), "--store", str(store))
        views.append(page.read_text(encoding="utf-8"))
    seen_export, export_leaks = _scan(exported, "export")
    _, view_leaks = _scan(views, "view")

    for where, seen in (("push", seen_push), ("export", seen_export)):
        assert seen == every, f"{len(every - seen)} placements missing from {where}"
    assert asked <= seen_ui
    leaks += ui_leaks + export_leaks + view_leaks
    assert not leaks, "\n".join(leaks[:40])


def test_no_sample_leaves_through_serve_from_a_plain_opentelemetry_app(tmp_path: Path) -> None:
    """A plain OpenTelemetry app (no mastrace in it) sends every sample — in attributes, span names,
    events, exceptions, status descriptions, links and its resource — to `mastrace serve` over
    OTLP/HTTP: the store it writes holds none of them."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    from mastrace.serve import start_intake

    server = start_intake(tmp_path / "store", http_port=0, grpc_port=None)
    try:
        resource = Resource.create({"service.name": "plain-app", "deploy.note": SAMPLES[0][1]})
        provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{server.http_port}/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=256))
        tracer = provider.get_tracer("plain-app")
        with tracer.start_as_current_span("anchor") as anchor:
            pass
        for i, (_rule, sample) in enumerate(SAMPLES):
            with tracer.start_as_current_span(
                f"call {sample}",
                attributes={PROBE: f"{i}:attribute", "note": sample, "args": [f"x {sample}", "y"]},
                links=[Link(anchor.get_span_context(), {"why": sample})],
            ) as span:
                span.add_event("tool output", {"text": f"the tool answered {sample}"})
                span.record_exception(RuntimeError(f"failed: {sample}"))
                span.set_status(Status(StatusCode.ERROR, f"gave up on {sample}"))
        assert provider.force_flush(60_000)
        provider.shutdown()
    finally:
        server.stop()
    rows = [
        line for f in sorted((tmp_path / "store").rglob("*.ndjson")) for line in f.read_bytes().splitlines()
    ]
    seen, leaks = _leaks(rows, "serve")
    assert {i for i, _ in seen} == set(range(len(SAMPLES))), "spans missing from the store"
    assert not leaks, "\n".join(leaks[:40])
