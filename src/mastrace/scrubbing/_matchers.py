"""The first pass of the engine: one scan of a text that says which rules of the table can match it.

Three interchangeable matchers make the same decision; only the speed differs:

- `PythonMatcher` (always there, `_python_matcher`): character look-ups, substring tests and one
  translation, each a C loop over the text, driven by what each rule's pattern requires;
- `HyperscanMatcher` (`pip install 'mastrace[speed]'` on x86-64): every gate compiled into one
  Hyperscan database, scanned once in linear time;
- `Re2Matcher` (`google-re2`): the same patterns as one `re2.Set`.

Every matcher selects the same rules: a word rule where its prefix starts a run of `MIN_TOKEN_LEN`
token characters (the compiled matchers report the prefix, the run's length is checked after), a text
rule when one of its hints occurs, assignments where a secret word precedes a separator. A shape rule,
or a text rule whose hints are common (`=`, `ac`), is selected by `PythonMatcher` by its hints, by the
compiled matchers when a relaxed form of its whole pattern matches (look-arounds dropped, so it matches
wherever the pattern does); the engine keeps a match only where the hint is (a shape match inside a long
run holding it), so all find the same secrets. A matcher may leave out a rule that cannot match (its
pattern needs a character or a literal the text lacks): that changes no output.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import _hs_cache
from ._contextual import CONTEXT_GATE, SERVICE_GATE, SERVICE_WORDS, service_follows
from ._selection import NOTHING, Gated, Matcher, Selection, ordered
from ._table import ASSIGNMENT_WORDS, MIN_TOKEN_LEN, RUN

__all__ = [
    "NOTHING",
    "HyperscanMatcher",
    "Matcher",
    "Re2Matcher",
    "Selection",
    "available",
    "make",
]


_RUN_SET = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+~-")


def word_starts(low: str, prefix: str) -> Iterator[int]:
    """Where `prefix` starts a run of `MIN_TOKEN_LEN` token characters in ASCII `low` (the word gate)."""
    i = low.find(prefix)
    while i != -1:
        if (not i or low[i - 1] not in _RUN_SET) and starts_run(low, i, prefix):
            yield i
        i = low.find(prefix, i + 1)


ASSIGNMENT_GATE = "(?:" + "|".join(ASSIGNMENT_WORDS) + r")[A-Za-z0-9_.-]*[\"']?[ \t]{0,3}[=:]"
"""A secret word, then the rest of a name, then a separator: where a secret-named assignment can be."""


@dataclass
class _Gate:
    pattern: str
    caseless: bool
    rules: list[Any]
    prefix: str = ""  # a word gate's prefix: reported where it follows no run character


def gate_patterns(rules: Sequence[Gated]) -> list[_Gate | None]:
    """Every gate as a pattern, with the rules it selects; the first one (None) is `ASSIGNMENT_GATE`.

    Cheap to compile (milliseconds for the whole table): a word rule's prefix (that it starts a long
    run is checked afterwards, as `word_starts` does), a text rule's hints, and the whole pattern,
    relaxed, of a shape rule and of a text rule whose hints are too common to select it by (`.`, `=`,
    `ac`).
    """
    gates: dict[tuple[str, bool], _Gate] = {}
    for rule in rules:
        if rule.gate == "word":
            for key in rule.keys:
                pattern = re.escape(key)
                gates.setdefault((pattern, True), _Gate(pattern, True, [], key)).rules.append(rule)
            continue
        weak = rule.gate == "shape" or all(len(key) <= _WEAK_HINT for key in rule.keys)
        if weak and rule.regex is not None:
            keyed = [(relax(rule.regex.pattern), rule.on_low)]
        else:
            keyed = [(re.escape(key), True) for key in rule.keys]
        for pattern, caseless in keyed:
            gates.setdefault((pattern, caseless), _Gate(pattern, caseless, [])).rules.append(rule)
    return [None, *gates.values()]


_WEAK_HINT = 3  # hints this short (`=`, `://`, `ac`) occur in most texts
_RUN_ONLY = re.compile(f"[{RUN}]+")


def starts_run(text: str, at: int, prefix: str) -> bool:
    """Whether `MIN_TOKEN_LEN` run characters (or the prefix's length, if longer) follow `at`."""
    end = at + max(len(prefix), MIN_TOKEN_LEN)
    return end <= len(text) and _RUN_ONLY.fullmatch(text, at, end) is not None


_LOOKAROUND = re.compile(r"\(\?<?[=!]")
_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:(,)(\d*))?\}")
_MAX_REPEAT = 24


def relax(pattern: str) -> str:
    """`pattern` without its look-arounds and with long counted repeats opened (`{64}` becomes
    `{24,}`): it matches wherever `pattern` does, and perhaps more, with a far smaller automaton."""
    out = []
    i = 0
    while i < len(pattern):
        found = _LOOKAROUND.match(pattern, i)
        if found is None:
            step = 2 if pattern[i] == "\\" else 1
            out.append(pattern[i : i + step])
            i += step
            continue
        depth, i = 1, found.end()
        while depth:  # skip to the closing parenthesis, minding escapes and classes
            c = pattern[i]
            if c == "\\":
                i += 1
            elif c == "[":
                i = _class_end(pattern, i)
            depth += c == "("
            depth -= c == ")"
            i += 1
    return _REPEAT.sub(_cap, "".join(out))


def _class_end(pattern: str, i: int) -> int:
    i += 2 if pattern[i + 1 : i + 2] in ("^", "]") else 1
    while pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i


def _cap(m: re.Match[str]) -> str:
    low = int(m.group(1))
    high = low if m.group(2) is None else int(m.group(3) or 1 << 30)
    return m.group(0) if high <= _MAX_REPEAT else f"{{{min(low, _MAX_REPEAT)},}}"


def _selection(found: Sequence[tuple[int, int]], gates: list[_Gate | None], text: str) -> Selection:
    """A selection from (gate index, end offset) pairs."""
    chosen: list[Gated] = []
    starts: list[tuple[int, Gated]] = []
    assignments = context = False
    for i, end in found:
        gate = gates[i]
        if gate is None:
            assignments = True
        elif gate is _CONTEXT:
            context = True
        elif gate is _SERVICE:
            context = context or service_follows(text, end)
        elif gate.prefix:
            at = end - len(gate.prefix)
            if (not at or text[at - 1] not in _RUN_SET) and starts_run(text, at, gate.prefix):
                for rule in gate.rules:
                    starts.append((at, rule))
        else:
            chosen.extend(gate.rules)
    return Selection(ordered(chosen), starts, assignments, context=context)


_CONTEXT = _Gate(CONTEXT_GATE, True, [])
"""The context finder's gate: it selects no rule, it says whether to run the finder."""
_SERVICE = _Gate(SERVICE_WORDS, True, [])
"""Its second gate, for a service's name alone before a long run: Hyperscan reports every service's
name, and the rest of `SERVICE_GATE` is read after each (`service_follows`); RE2 takes the whole."""


def _with_context(gates: list[_Gate | None]) -> list[_Gate | None]:
    """The gates with the context finder's two, after the assignments' gate."""
    return [gates[0], _CONTEXT, _SERVICE, *gates[1:]]


class HyperscanMatcher:
    """Every gate in one Hyperscan database: one linear scan, at several GB/s, whatever the table's size."""

    name = "hyperscan"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import hyperscan

        self.gates = _with_context(gate_patterns(rules))
        patterns = [(ASSIGNMENT_GATE, True, True)]
        patterns += [
            (g.pattern, g.caseless, bool(g.prefix) or g is _SERVICE) for g in self.gates if g is not None
        ]
        # A word gate and the services' names report every place; the others once. Prefilter mode: what
        # Hyperscan cannot match exactly (look-arounds) it matches more loosely.
        once = hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_DOTALL
        expressions = [p.encode() for p, _, _ in patterns]
        flags = [
            (0 if every else once) | (hyperscan.HS_FLAG_CASELESS if caseless else 0)
            for _, caseless, every in patterns
        ]
        self.db, self.cached = _hyperscan_database(hyperscan, expressions, flags)
        self._scratch = hyperscan.Scratch(self.db)
        self._local = threading.local()

    def select(self, text: str) -> Selection:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:  # a scratch space serves one thread at a time
            scratch = self._local.scratch = self._scratch.clone()
        found: list[tuple[int, int]] = []
        self.db.scan(text.encode("ascii"), match_event_handler=_on_match, context=found, scratch=scratch)
        if not found:
            return NOTHING
        selection = _selection(found, self.gates, text)
        if selection.assignments:
            selection.separators = [end - 1 for i, end in found if i == 0]
        return selection


def _hyperscan_database(hyperscan: Any, expressions: list[bytes], flags: list[int]) -> tuple[Any, bool]:
    """The database of `expressions`: loaded from the on-disk cache (`_hs_cache`) when a trusted copy
    is there, else compiled (and kept there for the next process). Also says whether it was loaded."""
    mode = hyperscan.HS_MODE_BLOCK
    key = _hs_cache.cache_key(expressions, flags, mode, _hyperscan_build(hyperscan))
    payload = _hs_cache.load(key)
    if payload is not None:
        try:
            db = hyperscan.loadb(payload, mode)
            # A database built for another CPU (a home folder shared between machines) loads, and
            # fails on its first scan: find out now.
            db.scan(b"probe", match_event_handler=_on_match, context=[], scratch=hyperscan.Scratch(db))
            return db, True
        except Exception:  # compile it instead
            pass
    db = hyperscan.Database(mode=mode)
    ids = list(range(len(expressions)))
    db.compile(expressions=expressions, ids=ids, elements=len(expressions), flags=flags)
    with contextlib.suppress(Exception):
        _hs_cache.store(key, hyperscan.dumpb(db))
    return db, False


def _hyperscan_build(hyperscan: Any) -> str:
    """The installed `hyperscan` build: its version and its compiled extension's size and time (the
    library is inside it), and the machine's architecture."""
    ext = getattr(hyperscan, "_hs_ext", None)
    where = getattr(ext, "__file__", None)
    st = os.stat(where) if where else None
    built = f"{st.st_size}-{st.st_mtime_ns}" if st else ""
    return f"{getattr(hyperscan, '__version__', '')} {built} {platform.machine()}"


def _on_match(id: int, start: int, end: int, flags: int, found: object) -> None:
    found.append((id, end))  # type: ignore[attr-defined]


class Re2Matcher:
    """Every gate in one `re2.Set`: one linear scan by RE2's automaton."""

    name = "re2"

    def __init__(self, rules: Sequence[Gated]) -> None:
        import re2

        self.gates = _with_context(gate_patterns(rules))
        options = re2.Options()
        options.max_mem = 64 << 20
        options.encoding = re2.Options.Encoding.LATIN1  # the text is ASCII; UTF-8 automata are far slower
        self.set = re2.Set.SearchSet(options)
        self.set.Add("(?i)" + ASSIGNMENT_GATE)
        for gate in self.gates[1:]:
            assert gate is not None
            pattern = SERVICE_GATE if gate is _SERVICE else gate.pattern
            self.set.Add(("(?is)" if gate.caseless else "(?s)") + pattern)
        self.set.Compile()

    def select(self, text: str) -> Selection:
        chosen: list[Gated] = []
        starts: list[tuple[int, Gated]] = []
        assignments = context = False
        low = None
        for i in self.set.Match(text.encode("ascii")) or ():
            gate = self.gates[i]
            if gate is None:
                assignments = True
            elif gate is _CONTEXT or gate is _SERVICE:
                context = True
            elif gate.prefix:  # RE2's sets say which, not where: find where, as the gate says
                low = text.lower() if low is None else low
                starts.extend((at, rule) for at in word_starts(low, gate.prefix) for rule in gate.rules)
            else:
                chosen.extend(gate.rules)
        if not (chosen or starts or assignments or context):
            return NOTHING
        return Selection(ordered(chosen), starts, assignments, low, context=context)


def _python_matcher(rules: Sequence[Gated]) -> Matcher:
    # Imported when used: with Hyperscan or RE2 installed, preparing an export thread (which the first
    # flush after `configure()` may wait for) does not import the fallback.
    from ._python_matcher import PythonMatcher

    return PythonMatcher(rules)


_KINDS: dict[str, Callable[[Sequence[Gated]], Matcher]] = {
    "hyperscan": HyperscanMatcher,
    "re2": Re2Matcher,
    "python": _python_matcher,
}


def available() -> list[str]:
    """The matchers installed, fastest first (found without importing them)."""
    names = [name for name in ("hyperscan", "re2") if importlib.util.find_spec(name) is not None]
    return [*names, "python"]


def make(rules: Sequence[Gated], name: str | None = None) -> Matcher:
    """The matcher called `name`, or the fastest one available (falling back to `PythonMatcher`)."""
    for candidate in [name] if name else available():
        try:
            return _KINDS[candidate](rules)
        except Exception:
            if name:
                raise
    return _python_matcher(rules)
