"""Planners: formation baselines, the teacher NMPC, the decentralized student.

``make_planner(name, config, **options)`` finds a planner by name and imports what it needs
only then. An entry point is a class (built by its ``from_config(config, **options)``, or from
``config.system``) or a factory ``(config, **options) -> planner``. ``student`` is the factory
of ``learners.export``, which loads a trained policy (``policy=DIR``, ``runtime="auto"``,
``"numba"``, ``"torch"`` or ``"onnx"``): the one entry that names the learning code, as a
string, so that this package never imports it and torch loads only when the student is asked
for. ``student-prior`` is the same student with its network's output zeroed: its bare
formation prior.

May import: ``cableload_sim``. Imported by: ``backends``, ``learners``, ``hw``,
``cableload_sim.cli``.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cableload_sim.errors import UsageError

if TYPE_CHECKING:
    from cableload_sim.params import Config
    from planners.base import Planner

_REGISTRY = MappingProxyType(
    {
        "formation": ("planners.formation:FormationPlanner", {"tilt": False}),
        "formation-tilt": ("planners.formation:FormationPlanner", {"tilt": True}),
        "formation-wrench": ("planners.formation:FormationPlanner", {"tilt": True, "wrench": True}),
        "formation-follow": (
            "planners.formation:FormationPlanner",
            {"tilt": True, "wrench": True, "follow": True},
        ),
        "teacher": ("planners.teacher:TeacherPlanner", {}),
        "teacher-ekf": ("planners.load_estimate:teacher_on_estimate", {}),
        "student": ("learners.export:student_planner", {}),
        "student-prior": ("learners.export:student_planner", {"network": False}),
    }
)


def planner_names() -> list[str]:
    return sorted(_REGISTRY)


def check_planner_name(name: str) -> str:
    """``name``, or a ``UsageError`` listing the known planners."""
    if name not in _REGISTRY:
        raise UsageError(f"unknown planner {name!r}; expected one of {planner_names()}")
    return name


def make_planner(name: str, config: Config, **options: Any) -> Planner:
    """Instantiate the planner registered as ``name`` for ``config`` (a ``Config``)."""
    entry, defaults = _REGISTRY[check_planner_name(name)]
    module, attribute = entry.split(":")
    target = getattr(importlib.import_module(module), attribute)
    options = {**defaults, **options}
    if hasattr(target, "from_config"):
        return target.from_config(config, **options)
    if isinstance(target, type):
        return target(config.system, **options)
    return target(config, **options)
