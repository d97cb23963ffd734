"""One scrubber for everything one configuration scrubs.

`configure()` hands the same `SharedScrubber` to every destination that scrubs (the transform of the
store's and OTLP's export threads) and to Logfire's callbacks (its span scrubber, its safe keys, the
resource it reads from the environment). The rule table is compiled once, on first use, by whichever
thread needs it first: normally an export thread, right after `configure()` returns.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ._options import ScrubbingOptions

if TYPE_CHECKING:
    from ._engine import Scrubber

__all__ = ["SharedScrubber"]


class SharedScrubber:
    """A `Scrubber` for `options`, built once, on the first `get()` (thread-safe)."""

    def __init__(self, options: ScrubbingOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._scrubber: Scrubber | None = None

    def get(self) -> Scrubber:
        """The scrubber, built now if no thread built it yet."""
        scrubber = self._scrubber
        if scrubber is None:
            with self._lock:
                if self._scrubber is None:
                    from ._engine import Scrubber

                    self._scrubber = Scrubber(self.options)
                scrubber = self._scrubber
        return scrubber
