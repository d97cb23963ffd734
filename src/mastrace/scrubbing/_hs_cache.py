"""The compiled Hyperscan database of the rule table, kept on disk between processes.

Compiling every gate into one Hyperscan database takes a few hundred milliseconds of CPU (more on a
loaded machine), which a short script's first export would otherwise wait for. The compiled database
is serialized (`hyperscan.dumpb`) into the user's cache folder (`$XDG_CACHE_HOME/mastrace/hyperscan`,
else `~/.cache/mastrace/hyperscan`) under a name that is a digest of everything it was built from:
the expressions, their ids and flags, the mode, the `hyperscan` package's version and the library's
own (`Database.info()`). A later process with the same table loads it in a millisecond.

The file is not trusted blindly. It is read only when it is a regular file (no symbolic link
followed), owned by the current user and writable by nobody else, in a folder of the same kind; its
content must carry this format's header and a SHA-256 of the database that matches. Anything else (a
corrupt, truncated, foreign or planted file, an unwritable or missing folder) is ignored: the database
is compiled as without a cache and the file replaced atomically. Nothing is printed either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["cache_key", "folder", "load", "store"]

_MAGIC = b"mastrace-hyperscan-cache 1\n"
_DIGEST = 32  # bytes of a SHA-256
_MAX_BYTES = 64 << 20  # far above the table's database (about a megabyte); a larger file is not read


def folder() -> Path | None:
    """Where compiled databases are kept; None when the user has no home to keep them in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "mastrace" / "hyperscan"


def cache_key(expressions: Sequence[bytes], flags: Sequence[int], mode: int, version: str) -> str:
    """A digest of everything a compiled database depends on (ids are the expressions' positions)."""
    h = hashlib.sha256()
    h.update(f"{mode}\0{version}\0{len(expressions)}\0".encode())
    for expression, flag in zip(expressions, flags, strict=True):
        h.update(b"%d\0%d\0" % (len(expression), flag))
        h.update(expression)
    return h.hexdigest()


def _owned_by_me(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted_folder(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _owned_by_me(st)


def load(key: str, where: Path | None = None) -> bytes | None:
    """The serialized database stored under `key`, or None when there is none to trust."""
    where = where or folder()
    if where is None or not _trusted_folder(where):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(where / f"{key}.hsdb", flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or not _owned_by_me(st) or st.st_size > _MAX_BYTES:
            return None
        data = f.read(_MAX_BYTES + 1)
    head = len(_MAGIC) + _DIGEST
    if len(data) <= head or not data.startswith(_MAGIC):
        return None
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(_MAGIC) : head]:
        return None
    return payload


def store(key: str, payload: bytes, where: Path | None = None) -> bool:
    """Keep `payload` under `key` (atomically: a reader sees the old file or the new one); False when
    it could not be kept. Never raises for a folder it cannot use."""
    where = where or folder()
    if where is None or len(payload) > _MAX_BYTES - len(_MAGIC) - _DIGEST:
        return False
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    if not _trusted_folder(where):
        return False
    import tempfile  # here: a process that finds the database cached (the usual case) never needs it

    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".hsdb", dir=where)  # mode 0600
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, where / f"{key}.hsdb")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
