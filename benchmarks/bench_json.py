"""One JSON path: the standard library's C encoder (what mastrace uses) vs `orjson` and `msgspec`,
on the payloads mastrace encodes: a span's attributes (store rows), a config snapshot (sorted keys,
canonical), and a usage report. Prints µs per payload and the ratio to the standard library.

`orjson` is the optional `mastrace[speed]` extra (the store writer uses it when installed);
`msgspec` is not a dependency: install it to include it (`pip install msgspec`). The decision
is in the README's Performance section.

Run: `python benchmarks/bench_json.py [--n N]`
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from mastrace.pipeline._snapshots_on_spans import _serialise as canonical_json
from mastrace.tracing._snapshot import _compact_encode as store_dumps  # dumps_json's standard library path

ATTRIBUTES: dict[str, Any] = {
    "massgen.agent_id": "agent_a",
    "massgen.round": 2,
    "massgen.round_type": "voting",
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 1234,
    "gen_ai.usage.output_tokens": 321,
    "gen_ai.response.time_to_first_chunk": 0.4123,
    "gen_ai.response.finish_reasons": ("stop",),
    "gen_ai.input.messages": "Summarise the answers so far and vote for the best one. " * 8,
}
CONFIG: dict[str, Any] = {
    "agents": {
        f"agent_{i}": {
            "model": "gpt-4o-mini",
            "temperature": 0.2 + i / 10,
            "tools": ["search", "calculator", "filesystem"],
            "system_prompt": "You are a careful assistant. " * 10,
            "limits": {"max_tokens": 4096, "timeout_s": 120},
        }
        for i in range(8)
    },
    "orchestrator": {"max_rounds": 5, "voting": "majority", "snapshot_storage": "snapshots"},
}
USAGE = {"total": {"input_tokens": 123456, "output_tokens": 23456, "cost": 1.2345}, "by_agent": {}}


def timed(fn: Callable[[], Any], n: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    args = parser.parse_args()
    try:
        import orjson
    except ImportError:
        print("install orjson (pip install 'mastrace[speed]') to compare")
        return
    try:
        import msgspec
    except ImportError:
        msgspec = None
    encoder = msgspec.json.Encoder(order="sorted") if msgspec else None

    def nothing() -> None:
        return None

    cases = {
        "span attributes (store row)": (
            lambda: store_dumps(ATTRIBUTES),
            lambda: orjson.dumps(ATTRIBUTES).decode(),
            (lambda: msgspec.json.encode(ATTRIBUTES).decode()) if msgspec else nothing,
        ),
        "config snapshot (sorted, canonical)": (
            lambda: canonical_json(CONFIG),
            lambda: orjson.dumps(CONFIG, option=orjson.OPT_SORT_KEYS).decode(),
            (lambda: encoder.encode(CONFIG).decode()) if encoder else nothing,
        ),
        "usage report": (
            lambda: json.dumps(USAGE, separators=(",", ":")),
            lambda: orjson.dumps(USAGE).decode(),
            (lambda: msgspec.json.encode(USAGE).decode()) if msgspec else nothing,
        ),
    }
    print(f"{'payload':38} {'stdlib':>9} {'orjson':>9} {'msgspec':>9}   (µs, best of 5 × {args.n})")
    for name, (std, orj, msg) in cases.items():
        s, o = timed(std, args.n), timed(orj, args.n)
        m = timed(msg, args.n) if msgspec else float("nan")
        print(f"{name:38} {s:9.2f} {o:9.2f} {m:9.2f}   orjson {s / o:.1f}x, msgspec {s / m:.1f}x faster")


if __name__ == "__main__":
    main()
