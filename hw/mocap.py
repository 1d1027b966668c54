"""Motion capture in a flight: each rigid body's pose stream, filtered into pose and twist.

A motion-capture system publishes one ``geometry_msgs/PoseStamped`` per rigid body and frame
(``/mocap/<body>/pose`` or ``/vrpn_client_node/<body>/pose``), stamped when the frame was
taken. It measures no velocity: ``BodyTracker`` estimates the load's twist (and any body's) with
the simulator's own Kalman filter (``cableload_sim.physics.sensing.PoseFilter``: constant
acceleration and constant body rates, tuned by ``[sensing]``), so that a planner flies on the
same estimate in an arena as in simulation with ``[sensing]`` on.

Frames that arrive out of order or twice (a stamp not after the last one) are dropped and
counted; the age of the newest frame and the measured frame rate are what the safety module
and preflight judge.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from cableload_sim.params import SensingParams
from cableload_sim.physics.sensing import PoseFilter

RATE_WINDOW = 50
"""Frames over which the rate is measured."""


class BodyTracker:
    """One rigid body's pose stream and its filtered pose and twist (world position and
    velocity, attitude w, x, y, z body to world, body rates in the body frame)."""

    def __init__(
        self,
        name: str,
        params: SensingParams,
        jerk_psd: float,
        angular_accel_psd: float,
        filtered: bool = True,
    ):
        self.name = name
        self.filtered = filtered
        """Without the filter only the frames' stamps and the newest position are kept (a body
        whose twist nobody needs: the cheap way to watch its age and rate)."""
        self.position: np.ndarray | None = None
        self.filter = PoseFilter(
            [jerk_psd], [angular_accel_psd], params.position_noise_m, params.attitude_noise_rad
        )
        self.last_stamp: float | None = None
        self.frames = 0
        self.dropped = 0
        self._stamps: deque[float] = deque(maxlen=RATE_WINDOW)

    @classmethod
    def for_load(cls, params: SensingParams, name: str = "load") -> BodyTracker:
        return cls(name, params, params.load_jerk_psd, params.load_angular_accel_psd)

    @classmethod
    def for_quadrotor(cls, params: SensingParams, name: str, filtered: bool = True) -> BodyTracker:
        return cls(name, params, params.uav_jerk_psd, params.uav_angular_accel_psd, filtered)

    @property
    def started(self) -> bool:
        return self.last_stamp is not None

    def add(self, stamp: float, p, q) -> bool:
        """A frame taken at ``stamp`` (s); whether it was used (not out of order, finite)."""
        p = np.asarray(p, dtype=float).reshape(1, 3)
        q = np.asarray(q, dtype=float).reshape(1, 4)
        norm = float(np.linalg.norm(q))
        if not (np.isfinite(stamp) and np.isfinite(p).all() and np.isfinite(q).all() and norm > 0.5):
            self.dropped += 1
            return False
        q = q / norm
        if self.last_stamp is not None and stamp <= self.last_stamp:
            self.dropped += 1
            return False
        if not self.filtered:
            pass
        elif self.last_stamp is None:
            self.filter.start(stamp, p, q)
        else:
            self.filter.update(stamp, p, q)
        self.position = p[0]
        self.last_stamp = float(stamp)
        self.frames += 1
        self._stamps.append(float(stamp))
        return True

    def estimate(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity, attitude and body rates predicted to ``t`` (s)."""
        if self.last_stamp is None:
            raise RuntimeError(f"motion capture of {self.name}: no frame yet")
        if not self.filtered:
            raise RuntimeError(f"motion capture of {self.name}: tracked without its filter")
        p, v, q, omega = self.filter.predicted(t)
        return p[0], v[0], q[0], omega[0]

    def age(self, now: float) -> float:
        """How old the newest frame is at ``now`` (s); infinite before the first."""
        return np.inf if self.last_stamp is None else max(float(now) - self.last_stamp, 0.0)

    def rate_hz(self) -> float:
        """Frames per second over the last ``RATE_WINDOW`` frames (0 with fewer than two)."""
        if len(self._stamps) < 2 or self._stamps[-1] <= self._stamps[0]:
            return 0.0
        return (len(self._stamps) - 1) / (self._stamps[-1] - self._stamps[0])
