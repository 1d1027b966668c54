"""The safety module: the one gate between every planner and every quadrotor, on every backend.

Every planner period the episode runner hands it what the planners want to send and what is
known of the system; it answers, per quadrotor, either the plan to send or the action that
replaces it (``hover``, ``land``, ``off``), with the reason. Nothing else reaches a pilot's
trajectory topic. The rules are pure functions of ``SafetyInputs`` and the plans (property
tests drive them); ``SafetyModule`` is the thin shell that keeps the previous velocities (for
the measured acceleration) and the events.

The rules and their actions:

============================  ==========================================================  ======
rule                          fires when                                                  action
============================  ==========================================================  ======
``arena``                     a quadrotor or the load is outside the arena box            off
``speed``                     a quadrotor's or the load's measured speed over its bound   hover
``acceleration``              a quadrotor's measured acceleration over its bound          hover
``separation``                two quadrotors closer than ``min_distance_m`` now           off
``predicted_separation``      their plans come closer than that over the horizon          hover
``malformed_plan``            a plan non-finite, its times not increasing, or not         hover
                              starting within ``max_plan_lead_s`` of now
``plan_bounds``               a plan's speed, acceleration or body rate over the bounds   hover
``geofence``                  a plan leaves the geofence (the arena shrunk by a margin)   hover
``stale_state``               a quadrotor's state older than ``max_state_age_s``          hover
``stale_mocap``               a motion-capture body older than ``max_mocap_age_s``        hover
``link_lost``                 no plan reached a quadrotor for ``max_plan_age_s``          hover
``guard``                     a pilot reports its guard triggered                         land
``low_battery``               a quadrotor's voltage under ``min_voltage_v``               land
============================  ==========================================================  ======

Actions are for the team: a cable-suspended load is carried by all or by none, so when one
rule fires every quadrotor stops tracking. ``off`` goes to the quadrotors the rule names
(the one that left the arena, the pair too close), every other one hovers; ``land`` lands all;
``hover`` holds all where they are. A plan that any rule refuses is never sent, nor is any
other plan of that period. Once it has acted, the module keeps acting (the run ends with
``safety_stop`` naming the rule); the operator takes over from the hover.

The last five rules judge what the backend reports between two states (ages, the link,
batteries, guards: ``TIME_RULES``): a flight station also checks them every few milliseconds
between decisions (``SafetyModule.watch``), so that a lost motion capture or link is acted on
when its age passes the limit, not at the next decision.

May import: ``cableload_sim``, ``planners``. Imported by: ``backends``, ``hw``,
``cableload_sim.cli`` (it sits below the backends, which all use it).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field, replace

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.physics.world import UavTrajectory, WorldState

RULES = (
    "arena",
    "speed",
    "acceleration",
    "separation",
    "predicted_separation",
    "malformed_plan",
    "plan_bounds",
    "geofence",
    "stale_state",
    "stale_mocap",
    "link_lost",
    "guard",
    "low_battery",
)


class Action(enum.IntEnum):
    """What replaces a quadrotor's plan; a larger value overrides a smaller one."""

    NONE = 0
    HOVER = 1
    LAND = 2
    OFF = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class SafetyLimits:
    """The bounds the rules hold (world frame, SI units)."""

    arena_min: tuple[float, float, float] = (-50.0, -50.0, -1.0)
    """Lower corner of the arena (m): a quadrotor or the load below it is switched off."""
    arena_max: tuple[float, float, float] = (50.0, 50.0, 30.0)
    """Upper corner of the arena (m)."""
    geofence_margin_m: float = 0.0
    """The geofence is the arena shrunk by this on every side (m): no plan may leave it."""
    max_speed_mps: float = 8.0
    """Largest measured speed of a quadrotor or the load (m/s)."""
    max_acceleration_mps2: float = 25.0
    """Largest measured acceleration of a quadrotor (m/s^2), averaged over a planner period."""
    min_distance_m: float = 0.4
    """Smallest distance between two quadrotors, measured or planned (m)."""
    plan_max_speed_mps: float = 15.0
    """Largest speed a plan may ask for (m/s)."""
    plan_max_acceleration_mps2: float = 40.0
    """Largest acceleration a plan may ask for (m/s^2)."""
    plan_max_body_rate_radps: float = 20.0
    """Largest body rate a plan may ask for (rad/s)."""
    max_plan_lead_s: float = 0.5
    """A plan must start within this of now (s), before or after."""
    max_state_age_s: float = 0.25
    """Oldest quadrotor state the planners may fly on (s)."""
    max_mocap_age_s: float = 0.25
    """Oldest motion-capture pose of the load or a quadrotor (s)."""
    max_plan_age_s: float = 1.0
    """Longest a quadrotor may go without a new plan reaching it (s)."""
    min_voltage_v: float = 0.0
    """Battery voltage under which every quadrotor lands (V; 0: no battery rule)."""

    def __post_init__(self) -> None:
        lo = checks.vector(3)("arena_min", self.arena_min)
        hi = checks.vector(3)("arena_max", self.arena_max)
        if not np.all(np.asarray(hi) > np.asarray(lo)):
            raise ConfigError(f"arena_max: expected above arena_min {lo} on every axis, got {hi}")
        object.__setattr__(self, "arena_min", tuple(lo))
        object.__setattr__(self, "arena_max", tuple(hi))
        margin = checks.non_negative("geofence_margin_m", self.geofence_margin_m)
        if np.any(np.asarray(hi) - np.asarray(lo) <= 2.0 * margin):
            raise ConfigError(
                f"geofence_margin_m: expected less than half the arena's smallest side, got {margin!r} m"
            )
        for name in (
            "max_speed_mps",
            "max_acceleration_mps2",
            "min_distance_m",
            "plan_max_speed_mps",
            "plan_max_acceleration_mps2",
            "plan_max_body_rate_radps",
            "max_plan_lead_s",
            "max_state_age_s",
            "max_mocap_age_s",
            "max_plan_age_s",
        ):
            checks.positive(name, getattr(self, name))
        checks.non_negative("min_voltage_v", self.min_voltage_v)

    @property
    def geofence(self) -> tuple[np.ndarray, np.ndarray]:
        """The geofence's corners (m)."""
        m = self.geofence_margin_m
        return np.asarray(self.arena_min) + m, np.asarray(self.arena_max) - m


@dataclass(frozen=True)
class SafetyInputs:
    """What the rules judge, at time ``t`` (s): the observed state and what the backend knows
    of its freshness. Every age is in seconds; an unknown one is 0 (a source the backend
    does not have cannot be stale), an unknown voltage NaN."""

    t: float
    state: WorldState
    acceleration: np.ndarray | None = None
    """Each quadrotor's measured acceleration (n, 3), m/s^2; None: not known yet."""
    state_age: np.ndarray | None = None
    """Age of each quadrotor's state (n,)."""
    mocap_age: dict[str, float] = field(default_factory=dict)
    """Age of each motion-capture body's latest pose, by body name."""
    plan_age: np.ndarray | None = None
    """Time since a plan last reached each quadrotor (n,)."""
    voltage: np.ndarray | None = None
    """Each quadrotor's battery voltage (n,), V."""
    guard: np.ndarray | None = None
    """Whether each quadrotor's pilot reports its guard triggered (n,)."""


@dataclass(frozen=True)
class Intervention:
    """One rule firing: when, which rule, what it does, to which quadrotor (None: the team)."""

    t: float
    rule: str
    action: Action
    uav: int | None
    reason: str

    def as_dict(self) -> dict:
        return {
            "t": float(self.t),
            "rule": self.rule,
            "action": self.action.label,
            "uav": self.uav,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SafetyDecision:
    """The module's answer for one period: a plan to send or an action per quadrotor."""

    plans: list[UavTrajectory | None]
    """The plan to send to each quadrotor; None where an action replaces it."""
    actions: list[Action]
    """Each quadrotor's action (``Action.NONE`` where its plan is sent)."""
    events: list[Intervention]
    """The interventions of this period (empty when every plan is sent)."""

    @property
    def intervened(self) -> bool:
        return bool(self.events)


# ---------------------------------------------------------------------------------------------
# The rules: pure functions of the inputs (and the plans), each returning its interventions.


def _outside(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.any((points < lo) | (points > hi) | ~np.isfinite(points), axis=-1)


def arena_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    lo, hi = np.asarray(limits.arena_min), np.asarray(limits.arena_max)
    s, events = inputs.state, []
    for i in np.flatnonzero(_outside(s.uav_p, lo, hi)):
        events.append(
            Intervention(
                inputs.t,
                "arena",
                Action.OFF,
                int(i),
                f"quadrotor {i} at {np.round(s.uav_p[i], 2).tolist()} m, outside the arena "
                f"[{lo.tolist()}, {hi.tolist()}]",
            )
        )
    if _outside(s.load_p[None], lo, hi)[0]:
        events.append(
            Intervention(
                inputs.t,
                "arena",
                Action.OFF,
                None,
                f"the load at {np.round(s.load_p, 2).tolist()} m, outside the arena",
            )
        )
    return events


def speed_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    s, bound, events = inputs.state, limits.max_speed_mps, []
    speeds = np.linalg.norm(s.uav_v, axis=1)
    for i in np.flatnonzero(~(speeds <= bound)):
        events.append(
            Intervention(
                inputs.t, "speed", Action.HOVER, int(i), f"quadrotor {i} at {speeds[i]:.2f} m/s (> {bound:g})"
            )
        )
    load_speed = float(np.linalg.norm(s.load_v))
    if not load_speed <= bound:
        events.append(
            Intervention(
                inputs.t, "speed", Action.HOVER, None, f"the load at {load_speed:.2f} m/s (> {bound:g})"
            )
        )
    return events


def acceleration_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    if inputs.acceleration is None:
        return []
    bound = limits.max_acceleration_mps2
    norms = np.linalg.norm(inputs.acceleration, axis=1)
    return [
        Intervention(
            inputs.t,
            "acceleration",
            Action.HOVER,
            int(i),
            f"quadrotor {i} accelerating at {norms[i]:.1f} m/s^2 (> {bound:g})",
        )
        for i in np.flatnonzero(~(norms <= bound))
    ]


def _closest_pair(p: np.ndarray) -> tuple[float, int, int]:
    """The smallest distance between rows of ``p`` (n, 3) and its pair."""
    n = p.shape[0]
    if n < 2:
        return np.inf, -1, -1
    d = np.linalg.norm(p[:, None, :] - p[None, :, :], axis=-1)
    d[np.diag_indices(n)] = np.inf
    k = int(np.argmin(d))
    return float(d.flat[k]), k // n, k % n


def separation_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    dist, i, j = _closest_pair(inputs.state.uav_p)
    if dist >= limits.min_distance_m:
        return []
    reason = f"quadrotors {i} and {j} {dist:.2f} m apart (< {limits.min_distance_m:g} m)"
    return [Intervention(inputs.t, "separation", Action.OFF, k, reason) for k in (i, j)]


def plan_problem(plan: UavTrajectory, now: float, limits: SafetyLimits) -> tuple[str, str] | None:
    """(rule, reason) for a plan no quadrotor may fly, or None."""
    if not plan.is_finite():
        return "malformed_plan", "non-finite value"
    dt = np.diff(plan.t)
    if not np.all(dt > 0.0):
        return "malformed_plan", "node times not increasing"
    if abs(float(plan.t[0]) - now) > limits.max_plan_lead_s:
        return "malformed_plan", f"starts at {plan.t[0]:.3f} s, {plan.t[0] - now:+.3f} s from now"
    lo, hi = limits.geofence
    outside = _outside(plan.p, lo, hi)
    if outside.any():
        k = int(np.argmax(outside))
        return "geofence", (
            f"plan reaches {np.round(plan.p[k], 2).tolist()} m at t = {plan.t[k]:.2f} s, "
            f"outside the geofence [{lo.tolist()}, {hi.tolist()}]"
        )
    for what, values, bound, unit in (
        ("speed", plan.v, limits.plan_max_speed_mps, "m/s"),
        ("acceleration", plan.a, limits.plan_max_acceleration_mps2, "m/s^2"),
        ("body rate", plan.body_rates, limits.plan_max_body_rate_radps, "rad/s"),
    ):
        largest = float(np.sqrt(np.einsum("ij,ij->i", values, values).max()))
        if largest > bound:
            return "plan_bounds", f"plan's {what} {largest:.3g} {unit} (> {bound:g})"
    return None


def _all_flyable(plans: list[UavTrajectory], now: float, limits: SafetyLimits) -> bool:
    """Whether every plan passes ``plan_problem``, checked at once on the stacked plans (the
    common case, every period); False also when they cannot be stacked (the per-plan check
    then decides)."""
    if not plans or len({p.n_nodes for p in plans}) != 1:
        return False
    t = np.stack([p.t for p in plans])
    motion = np.stack([np.stack((p.p, p.v, p.a, p.body_rates)) for p in plans])  # (n, 4, k, 3)
    if not (np.isfinite(t).all() and np.isfinite(motion).all()) or not (np.diff(t, axis=1) > 0.0).all():
        return False
    if not np.all(np.abs(t[:, 0] - now) <= limits.max_plan_lead_s):
        return False
    lo, hi = limits.geofence
    if np.any(motion[:, 0] < lo) or np.any(motion[:, 0] > hi):
        return False
    if not all(np.isfinite(p.j).all() for p in plans):
        return False
    squares = np.einsum("nmki,nmki->nmk", motion[:, 1:], motion[:, 1:]).max(axis=(0, 2))
    bounds = np.array(
        [limits.plan_max_speed_mps, limits.plan_max_acceleration_mps2, limits.plan_max_body_rate_radps]
    )
    return bool(np.all(squares <= bounds**2))


def plan_rule(plans: list[UavTrajectory], inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    if _all_flyable(plans, inputs.t, limits):
        return []
    events = []
    for i, plan in enumerate(plans):
        problem = plan_problem(plan, inputs.t, limits)
        if problem is not None:
            events.append(Intervention(inputs.t, problem[0], Action.HOVER, i, f"plan refused: {problem[1]}"))
    return events


def predicted_distance(plans: list[UavTrajectory]) -> tuple[float, int, int, float]:
    """The smallest distance between two plans over their common nodes' times (each plan
    interpolated at the others' times): (distance, i, j, time)."""
    if len(plans) < 2:
        return np.inf, -1, -1, np.nan
    first = plans[0].t
    if all(p.t.shape == first.shape and np.array_equal(p.t, first) for p in plans):
        return _closest_over(np.stack([p.p for p in plans]), first)
    times = np.unique(np.concatenate([p.t for p in plans]))
    start = max(float(p.t[0]) for p in plans)
    end = min(float(p.t[-1]) for p in plans)
    times = times[(times >= start) & (times <= end)]
    if times.size == 0:
        return np.inf, -1, -1, np.nan
    n = len(plans)
    positions = np.empty((n, times.size, 3))
    for i, plan in enumerate(plans):
        for r in range(3):
            positions[i, :, r] = np.interp(times, plan.t, plan.p[:, r])
    return _closest_over(positions, times)


def _closest_over(positions: np.ndarray, times: np.ndarray) -> tuple[float, int, int, float]:
    """The closest pair among ``positions`` (n, k, 3) at ``times`` (k,)."""
    n = positions.shape[0]
    gaps = np.linalg.norm(positions[:, None] - positions[None, :], axis=-1)  # (n, n, k)
    gaps[np.arange(n), np.arange(n)] = np.inf
    i, j, k = np.unravel_index(int(np.argmin(gaps)), gaps.shape)
    return float(gaps[i, j, k]), int(min(i, j)), int(max(i, j)), float(times[k])


def predicted_separation_rule(
    plans: list[UavTrajectory], inputs: SafetyInputs, limits: SafetyLimits
) -> list[Intervention]:
    dist, i, j, t = predicted_distance(plans)
    if dist >= limits.min_distance_m:
        return []
    reason = (
        f"plans of quadrotors {i} and {j} come {dist:.2f} m apart at t = {t:.2f} s "
        f"(< {limits.min_distance_m:g} m)"
    )
    return [Intervention(inputs.t, "predicted_separation", Action.HOVER, None, reason)]


def freshness_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    events = []
    if inputs.state_age is not None:
        for i in np.flatnonzero(~(np.asarray(inputs.state_age) <= limits.max_state_age_s)):
            events.append(
                Intervention(
                    inputs.t,
                    "stale_state",
                    Action.HOVER,
                    int(i),
                    f"quadrotor {i}'s state {inputs.state_age[i]:.3f} s old (> {limits.max_state_age_s:g} s)",
                )
            )
    for body, age in sorted(inputs.mocap_age.items()):
        if not age <= limits.max_mocap_age_s:
            events.append(
                Intervention(
                    inputs.t,
                    "stale_mocap",
                    Action.HOVER,
                    None,
                    f"motion capture of {body} {age:.3f} s old (> {limits.max_mocap_age_s:g} s)",
                )
            )
    if inputs.plan_age is not None:
        for i in np.flatnonzero(~(np.asarray(inputs.plan_age) <= limits.max_plan_age_s)):
            events.append(
                Intervention(
                    inputs.t,
                    "link_lost",
                    Action.HOVER,
                    int(i),
                    f"no plan reached quadrotor {i} for {inputs.plan_age[i]:.2f} s "
                    f"(> {limits.max_plan_age_s:g} s); the others hover with it",
                )
            )
    return events


def pilot_rule(inputs: SafetyInputs, limits: SafetyLimits) -> list[Intervention]:
    events = []
    if inputs.guard is not None:
        for i in np.flatnonzero(np.asarray(inputs.guard, dtype=bool)):
            events.append(
                Intervention(inputs.t, "guard", Action.LAND, int(i), f"quadrotor {i}'s guard triggered")
            )
    if inputs.voltage is not None and limits.min_voltage_v > 0.0:
        volts = np.asarray(inputs.voltage, dtype=float)
        for i in np.flatnonzero(volts < limits.min_voltage_v):
            events.append(
                Intervention(
                    inputs.t,
                    "low_battery",
                    Action.LAND,
                    int(i),
                    f"quadrotor {i}'s battery at {volts[i]:.2f} V (< {limits.min_voltage_v:g} V)",
                )
            )
    return events


STATE_RULES = (arena_rule, speed_rule, acceleration_rule, separation_rule, freshness_rule, pilot_rule)

TIME_RULES = (freshness_rule, pilot_rule)
"""The rules that judge what the backend reports between two states (ages, link, batteries,
guards), not the state itself: a watchdog checks them between decisions
(``SafetyModule.watch``)."""


def interventions(
    plans: list[UavTrajectory], inputs: SafetyInputs, limits: SafetyLimits
) -> list[Intervention]:
    """Every rule that fires on this period's state and plans."""
    events = [e for rule in STATE_RULES for e in rule(inputs, limits)]
    if inputs.state.is_finite():
        refused = plan_rule(plans, inputs, limits)
        # only flyable plans can be compared (a non-finite one has no distance)
        events += refused or predicted_separation_rule(plans, inputs, limits)
    else:
        events.append(
            Intervention(inputs.t, "stale_state", Action.HOVER, None, "the observed state is not finite")
        )
    return events


def team_actions(events: list[Intervention], n_uavs: int) -> list[Action]:
    """Each quadrotor's action for these interventions: ``off`` where a rule names it, ``land``
    for all when any rule lands, else ``hover`` for all when anything fired."""
    if not events:
        return [Action.NONE] * n_uavs
    team = Action.LAND if any(e.action is Action.LAND for e in events) else Action.HOVER
    actions = [team] * n_uavs
    for e in events:
        if e.action is Action.OFF:
            for i in range(n_uavs) if e.uav is None else (e.uav,):
                actions[i] = Action.OFF
    return actions


def decide(plans: list[UavTrajectory], inputs: SafetyInputs, limits: SafetyLimits) -> SafetyDecision:
    """The pure decision for one period: every plan sent, or none and an action for each."""
    events = interventions(plans, inputs, limits)
    actions = team_actions(events, len(plans))
    if events:
        return SafetyDecision([None] * len(plans), actions, events)
    return SafetyDecision(list(plans), actions, [])


class SafetyModule:
    """The stateful shell: measured accelerations from successive states, latching, events.

    Once a rule has fired the module keeps every quadrotor on its action (no plan is sent
    again); ``reset`` starts a new episode."""

    def __init__(self, limits: SafetyLimits | None = None):
        self.limits = limits if limits is not None else SafetyLimits()
        self.reset()

    def reset(self) -> None:
        self.events: list[Intervention] = []
        self.latched: list[Action] | None = None
        self.last_inputs: SafetyInputs | None = None
        """The inputs of the latest decision (``watch`` judges newer ages against them)."""
        self.stop_status = "safety_stop"
        """The episode status the module's stop calls for (a trip may name another)."""
        self._previous: tuple[float, np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def stopped(self) -> bool:
        return self.latched is not None

    def first_event(self) -> Intervention | None:
        return self.events[0] if self.events else None

    def inputs(self, state: WorldState, extra: dict | None = None) -> SafetyInputs:
        """``SafetyInputs`` from the observed state and what the backend reports
        (``safety_inputs()``: ``state_age``, ``mocap_age``, ``plan_age``, ``voltage``,
        ``guard``)."""
        acceleration = None
        if self._previous is not None:
            t0, v0 = self._previous
            if state.t - t0 > 1e-9:
                acceleration = (state.uav_v - v0) / (state.t - t0)
        self._previous = (float(state.t), np.array(state.uav_v, dtype=float))
        return SafetyInputs(t=float(state.t), state=state, acceleration=acceleration, **(extra or {}))

    def check(
        self, state: WorldState, plans: list[UavTrajectory], extra: dict | None = None
    ) -> SafetyDecision:
        """This period's decision; after a first intervention, the latched actions."""
        inputs = self.inputs(state, extra)
        with self._lock:
            self.last_inputs = inputs
            if self.latched is not None:
                return SafetyDecision([None] * len(plans), list(self.latched), [])
            decision = decide(plans, inputs, self.limits)
            if decision.intervened:
                self.events.extend(decision.events)
                self.latched = list(decision.actions)
            return decision

    def trip(
        self,
        t: float,
        rule: str,
        action: Action,
        reason: str,
        n_uavs: int,
        uav: int | None = None,
        status: str = "safety_stop",
    ) -> SafetyDecision:
        """An intervention from outside the rules (the operator's station): latched like a
        rule's; the episode then ends with ``status`` (e.g. ``operator_off``). Safe to call
        from another thread while the episode runs."""
        event = Intervention(float(t), rule, action, uav, reason)
        actions = team_actions([event], n_uavs)
        with self._lock:
            if self.latched is None:
                self.latched = actions
                self.stop_status = status
            else:
                self.latched = [max(a, b) for a, b in zip(self.latched, actions)]
            self.events.append(event)
            return SafetyDecision([None] * n_uavs, list(self.latched), [event])

    def watch(self, t: float, extra: dict, n_uavs: int) -> list[Action] | None:
        """Between decisions: ``TIME_RULES`` on what the backend reports now (``extra``, as
        ``safety_inputs()`` gives it) at time ``t``, with the latest decision's state. When one
        fires it is latched and logged like a rule at a decision, and the actions every
        quadrotor must be given at once are returned (None: nothing fired, or the module had
        stopped already, or no decision was made yet). Safe to call from another thread."""
        with self._lock:
            if self.latched is not None or self.last_inputs is None:
                return None
            inputs = replace(self.last_inputs, t=float(t), **extra)
            events = [e for rule in TIME_RULES for e in rule(inputs, self.limits)]
            if not events:
                return None
            self.latched = team_actions(events, n_uavs)
            self.events.extend(events)
            return list(self.latched)

    def report(self) -> dict:
        first = self.first_event()
        return {
            "safety_events": [e.as_dict() for e in self.events],
            "safety_rule": first.rule if first else None,
        }
