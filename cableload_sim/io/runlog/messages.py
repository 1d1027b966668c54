"""Building the run log's messages from the project's arrays (world frame, quaternions w, x, y, z;
ROS order x, y, z, w in the messages), and the JSON and time conventions of the log."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from cableload_sim.io.runlog.topics import (
    CABLE_TENSION,
    ODOMETRY,
    POSE_STAMPED,
    QUAD_STATE,
    REFERENCE,
    STRING,
    WORLD_FRAME,
)


def ros_time_ns(t: float) -> int:
    """Simulation time ``t`` (s) as ROS time in nanoseconds."""
    if not math.isfinite(t) or t < 0.0:
        raise ValueError(f"time: expected a finite non-negative number of seconds, got {t!r}")
    return int(round(t * 1e9))


class MessageBuilder:
    """Builds messages from arrays (world frame, quaternions w, x, y, z)."""

    def __init__(self, store):
        types = store.types
        self.Header = types["std_msgs/msg/Header"]
        self.Time = types["builtin_interfaces/msg/Time"]
        self.Point = types["geometry_msgs/msg/Point"]
        self.Quaternion = types["geometry_msgs/msg/Quaternion"]
        self.Vector3 = types["geometry_msgs/msg/Vector3"]
        self.Pose = types["geometry_msgs/msg/Pose"]
        self.Twist = types["geometry_msgs/msg/Twist"]
        self.PoseStamped = types[POSE_STAMPED]
        self.PoseCov = types["geometry_msgs/msg/PoseWithCovariance"]
        self.TwistCov = types["geometry_msgs/msg/TwistWithCovariance"]
        self.Odometry = types[ODOMETRY]
        self.String = types[STRING]
        self.QuadState = types[QUAD_STATE]
        self.Command = types["agiros_msgs/msg/Command"]
        self.Setpoint = types["agiros_msgs/msg/Setpoint"]
        self.Reference = types[REFERENCE]
        self.CableTension = types[CABLE_TENSION]
        self.zero3 = self.Vector3(0.0, 0.0, 0.0)
        self.zero_twist = self.Twist(self.zero3, self.zero3)
        self.covariance = np.zeros(36)

    def header(self, stamp_ns: int, frame: str = WORLD_FRAME, seq: int = 0):
        return self.Header(seq, self.Time(stamp_ns // 10**9, stamp_ns % 10**9), frame)

    def vector(self, v) -> object:
        return self.Vector3(*v)

    def pose(self, p, q_wxyz):
        w, x, y, z = q_wxyz
        return self.Pose(self.Point(*p), self.Quaternion(x, y, z, w))

    def twist(self, linear, angular):
        return self.Twist(self.Vector3(*linear), self.Vector3(*angular))

    def odometry(self, header, child, p, q, v_body, omega_body):
        return self.Odometry(
            header,
            child,
            self.PoseCov(self.pose(p, q), self.covariance),
            self.TwistCov(self.twist(v_body, omega_body), self.covariance),
        )

    def quad_state(self, header, t, p, q, v, omega, motors, acceleration=None, jerk=None):
        accel = self.zero_twist if acceleration is None else self.twist(acceleration, (0, 0, 0))
        return self.QuadState(
            header,
            t,
            self.pose(p, q),
            self.twist(v, omega),
            accel,
            self.zero3,
            self.zero3,
            self.zero3 if jerk is None else self.vector(jerk),
            self.zero3,
            motors,
        )

    def setpoint(self, stamp_ns: int, t: float, p, v, a, j, rates):
        """One plan node: planned state and body-rate command at node time ``t`` (s)."""
        state = self.quad_state(
            self.header(stamp_ns), t, p, (1.0, 0.0, 0.0, 0.0), v, rates, np.zeros(0), acceleration=a, jerk=j
        )
        command = self.Command(self.header(stamp_ns), t, False, 0.0, self.vector(rates), np.zeros(4))
        return self.Setpoint(state, command)


def to_json(value) -> str:
    """``value`` as JSON for a ``std_msgs/String`` of the log (NumPy values as Python ones)."""

    def default(obj):
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        if isinstance(obj, Path):
            return str(obj)
        raise TypeError(f"cannot write {type(obj).__name__} {obj!r} to a run log as JSON")

    return json.dumps(value, default=default)
