"""Backends: where planners fly. Found by name; optional dependencies load only when used.

``embedded`` is the numba simulator in this process; ``gazebo`` a ROS1 world (Gazebo with
RotorS and Agilicious, or ``cableload world``). ``runner`` flies an episode on any backend;
``world_node`` and ``planner_node`` are the ROS processes; ``session`` is what the command line
calls.

May import: ``cableload_sim``, ``planners``. Imported by: ``learners``, ``hw``,
``cableload_sim.cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cableload_sim.errors import UsageError

if TYPE_CHECKING:
    from backends.base import Backend

_REGISTRY = {
    "embedded": "backends.embedded:EmbeddedBackend",
    "gazebo": "backends.gazebo:GazeboBackend",
}


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def make_backend(name: str, *args: Any, **kwargs: Any) -> Backend:
    """Instantiate the backend registered as ``name``."""
    if name not in _REGISTRY:
        raise UsageError(f"unknown backend {name!r}; expected one of {backend_names()}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)(*args, **kwargs)
