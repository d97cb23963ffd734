"""Secret scrubbing: the rule table (`rules.json`), the engine (`_engine.Scrubber`) and its options.

Importing this package loads only the options (`ScrubbingOptions` and the types a callback sees):
`configure()` validates options without compiling the rules, which the export thread builds on first use.
"""

from __future__ import annotations

from ._options import JsonPath, ScrubbingOptions, ScrubCallback, ScrubMatch

__all__ = ["JsonPath", "ScrubCallback", "ScrubMatch", "ScrubbingOptions"]
