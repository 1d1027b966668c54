"""The embedded backend: the numba simulator with the onboard controllers inside (default).

With ``config.link`` on, each plan goes through its quadrotor's ``LinkModel``: it is lost, or
handed to the controller at its arrival time, the physics stepped up to that step and no
further first (the controller takes it at its next update, never before it arrived). With
``config.sensing`` on, the poses are captured at the motion-capture rate inside the stepping
and ``observe`` gives the filters' estimate; the samples (logs, metrics) stay the true state.

The safety module's actions (``command``) reach the controllers at once, as a pilot's commands
would: ``hover`` holds each quadrotor where it is, ``land`` descends it at the pilot's landing
speed. The simulator does not model motors switched off: ``off`` holds the quadrotor too (the
episode ends there all the same).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

import numpy as np

from backends.base import BackendHealth, Scenario
from backends.pilot import descent, hold
from cableload_sim.errors import UsageError
from cableload_sim.horizon import N_NODES
from cableload_sim.params import Config
from cableload_sim.physics import layout
from cableload_sim.physics.link import InFlight, LinkStats, make_links
from cableload_sim.physics.sensing import Sensors
from cableload_sim.physics.simulator import Simulator, StepLog, world_state_from
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState

if TYPE_CHECKING:
    from cableload_sim.physics.disturbances import WrenchProcess

ARRIVAL_TOLERANCE_STEPS = 1e-6
"""A plan arriving within this fraction of a physics step after a step's start is taken at
that step: the rounding of ``t_sent + delay``, not a delay."""


class EmbeddedBackend:
    """Backend over ``cableload_sim.Simulator``; one ``advance`` is one planner period."""

    name = "embedded"
    deterministic = True
    """Same scenario, same samples, bit for bit."""

    def __init__(self, config: Config):
        self.config = config
        self.system = config.system
        self.sim = Simulator(config)
        rate = config.simulation.planner_rate_hz
        steps = 1.0 / (rate * self.sim.h)
        self.steps_per_period = round(steps)
        if abs(steps - self.steps_per_period) > 1e-6:
            raise UsageError(
                f"simulation.planner_rate_hz={rate!r} is not a whole fraction of the physics "
                f"rate 1/{self.sim.h!r} Hz"
            )
        self.planner_period_s = self.steps_per_period * self.sim.h
        self.capture_every = round(1.0 / (config.sensing.mocap_rate_hz * self.sim.h))
        self._disturbance: WrenchProcess | None = None
        self.links = make_links(config.link, self.sim.n, 0)
        self.in_flight = InFlight()
        self.sensors: Sensors | None = None
        self._delivered = np.zeros(self.sim.n)
        """When a plan last reached each quadrotor's controller (s)."""

    @property
    def time(self) -> float:
        return self.sim.time

    def reset(self, scenario: Scenario) -> WorldState:
        if scenario.on_ground:
            self.sim.reset_on_ground(scenario.load_p, scenario.load_q)
        else:
            self.sim.reset(scenario.load_p, scenario.load_q)
        rng = np.random.default_rng(scenario.seed)
        self._disturbance = scenario.disturbance.episode(rng) if scenario.disturbance is not None else None
        self.links = make_links(self.config.link, self.sim.n, scenario.seed)
        self.in_flight.clear()
        self._delivered[:] = self.time
        self.sensors = None
        if self.config.sensing.enabled:
            self.sensors = Sensors.for_episode(self.config.sensing, self.system, scenario.seed)
            self.sensors.start(self.time, *self._poses())
            # the quadrotors fuse the same cameras' poses onboard: the same biases
            mocap = self.sensors.mocap
            self.sim.seed_onboard(scenario.seed, mocap.position_bias[1:], mocap.attitude_bias[1:])
        else:
            self.sim.seed_onboard(scenario.seed)
        return self.observe()

    def observe(self) -> WorldState:
        """The state the planners observe: the true one, or the sensors' estimate."""
        truth = self.sim.world_state()
        return truth if self.sensors is None else self.sensors.observe(truth)

    def onboard_estimate(self):
        """Each quadrotor's onboard estimate (``Simulator.onboard_estimate``), or None."""
        return self.sim.onboard_estimate()

    def send(self, uav: int, trajectory: UavTrajectory) -> None:
        """Hand ``trajectory`` to quadrotor ``uav``'s link: it arrives now (link off), later, or
        never."""
        if not 0 <= uav < self.sim.n:
            raise IndexError(f"uav index {uav} out of range for {self.sim.n} quadrotors")
        if not self.config.link.enabled:
            self.sim.send_plan(uav, trajectory)
            self._delivered[uav] = self.time
            return
        if trajectory.n_nodes != N_NODES:  # refused when sent, as without the link
            raise ValueError(f"plan for uav {uav}: expected {N_NODES} nodes, got {trajectory.n_nodes}")
        arrival = self.links[uav].transmit(self.time)
        if arrival is not None:
            self.in_flight.put(arrival, uav, trajectory)

    def advance(self) -> WorldSamples:
        """One planner period, stepped in pieces that end where a plan arrives or the motion
        capture takes a sample (splitting changes no bit of the physics)."""
        wrench = None
        if self._disturbance is not None:
            wrench = self._disturbance.next(self.steps_per_period)
        start = self.sim.step
        end = start + self.steps_per_period
        logs = []
        while True:
            self._deliver()
            if self.sim.step >= end:
                break
            # a step number: the others may be inf (nothing to wait for), end is not
            stop = cast(int, min(end, self._next_arrival_step(), self._next_capture_step()))
            held = None if wrench is None else wrench[self.sim.step - start : stop - start]
            logs.append(self.sim.advance(stop - self.sim.step, wrench=held))
            if self.sensors is not None and self.sim.step % self.capture_every == 0:
                self.sensors.capture(self.time, *self._poses())
        log = (
            logs[0]
            if len(logs) == 1
            else StepLog(
                t=np.concatenate([piece.t for piece in logs]),
                x=np.concatenate([piece.x for piece in logs]),
                tension=np.concatenate([piece.tension for piece in logs]),
            )
        )
        return samples_from_states(log.t, log.x, log.tension, self.sim.n)

    def link_stats(self) -> LinkStats:
        """What the links of every quadrotor did this episode."""
        return LinkStats.combined([link.stats() for link in self.links])

    def _deliver(self) -> None:
        """Hand every plan that has arrived by the current step to its controller."""
        now = (self.sim.step + ARRIVAL_TOLERANCE_STEPS) * self.sim.h
        for uav, trajectory in self.in_flight.due(now):
            self.sim.send_plan(uav, trajectory)
            self._delivered[uav] = self.time

    def command(self, uav: int, action: str) -> None:
        """A pilot's command from the safety module: ``hover``, ``land`` or ``off`` (held
        here: motors off are not modelled)."""
        if action not in ("hover", "land", "off"):
            raise ValueError(f"command: expected hover, land or off, got {action!r}")
        position = self.sim.world_state().uav_p[uav]
        if action == "land":
            self.sim.send_plan(uav, descent(self.time, self.time, position, drop=max(position[2], 0.0)))
        else:
            self.sim.send_plan(uav, hold(self.time, position))

    def safety_inputs(self) -> dict:
        """What the safety module judges besides the state: how long since a plan reached each
        quadrotor (the link's losses and delays) and, with ``[battery]``, the voltages."""
        inputs: dict = {"plan_age": self.time - self._delivered}
        if self.config.battery.enabled:
            x = self.sim.x
            ball = int(self.config.ball.enabled)
            inputs["voltage"] = np.array(
                [
                    x[layout.battery_offset(self.sim.n, ball, i) + layout.BATT_VOLTAGE]
                    for i in range(self.sim.n)
                ]
            )
        return inputs

    def _next_arrival_step(self) -> int | float:
        arrival = self.in_flight.next_arrival()
        if not math.isfinite(arrival):
            return math.inf
        return math.ceil(arrival / self.sim.h - ARRIVAL_TOLERANCE_STEPS)

    def _next_capture_step(self) -> int | float:
        if self.sensors is None:
            return math.inf
        return (self.sim.step // self.capture_every + 1) * self.capture_every

    def _poses(self) -> tuple[np.ndarray, np.ndarray]:
        """True positions (n + 1, 3) and attitudes (n + 1, 4): the load, then each quadrotor."""
        x = self.sim.x
        quads = [layout.quad_offset(i) for i in range(self.sim.n)]
        p = np.vstack(
            [x[layout.LOAD_POS : layout.LOAD_POS + 3]]
            + [x[o + layout.QUAD_POS : o + layout.QUAD_POS + 3] for o in quads]
        )
        q = np.vstack(
            [x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4]]
            + [x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] for o in quads]
        )
        return p, q

    def health(self) -> BackendHealth:
        stats = self.sim.statistics()
        updates = max(stats.sim_time_s * self.config.controller.rate_hz, 1.0)
        finite = bool(np.isfinite(self.sim.x).all())
        return BackendHealth(
            ok=finite,
            messages=[] if finite else ["simulation state is not finite"],
            status="non_finite",
            rejected_plans=int(stats.rejected_plans.sum()),
            hold_fraction=float(stats.hold_updates.sum() / (updates * self.sim.n)),
            extra={
                "slack_fraction_exact": stats.slack_fraction,
                "longest_slack_s": stats.longest_slack_s,
                "max_thrust_ratio_exact": stats.max_thrust_ratio,
                "min_uav_distance_exact_m": stats.min_uav_distance_m,
                **self._link_extra(),
            },
        )

    def close(self) -> None:
        pass

    def _link_extra(self) -> dict:
        if not self.config.link.enabled:
            return {}
        stats = self.link_stats()
        return {
            "link_sent_plans": stats.sent,
            "link_dropped_plans": stats.dropped,
            "link_delay_mean_ms": 1e3 * stats.delay_mean_s,
            "link_delay_max_ms": 1e3 * stats.delay_max_s,
        }


def samples_from_states(t: np.ndarray, x: np.ndarray, tension: np.ndarray, n: int) -> WorldSamples:
    """Stacked flat states (k, state size) as ``WorldSamples``."""
    quads = np.stack(
        [x[:, layout.quad_offset(i) : layout.quad_offset(i) + layout.QUAD_SIZE] for i in range(n)],
        axis=1,
    )

    def load(start, size):
        return x[:, start : start + size].copy()

    def quad(start, size):
        return quads[:, :, start : start + size].copy()

    return WorldSamples(
        t=np.asarray(t, dtype=float),
        load_p=load(layout.LOAD_POS, 3),
        load_q=load(layout.LOAD_QUAT, 4),
        load_v=load(layout.LOAD_VEL, 3),
        load_omega=load(layout.LOAD_RATE, 3),
        uav_p=quad(layout.QUAD_POS, 3),
        uav_q=quad(layout.QUAD_QUAT, 4),
        uav_v=quad(layout.QUAD_VEL, 3),
        uav_omega=quad(layout.QUAD_RATE, 3),
        rotor_speeds=quad(layout.QUAD_ROTOR, 4),
        cable_tension=np.asarray(tension, dtype=float).copy(),
    )


__all__ = ["EmbeddedBackend", "samples_from_states", "world_state_from"]
