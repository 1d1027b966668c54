"""The student: decentralization, exact derivatives, ONNX parity, bad input, checkpoints."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from cableload_sim.errors import UsageError
from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference
from learners.export import (
    IncompatibleCheckpoint,
    OnnxPolicy,
    TorchPolicy,
    export_policy,
    load_checkpoint,
    load_policy,
    save_checkpoint,
)
from learners.network import HORIZON_S, NetworkConfig, StudentNet
from planners import make_planner
from planners.student import StudentPlanner


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    net = StudentNet(NetworkConfig(history=4))
    # realistic output scales so the plans are within bounds
    stats = {"out_std": torch.tensor([0.5] * 3 + [0.2] * 3 + [0.5] * 6)}
    net.set_normalization(stats)
    return net.eval()


def hover_state(config, seed=0):
    sim = Simulator(config)
    rng = np.random.default_rng(seed)
    sim.advance(200)
    return sim, rng


def test_plan_of_one_quadrotor_ignores_every_other_quadrotor(paper_config, net):
    """Changing every other quadrotor's state (position, velocity, attitude, rates, rotors,
    and their cables' tensions) leaves quadrotor i's plan bit-for-bit unchanged."""
    reference = make_reference("eight-medium")
    sim, rng = hover_state(paper_config)
    a = StudentPlanner.from_config(paper_config, TorchPolicy(net), 4)
    b = StudentPlanner.from_config(paper_config, TorchPolicy(net), 4)
    for _ in range(5):
        state = sim.world_state()
        other = dataclasses.replace(
            state,
            uav_p=state.uav_p.copy(),
            uav_v=state.uav_v.copy(),
            uav_q=state.uav_q.copy(),
            uav_omega=state.uav_omega.copy(),
            rotor_speeds=state.rotor_speeds * 1.3,
            cable_tension=state.cable_tension * 2.0,
            cable_dir=state.cable_dir[::-1].copy(),
        )
        other.uav_p[1:] += rng.normal(size=(2, 3))
        other.uav_v[1:] += rng.normal(size=(2, 3))
        other.uav_omega[1:] += rng.normal(size=(2, 3))
        other.uav_q[1:] = np.roll(other.uav_q[1:], 1, axis=1)
        plans_a = a.plan(state, reference)
        plans_b = b.plan(other, reference)
        for field in ("t", "p", "v", "a", "j", "body_rates"):
            np.testing.assert_array_equal(getattr(plans_a[0], field), getattr(plans_b[0], field))
        assert not np.array_equal(plans_a[1].p, plans_b[1].p)  # the others did change
        for i, plan in enumerate(plans_a):
            sim.send_plan(i, plan)
        sim.advance(100)


def test_pinn_velocity_and_acceleration_are_exact_derivatives(net):
    """The decoder's v, a, j are the time derivatives of its p, v, a (finite differences in
    the node time, float64)."""
    net64 = StudentNet(net.config).double()
    net64.load_state_dict(net.state_dict())
    rng = np.random.default_rng(1)
    ego = torch.tensor(rng.normal(size=(3, 4, 18)))
    load = torch.tensor(rng.normal(size=(3, 4, 12)))
    ref = torch.tensor(rng.normal(size=(3, 21, 18)))
    prior = torch.zeros(3, 21, 15, dtype=torch.float64)  # the decoder's part alone
    base = net64.tau.clone()
    h = 1e-5
    outs = []
    for shift in (-h, 0.0, h):
        net64.tau.copy_(base + shift / HORIZON_S)
        outs.append(net64(ego, load, ref, prior))
    for value, derivative in (("p", "v"), ("v", "a"), ("a", "j")):
        numeric = (outs[2][value] - outs[0][value]) / (2 * h)
        scale = 1.0 + outs[1][derivative].abs().max()
        assert (numeric - outs[1][derivative]).abs().max() < 1e-5 * scale


def test_onnx_gives_the_torch_outputs(tmp_path, net):
    export_policy(net, tmp_path)
    torch_policy, history, _ = load_policy(tmp_path, "torch")
    onnx_policy, _, _ = load_policy(tmp_path, "onnx")
    assert isinstance(onnx_policy, OnnxPolicy) and history == 4
    rng = np.random.default_rng(2)
    for batch in (1, 3):
        ego = rng.normal(size=(batch, 4, 18))
        load = rng.normal(size=(batch, 4, 12))
        ref = rng.normal(size=(batch, 21, 18))
        prior = rng.normal(size=(batch, 21, 15))
        a = torch_policy(ego, load, ref, prior)
        b = onnx_policy(ego, load, ref, prior)
        for key in ("p", "v", "a", "j", "w"):
            np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-5)


def test_non_finite_observation_gives_a_hover_hold(paper_config, net):
    reference = make_reference("eight-medium")
    sim, _ = hover_state(paper_config)
    planner = StudentPlanner.from_config(paper_config, TorchPolicy(net), 4)
    state = sim.world_state()
    planner.plan(state, reference)
    broken = dataclasses.replace(state, uav_v=state.uav_v.copy(), load_q=state.load_q * np.nan)
    plans = planner.plan(broken, reference)
    assert planner.report()["bad_observations"] == 3
    for i, plan in enumerate(plans):
        assert plan.is_finite()
        np.testing.assert_allclose(plan.p, np.repeat(state.uav_p[i][None], 21, axis=0))
        assert not plan.v.any() and not plan.a.any()
    # one quadrotor's own state broken: only its plan holds
    own = dataclasses.replace(state, uav_p=state.uav_p.copy())
    own.uav_p[2, 0] = np.inf
    plans = planner.plan(own, reference)
    assert planner.report()["bad_observations"] == 4
    assert plans[2].is_finite() and not plans[2].v.any()


def test_incompatible_checkpoint_fails_clearly(tmp_path, net):
    path = tmp_path / "student.pt"
    save_checkpoint(path, net)
    data = torch.load(path, weights_only=False)
    data["interface"]["ego_features"] = 99
    torch.save(data, path)
    with pytest.raises(IncompatibleCheckpoint, match="ego_features"):
        load_checkpoint(path)
    data["interface"]["ego_features"] = 18
    data["network"]["channels"] = 8
    torch.save(data, path)
    with pytest.raises(IncompatibleCheckpoint, match="weights do not fit"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")


def test_mlp_baseline_decoder_runs_and_is_not_exactly_consistent():
    torch.manual_seed(3)
    mlp = StudentNet(NetworkConfig(history=4, decoder="mlp")).eval()
    out = mlp(torch.randn(2, 4, 18), torch.randn(2, 4, 12), torch.randn(2, 21, 18), torch.randn(2, 21, 15))
    for key in ("p", "v", "a", "j", "w"):
        assert out[key].shape == (2, 21, 3)
    # its v is a separate output, not the derivative of its p
    t = torch.tensor(np.linspace(0, 1, 21))
    assert out["v"].abs().sum() > 0 and t.numel() == 21
    with pytest.raises(ValueError, match="decoder"):
        NetworkConfig(decoder="transformer")


def _turned_state(state, angle: float):
    """The whole system turned by ``angle`` about the world's vertical through the origin."""
    from cableload_sim.rotations import quat_from_yaw, quat_multiply

    c, s = np.cos(angle), np.sin(angle)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    turn = quat_from_yaw(angle)
    return dataclasses.replace(
        state,
        load_p=R @ state.load_p,
        load_v=R @ state.load_v,
        load_q=quat_multiply(turn, state.load_q),
        uav_p=state.uav_p @ R.T,
        uav_v=state.uav_v @ R.T,
        uav_q=quat_multiply(turn, state.uav_q),
        cable_dir=state.cable_dir @ R.T,
    ), R


def test_the_load_yaw_frame_sees_a_turned_scene_as_the_same(paper_config):
    """Turning the whole scene (state and reference) about the vertical leaves the load-yaw
    encoding unchanged: exactly, but for the quadrotors' body rates (they head along world +x,
    so their body rates turn with the scene only to first order in the tilt)."""
    sim, _ = hover_state(paper_config)
    plain = make_reference("eight-medium", orientation="zero-sideslip")
    turned = make_reference("eight-medium", orientation="zero-sideslip", rotate_deg=70.0)
    never = lambda *args: None  # noqa: E731
    for frame in ("load-yaw", "world"):
        a = StudentPlanner.from_config(paper_config, never, 4, frame=frame)
        b = StudentPlanner.from_config(paper_config, never, 4, frame=frame)
        state = sim.world_state()
        other, _ = _turned_state(state, np.radians(70.0))
        for ea, eb in zip(a.observe(state, plain), b.observe(other, turned)):
            difference = max(
                np.abs(ea.ego - eb.ego).max(),
                np.abs(ea.load - eb.load).max(),
                np.abs(ea.ref - eb.ref).max(),
                np.abs(ea.prior[:, :12] - eb.prior[:, :12]).max(),
            )
            if frame == "load-yaw":
                # (the quadrotors' own body rates, turned with the frame, are ~1e-7 in hover)
                assert difference < 1e-6
                assert np.abs(ea.prior[:, 12:] - eb.prior[:, 12:]).max() < 0.05
            else:
                assert difference > 0.5


def test_the_load_yaw_frame_turns_the_plans_back_to_the_world(paper_config, net):
    """The same features seen in a frame turned by 70 deg give plans turned by 70 deg."""
    sim, _ = hover_state(paper_config)
    student = StudentPlanner.from_config(paper_config, TorchPolicy(net), 4, frame="load-yaw")
    encoded = student.observe(sim.world_state(), make_reference("eight-medium"))
    c, s = np.cos(np.radians(70.0)), np.sin(np.radians(70.0))
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    turned = [dataclasses.replace(e, axes=R @ e.axes, origin=R @ e.origin) for e in encoded]
    positions = sim.world_state().uav_p
    for plan, other in zip(student.act(encoded, positions), student.act(turned, positions @ R.T)):
        for name in ("p", "v", "a", "j", "body_rates"):
            np.testing.assert_allclose(getattr(plan, name) @ R.T, getattr(other, name), atol=1e-9)


@pytest.mark.parametrize("frame, from_state", [("world", False), ("load-yaw", False), ("load-yaw", True)])
def test_compiled_encoding_and_output_match_their_numpy_definitions(paper_config, net, frame, from_state):
    """A decision's compiled encoding (short history repeated, then full) and its output in
    world components with the bounds check give what the NumPy expressions give, to rounding;
    an output out of bounds or non-finite is refused as ``PlanBounds.violation`` refuses it."""
    from planners.base import PlanBounds, violation_code
    from planners.formation import slot_of
    from planners.student import _encode_numpy, _output, trajectory_from_output

    reference = make_reference("eight-medium", orientation="zero-sideslip")
    sim, rng = hover_state(paper_config)
    planner = StudentPlanner.from_config(
        paper_config, TorchPolicy(net), 4, frame=frame, prior_from_state=from_state
    )
    seen = []
    for step in range(6):
        state = sim.world_state()
        state = dataclasses.replace(
            state,
            t=state.t + 7.0,  # past the start ramp
            load_q=np.array([np.cos(0.4), 0.05, -0.03, np.sin(0.4)]),
        )
        obs = state.local(1, planner.rho[1], planner.attach[1])
        seen.append(obs)
        encoded = planner.observe_local(1, obs, reference)
        times, slots, sample = planner.prior.slot_arrays_and_sample(obs.t, reference)
        slot = slot_of(times, slots, 1)
        expected = _encode_numpy(seen[-4:], 4, frame, sample, slot, planner.prior, from_state)
        for name in ("ego", "load", "ref", "prior", "axes"):
            np.testing.assert_allclose(
                getattr(encoded, name),
                getattr(expected, name),
                rtol=1e-12,
                atol=1e-12,
                err_msg=f"{name}, step {step}",
            )
        sim.advance(100)
    e = encoded
    bounds = PlanBounds()
    args = (
        np.asarray(bounds.position_min),
        np.asarray(bounds.position_max),
        bounds.max_speed**2,
        bounds.max_acceleration**2,
        bounds.max_body_rate**2,
    )
    cases = {"ok": 0.3, "fast": 40.0, "far": 80.0, "nan": np.nan}
    for case, scale in cases.items():
        x = scale * rng.uniform(-1.0, 1.0, (5, 21, 3)) / np.array([1, 1, 2, 4, 1])[:, None, None]
        residual = 0.01 * rng.normal(size=(5, 21, 3))
        world = np.empty((5, 21, 3))
        _output(x, residual, e.axes, frame != "world", e.origin, world)
        broken = violation_code(times, *world, *args)
        plan = trajectory_from_output(e.t, e.origin, *(x - residual), axes=e.axes)
        assert bool(broken) == (bounds.violation(plan) is not None), case
        if case == "ok":
            assert broken == 0
            for m, name in enumerate(("p", "v", "a", "j", "body_rates")):
                np.testing.assert_allclose(world[m], getattr(plan, name), rtol=1e-12, atol=1e-12)
        else:
            assert broken > 0, case


def _zero_initialized_student(config, prior: str):
    """A student on ``prior`` whose residual decoder starts at zero, that formation as
    ``make_planner`` makes it, a reference and a state at rest."""
    net = StudentNet(NetworkConfig(history=4, zero_init=True, frame="load-yaw", prior=prior)).eval()
    planner = StudentPlanner.from_config(config, TorchPolicy(net), 4, frame="load-yaw", prior=prior)
    sim, _ = hover_state(config)
    return (
        planner,
        make_planner(prior, config),
        make_reference("eight-medium", orientation="zero-sideslip"),
        sim.world_state(),
    )


def _assert_anchored_slots(planner, plans, slots, positions):
    """Each plan is its slot anchored at the quadrotor's position (float32 network)."""
    for i, plan in enumerate(plans):
        expected = planner.prior.anchored(slots[i], positions[i])
        for name in ("p", "v", "a", "j"):
            np.testing.assert_allclose(getattr(plan, name), getattr(expected, name), atol=1e-5, err_msg=name)


def test_a_zero_initialized_student_plans_its_prior_exactly(paper_config):
    """``network.zero_init``: before any training the residual decoder adds nothing, so the
    student's plans are its prior's (here the wrench formation, anchored at each quadrotor,
    told the load's drag as ``make_planner("formation-wrench")`` is)."""
    planner, formation, reference, state = _zero_initialized_student(paper_config, "formation-wrench")
    np.testing.assert_array_equal(planner.prior.load_drag, formation.load_drag)
    assert np.all(formation.load_drag > 0.0)
    plans = planner.act(planner.observe(state, reference), state.uav_p)
    _assert_anchored_slots(planner, plans, planner.prior.slot_plans(state.t, reference), state.uav_p)


def test_a_student_on_the_follow_prior_follows_the_load_it_observes(paper_config):
    """With ``prior = "formation-follow"`` each quadrotor keeps its own ``LoadFollower`` fed
    the load positions it observes: a zero-initialized student plans the follow formation
    (``make_planner("formation-follow")``) anchored at each quadrotor, flight after flight."""
    planner, formation, reference, state = _zero_initialized_student(paper_config, "formation-follow")
    assert planner.prior.name == "formation-follow" and len(planner.followers) == 3
    for _flight in range(2):
        moved = 0.0
        for k in range(4):
            pushed = dataclasses.replace(
                state, t=state.t + 0.1 * k, load_p=state.load_p + [0.01 * k, -0.005 * k, 0.0]
            )
            plans = planner.plan(pushed, reference)
            followed = formation.plan(pushed, reference)
            _assert_anchored_slots(planner, plans, followed, pushed.uav_p)
            still = planner.prior.slot_plans(pushed.t, reference)  # not following
            moved = max(moved, np.abs(followed[0].p - still[0].p).max())
        assert moved > 1e-3  # the followers did move the plans
        planner.reset()
        formation.reset()


def test_torch_policy_runs_on_one_thread_and_restores_the_count(net, monkeypatch):
    """A policy call runs on its own thread count (one by default), whatever torch's count is
    around it, and leaves that count as it found it."""
    seen = []
    policy = TorchPolicy(net)

    def spy(batch):
        def fn(*inputs):
            seen.append(torch.get_num_threads())
            return {k: torch.zeros(batch, 1) for k in ("p", "v", "a", "j", "w")}

        return fn

    monkeypatch.setattr(policy, "_fn", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        zeros = np.zeros((1, 4, 1))
        policy(zeros, zeros, zeros, zeros)
        assert seen == [1]
        assert torch.get_num_threads() == 2
        TorchPolicy(net, threads=2)
        with pytest.raises(UsageError, match="threads: expected a whole number >= 1, got 0"):
            TorchPolicy(net, threads=0)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("ego_inputs", ["pose", "none"])
def test_hidden_ego_inputs_do_not_reach_the_plan(tmp_path, ego_inputs):
    """``network.ego_inputs``: what is hidden changes no output (its ONNX export too); what is
    kept does; an old checkpoint without the setting loads as ``full``; a bad value is refused."""
    from learners.network import EGO_INPUTS
    from planners.student import EGO_FEATURES, LOAD_FEATURES, PRIOR_FEATURES, REF_FEATURES

    torch.manual_seed(0)
    net = StudentNet(NetworkConfig(history=4, ego_inputs=ego_inputs))
    gen = torch.Generator().manual_seed(1)
    inputs = [
        torch.randn(2, 4, EGO_FEATURES, generator=gen),
        torch.randn(2, 4, LOAD_FEATURES, generator=gen),
        torch.randn(2, 21, REF_FEATURES, generator=gen),
        torch.randn(2, 21, PRIOR_FEATURES, generator=gen),
    ]
    hidden = [k for k in range(EGO_FEATURES) if k not in EGO_INPUTS[ego_inputs]]
    changed = inputs[0].clone()
    changed[..., hidden] += 5.0
    with torch.no_grad():
        before = net(*inputs)["p"]
        assert torch.equal(net(changed, *inputs[1:])["p"], before)
        kept = inputs[0].clone()
        kept[..., 0] += 5.0  # the position, when kept
        moved = not torch.allclose(net(kept, *inputs[1:])["p"], before)
    assert moved == (ego_inputs == "pose")
    export_policy(net, tmp_path)
    policy, _, _ = load_policy(tmp_path, "onnx")
    numpy_inputs = [x.numpy() for x in inputs]
    out = policy(changed.numpy(), *numpy_inputs[1:])["p"]
    assert out == pytest.approx(policy(*numpy_inputs)["p"], abs=1e-6)
    assert "ego_mask" not in net.state_dict()  # derived from the config, so old checkpoints load
    with pytest.raises(ValueError, match=r"ego_inputs: expected one of full, pose, none, got 'speed'"):
        NetworkConfig(ego_inputs="speed")


def test_error_inputs_carry_the_load_and_slot_errors_at_their_own_scale(paper_config):
    """With ``error_inputs`` the load stream's last ``ERROR_FEATURES`` columns are, per past
    observation, the load's position and attitude errors to the reference at that time and the
    quadrotor's position and velocity less its slot's, in the frame's axes; the oldest repeats
    while the history is short, as the other streams' rows do."""
    from cableload_sim.rotations import quat_from_yaw, quat_multiply
    from cableload_sim.trajectories import Hover
    from planners.student import ERROR_FEATURES, LOAD_FEATURES

    sim, _ = hover_state(paper_config)
    state = sim.world_state()
    reference = Hover(state.load_p.copy())
    never = lambda *args: None  # noqa: E731
    for frame in ("world", "load-yaw"):
        planner = StudentPlanner.from_config(paper_config, never, 4, frame=frame, error_inputs=True)
        plain = StudentPlanner.from_config(paper_config, never, 4, frame=frame)
        offsets = ([0.002, -0.001, 0.0005], [0.004, 0.003, -0.001])
        yaw = 0.02  # rad: the load turned about the vertical, away from the reference's yaw
        for k, offset in enumerate(offsets):
            moved = dataclasses.replace(
                state,
                t=state.t + 0.1 * k,
                load_p=state.load_p + offset,
                load_q=quat_multiply(quat_from_yaw(yaw * (k + 1)), state.load_q),
            )
            encoded = planner.observe(moved, reference)[0]
            base = plain.observe(moved, reference)[0]
        assert encoded.load.shape == (4, LOAD_FEATURES + ERROR_FEATURES)
        np.testing.assert_array_equal(encoded.load[:, :LOAD_FEATURES], base.load)
        errors = encoded.load[:, LOAD_FEATURES:] @ np.kron(np.eye(4), encoded.axes.T)  # to world
        slots = planner.prior.slot_plans(moved.t, reference)
        np.testing.assert_allclose(errors[-1, 0:3], offsets[1], atol=1e-12)
        np.testing.assert_allclose(errors[-1, 3:6], [0.0, 0.0, 2 * yaw], atol=1e-9)
        np.testing.assert_allclose(errors[-1, 6:9], moved.uav_p[0] - slots[0].p[0], atol=1e-12)
        np.testing.assert_allclose(errors[-1, 9:12], moved.uav_v[0] - slots[0].v[0], atol=1e-12)
        np.testing.assert_allclose(errors[-2, 0:3], offsets[0], atol=1e-12)
        np.testing.assert_allclose(errors[-2, 3:6], [0.0, 0.0, yaw], atol=1e-9)
        np.testing.assert_array_equal(errors[0], errors[-2])  # two held: the oldest repeats


def test_a_network_with_error_inputs_reads_them_and_exports_them(tmp_path, paper_config):
    """``network.error_inputs``: the network reads the error columns (its ONNX export and
    traced policy too, giving the same plans), records them in its interface, and flies in a
    student planner; a checkpoint without them still loads as before, and one that claims them
    with an interface that lacks them is refused."""
    from planners.student import ERROR_FEATURES, LOAD_FEATURES

    torch.manual_seed(0)
    net = StudentNet(NetworkConfig(history=4, error_inputs=True)).eval()
    gen = torch.Generator().manual_seed(1)
    inputs = [
        torch.randn(2, 4, 18, generator=gen),
        torch.randn(2, 4, LOAD_FEATURES + ERROR_FEATURES, generator=gen),
        torch.randn(2, 21, 18, generator=gen),
        torch.randn(2, 21, 15, generator=gen),
    ]
    changed = inputs[1].clone()
    changed[..., LOAD_FEATURES:] += 1.0
    with torch.no_grad():
        assert not torch.allclose(net(*inputs)["p"], net(inputs[0], changed, *inputs[2:])["p"])
    export_policy(net, tmp_path)
    onnx, history, data = load_policy(tmp_path, "onnx")
    assert history == 4 and data["interface"]["error_features"] == ERROR_FEATURES
    traced, _, _ = load_policy(tmp_path, "torch")
    numpy_inputs = [x.numpy() for x in inputs]
    np.testing.assert_allclose(onnx(*numpy_inputs)["p"], traced(*numpy_inputs)["p"], atol=1e-5)
    planner = StudentPlanner.from_config(paper_config, traced, 4, error_inputs=True)
    sim, _ = hover_state(paper_config)
    plans = planner.plan(sim.world_state(), make_reference("eight-medium"))
    assert all(np.isfinite(plan.p).all() for plan in plans)
    plain = StudentNet(NetworkConfig(history=4))
    save_checkpoint(tmp_path / "plain.pt", plain)
    assert load_checkpoint(tmp_path / "plain.pt")[0].config.error_inputs is False
    claimed = torch.load(tmp_path / "student.pt", weights_only=True)
    del claimed["interface"]["error_features"]
    torch.save(claimed, tmp_path / "claimed.pt")
    with pytest.raises(IncompatibleCheckpoint, match="error_features"):
        load_checkpoint(tmp_path / "claimed.pt")
    with pytest.raises(ValueError, match="error_inputs: expected true or false, got 'yes'"):
        NetworkConfig(error_inputs="yes")  # type: ignore[arg-type]


def test_error_inputs_are_normalized_by_their_own_spread():
    """The error columns keep their own scale (floored at ``ERROR_STD_FLOOR``, not the
    features' 0.1): millimetre errors reach the network at about unit size."""
    from learners.dagger import ERROR_STD_FLOOR, INPUT_STD_FLOOR, data_stats
    from planners.student import ERROR_FEATURES, LOAD_FEATURES

    rng = np.random.default_rng(0)
    samples = 500
    load = rng.normal(size=(samples, 4, LOAD_FEATURES + ERROR_FEATURES)) * 0.002
    data = {
        "ego": rng.normal(size=(samples, 4, 18)),
        "load": load,
        "ref": rng.normal(size=(samples, 21, 18)),
        "prior": rng.normal(size=(samples, 21, 15)),
        "target": rng.normal(size=(samples, 21, 12)),
    }
    stats = data_stats(data)
    assert np.all(stats["load_std"][:LOAD_FEATURES] == INPUT_STD_FLOOR)
    assert np.all(stats["load_std"][LOAD_FEATURES:] > ERROR_STD_FLOOR)
    assert np.all(stats["load_std"][LOAD_FEATURES:] < 0.0025)


def test_a_prior_from_the_state_starts_at_the_velocity_and_joins_its_slot():
    """``prior_from_state``: the anchored slot starts at the quadrotor's position and velocity,
    its v, a and j are the derivatives of its p, it joins the slot (at the horizon's end, six
    time constants on, the gap is under 5 % of its largest), and started at the velocity the
    position-only prior has there, it is that prior."""
    from cableload_sim.horizon import node_times
    from cableload_sim.params import load_config
    from cableload_sim.physics.world import UavTrajectory
    from planners.formation import FormationPlanner

    config = load_config(None)
    formation = FormationPlanner(config.system, tilt=True, converge_s=0.3)
    t = node_times(0.0)
    slot = UavTrajectory(
        t,
        np.stack([0.5 * t, np.sin(t), 1.0 + 0 * t], axis=1),
        np.stack([0.5 + 0 * t, np.cos(t), 0 * t], axis=1),
        np.stack([0 * t, -np.sin(t), 0 * t], axis=1),
        np.stack([0 * t, -np.cos(t), 0 * t], axis=1),
        np.zeros((t.size, 3)),
    )
    position, velocity = np.array([0.02, -0.01, 1.03]), np.array([0.3, 1.4, -0.2])
    plan = formation.anchored(slot, position, velocity)
    np.testing.assert_allclose(plan.p[0], position, atol=1e-15)
    np.testing.assert_allclose(plan.v[0], velocity, atol=1e-15)
    fine = np.linspace(0.0, t[-1], 4001)
    dense = formation.anchored(
        UavTrajectory(
            fine,
            np.stack([0.5 * fine, np.sin(fine), 1.0 + 0 * fine], axis=1),
            np.stack([0.5 + 0 * fine, np.cos(fine), 0 * fine], axis=1),
            np.stack([0 * fine, -np.sin(fine), 0 * fine], axis=1),
            np.stack([0 * fine, -np.cos(fine), 0 * fine], axis=1),
            np.zeros((fine.size, 3)),
        ),
        position,
        velocity,
    )
    for low, high in (("p", "v"), ("v", "a"), ("a", "j")):
        derivative = np.gradient(getattr(dense, low), fine, axis=0)
        np.testing.assert_allclose(derivative[5:-5], getattr(dense, high)[5:-5], atol=2e-3, err_msg=high)
    gap = np.linalg.norm(plan.p - slot.p, axis=1)
    assert gap[-1] < 0.05 * gap.max()
    plain = formation.anchored(slot, position)
    same = formation.anchored(slot, position, plain.v[0])
    for name in ("p", "v", "a", "j"):
        np.testing.assert_allclose(getattr(same, name), getattr(plain, name), atol=1e-12, err_msg=name)
    with pytest.raises(ValueError, match="prior_from_state: expected true or false, got 1"):
        NetworkConfig(prior_from_state=1)  # type: ignore[arg-type]
