"""Leaks and false positives of the scrubber on a corpus of labelled texts, per family, per context and
per placement; and replacements per MB of ordinary content.

Corpus format (JSON Lines, one object per line, UTF-8):

    {"text": "...", "secrets": ["...", ...], "family": "password hash", "context": "config"}

- `text` (required): the text as it would reach a span.
- `secrets`: the substrings that must not survive scrubbing (`secret`, one string, works too). An item
  without secrets is a *negative*: scrubbing must leave it byte for byte.
- `family`, `context` (optional, free labels): how the report groups items (`-` when absent), e.g. the
  kind of credential (`password hash`, `compact name`) and where it stands (`prose`, `assignment`,
  `xml element`, `command line`, `netrc`, `call argument`, `log line`).

A `.txt` file is read as negatives, one per line. A directory is read as ordinary content: each file
is one whole value that holds no secret (see `--ordinary`). Without a corpus, the rule table's own
samples and look-alikes are used.

Each item is tried in six placements: an attribute value under an ordinary key, a sentence of prose
around it, a leaf of a JSON config, an exception message, the span name and an event's name; the last
three go through a real OpenTelemetry span and the export transform (`prepare_span`). A positive leaks
in a placement when any of its secrets is in the output; a negative is a false positive when the
output differs from the input.

`--ordinary DIR` (repeatable) counts the replacements (`[Scrubbed…`) made in each file of DIR, scrubbed
whole as one attribute value, and reports them per MB: the precision figure on ordinary agent content
(the repository's own is `tests/scrubbing/corpus/ordinary`).

Run: `python benchmarks/bench_secret_corpus.py [CORPUS.jsonl ...] [--ordinary DIR] [--matcher NAME]
[--show N]`
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.pipeline._transform import prepare_span
from mastrace.scrubbing._engine import Scrubber, ScrubTrail
from mastrace.scrubbing._matchers import available
from mastrace.scrubbing._table import RULES, expand
from mastrace.tracing._snapshot import Limits


@dataclass(frozen=True)
class Item:
    text: str
    secrets: tuple[str, ...]
    source: str
    family: str = "-"
    context: str = "-"


def read_corpus(path: Path) -> Iterator[Item]:
    """The items of a JSON Lines corpus, or of a text file of negatives."""
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if path.suffix == ".txt":
                yield Item(line, (), f"{path.name}:{n}")
                continue
            raw = json.loads(line)
            secrets = raw.get("secrets") or ([raw["secret"]] if raw.get("secret") else [])
            yield Item(
                raw["text"],
                tuple(s for s in secrets if s),
                f"{path.name}:{n}",
                str(raw.get("family") or "-"),
                str(raw.get("context") or "-"),
            )


def table_corpus() -> Iterator[Item]:
    """The rule table's samples (positives: what the table's own patterns call secret) and look-alikes."""
    scrubber = Scrubber(matcher="python")
    for rule in RULES:
        for template in rule.samples:
            text = expand(template)
            parts = tuple(text[h.start : h.end] for h in scrubber._find(text))
            yield Item(text, parts, f"{rule.id} sample", rule.id, "table sample")
        for template in rule.negatives:
            yield Item(expand(template), (), f"{rule.id} look-alike", rule.id, "table look-alike")


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: object) -> SpanExportResult:
        self.spans.extend(spans)  # type: ignore[call-overload]
        return SpanExportResult.SUCCESS


_COLLECT = _Collect()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_COLLECT))
_TRACER = _PROVIDER.get_tracer("bench_secret_corpus")


def _span_text(scrubber: Scrubber, text: str, where: str) -> str:
    """`text` as the span name, an exception message or an event name, after the export transform: the
    same texts again, from the exported span."""
    _COLLECT.spans.clear()
    with _TRACER.start_as_current_span(text if where == "span name" else "probe") as span:
        if where == "exception":
            span.record_exception(RuntimeError(text))
        elif where == "event":
            span.add_event(text)
    out = prepare_span(_COLLECT.spans[-1], scrubber, Limits())
    if where == "span name":
        return out.name
    if where == "event":
        return out.events[0].name
    return str(dict(out.events[0].attributes or {}).get("exception.message"))


Placement = tuple[Callable[[str], str], Callable[[Scrubber, str], str]]
PLACEMENTS: dict[str, Placement] = {
    "attribute": (
        lambda text: text,
        lambda scrubber, value: str(scrubber.scrub_attribute("note", value, ("attributes",), ScrubTrail())),
    ),
    "prose": (
        lambda text: f"The tool answered: {text} — then the agent went on with its plan.",
        lambda scrubber, value: str(scrubber.scrub_attribute("detail", value, ("attributes",), ScrubTrail())),
    ),
    "config": (
        lambda text: json.dumps({"llm": {"model": "gpt-4o", "endpoint_note": text}}, indent=2),
        lambda scrubber, value: str(
            scrubber.scrub_attribute("mastrace.config", value, ("attributes",), ScrubTrail())
        ),
    ),
    "exception": (lambda text: text, lambda scrubber, value: _span_text(scrubber, value, "exception")),
    "span name": (lambda text: text, lambda scrubber, value: _span_text(scrubber, value, "span name")),
    "event": (lambda text: text, lambda scrubber, value: _span_text(scrubber, value, "event")),
}


@dataclass
class Tally:
    positives: int = 0
    leaked: int = 0
    negatives: int = 0
    changed: int = 0


def leaks(item: Item, value: str, out: str) -> bool:
    """Whether a secret of `item` survived in `out` (in a JSON placement, also as JSON spells it)."""
    spelled = {s for s in item.secrets} | {json.dumps(s)[1:-1] for s in item.secrets}
    return any(s in out for s in spelled)


def run(
    scrubber: Scrubber, items: list[Item], placements: dict[str, Placement]
) -> dict[str, dict[str, Tally]]:
    """Tallies by placement, family and context (keys `placement`, `family`, `context`, `all`) and the
    lines of each leak and false positive (under `_lines`)."""
    tallies: dict[str, dict[str, Tally]] = {k: defaultdict(Tally) for k in ("placement", "family", "context")}
    for placement, (place, scrub) in placements.items():
        for item in items:
            value = place(item.text)
            out = scrub(scrubber, value)
            groups = (("placement", placement), ("family", item.family), ("context", item.context))
            if item.secrets:
                bad = leaks(item, value, out)
                for key, name in groups:
                    tallies[key][name].positives += 1
                    tallies[key][name].leaked += bad
                if bad:
                    LINES["leaks"].append(
                        f"{placement}: {item.source} [{item.family}/{item.context}]: {item.text[:70]!r}"
                    )
            else:
                bad = out != value
                for key, name in groups:
                    tallies[key][name].negatives += 1
                    tallies[key][name].changed += bad
                if bad:
                    LINES["false positives"].append(
                        f"{placement}: {item.source}: {item.text[:60]!r} -> {out[:70]!r}"
                    )
    return tallies


LINES: dict[str, list[str]] = {"leaks": [], "false positives": []}


def ordinary(scrubber: Scrubber, folders: list[Path]) -> tuple[int, int, list[str]]:
    """Replacements made in the files of `folders`, each scrubbed whole as one attribute value; their
    size in bytes; and the files changed without a replacement (re-encoded)."""
    count = size = 0
    reencoded = []
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            text = path.read_text(encoding="utf-8")
            out = str(scrubber.scrub_attribute("note", text, ("attributes",), ScrubTrail()))
            made = out.count("[Scrubbed") - text.count("[Scrubbed")
            count += made
            size += len(text.encode())
            if made:
                print(f"  {path.name}: {made} replacement(s)")
            elif out != text:
                reencoded.append(path.name)
    return count, size, reencoded


def _print_tallies(title: str, tallies: dict[str, Tally]) -> None:
    print(f"\nby {title}:")
    print(f"  {title:<22} {'leaked':>16}   {'false positives':>16}")
    for name in sorted(tallies):
        t = tallies[name]
        leak = f"{t.leaked}/{t.positives}" if t.positives else "-"
        fp = f"{t.changed}/{t.negatives}" if t.negatives else "-"
        print(f"  {name:<22} {leak:>16}   {fp:>16}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "corpus", nargs="*", type=Path, help="JSON Lines (or .txt negatives); default: the table"
    )
    parser.add_argument(
        "--ordinary", action="append", type=Path, default=[], help="a folder of ordinary content"
    )
    parser.add_argument("--matcher", choices=available(), default=available()[0])
    parser.add_argument("--placements", default=",".join(PLACEMENTS), help="comma-separated subset")
    parser.add_argument("--show", type=int, default=10, help="list this many leaks and false positives")
    args = parser.parse_args()
    scrubber = Scrubber(matcher=args.matcher)
    print(f"matcher: {scrubber.matcher}")
    if args.ordinary:
        count, size, reencoded = ordinary(scrubber, args.ordinary)
        print(
            f"ordinary content: {size:,} bytes, {count} replacement(s), {count / size * 1e6:.1f} per MB; "
            f"re-encoded without a replacement: {len(reencoded)} {reencoded or ''}"
        )
        if not args.corpus:
            return
    items = (
        [item for path in args.corpus for item in read_corpus(path)] if args.corpus else list(table_corpus())
    )
    positives = sum(1 for item in items if item.secrets)
    print(f"corpus: {len(items):,} items ({positives:,} with secrets, {len(items) - positives:,} without)")
    chosen = {name: PLACEMENTS[name] for name in args.placements.split(",")}
    start = time.perf_counter()
    tallies = run(scrubber, items, chosen)
    elapsed = time.perf_counter() - start
    for title in ("placement", "family", "context"):
        _print_tallies(title, tallies[title])
    total = sum(len(item.text) for item in items) * len(chosen)
    values = len(items) * len(chosen)
    print(f"\ntime: {elapsed:.2f} s for {values:,} values ({total / 1024 / elapsed:,.0f} KB/s)")
    for title, lines in LINES.items():
        if lines and args.show:
            print(f"\nfirst {min(args.show, len(lines))} {title} (of {len(lines)}):")
            for line in lines[: args.show]:
                print("  " + line)


if __name__ == "__main__":
    main()
