"""The Query API's error answers, shared by the routes and the processes statements run in."""

from __future__ import annotations

from typing import Any

__all__ = ["QueryProblem"]


class QueryProblem(Exception):
    """A request the Query API answers with an error status.

    Attributes:
        status: The HTTP status.
        detail: What the answer's `detail` says (text, or a validation error's list).
        retry_after: Seconds a client should wait before retrying (429), or None.
    """

    def __init__(self, status: int, detail: Any, *, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.retry_after = status, detail, retry_after
