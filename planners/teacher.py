"""The teacher: centralized kinodynamic NMPC on the load-cable model of Sun et al. (2025).

Every planner period it solves, warm-started from its previous solution, the optimal control
problem of ``teacher_ocp`` over the paper's 21-node horizon: track the load reference with the
load-cable model of ``teacher_model``, subject to hard path constraints (tension bounds, thrust
bounds, the minimum distance between quadrotors, input bounds), by Gauss-Newton SQP in
real-time iteration: one iteration per plan, more (up to ``RTI_MAX_ITERATIONS``) while the
steps are cut short, since only a whole step leaves a plan the model can fly. The solution
becomes one ``UavTrajectory`` per quadrotor (p, v, a, jerk, body rates; see
``teacher_model`` for what is exact). Initial state: load pose and twist and
the cable directions from the privileged ``WorldState``; cable rates, tensions and their
derivatives from the plan being flown (measured ones without one), so consecutive plans are
continuous. The reference is sampled along its own clock, which runs at ``pace`` (1 unless
slowed, below).

Every plan is checked before it is sent: finite, within ``PlanBounds``, tensions within their
bounds, and no two quadrotors under ``min_distance`` anywhere along the plan as the onboard
controller samples it (or, for two already closer, never closer than they start). A plan that
fails gets a few more warm-started iterations; if it still fails, or the plan cannot end with
the constraints holding again, the load's progress along the reference slows (down to a hold)
and comes back, catching up on the delay, once plans are clean again. Nothing else is ever
sent: a plan that fails is replaced by the checked previous plan shifted in time (a hover hold
at the quadrotors' positions without one), the solver's iterate is kept as the next warm start,
and the report counts every case.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from numba import njit

from cableload_sim.horizon import node_offsets
from cableload_sim.params import AeroParams, Config, SystemParams, TeacherParams
from cableload_sim.physics.world import UavTrajectory, WorldState
from cableload_sim.rotations import quat_to_matrix
from planners.base import PlanBounds, hover_plan
from planners.teacher_model import (
    C_DIR,
    C_DRATE,
    C_DTENSION,
    C_RATE,
    C_SIZE,
    C_TENSION,
    X_LOAD,
    X_POS,
    X_QUAT,
    X_RATE,
    X_VEL,
    cable_offset,
)
from planners.teacher_ocp import Iterate, TeacherOCP, formation_prior

CHECK_SAMPLES = 4  # samples per horizon interval where the separation is checked
DISTANCE_TOLERANCE = 1e-3  # m: rounding allowed below the separation in the check
TENSION_TOLERANCE = 0.05  # N, likewise for the tension bounds
BINDING = 0.5  # a multiplier above this fraction of its penalty weight: constraints infeasible
LOST = "solver failure (non-finite iterate)"
RTI_MAX_ITERATIONS = 4  # SQP iterations a plan may take while its steps are cut short
FULL_STEP = 0.99  # a step at least this long closes the linearized gaps (nearly) whole
STEP_TOLERANCE = 0.5  # and one this small (of the trust region) leaves second-order gaps
MIN_PRIOR_TENSION = 1e-6  # N: below it a prior's cable force has no direction


def _blend(x: np.ndarray, predicted: np.ndarray, gain: float, blocks) -> None:
    """``x``'s measured blocks moved to ``predicted + gain (x - predicted)`` in place; unit
    blocks (a quaternion, a direction) renormalized, a quaternion taken on the predicted
    one's side first (q and -q are one attitude)."""
    for start, size, unit in blocks:
        measured = x[start : start + size]
        guess = predicted[start : start + size]
        if unit and size == 4 and float(measured @ guess) < 0.0:
            measured = -measured
        mixed = guess + gain * (measured - guess)
        if unit:
            norm = float(np.linalg.norm(mixed))
            mixed = mixed / norm if norm > 1e-9 else measured
        x[start : start + size] = mixed


class TeacherPlanner:
    """Centralized NMPC teacher as a ``Planner``."""

    name = "teacher"

    def __init__(
        self, system: SystemParams, params: TeacherParams | None = None, aero: AeroParams | None = None
    ):
        self.system = system
        self.params = params or TeacherParams()
        self.ocp = TeacherOCP(system, self.params, aero)
        self._wrench = None
        if self.params.prior == "wrench":  # its cable forces: the wrench formation's
            from planners.formation import FormationPlanner

            self._wrench = FormationPlanner(system, tilt=True, wrench=True, aero=self.ocp.aero)
        self.model = self.ocp.model
        self.offsets = node_offsets()
        self.bounds = PlanBounds()
        n = system.n_uavs
        self._pairs = np.array([(i, j) for i in range(n) for j in range(i)], dtype=int).reshape(-1, 2)
        self._tension_index = np.array([cable_offset(i) + C_TENSION for i in range(n)])
        # (start, size, unit: a direction or quaternion, renormalized after blending)
        self._measured_blocks = (
            (X_POS, 3, False),
            (X_VEL, 3, False),
            (X_QUAT, 4, True),
            (X_RATE, X_LOAD - X_RATE, False),
            *((cable_offset(i) + C_DIR, 3, True) for i in range(n)),
        )
        self.reset()

    @classmethod
    def from_config(cls, config: Config, **kwargs):
        kwargs.setdefault("aero", config.aero)
        return cls(config.system, config.teacher, **kwargs)

    def reset(self) -> None:
        self.iterate: Iterate | None = None  # the solver's point: next warm start
        self.flown: Iterate | None = None  # the solution behind the plans being flown
        self.unflown: Iterate | None = None  # the last solution, when another planner flew
        self.prev_plans: list[UavTrajectory] | None = None
        self.clock: float | None = None  # time along the reference (s)
        self.pace = 1.0  # reference seconds per second
        self.last_t: float | None = None
        self.solve_times: list[float] = []
        self.stage_times: list[tuple[float, float, float]] = []
        """Per plan: before the solver (initial state, warm start, reference), in the solver's
        iterations, after it (checks, quadrotor references, fallback), s."""
        self._solver_s = 0.0
        self.iterations: list[int] = []
        self.failures = 0  # plans replaced by the fallback
        self.holds = 0  # of which hover holds
        self._run_start: float | None = None
        self._run_plans = 0
        self.longest_fallback_plans = 0
        self.longest_fallback_s = 0.0
        self.recovered_plans = 0  # plans that passed the check after extra iterations
        self.paced_plans = 0
        self.held_reference_plans = 0
        self.min_pace = 1.0
        self.restarts = 0  # iterates lost (non-finite) and restarted from the flown solution
        self.failed_steps = 0
        self.max_binding = 0.0
        self.binding_plans = 0  # plans whose exact penalty was binding (constraints infeasible)
        self.unrecovered_plans = 0  # plans ending with a constraint still violated
        self.reasons: dict[str, int] = {}

    def report(self) -> dict:
        times = np.array(self.solve_times) * 1e3
        return {
            "solve_ms_median": float(np.median(times)) if times.size else float("nan"),
            "solve_ms_p99": float(np.percentile(times, 99)) if times.size else float("nan"),
            "solve_ms_max": float(times.max()) if times.size else float("nan"),
            "solver_failures": self.failures,
            "plans": len(self.solve_times),
            "sqp_iterations_mean": float(np.mean(self.iterations)) if self.iterations else 0.0,
            "fallback_plans": self.failures,
            "fallback_holds": self.holds,
            "longest_fallback_plans": self.longest_fallback_plans,
            "longest_fallback_s": max(self.longest_fallback_s, self._running_fallback_s()),
            "recovered_plans": self.recovered_plans,
            "paced_plans": self.paced_plans,
            "held_reference_plans": self.held_reference_plans,
            "min_pace": self.min_pace,
            "reference_lag_s": (
                self.last_t - self.clock if self.clock is not None and self.last_t is not None else 0.0
            ),
            "warm_restarts": self.restarts,
            "failed_steps": self.failed_steps,
            "max_multiplier_ratio": self.max_binding,
            "binding_plans": self.binding_plans,
            "unrecovered_plans": self.unrecovered_plans,
            "fallback_reasons": ", ".join(f"{k}: {v}" for k, v in sorted(self.reasons.items())),
        }

    # -- initial state and warm start --------------------------------------------------------

    def initial_state(self, state: WorldState) -> np.ndarray:
        """The OCP's x_0: the load's pose and twist and the cable directions moved from the
        plan being flown at this time toward their measured values by ``measurement_gain``
        (the measured ones without a plan); cable rates, tensions and their derivatives from
        that plan (measured ones without one)."""
        previous = self._flown_at(state.t)
        x = self._measured_state(state, previous)
        if previous is None and self.unflown is not None:
            self._unmeasured_from(x, self._interp_at(self.unflown, state.t))
            self.unflown = None
        gain = self.params.measurement_gain
        if previous is not None and gain < 1.0:
            _blend(x, previous, gain, self._measured_blocks)
        return x

    def _measured_state(self, state: WorldState, previous: np.ndarray | None) -> np.ndarray:
        """x_0 as measured, with the cable rates and tensions of ``previous`` (the flown
        plan's state now) when there is one."""
        x = np.zeros(self.model.nx)
        x[X_POS : X_POS + 3] = state.load_p
        x[X_VEL : X_VEL + 3] = state.load_v
        x[X_QUAT : X_QUAT + 4] = state.load_q
        x[X_RATE:X_LOAD] = state.load_omega
        measured_rates = self._measured_cable_rates(state) if previous is None else None
        for i in range(self.system.n_uavs):
            o = cable_offset(i)
            x[o + C_DIR : o + C_DIR + 3] = -state.cable_dir[i]
            if previous is not None:
                x[o + C_RATE : o + C_SIZE] = previous[o + C_RATE : o + C_SIZE]
            elif measured_rates is not None:
                x[o + C_RATE : o + C_RATE + 3] = measured_rates[i]
                x[o + C_TENSION] = np.clip(
                    state.cable_tension[i], self.params.tension_min, self.params.tension_max
                )
        return x

    def _measured_cable_rates(self, state: WorldState) -> np.ndarray:
        """Cable angular velocities r = s x ds/dt from the attachment points' velocities."""
        R_L = quat_to_matrix(state.load_q)
        rates = np.zeros((state.n_uavs, 3))
        for i in range(state.n_uavs):
            rho = np.asarray(self.system.load.attachments[i])
            r_att = np.asarray(self.system.quadrotors[i].attachment)
            R_i = quat_to_matrix(state.uav_q[i])
            v_load_end = state.load_v + R_L @ np.cross(state.load_omega, rho)
            v_uav_end = state.uav_v[i] + R_i @ np.cross(state.uav_omega[i], r_att)
            d = state.load_p + R_L @ rho - state.uav_p[i] - R_i @ r_att
            length = np.linalg.norm(d)
            s = d / length
            relative = v_load_end - v_uav_end
            s_dot = (relative - s * (s @ relative)) / length
            rates[i] = np.cross(s, s_dot)
        return rates

    def _flown_at(self, t: float) -> np.ndarray | None:
        """The state of the solution being flown, interpolated at time t (None without one)."""
        return self._interp_at(self.flown, t)

    def _interp_at(self, solution: Iterate | None, t: float) -> np.ndarray | None:
        if solution is None:
            return None
        times = solution.t + self.offsets
        if t > times[-1]:
            return None
        return _interp_rows(t, times, solution.X)[0]

    def _unmeasured_from(self, x: np.ndarray, planned: np.ndarray | None) -> None:
        """What no sensor gives, the cable rates' two derivatives and the tensions' rate, from
        ``planned`` (a solution's state now) into ``x`` (left as they are without one)."""
        if planned is None:
            return
        for i in range(self.system.n_uavs):
            o = cable_offset(i)
            x[o + C_DRATE : o + C_TENSION] = planned[o + C_DRATE : o + C_TENSION]
            x[o + C_DTENSION] = planned[o + C_DTENSION]

    def _warm_start(self, t: float, x0: np.ndarray) -> Iterate:
        """The last iterate (or, should it be lost, the solution being flown) moved to the
        horizon from t, its last values held beyond its end; without either, x0 held with zero
        inputs."""
        N = self.ocp.N
        old = self.iterate if self.iterate is not None and self.iterate.is_finite() else self.flown
        if old is None:
            X = np.repeat(x0[None, :], N + 1, axis=0)
            it = Iterate(t, X, np.zeros((N, self.model.nu)), None, None)
        else:
            new = t + self.offsets
            was = old.t + self.offsets
            it = Iterate(
                t, _interp_rows(new, was, old.X), _interp_rows(new[:-1], was[:-1], old.U), None, None
            )
            np.clip(it.U, -self.ocp.u_max, self.ocp.u_max, out=it.U)
            if old.z is not None and old.zu is not None:  # multipliers move as fractions of
                rho, rho_u = self.ocp.rho, self.ocp.rho_u[:, None]  # their node's penalty
                it.z = rho * np.clip(_interp_rows(new[1:], was[1:], old.z / rho), 1e-12, 0.99)
                it.zu = rho_u * np.clip(_interp_rows(new[:-1], was[:-1], old.zu / rho_u), 1e-12, 0.99)
        it.X[0] = x0
        return it

    # -- reference and pace ----------------------------------------------------------------------

    @property
    def _reference_time(self) -> float:
        """The time along the reference (s), which the first plan sets."""
        if self.clock is None:
            raise RuntimeError("the teacher has not planned yet: no time along the reference")
        return self.clock

    def _advance_clock(self, t: float) -> None:
        """Move the time along the reference by the pace; it never runs ahead of t."""
        if self.clock is None or self.last_t is None:
            self.clock = t
        else:
            self.clock = min(t, self.clock + self.pace * max(0.0, t - self.last_t))
        if self.clock >= t and self.pace > 1.0:
            self.pace = 1.0
        self.last_t = t

    def _reference_matrix(self, reference, load_q: np.ndarray) -> np.ndarray:
        """The reference at the nodes (N+1, 13 + 4n), run at the current pace: positions and
        attitudes at clock + pace * offset, velocities, rates and accelerations scaled by the
        pace; then the formation prior (``TeacherParams.prior``) for that motion."""
        ref = reference.sample(self._reference_time + self.pace * self.offsets)
        if self._wrench is None:
            directions, tensions = formation_prior(self.system, self.ocp.hover, ref.q, self.pace**2 * ref.a)
        else:
            paced = dataclasses.replace(
                ref,
                v=self.pace * ref.v,
                a=self.pace**2 * ref.a,
                j=self.pace**3 * ref.j,
                omega=self.pace * ref.omega,
                alpha=self.pace**2 * ref.alpha,
            )
            pull = self._wrench.cable_pulls(reference, ref.t, paced)
            tensions = np.linalg.norm(pull, axis=-1)
            directions = pull / np.maximum(tensions, MIN_PRIOR_TENSION)[..., None]
            slack = tensions <= MIN_PRIOR_TENSION
            if slack.any():  # a cable pulling nothing keeps the cone's direction
                cone, _ = formation_prior(self.system, self.ocp.hover, ref.q, self.pace**2 * ref.a)
                directions[slack] = cone[slack]
        return np.hstack(
            [
                ref.p,
                _continuous(ref.q, load_q),
                self.pace * ref.v,
                self.pace * ref.omega,
                directions.reshape(len(ref.p), -1),
                tensions,
            ]
        )

    def _slow_down(self) -> bool:
        """Lower the pace (to a hold below ``pace_min``); False when already holding."""
        if self.pace <= 0.0:
            return False
        self.pace *= self.params.pace_factor
        if self.pace < self.params.pace_min:
            self.pace = 0.0
        return True

    # -- planning -----------------------------------------------------------------------------

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        start = time.perf_counter()
        P = self.params
        times = state.t + self.offsets
        self._advance_clock(state.t)
        x0 = self.initial_state(state)
        lost = self.iterate is None or not self.iterate.is_finite()
        cold = lost and self.flown is None  # the first plan: iterate to convergence
        if lost and self.flown is not None:
            self.restarts += 1
        it = self._warm_start(state.t, x0)
        ref = self._reference_matrix(reference, state.load_q)
        self._solver_s = 0.0
        before_solver = time.perf_counter() - start
        steps, info = self._iterate(it, ref, P.max_iter if cold else P.rti_iterations, cold, extend=True)
        plans, why = self._checked(times, it)
        extra = 0
        # a plan failing its check is mostly one not converged yet (measured: a hairpin's plan
        # 3 cm under the separation 1.3 s ahead after 4 iterations, clean after 8): iterate on
        # before slowing the reference, whose hold and catch-up cost far more
        while why not in (None, LOST) and extra < P.recovery_iterations + RTI_MAX_ITERATIONS:
            more, info = self._iterate(it, ref, 1, False)
            steps += more
            extra += 1
            plans, why = self._checked(times, it)
        slowed = False
        if why is None and not self._recovers(plans, it):
            self.unrecovered_plans += 1
            if self._slow_down():  # the constraints cannot hold again within the horizon
                slowed = True
                ref = self._reference_matrix(reference, state.load_q)
                more, info = self._iterate(it, ref, P.recovery_iterations, False)
                steps += more
                plans, why = self._checked(times, it)
        elif why not in (None, LOST) and self._slow_down():  # no plan keeps the constraints
            slowed = True
            ref = self._reference_matrix(reference, state.load_q)
            more, info = self._iterate(it, ref, P.recovery_iterations, False)
            steps += more
            plans, why = self._checked(times, it)
        self.iterations.append(steps)
        if info is not None and info.binding > BINDING:
            self.binding_plans += 1
        self.iterate = it if it.is_finite() else None
        if why is None:
            if extra and not slowed:
                self.recovered_plans += 1
            if not slowed:
                self._regain_pace(state.t)
            self.flown = Iterate(it.t, it.X.copy(), it.U.copy(), None, None)
            self.prev_plans = plans
            self._end_fallback_run(state.t)
        else:
            plans = self._fallback(state, why)
        if self.pace < 1.0:
            self.paced_plans += 1
            self.min_pace = min(self.min_pace, self.pace)
            if self.pace == 0.0:
                self.held_reference_plans += 1
        total = time.perf_counter() - start
        self.solve_times.append(total)
        self.stage_times.append((before_solver, self._solver_s, total - before_solver - self._solver_s))
        return plans

    def _regain_pace(self, t: float) -> None:
        """After a plan that keeps the constraints: the pace rises back to 1, and above it (by
        up to ``pace_catch_up``) while the load lags behind the reference's own time."""
        P = self.params
        lag = t - self._reference_time
        top = 1.0 + P.pace_catch_up if lag > 1e-9 else 1.0
        self.pace = min(top, self.pace + P.pace_recovery)
        if lag <= 1e-9 and self.pace > 1.0:
            self.pace = 1.0

    def _iterate(self, it: Iterate, ref: np.ndarray, count: int, converge: bool, extend: bool = False):
        """Up to ``count`` SQP iterations (fewer when converging and the step is small); with
        ``extend``, more, up to ``RTI_MAX_ITERATIONS``, while the last step was cut short.

        Why: a real-time iteration is one Newton step from the shifted warm start, and its plan
        is a trajectory of the model only when that step is taken whole (the multiple-shooting
        gaps then close to second order). In fast turns the trust region and the interior
        point's fraction to the boundary cut it to a few percent (measured: 0.002-0.3 on a
        zero-sideslip hairpin at 3.7 rad/s of yaw), the gaps stay open, the plans jump between
        nodes by up to 0.5 m and the onboard controller cannot fly them (0.6 m off its plan,
        two quadrotors 0.63 m apart). Where the warm start is good (a full step at once) this
        costs nothing."""
        info = None
        done = 0
        limit = max(count, RTI_MAX_ITERATIONS) if extend and not converge else count
        for done in range(1, limit + 1):  # noqa: B007
            start = time.perf_counter()
            info = self.ocp.sqp_step(it, ref)
            self._solver_s += time.perf_counter() - start
            self.max_binding = max(self.max_binding, info.binding)
            if not info.ok:
                self.failed_steps += 1
                break
            if converge and info.size < 1e-3:
                break
            if not converge and done >= count and info.alpha >= FULL_STEP and info.size <= STEP_TOLERANCE:
                break
        return done, info

    def _checked(self, times: np.ndarray, it: Iterate):
        """The plans of iterate ``it`` and why they may not be flown (None when they may)."""
        if not it.is_finite():
            return None, LOST
        outs = self.ocp.quad_outputs(it.X)
        plans = [
            UavTrajectory(times, *(outs[:, k, i, :] for k in (0, 1, 2, 3, 5)))
            for i in range(self.system.n_uavs)
        ]
        for plan in plans:
            why = self.bounds.violation(plan)
            if why is not None:
                return plans, why
        tension = it.X[1:, self._tension_index]
        if (
            tension.min() < self.params.tension_min - TENSION_TOLERANCE
            or tension.max() > self.params.tension_max + TENSION_TOLERANCE
        ):
            return plans, "tension bounds"
        if self.separation_violation(plans) is not None:
            return plans, "separation"
        return plans, None

    def _recovers(self, plans: list[UavTrajectory], it: Iterate) -> bool:
        """Whether the plan ends with every constraint of the check holding again: quadrotors
        at least ``min_distance`` apart and tensions within bounds at its last node (it may
        start closer, after a disturbance, and must get them apart)."""
        p = np.stack([plan.p[-1] for plan in plans])
        i, j = self._pairs[:, 0], self._pairs[:, 1]
        if (
            len(self._pairs)
            and np.linalg.norm(p[i] - p[j], axis=1).min() < self.params.min_distance - DISTANCE_TOLERANCE
        ):
            return False
        tension = it.X[-1, self._tension_index]
        return bool(
            tension.min() >= self.params.tension_min - TENSION_TOLERANCE
            and tension.max() <= self.params.tension_max + TENSION_TOLERANCE
        )

    def separation_violation(self, plans: list[UavTrajectory]) -> float | None:
        """The smallest distance (m) by which two quadrotors of ``plans``, sampled as the
        onboard controller samples them (cubic Hermite in position), come closer than
        ``min_distance`` or than where they start when they start closer; None if they never
        do."""
        if not len(self._pairs):
            return None
        p = np.stack([plan.p for plan in plans], axis=1)  # (nodes, n, 3)
        v = np.stack([plan.v for plan in plans], axis=1)
        shortfall = _separation_shortfall(
            plans[0].t, p, v, self._pairs, CHECK_SAMPLES, self.params.min_distance, DISTANCE_TOLERANCE
        )
        return float(shortfall) if shortfall > 0.0 else None

    def _fallback(self, state: WorldState, why: str) -> list[UavTrajectory]:
        """The previous plan shifted in time when it still keeps the separation, else a hover
        hold where the quadrotors are; counted."""
        self.failures += 1
        self.reasons[why] = self.reasons.get(why, 0) + 1
        if self._run_start is None:
            self._run_start = state.t
        self._run_plans += 1
        self.longest_fallback_plans = max(self.longest_fallback_plans, self._run_plans)
        if self.prev_plans is not None:
            shifted = [plan.shifted_to(state.t) for plan in self.prev_plans]
            if self.separation_violation(shifted) is None:
                return shifted
        self.holds += 1
        self.flown = None  # nothing of the model is flown: the next plan starts from measurements
        self.prev_plans = None
        return [hover_plan(state.t, p) for p in state.uav_p]

    def not_flown(self) -> None:
        """The last plan was not flown (another planner flew this period, as in DAgger when
        the student acts): the next plan starts from the measurements, the cable rates and
        tensions measured too, instead of from a plan the quadrotors did not follow. What no
        sensor gives, the rates' derivatives and the tensions' rate, comes from that last plan:
        set to zero instead, the plan starts as if every cable stopped accelerating, and a
        teacher planning so every period flew 55 mm against 2.6 (8 draws of the generalists'
        distribution, seed 4242, exact state). The solver's iterate stays the warm start."""
        self.unflown = self.flown
        self.flown = None

    def _running_fallback_s(self) -> float:
        if self._run_start is None or self.last_t is None:
            return 0.0
        return self.last_t - self._run_start

    def _end_fallback_run(self, t: float) -> None:
        if self._run_start is not None:
            self.longest_fallback_s = max(self.longest_fallback_s, t - self._run_start)
        self._run_start = None
        self._run_plans = 0


@njit(cache=True)
def _separation_shortfall(t, p, v, pairs, samples, min_distance, tolerance):  # pragma: no cover
    """``TeacherPlanner.separation_violation``'s largest shortfall (m; not positive: none):
    positions ``p`` and velocities ``v`` (nodes, n, 3) at times ``t`` sampled ``samples``
    times per interval by cubic Hermite, and at the last node, each pair's distance compared
    with ``min_distance`` or, for a pair that starts closer, with its distance at the start."""
    nodes = t.shape[0]
    worst = -np.inf
    for q in range(pairs.shape[0]):
        i, j = pairs[q, 0], pairs[q, 1]
        start = math.sqrt(
            (p[0, i, 0] - p[0, j, 0]) ** 2 + (p[0, i, 1] - p[0, j, 1]) ** 2 + (p[0, i, 2] - p[0, j, 2]) ** 2
        )
        required = min(min_distance, start) - tolerance
        for k in range(nodes - 1):
            dt = t[k + 1] - t[k]
            for m in range(samples):
                s = m / samples
                h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
                h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
                d2 = 0.0
                for c in range(3):
                    xi = h00 * p[k, i, c] + h10 * dt * v[k, i, c]
                    xi += h01 * p[k + 1, i, c] + h11 * dt * v[k + 1, i, c]
                    xj = h00 * p[k, j, c] + h10 * dt * v[k, j, c]
                    xj += h01 * p[k + 1, j, c] + h11 * dt * v[k + 1, j, c]
                    d2 += (xi - xj) ** 2
                worst = max(worst, required - math.sqrt(d2))
        d2 = 0.0
        for c in range(3):
            d2 += (p[nodes - 1, i, c] - p[nodes - 1, j, c]) ** 2
        worst = max(worst, required - math.sqrt(d2))
    return worst


def _interp_rows(t, times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` (len(times), m) interpolated at ``t`` (scalar or array), held beyond
    the ends."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    out = np.empty((t.size, values.shape[1]))
    c = np.ascontiguousarray
    _interp_rows_into(t, c(times, dtype=float), c(values, dtype=float), out)
    return out


@njit(cache=True)
def _interp_rows_into(t, times, values, out):  # pragma: no cover
    """``_interp_rows`` into ``out`` (compiled: the warm start interpolates five arrays per
    plan, which NumPy's calls on arrays this small took 0.1 ms for)."""
    last = times.size - 2
    ks = np.searchsorted(times, t, side="right") - 1  # the last node at or before each t
    for r in range(t.size):
        k = min(max(ks[r], 0), last)
        w = min(max((t[r] - times[k]) / (times[k + 1] - times[k]), 0.0), 1.0)
        for c in range(values.shape[1]):
            out[r, c] = (1.0 - w) * values[k, c] + w * values[k + 1, c]


def _continuous(q_ref: np.ndarray, q_now: np.ndarray) -> np.ndarray:
    """Reference quaternions with the sign nearest the current attitude (q and -q are equal)."""
    sign = np.sign(q_ref @ q_now)
    sign[sign == 0] = 1.0
    return q_ref * sign[:, None]
