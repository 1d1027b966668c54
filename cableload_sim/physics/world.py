"""The shared vocabulary between simulators, planners and backends.

- ``WorldState``: privileged state of the whole system (what a centralized planner may use).
- ``LocalObservation``: what one quadrotor may know: its own state and the load's pose. It has
  no field for another quadrotor, so a planner given one cannot read them.
- ``UavTrajectory``: one quadrotor's plan on the horizon's nodes.

World frame: z up, gravity along -z. Quaternions (w, x, y, z) body to world. Body rates in the
body frame. Units: m, s, rad, N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim.rotations import quat_to_matrix


def _array(name: str, value, shape: tuple) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    if value.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {value.shape}")
    return value


@dataclass(frozen=True)
class UavTrajectory:
    """A quadrotor's reference on N nodes: absolute times (s), world p, v, a, jerk, body rates."""

    t: np.ndarray
    p: np.ndarray
    v: np.ndarray
    a: np.ndarray
    j: np.ndarray
    body_rates: np.ndarray

    def __post_init__(self):
        t = np.asarray(self.t, dtype=float)
        if t.ndim != 1 or t.size < 2:
            raise ValueError(f"t: expected a 1-D array of at least 2 node times, got shape {t.shape}")
        object.__setattr__(self, "t", t)
        for name in ("p", "v", "a", "j", "body_rates"):
            object.__setattr__(self, name, _array(name, getattr(self, name), (t.size, 3)))

    @property
    def n_nodes(self) -> int:
        return self.t.size

    def is_finite(self) -> bool:
        return bool(
            np.isfinite(self.t).all()
            and all(np.isfinite(getattr(self, f)).all() for f in ("p", "v", "a", "j", "body_rates"))
        )

    def shifted_to(self, t_new: float) -> UavTrajectory:
        """The same motion seen from ``t_new``: nodes re-sampled on the horizon from ``t_new``,
        holding the last node's position (at rest) beyond the end."""
        offsets = self.t - self.t[0]
        times = t_new + offsets
        p = np.empty_like(self.p)
        v = np.empty_like(self.v)
        a = np.empty_like(self.a)
        j = np.empty_like(self.j)
        w = np.empty_like(self.body_rates)
        for r in range(3):
            p[:, r] = np.interp(times, self.t, self.p[:, r])
            v[:, r] = np.interp(times, self.t, self.v[:, r], right=0.0)
            a[:, r] = np.interp(times, self.t, self.a[:, r], right=0.0)
            j[:, r] = np.interp(times, self.t, self.j[:, r], right=0.0)
            w[:, r] = np.interp(times, self.t, self.body_rates[:, r], right=0.0)
        return UavTrajectory(times, p, v, a, j, w)


@dataclass(frozen=True)
class WorldState:
    """Privileged state of the system at time ``t`` (s)."""

    t: float
    load_p: np.ndarray  # (3,)
    load_q: np.ndarray  # (4,)
    load_v: np.ndarray  # (3,)
    load_omega: np.ndarray  # (3,) body
    uav_p: np.ndarray  # (n, 3)
    uav_q: np.ndarray  # (n, 4)
    uav_v: np.ndarray  # (n, 3)
    uav_omega: np.ndarray  # (n, 3) body
    rotor_speeds: np.ndarray  # (n, 4) rad/s
    cable_tension: np.ndarray  # (n,) N
    cable_dir: np.ndarray  # (n, 3) unit, from the load's attachment to the quadrotor's

    @property
    def n_uavs(self) -> int:
        return self.uav_p.shape[0]

    def is_finite(self) -> bool:
        return all(
            np.isfinite(np.asarray(getattr(self, f))).all()
            for f in ("t", "load_p", "load_q", "load_v", "load_omega", "uav_p", "uav_q", "uav_v", "uav_omega")
        )

    def local(self, i: int, load_attachment, uav_attachment) -> LocalObservation:
        """What quadrotor ``i`` may observe; attachments are rho_i (load frame) and r_i (body)."""
        if not 0 <= i < self.n_uavs:
            raise IndexError(f"uav index {i} out of range for {self.n_uavs} quadrotors")
        return LocalObservation.of(
            self.t,
            self.load_p,
            self.load_q,
            self.uav_p[i],
            self.uav_v[i],
            self.uav_q[i],
            self.uav_omega[i],
            load_attachment,
            uav_attachment,
        )


@dataclass(frozen=True)
class LocalObservation:
    """One quadrotor's own state and the load's pose, world frame; nothing about the others."""

    t: float
    load_p: np.ndarray
    load_q: np.ndarray
    uav_p: np.ndarray
    uav_v: np.ndarray
    uav_q: np.ndarray
    uav_omega: np.ndarray
    cable_load_end: np.ndarray
    cable_uav_end: np.ndarray

    @classmethod
    def of(
        cls, t, load_p, load_q, uav_p, uav_v, uav_q, uav_omega, load_attachment, uav_attachment
    ) -> LocalObservation:
        """From the load's pose and the quadrotor's own state; the cable's ends from the
        attachment points rho_i (load frame) and r_i (body frame)."""
        load_p, load_q, uav_p, uav_q = (np.array(x, dtype=float) for x in (load_p, load_q, uav_p, uav_q))
        return cls(
            t=float(t),
            load_p=load_p,
            load_q=load_q,
            uav_p=uav_p,
            uav_v=np.array(uav_v, dtype=float),
            uav_q=uav_q,
            uav_omega=np.array(uav_omega, dtype=float),
            cable_load_end=load_p + quat_to_matrix(load_q) @ np.asarray(load_attachment, dtype=float),
            cable_uav_end=uav_p + quat_to_matrix(uav_q) @ np.asarray(uav_attachment, dtype=float),
        )

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.t)) and all(
            np.isfinite(getattr(self, f)).all()
            for f in (
                "load_p",
                "load_q",
                "uav_p",
                "uav_v",
                "uav_q",
                "uav_omega",
                "cable_load_end",
                "cable_uav_end",
            )
        )


@dataclass(frozen=True)
class WorldSamples:
    """The system sampled over time: time first axis, world frame, body rates in body frames.

    Every backend records these (the simulator from its state, Gazebo and hardware from
    odometry and motion capture), and metrics, logs and replay read only these.
    """

    t: np.ndarray  # (k,) s
    load_p: np.ndarray  # (k, 3)
    load_q: np.ndarray  # (k, 4)
    load_v: np.ndarray  # (k, 3)
    load_omega: np.ndarray  # (k, 3)
    uav_p: np.ndarray  # (k, n, 3)
    uav_q: np.ndarray  # (k, n, 4)
    uav_v: np.ndarray  # (k, n, 3)
    uav_omega: np.ndarray  # (k, n, 3)
    rotor_speeds: np.ndarray  # (k, n, 4) rad/s
    cable_tension: np.ndarray  # (k, n) N

    FIELDS = (
        "t",
        "load_p",
        "load_q",
        "load_v",
        "load_omega",
        "uav_p",
        "uav_q",
        "uav_v",
        "uav_omega",
        "rotor_speeds",
        "cable_tension",
    )

    def __len__(self) -> int:
        return self.t.shape[0]

    @property
    def n_uavs(self) -> int:
        return self.uav_p.shape[1]

    @classmethod
    def concatenate(cls, parts: list[WorldSamples], n_uavs: int) -> WorldSamples:
        if not parts:
            return cls.empty(n_uavs)
        return cls(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in cls.FIELDS})

    @classmethod
    def empty(cls, n_uavs: int) -> WorldSamples:
        shapes = {
            "t": (0,),
            "load_p": (0, 3),
            "load_q": (0, 4),
            "load_v": (0, 3),
            "load_omega": (0, 3),
            "uav_p": (0, n_uavs, 3),
            "uav_q": (0, n_uavs, 4),
            "uav_v": (0, n_uavs, 3),
            "uav_omega": (0, n_uavs, 3),
            "rotor_speeds": (0, n_uavs, 4),
            "cable_tension": (0, n_uavs),
        }
        return cls(**{f: np.zeros(s) for f, s in shapes.items()})

    def until(self, t_end: float) -> WorldSamples:
        keep = self.t <= t_end
        return WorldSamples(**{f: getattr(self, f)[keep] for f in self.FIELDS})
