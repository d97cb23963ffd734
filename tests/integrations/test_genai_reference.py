"""mastrace's LLM spans side by side with the reference instrumentations, for the eight calls.

- OpenAI: `opentelemetry-instrumentation-openai-v2` in its latest-conventions mode
  (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`, content on). It imports only with
  `opentelemetry-util-genai<1` and `wrapt<2`, so it runs in its own environment (`.venv-genai-ref`,
  `make .venv-genai-ref/.synced`) in a subprocess, against the same loopback server
  (`python tests/genai_peer.py reference OUT.json`).
- Anthropic: the `anthropic` SDK's own CLIENT span (`anthropic.messages.create`), which follows the
  conventions, with its content mode on, in this process without mastrace's instrumentation.

Every attribute the reference records is recorded by mastrace with the same value (message JSON
compared as data); every attribute only mastrace records, and every value that differs, is in
`DIFFERENCES` with its reason. The table is written to `.artifacts/genai-side-by-side.md`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from genai_peer import CALLS, OPENAI_CALLS
from mastrace.testing import capture_spans

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_PYTHON = ROOT / ".venv-genai-ref" / "bin" / "python"
ARTIFACT = ROOT / ".artifacts" / "genai-side-by-side.md"

# Attributes only mastrace records, and why.
EXTRA: dict[str, str] = {
    "server.address": "conventions: Recommended (the reference reads httpx's URL; openai 3 uses httpx2)",
    "server.port": "conventions: Conditionally Required with server.address",
    "gen_ai.request.stream": "conventions v1.41: Conditionally Required on streamed calls",
    "gen_ai.response.time_to_first_chunk": "conventions v1.41: Recommended on streamed calls",
    "gen_ai.response.finish_reasons": "conventions: Recommended; the reference drops it on streams",
    "gen_ai.usage.cache_read.input_tokens": "conventions: Recommended; cached input the provider reported",
    "gen_ai.usage.cache_creation.input_tokens": "conventions: Recommended; cache writes reported",
    "gen_ai.tool.definitions": "conventions: Opt-In, recorded with content capture",
    "gen_ai.output.messages": "conventions: Opt-In; the anthropic SDK's span may lack it on a stream "
    "read through its events",
    "openai.response.system_fingerprint": "conventions (OpenAI): Recommended; also read from stream chunks",
    "massgen.backend": "MassGen's seed key, kept for its SQL",
    "mastrace.usage": "mastrace's usage record (tokens and cost) that rounds and sessions sum",
    "mastrace.stream.chunks": "mastrace: chunks seen, for a stream cut short",
    "mastrace.stream.completed": "mastrace: whether the stream was read to its end",
    "mastrace.response.tool_calls": "tool call ids and names, recorded without content capture",
    "mastrace.request.tool_call_ids": "ids of the tool results sent back, without content capture",
    "logfire.json_schema": "lets Logfire show the JSON attributes as objects",
    "mastrace.cost.source": "mastrace: where the call's cost came from (provider, calculator, price table)",
    "mastrace.cost.unknown": "mastrace: the model has no known price, so its cost is unknown rather than $0",
    "mastrace.cost.unknown_models": "mastrace: the model that had no known price",
}
# Attributes both record with different values, and why.
DIFFERENCES: dict[str, str] = {
    "gen_ai.output.messages": "finish_reason is the schema's FinishReason (`tool_call`, `stop`), "
    "not OpenAI's `tool_calls`; the anthropic SDK's messages lack the required finish_reason",
    "gen_ai.response.time_to_first_chunk": "measured by each from its own start of the call",
    "gen_ai.input.messages": "a tool result given as text is recorded as that text (the conventions' "
    "`response`); the anthropic SDK records it as a list of text blocks",
}
# Attributes only the reference records, and why mastrace does not.
MISSING: dict[str, str] = {
    "anthropic.message.stop_reason": "streams only: the SDK writes it when the body closes, after the "
    "span ended at `message_stop`; the same value is in gen_ai.response.finish_reasons",
    "gen_ai.usage.cache_write.input_tokens": "not a conventions key; mastrace writes "
    "gen_ai.usage.cache_creation.input_tokens when the provider reports cache writes",
}


def _plain(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return list(value) if isinstance(value, tuple) else value


def _ours(url: str, name: str) -> tuple[str, dict[str, Any]]:
    with capture_spans(capture_content=True) as captured:
        CALLS[name](url)
        (span,) = [s for s in captured.spans if s.name.startswith("llm.")]
        return span.kind.name, {k: _plain(v) for k, v in (span.attributes or {}).items()}


@pytest.fixture(scope="module")
def reference(peer: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference's spans for every call: OpenAI's from its environment, Anthropic's SDK span here."""
    if not REFERENCE_PYTHON.exists():
        pytest.skip("the reference environment is missing: run `make .venv-genai-ref/.synced`")
    out = tmp_path_factory.mktemp("reference") / "spans.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MASTRACE_"))}
    done = subprocess.run(
        [str(REFERENCE_PYTHON), str(ROOT / "tests" / "genai_peer.py"), "reference", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(out.read_text())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = os.environ.get("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE")
    os.environ["ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE"] = "content"
    try:
        trace.set_tracer_provider(provider)
        for name in CALLS:
            if name.startswith("anthropic"):
                exporter.clear()
                CALLS[name](peer)
                found[name] = [
                    {"name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes or {})}
                    for s in exporter.get_finished_spans()
                ]
    finally:
        if previous is None:
            os.environ.pop("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", None)
        else:
            os.environ["ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE"] = previous
    return found


_ROWS: dict[str, list[str]] = {}


@pytest.mark.parametrize("call", list(CALLS))
def test_every_reference_attribute_is_recorded_and_every_difference_justified(
    call: str, peer: str, reference: dict[str, Any], instrumented_llms: None
) -> None:
    """Same keys and values as the reference, apart from the listed, justified differences."""
    (ref_span,) = reference[call]
    ref = {k: _plain(v) for k, v in ref_span["attributes"].items()}
    kind, ours = _ours(peer, call)
    assert kind == ref_span["kind"] == "CLIENT"
    provider_only = {k for k in ours if k.startswith(("anthropic.", "http.", "url."))}  # lent SDK span
    missing = sorted(set(ref) - set(ours) - set(MISSING))
    assert not missing, f"recorded by the reference only: {missing}"
    extra = sorted(set(ours) - set(ref) - provider_only)
    assert not [k for k in extra if k not in EXTRA], f"unjustified extras: {extra}"
    differing = sorted(k for k in set(ref) & set(ours) if ref[k] != ours[k] and k not in provider_only)
    assert not [k for k in differing if k not in DIFFERENCES], {k: (ref[k], ours[k]) for k in differing}
    _ROWS[call] = [
        f"| {call} | {len(ref)} | {len(ours)} | {', '.join(f'`{k}`' for k in extra) or '—'} | "
        f"{', '.join(f'`{k}`' for k in differing) or '—'} |"
    ]
    if len(_ROWS) == len(CALLS):
        _write_table(reference["metrics"])


def test_metrics_are_the_references(reference: dict[str, Any]) -> None:
    """The reference emits the two histograms mastrace emits (see tests/exporters/test_genai_metrics.py)."""
    assert reference["metrics"] == ["gen_ai.client.operation.duration", "gen_ai.client.token.usage"]
    assert set(OPENAI_CALLS) <= set(reference)


def _write_table(metrics: list[str]) -> None:
    lines = [
        "| call | reference keys | mastrace keys | only mastrace | values differ |",
        "|---|---:|---:|---|---|",
        *[row for name in CALLS for row in _ROWS[name]],
        "",
        *[
            line
            for title, reasons in (
                ("Only mastrace", EXTRA),
                ("Values differ", DIFFERENCES),
                ("Only the reference", MISSING),
            )
            for line in (f"{title}:", "", *[f"- `{k}`: {v}" for k, v in reasons.items()], "")
        ],
        "",
        f"Reference metrics: {', '.join(metrics)}",
    ]
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text("\n".join(lines) + "\n", encoding="utf-8")
