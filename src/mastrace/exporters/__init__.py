"""Exporters mastrace can send spans to, besides the local store."""

from __future__ import annotations

from .console import ConsoleExporter

__all__ = ["ConsoleExporter"]
