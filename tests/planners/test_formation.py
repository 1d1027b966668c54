"""The formation baseline made to start at the quadrotor (the student's prior)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from cableload_sim.trajectories import make_reference
from planners.formation import FormationPlanner


def test_anchored_plan_starts_at_the_quadrotor_and_joins_its_slot(paper_config):
    planner = FormationPlanner(paper_config.system, tilt=True, converge_s=0.5)
    reference = make_reference("eight-medium")
    slot = planner.slot_plans(3.0, reference)[1]
    here = slot.p[0] + np.array([0.2, -0.1, 0.05])
    plan = planner.anchored(slot, here)
    np.testing.assert_allclose(plan.p[0], here, atol=1e-12)
    gap = np.linalg.norm(plan.p - slot.p, axis=1)
    assert gap[-1] < 0.03 * gap[0] and np.all(np.diff(gap) <= 1e-12)
    # the slot's velocity is the derivative of its position, and the added term's exact
    slot_f = planner.slot_plans(3.0 + 1e-4, reference)[1]
    slot_b = planner.slot_plans(3.0 - 1e-4, reference)[1]
    numeric = (slot_f.p - slot_b.p) / 2e-4
    np.testing.assert_allclose(numeric, slot.v, atol=1e-4)
    tau = plan.t - plan.t[0]
    expected_v = slot.v - (here - slot.p[0]) * np.exp(-tau / 0.5)[:, None] / 0.5
    np.testing.assert_allclose(plan.v, expected_v, atol=1e-12)


def test_anchored_formation_flies_like_the_formation(paper_config):
    from backends import make_backend
    from backends.runner import run_episode

    reference = make_reference("eight-medium")
    result = run_episode(
        make_backend("embedded", paper_config),
        FormationPlanner(paper_config.system, tilt=True, converge_s=0.5),
        reference,
        10.0,
    )
    assert result.status.value == "completed"
    assert result.metrics["rmse_position_m"] < 0.04


def test_converge_time_must_be_positive(paper_config):
    with pytest.raises(ValueError, match="converge_s"):
        FormationPlanner(paper_config.system, tilt=True, converge_s=0.0)


@pytest.mark.parametrize("tilt,wrench", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize(
    "trajectory,orientation",
    [("eight-medium", "zero-sideslip"), ("square", "constant"), ("circle", "oscillating")],
)
def test_formation_kernels_compute_their_numpy_definitions(
    paper_config, tilt, wrench, trajectory, orientation
):
    """The compiled formation and slot derivatives against the NumPy expressions they replace;
    and the reference at the nodes, taken from the derivatives' stencil, is the reference."""
    from cableload_sim.horizon import node_times
    from planners.formation import _FD_STEP, _STENCIL, _slot_derivatives_numpy

    planner = FormationPlanner(paper_config.system, tilt=tilt, wrench=wrench)
    reference = make_reference(trajectory, orientation=orientation)
    times = np.linspace(0.0, 15.0, 301)
    for got, want in zip(
        planner._formation(reference, times), planner._formation_numpy(reference, times), strict=True
    ):
        # the wrench's solves: a regularized 6 x 6 system against a least-norm solution
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 if wrench else 1e-12)
    t = 4.13
    stencil = (node_times(t)[:, None] + _FD_STEP * _STENCIL[None, :]).ravel()
    p, pull = planner._formation_numpy(reference, stencil)
    want = _slot_derivatives_numpy(
        p, pull, planner.masses, planner.gravity, _FD_STEP, planner.rotor_drag, planner.frame_drag
    )
    slots, nodes = planner.slots_and_sample(t, reference)
    for m, name in enumerate(("p", "v", "a", "j", "body_rates")):
        got = np.stack([getattr(slot, name) for slot in slots], axis=1)
        # finite differences amplify rounding: 1e-16 m over h^3 = 8e-9 s^3
        np.testing.assert_allclose(got, want[m], rtol=0, atol=1e-6 * max(1.0, np.abs(want[m]).max()))
    exact = reference.sample(node_times(t))
    for name in ("t", "p", "v", "a", "j", "q", "omega", "alpha"):
        np.testing.assert_array_equal(getattr(nodes, name), getattr(exact, name))


def _wrench_of(planner, reference, times):
    """Force and torque about the load's centre of mass of the formation's cable pulls, and
    what the reference needs: m_L (a - g) and R (I alpha + omega x I omega)."""
    from cableload_sim.rotations import quat_to_matrix

    _, pull = planner._formation(reference, times)
    ref = reference.sample(times)
    R = quat_to_matrix(ref.q)
    arms = np.einsum("kij,nj->kni", R, planner.rho)
    inertia = np.diag(planner.system.load.inertia_matrix())
    body = inertia * ref.alpha + np.cross(ref.omega, inertia * ref.omega)
    need_force = planner.system.load.mass * (ref.a - planner.gravity)
    need_torque = np.einsum("kij,kj->ki", R, body)
    return pull.sum(1), np.cross(arms, pull).sum(1), need_force, need_torque


@pytest.mark.parametrize("uavs", [3, 4, 6])
def test_the_wrench_formation_supplies_the_references_force_and_torque(uavs):
    """Its cables pull the load with the force and the torque about its centre of mass that
    the reference's motion needs (zero-sideslip: it yaws, with angular accelerations), where
    the tilted cone, with the same force, tilts the load; at hover the two are the same."""
    from cableload_sim.params import load_config

    system = load_config(uavs=uavs).system
    reference = make_reference("eight-medium", orientation="zero-sideslip")
    times = np.linspace(3.5, 16.0, 126)
    force, torque, need_force, need_torque = _wrench_of(
        FormationPlanner(system, tilt=True, wrench=True), reference, times
    )
    np.testing.assert_allclose(force, need_force, atol=1e-9)
    np.testing.assert_allclose(torque, need_torque, atol=1e-9)
    assert np.abs(need_torque).max() > 1e-3  # the reference does turn
    force, torque, *_ = _wrench_of(FormationPlanner(system, tilt=True), reference, times)
    np.testing.assert_allclose(force, need_force, atol=1e-9)
    assert np.abs(torque - need_torque).max() > 0.05  # N m: the cone tilts the load
    hover = make_reference("hover")
    t = np.linspace(0.0, 2.0, 5)
    tilt = FormationPlanner(system, tilt=True)._formation(hover, t)
    wrench = FormationPlanner(system, tilt=True, wrench=True)._formation(hover, t)
    for a, b in zip(tilt, wrench, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_two_cables_come_as_close_to_the_wrench_as_two_cables_can():
    """Two cables cannot exert every torque (none about the line through their attachment
    points): the wrench formation is then the least-squares one, nothing singular, and its
    wrench is closer to the reference's than the tilted cone's."""
    from cableload_sim.params import load_config

    system = load_config(uavs=2).system
    reference = make_reference("eight-medium", orientation="zero-sideslip")
    times = np.linspace(3.5, 16.0, 60)
    planner = FormationPlanner(system, tilt=True, wrench=True)
    p, pull = planner._formation(reference, times)
    assert np.isfinite(p).all() and np.isfinite(pull).all()
    errors = []
    for wrench in (False, True):
        force, torque, need_force, need_torque = _wrench_of(
            FormationPlanner(system, tilt=True, wrench=wrench), reference, times
        )
        errors.append(np.sum((force - need_force) ** 2 + (torque - need_torque) ** 2, 1))
    assert np.all(errors[1] <= errors[0] + 1e-12) and errors[1].sum() < 0.5 * errors[0].sum()


def test_the_wrench_formation_keeps_the_load_level_on_a_fast_eight(paper_config):
    """Closed loop on the paper's 3 m eight (2.0-3.4 m/s): the load tilts less than half as
    much as under the tilted cone (measured 1.69 against 4.28 deg over 40 s), as close in
    position."""
    from backends import make_backend
    from backends.runner import run_episode

    reference = make_reference("eight", ax=3.0, ay=3.0, w=0.5)
    result = {}
    for wrench in (False, True):
        result[wrench] = run_episode(
            make_backend("embedded", paper_config),
            FormationPlanner(paper_config.system, tilt=True, wrench=wrench),
            reference,
            20.0,
        ).metrics
    assert result[True]["rmse_orientation_deg"] < 0.5 * result[False]["rmse_orientation_deg"]
    assert result[True]["rmse_position_m"] < result[False]["rmse_position_m"]


def test_the_wrench_formation_told_the_drag_supplies_it_too(paper_config):
    """Made from a config with drag (``from_config``), the wrench formation's cables also
    supply the load's drag at the reference's velocity: ``m_L (a - g) - D`` with
    ``D = -R (c |u| u)``, u the velocity in the load frame (the simulator's per-face drag),
    torque unchanged; its kernel is its NumPy definition; at rest it is the formation without
    drag; the tilted cone is not told (it stays the floor)."""
    from cableload_sim.horizon import node_times
    from cableload_sim.rotations import quat_to_matrix
    from planners.formation import _FD_STEP, _STENCIL, _slot_derivatives_numpy

    assert paper_config.aero.load_drag_coeff > 0.0
    told = FormationPlanner.from_config(paper_config, tilt=True, wrench=True)
    untold = FormationPlanner(paper_config.system, tilt=True, wrench=True)
    assert np.all(told.load_drag > 0.0) and not untold.load_drag.any()
    assert not FormationPlanner.from_config(paper_config, tilt=True).load_drag.any()
    reference = make_reference("eight", ax=3.0, ay=3.0, w=0.5, orientation="zero-sideslip")
    times = np.linspace(3.5, 16.0, 126)
    for got, want in zip(
        told._formation(reference, times), told._formation_numpy(reference, times), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    # the slots' derivatives, the body rates balancing the quadrotors' drag too
    t = 9.37
    stencil = (node_times(t)[:, None] + _FD_STEP * _STENCIL[None, :]).ravel()
    p, pull = told._formation_numpy(reference, stencil)
    want = _slot_derivatives_numpy(
        p, pull, told.masses, told.gravity, _FD_STEP, told.rotor_drag, told.frame_drag
    )
    untold_rates = _slot_derivatives_numpy(p, pull, told.masses, told.gravity, _FD_STEP)[4]
    slots, _ = told.slots_and_sample(t, reference)
    for m, name in enumerate(("p", "v", "a", "j", "body_rates")):
        got = np.stack([getattr(slot, name) for slot in slots], axis=1)
        np.testing.assert_allclose(got, want[m], rtol=0, atol=1e-6 * max(1.0, np.abs(want[m]).max()))
    assert np.abs(want[4] - untold_rates).max() > 1e-3  # rad/s: the drag turns the thrust
    assert np.all(told.rotor_drag > 0.0) and np.all(told.frame_drag > 0.0)
    # the rotor drag linearized as the teacher's model takes it
    from planners.teacher_model import LoadCableModel

    teacher = LoadCableModel(paper_config.system, paper_config.aero)
    np.testing.assert_allclose(told.rotor_drag, teacher._quad_drag[2], rtol=1e-12)
    force, torque, need_force, need_torque = _wrench_of(told, reference, times)
    ref = reference.sample(times)
    R = quat_to_matrix(ref.q)
    airspeed = np.einsum("kji,kj->ki", R, ref.v)
    coeff = paper_config.aero.load_drag(paper_config.system.load)
    drag = np.einsum("kij,kj->ki", R, -coeff * np.abs(airspeed) * airspeed)
    assert np.linalg.norm(drag, axis=1).max() > 0.3  # N, at up to 3.4 m/s
    np.testing.assert_allclose(force, need_force - drag, atol=1e-9)
    np.testing.assert_allclose(torque, need_torque, atol=1e-9)
    hover = make_reference("hover")
    t = np.linspace(0.0, 2.0, 5)
    for a, b in zip(told._formation(hover, t), untold._formation(hover, t), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    with pytest.raises(ValueError, match="aero"):
        FormationPlanner(paper_config.system, tilt=True, aero=paper_config.aero)


def test_telling_the_wrench_formation_the_drag_keeps_the_load_closer(paper_config):
    """Closed loop on the paper's 3 m eight (2.0-3.4 m/s, zero-sideslip), where the load's
    drag reaches 0.5 N: told the drag, the wrench formation flies the load closer in position
    and attitude than not told (measured 0.0135 m / 1.31 deg against 0.0158 / 1.56 over 20 s;
    the load's drag alone 0.0126 / 1.14: here the quadrotors' drag in the body rates costs a
    little, on 9 and 10 of 12 draws of the generalist distribution it gains)."""
    from backends import make_backend
    from backends.runner import run_episode

    reference = make_reference("eight", ax=3.0, ay=3.0, w=0.5, orientation="zero-sideslip")
    result = {}
    for told in (False, True):
        planner = (
            FormationPlanner.from_config(paper_config, tilt=True, wrench=True)
            if told
            else FormationPlanner(paper_config.system, tilt=True, wrench=True)
        )
        result[told] = run_episode(make_backend("embedded", paper_config), planner, reference, 20.0).metrics
    assert result[True]["rmse_orientation_deg"] < 0.9 * result[False]["rmse_orientation_deg"]
    assert result[True]["rmse_position_m"] < 0.9 * result[False]["rmse_position_m"]


def test_the_wrench_formation_needs_the_tilt(paper_config):
    with pytest.raises(ValueError, match="wrench"):
        FormationPlanner(paper_config.system, tilt=False, wrench=True)


def test_the_load_follower_follows_the_transient_error_and_not_the_steady_one():
    from planners.formation import FOLLOW_GAIN, FOLLOW_WASHOUT_S, LoadFollower

    follower = LoadFollower()
    reference = np.array([1.0, 2.0, 1.0])
    np.testing.assert_array_equal(follower.offset(0.0, reference, reference), np.zeros(3))
    step = np.array([0.02, -0.01, 0.0])
    first = follower.offset(0.1, reference + step, reference)
    # the mean moved by dt / washout of the step: the rest is followed at the gain
    np.testing.assert_allclose(first, FOLLOW_GAIN * step * (1.0 - 0.1 / FOLLOW_WASHOUT_S))
    t, offset = 0.1, first
    while t < 10 * FOLLOW_WASHOUT_S:
        t += 0.1
        offset = follower.offset(t, reference + step, reference)
    assert np.linalg.norm(offset) < 1e-3 * np.linalg.norm(first)  # a steady error is left
    # a non-finite observation moves nothing and changes nothing
    np.testing.assert_array_equal(follower.offset(t + 0.1, np.full(3, np.nan), reference), np.zeros(3))
    again = follower.offset(t + 0.1, reference + step, reference)
    np.testing.assert_allclose(again, offset * (1.0 - 0.1 / FOLLOW_WASHOUT_S), atol=1e-12)
    # a time that goes back (a new flight without reset) restarts it
    np.testing.assert_array_equal(follower.offset(0.0, reference + 2 * step, reference), np.zeros(3))
    for gain in (-0.1, 1.0, np.nan):
        with pytest.raises(ValueError, match="gain"):
            LoadFollower(gain)
    with pytest.raises(ValueError, match="washout_s"):
        LoadFollower(washout_s=0.0)
    with pytest.raises(ValueError, match="limit_m"):
        LoadFollower(limit_m=-1.0)


def test_the_load_follower_moves_the_formation_no_further_than_its_limit():
    from planners.formation import FOLLOW_LIMIT_M, LoadFollower

    follower = LoadFollower()
    reference = np.zeros(3)
    follower.offset(0.0, reference, reference)
    far = follower.offset(0.1, np.array([0.0, 3.0, -4.0]), reference)  # a lost load estimate
    assert np.linalg.norm(far) == pytest.approx(FOLLOW_LIMIT_M)
    np.testing.assert_allclose(far / np.linalg.norm(far), [0.0, 0.6, -0.8])


def test_the_follow_formation_moves_every_slot_by_the_followers_offset(paper_config):
    """It is the wrench formation shifted as a whole by ``LoadFollower.offset``; where the
    load has been where the reference is, it is the wrench formation. From the ground it does
    not follow (the load rests while the reference lifts it)."""
    from cableload_sim.physics.simulator import Simulator
    from planners import make_planner
    from planners.formation import FOLLOW_GAIN, FOLLOW_WASHOUT_S

    follow = make_planner("formation-follow", paper_config)
    wrench = make_planner("formation-wrench", paper_config)
    assert follow.name == "formation-follow" and follow.follower is not None
    reference = make_reference("hover")
    sim = Simulator(paper_config)
    state = sim.world_state()
    state = dataclasses.replace(state, load_p=reference.sample(np.array([0.0])).p[0])
    for a, b in zip(follow.plan(state, reference), wrench.plan(state, reference), strict=True):
        np.testing.assert_allclose(a.p, b.p, atol=1e-12)
    push = np.array([0.03, 0.0, -0.01])
    moved = dataclasses.replace(state, t=0.1, load_p=state.load_p + push)
    expected = FOLLOW_GAIN * push * (1.0 - 0.1 / FOLLOW_WASHOUT_S)
    for a, b in zip(follow.plan(moved, reference), wrench.plan(moved, reference), strict=True):
        np.testing.assert_allclose(a.p - b.p, np.broadcast_to(expected, a.p.shape), atol=1e-12)
        for name in ("v", "a", "j", "body_rates"):
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), atol=1e-12)
    lifting = SimpleNamespace(climb=lambda times: None)  # a reference from the ground
    np.testing.assert_array_equal(
        follow.follow_offset(0.2, state.load_p + 10 * push, state.load_p, lifting), np.zeros(3)
    )
    follow.reset()
    assert follow.follower.mean is None
    with pytest.raises(ValueError, match="follow"):
        FormationPlanner(paper_config.system, tilt=True, follow=True)


def test_following_the_load_damps_its_swing(paper_config):
    """Closed loop on a random loop (seed 7) flown at 1.5 m/s with zero sideslip: open loop,
    the swing its turns excite is not damped; following the load's
    transient error halves the load's error (measured 0.0086 m / 0.84 deg against
    0.0043 / 0.45 over 20 s)."""
    from backends import make_backend
    from backends.runner import run_episode
    from planners import make_planner

    reference = make_reference("loop", orientation="zero-sideslip", seed=7, speed=1.5)
    result = {
        name: run_episode(
            make_backend("embedded", paper_config), make_planner(name, paper_config), reference, 20.0
        ).metrics
        for name in ("formation-wrench", "formation-follow")
    }
    follow, wrench = result["formation-follow"], result["formation-wrench"]
    assert follow["status"] == "completed"
    assert follow["rmse_position_m"] < 0.7 * wrench["rmse_position_m"]
    assert follow["rmse_orientation_deg"] < 0.7 * wrench["rmse_orientation_deg"]
