"""The checks of a reference's options: each value converted, or a ``UsageError`` naming the
reference, the option, the value and what was expected."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.rotations import quat_normalize


def _number(spec: str, option: str, value, expected: str) -> float:
    """``value`` as a finite float, else a UsageError naming the option, value and expectation."""
    problem = UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    if isinstance(value, bool):
        raise problem
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise problem from None
    if not math.isfinite(number):
        raise problem
    return number


def _finite(spec, option, value, unit) -> float:
    return _number(spec, option, value, f"a finite number ({unit})")


def _positive(spec, option, value, unit) -> float:
    expected = f"a positive finite number ({unit})"
    if not _number(spec, option, value, expected) > 0.0:
        raise UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    return float(value)


def _non_negative(spec, option, value, unit) -> float:
    expected = f"a non-negative finite number ({unit})"
    if not _number(spec, option, value, expected) >= 0.0:
        raise UsageError(f"{spec}: option '{option}' must be {expected}, got {value!r}")
    return float(value)


def _optional_positive(spec, option, value, unit) -> float | None:
    return None if value is None else _positive(spec, option, value, unit)


def _vector(value, length: int, option: str, meaning: str, spec: str = "pose-to-pose"):
    """``value`` as a finite float array of shape (length,), else a UsageError."""
    try:
        vector = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        vector = None
    if vector is None or vector.shape != (length,) or not np.all(np.isfinite(vector)):
        raise UsageError(
            f"{spec}: option '{option}' must be {length} finite numbers, {meaning}, got {value!r}"
        )
    return vector


def _unit_quaternion(value, option: str) -> np.ndarray:
    """``value`` (w, x, y, z) normalized, else a UsageError (wrong length, not finite, zero)."""
    q = _vector(value, 4, option, "a quaternion (w, x, y, z)")
    if np.linalg.norm(q) < 1e-9:
        raise UsageError(f"pose-to-pose: option '{option}' must be a non-zero quaternion, got {value!r}")
    return quat_normalize(q)


def _seed(spec, option, value, unit) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise UsageError(f"{spec}: option '{option}' must be a non-negative integer ({unit}), got {value!r}")
    return int(value)


def _harmonics(spec, option, value, unit) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= value <= 8:
        raise UsageError(f"{spec}: option '{option}' must be an integer from 1 to 8 ({unit}), got {value!r}")
    return int(value)


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
