"""Public type aliases and protocols, for annotating code that works with mastrace.

Example:
    >>> from mastrace.typing import ScrubCallback, ScrubMatch
    >>> def keep_model_names(match: ScrubMatch) -> object:
    ...     return match.value if match.path[-1:] == ("model",) else None
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.util.types import AttributeValue

from .scrubbing._options import JsonPath, ScrubCallback, ScrubMatch
from .tracing._snapshot import JsonValue
from .usage import CostCalculator

Attributes = Mapping[str, object]
"""Attributes as mastrace accepts them: any value (non-primitive ones are encoded as JSON)."""

__all__ = [
    "AttributeValue",
    "Attributes",
    "CostCalculator",
    "JsonPath",
    "JsonValue",
    "ScrubCallback",
    "ScrubMatch",
]
