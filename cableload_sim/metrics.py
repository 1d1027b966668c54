"""Episode metrics, computed from recorded samples only (so logs give the same numbers).

All functions take arrays with time as the first axis.
"""

from __future__ import annotations

import numpy as np

from cableload_sim.params import SystemParams
from cableload_sim.rotations import quat_angle_between
from cableload_sim.world import WorldSamples


def rmse_position(load_p: np.ndarray, ref_p: np.ndarray) -> float:
    """Root mean square of the load's position error (m)."""
    if len(load_p) == 0:
        return float("nan")
    return float(np.sqrt(np.mean(np.sum((load_p - ref_p) ** 2, axis=-1))))


def rmse_orientation_deg(load_q: np.ndarray, ref_q: np.ndarray) -> float:
    """Root mean square of the geodesic angle between load and reference attitudes (deg)."""
    if len(load_q) == 0:
        return float("nan")
    return float(np.degrees(np.sqrt(np.mean(quat_angle_between(load_q, ref_q) ** 2))))


def uav_distances(uav_p: np.ndarray) -> np.ndarray:
    """Smallest distance between any two quadrotors at each sample (k,), m."""
    diff = uav_p[:, :, None, :] - uav_p[:, None, :, :]
    dist = np.linalg.norm(diff, axis=-1)
    n = uav_p.shape[1]
    dist[:, np.arange(n), np.arange(n)] = np.inf
    return dist.min(axis=(1, 2))


def slack_fraction(tension: np.ndarray) -> float:
    """Fraction of samples at which at least one cable is slack (zero tension)."""
    if len(tension) == 0:
        return float("nan")
    return float(np.mean(np.any(tension <= 0.0, axis=1)))


def longest_slack_s(t: np.ndarray, tension: np.ndarray) -> float:
    """Longest run of consecutive samples with one cable slack, as a duration (s)."""
    if len(t) < 2:
        return 0.0
    dt = float(np.median(np.diff(t)))
    longest = 0
    for cable in (tension <= 0.0).T:
        run = 0
        for slack in cable:
            run = run + 1 if slack else 0
            longest = max(longest, run)
    return longest * dt


def thrust_ratios(rotor_speeds: np.ndarray, system: SystemParams) -> np.ndarray:
    """Collective thrust over each quadrotor's maximum (k, n)."""
    kf = np.array([q.rotor.thrust_coeff for q in system.quadrotors])
    max_thrust = np.array([q.rotor.max_thrust() for q in system.quadrotors])
    return kf * np.sum(rotor_speeds**2, axis=-1) / max_thrust


def episode_metrics(samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray,
                    system: SystemParams) -> dict:
    """The standard metrics of an episode: the keys ``cableload simulate --json`` prints."""
    return {
        "rmse_position_m": rmse_position(samples.load_p, ref_p),
        "rmse_orientation_deg": rmse_orientation_deg(samples.load_q, ref_q),
        "min_uav_distance_m": float(uav_distances(samples.uav_p).min()) if len(samples) else
        float("nan"),
        "slack_fraction": slack_fraction(samples.cable_tension),
        "longest_slack_s": longest_slack_s(samples.t, samples.cable_tension),
        "max_thrust_ratio": float(thrust_ratios(samples.rotor_speeds, system).max()) if len(samples)
        else float("nan"),
        "sim_time_s": float(samples.t[-1]) if len(samples) else 0.0,
    }


def plan_derivative_mae(t: np.ndarray, p: np.ndarray, v: np.ndarray) -> float:
    """Mean absolute difference between the numerical derivative of a planned position and
    the planned velocity (m/s), the paper's Table 3 metric. ``t`` (k,) node times, ``p``, ``v``
    (k, 3); central differences at the interior nodes of the (non-uniform) grid."""
    t = np.asarray(t, dtype=float)
    if t.size < 3:
        raise ValueError(f"plan_derivative_mae: need at least 3 nodes, got {t.size}")
    numerical = (p[2:] - p[:-2]) / (t[2:] - t[:-2])[:, None]
    return float(np.mean(np.abs(numerical - v[1:-1])))
