"""What lies between the world and the planners: the link (``[link]``), motion capture and
the planners' filters (``[sensing]``), the quadrotors' IMU (``[imu]``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.horizon import HORIZON_S
from cableload_sim.params.control import ControllerParams, SimulationParams, _whole_steps


@dataclass(frozen=True)
class LinkParams:
    """The radio link from the planners to the quadrotors: each plan is lost, or arrives late.

    Every plan is dropped with probability ``drop_fraction``, independently of the others;
    the rest arrive after a delay drawn uniformly in [``delay_min_s``, ``delay_max_s``], in the
    order they were sent (ROS1's TCP transport keeps the order). Off unless ``enabled``.
    """

    enabled: bool = False
    """Whether plans go through this link; off, every plan arrives when it is sent."""
    drop_fraction: float = 0.2
    """Probability that a plan is lost (-), in [0, 1)."""
    delay_min_s: float = 0.0
    """Shortest delay of a plan that arrives (s)."""
    delay_max_s: float = 0.03
    """Longest delay of a plan that arrives (s); below the plan's horizon."""


@dataclass(frozen=True)
class SensingParams:
    """What the planners observe: motion capture of every body, filtered by an EKF per body.

    Each capture gives every body's pose with a constant bias (drawn per body and per episode)
    plus white noise, and reaches the filter ``latency_s`` after it was taken. The filter of
    each body is a constant-acceleration Kalman filter of its position (white jerk) and an
    error-state EKF of its attitude with constant body rates (white angular acceleration);
    planners get its estimate predicted to their time. Off
    unless ``enabled`` (planners then see the true state).
    """

    enabled: bool = False
    """Whether planners observe through the sensors; off, they see the true state."""
    mocap_rate_hz: float = 100.0
    """Motion-capture rate (Hz); a whole number of physics steps per capture."""
    latency_s: float = 0.005
    """From a capture to its use by the filter (s): processing and transport."""
    position_noise_m: float = 0.0005
    """Standard deviation of the white position noise, per axis (m)."""
    attitude_noise_rad: float = 0.003
    """Standard deviation of the white attitude noise, a small rotation per body axis (rad)."""
    position_bias_m: float = 0.001
    """Standard deviation of each body's constant position bias, per axis (m)."""
    attitude_bias_rad: float = 0.005
    """Standard deviation of each body's constant attitude bias, per body axis (rad)."""
    load_jerk_psd: float = 0.3
    """Spectral density of the load's white jerk in its filter's model (m^2/s^5)."""
    load_angular_accel_psd: float = 0.003
    """Spectral density of the load's white angular acceleration in its filter (rad^2/s^3)."""
    uav_jerk_psd: float = 1.0
    """Spectral density of a quadrotor's white jerk in its filter (m^2/s^5)."""
    uav_angular_accel_psd: float = 0.03
    """Spectral density of a quadrotor's white angular acceleration in its filter (rad^2/s^3)."""


@dataclass(frozen=True)
class ImuParams:
    """Each quadrotor's inertial sensors and the onboard state estimate its controller flies
    on (``cableload_sim.physics.kernels.onboard``).

    The gyroscope measures the body rates, the accelerometer the specific force (body frame),
    each with a constant bias (drawn per quadrotor and flight) plus white noise, read at every
    controller update. The estimate integrates them and is corrected by the quadrotor's own
    motion-capture pose (the rate, latency, noise and biases of ``[sensing]``): a third-order
    observer of position, velocity and accelerometer bias, and a complementary filter of
    attitude and gyroscope bias, each with all its poles at its bandwidth. Off unless
    ``enabled`` (the controllers then fly on the true state).
    """

    enabled: bool = False
    """Whether the onboard controllers fly on the estimate; off, on the true state."""
    gyro_noise_density: float = 0.0007
    """White gyroscope noise (rad/s/sqrt(Hz)); per reading, divided by sqrt(update period)."""
    gyro_bias: float = 0.005
    """Standard deviation of each gyroscope axis's constant bias (rad/s)."""
    accel_noise_density: float = 0.016
    """White accelerometer noise (m/s^2/sqrt(Hz))."""
    accel_bias: float = 0.05
    """Standard deviation of each accelerometer axis's constant bias (m/s^2)."""
    position_bandwidth: float = 4.0
    """Poles of the position, velocity and accelerometer-bias observer (rad/s)."""
    attitude_bandwidth: float = 2.0
    """Poles of the attitude and gyroscope-bias filter (rad/s)."""


def _link(path: str, table: dict) -> LinkParams:
    fields = {
        "enabled": checks.boolean,
        "drop_fraction": checks.non_negative,
        "delay_min_s": checks.non_negative,
        "delay_max_s": checks.non_negative,
    }
    link = checks.build(LinkParams, path, table, fields)
    if link.drop_fraction >= 1.0:
        raise ConfigError(
            f"{path}.drop_fraction: expected a fraction below 1 (1 loses every "
            f"plan), got {link.drop_fraction!r}"
        )
    if link.delay_min_s > link.delay_max_s:
        raise ConfigError(
            f"{path}.delay_min_s: expected at most delay_max_s="
            f"{link.delay_max_s!r} s, got {link.delay_min_s!r}"
        )
    horizon = HORIZON_S
    if link.delay_max_s >= horizon:
        raise ConfigError(
            f"{path}.delay_max_s: expected below the plan's horizon "
            f"({horizon:.2f} s: a later plan has run out on arrival), got "
            f"{link.delay_max_s!r}"
        )
    return link


def _sensing(path: str, table: dict) -> SensingParams:
    fields = {f.name: checks.non_negative for f in dataclasses.fields(SensingParams)}
    fields["enabled"] = checks.boolean
    for name in (
        "mocap_rate_hz",
        "load_jerk_psd",
        "load_angular_accel_psd",
        "uav_jerk_psd",
        "uav_angular_accel_psd",
    ):
        fields[name] = checks.positive
    sensing = checks.build(SensingParams, path, table, fields)
    if sensing.latency_s > 0.5:
        raise ConfigError(
            f"{path}.latency_s: expected at most 0.5 s (motion capture takes a "
            f"few ms), got {sensing.latency_s!r}"
        )
    for name in ("attitude_noise_rad", "attitude_bias_rad"):
        if getattr(sensing, name) > 0.5:
            raise ConfigError(
                f"{path}.{name}: expected at most 0.5 rad (the filter linearizes "
                f"small rotations), got {getattr(sensing, name)!r}"
            )
    return sensing


def _imu(path: str, table: dict) -> ImuParams:
    fields = {f.name: checks.non_negative for f in dataclasses.fields(ImuParams)}
    fields["enabled"] = checks.boolean
    for name in ("position_bandwidth", "attitude_bandwidth"):
        fields[name] = checks.positive
    return checks.build(ImuParams, path, table, fields)


def _check_imu(
    source: str, imu: ImuParams, sensing: SensingParams, sim: SimulationParams, controller: ControllerParams
) -> None:
    """The onboard estimate's captures fall on controller updates, its corrections stay
    stable, and no more captures wait at once than it holds (checked when on)."""
    if not imu.enabled:
        return
    update_s = 1.0 / controller.rate_hz
    every = 1.0 / (sensing.mocap_rate_hz * update_s)
    if round(every) < 1 or abs(every - round(every)) > 1e-6:
        raise ConfigError(
            f"{source}:sensing.mocap_rate_hz: with imu.enabled, expected a whole fraction of "
            f"controller.rate_hz={controller.rate_hz!r} Hz (a capture at a controller update), "
            f"got {sensing.mocap_rate_hz!r}"
        )
    period = round(every) * update_s
    fastest = max(imu.position_bandwidth, imu.attitude_bandwidth)
    if 3.0 * fastest * period > 0.5:
        raise ConfigError(
            f"{source}:imu: expected bandwidths below {0.5 / (3.0 * period):.3g} rad/s at "
            f"{sensing.mocap_rate_hz!r} Hz captures (each correction at most half the error), "
            f"got position_bandwidth={imu.position_bandwidth!r}, "
            f"attitude_bandwidth={imu.attitude_bandwidth!r}"
        )
    waiting = math.ceil(sensing.latency_s / period) + 1
    if waiting > IMU_PENDING_CAPTURES:
        raise ConfigError(
            f"{source}:sensing.latency_s: with imu.enabled, expected at most "
            f"{(IMU_PENDING_CAPTURES - 1) * period!r} s ({IMU_PENDING_CAPTURES} captures "
            f"in flight), got {sensing.latency_s!r}"
        )


IMU_PENDING_CAPTURES = 4
"""Captures the onboard estimate holds while they are in flight (``layout.CS_EST_PENDING``)."""


def _check_sensing_rate(source: str, sensing: SensingParams, sim: SimulationParams) -> None:
    """Captures fall on physics steps, at least one per planner period (checked when on)."""
    if not sensing.enabled:
        return
    _whole_steps(f"{source}:sensing.mocap_rate_hz", sensing.mocap_rate_hz, sim.physics_dt)
    if sensing.mocap_rate_hz < sim.planner_rate_hz:
        raise ConfigError(
            f"{source}:sensing.mocap_rate_hz: expected at least simulation.planner_rate_hz="
            f"{sim.planner_rate_hz!r} Hz (a capture every planner period), got "
            f"{sensing.mocap_rate_hz!r}"
        )
