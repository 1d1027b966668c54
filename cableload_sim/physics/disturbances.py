"""Disturbances applied by simulating backends.

``WrenchDisturbance``: the paper's training disturbance (section 3.3). At the start of an
episode a random direction in force-torque space is drawn; at every physics step a random
magnitude (uniform in [0, 1]) scales the maximum force and torque along it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim.errors import UsageError


@dataclass(frozen=True)
class WrenchDisturbance:
    """Random external wrench on the load, world frame."""

    max_force: float = 2.0
    """Largest force (N)."""
    max_torque: float = 0.2
    """Largest torque (N m)."""

    def __post_init__(self):
        for name in ("max_force", "max_torque"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0.0:
                raise UsageError(f"{name}: expected a non-negative finite number, got {value!r}")

    def episode(self, rng: np.random.Generator) -> WrenchProcess:
        """One episode's process: its direction drawn now from ``rng``."""
        direction = rng.normal(size=6)
        direction[:3] /= max(float(np.linalg.norm(direction[:3])), 1e-12)
        direction[3:] /= max(float(np.linalg.norm(direction[3:])), 1e-12)
        scale = np.concatenate([np.full(3, self.max_force), np.full(3, self.max_torque)])
        return WrenchProcess(direction * scale, rng)


class WrenchProcess:
    """Per-step wrenches along one episode's direction, random magnitude each step."""

    def __init__(self, peak: np.ndarray, rng: np.random.Generator):
        self.peak = peak
        self.rng = rng

    def next(self, n_steps: int) -> np.ndarray:
        """Wrenches (n_steps, 6) for the next ``n_steps`` physics steps."""
        return self.rng.uniform(0.0, 1.0, size=(n_steps, 1)) * self.peak[None, :]
