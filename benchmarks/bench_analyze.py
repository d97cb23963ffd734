"""`mastrace analyze` on a large store, against a plain DuckDB scan of the same rows.

Writes a store of 1,000,000 spans (NDJSON segments in the store's row format, generated directly
so that setup takes seconds): one MassGen-shaped session with 10 agents running rounds in
parallel; each round has two LLM calls, three `Tool execution:` spans each wrapping an MCP call
(two of them overlapping) and an answer or vote record; in one round in 50 an MCP call fails.

Then it times, alternately and `--repeat` times each:

- analyze latest: open the store, resolve `latest`, build the report and render
  ANALYSIS_REPORT.md (what `mastrace analyze` does, without interpreter start-up);
- analyze TRACE_ID: the same with the trace id given, which skips finding `latest` (a read of the
  roots files, or with `--no-roots` a scan of the whole store);
- scan: `SELECT count(*), sum(duration) FROM records` on a fresh connection.

and prints the median and best of each, the ratio of the medians (target: analyze ≤ 5× the
scan) and the ratio of the best runs (the least disturbed on a shared machine).

Before timing, it checks that `tree` prints the same lines from the skeleton files as from the
segments alone (the skeleton files moved away).

Run: `python benchmarks/bench_analyze.py [--spans N] [--repeat N] [--dir DIR] [--no-roots] [--no-skeleton]`
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mastrace.analysis import (
    TraceStore,
    build_report,
    render_markdown,
    render_runs,
    render_trace,
    render_trace_html,
)
from mastrace.store import connect
from mastrace.store._schema import ROOTS_DIR, SEGMENT_SUFFIX, SEGMENTS_DIR, SKELETON_DIR, SKELETON_SUFFIX
from mastrace.store._writer import DEFAULT_SEGMENT_BYTES

TARGET_RATIO = 5.0
TREE_TARGET_RATIO = 3.0
AGENTS = 10
SPANS_PER_ROUND = 10  # round + 2 llm + 3 × (tool execution + mcp) + 1 record
SEGMENTS = 4
T0 = 1_700_000_000_000_000_000
TRACE_ID = "0123456789abcdef0123456789abcdef"
MS = 1_000_000


def _line(
    span_id: int, parent: int | None, name: str, start: int, end: int, attrs: str, extra: str = ""
) -> tuple[str, str]:
    """A span's segment line, and its skeleton line after the offset fields (`_schema.SKELETON_FIELDS`)."""
    parent_field = f'"parent_span_id":"{parent:016x}",' if parent is not None else ""
    line = (
        f'{{"trace_id":"{TRACE_ID}","span_id":"{span_id:016x}",{parent_field}"start_ns":{start},"end_ns":{end},'
        f'"created_ns":{end},"span_name":"{name}","level":{17 if extra else 9},"span_type":"span",'
        f'"otel_kind":"internal","otel_status_code":"{"ERROR" if extra else "UNSET"}","attributes":{attrs}'
        f'{extra},"service_name":"bench","otel_scope_name":"mastrace.mixins"}}\n'
    )
    return (
        line,
        f"{TRACE_ID},{span_id},{'' if parent is None else parent},{start},{end},{1 if extra else 0}\n",
    )


_ERROR = ',"is_exception":true,"exception_type":"TimeoutError","exception_message":"tool timed out"'


def _round_lines(next_id: int, session: int, agent: int, rnd: int, start: int) -> Iterator[tuple[str, str]]:
    """The ten spans of one round, starting at `start` (ns); ids from `next_id`."""
    agent_id = f"agent_{agent}"
    kind = "initial_answer" if rnd == 0 else "voting"
    usage = {
        "massgen.usage.input": 1200 + rnd % 50,
        "massgen.usage.output": 300,
        "massgen.usage.cached_input": 400,
        "massgen.usage.reasoning": 50,
        "massgen.usage.cost": 0.0125,
    }
    attrs = {
        "massgen.agent_id": agent_id,
        "massgen.round": rnd,
        "massgen.round_type": kind,
        "massgen.outcome": "answer" if rnd == 0 else "vote",
        **usage,
    }
    rid = next_id
    end = start + 1000 * MS
    yield _line(rid, session, f"agent.{agent_id}.round_{rnd}", start, end, json.dumps(attrs))
    llm = json.dumps(
        {
            "gen_ai.request.model": "sim-large",
            "gen_ai.usage.input_tokens": 600,
            "gen_ai.usage.output_tokens": 150,
        }
    )
    yield _line(rid + 1, rid, "llm.simulated.stream", start, start + 300 * MS, llm)
    yield _line(rid + 2, rid, "llm.simulated.stream", start + 700 * MS, end, llm)
    tools = ((300, 450), (350, 500), (550, 650))  # the first two overlap
    for i, (a, b) in enumerate(tools):
        wrapper, call = rid + 3 + 2 * i, rid + 4 + 2 * i
        error = _ERROR if i == 2 and rnd % 50 == 7 else ""
        yield _line(
            wrapper, rid, f"Tool execution: mcp__search__tool{i}", start + a * MS, start + b * MS, "{}", error
        )
        yield _line(
            call,
            wrapper,
            f"mcp.search.tool{i}",
            start + a * MS,
            start + b * MS,
            f'{{"mcp.method.name":"tools/call","gen_ai.tool.name":"tool{i}"}}',
            error,
        )
    record = "Agent answer: x" if rnd == 0 else f"Agent vote: {agent_id} -> x"
    yield _line(rid + 9, session, record, end, end, f'{{"massgen.agent_id":"{agent_id}"}}')


def write_store(
    path: Path, spans: int, *, roots: bool = True, skeleton: bool = True, layout: str = "interleaved"
) -> int:
    """Write about `spans` spans into `path`; returns how many were written.

    `interleaved`: the rounds go to `SEGMENTS` files in turn, as when several worker processes
    write one trace into their own segments. `writer`: one process's layout, spans in the order
    they end (the session last) in segments closed at the writer's `DEFAULT_SEGMENT_BYTES`.
    With `roots`, each segment gets its roots file (the lines of its root spans), and with
    `skeleton` its skeleton file, as the store's writer keeps them; without, the store looks like
    one written before those files existed.
    """
    folder = path / SEGMENTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    rounds = max(1, (spans - 1) // SPANS_PER_ROUND)
    per_agent = -(-rounds // AGENTS)
    session_end = T0 + (per_agent + 1) * 1000 * MS
    session = _line(1, None, "coordination.session", T0, session_end, '{"massgen.task":"bench"}')
    chunks = (
        list(_round_lines(2 + n * SPANS_PER_ROUND, 1, n % AGENTS, n // AGENTS, _round_start(n)))
        for n in range(rounds)
    )
    if roots:
        (path / ROOTS_DIR).mkdir(parents=True, exist_ok=True)
    if skeleton:
        (path / SKELETON_DIR).mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        opened: list[tuple[Any, Any, int]] = []  # (segment, skeleton file, bytes written)

        def segment(i: int) -> Any:
            while len(opened) <= i:
                name = f"bench-{len(opened):03d}"
                if roots:  # written before its segment, as the writer does; the session's is added below
                    (path / ROOTS_DIR / f"{name}{SEGMENT_SUFFIX}").write_text("", encoding="utf-8")
                skel = None
                if skeleton:
                    skel = stack.enter_context(open(path / SKELETON_DIR / f"{name}{SKELETON_SUFFIX}", "w"))
                seg = stack.enter_context(open(folder / f"{name}{SEGMENT_SUFFIX}", "w", encoding="utf-8"))
                opened.append((seg, skel, 0))
            return opened[i][0]

        def write(i: int, pairs: list[tuple[str, str]]) -> None:
            seg = segment(i)
            _, skel, size = opened[i]
            if skel is not None:
                offsets = itertools.accumulate((len(line) for line, _ in pairs[:-1]), initial=size)
                skel.write("".join(f"{o},0,{tail}" for o, (_, tail) in zip(offsets, pairs, strict=True)))
            text = "".join(line for line, _ in pairs)
            seg.write(text)
            opened[i] = (seg, skel, size + len(text))

        if layout == "interleaved":
            write(0, [session])
            for n, chunk in enumerate(chunks):
                write(n % SEGMENTS, chunk)
            last = 0
        else:
            for chunk in itertools.chain(chunks, [[session]]):
                if not opened or opened[-1][2] >= DEFAULT_SEGMENT_BYTES:
                    segment(len(opened))
                write(len(opened) - 1, chunk)
            last = len(opened) - 1
        if roots:
            (path / ROOTS_DIR / f"bench-{last:03d}{SEGMENT_SUFFIX}").write_text(session[0], encoding="utf-8")
    return 1 + rounds * SPANS_PER_ROUND


def _round_start(n: int) -> int:
    agent, rnd = n % AGENTS, n // AGENTS
    return T0 + rnd * 1000 * MS + agent * MS


def time_analyze(path: Path, trace: str) -> float:
    """Seconds for what `mastrace analyze TRACE` does, minus interpreter start-up."""
    started = time.perf_counter()
    with TraceStore(path) as store:
        render_markdown(build_report(store, store.resolve(trace)))
    return time.perf_counter() - started


def time_scan(path: Path) -> float:
    started = time.perf_counter()
    con = connect(path)
    try:
        con.execute("SELECT count(*), sum(duration) FROM records").fetchall()
    finally:
        con.close()
    return time.perf_counter() - started


def time_tree(path: Path, trace: str) -> float:
    """Seconds for what `mastrace tree TRACE` does (2,000 lines printed), minus start-up."""
    started = time.perf_counter()
    with TraceStore(path) as store:
        render_trace(store, store.resolve(trace), max_spans=2000)
    return time.perf_counter() - started


def time_view(path: Path, trace: str) -> float:
    """Seconds for what `mastrace view TRACE` does (its default 20,000 spans drawn), minus start-up."""
    started = time.perf_counter()
    with TraceStore(path) as store:
        render_trace_html(store, store.resolve(trace))
    return time.perf_counter() - started


def time_runs(path: Path) -> float:
    """Seconds for what `mastrace runs` does, minus start-up."""
    started = time.perf_counter()
    with TraceStore(path) as store:
        render_runs(store.runs(limit=20))
    return time.perf_counter() - started


def check_skeleton(path: Path) -> None:
    """Stop unless `tree` prints the same from the skeleton files as from the segments alone."""
    with TraceStore(path) as store:
        fast = render_trace(store, TRACE_ID, max_spans=2000)
    hidden = path / f"{SKELETON_DIR}.hidden"
    (path / SKELETON_DIR).rename(hidden)
    try:
        with TraceStore(path) as store:
            slow = render_trace(store, TRACE_ID, max_spans=2000)
    finally:
        hidden.rename(path / SKELETON_DIR)
    if fast != slow:
        raise SystemExit("the tree read through the skeleton files differs from the segments' own")
    print("  checked: the tree read through the skeleton files equals the segments' own")


def _runs(values: list[float]) -> str:
    return f"median {statistics.median(values):6.2f} s  best {min(values):6.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="write the store here (default: a temp dir)")
    parser.add_argument(
        "--no-roots", action="store_true", help="write no roots files, like a store from an older version"
    )
    parser.add_argument(
        "--no-skeleton",
        action="store_true",
        help="write no skeleton files, like a store from an older version",
    )
    parser.add_argument(
        "--layout",
        choices=("interleaved", "writer"),
        default="interleaved",
        help="rounds spread over 4 segments in turn (several writers), or one writer's segments",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mastrace-bench-") as tmp:
        path = args.dir or Path(tmp) / "store"
        started = time.perf_counter()
        count = write_store(
            path, args.spans, roots=not args.no_roots, skeleton=not args.no_skeleton, layout=args.layout
        )
        print(
            f"wrote {count:,} spans ({args.layout} layout) in {time.perf_counter() - started:.1f} s to {path}"
        )
        if not args.no_skeleton:
            check_skeleton(path)
        time_scan(path)  # warm the page cache, so every variant reads from memory
        timings: dict[str, list[float]] = {
            "latest": [],
            "by id": [],
            "tree": [],
            "view": [],
            "runs": [],
            "scan": [],
        }
        for _ in range(args.repeat):  # interleaved: each variant sees the same background load
            timings["latest"].append(time_analyze(path, "latest"))
            timings["by id"].append(time_analyze(path, TRACE_ID))
            timings["tree"].append(time_tree(path, "latest"))
            timings["view"].append(time_view(path, "latest"))
            timings["runs"].append(time_runs(path))
            timings["scan"].append(time_scan(path))
        scan, scan_best = statistics.median(timings["scan"]), min(timings["scan"])
        print(f"  plain scan: count(*), sum(duration)     {_runs(timings['scan'])}")
        labels = (
            ("latest", "analyze latest (resolve + report)", TARGET_RATIO),
            ("by id", "analyze TRACE_ID (report only)", TARGET_RATIO),
            ("tree", "tree latest (2,000 lines)", TREE_TARGET_RATIO),
            ("view", "view latest (20,000 spans drawn)", TREE_TARGET_RATIO),
            ("runs", "runs", TREE_TARGET_RATIO),
        )
        for name, label, target in labels:
            ratio = statistics.median(timings[name]) / scan if scan else float("inf")
            best = min(timings[name]) / scan_best if scan_best else float("inf")
            verdict = "met" if ratio <= target else "NOT met"
            print(
                f"  {label:<38}  {_runs(timings[name])}  ratio {ratio:4.2f}× (best/best {best:4.2f}×)  "
                f"target ≤ {target}×: {verdict}"
            )


if __name__ == "__main__":
    main()
