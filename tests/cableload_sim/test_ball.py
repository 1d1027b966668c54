"""The sloshing ball: wall contact against the twin, momentum conservation, the start."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cableload_sim.params import BallParams, ConfigError, config_from_dict, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.kernels.ball import ball_forces
from cableload_sim.physics.simulator import Simulator
from cableload_sim.rotations import quat_to_matrix

sys.path.insert(0, str(Path(__file__).parent))
import numpy_twins as twin  # noqa: E402
from test_dynamics import NO_CONTROLLER, momenta_and_energy, spinning_free_system  # noqa: E402


def model_with_ball(system, ball):
    return layout.pack_model(system, None, ball)


def kernel_ball_forces(x, model, n):
    R = np.empty((n + 1, 9))
    for b in range(n + 1):
        R[b] = quat_to_matrix(x[layout.body_offset(b) + 3 : layout.body_offset(b) + 7]).ravel()
    force = np.zeros((n + 2, 3))
    torque = np.zeros((n + 2, 3))
    ball_forces(x, model, n, R, force, torque)
    return force[n + 1], force[0], torque[0]


@pytest.mark.parametrize("friction", [0.0, 0.4])
def test_ball_contact_matches_twin(friction):
    """Random load poses, ball places inside, touching and pressing into walls and corners,
    random velocities, a box off the centre of mass: kernel and twin agree to rounding."""
    rng = np.random.default_rng(31)
    config = load_config(overrides=["mismatch.load_com_offset=[0.03, -0.02, 0.01]"])
    system = config.mismatch.apply(config.system)
    ball = BallParams(enabled=True, friction=friction)
    model = model_with_ball(system, ball)
    n = 3
    half = np.array(system.load.size) / 2
    touched = 0
    for _ in range(40):
        x = np.zeros(layout.state_size(n, ball=True))
        q = rng.normal(size=4)
        x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4] = q / np.linalg.norm(q)
        x[:3] = rng.normal(size=3)
        x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = rng.normal(size=3)
        x[layout.LOAD_RATE : layout.LOAD_RATE + 3] = rng.normal(size=3)
        for i in range(n):
            x[layout.quad_offset(i) + 3] = 1.0
        R = quat_to_matrix(x[3:7])
        u = rng.uniform(-1.0, 1.0, 3) * (half - ball.radius + 0.01)
        o = layout.ball_offset(n)
        x[o : o + 3] = x[:3] + R @ (u + system.load.box_centre)
        x[o + 3 : o + 6] = rng.normal(size=3)
        got = kernel_ball_forces(x, model, n)
        want = twin.ball_forces(x, model, n)
        touched += np.abs(want[1]).max() > 0
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)
    assert touched >= 10


def ball_momenta(system, x, ball):
    o = layout.ball_offset(system.n_uavs)
    linear, angular, _ = momenta_and_energy(system, x[: layout.ball_offset(system.n_uavs)])
    p, v = x[o : o + 3], x[o + 3 : o + 6]
    return linear + ball.mass * v, angular + np.cross(p, ball.mass * v)


def test_momentum_conserved_with_the_ball_bouncing_in_the_box():
    """No gravity, thrust or external force: the spinning system with the ball thrown across
    the box, bouncing on its walls (stiff damped contact, friction) for 5 s: total linear and
    angular momentum of load, ball, quadrotors and cables conserved to rounding."""
    system, x0 = spinning_free_system(np.random.default_rng(5), n=3)
    ball = BallParams(enabled=True, friction=0.3)
    n = 3
    x = np.zeros(layout.state_size(n, ball=True))
    x[: x0.size] = x0
    o = layout.ball_offset(n)
    x[o : o + 3] = x0[:3] + [0.1, 0.05, 0.0]
    x[o + 3 : o + 6] = x0[layout.LOAD_VEL : layout.LOAD_VEL + 3] + [2.0, -1.5, 0.7]
    model = model_with_ball(system, ball)
    log_x, _, _ = run_physics_model(system, model, x, 5000)
    lin0, ang0 = ball_momenta(system, x, ball)
    worst_lin = max(np.linalg.norm(ball_momenta(system, xs, ball)[0] - lin0) for xs in log_x)
    worst_ang = max(np.linalg.norm(ball_momenta(system, xs, ball)[1] - ang0) for xs in log_x)
    assert worst_lin < 1e-10 * np.linalg.norm(lin0) + 1e-11
    assert worst_ang < 1e-10 * np.linalg.norm(ang0)
    # it did bounce: the ball's velocity relative to the load changed direction many times
    rel = log_x[:, o + 3 : o + 6] - log_x[:, layout.LOAD_VEL : layout.LOAD_VEL + 3]
    assert np.sum(np.diff(np.sign(rel[:, 0])) != 0) >= 4
    print(
        f"momentum error: linear {worst_lin:.2e} of {np.linalg.norm(lin0):.3g}, angular "
        f"{worst_ang:.2e} of {np.linalg.norm(ang0):.3g}"
    )


def run_physics_model(system, model, x, steps, h=1e-3, log_every=10):
    """Step only the physics of ``model`` (controllers off, rotors stopped)."""
    n = system.n_uavs
    plans, status = layout.empty_plans(n)
    fcache, fvalid = layout.empty_force_cache(n)
    log_x = np.empty((steps // log_every, x.size))
    sys_ = layout.SimModel(
        physics=model,
        nominal=model,
        gains=np.zeros(layout.G_SIZE),
        n=n,
        h=h,
        decimation=NO_CONTROLLER,
        wind=layout.still_air(),
        wind_dt=1.0,
    )
    data = layout.SimData(
        x=x.copy(),
        ctrl=np.zeros((n, layout.CS_SIZE)),
        plans=plans,
        plan_status=status,
        counters=np.zeros((n, layout.K_SIZE)),
        stats=layout.new_stats(n),
        fcache=fcache,
        fvalid=fvalid,
    )
    kernels.advance(
        sys_, data, 1, steps, np.zeros((1, 6)), layout.SimLog(log_every, log_x, np.empty((log_x.shape[0], n)))
    )
    return log_x, None, None


def test_the_ball_rests_on_the_floor_of_a_hovering_load():
    """The start: the load's hover carrying the ball's weight too, the ball pressed into the
    floor by its weight over the contact stiffness; 2 s later it still lies there."""
    config = load_config(overrides=["ball.enabled=true"])
    sim = Simulator(config)
    o = layout.ball_offset(3)
    rel0 = sim.x[o : o + 3] - sim.x[:3]
    assert rel0[2] == pytest.approx(0.05 - 0.075 - 0.6 * 9.81 / 2e4)
    sim.advance(2000)
    rel = sim.x[o : o + 3] - sim.x[:3]
    assert np.abs(rel - rel0).max() < 2e-3
    assert abs(sim.x[2] - 1.0) < 0.01


@pytest.mark.parametrize(
    "table, match",
    [
        ({"radius": 0.08}, r"ball\.radius: expected a ball that fits in the load's box"),
        ({"stiffness": 1e6}, r"ball\.stiffness: 1000000\.0 N/m on 0\.6 kg bounces at 1291 rad/s"),
        ({"mass": 0.0}, r"ball\.mass: expected a positive number, got 0\.0"),
        ({"enabled": 1}, r"ball\.enabled: expected true or false"),
    ],
)
def test_bad_ball_is_refused(table, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({"load": {}, "ball": {"enabled": True, **table}})
