"""A MassGen version the integration does not know: one warning, MassGen's own spans, no crash."""

from __future__ import annotations

import logging

import pytest

import mastrace
from mastrace.integrations import massgen as integration
from mastrace.testing import CapturedSpans


def test_an_unknown_version_warns_once_and_still_records_massgens_spans(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, mastrace_spans: CapturedSpans
) -> None:
    import massgen
    from massgen import orchestrator, structured_logging

    monkeypatch.setattr(massgen, "__version__", "0.9.0")
    original_stream = orchestrator.Orchestrator._stream_agent_execution
    try:
        with caplog.at_level(logging.WARNING, logger="mastrace"):
            assert integration.instrument_massgen() is True
            assert integration.instrument_massgen() is True  # a second call changes nothing
        warnings = [r.getMessage() for r in caplog.records if "0.9.0" in r.getMessage()]
        assert len(warnings) == 1 and "not a version" in warnings[0]
        # Only the tracer proxy is redirected; the orchestrator's seams are left as they are.
        assert orchestrator.Orchestrator._stream_agent_execution is original_stream
        with structured_logging.trace_coordination_session(task="t", num_agents=1, agent_ids=["a"]):
            structured_logging.log_agent_answer("a", "agent1.1", iteration=1, round_number=0)
    finally:
        integration.uninstrument_massgen()
    session = mastrace_spans.one("coordination.session")
    answer = mastrace_spans.one("Agent answer: agent1.1")
    assert answer.parent is not None and answer.parent.span_id == session.context.span_id
    assert answer.attributes["massgen.agent_id"] == "a"


def test_uninstrument_restores_every_seam() -> None:
    from massgen import coordination_tracker, orchestrator, structured_logging

    before = (
        structured_logging.TracerProxy.__dict__["_get_logfire"],
        orchestrator.Orchestrator.__dict__["__init__"],
        coordination_tracker.CoordinationTracker.__dict__["initialize_session"],
        structured_logging._logfire_enabled,
    )
    assert integration.instrument_massgen()
    assert orchestrator.Orchestrator.__dict__["__init__"] is not before[1]
    integration.uninstrument_massgen()
    after = (
        structured_logging.TracerProxy.__dict__["_get_logfire"],
        orchestrator.Orchestrator.__dict__["__init__"],
        coordination_tracker.CoordinationTracker.__dict__["initialize_session"],
        structured_logging._logfire_enabled,
    )
    assert after == before
    assert mastrace  # the package under test is importable next to MassGen
