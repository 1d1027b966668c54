"""Planners: formation baselines, the teacher NMPC, the decentralized student.

``make_planner(name, config)`` finds a planner by name and imports what it needs only then.
"""

from __future__ import annotations

import importlib

_REGISTRY = {
    "formation": ("planners.formation:FormationPlanner", {"tilt": False}),
    "formation-tilt": ("planners.formation:FormationPlanner", {"tilt": True}),
    "teacher": ("planners.teacher:TeacherPlanner", {}),
}


def register(name: str, entry_point: str, **defaults) -> None:
    """Make ``make_planner(name, ...)`` build ``module:Class(system, **defaults, **kwargs)``."""
    _REGISTRY[name] = (entry_point, defaults)


def planner_names() -> list[str]:
    return sorted(_REGISTRY)


def make_planner(name: str, config, **kwargs):
    """Instantiate the planner registered as ``name`` for ``config`` (a ``Config``)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown planner {name!r}; expected one of {planner_names()}")
    entry, defaults = _REGISTRY[name]
    module, cls = entry.split(":")
    planner_cls = getattr(importlib.import_module(module), cls)
    if hasattr(planner_cls, "from_config"):
        return planner_cls.from_config(config, **{**defaults, **kwargs})
    return planner_cls(config.system, **{**defaults, **kwargs})
