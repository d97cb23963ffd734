"""Setting mastrace up in a process: the parameter table (`_settings`), `configure()` (`_config`, the one
composition root that builds every destination), the destinations it builds (`_destinations`) and what
`spawn`/`forkserver` workers inherit (`_children`)."""

from __future__ import annotations

__all__ = ["arm_inheritance"]


def _inherit_from_parent() -> bool:
    from ._children import inherit
    from ._config import _at_exit, configure

    return inherit(configure, _at_exit)


def arm_inheritance() -> None:
    """In a process that may be a `spawn`/`forkserver` worker of a configured one: the first span of an
    unconfigured tracer configures mastrace from the parent's settings (see `_children`)."""
    from ..tracing._state import STATE

    STATE.inherit = _inherit_from_parent
