"""The safety module's rules: each fires its action in a test of its own, and property-based
fuzzing shows that no plan a rule refuses ever leaves (what is sent is checked here by an
implementation of the bounds of its own)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cableload_sim.errors import ConfigError
from cableload_sim.horizon import node_times
from cableload_sim.physics.world import UavTrajectory, WorldState
from hw.safety import (
    RULES,
    Action,
    SafetyInputs,
    SafetyLimits,
    SafetyModule,
    decide,
    predicted_distance,
    team_actions,
)

SLOTS = np.array([[1.0, 0.0, 2.0], [-0.5, 0.87, 2.0], [-0.5, -0.87, 2.0]])


def state(
    t: float = 1.0, uav_p=SLOTS, uav_v=None, load_p=(0.0, 0.0, 1.0), load_v=(0.0, 0.0, 0.0)
) -> WorldState:
    n = len(uav_p)
    q = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    return WorldState(
        t=t,
        load_p=np.asarray(load_p, float),
        load_q=np.array([1.0, 0.0, 0.0, 0.0]),
        load_v=np.asarray(load_v, float),
        load_omega=np.zeros(3),
        uav_p=np.asarray(uav_p, float),
        uav_q=q,
        uav_v=np.zeros((n, 3)) if uav_v is None else np.asarray(uav_v, float),
        uav_omega=np.zeros((n, 3)),
        rotor_speeds=np.zeros((n, 4)),
        cable_tension=np.full(n, 3.0),
        cable_dir=np.tile([0.0, 0.0, 1.0], (n, 1)),
    )


def hold_plan(t: float, p, v=(0.0, 0.0, 0.0)) -> UavTrajectory:
    times = node_times(t)
    k = times.size
    velocity = np.tile(np.asarray(v, float), (k, 1))
    positions = np.asarray(p, float) + velocity * (times - t)[:, None]
    zeros = np.zeros((k, 3))
    return UavTrajectory(times, positions, velocity, zeros, zeros, zeros)


def hover_plans(t: float = 1.0, positions=SLOTS) -> list[UavTrajectory]:
    return [hold_plan(t, p) for p in positions]


LIMITS = SafetyLimits(arena_min=(-5.0, -5.0, -0.5), arena_max=(5.0, 5.0, 4.0), geofence_margin_m=0.5)


def only(decision, rule: str):
    rules = {e.rule for e in decision.events}
    assert rules == {rule}, decision.events
    assert all(p is None for p in decision.plans)  # nothing is sent
    return decision


def test_a_calm_state_with_good_plans_passes_every_plan():
    plans = hover_plans()
    decision = decide(plans, SafetyInputs(1.0, state()), LIMITS)
    assert not decision.intervened
    assert decision.plans == plans
    assert decision.actions == [Action.NONE] * 3


def test_leaving_the_arena_switches_that_quadrotor_off_and_the_others_hover():
    p = SLOTS.copy()
    p[1] = [0.0, 5.2, 2.0]
    d = only(decide(hover_plans(), SafetyInputs(1.0, state(uav_p=p)), LIMITS), "arena")
    assert d.actions == [Action.HOVER, Action.OFF, Action.HOVER]


def test_the_load_leaving_the_arena_switches_every_quadrotor_off():
    d = only(decide(hover_plans(), SafetyInputs(1.0, state(load_p=(0, 0, -0.8))), LIMITS), "arena")
    assert d.actions == [Action.OFF] * 3


def test_too_fast_hovers_every_quadrotor():
    v = np.zeros((3, 3))
    v[2] = [0.0, 8.5, 0.0]
    d = only(decide(hover_plans(), SafetyInputs(1.0, state(uav_v=v)), LIMITS), "speed")
    assert d.actions == [Action.HOVER] * 3
    assert "quadrotor 2" in d.events[0].reason


def test_the_load_too_fast_hovers_every_quadrotor():
    only(decide(hover_plans(), SafetyInputs(1.0, state(load_v=(9.0, 0, 0))), LIMITS), "speed")


def test_a_hard_acceleration_hovers():
    a = np.zeros((3, 3))
    a[0, 2] = 30.0
    d = only(decide(hover_plans(), SafetyInputs(1.0, state(), acceleration=a), LIMITS), "acceleration")
    assert d.actions == [Action.HOVER] * 3


def test_the_module_measures_acceleration_from_successive_states():
    module = SafetyModule(LIMITS)
    assert not module.check(state(t=1.0), hover_plans(1.0)).intervened
    v = np.zeros((3, 3))
    v[1, 0] = 3.0  # 3 m/s gained in 0.1 s: 30 m/s^2
    decision = module.check(state(t=1.1, uav_v=v), hover_plans(1.1))
    assert [e.rule for e in decision.events] == ["acceleration"]


def test_two_quadrotors_too_close_are_switched_off():
    p = SLOTS.copy()
    p[2] = p[0] + [0.3, 0.0, 0.0]
    d = only(decide(hover_plans(), SafetyInputs(1.0, state(uav_p=p)), LIMITS), "separation")
    assert d.actions == [Action.OFF, Action.HOVER, Action.OFF]


def test_plans_that_come_too_close_are_not_sent_and_every_quadrotor_hovers():
    plans = hover_plans()
    toward = (SLOTS[1] - SLOTS[0]) / np.linalg.norm(SLOTS[1] - SLOTS[0])
    plans[0] = hold_plan(1.0, SLOTS[0], v=toward * 1.0)  # reaches quadrotor 1 within the horizon
    dist, i, j, t = predicted_distance(plans)
    assert dist < 0.4 and {i, j} == {0, 1}
    d = only(decide(plans, SafetyInputs(1.0, state()), LIMITS), "predicted_separation")
    assert d.actions == [Action.HOVER] * 3


@pytest.mark.parametrize(
    "spoil, rule",
    [
        (lambda p: p.p.__setitem__((3, 0), np.nan), "malformed_plan"),
        (lambda p: p.t.__setitem__(4, p.t[2]), "malformed_plan"),
        (lambda p: p.p.__setitem__((5, 2), 3.9), "geofence"),  # inside the arena, not the fence
        (lambda p: p.v.__setitem__((1, 0), 20.0), "plan_bounds"),
        (lambda p: p.a.__setitem__((1, 1), 50.0), "plan_bounds"),
        (lambda p: p.body_rates.__setitem__((1, 2), 25.0), "plan_bounds"),
    ],
    ids=["non-finite", "times-not-increasing", "geofence", "speed", "acceleration", "body-rate"],
)
def test_a_bad_plan_is_never_sent_and_every_quadrotor_hovers(spoil, rule):
    plans = hover_plans()
    spoil(plans[1])
    d = only(decide(plans, SafetyInputs(1.0, state()), LIMITS), rule)
    assert d.actions == [Action.HOVER] * 3
    assert d.events[0].uav == 1


def test_a_plan_from_another_time_is_refused():
    plans = hover_plans(t=1.0)
    plans[0] = hold_plan(3.0, SLOTS[0])
    only(decide(plans, SafetyInputs(1.0, state()), LIMITS), "malformed_plan")


def test_stale_state_hovers():
    inputs = SafetyInputs(1.0, state(), state_age=np.array([0.01, 0.4, 0.01]))
    d = only(decide(hover_plans(), inputs, LIMITS), "stale_state")
    assert d.actions == [Action.HOVER] * 3


def test_a_non_finite_observed_state_hovers():
    p = SLOTS.copy()
    p[0, 0] = np.nan
    d = decide(hover_plans(), SafetyInputs(1.0, state(uav_p=p)), LIMITS)
    assert {e.rule for e in d.events} >= {"stale_state"}
    assert all(plan is None for plan in d.plans)


def test_lost_motion_capture_of_the_load_hovers_every_quadrotor():
    inputs = SafetyInputs(1.0, state(), mocap_age={"load": 0.3, "quad1": 0.01})
    d = only(decide(hover_plans(), inputs, LIMITS), "stale_mocap")
    assert d.actions == [Action.HOVER] * 3
    assert "load" in d.events[0].reason


def test_a_quadrotor_whose_plans_stop_arriving_makes_the_others_hover_with_it():
    inputs = SafetyInputs(1.0, state(), plan_age=np.array([0.1, 1.5, 0.1]))
    d = only(decide(hover_plans(), inputs, LIMITS), "link_lost")
    assert d.actions == [Action.HOVER] * 3
    assert d.events[0].uav == 1


def test_a_triggered_guard_lands_every_quadrotor():
    inputs = SafetyInputs(1.0, state(), guard=np.array([False, False, True]))
    d = only(decide(hover_plans(), inputs, LIMITS), "guard")
    assert d.actions == [Action.LAND] * 3


def test_a_low_battery_lands_every_quadrotor():
    limits = SafetyLimits(min_voltage_v=14.0)
    inputs = SafetyInputs(1.0, state(), voltage=np.array([15.1, 13.8, 15.0]))
    d = only(decide(hover_plans(), inputs, limits), "low_battery")
    assert d.actions == [Action.LAND] * 3
    # with no battery rule configured the same voltages pass
    assert not decide(hover_plans(), inputs, SafetyLimits()).intervened


def test_every_rule_has_a_test_above():
    source = open(__file__).read()
    for rule in RULES:
        assert f'"{rule}"' in source, rule


def test_off_beats_land_beats_hover():
    from hw.safety import Intervention

    events = [
        Intervention(1.0, "speed", Action.HOVER, 0, ""),
        Intervention(1.0, "guard", Action.LAND, 1, ""),
        Intervention(1.0, "arena", Action.OFF, 2, ""),
    ]
    assert team_actions(events, 4) == [Action.LAND, Action.LAND, Action.OFF, Action.LAND]
    assert team_actions([], 2) == [Action.NONE, Action.NONE]


def test_once_it_has_acted_the_module_sends_nothing_again():
    module = SafetyModule(LIMITS)
    v = np.zeros((3, 3))
    v[0, 0] = 9.0
    first = module.check(state(t=1.0, uav_v=v), hover_plans(1.0))
    assert first.intervened
    later = module.check(state(t=1.1), hover_plans(1.1))
    assert later.plans == [None] * 3 and later.actions == [Action.HOVER] * 3
    assert module.report()["safety_rule"] == "speed"
    module.reset()
    assert not module.check(state(t=2.0), hover_plans(2.0)).intervened


def test_between_decisions_the_watchdog_acts_on_ages_alone():
    """``SafetyModule.watch`` judges the time rules on newer ages with the last decision's
    state: nothing before a first decision; a body whose frames stopped hovers every quadrotor
    at once, latched and logged like a decision's rule; then the module has acted."""
    module = SafetyModule(LIMITS)
    fresh = {"mocap_age": {"load": 0.01}, "state_age": np.full(3, 0.01)}
    assert module.watch(1.0, fresh, 3) is None  # no decision made yet
    assert not module.check(state(t=1.0), hover_plans(1.0), fresh).intervened
    assert module.watch(1.05, fresh, 3) is None
    lost = {"mocap_age": {"load": LIMITS.max_mocap_age_s + 0.005}}
    assert module.watch(1.06, lost, 3) == [Action.HOVER] * 3
    assert module.stopped and module.report()["safety_rule"] == "stale_mocap"
    assert module.events[0].t == 1.06 and "load" in module.events[0].reason
    assert module.watch(1.07, lost, 3) is None  # acted once; the decisions keep the hover
    later = module.check(state(t=1.1), hover_plans(1.1), fresh)
    assert later.plans == [None] * 3 and later.actions == [Action.HOVER] * 3
    # a guard between decisions lands every quadrotor; speeds are left to the decisions
    module.reset()
    module.check(state(t=2.0), hover_plans(2.0))
    assert module.watch(2.01, {"guard": np.array([False, True, False])}, 3) == [Action.LAND] * 3


def test_bad_limits_are_named():
    with pytest.raises(ConfigError, match="arena_max"):
        SafetyLimits(arena_min=(0, 0, 0), arena_max=(1, 1, 0))
    with pytest.raises(ConfigError, match="geofence_margin_m"):
        SafetyLimits(arena_min=(0, 0, 0), arena_max=(1, 1, 1), geofence_margin_m=0.6)
    with pytest.raises(ConfigError, match="max_speed_mps"):
        SafetyLimits(max_speed_mps=-1.0)


# ---------------------------------------------------------------------------------------------
# Property-based: whatever the planners propose, what is sent is flyable.

FUZZ_CASES = 10_000

finite = st.floats(-6.0, 6.0, allow_nan=False)
spoilers = st.sampled_from(["none", "nan", "inf", "reverse", "far", "fast", "jerk", "late", "close"])


@st.composite
def proposals(draw):
    n = draw(st.integers(2, 4))
    t = draw(st.floats(0.0, 100.0))
    centres = draw(st.lists(st.tuples(finite, finite, st.floats(0.0, 4.0)), min_size=n, max_size=n))
    velocities = draw(st.lists(st.tuples(*[st.floats(-3.0, 3.0)] * 3), min_size=n, max_size=n))
    plans = []
    for c, v in zip(centres, velocities):
        plan = hold_plan(t, c, v)
        spoil = draw(spoilers)
        k = draw(st.integers(0, plan.n_nodes - 1))
        if spoil == "nan":
            plan.p[k, draw(st.integers(0, 2))] = np.nan
        elif spoil == "inf":
            plan.v[k, 0] = np.inf
        elif spoil == "reverse" and k > 0:
            plan.t[k] = plan.t[k - 1] - draw(st.floats(0.0, 1.0))
        elif spoil == "far":
            plan.p[k] += draw(st.tuples(*[st.floats(-20.0, 20.0)] * 3))
        elif spoil == "fast":
            plan.v[k] *= draw(st.floats(1.0, 20.0))
            plan.a[k] = draw(st.tuples(*[st.floats(-60.0, 60.0)] * 3))
        elif spoil == "jerk":
            plan.body_rates[k] = draw(st.tuples(*[st.floats(-30.0, 30.0)] * 3))
        elif spoil == "late":
            plan = UavTrajectory(
                plan.t + draw(st.floats(-2.0, 2.0)), plan.p, plan.v, plan.a, plan.j, plan.body_rates
            )
        elif spoil == "close" and plans:
            plan = hold_plan(t, plans[-1].p[0] + draw(st.tuples(*[st.floats(-0.5, 0.5)] * 3)), v)
        plans.append(plan)
    uav_p = np.array([p.p[0] if np.isfinite(p.p[0]).all() else [0.0, 0.0, 1.0] for p in plans])
    uav_v = np.array(velocities) * draw(st.floats(0.0, 4.0))
    return t, plans, state(t, uav_p=uav_p, uav_v=uav_v)


def flyable(plan: UavTrajectory, now: float, limits: SafetyLimits) -> bool:
    """Written apart from the module: finite, times increasing, starting now, inside the
    geofence, within the plan bounds."""
    arrays = [plan.t, plan.p, plan.v, plan.a, plan.j, plan.body_rates]
    if not all(np.all(np.isfinite(a)) for a in arrays):
        return False
    if any(b <= a for a, b in zip(plan.t[:-1], plan.t[1:])):
        return False
    if abs(plan.t[0] - now) > limits.max_plan_lead_s:
        return False
    m = limits.geofence_margin_m
    for point in plan.p:
        for axis in range(3):
            if not limits.arena_min[axis] + m <= point[axis] <= limits.arena_max[axis] - m:
                return False
    for rows, bound in (
        (plan.v, limits.plan_max_speed_mps),
        (plan.a, limits.plan_max_acceleration_mps2),
        (plan.body_rates, limits.plan_max_body_rate_radps),
    ):
        if max(float(np.sqrt(r @ r)) for r in rows) > bound:
            return False
    return True


def apart(plans: list[UavTrajectory], limits: SafetyLimits) -> bool:
    """Every pair at least the minimum distance apart at every node time of either plan."""
    for i in range(len(plans)):
        for j in range(i + 1, len(plans)):
            for t in np.concatenate([plans[i].t, plans[j].t]):
                if plans[i].t[0] <= t <= plans[i].t[-1] and plans[j].t[0] <= t <= plans[j].t[-1]:
                    a = np.array([np.interp(t, plans[i].t, plans[i].p[:, r]) for r in range(3)])
                    b = np.array([np.interp(t, plans[j].t, plans[j].p[:, r]) for r in range(3)])
                    if np.linalg.norm(a - b) < limits.min_distance_m - 1e-9:
                        return False
    return True


@pytest.mark.slow
@settings(
    max_examples=FUZZ_CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(proposals())
def test_no_refused_plan_ever_reaches_a_quadrotor(proposal):
    t, plans, observed = proposal
    decision = decide(plans, SafetyInputs(t, observed), LIMITS)
    sent = [p for p in decision.plans if p is not None]
    assert len(sent) in (0, len(plans))  # all or nothing
    if sent:
        assert all(flyable(p, t, LIMITS) for p in sent)
        assert apart(sent, LIMITS)
        assert decision.actions == [Action.NONE] * len(plans)
    else:
        assert decision.events and all(a is not Action.NONE for a in decision.actions)
        assert all(e.rule in RULES for e in decision.events)
