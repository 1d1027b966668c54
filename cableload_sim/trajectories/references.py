"""The reference types: ``LoadReference`` (what every reference is), a looped path with its
height and orientation, and a held pose."""

from __future__ import annotations

import abc
import math

import numpy as np

from cableload_sim.rotations import (
    quat_from_yaw,
)
from cableload_sim.trajectories.curves import _rotate_planar
from cableload_sim.trajectories.jets import (
    Jet,
    LoadReferenceSample,
    _as_times,
    _linear_jet,
    compose,
    time_warp,
)

# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


class LoadReference(abc.ABC):
    """A load reference trajectory: sample it at any times."""

    name: str

    @abc.abstractmethod
    def sample(self, t) -> LoadReferenceSample:
        """The reference at times ``t`` (s, float or 1-D array); times before 0 behave as 0."""

    @property
    @abc.abstractmethod
    def period_s(self) -> float | None:
        """Lap time (s) after the ramp for loops, duration for pose-to-pose, None for hover."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """Resolved options, JSON-serializable."""

    def start_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(p0 (3,) m, q0 (4,)) = the reference at t = 0."""
        start = self.sample(0.0)
        return start.p[0], start.q[0]


class LoopReference(LoadReference):
    """A closed planar curve flown at ``phase_rate`` after a smooth start, at a (possibly
    oscillating) height, with an orientation mode."""

    def __init__(self, name, curve, phase_rate, height, orientation, ramp_s, options, rotation: float = 0.0):
        self.name, self.curve, self.phase_rate = name, curve, phase_rate
        self.height, self.orientation, self.ramp_s = height, orientation, ramp_s
        self.rotation = rotation
        """The path is turned by this angle (rad) about the vertical through the origin."""
        self._options = dict(options)

    @property
    def period_s(self) -> float:
        return self.curve.period / self.phase_rate

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        return self.sample_warped(t, time_warp(t, self.ramp_s))

    def sample_warped(self, t: np.ndarray, warp: Jet) -> LoadReferenceSample:
        """The path at times ``t`` (K,) flown along the path time ``warp`` (its jet in t)."""
        phase = self.phase_rate * warp.value
        horizontal = compose(self.curve.jet(phase), _linear_jet(phase, self.phase_rate))
        if self.rotation:
            turn = np.full(len(t), self.rotation)
            horizontal = horizontal.map(lambda order: _rotate_planar(turn, order))
        position = compose(_with_height(horizontal, self.height.jet(warp.value)), warp)
        attitude = self.orientation.attitude(phase, horizontal, warp)
        return LoadReferenceSample(
            t,
            position.value,
            position.d1,
            position.d2,
            position.third,
            attitude.q,
            attitude.omega,
            attitude.alpha,
        )

    def describe(self) -> dict:
        return {
            "name": self.name,
            "orientation": self.orientation.mode,
            **self._options,
            "period_s": float(self.period_s),
        }


def _with_height(horizontal: Jet, vertical: Jet) -> Jet:
    """Jet of (x, y, z) (K, 3) from the jets of (x, y) (K, 2) and z (K,)."""

    def stacked(planar: np.ndarray, height: np.ndarray) -> np.ndarray:
        xyz = np.empty((planar.shape[0], 3))
        xyz[:, :2] = planar
        xyz[:, 2] = height
        return xyz

    d3 = None
    if horizontal.d3 is not None and vertical.d3 is not None:
        d3 = stacked(horizontal.d3, vertical.d3)
    return Jet(
        stacked(horizontal.value, vertical.value),
        stacked(horizontal.d1, vertical.d1),
        stacked(horizontal.d2, vertical.d2),
        d3,
    )


class Hover(LoadReference):
    """Hold position ``p`` (m) with a fixed yaw (rad), level."""

    def __init__(self, p, yaw: float = 0.0, name: str = "hover"):
        self.name = name
        self.p = np.asarray(p, dtype=float).reshape(3)
        self.yaw = float(yaw)

    @property
    def period_s(self) -> None:
        return None

    def sample(self, t) -> LoadReferenceSample:
        t = _as_times(t)
        zeros = np.zeros((len(t), 3))
        q = np.tile(quat_from_yaw(self.yaw), (len(t), 1))
        return LoadReferenceSample(t, np.tile(self.p, (len(t), 1)), zeros, zeros, zeros, q, zeros, zeros)

    def describe(self) -> dict:
        x, y, z = (float(c) for c in self.p)
        return {
            "name": self.name,
            "orientation": "constant",
            "x": x,
            "y": y,
            "z": z,
            "yaw_deg": math.degrees(self.yaw),
            "period_s": None,
        }
