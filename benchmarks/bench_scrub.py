"""Local-store ingest with scrubbing on vs off, on spans with realistic attributes.

The spans are what a multi-agent run writes: per session one `coordination.session` span with a
gathered config of ~2 KB JSON; agent rounds with ids, usage and model names; LLM calls carrying a
prompt and a completion of distinct prose each (by default 2,000 + 1,000 characters on one span in
four; `--prompt-every`, `--prompt-chars`); tool calls with arguments. Every export goes through
the export thread's transform (`prepare_span`) and into a fresh `LocalStoreExporter`, with the
full rule table (scrubbing on) or without a scrubber (off).
The two variants alternate, `--repeat` times each; the best run of each is compared.

Run: `python benchmarks/bench_scrub.py [--spans N] [--repeat N]`
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace._scrubbing import Scrubber
from mastrace._snapshot import Limits
from mastrace._transform import prepare_span
from mastrace.store import LocalStoreExporter

TARGET_SPANS_PER_S = 100_000
TARGET_RATIO = 0.8
WORDS = (  # noqa: SIM905
    "the agent reviewed each answer and weighed its evidence before voting for the clearest one; "
    "latency matters because every round waits on the slowest model, so the orchestrator keeps "
    "a budget of tokens per round and records usage, cost and the reasons given by each agent. "
    "Step 3: compare the two summaries, note where they disagree, and explain the trade-off in "
    "plain words with a short example drawn from the logs of the previous run."
).split()


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _prose(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rnd.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def build_spans(count: int, prompt_every: int = 4, prompt_chars: int = 2000) -> list[ReadableSpan]:
    rnd = random.Random(7)
    collector = _Collect()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench", "service.version": "1"}))
    provider.add_span_processor(SimpleSpanProcessor(collector))
    tracer = provider.get_tracer("bench.scrub", "0.1")
    config = json.dumps(
        {
            "agents": [
                {
                    "id": f"agent_{i}",
                    "backend": {
                        "type": "openai",
                        "model": "gpt-4o-mini",
                        "temperature": 0.3,
                        "max_tokens": 4096,
                    },
                    "system_message": _prose(rnd, 300),
                }
                for i in range(3)
            ],
            "orchestrator": {"max_rounds": 5, "timeout_s": 600, "voting": "majority"},
        }
    )
    made = 0
    while made < count:
        with tracer.start_as_current_span(
            "coordination.session", attributes={"mastrace.config": config, "massgen.task": _prose(rnd, 80)}
        ):
            made += 1
            for i in range(27):
                agent = f"agent_{i % 3}"
                kind = i % prompt_every
                if kind == 0:
                    attrs = {
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.input.messages": _prose(rnd, prompt_chars),
                        "gen_ai.output.messages": _prose(rnd, prompt_chars // 2),
                        "gen_ai.usage.input_tokens": 500 + i,
                        "gen_ai.usage.output_tokens": 250,
                    }
                    name = "llm.openai.stream"
                elif kind == 1:
                    attrs = {
                        "mcp.server": "files",
                        "mcp.tool": "read",
                        "mcp.arguments": '{"path": "notes.md"}',
                    }
                    name = "mcp.files.read"
                else:
                    attrs = {
                        "massgen.agent_id": agent,
                        "massgen.round": i // 3,
                        "massgen.round_type": "initial_answer",
                        "massgen.usage.input": 1200 + i,
                        "massgen.usage.output": 300,
                        "massgen.usage.cost": 0.0125,
                        "gen_ai.request.model": "gpt-4o-mini",
                        "massgen.is_winner": i % 7 == 0,
                    }
                    name = f"agent.{agent}.round_{i // 3}"
                with tracer.start_as_current_span(name, attributes=attrs):
                    made += 1
    provider.shutdown()
    return collector.spans[:count]


def time_ingest(spans: list[ReadableSpan], scrubber: Scrubber | None, batch: int = 512) -> float:
    limits = Limits()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as store:
        exporter = LocalStoreExporter(store)
        start = time.perf_counter()
        for i in range(0, len(spans), batch):
            exporter.export([prepare_span(s, scrubber, limits) for s in spans[i : i + batch]])
        elapsed = time.perf_counter() - start
        exporter.shutdown()
        assert exporter.failed_spans == 0
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prompt-every", type=int, default=4, help="one LLM span with a prompt per N spans")
    parser.add_argument("--prompt-chars", type=int, default=2000, help="prompt size (the completion is half)")
    args = parser.parse_args()
    spans = build_spans(args.spans, args.prompt_every, args.prompt_chars)
    mean_bytes = sum(len(json.dumps(dict(s.attributes or {}))) for s in spans) / len(spans)
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.repeat):
        off.append(time_ingest(spans, None))
        on.append(time_ingest(spans, Scrubber()))  # a new scrubber: its caches start empty
    rate_on, rate_off = len(spans) / min(on), len(spans) / min(off)
    print(
        f"spans:              {len(spans):,} (attributes {mean_bytes:,.0f} bytes on average; a prompt of "
        f"{args.prompt_chars:,} chars and a completion of half that on one span in {args.prompt_every})"
    )
    for label, runs in (("off", off), ("on ", on)):
        best, median = len(spans) / min(runs), len(spans) / statistics.median(runs)
        print(f"scrubbing {label} (best of {args.repeat}): {best:,.0f} spans/s (median {median:,.0f})")
    print(f"on/off ratio:       {rate_on / rate_off:.2f} (goal >= {TARGET_RATIO})")
    print(f"on vs target:       {rate_on / TARGET_SPANS_PER_S:.2f}x of {TARGET_SPANS_PER_S:,} spans/s")


if __name__ == "__main__":
    main()
