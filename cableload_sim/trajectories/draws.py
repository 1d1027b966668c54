"""Random flight paths, for training and validating on a distribution of references.

Both are seeded (same seed, same path) and smooth to the third derivative, and both bound their
turn radius, so what they ask of the system follows from their size, speed and radius:

- ``random_loop_points``: a closed star-shaped outline ``r(phi) = 1 + sum_k a_k cos(k phi +
  p_k)`` (``k = 1..harmonics``, amplitudes falling as 1/k), stretched, turned, flown either way
  round and started anywhere; the race-track pipeline (``trajectories.flyable_loop``) then
  limits its turn radius and scales it (``loop`` in ``cableload trajectories``).
- ``WanderCurve``: an open path whose curvature is a sum of sines bounded by ``1 / min_radius``
  (``wander``): it never closes, so a student cannot learn it by heart.
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.trajectories.curves import PlanarCurve
from cableload_sim.trajectories.jets import Jet

MIN_LOOP_RADIUS = 0.35
"""The loop's outline keeps ``r >= 0.35`` (of a unit mean radius): star-shaped, never through
its centre, so it never crosses itself before its turns are limited."""


def random_loop_points(seed: int, harmonics: int, n: int = 256) -> np.ndarray:
    """(n, 2) points along a random closed outline, in flight order (see the module)."""
    rng = np.random.default_rng(seed)
    phi = 2.0 * math.pi * np.arange(n) / n
    k = np.arange(1, harmonics + 1)
    amplitudes = rng.uniform(0.0, 1.0, harmonics) / k
    phases = rng.uniform(0.0, 2.0 * math.pi, harmonics)
    bumps = np.sum(amplitudes[:, None] * np.cos(np.outer(k, phi) + phases[:, None]), axis=0)
    deepest = -float(bumps.min())
    scale = min(1.0, (1.0 - MIN_LOOP_RADIUS) / deepest) if deepest > 0.0 else 1.0
    radius = 1.0 + scale * bumps
    stretch = rng.uniform(0.5, 1.0)
    turn = rng.uniform(0.0, 2.0 * math.pi)
    x, y = radius * np.cos(phi), stretch * radius * np.sin(phi)
    points = np.stack(
        [math.cos(turn) * x - math.sin(turn) * y, math.sin(turn) * x + math.cos(turn) * y], axis=-1
    )
    if rng.random() < 0.5:
        points = points[::-1]  # clockwise
    return np.roll(points, -int(rng.integers(n)), axis=0)


class WanderCurve(PlanarCurve):
    """An open planar path by arc length ``s`` (m) from the origin (see the module).

    Heading ``theta(s) = theta0 + integral of the curvature`` is analytic; the position is the
    integral of ``(cos theta, sin theta)``, by 5-point Gauss-Legendre on 1 cm cells, tabulated
    as far as the path is sampled and interpolated by cubic Hermite with the exact tangents
    (error below 1e-9 m). ``period`` is the ``length`` that checks cover; the path goes on.
    """

    CELL_M = 0.01
    COMPONENTS = 4
    closed = False

    def __init__(self, seed: int, min_radius: float, turn_scale: float, length: float):
        rng = np.random.default_rng(seed)
        self.weights = rng.uniform(-1.0, 1.0, self.COMPONENTS)
        self.rates = 2.0 * math.pi / (turn_scale * rng.uniform(0.5, 2.0, self.COMPONENTS))
        self.phases = rng.uniform(0.0, 2.0 * math.pi, self.COMPONENTS)
        self.gain = 1.0 / (min_radius * float(np.sum(np.abs(self.weights))))
        self.theta0 = rng.uniform(0.0, 2.0 * math.pi)
        self.period = length
        self._table = np.zeros((1, 2))  # positions at s = 0, CELL_M, 2 CELL_M, ...

    def curvature(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Curvature (1/m) and its derivative in s (1/m^2)."""
        angle = np.multiply.outer(s, self.rates) + self.phases
        kappa = self.gain * (np.sin(angle) @ self.weights)
        return kappa, self.gain * (np.cos(angle) @ (self.weights * self.rates))

    def heading(self, s) -> np.ndarray:
        """Heading (rad) of the tangent at arc length ``s``, continuous."""
        angle = np.multiply.outer(np.asarray(s, dtype=float), self.rates) + self.phases
        turned = (np.cos(self.phases) - np.cos(angle)) @ (self.weights / self.rates)
        return self.theta0 + self.gain * turned

    def _extend(self, farthest: float) -> None:
        cells = int(math.ceil(max(farthest, 0.0) / self.CELL_M)) + 2
        have = len(self._table) - 1
        if cells <= have:
            return
        cells = max(cells, 2 * have)
        nodes, weights = np.polynomial.legendre.leggauss(5)
        starts = self.CELL_M * np.arange(have, cells)
        s = starts[:, None] + 0.5 * self.CELL_M * (nodes + 1.0)
        theta = self.heading(s)
        steps = 0.5 * self.CELL_M * np.stack([np.cos(theta) @ weights, np.sin(theta) @ weights], axis=-1)
        self._table = np.vstack([self._table, self._table[-1] + np.cumsum(steps, axis=0)])

    def _position(self, s: np.ndarray) -> np.ndarray:
        self._extend(float(np.max(s, initial=0.0)))
        h = self.CELL_M
        i = np.clip(np.floor(s / h).astype(int), 0, len(self._table) - 2)
        u = (s - i * h) / h
        s0, s1 = i * h, (i + 1) * h
        t0 = np.stack([np.cos(self.heading(s0)), np.sin(self.heading(s0))], axis=-1)
        t1 = np.stack([np.cos(self.heading(s1)), np.sin(self.heading(s1))], axis=-1)
        h00, h10 = 2 * u**3 - 3 * u**2 + 1, u**3 - 2 * u**2 + u
        h01, h11 = -2 * u**3 + 3 * u**2, u**3 - u**2
        return (
            h00[:, None] * self._table[i]
            + (h * h10)[:, None] * t0
            + h01[:, None] * self._table[i + 1]
            + (h * h11)[:, None] * t1
        )

    def jet(self, phase):
        s = np.maximum(np.asarray(phase, dtype=float), 0.0)
        theta = self.heading(s)
        kappa, slope = self.curvature(s)
        along = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
        normal = np.stack([-np.sin(theta), np.cos(theta)], axis=-1)
        return Jet(
            self._position(s),
            along,
            kappa[:, None] * normal,
            slope[:, None] * normal - (kappa**2)[:, None] * along,
        )
