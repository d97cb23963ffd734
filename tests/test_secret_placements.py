"""Every sample of the secret rule table, in every place a value can leave the process, checked in
the bytes that leave: the local store's files, the OTLP requests a loopback receiver got, and what
Logfire exports.

Placements: an attribute under an ordinary key, `set_attribute` inside prose, a nested dict, a
dataclass, a pydantic model, an exception (message, stack trace, status), the span name, an event,
a link's attributes, a gathered config snapshot, and the resource (`OTEL_RESOURCE_ATTRIBUTES`).
"""

from __future__ import annotations

import dataclasses
import gzip
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pydantic
import pytest
from mastrace._secret_rules import RULES, SecretRule
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Link

import mastrace
from mastrace import ConfigurableMixin, CoordinationMixin, Registry
from mastrace.scrubbing._engine import Scrubber

SAMPLES: list[tuple[SecretRule, str]] = [(rule, sample) for rule in RULES for sample in rule.samples]
PROBE = "probe"  # the attribute naming (sample index, placement) on each span


def secret_chunks(rule: SecretRule, sample: str) -> list[str]:
    """The pieces of `sample` that must never leave: what scrubbing removes, split at whitespace
    and quotes (JSON escapes a newline, so a PEM body is looked for line by line)."""
    flags = re.IGNORECASE if rule.ignore_case else 0
    removed: list[str] = []
    if rule.gate != "assignment":
        for m in re.finditer(rule.pattern, sample, flags):
            start = m.end("p") if "p" in m.re.groupindex and m.group("p") is not None else m.start()
            removed.append(sample[start : m.end()])
    removed += [sample[hit.start : hit.end] for hit in Scrubber()._find(sample)]
    chunks = {c for part in removed for c in re.split(r"[\s\"'\\]+", part) if len(c) >= 6}
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
    tracer = mastrace.get_tracer("placements")
    tried = 0
    for i, (_rule, sample) in enumerate(SAMPLES):
        for name, place in PLACEMENTS.items():
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
    assert tried == len(SAMPLES) * len(PLACEMENTS) == len(every) >= 640
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
