"""`configure()` builds one scrubber for everything it scrubs: the store's transform, Logfire's span
scrubber, Logfire's safe keys and the resource Logfire reads from `OTEL_RESOURCE_ATTRIBUTES`."""

from __future__ import annotations

from pathlib import Path

import pytest

import mastrace
from mastrace.scrubbing import _engine


def test_one_configure_builds_one_scrubber(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    original = _engine.Scrubber.__init__

    def counting(self: _engine.Scrubber, *args: object, **kwargs: object) -> None:
        built.append(self)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_engine.Scrubber, "__init__", counting)
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment=ci,api_key=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    )
    monkeypatch.setenv("LOGFIRE_SEND_TO_LOGFIRE", "false")
    mastrace.configure(local=tmp_path / "store", logfire=True, scrubbing=True)
    with mastrace.get_tracer().span("agent.a.round_0", attributes={"password": "hunter2-hunter2"}):
        pass
    assert mastrace.force_flush(timeout=600).complete
    mastrace.shutdown()
    rows = mastrace.store.query("SELECT CAST(attributes AS VARCHAR) AS a FROM records", tmp_path / "store")
    assert rows and "hunter2-hunter2" not in rows[0]["a"]  # the one scrubber did scrub
    assert len(built) == 1, f"{len(built)} scrubbers built by one configure()"
