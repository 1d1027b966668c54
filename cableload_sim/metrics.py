"""Episode metrics, computed from recorded samples only (so logs give the same numbers).

All functions take arrays with time as the first axis. ``EpisodeMetrics`` accumulates the
standard metrics chunk by chunk in constant memory (running sums, minima, maxima and slack
runs), so an episode of any length is measured without keeping its samples;
``episode_metrics`` is the same on samples held whole.
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.params import SystemParams
from cableload_sim.physics.world import WorldSamples
from cableload_sim.rotations import quat_angle_between


def uav_distances(uav_p: np.ndarray) -> np.ndarray:
    """Smallest distance between any two quadrotors at each sample (k,), m."""
    diff = uav_p[:, :, None, :] - uav_p[:, None, :, :]
    dist = np.linalg.norm(diff, axis=-1)
    n = uav_p.shape[1]
    dist[:, np.arange(n), np.arange(n)] = np.inf
    return dist.min(axis=(1, 2))


def thrust_ratios(rotor_speeds: np.ndarray, system: SystemParams) -> np.ndarray:
    """Collective thrust over each quadrotor's maximum (k, n)."""
    kf = np.array([q.rotor.thrust_coeff for q in system.quadrotors])
    max_thrust = np.array([q.rotor.max_thrust() for q in system.quadrotors])
    return kf * np.sum(rotor_speeds**2, axis=-1) / max_thrust


def _longest_run(slack: np.ndarray, carried: int) -> tuple[int, int]:
    """Longest run of True in ``slack`` (k,) counting ``carried`` True before it, and the run
    still open at its end."""
    breaks = np.flatnonzero(~slack)
    if breaks.size == 0:
        run = carried + slack.size
        return run, run
    inner = int(np.max(np.diff(breaks) - 1)) if breaks.size > 1 else 0
    trailing = slack.size - 1 - int(breaks[-1])
    return max(carried + int(breaks[0]), inner, trailing), trailing


class EpisodeMetrics:
    """The standard metrics of an episode, the keys ``cableload simulate --json`` prints,
    accumulated from consecutive sample chunks (``update``) in constant memory.

    A NaN in the samples or the reference makes the metrics that use it NaN, as a mean, minimum
    or maximum of the whole would. ``longest_slack_s`` counts samples and multiplies by the
    mean sample spacing.
    """

    def __init__(self, system: SystemParams):
        self.system = system
        self.count = 0
        self._scored = 0
        self._position_sq = 0.0
        self._angle_sq = 0.0
        self._min_distance = math.inf
        self._max_thrust = -math.inf
        self._slack_samples = 0
        self._slack_run = np.zeros(system.n_uavs, dtype=np.int64)
        self._longest_slack = 0
        self._t_first = math.nan
        self._t_last = math.nan

    def update(
        self, samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray, scored: np.ndarray | None = None
    ) -> None:
        """Add ``samples`` (k samples) with the load reference at the same times (k, 3), (k, 4).
        ``scored`` (k,) bool: the samples the tracking errors (RMSE) are taken over (None:
        all), e.g. a flight from the ground's airborne ones."""
        k = len(samples)
        if k == 0:
            return
        if samples.n_uavs != self.system.n_uavs:
            raise ValueError(f"samples: {samples.n_uavs} quadrotors, the system has {self.system.n_uavs}")
        keep: slice | np.ndarray = slice(None)
        if scored is not None:
            keep = np.asarray(scored, dtype=bool)
            self._scored += int(np.count_nonzero(keep))
        else:
            self._scored += k
        self._position_sq += float(np.sum((samples.load_p[keep] - ref_p[keep]) ** 2))
        self._angle_sq += float(np.sum(quat_angle_between(samples.load_q[keep], ref_q[keep]) ** 2))
        self._min_distance = float(np.min([self._min_distance, uav_distances(samples.uav_p).min()]))
        self._max_thrust = float(
            np.max([self._max_thrust, thrust_ratios(samples.rotor_speeds, self.system).max()])
        )
        slack = samples.cable_tension <= 0.0
        self._slack_samples += int(np.count_nonzero(np.any(slack, axis=1)))
        for cable in range(slack.shape[1]):
            longest, self._slack_run[cable] = _longest_run(slack[:, cable], int(self._slack_run[cable]))
            self._longest_slack = max(self._longest_slack, longest)
        if self.count == 0:
            self._t_first = float(samples.t[0])
        self._t_last = float(samples.t[-1])
        self.count += k

    def result(self) -> dict:
        count = self.count
        if count == 0:
            nan = float("nan")
            return {
                "rmse_position_m": nan,
                "rmse_orientation_deg": nan,
                "min_uav_distance_m": nan,
                "slack_fraction": nan,
                "longest_slack_s": 0.0,
                "max_thrust_ratio": nan,
                "sim_time_s": 0.0,
            }
        spacing = (self._t_last - self._t_first) / (count - 1) if count > 1 else 0.0
        return {
            "rmse_position_m": math.sqrt(self._position_sq / max(self._scored, 1)),
            "rmse_orientation_deg": math.degrees(math.sqrt(self._angle_sq / max(self._scored, 1))),
            "min_uav_distance_m": self._min_distance,
            "slack_fraction": self._slack_samples / count,
            "longest_slack_s": self._longest_slack * spacing,
            "max_thrust_ratio": self._max_thrust,
            "sim_time_s": self._t_last,
        }


def episode_metrics(
    samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray, system: SystemParams
) -> dict:
    """The standard metrics of an episode held whole (see ``EpisodeMetrics``)."""
    metrics = EpisodeMetrics(system)
    metrics.update(samples, ref_p, ref_q)
    return metrics.result()


def plan_derivative_mae_axes(t: np.ndarray, p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per axis (3,), the mean absolute difference between the numerical derivative of a
    planned position and the planned velocity (m/s), the paper's Table 3 metric. ``t`` (k,)
    node times, ``p``, ``v`` (k, 3); central differences at the interior nodes of the
    (non-uniform) grid."""
    t = np.asarray(t, dtype=float)
    if t.size < 3:
        raise ValueError(f"plan_derivative_mae: need at least 3 nodes, got {t.size}")
    numerical = (p[2:] - p[:-2]) / (t[2:] - t[:-2])[:, None]
    return np.mean(np.abs(numerical - v[1:-1]), axis=0)


def plan_derivative_mae(t: np.ndarray, p: np.ndarray, v: np.ndarray) -> float:
    """The mean over the axes of ``plan_derivative_mae_axes`` (m/s): the paper's "overall"."""
    return float(np.mean(plan_derivative_mae_axes(t, p, v)))
