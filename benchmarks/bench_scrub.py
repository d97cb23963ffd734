"""Scrubbing: local-store ingest with scrubbing on vs off, the cost per value, and the worst case per KB,
for each first-pass matcher installed (Hyperscan, RE2, pure Python).

1. Ingest. The spans are what a multi-agent run writes: per session one `coordination.session` span
   with a gathered config of ~2 KB JSON; agent rounds with ids, usage and model names; LLM calls
   carrying a prompt and a completion of distinct prose each (by default 2,000 + 1,000 characters on
   one span in four; `--prompt-every`, `--prompt-chars`); tool calls with arguments. Every export goes
   through the export thread's transform (`prepare_span`) into a fresh `LocalStoreExporter`, without a
   scrubber (off) or with one per matcher. The variants alternate, `--repeat` times each; the best run
   of each is compared. Times are this process's CPU time (all its threads, system time included):
   on a shared machine, other processes' load moves wall time by ±50% and CPU time far less.
2. Per value (CPU time): µs to scrub one value of each kind (prose, agent content, look-alikes, configs, tool
   arguments, secrets alone, a prose answer holding one secret, secret-dense prose: a secret of the rule
   table every ~250 characters of the same prose), as a ratio to plain prose of the same length.
3. Worst case (CPU time): µs per KB over adversarial 100 KB texts (each gate string repeated, near misses,
   separators), the slowest text for each matcher.

`--baseline REV` (repeatable) adds another version's engine from git, timed in the same runs, interleaved
(`--baseline main`, or a commit from before the rule table): every figure then has its "before" beside it.

Run: `python benchmarks/bench_scrub.py [--spans N] [--repeat N] [--matchers hyperscan,python]
[--baseline REV]`
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.pipeline._transform import prepare_span
from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._matchers import available
from mastrace.scrubbing._table import RULES, expand
from mastrace.store import LocalStoreExporter
from mastrace.tracing._snapshot import Limits

sys.path.insert(0, os.path.dirname(__file__))
import _scrub_baseline

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


def time_ingest(spans: list[ReadableSpan], scrubber: Any, batch: int = 512) -> float:
    limits = Limits()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as store:
        exporter = LocalStoreExporter(store)
        start = time.process_time()
        for i in range(0, len(spans), batch):
            exporter.export([prepare_span(s, scrubber, limits) for s in spans[i : i + batch]])
        elapsed = time.process_time() - start
        exporter.shutdown()
        assert exporter.failed_spans == 0
    return elapsed


def _values(rnd: random.Random, chars: int) -> dict[str, list[str]]:
    """Values of each kind, 40 of each, about `chars` long where the kind has a length."""
    samples = [expand(t) for rule in RULES for t in rule.samples]
    negatives = [expand(t) for rule in RULES for t in rule.negatives]

    def dense() -> str:
        out, size = [], 0
        while size < chars:
            part = _prose(rnd, 250) + " " + rnd.choice(samples) + " "
            out.append(part)
            size += len(part)
        return "".join(out)[:chars]

    agent = (
        "commit 3f786850e387550fdab836ed7e6dc881de23001b, request 550e8400-e29b-41d4-a716-446655440000, "
        "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, model "
        "gpt-4o-mini-2024-07-18, response resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b4, "
        "def get_api_key(self):\n    return self._api_key or os.environ.get('API_KEY')\n"
    )
    config = json.dumps(
        {"agents": [{"id": f"a{i}", "model": "gpt-4o", "max_tokens": 4096} for i in range(8)]}
    )
    return {
        "plain prose": [_prose(rnd, chars) for _ in range(40)],
        "agent content": [(agent * (chars // len(agent) + 1))[:chars] for _ in range(40)],
        "look-alikes": [" ".join(rnd.sample(negatives, 12)) for _ in range(40)],
        "config (JSON)": [config for _ in range(40)],
        "tool arguments": [
            json.dumps({"path": f"src/mod_{i}.py", "query": _prose(rnd, 120)}) for i in range(40)
        ],
        "secrets alone": [rnd.choice(samples) for _ in range(40)],
        "prose with a secret": [
            _prose(rnd, chars // 2) + f" {rnd.choice(samples)} " + _prose(rnd, chars // 2) for _ in range(40)
        ],
        "secret-dense prose": [dense() for _ in range(40)],
    }


def per_value(
    scrubbers: dict[str, Any], values: dict[str, list[str]], rounds: int = 7
) -> dict[str, dict[str, float]]:
    """µs per value (best of `rounds`, the variants alternating), for each kind and variant."""
    out: dict[str, dict[str, float]] = {}
    for kind, texts in values.items():
        out[kind] = {name: float("inf") for name in scrubbers}
        for _ in range(rounds):
            for name, scrubber in scrubbers.items():
                trail = type(_scrub_baseline.trail(scrubber))
                start = time.process_time()
                for text in texts:
                    scrubber._scrub_string_uncached(text, (), trail(), 0)
                out[kind][name] = min(out[kind][name], (time.process_time() - start) / len(texts) * 1e6)
    return out


def _adversarial(size: int) -> dict[str, str]:
    """Texts of `size` characters built to make a careless scrubber slow: gate strings repeated, near
    misses, separators."""
    texts: dict[str, str] = {
        "letters": "a" * size,
        "separators": "=: " * (size // 3),
        "secret words and separators": "password=token: key=" * (size // 20),
    }
    for rule in RULES:
        for key in rule.keys[:2]:
            texts[f"{rule.id} gate repeated"] = (key * (size // max(1, len(key)) + 1))[:size]
            texts[f"{rule.id} near misses"] = ((key + "a" * 19 + "!") * (size // (len(key) + 20) + 1))[:size]
    return texts


def _per_kb(scrubber: Any, label: str, size: int) -> float:
    text = _adversarial(size)[label]
    start = time.process_time()
    scrubber.scrub_text(text)
    return (time.process_time() - start) * 1e6 / (len(text) / 1024)


def worst_case(scrubbers: dict[str, Any], size: int = 100_000) -> dict[str, tuple[float, str]]:
    """The slowest µs per KB over adversarial texts of `size` characters, and which text."""
    texts = _adversarial(size)
    out = {}
    for name, scrubber in scrubbers.items():
        worst = (0.0, "")
        for label, text in texts.items():
            start = time.process_time()
            scrubber.scrub_text(text)
            worst = max(worst, ((time.process_time() - start) * 1e6 / (len(text) / 1024), label))
        out[name] = worst
    return out


def variants(matchers: list[str], baselines: list[str]) -> dict[str, Callable[[], Any]]:
    """A new scrubber for each variant: this version's per matcher, then each baseline's."""
    out: dict[str, Callable[[], Any]] = {m: (lambda m=m: Scrubber(matcher=m)) for m in matchers}
    for rev in baselines:
        cls = _scrub_baseline.load(rev)
        if "matcher" not in cls.__init__.__code__.co_varnames:  # the engine before the rule table
            out[rev] = cls
            continue
        for m in matchers:
            out[f"{rev}:{m}"] = lambda cls=cls, m=m: cls(matcher=m)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prompt-every", type=int, default=4, help="one LLM span with a prompt per N spans")
    parser.add_argument("--prompt-chars", type=int, default=2000, help="prompt size (the completion is half)")
    parser.add_argument(
        "--matchers", default=",".join(available()), help="comma-separated, of " + ", ".join(available())
    )
    parser.add_argument(
        "--baseline", action="append", default=[], metavar="REV", help="also time this git revision's engine"
    )
    parser.add_argument("--skip-ingest", action="store_true", help="only the per-value and worst-case parts")
    parser.add_argument("--skip-worst", action="store_true", help="leave out the worst case")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the per-value timing (best of)")
    parser.add_argument("--chars", type=int, default=2000, help="length of the values timed one by one")
    args = parser.parse_args()
    matchers = [m for m in args.matchers.split(",") if m]
    makers = variants(matchers, args.baseline)
    if not args.skip_ingest:
        ingest(args, makers)
    scrubbers = {name: make() for name, make in makers.items()}
    costs = per_value(scrubbers, _values(random.Random(11), args.chars), args.rounds)
    print(f"\nper value of {args.chars:,} chars, µs (best of {args.rounds}, CPU time), ratio to plain prose:")
    print(f"  {'kind':<20}" + "".join(f"{name:>22}" for name in scrubbers))
    for kind, row in costs.items():
        cells = "".join(f"{row[n]:>12.1f} ({row[n] / costs['plain prose'][n]:4.1f}×)  " for n in scrubbers)
        print(f"  {kind:<20}{cells}")
    for name in scrubbers:
        ratio = costs["secret-dense prose"][name] / costs["plain prose"][name]
        print(f"secret-dense / plain ({name}): {ratio:.2f} (goal <= 2)")
    for rev in args.baseline:  # this version over each baseline, kind by kind
        for m in matchers:
            base = f"{rev}:{m}" if f"{rev}:{m}" in costs["plain prose"] else rev
            ratios = ", ".join(f"{kind} {row[m] / row[base]:.2f}" for kind, row in costs.items())
            print(f"{m} / {base}: {ratios}")
    if args.skip_worst:
        return
    print("\nworst case, µs per KB over adversarial 100 KB texts (and the same text at 10 KB and 1 MB):")
    for name, (us, label) in worst_case(scrubbers).items():
        sizes = ", ".join(f"{_per_kb(scrubbers[name], label, n):.0f}" for n in (10_000, 1_000_000))
        print(f"  {name:<18} {us:8.1f} µs/KB  ({label}; {sizes} µs/KB)")


def ingest(args: argparse.Namespace, makers: dict[str, Callable[[], Any]]) -> None:
    spans = build_spans(args.spans, args.prompt_every, args.prompt_chars)
    mean_bytes = sum(len(json.dumps(dict(s.attributes or {}))) for s in spans) / len(spans)
    runs: dict[str, list[float]] = {"off": [], **{name: [] for name in makers}}
    for _ in range(args.repeat):
        runs["off"].append(time_ingest(spans, None))
        for name, make in makers.items():
            runs[name].append(time_ingest(spans, make()))  # a new scrubber: its caches start empty
    print(
        f"spans:              {len(spans):,} (attributes {mean_bytes:,.0f} bytes on average; a prompt of "
        f"{args.prompt_chars:,} chars and a completion of half that on one span in {args.prompt_every})"
    )
    rate_off = len(spans) / min(runs["off"])
    for label, times in runs.items():
        best, median = len(spans) / min(times), len(spans) / statistics.median(times)
        name = "scrubbing off" if label == "off" else f"scrubbing on, {label}"
        print(f"{name:<34} (best of {args.repeat}): {best:,.0f} spans/s (median {median:,.0f})")
    for name in makers:
        rate = len(spans) / min(runs[name])
        print(
            f"on/off ratio, {name:<18} {rate / rate_off:.2f} (goal >= {TARGET_RATIO}); "
            f"{rate / TARGET_SPANS_PER_S:.2f}x of {TARGET_SPANS_PER_S:,} spans/s"
        )


if __name__ == "__main__":
    main()
