"""Leak and false-positive rates of the scrubber on a corpus of labelled texts.

A corpus is a JSON Lines file: one object per item with `text`, and `secrets` (the strings that must not
survive scrubbing; a single `secret` string works too). An item without secrets is a negative: scrubbing
must leave it unchanged. A `.txt` file is read as negatives, one per line. Without a file, the corpus is
the rule table's own samples and look-alikes.

Each item is tried in three placements: as an attribute value under an ordinary key, inside a sentence
of prose, and as a leaf of a JSON config. A positive leaks in a placement when any of its secrets is
left in the output; a negative is a false positive when the output differs from the input.

Run: `python benchmarks/bench_secret_corpus.py [CORPUS.jsonl ...] [--matcher hyperscan|re2|python] [--show N]`
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mastrace.scrubbing._engine import Scrubber, ScrubTrail
from mastrace.scrubbing._matchers import available
from mastrace.scrubbing._table import RULES, expand


@dataclass(frozen=True)
class Item:
    text: str
    secrets: tuple[str, ...]
    source: str


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
            yield Item(raw["text"], tuple(s for s in secrets if s), f"{path.name}:{n}")


def table_corpus() -> Iterator[Item]:
    """The rule table's samples (positives: what the table's own patterns call secret) and look-alikes."""
    scrubber = Scrubber(matcher="python")
    for rule in RULES:
        for template in rule.samples:
            text = expand(template)
            parts = tuple(text[h.start : h.end] for h in scrubber._find(text))
            yield Item(text, parts, f"{rule.id} sample")
        for template in rule.negatives:
            yield Item(expand(template), (), f"{rule.id} look-alike")


PLACEMENTS: dict[str, tuple[Callable[[str], object], Callable[[Scrubber, object], str]]] = {
    "attribute value": (
        lambda text: text,
        lambda scrubber, value: str(scrubber.scrub_attribute("note", value, ("attributes",), ScrubTrail())),
    ),
    "in prose": (
        lambda text: f"The tool answered: {text} — then the agent went on with its plan.",
        lambda scrubber, value: str(scrubber.scrub_attribute("detail", value, ("attributes",), ScrubTrail())),
    ),
    "JSON config leaf": (
        lambda text: json.dumps({"llm": {"model": "gpt-4o", "endpoint_note": text}}),
        lambda scrubber, value: json.dumps(
            json.loads(str(scrubber.scrub_attribute("mastrace.config", value, ("attributes",), ScrubTrail())))
        ),
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "corpus", nargs="*", type=Path, help="JSON Lines (or .txt negatives); default: the table"
    )
    parser.add_argument("--matcher", choices=available(), default=available()[0])
    parser.add_argument("--show", type=int, default=10, help="list this many leaks and false positives")
    args = parser.parse_args()
    items = (
        [item for path in args.corpus for item in read_corpus(path)] if args.corpus else list(table_corpus())
    )
    scrubber = Scrubber(matcher=args.matcher)
    positives = [item for item in items if item.secrets]
    negatives = [item for item in items if not item.secrets]
    print(f"corpus: {len(items):,} items ({len(positives):,} with secrets, {len(negatives):,} without)")
    print(f"matcher: {scrubber.matcher}")
    leaks: list[str] = []
    false_positives: list[str] = []
    start = time.perf_counter()
    for placement, (place, scrub) in PLACEMENTS.items():
        leaked = changed = 0
        for item in items:
            value = place(item.text)
            out = scrub(scrubber, value)
            if item.secrets:
                escaped = [json.dumps(s)[1:-1] for s in item.secrets]
                if any(s in out for s in item.secrets) or (
                    placement.startswith("JSON") and any(e in out for e in escaped)
                ):
                    leaked += 1
                    leaks.append(f"{placement}: {item.source}: {item.text[:48]!r}…")
            elif out != (value if isinstance(value, str) else str(value)):
                changed += 1
                false_positives.append(f"{placement}: {item.source}: {item.text[:60]!r} -> {out[:60]!r}")
        leak_rate = leaked / len(positives) if positives else 0.0
        fp_rate = changed / len(negatives) if negatives else 0.0
        print(
            f"  {placement:<18} leaked {leaked:>5} of {len(positives):>5} ({leak_rate:6.2%})   "
            f"false positives {changed:>5} of {len(negatives):>5} ({fp_rate:6.2%})"
        )
    elapsed = time.perf_counter() - start
    total_chars = sum(len(item.text) for item in items) * len(PLACEMENTS)
    values = len(items) * len(PLACEMENTS)
    print(f"time: {elapsed:.2f} s for {values:,} values ({total_chars / 1024 / elapsed:,.0f} KB/s)")
    for title, lines in (("leaks", leaks), ("false positives", false_positives)):
        if lines and args.show:
            print(f"\nfirst {min(args.show, len(lines))} {title}:")
            for line in lines[: args.show]:
                print("  " + line)


if __name__ == "__main__":
    main()
