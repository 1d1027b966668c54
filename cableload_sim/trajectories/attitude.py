"""Height and orientation along a looped path: the vertical motion and the yaw modes
(constant, oscillating, zero-sideslip)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cableload_sim.rotations import (
    quat_from_yaw,
)
from cableload_sim.trajectories.curves import PlanarCurve
from cableload_sim.trajectories.jets import Jet, compose

ORIENTATION_MODES = ("constant", "zero-sideslip", "oscillating")
"""The orientation modes a looped reference can fly."""


# --------------------------------------------------------------------------------------------
# Height and orientation along a looped path
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerticalMotion:
    """Height ``z = z0 + amplitude sin(2 pi frequency tau)`` (m) along the path time tau (s)."""

    z0: float
    amplitude: float
    frequency_hz: float

    def jet(self, tau: np.ndarray) -> Jet:
        w = 2.0 * math.pi * self.frequency_hz
        s, c = self.amplitude * np.sin(w * tau), self.amplitude * np.cos(w * tau)
        return Jet(self.z0 + s, w * c, -(w**2) * s, -(w**3) * c)


@dataclass(frozen=True)
class Attitude:
    """Attitude samples: q (K, 4) body to world; omega, alpha (K, 3) body frame."""

    q: np.ndarray
    omega: np.ndarray
    alpha: np.ndarray


def _yaw_attitude(yaw: np.ndarray, yaw_rate: np.ndarray, yaw_acceleration: np.ndarray) -> Attitude:
    return Attitude(quat_from_yaw(yaw), _about_z(yaw_rate), _about_z(yaw_acceleration))


def _about_z(rate: np.ndarray) -> np.ndarray:
    """(K, 3) vectors (0, 0, rate)."""
    out = np.zeros((len(rate), 3))
    out[:, 2] = rate
    return out


class ConstantYaw:
    """The load keeps a fixed yaw (rad), level."""

    mode = "constant"

    def __init__(self, yaw: float):
        self.yaw = yaw

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        zeros = np.zeros(len(phase))
        return _yaw_attitude(zeros + self.yaw, zeros, zeros)


class OscillatingYaw:
    """The load yaws ``yaw0 + amplitude sin(2 pi frequency tau)`` along the path time tau, level:
    an orientation that neither stays fixed nor follows the path."""

    mode = "oscillating"

    def __init__(self, yaw: float, amplitude: float, frequency_hz: float):
        self.yaw, self.amplitude, self.frequency_hz = yaw, amplitude, frequency_hz

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        w = 2.0 * math.pi * self.frequency_hz
        tau = warp.value
        s, c = self.amplitude * np.sin(w * tau), self.amplitude * np.cos(w * tau)
        yaw = compose(Jet(self.yaw + s, w * c, -(w**2) * s, -(w**3) * c), warp)
        return _yaw_attitude(yaw.value, yaw.d1, yaw.d2)


class ZeroSideslip:
    """The load's body x axis follows the path tangent (the horizontal velocity's direction), level.

    The heading is atan2(y', x') of the derivative with respect to the phase, so it is defined
    at rest; a dense table of the unwrapped heading over one lap picks the continuous branch.
    """

    mode = "zero-sideslip"

    def __init__(self, curve: PlanarCurve, rotation: float = 0.0):
        self.period = curve.period
        self.rotation = rotation
        self.heading = getattr(curve, "heading", None)
        """The curve's own continuous heading (rad) of the phase, for open paths."""
        if self.heading is not None:
            return
        for n in 2 ** np.arange(10, 19):  # until neighbouring headings differ by well under pi
            self.grid = np.linspace(0.0, curve.period, n + 1)
            self.unwrapped = np.unwrap(self._raw_heading(curve.jet(self.grid).d1)) + rotation
            if np.max(np.abs(np.diff(self.unwrapped))) < 0.3:
                break
        laps_turned = round((self.unwrapped[-1] - self.unwrapped[0]) / (2.0 * math.pi))
        self.turn_per_lap = 2.0 * math.pi * laps_turned

    @staticmethod
    def _raw_heading(tangent: np.ndarray) -> np.ndarray:
        return np.arctan2(tangent[:, 1], tangent[:, 0])

    def _continuous_heading(self, phase: np.ndarray, raw: np.ndarray) -> np.ndarray:
        """``raw`` heading (rad) moved by whole turns onto the branch of the table at ``phase``."""
        if self.heading is not None:
            nearby = self.heading(phase) + self.rotation
            return raw + 2.0 * math.pi * np.round((nearby - raw) / (2.0 * math.pi))
        laps = np.floor(phase / self.period)
        table = np.interp(phase - laps * self.period, self.grid, self.unwrapped)
        nearby = table + laps * self.turn_per_lap
        return raw + 2.0 * math.pi * np.round((nearby - raw) / (2.0 * math.pi))

    def attitude(self, phase, horizontal: Jet, warp: Jet) -> Attitude:
        """Yaw from the path's tau-jet ``horizontal`` (K, 2), composed with the time warp."""
        (dx, dy), (ddx, ddy), (dddx, dddy) = horizontal.d1.T, horizontal.d2.T, horizontal.third.T
        speed_sq = dx**2 + dy**2
        turning = dx * ddy - dy * ddx
        yaw_tau = Jet(
            self._continuous_heading(phase, self._raw_heading(horizontal.d1)),
            turning / speed_sq,
            (dx * dddy - dy * dddx) / speed_sq - 2.0 * turning * (dx * ddx + dy * ddy) / speed_sq**2,
        )
        yaw = compose(yaw_tau, warp)
        return _yaw_attitude(yaw.value, yaw.d1, yaw.d2)
