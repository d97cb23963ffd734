"""Integrations with third-party agent tooling, each behind an optional extra.

- `mastrace.integrations.mcp`: `instrument_mcp()` traces the official `mcp` SDK's client calls
  as `mcp.<server>.<tool>` spans; `traced_tool` / `continue_trace` continue the trace inside an
  MCP server's tools. Install `mastrace[mcp]`.
- `mastrace.integrations.openai`: `instrument_openai()` traces the `openai` SDK's chat completions
  (sync, async, streamed) as `llm.<provider>.chat` / `llm.<provider>.stream` spans with GenAI
  attributes and usage credited to the enclosing round. Install `mastrace[openai]`.
- `mastrace.integrations.anthropic`: `instrument_anthropic()`, the same for the `anthropic` SDK's
  messages. Install `mastrace[anthropic]`.
- `mastrace.integrations.litellm`: `instrument_litellm()`, the same for LiteLLM's `completion()` and
  `acompletion()` (one span per call, also when `openai` is instrumented underneath). Install
  `mastrace[litellm]`.
- `mastrace.integrations.massgen`: `instrument_massgen()` traces an unmodified MassGen run (its own
  spans, fixed: nesting, per-round usage, config snapshot, one trace per turn). Install
  `mastrace[massgen]`; or run `mastrace run -- massgen ...`.
- `mastrace.integrations.maseval`: `MastraceCallback`, a MASEval `BenchmarkCallback` that traces
  every task and repetition with its configuration, usage and status. Install `mastrace[maseval]`.

Importing this package imports neither third-party library; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "MastraceCallback",
    "continue_trace",
    "instrument_anthropic",
    "instrument_litellm",
    "instrument_massgen",
    "instrument_mcp",
    "instrument_openai",
    "traced_tool",
    "uninstrument_anthropic",
    "uninstrument_litellm",
    "uninstrument_massgen",
    "uninstrument_mcp",
    "uninstrument_openai",
]

_LAZY = {
    "MastraceCallback": "maseval",
    "continue_trace": "mcp",
    "instrument_mcp": "mcp",
    "traced_tool": "mcp",
    "uninstrument_mcp": "mcp",
    "instrument_openai": "openai",
    "uninstrument_openai": "openai",
    "instrument_anthropic": "anthropic",
    "uninstrument_anthropic": "anthropic",
    "instrument_litellm": "litellm",
    "uninstrument_litellm": "litellm",
    "instrument_massgen": "massgen",
    "uninstrument_massgen": "massgen",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
