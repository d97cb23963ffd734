"""Lazy exports for a package's `__init__`: a name is imported from its module on first use.

`import mastrace` (which the `mastrace` command does first) then costs next to nothing, and a process
that only creates spans never loads the mixins, the registry or the analysis.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: `mastrace --help` does not import it
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names `table` maps to relative modules.

    A name found is stored in the package's `namespace`, so later look-ups do not come back here.
    """

    def getattr_(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *table})

    return getattr_, dir_
