"""LLM requests and responses in the GenAI semantic conventions' JSON structure.

`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions` and
`gen_ai.tool.definitions` follow the JSON schemas of the conventions (see `semconv.SEMCONV_VERSION`):
a message is `{"role", "parts": [...]}` (plus `"finish_reason"` for an output message, `"name"` when
the request names the participant); a part is `{"type": "text", "content"}`, `{"type": "tool_call",
"id", "name", "arguments"}`, `{"type": "tool_call_response", "id", "response"}`,
`{"type": "reasoning", "content"}`, `{"type": "uri" | "blob", "modality", ...}`, or any other
`{"type": ...}` part the provider has. Tool call arguments are parsed into objects when they are
JSON text, as the conventions ask.

The request side reads OpenAI chat (`messages`, `tools`) and Anthropic messages (`system`,
`messages`, `tools`), given as dicts or as the SDKs' objects (a reply appended to the history).
The response side is an `Output` that the SDK readers fill, whole or chunk by chunk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..usage import field_of

__all__ = [
    "Output",
    "anthropic_request",
    "finish_reason",
    "openai_request",
    "tool_result_ids",
]

Part = dict[str, Any]
Message = dict[str, Any]

# Provider stop reasons as the conventions' FinishReason (others are kept as the provider said them).
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "tool_use": "tool_call",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}


def finish_reason(reason: str | None, *, failed: bool = False) -> str:
    """The conventions' finish reason for a provider's stop reason."""
    if reason is None:
        return "error" if failed else "incomplete"
    return _FINISH.get(reason, reason)


def arguments_value(raw: Any) -> Any:
    """Tool call arguments as an object when they are JSON text (else as they are)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _listed(value: Any) -> Any:
    """`value` when it is a list or tuple, else nothing: an iterator the caller passes is the SDK's to
    read, and reading it here would send an empty request."""
    return value if isinstance(value, (list, tuple)) else ()


def _text(content: str) -> Part:
    return {"type": "text", "content": content}


def _plain(value: Any) -> Any:
    """A provider object (pydantic model) as plain data; anything else unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return dump(exclude_none=True)
        except Exception:
            return value
    return value


def _response_text(content: Any) -> Any:
    """A tool result's content: its text when it is text blocks, else the content itself."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, (list, tuple)):
        items = [_plain(item) for item in content]
        texts = [field_of(item, "text") for item in items]
        if items and all(isinstance(t, str) for t in texts):
            return "".join(texts)
        return items
    return _plain(content)


# --- OpenAI chat ------------------------------------------------------------------------------------
def _openai_content_part(item: Any) -> Part:
    kind = field_of(item, "type")
    if kind == "text":
        return _text(str(field_of(item, "text") or ""))
    if kind == "image_url":
        return {"type": "uri", "modality": "image", "uri": field_of(field_of(item, "image_url"), "url")}
    if kind == "input_audio":
        audio = field_of(item, "input_audio")
        return {
            "type": "blob",
            "modality": "audio",
            "mime_type": f"audio/{field_of(audio, 'format')}",
            "content": field_of(audio, "data"),
        }
    if kind == "file":
        file = field_of(item, "file")
        return {"type": "file", "modality": "document", "file_id": field_of(file, "file_id")}
    plain = _plain(item)
    return {**plain, "type": str(kind)} if isinstance(plain, Mapping) else {"type": str(kind)}


def _openai_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_text(content)]
    return [_openai_content_part(item) for item in _listed(content)]


def _openai_tool_call(call: Any) -> Part:
    function = field_of(call, "function")
    return {
        "type": "tool_call",
        "id": field_of(call, "id"),
        "name": field_of(function, "name"),
        "arguments": arguments_value(field_of(function, "arguments")),
    }


def _openai_message(message: Any) -> Message:
    role = field_of(message, "role")
    content = field_of(message, "content")
    if role in ("tool", "function"):
        parts: list[Part] = [
            {
                "type": "tool_call_response",
                "id": field_of(message, "tool_call_id"),
                "response": _response_text(content),
            }
        ]
    else:
        parts = _openai_parts(content)
        parts.extend(_openai_tool_call(call) for call in _listed(field_of(message, "tool_calls")))
    out: Message = {"role": str(role), "parts": parts}
    name = field_of(message, "name")
    if isinstance(name, str) and role != "function":
        out["name"] = name
    return out


def _openai_tool(tool: Any) -> Part:
    kind = str(field_of(tool, "type") or "function")
    spec = field_of(tool, kind) or tool
    definition: Part = {"type": kind, "name": field_of(spec, "name")}
    for key in ("description", "parameters"):
        value = field_of(spec, key)
        if value is not None:
            definition[key] = _plain(value)
    return definition


def openai_request(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The content attributes of an OpenAI chat request, keyed by attribute name suffix.

    System and developer messages stay in the history (`input`), where OpenAI has them.
    """
    out: dict[str, Any] = {"input": [_openai_message(m) for m in _listed(kwargs.get("messages"))]}
    tools = _listed(kwargs.get("tools"))
    if tools:
        out["tools"] = [_openai_tool(t) for t in tools]
    return out


# --- Anthropic messages -----------------------------------------------------------------------------
def _anthropic_block(block: Any) -> Part:
    kind = field_of(block, "type")
    if kind == "text":
        return _text(str(field_of(block, "text") or ""))
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": field_of(block, "id"),
            "name": field_of(block, "name"),
            "arguments": arguments_value(_plain(field_of(block, "input"))),
        }
    if kind == "tool_result":
        return {
            "type": "tool_call_response",
            "id": field_of(block, "tool_use_id"),
            "response": _response_text(field_of(block, "content")),
        }
    if kind == "thinking":
        return {"type": "reasoning", "content": str(field_of(block, "thinking") or "")}
    if kind in ("image", "document"):
        source = field_of(block, "source")
        modality = "image" if kind == "image" else "document"
        if field_of(source, "type") == "base64":
            return {
                "type": "blob",
                "modality": modality,
                "mime_type": field_of(source, "media_type"),
                "content": field_of(source, "data"),
            }
        if field_of(source, "type") == "url":
            return {"type": "uri", "modality": modality, "uri": field_of(source, "url")}
    plain = _plain(block)
    return {**plain, "type": str(kind)} if isinstance(plain, Mapping) else {"type": str(kind)}


def _anthropic_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_text(content)]
    return [_anthropic_block(block) for block in _listed(content)]


def _anthropic_tool(tool: Any) -> Part:
    kind = field_of(tool, "type")
    schema = field_of(tool, "input_schema")
    if kind in (None, "custom") or schema is not None:
        definition: Part = {"type": "function", "name": field_of(tool, "name")}
        description = field_of(tool, "description")
        if description is not None:
            definition["description"] = description
        if schema is not None:
            definition["parameters"] = _plain(schema)
        return definition
    return {"type": str(kind), "name": field_of(tool, "name")}  # a server tool (web search, ...)


def anthropic_request(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The content attributes of an Anthropic messages request, keyed by attribute name suffix."""
    out: dict[str, Any] = {
        "input": [
            {"role": str(field_of(m, "role")), "parts": _anthropic_parts(field_of(m, "content"))}
            for m in _listed(kwargs.get("messages"))
        ]
    }
    system = kwargs.get("system")
    if system:
        out["system"] = _anthropic_parts(system)
    tools = _listed(kwargs.get("tools"))
    if tools:
        out["tools"] = [_anthropic_tool(t) for t in tools]
    return out


def tool_result_ids(messages: Any) -> list[str]:
    """The ids of the tool results a request sends back (OpenAI `tool` messages, Anthropic
    `tool_result` blocks): not content, so recorded with capture off too."""
    ids: list[str] = []
    for message in _listed(messages):
        call_id = field_of(message, "tool_call_id")
        if isinstance(call_id, str):
            ids.append(call_id)
            continue
        for block in _listed(field_of(message, "content")):
            if field_of(block, "type") == "tool_result":
                block_id = field_of(block, "tool_use_id")
                if isinstance(block_id, str):
                    ids.append(block_id)
    return ids


# --- responses --------------------------------------------------------------------------------------
class ToolCall:
    """A tool call the model asked for, assembled from a response or from streamed fragments."""

    __slots__ = ("arguments", "fragments", "id", "name")

    def __init__(self, call_id: str | None = None, name: str | None = None) -> None:
        self.id = call_id
        self.name = name
        self.fragments: list[str] = []
        self.arguments: Any = None

    def part(self, content: bool) -> Part:
        part: Part = {"type": "tool_call", "id": self.id, "name": self.name}
        if content:  # fragments, when any came, complete what the start of the call said
            args = "".join(self.fragments) or self.arguments
            part["arguments"] = arguments_value(args)
        return part


class Choice:
    """One candidate of a response: its parts in order and why it stopped."""

    __slots__ = ("calls", "finish", "parts")

    def __init__(self) -> None:
        self.parts: list[ToolCall | list[Any]] = []  # [kind, fragments...] for text and reasoning
        self.calls: dict[int, ToolCall] = {}  # by the provider's index, for streamed fragments
        self.finish: str | None = None

    def add_text(self, text: str, kind: str = "text") -> None:
        last = self.parts[-1] if self.parts else None
        if isinstance(last, list) and last[0] == kind:
            last.append(text)
        else:
            self.parts.append([kind, text])

    def call(self, index: int, call_id: str | None = None, name: str | None = None) -> ToolCall:
        """The tool call at `index` (created on first sight, in the order the parts came)."""
        found = self.calls.get(index)
        if found is None:
            found = self.calls[index] = ToolCall(call_id, name)
            self.parts.append(found)
        else:
            found.id = found.id or call_id
            found.name = found.name or name
        return found


class Output:
    """What a response said: text, reasoning and tool calls per candidate."""

    __slots__ = ("choices",)

    def __init__(self) -> None:
        self.choices: dict[int, Choice] = {}

    def choice(self, index: int = 0) -> Choice:
        found = self.choices.get(index)
        if found is None:
            found = self.choices[index] = Choice()
        return found

    def tool_calls(self) -> list[dict[str, Any]]:
        """`[{"id", "name"}]` of every tool call asked for (no arguments: not content)."""
        return [
            {"id": part.id, "name": part.name}
            for _, choice in sorted(self.choices.items())
            for part in choice.parts
            if isinstance(part, ToolCall)
        ]

    def messages(self, *, failed: bool = False) -> list[Message]:
        """The output messages, one per candidate, with content."""
        out = []
        for _, choice in sorted(self.choices.items()):
            parts = [
                part.part(True) if isinstance(part, ToolCall) else _joined(part) for part in choice.parts
            ]
            out.append(
                {
                    "role": "assistant",
                    "parts": parts,
                    "finish_reason": finish_reason(choice.finish, failed=failed),
                }
            )
        return out


def _joined(part: list[Any]) -> Part:
    return {"type": part[0], "content": "".join(part[1:])}
