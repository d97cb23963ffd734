"""`mastrace export`: Jaeger JSON (Jaeger UI's upload format) and OTLP/JSON."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .conftest import Runner

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
TAG_TYPES = {"string": str, "bool": bool, "int64": int, "float64": (int, float)}


@pytest.fixture(scope="module")
def jaeger(module_cli: Runner, demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    target = tmp_path_factory.mktemp("export") / "trace.json"
    result = module_cli("export", "latest", "--format", "jaeger-json", "-o", str(target), store=demo_store)
    assert result.returncode == 0, result.stderr
    assert "48 spans as jaeger-json" in result.stdout
    return json.loads(target.read_text())


def _check_tag(tag: dict[str, Any]) -> None:
    assert set(tag) == {"key", "type", "value"}
    assert isinstance(tag["key"], str) and tag["type"] in TAG_TYPES
    assert isinstance(tag["value"], TAG_TYPES[tag["type"]])


def _check_jaeger_span(span: dict[str, Any], trace_id: str, processes: dict[str, Any]) -> None:
    assert {
        "traceID",
        "spanID",
        "operationName",
        "references",
        "startTime",
        "duration",
        "tags",
        "logs",
        "processID",
    } <= set(span)
    assert span["traceID"] == trace_id and HEX16.match(span["spanID"])
    assert isinstance(span["startTime"], int) and span["startTime"] > 10**15  # microseconds since the epoch
    assert isinstance(span["duration"], int) and span["duration"] >= 0
    assert span["processID"] in processes
    for ref in span["references"]:
        assert set(ref) == {"refType", "traceID", "spanID"} and ref["refType"] in ("CHILD_OF", "FOLLOWS_FROM")
    for tag in span["tags"]:
        _check_tag(tag)
    for log in span["logs"]:
        assert isinstance(log["timestamp"], int)
        for field in log["fields"]:
            _check_tag(field)


def test_jaeger_json_has_the_upload_structure(jaeger: dict[str, Any]) -> None:
    """`{"data": [trace]}` with typed tags, µs times, references and a process table."""
    assert len(jaeger["data"]) == 1
    trace = jaeger["data"][0]
    assert HEX32.match(trace["traceID"]) and len(trace["spans"]) == 48
    assert trace["processes"] == {
        "p1": {"serviceName": "coordination-demo", "tags": trace["processes"]["p1"]["tags"]}
    }
    for span in trace["spans"]:
        _check_jaeger_span(span, trace["traceID"], trace["processes"])


def test_jaeger_references_form_one_tree(jaeger: dict[str, Any]) -> None:
    """Every span but the root has a first CHILD_OF reference to a span of the trace."""
    spans = jaeger["data"][0]["spans"]
    ids = {s["spanID"] for s in spans}
    roots = [s for s in spans if not s["references"]]
    assert [r["operationName"] for r in roots] == ["coordination.session"]
    for span in spans:
        if span["references"]:
            assert span["references"][0]["refType"] == "CHILD_OF" and span["references"][0]["spanID"] in ids


def test_jaeger_marks_errors_and_keeps_vote_links(jaeger: dict[str, Any]) -> None:
    """Failed spans carry `error=true`; votes reference the answer they vote for (FOLLOWS_FROM)."""
    spans = jaeger["data"][0]["spans"]
    failed = [
        s["operationName"] for s in spans if {"key": "error", "type": "bool", "value": True} in s["tags"]
    ]
    assert sorted(failed) == ["Tool execution: mcp__filesystem__write_file", "mcp.filesystem.write_file"]
    answers = {
        s["spanID"]: s["operationName"] for s in spans if s["operationName"].startswith("Agent answer:")
    }
    for vote in (s for s in spans if s["operationName"].startswith("Agent vote:")):
        follows = [r["spanID"] for r in vote["references"] if r["refType"] == "FOLLOWS_FROM"]
        label = vote["operationName"].split(" -> ")[1]
        assert [answers[f] for f in follows] == [f"Agent answer: {label}"]
    exception_logs = [
        f for s in spans for log in s["logs"] for f in log["fields"] if f["key"] == "exception.type"
    ]
    assert {f["value"] for f in exception_logs} == {"PermissionError"}


def _hex_ids_to_base64(document: dict[str, Any]) -> dict[str, Any]:
    """OTLP/JSON uses hex ids where protobuf's JSON mapping expects base64: convert to parse it."""
    doc = copy.deepcopy(document)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for item in (span, *span["links"]):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return doc


def test_otlp_json_parses_as_an_export_request(mastrace_cli: Runner, demo_store: Path) -> None:
    """The OTLP/JSON output is a valid ExportTraceServiceRequest with 48 spans and hex ids."""
    document = json.loads(mastrace_cli("export", "--format", "otlp-json", store=demo_store).stdout)
    spans = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert len(spans) == 48 and all(HEX32.match(s["traceId"]) and HEX16.match(s["spanId"]) for s in spans)
    request = json_format.ParseDict(_hex_ids_to_base64(document), ExportTraceServiceRequest())
    parsed = [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]
    assert len(parsed) == 48
    by_name = {s.name: s for s in parsed}
    mcp = by_name["mcp.search.web_search"]
    assert mcp.kind == 3 and mcp.end_time_unix_nano > mcp.start_time_unix_nano  # SPAN_KIND_CLIENT
    failed = [s for s in parsed if s.status.code == 2]
    assert {s.name for s in failed} == {
        "mcp.filesystem.write_file",
        "Tool execution: mcp__filesystem__write_file",
    }
    resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "coordination-demo"
