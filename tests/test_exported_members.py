"""The public surface: `mastrace.__all__` is sorted and lists exactly the package's public names."""

from __future__ import annotations
import __future__

import types

import mastrace


def test_all_is_sorted() -> None:
    """`__all__` is in sorted order, so additions land in one obvious place."""
    assert mastrace.__all__ == sorted(mastrace.__all__)


def test_all_has_no_duplicates() -> None:
    """Every name appears once in `__all__`."""
    assert len(mastrace.__all__) == len(set(mastrace.__all__))


def test_all_equals_the_public_names() -> None:
    """Every public name of the package (not submodules or `__future__` flags) is in `__all__`, only those."""
    # dir(): names loaded on first use (PEP 562) count as well as those already loaded.
    public = {
        name
        for name in dir(mastrace)
        if not name.startswith("_")
        and name not in ("TYPE_CHECKING", "Any")
        and not isinstance(getattr(mastrace, name), (types.ModuleType, __future__._Feature))
    }
    exported = {name for name in mastrace.__all__ if name != "__version__"}
    assert exported == public


def test_every_exported_name_exists() -> None:
    """Each name in `__all__` can be imported from the package."""
    missing = [name for name in mastrace.__all__ if not hasattr(mastrace, name)]
    assert missing == []
