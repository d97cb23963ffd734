"""Regular expressions compiled when first used: the scrubber's start costs what the first texts need."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

__all__ = ["LazyPattern"]


class LazyPattern:
    """A regular expression compiled on its first use.

    Compiling all of the table's expressions costs a tenth of a second of an export thread's start
    (more on a loaded machine), and most texts select only a few rules: what the first pass needs
    (`pattern`, `flags`) is there at once; a rule's compiled form is made when it is first matched
    (two threads that race there compile it twice, and either result serves).
    """

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled expression."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def match(self, string: str, pos: int = 0) -> re.Match[str] | None:
        """`re.Pattern.match`."""
        return self.compiled().match(string, pos)

    def search(self, string: str, pos: int = 0) -> re.Match[str] | None:
        """`re.Pattern.search`."""
        return self.compiled().search(string, pos)

    def fullmatch(self, string: str) -> re.Match[str] | None:
        """`re.Pattern.fullmatch`."""
        return self.compiled().fullmatch(string)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        """`re.Pattern.finditer`."""
        return self.compiled().finditer(string)

    @property
    def groupindex(self) -> Mapping[str, int]:
        """`re.Pattern.groupindex`."""
        return self.compiled().groupindex
