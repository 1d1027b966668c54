"""The checks of a reference's options: each value converted by the project's checks
(``cableload_sim.checks``), or a ``UsageError`` naming the reference, the option, the value and
what was expected."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import UsageError
from cableload_sim.rotations import quat_normalize


def _plain(value):
    """numpy scalars and arrays as Python numbers and lists, for the checks."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _checked(check: checks.Check, spec: str, option: str, value):
    return check.raising(UsageError)(f"{spec}: option '{option}'", _plain(value))


def _finite(spec, option, value, unit) -> float:
    return _checked(checks.number(name="a finite number", unit=unit), spec, option, value)


def _positive(spec, option, value, unit) -> float:
    check = checks.number(0.0, low_open=True, name="a positive number", unit=unit)
    return _checked(check, spec, option, value)


def _non_negative(spec, option, value, unit) -> float:
    return _checked(checks.number(0.0, name="a non-negative number", unit=unit), spec, option, value)


def _optional_positive(spec, option, value, unit) -> float | None:
    return None if value is None else _positive(spec, option, value, unit)


def _vector(value, length: int, option: str, meaning: str, spec: str = "pose-to-pose"):
    """``value`` as a finite float array of shape (length,), else a UsageError."""
    check = checks.Check(f"{length} finite numbers, {meaning}", checks.vector(length).convert)
    try:
        return np.array(_checked(check, spec, option, value), dtype=float)
    except UsageError:
        # the whole value in the message, not the first bad item: a pose reads as one
        raise UsageError(f"{spec}: option '{option}': expected {check.expects}, got {value!r}") from None


def _unit_quaternion(value, option: str) -> np.ndarray:
    """``value`` (w, x, y, z) normalized, else a UsageError (wrong length, not finite, zero)."""
    q = _vector(value, 4, option, "a quaternion (w, x, y, z)")
    if np.linalg.norm(q) < 1e-9:
        raise UsageError(f"pose-to-pose: option '{option}': expected a non-zero quaternion, got {value!r}")
    return quat_normalize(q)


def _seed(spec, option, value, unit) -> int:
    return _checked(checks.integer(0), spec, option, value)


def _harmonics(spec, option, value, unit) -> int:
    return _checked(checks.integer(1, 8), spec, option, value)


def _pose(spec, option, value, unit) -> list[float]:
    return [float(c) for c in _vector(value, 6, option, unit, spec)]


@dataclass(frozen=True)
class Option:
    """One option of a reference: default, unit, meaning, and the check that resolves a value."""

    default: object
    unit: str
    description: str
    check: Callable = _positive

    def resolve(self, spec: str, name: str, value):
        return self.check(spec, name, value, self.unit)
