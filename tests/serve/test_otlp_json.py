"""OTLP/JSON as the specification writes it (hex ids, enum numbers, every `AnyValue` form), sent by
the OpenTelemetry JavaScript exporter run by Node, and by hand."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mastrace.serve import IntakeServer, start_intake
from mastrace.store import query

from .conftest import raw_http, request

TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, CHILD = "eee19b7ec3c1b174", "eee19b7ec3c1b173"


def post_json(server: IntakeServer, document: Any) -> tuple[int, dict[str, Any]]:
    body = json.dumps(document).encode()
    reply = raw_http(
        server.http_port or 0,
        request("POST", "/v1/traces", body, headers={"Content-Type": "application/json"}),
    )
    return reply.status, json.loads(reply.body or b"{}")


def rows(server: IntakeServer) -> dict[str, dict[str, Any]]:
    found = query(
        "SELECT span_id, parent_span_id, span_name, otel_kind, otel_status_code, otel_status_message, "
        "CAST(attributes AS VARCHAR) AS a, CAST(otel_events AS VARCHAR) AS e, "
        "CAST(otel_links AS VARCHAR) AS l, "
        "service_name, otel_scope_name, otel_scope_version, epoch_ns(start_timestamp) AS s, duration "
        "FROM records",
        server.intake.store,
    )
    return {r["span_id"]: r for r in found}


def spec_request(**span_changes: Any) -> dict[str, Any]:
    """An `ExportTraceServiceRequest` shaped like the specification's example (OTLP/JSON)."""
    value = lambda **v: v  # noqa: E731
    child = {
        "traceId": TRACE,
        "spanId": CHILD,
        "parentSpanId": ROOT,
        "name": "agent.a.round_0",
        "kind": 3,
        "startTimeUnixNano": "1544712660300000000",
        "endTimeUnixNano": 1544712661300000000,
        "attributes": [
            {"key": "s", "value": value(stringValue="text")},
            {"key": "b", "value": value(boolValue=True)},
            {"key": "i", "value": value(intValue="9007199254740993")},
            {"key": "i_number", "value": value(intValue=42)},
            {"key": "d", "value": value(doubleValue=1.5)},
            {"key": "nan", "value": value(doubleValue="NaN")},
            {"key": "inf", "value": value(doubleValue="-Infinity")},
            {"key": "raw", "value": value(bytesValue=base64.b64encode(b"\x00\x01").decode())},
            {
                "key": "list",
                "value": value(arrayValue={"values": [{"stringValue": "a"}, {"stringValue": "b"}]}),
            },
            {
                "key": "mixed",
                "value": value(arrayValue={"values": [{"intValue": "1"}, {"stringValue": "x"}]}),
            },
            {
                "key": "map",
                "value": value(kvlistValue={"values": [{"key": "k", "value": {"intValue": "7"}}]}),
            },
            {"key": "empty", "value": {}},
        ],
        "events": [{"timeUnixNano": "1544712660500000000", "name": "checkpoint", "attributes": []}],
        "links": [
            {
                "traceId": TRACE,
                "spanId": ROOT,
                "attributes": [{"key": "why", "value": {"stringValue": "vote"}}],
            }
        ],
        "status": {"code": 2, "message": "boom"},
        "unknownField": {"ignored": True},
        **span_changes,
    }
    root = {
        "traceId": TRACE,
        "spanId": ROOT,
        "parentSpanId": "",
        "name": "coordination.session",
        "kind": "SPAN_KIND_SERVER",
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661500000000",
        "status": {"code": "STATUS_CODE_OK"},
    }
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "spec-example"}}]
                },
                "scopeSpans": [{"scope": {"name": "my.library", "version": "1.0.0"}, "spans": [root, child]}],
            }
        ]
    }


def test_the_specification_example_is_stored_with_every_value_form(server: IntakeServer) -> None:
    """Hex ids, enums as numbers and names, int64 as strings and numbers, every AnyValue form."""
    status, reply = post_json(server, spec_request())
    assert status == 200 and reply == {}
    stored = rows(server)
    child, root = stored[CHILD], stored[ROOT]
    assert root["parent_span_id"] is None and child["parent_span_id"] == ROOT
    assert (root["otel_kind"], child["otel_kind"]) == ("server", "client")
    assert (root["otel_status_code"], child["otel_status_code"], child["otel_status_message"]) == (
        "OK",
        "ERROR",
        "boom",
    )
    assert child["s"] == 1544712660300000000 and child["duration"] == pytest.approx(1.0)
    assert (child["service_name"], child["otel_scope_name"], child["otel_scope_version"]) == (
        "spec-example",
        "my.library",
        "1.0.0",
    )
    attrs = json.loads(child["a"])
    assert (
        attrs["s"] == "text"
        and attrs["b"] is True
        and attrs["i"] == 9007199254740993
        and attrs["i_number"] == 42
    )
    assert attrs["d"] == 1.5 and attrs["nan"] == "NaN" and attrs["inf"] == "-Infinity"
    assert base64.b64decode(attrs["raw"]) == b"\x00\x01"
    assert attrs["list"] == ["a", "b"] and json.loads(attrs["mixed"]) == [1, "x"]
    assert json.loads(attrs["map"]) == {"k": 7} and "empty" not in attrs
    assert json.loads(child["e"])[0]["name"] == "checkpoint"
    (link,) = json.loads(child["l"])
    assert (link["trace_id"], link["span_id"], link["attributes"]) == (TRACE, ROOT, {"why": "vote"})


def test_base64_ids_and_proto_field_names_are_read_too(server: IntakeServer) -> None:
    """The protobuf JSON mapping (base64 ids, snake_case keys) is accepted as well."""
    document = spec_request()
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span.pop("traceId")
    span["trace_id"] = base64.b64encode(bytes.fromhex(TRACE)).decode()
    span["spanId"] = base64.b64encode(bytes.fromhex(CHILD)).decode()
    assert post_json(server, document)[0] == 200
    assert CHILD in rows(server)


def test_a_bad_span_is_rejected_in_a_partial_success_and_the_rest_stored(server: IntakeServer) -> None:
    """A span with a malformed id is counted in `partialSuccess`; the valid span of the request lands."""
    status, reply = post_json(server, spec_request(spanId="not-an-id"))
    assert status == 200
    assert (
        reply["partialSuccess"]["rejectedSpans"] == "1"
        and "spanId" in reply["partialSuccess"]["errorMessage"]
    )
    assert list(rows(server)) == [ROOT]


@pytest.mark.parametrize("document", [[], "text", {"resourceSpans": {}}, {"resourceSpans": [1]}])
def test_a_document_that_is_not_a_request_gets_400(server: IntakeServer, document: Any) -> None:
    """JSON that is not an export request is 400 with an OTLP Status body; nothing is stored."""
    status, reply = post_json(server, document)
    assert status == 400 and reply["code"] == 3 and reply["message"]


def test_the_opentelemetry_js_exporter_sends_to_serve(tmp_path: Path, node_sender: Path) -> None:
    """The OpenTelemetry JS SDK's OTLP/HTTP exporter (OTLP/JSON, hex ids) run by Node delivers its
    trace, with the token, scrubbed like in-process export; without the token it is refused."""
    token = "node-sender-token-1234"
    server = start_intake(tmp_path / "store", http_port=0, grpc_port=None, token=token)
    try:
        url = f"http://127.0.0.1:{server.http_port}/v1/traces"
        refused = subprocess.run(["node", str(node_sender), url], capture_output=True, text=True, timeout=300)
        assert refused.returncode == 0, refused.stderr
        assert json.loads(refused.stdout)["code"] == 1  # FAILED: 401
        assert not (tmp_path / "store" / "segments").exists() or not rows(server)
        sent = subprocess.run(
            ["node", str(node_sender), url, token, "from-node"], capture_output=True, text=True, timeout=300
        )
        assert sent.returncode == 0, sent.stderr
        ids = json.loads(sent.stdout)
        assert ids["code"] == 0, ids["error"]
        stored = rows(server)
        assert set(stored) == {ids["root"], ids["child"]}
        child = stored[ids["child"]]
        assert child["parent_span_id"] == ids["root"] and child["service_name"] == "from-node"
        assert (child["otel_kind"], child["otel_status_code"], child["otel_status_message"]) == (
            "client",
            "ERROR",
            "boom",
        )
        attrs = json.loads(child["a"])
        assert attrs["api_key"].startswith("[Scrubbed") and attrs["massgen.usage.cost"] == 0.25
        root = json.loads(stored[ids["root"]]["a"])
        assert root["n.int"] == 42 and root["n.float"] == 1.5 and root["flag"] is True
        assert root["list"] == ["a", "b"] and root["nums"] == [1, 2, 3]
        assert query("SELECT DISTINCT trace_id FROM records", tmp_path / "store") == [
            {"trace_id": ids["trace_id"]}
        ]
    finally:
        server.stop()
