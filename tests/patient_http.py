"""`httpx`'s one-call functions with a read timeout a busy CI machine cannot hit (httpx's default is
5 s; a statement the Query API runs in a child process can take longer than that to start under
load). A test that passes its own `timeout` keeps it."""

from __future__ import annotations

from typing import Any

import httpx

TIMEOUT = httpx.Timeout(600.0)


def get(url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("timeout", TIMEOUT)
    return httpx.get(url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("timeout", TIMEOUT)
    return httpx.post(url, **kwargs)


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("timeout", TIMEOUT)
    return httpx.request(method, url, **kwargs)
