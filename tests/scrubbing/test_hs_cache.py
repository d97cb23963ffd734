"""The compiled Hyperscan database on disk (`_hs_cache`): a second process loads what the first compiled,
and a corrupt, foreign-owned, group-writable or linked cache file is ignored and rebuilt; the table's
expressions are compiled when first used, not when the scrubber is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mastrace.scrubbing import _hs_cache

pytest.importorskip("hyperscan")

# One fresh process: builds the default scrubber, says whether its database came from the cache,
# how many of the table's expressions were compiled by then, and scrubs one secret.
_BUILD = """
import json
from mastrace.scrubbing._engine import Scrubber
from mastrace.scrubbing._finder import compiled_rules, matcher
scrubber = Scrubber()
m = matcher(None)
compiled = sum(r.regex is not None and getattr(r.regex, "_compiled", 1) is not None for r in compiled_rules())
out = scrubber.scrub_text("key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD here")
print(json.dumps({"matcher": m.name, "cached": getattr(m, "cached", None), "compiled": compiled, "out": out}))
"""


def _build(cache: Path) -> dict[str, object]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD], env=env, capture_output=True, text=True, timeout=600, check=True
    )
    assert done.stderr == ""
    result: dict[str, object] = json.loads(done.stdout)
    assert result["matcher"] == "hyperscan"
    assert result["out"] == "key [Scrubbed: openai_key] here"
    return result


def _files(cache: Path) -> list[Path]:
    return sorted((cache / "mastrace" / "hyperscan").glob("*.hsdb"))


def test_a_second_process_loads_the_database_the_first_compiled(tmp_path: Path) -> None:
    """The first process compiles and keeps the database (mode 0600); the next one loads it."""
    assert _build(tmp_path)["cached"] is False
    (kept,) = _files(tmp_path)
    assert kept.stat().st_mode & 0o777 == 0o600
    assert (kept.parent.stat().st_mode & 0o777) == 0o700
    assert _build(tmp_path)["cached"] is True


@pytest.mark.parametrize(
    "spoil",
    ["garbage", "flipped", "truncated", "group-writable", "symlink"],
)
def test_a_bad_cache_file_is_ignored_and_rebuilt(tmp_path: Path, spoil: str) -> None:
    """A cache file that is corrupt, cut short, writable by others or a link is not loaded: the database
    is compiled again (the scrubber still finds the secret) and a sound file replaces the bad one."""
    _build(tmp_path)
    (kept,) = _files(tmp_path)
    good = kept.read_bytes()
    if spoil == "garbage":
        kept.write_bytes(b"\x00" * len(good))
    elif spoil == "flipped":  # header and digest intact, one byte of the database changed
        kept.write_bytes(good[:-100] + bytes([good[-100] ^ 0xFF]) + good[-99:])
    elif spoil == "truncated":
        kept.write_bytes(good[: len(good) // 2])
    elif spoil == "group-writable":
        kept.chmod(0o660)
    else:
        elsewhere = tmp_path / "planted.hsdb"
        elsewhere.write_bytes(good)
        kept.unlink()
        kept.symlink_to(elsewhere)
    assert _build(tmp_path)["cached"] is False
    assert not kept.is_symlink()
    assert _hs_cache.load(kept.stem, kept.parent) is not None
    assert kept.stat().st_mode & 0o777 == 0o600
    assert _build(tmp_path)["cached"] is True


def test_a_cache_folder_others_can_write_is_not_used(tmp_path: Path) -> None:
    """A folder writable by others could hold anyone's file: nothing is read from it or kept in it."""
    where = tmp_path / "shared"
    where.mkdir()
    where.chmod(0o777)
    assert not _hs_cache.store("k", b"database", where)
    assert list(where.iterdir()) == []
    where.chmod(0o700)
    assert _hs_cache.store("k", b"database", where)
    assert _hs_cache.load("k", where) == b"database"
    where.chmod(0o777)
    assert _hs_cache.load("k", where) is None


def test_the_key_changes_with_any_expression_or_flag() -> None:
    """Another table, another flag or another library build is another file."""
    base = _hs_cache.cache_key([b"ab", b"c"], [0, 1], 1, "v1")
    assert base == _hs_cache.cache_key([b"ab", b"c"], [0, 1], 1, "v1")
    others = {
        _hs_cache.cache_key([b"a", b"bc"], [0, 1], 1, "v1"),
        _hs_cache.cache_key([b"ab", b"c"], [0, 2], 1, "v1"),
        _hs_cache.cache_key([b"ab", b"c"], [0, 1], 2, "v1"),
        _hs_cache.cache_key([b"ab", b"c"], [0, 1], 1, "v2"),
    }
    assert base not in others and len(others) == 4


def test_building_the_scrubber_compiles_none_of_the_tables_expressions(tmp_path: Path) -> None:
    """The export thread's start does not compile the table: a rule is compiled when a text needs it."""
    _build(tmp_path)
    assert _build(tmp_path)["compiled"] == 0
