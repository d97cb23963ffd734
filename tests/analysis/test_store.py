"""`TraceStore`: runs, trace references (latest, previous, prefixes) and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mastrace.analysis import TraceStore
from mastrace.exceptions import StoreError
from mastrace.store.reader import root_files, roots_complete, segment_files

from .conftest import TraceWriter, write_session


@pytest.fixture
def two_runs(writer: TraceWriter, tmp_path: Path) -> tuple[Path, str, str]:
    """Two sessions a minute apart, plus a stray non-session trace in between."""
    first = write_session(writer)
    writer.offset_ms = 30_000
    writer.span("stray", "background.job", 0, 100)
    stray = writer.trace_id("stray")
    writer.offset_ms = 60_000
    second = write_session(writer)
    assert len({first, stray, second}) == 3
    return tmp_path / "store", first, second


def test_latest_and_previous_are_the_newest_runs_of_any_kind(two_runs: tuple[Path, str, str]) -> None:
    """`latest` and `previous` are the two newest runs, a non-session trace counting like a session."""
    path, first, second = two_runs
    with TraceStore(path) as store:
        stray = next(r.trace_id for r in store.index() if r.trace_id not in (first, second))
        assert (store.resolve("latest"), store.resolve("previous"), store.resolve(None)) == (
            second,
            stray,
            second,
        )
        assert store.aliases() == {second: "latest", stray: "previous"}


def test_a_missing_alias_says_how_many_runs_the_store_has(writer: TraceWriter, tmp_path: Path) -> None:
    """With one session, `previous` is an error that says the store has one run (a model reads it too)."""
    write_session(writer)
    with TraceStore(tmp_path / "store") as store, pytest.raises(StoreError) as caught:
        store.resolve("previous")
    assert str(caught.value).endswith("has 1 run")


NEWER_SESSION = "f" * 32


def add_session_by_hand(segment: Path) -> None:
    """Append a coordination session that starts after every other run, as a bare store line."""
    start = 2_000_000_000_000_000_000
    segment.parent.mkdir(parents=True, exist_ok=True)
    with segment.open("a", encoding="utf-8") as handle:
        handle.write(
            json.dumps(
                {
                    "trace_id": NEWER_SESSION,
                    "span_id": "f" * 16,
                    "start_ns": start,
                    "end_ns": start + 1_000_000_000,
                    "created_ns": start,
                    "span_name": "coordination.session",
                    "attributes": {},
                }
            )
            + "\n"
        )


def test_latest_is_read_from_the_roots_files_when_every_segment_has_one(
    two_runs: tuple[Path, str, str],
) -> None:
    """With complete roots files, `latest` is found there: a root written only to a segment is not seen."""
    path, _, second = two_runs
    assert roots_complete(path)
    add_session_by_hand(segment_files(path)[0])
    with TraceStore(path) as store:
        assert store.resolve("latest") == second


def test_latest_scans_the_segments_when_a_segment_has_no_roots_file(two_runs: tuple[Path, str, str]) -> None:
    """A segment from an older writer (no roots file) makes `latest` scan `records` and find its run."""
    path, _, second = two_runs
    add_session_by_hand(path / "segments" / "oldhost-1-1-1.ndjson")
    assert not roots_complete(path)
    with TraceStore(path) as store:
        assert (store.resolve("latest"), store.resolve("previous")) == (NEWER_SESSION, second)


def test_a_store_without_roots_files_resolves_latest_and_previous(two_runs: tuple[Path, str, str]) -> None:
    """A store written before roots files existed still resolves `latest` and `previous` by scanning."""
    path, first, second = two_runs
    for roots in root_files(path):
        roots.unlink()
    with TraceStore(path) as store:
        stray = next(r.trace_id for r in store.index() if r.trace_id not in (first, second))
        assert (store.resolve("latest"), store.resolve("previous")) == (second, stray)


def test_previous_is_read_from_the_roots_files(two_runs: tuple[Path, str, str]) -> None:
    """`previous` is the second newest session listed in the roots files."""
    path, _, second = two_runs
    add_session_by_hand(path / "roots" / segment_files(path)[0].name)
    with TraceStore(path) as store:
        assert (store.resolve("latest"), store.resolve("previous")) == (NEWER_SESSION, second)


def test_prefix_resolves_to_the_full_id(two_runs: tuple[Path, str, str]) -> None:
    """A unique prefix of at least four hex digits resolves to the trace id."""
    path, first, second = two_runs
    prefix = next(first[:n] for n in range(4, 33) if not second.startswith(first[:n]))
    with TraceStore(path) as store:
        assert store.resolve(prefix.upper()) == first


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("zzzz", "not a trace id"),
        ("ab", "too short"),
        ("abcdef12", "no trace matching"),
    ],
)
def test_bad_references_raise(two_runs: tuple[Path, str, str], ref: str, message: str) -> None:
    """Malformed, too short and unknown references raise StoreError with a reason."""
    with TraceStore(two_runs[0]) as store, pytest.raises(StoreError, match=message):
        store.resolve(ref)


def test_runs_summarise_each_trace_newest_first(two_runs: tuple[Path, str, str]) -> None:
    """`runs()` gives one summary per trace, newest first, with totals from round spans."""
    path, first, second = two_runs
    with TraceStore(path) as store:
        runs = store.runs()
    assert [r.trace_id for r in runs][::2] == [second, first]
    assert [r.name for r in runs] == ["coordination.session", "background.job", "coordination.session"]
    newest = runs[0]
    assert (newest.spans, newest.errors, newest.input_tokens, newest.output_tokens) == (25, 1, 2300, 780)
    assert newest.duration == pytest.approx(10.0)
    assert newest.cost == pytest.approx(0.024)


def test_spans_decode_json_columns(two_runs: tuple[Path, str, str]) -> None:
    """`spans()` returns rows with attributes, links and events decoded."""
    path, _, second = two_runs
    with TraceStore(path) as store:
        rows = store.spans(second)
    spans = {s.name: s for s in rows}
    vote = spans["Agent vote: agent_b -> agent2.1"]
    assert vote.attributes["massgen.vote.reason"] == "shortest name"
    assert vote.links[0]["span_id"] == spans["Agent answer: agent2.1"].span_id
    failed = [s for s in rows if s.is_error]
    assert [s.exception_type for s in failed] == ["PermissionError"]


def test_empty_store_is_reported(tmp_path: Path) -> None:
    """A folder without segments is reported as an empty store."""
    (tmp_path / "empty").mkdir()
    with TraceStore(tmp_path / "empty") as store, pytest.raises(StoreError, match="has no spans yet"):
        store.resolve("latest")


def test_missing_store_is_reported(tmp_path: Path) -> None:
    """A store folder that does not exist is named in the error."""
    with TraceStore(tmp_path / "nowhere") as store, pytest.raises(StoreError, match="no local store at"):
        store.runs()


def test_sql_errors_become_store_errors(two_runs: tuple[Path, str, str]) -> None:
    """Bad SQL raises StoreError, not a raw DuckDB error."""
    with TraceStore(two_runs[0]) as store, pytest.raises(StoreError, match="query failed"):
        store.rows("SELEC 1")


def test_light_spans_filled_later_equal_full_spans(tmp_path: Path) -> None:
    """`spans(details=False)` then `fill()` gives the same rows as `spans()` for the filled spans."""
    import mastrace
    from mastrace.analysis import TraceStore

    store = tmp_path / "store"
    mastrace.configure(local=store, synchronous=True)
    tracer = mastrace.get_tracer("t")
    with tracer.span("coordination.session", attributes={"massgen.task": "x"}) as root:
        root.add_event("e", {"k": 1})
        for i in range(5):
            with tracer.span(f"agent.a.round_{i}", attributes={"massgen.round": i}):
                pass
    mastrace.shutdown()
    with TraceStore(store) as traces:
        trace_id = traces.resolve("latest")
        full = traces.spans(trace_id)
        light = traces.spans(trace_id, details=False)
        assert all(s.attributes == {} and s.events == [] for s in light)
        traces.fill(trace_id, light[:3])
    assert light[:3] == full[:3]
    assert light[3].attributes == {} and full[3].attributes
