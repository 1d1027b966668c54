"""The wind field of one episode: a steady wind plus Dryden turbulence, as samples in time.

The turbulence is generated here, outside the kernels, from an explicit generator, and sampled
inside them (``kernels.aero.wind_at``: linear between samples). It is the same at every point of
the system (a few metres across, against scale lengths of metres to tens of metres).

Each component (u along the steady wind's horizontal direction, v across it, w vertical) is
MIL-F-8785C's Dryden process for frozen turbulence carried past at speed V (the steady wind's,
at least ``params.MIN_WIND_SPEED``), T = L / V:

- u: ``sigma_u sqrt(2 L_u / (pi V)) / (1 + T_u s)``;
- v, w: ``sigma sqrt(L / (pi V)) (1 + sqrt(3) T s) / (1 + T s)^2``.

Each is sampled exactly: its state-space form is discretized with the matrix exponential and
driven by Gaussian increments whose covariance keeps the stationary covariance, so the samples
have standard deviation sigma and the Dryden autocorrelation at any sample period, and the first
sample is drawn from the stationary distribution (no start-up transient).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import expm, solve_continuous_lyapunov

from cableload_sim.params import MIN_WIND_SPEED, WindParams

CHUNK_S = 10.0
"""Simulated time generated at once when the samples must reach further (s)."""


class DrydenComponent:
    """One turbulence component as a sampled linear system x+ = A x + noise, y = C x."""

    def __init__(self, sigma: float, length: float, speed: float, dt: float, first_order: bool):
        tau = length / speed
        if first_order:
            a = np.array([[-1.0 / tau]])
            b = np.array([[1.0 / tau]])
            c = np.array([[1.0]])
        else:  # (1 + sqrt(3) tau s) / (1 + tau s)^2, controllable canonical form
            a = np.array([[0.0, 1.0], [-1.0 / tau**2, -2.0 / tau]])
            b = np.array([[0.0], [1.0 / tau**2]])
            c = np.array([[1.0, math.sqrt(3.0) * tau]])
        # stationary covariance for unit-intensity white noise, then scaled to variance sigma^2
        shape = solve_continuous_lyapunov(a, -b @ b.T)
        self.covariance = shape * (sigma**2 / float((c @ shape @ c.T)[0, 0]))
        self.transition = expm(a * dt)
        step = self.covariance - self.transition @ self.covariance @ self.transition.T
        self.increment = np.linalg.cholesky(step + 1e-15 * np.trace(step) * np.eye(len(step)))
        self.output = c[0]
        self.state = np.zeros(len(a))

    def start(self, rng: np.random.Generator) -> None:
        """A new realization, from the stationary distribution."""
        self.state = np.linalg.cholesky(self.covariance) @ rng.standard_normal(len(self.state))

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """The next ``count`` values (the first is the current state's)."""
        out = np.empty(count)
        noise = rng.standard_normal((count, len(self.state))) @ self.increment.T
        for k in range(count):
            out[k] = self.output @ self.state
            self.state = self.transition @ self.state + noise[k]
        return out


def wind_axes(mean: np.ndarray) -> np.ndarray:
    """Unit vectors (rows, world) of the turbulence components u, v, w: u along the steady
    wind's horizontal direction (world x without one), v horizontal to its left, w up."""
    horizontal = math.hypot(mean[0], mean[1])
    u = np.array([mean[0], mean[1], 0.0]) / horizontal if horizontal > 1e-9 else np.array([1.0, 0.0, 0.0])
    return np.array([u, [-u[1], u[0], 0.0], [0.0, 0.0, 1.0]])


class WindField:
    """Samples of the wind (world, m/s) every ``params.sample_dt`` from the episode's start,
    generated as far as the simulation needs them (``cover``); ``samples`` is what the kernels
    take (``layout.SimModel.wind``)."""

    def __init__(self, params: WindParams, rng: np.random.Generator):
        self.params = params
        self.rng = rng
        self.dt = params.sample_dt
        self.mean = np.array(params.mean, dtype=float)
        self.axes = wind_axes(self.mean)
        speed = max(float(np.linalg.norm(self.mean)), MIN_WIND_SPEED)
        self.components = (
            [
                DrydenComponent(sigma, length, speed, self.dt, first_order=(k == 0))
                for k, (sigma, length) in enumerate(zip(params.turbulence_sigma, params.turbulence_length))
                if sigma > 0.0
            ]
            if params.turbulent()
            else []
        )
        self._which = [k for k, sigma in enumerate(params.turbulence_sigma) if sigma > 0.0]
        self.restart()

    def restart(self) -> None:
        """A new episode: a new realization of the turbulence from t = 0."""
        self._buffer = np.tile(self.mean, (1, 1))
        self._rows = 1
        if self.components:
            for component in self.components:
                component.start(self.rng)
            self._rows = 0
            self._extend(2)

    @property
    def samples(self) -> np.ndarray:
        return self._buffer[: self._rows]

    def cover(self, t_end: float) -> None:
        """Make the samples reach past time ``t_end`` (s)."""
        if not self.components:
            return
        needed = int(math.ceil(t_end / self.dt)) + 2
        if needed > self._rows:
            self._extend(max(needed - self._rows, int(CHUNK_S / self.dt)))

    def _extend(self, count: int) -> None:
        rows = self._rows + count
        if rows > self._buffer.shape[0]:
            grown = np.empty((max(rows, 2 * self._buffer.shape[0]), 3))
            grown[: self._rows] = self._buffer[: self._rows]
            self._buffer = grown
        turbulence = np.zeros((count, 3))
        for k, component in zip(self._which, self.components):
            turbulence[:, k] = component.sample(count, self.rng)
        self._buffer[self._rows : rows] = self.mean + turbulence @ self.axes
        self._rows = rows
