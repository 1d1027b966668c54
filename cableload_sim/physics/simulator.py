"""The stateful shell around the numba kernels: one simulated multi-lift system.

``Simulator`` owns the flat arrays (state, controller states, plan buffers, statistics) and
calls ``kernels.advance``; it holds no physics of its own. Planners are told ``config.system``;
the simulator flies ``config.mismatch.apply(config.system)``, and the onboard controllers know
only the nominal quadrotor parameters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from cableload_sim.horizon import N_NODES
from cableload_sim.params import Config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.feasibility import check_hover
from cableload_sim.physics.statics import hover_geometry, hover_state
from cableload_sim.physics.wind import WindField
from cableload_sim.physics.world import UavTrajectory, WorldState
from cableload_sim.rotations import quat_to_matrix


@dataclass(frozen=True)
class StepLog:
    """Samples recorded during one ``Simulator.advance``: time first axis."""

    t: np.ndarray  # (k,)
    x: np.ndarray  # (k, state size)
    tension: np.ndarray  # (k, n)


@dataclass(frozen=True)
class SimulatorStats:
    """Accumulated since the last reset."""

    sim_time_s: float
    slack_fraction: float
    longest_slack_s: float
    max_thrust_ratio: float
    min_uav_distance_m: float
    rejected_plans: np.ndarray  # (n,)
    hold_updates: np.ndarray  # (n,) controller updates spent holding hover


IMU_STREAM = 3
"""Distinguishes the onboard sensors' random stream from the episode's other ones (link: 1,
planners' sensors: 2)."""

ONBOARD_SIZE = layout.CS_EST_READY - layout.CS_IMU_SEED
"""A flight's onboard sensor calibration in the controller state: seed, gyroscope and
accelerometer biases, motion-capture position and attitude biases."""


class Simulator:
    """One load-cable-quadrotor system with its onboard controllers, stepped by numba kernels."""

    def __init__(self, config: Config, rng: np.random.Generator | None = None):
        """``rng`` draws the wind's turbulence (default: seeded with ``config.wind.seed``)."""
        check_hover(config)
        self.config = config
        self.nominal = config.system
        self.simulated = config.mismatch.apply(config.system)
        self.n = self.nominal.n_uavs
        sim = config.simulation
        self.h = sim.physics_dt
        self.decimation = layout.controller_decimation(config.controller, sim)
        self.model = layout.pack_model(
            self.simulated, config.aero, config.ball, config.battery, config.ground
        )
        self.state_len = layout.state_size(self.n, config.ball.enabled, config.battery.enabled)
        layout.pack_imu(self.model, config.imu, config.sensing, self.decimation * self.h)
        self.cmodel = layout.pack_model(self.nominal, ground=config.ground)
        self.gains = layout.pack_gains(config.controller, sim, self.nominal)
        self.log_every = max(1, round(1.0 / (sim.log_rate_hz * self.h)))
        self.x = np.zeros(self.state_len)
        self.step = 0
        self._zero_wrench = np.zeros((1, 6))
        self.wind = WindField(config.wind, np.random.default_rng(config.wind.seed) if rng is None else rng)
        self._onboard = np.zeros((self.n, ONBOARD_SIZE))
        self.reset(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))
        self.seed_onboard(0)

    @property
    def time(self) -> float:
        return self.step * self.h

    def reset(self, load_p, load_q) -> None:
        """All bodies at rest in hover equilibrium around the load pose (the box's centre);
        controllers fresh; a new realization of the wind's turbulence. A load whose centre of
        mass is off its box centre (``[mismatch] load_com_offset``) starts in the hover of the
        load without the offset, from which it tilts."""
        self.wind.restart()
        level = self.config.mismatch.without_com_offset().apply(self.nominal)
        ball = self.config.ball
        if ball.enabled:  # the load's hover carrying the ball, at rest on the floor's centre
            level = dataclasses.replace(
                level, load=dataclasses.replace(level.load, mass=level.load.mass + ball.mass)
            )
        hover = hover_state(level, load_p, load_q, hover_geometry(level))
        x = np.zeros(self.state_len)
        R_L = quat_to_matrix(hover.load_q)
        box = np.asarray(self.simulated.load.box_centre)
        x[layout.LOAD_POS : layout.LOAD_POS + 3] = hover.load_p - R_L @ box
        if ball.enabled:
            o = layout.ball_offset(self.n)
            rest = (
                ball.radius
                - 0.5 * self.simulated.load.size[2]
                - ball.mass * self.simulated.gravity / ball.stiffness
            )
            x[o + layout.BALL_POS : o + layout.BALL_POS + 3] = hover.load_p + R_L @ [0, 0, rest]
        if self.config.battery.enabled:
            battery = self.config.battery
            for i in range(self.n):
                o = layout.battery_offset(self.n, int(ball.enabled), i)
                x[o + layout.BATT_SOC] = battery.initial_charge
                x[o + layout.BATT_VOLTAGE] = battery.open_circuit_voltage(battery.initial_charge)
        x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4] = hover.load_q
        for i in range(self.n):
            o = layout.quad_offset(i)
            x[o + layout.QUAD_POS : o + layout.QUAD_POS + 3] = hover.uav_p[i]
            x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = hover.uav_q[i]
            x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = hover.rotor_speeds[i]
        self.set_state(x)
        for i in range(self.n):
            self.ctrl[i, layout.CS_ROTOR_CMD : layout.CS_ROTOR_CMD + 4] = hover.rotor_speeds[i]

    def reset_on_ground(self, load_p, load_q) -> None:
        """The load at rest on the ground below ``load_p`` (level, the heading of ``load_q``),
        each quadrotor idling on the ground below its hover slot, cables slack
        (``cableload_sim.physics.ground.resting_state``); controllers fresh."""
        from cableload_sim.physics.ground import resting_state

        self.reset(load_p, load_q)
        self.set_state(resting_state(self.config, self.simulated, self.x, load_p, load_q))

    def set_state(self, x: np.ndarray, step: int = 0) -> None:
        """Replace the physical state; controllers, plans and statistics start afresh."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.state_len,) or not np.isfinite(x).all():
            raise ValueError(f"state: expected {self.state_len} finite values, got shape {x.shape}")
        self.x = x.copy()
        self.step = int(step)
        self.ctrl = np.zeros((self.n, layout.CS_SIZE))
        self.ctrl[:, layout.CS_IMU_SEED : layout.CS_IMU_SEED + ONBOARD_SIZE] = self._onboard
        for i in range(self.n):
            o = layout.quad_offset(i) + layout.QUAD_ROTOR
            self.ctrl[i, layout.CS_ROTOR_CMD : layout.CS_ROTOR_CMD + 4] = self.x[o : o + 4]
        self.plans, self.plan_status = layout.empty_plans(self.n)
        self.counters = np.zeros((self.n, layout.K_SIZE))
        self.stats = layout.new_stats(self.n)
        self.fcache, self.fvalid = layout.empty_force_cache(self.n)

    def seed_onboard(
        self, seed: int, position_bias: np.ndarray | None = None, attitude_bias: np.ndarray | None = None
    ) -> None:
        """A new flight's onboard sensors (``[imu]``, used when enabled): noise seeds and
        IMU biases drawn from ``seed`` in a stream of their own (``IMU_STREAM``), and the
        motion capture's bias for each quadrotor, ``position_bias`` (n, 3) (m) and
        ``attitude_bias`` (n, 3) (rad), when the planners' sensors drew them (the same
        cameras), else drawn here from ``[sensing]``. Kept through ``set_state``; the estimates
        restart."""
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), IMU_STREAM]))
        imu = self.config.imu
        sensing = self.config.sensing
        cal = np.zeros((self.n, ONBOARD_SIZE))
        cal[:, 0] = rng.integers(0, 2**52, size=self.n)
        cal[:, 1:4] = rng.normal(0.0, imu.gyro_bias, size=(self.n, 3))
        cal[:, 4:7] = rng.normal(0.0, imu.accel_bias, size=(self.n, 3))
        cal[:, 7:10] = rng.normal(0.0, sensing.position_bias_m, size=(self.n, 3))
        cal[:, 10:13] = rng.normal(0.0, sensing.attitude_bias_rad, size=(self.n, 3))
        for k, given in ((7, position_bias), (10, attitude_bias)):
            if given is not None:
                given = np.asarray(given, dtype=float)
                if given.shape != (self.n, 3) or not np.isfinite(given).all():
                    raise ValueError(
                        f"motion-capture bias: expected {self.n} x 3 finite values, got shape {given.shape}"
                    )
                cal[:, k : k + 3] = given
        self._onboard = cal
        self.ctrl[:, layout.CS_IMU_SEED : layout.CS_IMU_SEED + ONBOARD_SIZE] = cal
        self.ctrl[:, layout.CS_EST_READY] = 0.0

    def send_plan(self, i: int, plan: UavTrajectory) -> None:
        """Deliver a plan to quadrotor ``i``'s controller; it checks it at its next update."""
        if plan.n_nodes != N_NODES:
            raise ValueError(f"plan for uav {i}: expected {N_NODES} nodes, got {plan.n_nodes}")
        buf = self.plans[i]
        buf[:, layout.TR_TIME] = plan.t
        buf[:, layout.TR_POS : layout.TR_POS + 3] = plan.p
        buf[:, layout.TR_VEL : layout.TR_VEL + 3] = plan.v
        buf[:, layout.TR_ACC : layout.TR_ACC + 3] = plan.a
        buf[:, layout.TR_JERK : layout.TR_JERK + 3] = plan.j
        buf[:, layout.TR_RATE : layout.TR_RATE + 3] = plan.body_rates
        self.plan_status[i] = layout.PLAN_NEW

    def advance(self, n_steps: int, wrench: np.ndarray | None = None, log: bool = True) -> StepLog:
        """Step the physics ``n_steps`` times; ``wrench`` (n_steps or 1, 6): load force and
        torque held during each step, world frame."""
        wrench = self._zero_wrench if wrench is None else np.asarray(wrench, dtype=float)
        if wrench.ndim != 2 or wrench.shape[1] != 6 or wrench.shape[0] < 1:
            raise ValueError(f"wrench: expected shape (steps, 6), got {wrench.shape}")
        rows = (self.step + n_steps) // self.log_every - self.step // self.log_every if log else 0
        log_x = np.empty((rows, self.x.size))
        log_tension = np.empty((rows, self.n))
        self.wind.cover((self.step + n_steps) * self.h)
        written = kernels.advance(
            self.kernel_model(),
            self.kernel_data(),
            self.step,
            n_steps,
            wrench,
            layout.SimLog(self.log_every if log else 0, log_x, log_tension),
        )
        first = (self.step // self.log_every + 1) * self.log_every
        t = (first + self.log_every * np.arange(written)) * self.h
        self.step += n_steps
        return StepLog(t=t, x=log_x[:written], tension=log_tension[:written])

    def kernel_model(self) -> layout.SimModel:
        """The constant model the kernels step (arrays shared with this simulator)."""
        return layout.SimModel(
            physics=self.model,
            nominal=self.cmodel,
            gains=self.gains,
            n=self.n,
            h=self.h,
            decimation=self.decimation,
            wind=self.wind.samples,
            wind_dt=self.wind.dt,
        )

    def kernel_data(self) -> layout.SimData:
        """The data the kernels change in place (this simulator's own arrays)."""
        return layout.SimData(
            x=self.x,
            ctrl=self.ctrl,
            plans=self.plans,
            plan_status=self.plan_status,
            counters=self.counters,
            stats=self.stats,
            fcache=self.fcache,
            fvalid=self.fvalid,
        )

    def world_state(self) -> WorldState:
        return world_state_from(self.x, self.model, self.n, self.time)

    def onboard_estimate(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Each quadrotor's onboard state estimate as of its controller's last update:
        position (n, 3), attitude (n, 4) and world velocity (n, 3); None without ``[imu]`` or
        before the first update."""
        if not self.config.imu.enabled or not np.all(self.ctrl[:, layout.CS_EST_READY] > 0.0):
            return None
        c = self.ctrl
        return (
            c[:, layout.CS_EST_POS : layout.CS_EST_POS + 3].copy(),
            c[:, layout.CS_EST_QUAT : layout.CS_EST_QUAT + 4].copy(),
            c[:, layout.CS_EST_VEL : layout.CS_EST_VEL + 3].copy(),
        )

    def statistics(self) -> SimulatorStats:
        st = self.stats
        steps = max(st[layout.ST_STEPS], 1.0)
        return SimulatorStats(
            sim_time_s=st[layout.ST_STEPS] * self.h,
            slack_fraction=st[layout.ST_SLACK_ANY] / steps,
            longest_slack_s=st[layout.ST_LONGEST_SLACK],
            max_thrust_ratio=st[layout.ST_MAX_THRUST_RATIO],
            min_uav_distance_m=float(np.sqrt(st[layout.ST_MIN_UAV_DIST_SQ])),
            rejected_plans=self.counters[:, layout.K_REJECTED_PLANS].copy(),
            hold_updates=self.counters[:, layout.K_HOLD_UPDATES].copy(),
        )

    def controller_modes(self) -> np.ndarray:
        """Each controller's mode (``layout.MODE_*``) at its last update."""
        return self.ctrl[:, layout.CS_MODE].copy()


def world_state_from(x: np.ndarray, model: np.ndarray, n: int, t: float) -> WorldState:
    """Unpack a flat state into a ``WorldState`` (cable tensions from the model). The load's
    position and velocity are its box centre's, as motion capture tracks it (the state's are
    its centre of mass's, the same unless ``[mismatch] load_com_offset`` sets it off)."""
    tension = np.empty(n)
    direction = np.empty((n, 3))
    kernels.cable_tensions(x, model, n, tension, direction)
    quads = np.stack([x[layout.quad_offset(i) : layout.quad_offset(i) + layout.QUAD_SIZE] for i in range(n)])
    box = model[layout.M_LOAD_BOX_CENTRE : layout.M_LOAD_BOX_CENTRE + 3]
    load_p = x[layout.LOAD_POS : layout.LOAD_POS + 3].copy()
    load_v = x[layout.LOAD_VEL : layout.LOAD_VEL + 3].copy()
    if box.any():
        R = quat_to_matrix(x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4])
        load_p += R @ box
        load_v += R @ np.cross(x[layout.LOAD_RATE : layout.LOAD_RATE + 3], box)
    return WorldState(
        t=float(t),
        load_p=load_p,
        load_q=x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4].copy(),
        load_v=load_v,
        load_omega=x[layout.LOAD_RATE : layout.LOAD_RATE + 3].copy(),
        uav_p=quads[:, layout.QUAD_POS : layout.QUAD_POS + 3].copy(),
        uav_q=quads[:, layout.QUAD_QUAT : layout.QUAD_QUAT + 4].copy(),
        uav_v=quads[:, layout.QUAD_VEL : layout.QUAD_VEL + 3].copy(),
        uav_omega=quads[:, layout.QUAD_RATE : layout.QUAD_RATE + 3].copy(),
        rotor_speeds=quads[:, layout.QUAD_ROTOR : layout.QUAD_ROTOR + 4].copy(),
        cable_tension=tension,
        cable_dir=direction,
    )
