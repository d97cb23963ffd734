"""Reading an OTLP request body with bounded memory and time, whatever the sender does.

- The bytes all bodies in flight hold at once (as received, and once inflated) come from one
  `Budget`: a request that would go past it is answered 503 with `Retry-After`, which OTLP senders
  honour, instead of the server holding gigabytes for six concurrent 30 MB senders.
- gzip and deflate bodies are inflated while they arrive, never past the size limit: a 1 MB body
  that would inflate to 1 GiB costs 32 MB and its 413 comes as soon as the limit is passed.
- A sender that stops sending, or trickles its body, is answered 408 after `idle` seconds without a
  byte or `deadline` seconds in all.
"""

from __future__ import annotations

import asyncio
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Final

from ._guard import Receive

__all__ = ["Body", "BodyError", "Budget", "drain", "read_body"]

_DRAIN_LIMIT: Final = (
    64 * 1024 * 1024
)  # a refused body is read (not kept) up to this, then the connection drops


class Budget:
    """Bytes that the bodies in flight may hold in all; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Reserve `n` bytes; False (nothing reserved) when that would go past the limit."""
        with self._lock:
            if self.used + n > self.limit:
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used = max(0, self.used - n)


class BodyError(Exception):
    """The body cannot be taken: `status` (400, 408, 413, 503) and why; `drain` tells whether the
    rest of it should be read (not kept) so that the sender gets the answer."""

    def __init__(self, status: int, message: str, *, drain: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.drain = drain


@dataclass
class Body:
    """A body read whole (and inflated), with the budget bytes it holds until `release()`."""

    data: bytes
    held: int
    budget: Budget

    def release(self) -> None:
        self.budget.give(self.held)
        self.held = 0


class _Inflater:
    """Inflates gzip or deflate (zlib, or raw as some senders send it) chunk by chunk, never past `limit`."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.encoding = encoding
        self.limit = limit
        self.size = 0
        wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        self._d = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        data = chunk
        while data:
            try:
                piece = self._d.decompress(data, self.limit - self.size + 1)
            except zlib.error:
                if self.encoding == "deflate" and not self._started:  # raw deflate, no zlib header
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._started = True
                    continue
                raise
            self._started = True
            self.size += len(piece)
            if self.size > self.limit:
                raise BodyError(413, f"the body inflates past the limit of {self.limit} bytes")
            out.append(piece)
            data = self._d.unconsumed_tail
            if self._d.eof:
                break
        return out

    def finish(self) -> list[bytes]:
        if not self._d.eof:
            raise BodyError(400, f"the body ends before its {self.encoding} stream does")
        return []


async def _next(receive: Receive, idle: float, deadline: float) -> Any:
    wait = min(idle, deadline - time.monotonic())
    if wait <= 0:
        raise BodyError(408, "the body took too long to arrive", drain=False)
    try:
        return await asyncio.wait_for(receive(), wait)
    except asyncio.TimeoutError:
        raise BodyError(408, f"no part of the body arrived for {idle:g} s", drain=False) from None


async def read_body(
    receive: Receive,
    *,
    encoding: str,
    length: int | None,
    limit: int,
    budget: Budget,
    idle: float,
    total: float,
) -> Body:
    """The whole body, inflated, within `limit` bytes (received and inflated), `budget` and time.

    Raises:
        BodyError: Too large (413), over the budget (503), too slow (408) or not valid (400).
    """
    if length is not None and length > limit:
        # Read (not kept) when not huge, so that the sender is still reading when the answer comes.
        raise BodyError(
            413, f"a body of {length} bytes is over the limit of {limit}", drain=length <= _DRAIN_LIMIT
        )
    first = length if length is not None else 0
    if first and not budget.take(first):
        raise BodyError(503, "too many bodies in flight")
    held = first
    deadline = time.monotonic() + total
    inflater = _Inflater(encoding, limit) if encoding in ("gzip", "deflate") else None
    parts: list[bytes] = []
    received = 0
    more = True  # whether the sender has more to send (then a refusal reads it, see `drain`)
    try:
        while more:
            message = await _next(receive, idle, deadline)
            if message["type"] == "http.disconnect":
                raise BodyError(400, "the sender went away", drain=False)
            more = bool(message.get("more_body", False))
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > limit:
                raise BodyError(413, f"the body is over the limit of {limit} bytes", drain=more)
            pieces = inflater.feed(chunk) if inflater is not None else [chunk]
            grow = (received if inflater is None else received + inflater.size) - held
            if grow > 0:
                if not budget.take(grow):
                    raise BodyError(503, "too many bodies in flight", drain=more)
                held += grow
            parts.extend(pieces)
        if inflater is not None:
            parts.extend(inflater.finish())
    except zlib.error as exc:
        budget.give(held)
        raise BodyError(400, f"the body is not valid {encoding}: {exc}", drain=more) from None
    except BodyError as exc:
        budget.give(held)
        exc.drain = exc.drain and more
        raise
    except BaseException:
        budget.give(held)
        raise
    data = b"".join(parts)
    if inflater is not None:  # the compressed bytes are no longer held
        budget.give(held - len(data))
        held = len(data)
    return Body(data, held, budget)


async def drain(receive: Receive, idle: float) -> None:
    """Read the rest of a refused body without keeping it (so that the sender reads our answer),
    up to `_DRAIN_LIMIT` bytes and `idle` seconds between parts."""
    seen = 0
    while seen <= _DRAIN_LIMIT:
        try:
            message = await asyncio.wait_for(receive(), idle)
        except asyncio.TimeoutError:
            return
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
