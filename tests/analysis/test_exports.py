"""The public names of `mastrace.analysis`."""

from __future__ import annotations

import mastrace.analysis


def test_all_is_sorted_and_resolves() -> None:
    """`__all__` is sorted and every name in it exists."""
    names = mastrace.analysis.__all__
    assert names == sorted(names)
    assert all(hasattr(mastrace.analysis, name) for name in names)


def test_all_lists_every_public_name() -> None:
    """Every public attribute that is not a submodule is listed in `__all__`."""
    public = {
        n
        for n, v in vars(mastrace.analysis).items()
        if not n.startswith("_")
        and not hasattr(v, "__path__")
        and getattr(v, "__module__", "").startswith("mastrace.analysis")
    }
    assert public == set(mastrace.analysis.__all__)
