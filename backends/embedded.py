"""The embedded backend: the numba simulator with the onboard controllers inside (default)."""

from __future__ import annotations

import numpy as np

from backends.base import BackendHealth, Scenario
from cableload_sim import layout
from cableload_sim.errors import UsageError
from cableload_sim.params import Config
from cableload_sim.simulator import Simulator, world_state_from
from cableload_sim.world import UavTrajectory, WorldSamples, WorldState


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
        self._disturbance = None

    @property
    def time(self) -> float:
        return self.sim.time

    def reset(self, scenario: Scenario) -> WorldState:
        self.sim.reset(scenario.load_p, scenario.load_q)
        rng = np.random.default_rng(scenario.seed)
        self._disturbance = (
            scenario.disturbance.episode(rng) if scenario.disturbance is not None else None
        )
        return self.observe()

    def observe(self) -> WorldState:
        return self.sim.world_state()

    def send(self, uav: int, trajectory: UavTrajectory) -> None:
        if not 0 <= uav < self.sim.n:
            raise IndexError(f"uav index {uav} out of range for {self.sim.n} quadrotors")
        self.sim.send_plan(uav, trajectory)

    def advance(self) -> WorldSamples:
        wrench = None
        if self._disturbance is not None:
            wrench = self._disturbance.next(self.steps_per_period)
        log = self.sim.advance(self.steps_per_period, wrench=wrench)
        return samples_from_states(log.t, log.x, log.tension, self.sim.n)

    def health(self) -> BackendHealth:
        stats = self.sim.statistics()
        updates = max(stats.sim_time_s * self.config.controller.rate_hz, 1.0)
        finite = bool(np.isfinite(self.sim.x).all())
        return BackendHealth(
            ok=finite,
            messages=[] if finite else ["simulation state is not finite"],
            rejected_plans=int(stats.rejected_plans.sum()),
            hold_fraction=float(stats.hold_updates.sum() / (updates * self.sim.n)),
            extra={
                "slack_fraction_exact": stats.slack_fraction,
                "longest_slack_s": stats.longest_slack_s,
                "max_thrust_ratio_exact": stats.max_thrust_ratio,
                "min_uav_distance_exact_m": stats.min_uav_distance_m,
            },
        )

    def close(self) -> None:
        pass


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
