"""The test helpers: `capture_spans`, `CapturedSpans` and `assert_tree`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mastrace
from mastrace.testing import CapturedSpans, assert_tree, capture_spans


def _session(spans: CapturedSpans, *rounds: tuple[str, str]) -> None:
    """Record `coordination.session` with one `agent.<id>.round_0` span per (agent, outcome)."""
    tracer = mastrace.get_tracer()
    with tracer.span("coordination.session"):
        for agent, outcome in rounds:
            with tracer.span(
                f"agent.{agent}.round_0", {"massgen.outcome": outcome, "massgen.is_winner": False}
            ):
                pass


def _failure(spans: CapturedSpans, outline: str, **options: bool) -> str:
    with pytest.raises(AssertionError) as info:
        assert_tree(spans, outline, **options)
    return str(info.value)


# --- CapturedSpans -----------------------------------------------------------------------------------
def test_capture_spans_records_finished_spans() -> None:
    """Spans ended inside `capture_spans()` are available at once, in end order."""
    with capture_spans() as spans:
        _session(spans, ("a", "answer"))
        assert spans.names() == ["agent.a.round_0", "coordination.session"]


def test_one_rejects_a_name_seen_twice(mastrace_spans: CapturedSpans) -> None:
    """`one()` fails when the name is not unique."""
    _session(mastrace_spans, ("a", "answer"), ("a", "vote"))
    with pytest.raises(AssertionError, match="found 2"):
        mastrace_spans.one("agent.a.round_0")


def test_parent_of_finds_the_captured_parent(mastrace_spans: CapturedSpans) -> None:
    """`parent_of()` returns the captured parent span, and None for a root."""
    _session(mastrace_spans, ("a", "answer"))
    root = mastrace_spans.one("coordination.session")
    assert mastrace_spans.parent_of(mastrace_spans.one("agent.a.round_0")) is root
    assert mastrace_spans.parent_of(root) is None


def test_attributes_decodes_json_values(mastrace_spans: CapturedSpans) -> None:
    """`attributes()` turns JSON-encoded values back into objects."""
    with mastrace.get_tracer().span("s", {"cfg": {"model": "m"}}):
        pass
    assert mastrace_spans.attributes("s")["cfg"] == {"model": "m"}


def test_tree_renders_an_outline(mastrace_spans: CapturedSpans) -> None:
    """`tree()` prints the captured spans as an outline that `assert_tree` accepts."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    assert mastrace_spans.tree() == "coordination.session\n  agent.a.round_0\n  agent.b.round_0"
    assert_tree(mastrace_spans, mastrace_spans.tree())


# --- assert_tree: matches ----------------------------------------------------------------------------
def test_assert_tree_matches_a_nested_outline(mastrace_spans: CapturedSpans) -> None:
    """An outline naming every span at its depth matches."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    assert_tree(
        mastrace_spans,
        """
        coordination.session
          agent.a.round_0
          agent.b.round_0
    """,
    )


def test_assert_tree_ignores_sibling_order_by_default(mastrace_spans: CapturedSpans) -> None:
    """Siblings may be listed in any order unless `ordered=True`."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    assert_tree(mastrace_spans, "coordination.session\n  agent.b.round_0\n  agent.a.round_0")


def test_assert_tree_ordered_requires_start_order(mastrace_spans: CapturedSpans) -> None:
    """With `ordered=True`, siblings listed out of start order are a mismatch."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    message = _failure(
        mastrace_spans, "coordination.session\n  agent.b.round_0\n  agent.a.round_0", ordered=True
    )
    assert message.splitlines()[-3:] == ["+  agent.a.round_0", "   agent.b.round_0", "-  agent.a.round_0"]


def test_assert_tree_accepts_a_list_of_spans(mastrace_spans: CapturedSpans) -> None:
    """Finished spans can be passed as a plain list."""
    _session(mastrace_spans, ("a", "answer"))
    assert_tree(mastrace_spans.spans, "coordination.session\n  agent.a.round_0")


def test_assert_tree_globs_names(mastrace_spans: CapturedSpans) -> None:
    """`*` in a name matches any text."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    assert_tree(mastrace_spans, "coordination.*\n  agent.*.round_0\n  agent.*.round_0")


def test_assert_tree_ellipsis_allows_more_spans(mastrace_spans: CapturedSpans) -> None:
    """A `...` line lets further spans exist at its level."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"), ("c", "vote"))
    assert_tree(mastrace_spans, "coordination.session\n  agent.b.round_0\n  ...")


# --- assert_tree: mismatches -------------------------------------------------------------------------
def test_assert_tree_diff_shows_a_missing_span(mastrace_spans: CapturedSpans) -> None:
    """A span in the outline but not in the trace is a `-` line of the diff."""
    _session(mastrace_spans, ("a", "answer"))
    message = _failure(mastrace_spans, "coordination.session\n  agent.a.round_0\n  agent.b.round_0")
    assert message.splitlines()[-3:] == [" coordination.session", "   agent.a.round_0", "-  agent.b.round_0"]


def test_assert_tree_diff_shows_an_unexpected_span(mastrace_spans: CapturedSpans) -> None:
    """A span in the trace but not in the outline is a `+` line of the diff."""
    _session(mastrace_spans, ("a", "answer"), ("b", "vote"))
    message = _failure(mastrace_spans, "coordination.session\n  agent.a.round_0")
    assert message.splitlines()[-1] == "+  agent.b.round_0"


def test_assert_tree_diff_shows_a_wrong_parent(mastrace_spans: CapturedSpans) -> None:
    """A span under another parent than expected shows as moved in the diff."""
    _session(mastrace_spans, ("a", "answer"))
    message = _failure(mastrace_spans, "coordination.session\nagent.a.round_0")
    assert "-agent.a.round_0" in message and "+  agent.a.round_0" in message


def test_assert_tree_message_is_a_readable_unified_diff(mastrace_spans: CapturedSpans) -> None:
    """The whole message: a header and a unified diff of expected vs actual outline."""
    _session(mastrace_spans, ("a", "vote"))
    message = _failure(
        mastrace_spans,
        """
        coordination.session
          agent.a.round_0 [massgen.outcome=answer]
    """,
    )
    assert message == (
        "span tree differs from the outline (- expected, + actual):\n"
        "--- expected\n"
        "+++ actual\n"
        "@@ -1,2 +1,2 @@\n"
        " coordination.session\n"
        "-  agent.a.round_0 [massgen.outcome=answer]\n"
        "+  agent.a.round_0 [massgen.outcome=vote]"
    )


def test_assert_tree_rejects_bad_indentation(mastrace_spans: CapturedSpans) -> None:
    """An outline indented by other than two spaces per level is a ValueError."""
    with pytest.raises(ValueError, match="line 2"):
        assert_tree(mastrace_spans, "root\n   child")


# --- assert_tree: attribute checks -------------------------------------------------------------------
def test_assert_tree_checks_attribute_values(mastrace_spans: CapturedSpans) -> None:
    """`[key=value]` compares attribute text; booleans are `true`/`false`."""
    _session(mastrace_spans, ("a", "answer"))
    assert_tree(
        mastrace_spans,
        """
        coordination.session
          agent.a.round_0 [massgen.outcome=answer, massgen.is_winner=false]
    """,
    )


def test_assert_tree_picks_the_sibling_whose_attributes_match(mastrace_spans: CapturedSpans) -> None:
    """Among same-named siblings, each outline line is paired with the one its checks match."""
    _session(mastrace_spans, ("a", "answer"), ("a", "vote"))
    assert_tree(
        mastrace_spans,
        """
        coordination.session
          agent.a.round_0 [massgen.outcome=vote]
          agent.a.round_0 [massgen.outcome=answer]
    """,
    )


def test_assert_tree_globs_attribute_values(mastrace_spans: CapturedSpans) -> None:
    """`*` works in expected attribute values too."""
    _session(mastrace_spans, ("a", "answer"))
    assert_tree(mastrace_spans, "coordination.session\n  agent.a.round_0 [massgen.outcome=ans*]")


def test_assert_tree_presence_check_reports_a_missing_attribute(mastrace_spans: CapturedSpans) -> None:
    """A bare key requires the attribute; a missing one shows as `<missing>`."""
    _session(mastrace_spans, ("a", "answer"))
    message = _failure(
        mastrace_spans, "coordination.session [massgen.task]\n  agent.a.round_0 [massgen.outcome]"
    )
    assert "+coordination.session [massgen.task=<missing>]" in message
    assert "   agent.a.round_0 [massgen.outcome]" in message.splitlines()


def test_assert_tree_quoted_value_may_hold_a_comma(mastrace_spans: CapturedSpans) -> None:
    """A double-quoted expected value can contain commas."""
    with mastrace.get_tracer().span("s", {"note": "a, b"}):
        pass
    assert_tree(mastrace_spans, 's [note="a, b"]')


def _app_that_configures_itself(store: str) -> None:
    """What most applications do: configure on start (with their own store), trace, shut down."""
    mastrace.configure(local=store, service_name="my-app", otlp="http://127.0.0.1:9")
    tracer = mastrace.get_tracer("app")
    with tracer.span("coordination.session"), tracer.span("agent.a.round_0", {"massgen.outcome": "answer"}):
        pass
    mastrace.shutdown()


def test_the_fixture_captures_an_app_that_calls_configure(
    mastrace_spans: CapturedSpans, tmp_path: Path
) -> None:
    """The app's configure() neither steals the spans nor writes its store; its service name applies."""
    _app_that_configures_itself(str(tmp_path / "app-store"))
    assert_tree(mastrace_spans, "coordination.session\n  agent.a.round_0 [massgen.outcome=answer]")
    resource = mastrace_spans.one("coordination.session").resource.attributes
    assert resource["service.name"] == "my-app"
    assert not (tmp_path / "app-store").exists()
    # The app's shutdown() flushed but the capture goes on recording.
    with mastrace.get_tracer().span("after.shutdown"):
        pass
    assert "after.shutdown" in mastrace_spans.names()


def test_a_capture_ignores_destinations_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """OTLP, Logfire and store variables of a CI machine do not add destinations to a capture."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("MASTRACE_DIR", str(tmp_path / "env-store"))
    monkeypatch.setenv("MASTRACE_CONSOLE", "1")
    with capture_spans() as spans:
        with mastrace.get_tracer().span("x"):
            pass
        result = mastrace.force_flush()
    assert spans.names() == ["x"]
    assert [name for name in result.destinations if not name.startswith("_KeepOpen")] == []
    assert not (tmp_path / "env-store").exists()


def test_after_a_capture_mastrace_is_unconfigured_and_configure_is_the_apps_again(tmp_path: Path) -> None:
    """Leaving the capture releases it: a later configure() writes where the app says."""
    with capture_spans():
        mastrace.configure(local=str(tmp_path / "inside"))
    assert not mastrace.is_configured()
    mastrace.configure(local=str(tmp_path / "outside"), synchronous=True)
    with mastrace.get_tracer().span("x"):
        pass
    mastrace.shutdown()
    assert (tmp_path / "outside" / "segments").is_dir() and not (tmp_path / "inside").exists()


USER_TEST = '''
import mastrace
from mastrace.testing import assert_tree


def main():
    mastrace.configure(service_name="my-agents")   # the application configures itself
    with mastrace.get_tracer().span("coordination.session"):
        with mastrace.get_tracer().span("agent.a.round_0"):
            pass


def test_main(mastrace_spans):
    main()
    assert_tree(mastrace_spans, """
        coordination.session
          agent.a.round_0
    """)
'''


def test_a_users_suite_gets_the_fixture_from_the_plugin(tmp_path: Path) -> None:
    """In a user's own pytest run, the plugin's fixture captures an app that configures itself."""
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTRACE_", "PYTEST_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert not (tmp_path / ".mastrace").exists()
