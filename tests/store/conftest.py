"""Helpers shared by the store tests."""

from __future__ import annotations

import os


def break_writes(fd: int) -> None:
    """Make writes to the open descriptor `fd` fail, as on a full or broken disk."""
    read_only = os.open(os.devnull, os.O_RDONLY)
    os.dup2(read_only, fd)
    os.close(read_only)
