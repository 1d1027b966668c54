"""The numba kernels against their plain-NumPy twins (``numpy_twins.py``), with stated tolerances.

How errors are measured: norm-wise per block of like quantities (positions, quaternions, ...),
``max |kernel - twin| <= rel * max(max |twin|, floor)``; the floor is a physical scale used
where a block may be near zero.

Why not bit-equality: the kernels are compiled with some fast-math flags (approximate
reciprocals and library functions, no signed zeros; not FMA contraction or reassociation, see
``kernels.FASTMATH``), and the twins use equivalent but different formulas (matrix products,
exact sin/cos instead of Taylor series, another Shepperd branch order, ...). Both therefore
agree to rounding, about 1e-16 relative per operation; the tolerances below leave roughly 100x
margin over the errors measured on these states, and each says where its error comes from.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from cableload_sim.horizon import N_NODES, node_offsets
from cableload_sim.params import MismatchParams, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.rotations import quat_exp, quat_multiply, quat_to_matrix

sys.path.insert(0, str(Path(__file__).parent))
import numpy_twins as twin  # noqa: E402

N_UAVS = (2, 3, 4, 6)

# --- tolerances ------------------------------------------------------------------------------
# Forces: a cable's force is k (L - l0), the difference of two nearly equal lengths, so its
# rounding error is about k eps |p| ~ 5000 N/m * 2.2e-16 * 2 m ~ 2e-12 N whatever the tension:
# forces are compared at 1e-12 relative to at least 100 N (1e-10 N), torques to at least
# 10 N m (0.3 m lever on the load).
FORCE_REL, FORCE_FLOOR, TORQUE_FLOOR = 1e-12, 100.0, 10.0
# One physics step: the force errors above times h / m, and rotations by exact trigonometry
# (twin) against 8th-order Taylor series (kernel): every block of the state within 1e-12.
STEP_REL = 1e-12
# One controller update: some ten well-conditioned operations on the state; the finite
# differences (v - v_prev) / dt of the INDI filters divide rounding by dt = 2 ms.
CTRL_REL = 1e-12
# 500 closed-loop steps: the loop is stable, so rounding differences stay rounding-sized but
# are amplified by the stiff cables (k / m = 3600 s^-2) and by the finite-difference filters;
# measured up to 1.5e-12 relative (n = 6), compared at 1e-9.
LOOP_REL = 1e-9
# Plan sampling: a cubic in s with node values of order 1.
PLAN_REL = 1e-13


def assert_close(actual, desired, rel, floor, what):
    actual = np.asarray(actual, dtype=float)
    desired = np.asarray(desired, dtype=float)
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    if desired.size == 0:
        return
    assert np.isfinite(desired).all(), f"{what}: twin not finite"
    err = float(np.max(np.abs(actual - desired)))
    scale = max(float(np.max(np.abs(desired))), floor)
    assert err <= rel * scale, f"{what}: max error {err:.3e} > {rel:g} x {scale:.3e}"


STATE_FLOORS = {"pos": 1.0, "quat": 1.0, "vel": 1.0, "rate": 1.0, "rotor": 1.0}


def assert_states_close(x_kernel, x_twin, n, rel, what="x"):
    a, b = twin.unpack_state(x_kernel, n), twin.unpack_state(x_twin, n)
    for name, floor in STATE_FLOORS.items():
        assert_close(getattr(a, name), getattr(b, name), rel, floor, f"{what}.{name}")


# controller state blocks: (slot, width, floor in SI units); None: compared exactly
CS_BLOCKS = (
    ("acc_filt", layout.CS_ACC_FILT, 3, 1.0),
    ("force_filt", layout.CS_FORCE_FILT, 3, 1.0),
    ("alpha_filt", layout.CS_ALPHA_FILT, 3, 1.0),
    ("torque_filt", layout.CS_TORQUE_FILT, 3, 0.1),
    ("prev_vel", layout.CS_PREV_VEL, 3, 1.0),
    ("prev_rate", layout.CS_PREV_RATE, 3, 1.0),
    ("prev_force", layout.CS_PREV_FORCE, 3, 1.0),
    ("prev_torque", layout.CS_PREV_TORQUE, 3, 0.1),
    ("hold_pos", layout.CS_HOLD_POS, 3, 1.0),
    ("heading", layout.CS_HEADING, 2, 1.0),
    ("rotor_cmd", layout.CS_ROTOR_CMD, 4, 1.0),
    ("mode", layout.CS_MODE, 1, None),
    ("initialized", layout.CS_INITIALIZED, 1, None),
    ("segment", layout.CS_SEGMENT, 1, None),
    ("pull_slow", layout.CS_PULL_SLOW, 3, 1.0),
    ("landed", layout.CS_LANDED, 1, None),
    # the onboard estimate (test_onboard_estimate.py): untouched by the controller
    ("onboard", layout.CS_IMU_SEED, layout.CS_SIZE - layout.CS_IMU_SEED, None),
)


def test_cs_blocks_cover_the_controller_state():
    covered = sorted(i for _, start, width, _ in CS_BLOCKS for i in range(start, start + width))
    assert covered == list(range(layout.CS_SIZE))


def assert_ctrl_close(cs_kernel, cs_twin, rel, what="cs"):
    cs_kernel, cs_twin = np.atleast_2d(cs_kernel), np.atleast_2d(cs_twin)
    for name, start, width, floor in CS_BLOCKS:
        a, b = cs_kernel[:, start : start + width], cs_twin[:, start : start + width]
        if floor is None:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}.{name}")
        else:
            assert_close(a, b, rel, floor, f"{what}.{name}")


# --- building valid random test states ---------------------------------------------------------


def make_sim(n: int) -> Simulator:
    """A system whose simulated model differs from the controllers' nominal one: heavier load,
    uneven cables (config mismatch), and quadrotor mass, inertia and k_f the controllers get
    a few percent wrong, so a twin that mixes up model and cmodel fails."""
    config = load_config(uavs=n)
    deltas = tuple(0.004 * (-1) ** i for i in range(n))
    config = dataclasses.replace(
        config, mismatch=MismatchParams(load_mass_scale=1.15, cable_length_deltas=deltas)
    )
    sim = Simulator(config)
    for i in range(n):
        qm = layout.quad_model_offset(i)
        sim.cmodel[qm + layout.QM_MASS] *= 1.04
        sim.cmodel[qm + layout.QM_INERTIA : qm + layout.QM_INERTIA + 3] *= 0.97
        sim.cmodel[qm + layout.QM_KF] *= 1.02
    # yielding while tracking, which only slowly swinging systems get, compared for every n
    sim.gains[layout.G_TRACK_COMPLIANCE] = 0.3
    return sim


def random_state(
    sim: Simulator, rng: np.random.Generator, slack=(), taut=(), speed=0.3, spin=1.0, rotor_noise=150.0
) -> np.ndarray:
    """The simulator's hover state perturbed: load moved by cm and turned by a few degrees,
    quadrotors turned, each cable's direction tilted by a few degrees and its length set slack
    (1 to 3 cm short; cables in ``slack``), stretched (0.2 to 3 mm; cables in ``taut``) or
    either; random velocities, body rates and rotor speeds within their range."""
    n = sim.n
    M = twin.unpack_model(sim.model, n)
    hover = twin.unpack_state(sim.x, n)
    cables = twin.cable_state(hover, M)

    def turned(q, angle):
        return quat_multiply(q, quat_exp(rng.normal(0.0, angle, q.shape[:-1] + (3,))))

    quat = turned(hover.quat, 0.05)
    quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
    pos = hover.pos.copy()
    pos[0] += rng.normal(0.0, 0.02, 3)
    R = quat_to_matrix(quat)
    load_end = pos[0] + M.load_attach @ R[0].T
    direction = cables.direction + rng.normal(0.0, 0.05, (n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    stretch = np.where(rng.random(n) < 0.5, -rng.uniform(0.01, 0.03, n), rng.uniform(2e-4, 3e-3, n))
    stretch[list(slack)] = -rng.uniform(0.01, 0.03, len(slack))
    stretch[list(taut)] = rng.uniform(2e-4, 3e-3, len(taut))
    quad_end = load_end + (M.rest_length + stretch)[:, None] * direction
    pos[1:] = quad_end - np.einsum("nij,nj->ni", R[1:], M.quad_attach)
    vel = rng.normal(0.0, speed, (n + 1, 3))
    rate = rng.normal(0.0, spin, (n + 1, 3))
    rate[0] *= 0.3
    lo = np.array([twin.quad_model(sim.model, i).speed_min for i in range(n)])[:, None]
    hi = np.array([twin.quad_model(sim.model, i).speed_max for i in range(n)])[:, None]
    rotor = np.clip(hover.rotor + rng.normal(0.0, rotor_noise, (n, 4)), lo, hi)
    return twin.pack_state(twin.Bodies(pos, quat, vel, rate, rotor))


def quad_pos(x, i):
    o = layout.quad_offset(i) + layout.QUAD_POS
    return x[o : o + 3].copy()


def kernel_forces(x, model, n, wrench):
    R = np.empty((n + 1, 9))
    force = np.empty((n + 1, 3))
    torque = np.empty((n + 1, 3))
    tension = np.empty(n)
    kernels.compute_forces(x, model, n, np.asarray(wrench, dtype=float), R, force, torque, tension)
    return force, torque, tension, R


def random_wrench(rng, rows=None):
    scale = np.array([3.0, 3.0, 3.0, 0.3, 0.3, 0.3])  # N, N m
    shape = (6,) if rows is None else (rows, 6)
    return rng.normal(0.0, 1.0, shape) * scale


# --- forces ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", N_UAVS)
def test_compute_forces_matches_twin(n):
    rng = np.random.default_rng(100 + n)
    sim = make_sim(n)
    seen_slack = seen_taut = 0
    for trial in range(6):
        x = random_state(sim, rng, slack=[0], taut=[1])
        wrench = random_wrench(rng)
        force, torque, tension, _ = kernel_forces(x, sim.model, n, wrench)
        f_twin, t_twin, tension_twin = twin.compute_forces(x, sim.model, n, wrench)
        what = f"n={n} trial {trial}"
        assert_close(force, f_twin, FORCE_REL, FORCE_FLOOR, f"force {what}")
        assert_close(torque, t_twin, FORCE_REL, TORQUE_FLOOR, f"torque {what}")
        assert_close(tension, tension_twin, FORCE_REL, FORCE_FLOOR, f"tension {what}")
        # slack is exactly zero in both, and the same cables are slack
        np.testing.assert_array_equal(tension == 0.0, tension_twin == 0.0)
        seen_slack += np.count_nonzero(tension == 0.0)
        seen_taut += np.count_nonzero(tension > 0.0)
    # both kinds covered (cable 0 slack by construction; a stretched cable closing fast
    # enough has zero tension too, so not every "taut" one pulls)
    assert seen_slack >= 6 and seen_taut >= 3


def test_compute_forces_mechanics():
    """Checks of the kernel by laws rather than by twin: at rest, the cables only transmit
    forces (internal), so the total force is weights + thrusts + wrench; a slack cable pulls
    nothing; a stretched cable closing fast enough has its tension clipped at zero."""
    n = 3
    rng = np.random.default_rng(7)
    sim = make_sim(n)
    x = random_state(sim, rng, slack=[0], taut=[1, 2], speed=0.0, spin=0.0)
    wrench = random_wrench(rng)
    force, torque, tension, R = kernel_forces(x, sim.model, n, wrench)
    M = twin.unpack_model(sim.model, n)
    b = twin.unpack_state(x, n)
    thrust = twin.rotor_thrusts(b.rotor, M.kf).sum(axis=1)
    R3 = R.reshape(n + 1, 3, 3)
    external = (
        wrench[:3] - M.mass.sum() * M.gravity * np.eye(3)[2] + (R3[1:, :, 2] * thrust[:, None]).sum(axis=0)
    )
    assert_close(force.sum(axis=0), external, 1e-12, FORCE_FLOOR, "total force")
    c = twin.cable_state(b, M)
    assert tension[0] == 0.0
    np.testing.assert_allclose(tension[1:], M.stiffness[1:] * c.stretch[1:], rtol=1e-12)

    # cable 1 stretched by 0.1 mm but closing at 1 m/s: k dL + c dL/dt < 0 -> zero, not a push
    i = 1
    o = layout.quad_offset(i)
    x2 = random_state(sim, rng, taut=[i], speed=0.0, spin=0.0)
    b2 = twin.unpack_state(x2, n)
    c2 = twin.cable_state(b2, M)
    shorten = c2.stretch[i] - 1e-4  # move the quadrotor in so the stretch is 0.1 mm
    x2[o + layout.QUAD_POS : o + layout.QUAD_POS + 3] -= shorten * c2.direction[i]
    x2[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 3] = -1.0 * c2.direction[i]
    c3 = twin.cable_state(twin.unpack_state(x2, n), M)
    assert c3.stretch[i] > 0.0
    assert M.stiffness[i] * c3.stretch[i] + M.damping[i] * c3.length_rate[i] < 0.0
    _, _, tension2, _ = kernel_forces(x2, sim.model, n, np.zeros(6))
    _, _, tension2_twin = twin.compute_forces(x2, sim.model, n, np.zeros(6))
    assert tension2[i] == 0.0 and tension2_twin[i] == 0.0


# --- one physics step ------------------------------------------------------------------------


def kernel_advance(
    sim,
    x,
    ctrl,
    plans,
    status,
    counters,
    step0,
    n_steps,
    wrench,
    stats=None,
    log_every=0,
    log_rows=0,
    model=None,
    fcache=None,
):
    """kernels.advance on copies; returns the new arrays (the kernel writes in place).
    ``fcache``: the (forces, valid) pair a previous call returned, or None for a fresh start."""
    n = sim.n
    x, ctrl, plans, status, counters = (a.copy() for a in (x, ctrl, plans, status, counters))
    stats = layout.new_stats(n) if stats is None else stats.copy()
    forces, valid = layout.empty_force_cache(n) if fcache is None else (a.copy() for a in fcache)
    log_x = np.full((log_rows, x.size), np.nan)
    log_tension = np.full((log_rows, n), np.nan)
    sys = sim.kernel_model()._replace(physics=sim.model if model is None else model)
    data = layout.SimData(
        x=x,
        ctrl=ctrl,
        plans=plans,
        plan_status=status,
        counters=counters,
        stats=stats,
        fcache=forces,
        fvalid=valid,
    )
    rows = kernels.advance(
        sys, data, step0, n_steps, np.atleast_2d(wrench), layout.SimLog(log_every, log_x, log_tension)
    )
    return dict(
        x=x,
        ctrl=ctrl,
        plan_status=status,
        counters=counters,
        stats=stats,
        rows=rows,
        log_x=log_x,
        log_tension=log_tension,
        fcache=(forces, valid),
    )


def twin_advance(
    sim, x, ctrl, plans, status, counters, step0, n_steps, wrench, stats=None, log_every=0, log_rows=0
):
    n = sim.n
    stats = layout.new_stats(n) if stats is None else stats
    return twin.advance(
        x,
        ctrl,
        plans,
        status,
        counters,
        sim.model,
        sim.cmodel,
        sim.gains,
        n,
        step0,
        sim.h,
        n_steps,
        sim.decimation,
        np.atleast_2d(wrench),
        stats,
        log_every,
        np.full((log_rows, x.size), np.nan),
        np.full((log_rows, n), np.nan),
    )


@pytest.mark.parametrize("n", N_UAVS)
def test_physics_step_matches_twin(n):
    """One step without a controller update (odd step index, decimation 2): kick, drift on the
    rotation group, motors toward commands away from the current speeds, forces, kick; the
    two wrench rows are the step's start and end."""
    rng = np.random.default_rng(200 + n)
    sim = make_sim(n)
    assert sim.decimation == 2
    for trial in range(3):
        x = random_state(sim, rng, slack=[0], taut=[1], spin=3.0)
        ctrl = sim.ctrl.copy()
        cmd = slice(layout.CS_ROTOR_CMD, layout.CS_ROTOR_CMD + 4)
        ctrl[:, cmd] = rng.uniform(300.0, 2400.0, (n, 4))
        wrench = random_wrench(rng, rows=2)
        # the step starts from cached forces (at x, wrench row 0) and ends with row 1
        cache = kernel_forces(x, sim.model, n, wrench[0])
        momenta = twin.angular_momenta(twin.unpack_state(x, n), twin.unpack_model(sim.model, n))
        fcache = (np.hstack([cache[0], cache[1], momenta]), np.ones(1, dtype=np.int64))
        out = kernel_advance(
            sim, x, ctrl, sim.plans, sim.plan_status, sim.counters, 1, 1, wrench[1:], fcache=fcache
        )
        x_twin, tension = twin.physics_step(x, ctrl[:, cmd], sim.model, n, sim.h, wrench[0], wrench[1])
        assert_states_close(out["x"], x_twin, n, STEP_REL, f"n={n} trial {trial}")
        np.testing.assert_array_equal(out["ctrl"], ctrl)  # no controller update ran
        # statistics after one step: one step, slack streaks of h
        stats = out["stats"]
        slack = tension == 0.0
        assert stats[layout.ST_STEPS] == 1.0
        assert stats[layout.ST_SLACK_ANY] == float(slack.any())
        np.testing.assert_array_equal(stats[layout.ST_STREAK : layout.ST_STREAK + n] > 0, slack)


def external_force_and_torque(x, model, n, wrench):
    """Total external force on the system (N) and its moment about the world origin (N m):
    gravity, rotor thrust and rotor torques, the wrench on the load. Cable forces are internal
    and central (along the line between their two ends), so they add to neither."""
    M = twin.unpack_model(model, n)
    b = twin.unpack_state(x, n)
    R = quat_to_matrix(b.quat)
    rotor = M.kf[:, None] * b.rotor**2
    forces = np.zeros((n + 1, 3))
    forces[:, 2] -= M.mass * M.gravity
    forces[1:] += R[1:, :, 2] * rotor.sum(axis=1)[:, None]
    forces[0] += wrench[:3]
    rotor_torque = np.einsum("nij,nj->ni", R[1:], np.einsum("nrk,nk->nr", M.alloc[:, 1:], rotor))
    moment = np.cross(b.pos, forces).sum(axis=0) + rotor_torque.sum(axis=0) + wrench[3:]
    return forces.sum(axis=0), moment


def momenta(x, model, n):
    """Total linear momentum and angular momentum about the world origin."""
    M = twin.unpack_model(model, n)
    b = twin.unpack_state(x, n)
    R = quat_to_matrix(b.quat)
    linear = M.mass[:, None] * b.vel
    spin = np.einsum("nij,nj->ni", R, twin.principal_inertia(M) * b.rate)
    return linear.sum(axis=0), (np.cross(b.pos, linear) + spin).sum(axis=0)


@pytest.mark.parametrize("n", [2, 3, 6])
def test_physics_step_obeys_the_laws_of_motion(n):
    """One kernel step checked by mechanics, not by a twin: each rotor follows its first-order
    response exactly; the total linear and angular momenta change by the step times the mean of
    the external force and moment at its start and end (the trapezoid velocity Verlet makes;
    cable forces, internal and central, cancel); each position moves by h times the half-step
    velocity v + h F / (2 m)."""
    rng = np.random.default_rng(250 + n)
    sim = make_sim(n)
    # without the air: drag acts at the half-step velocities, which a law stated on the step's
    # two ends does not see (drag is checked in test_aero)
    sim.model = layout.pack_model(sim.simulated)
    h = sim.h
    for trial in range(3):
        x0 = random_state(sim, rng, taut=range(n), spin=2.0)
        ctrl = sim.ctrl.copy()
        cmd = slice(layout.CS_ROTOR_CMD, layout.CS_ROTOR_CMD + 4)
        ctrl[:, cmd] = rng.uniform(300.0, 2400.0, (n, 4))
        wrench = random_wrench(rng, rows=2)
        force0, torque0, _, _ = kernel_forces(x0, sim.model, n, wrench[0])
        momenta0 = twin.angular_momenta(twin.unpack_state(x0, n), twin.unpack_model(sim.model, n))
        fcache = (np.hstack([force0, torque0, momenta0]), np.ones(1, dtype=np.int64))
        x1 = kernel_advance(
            sim, x0, ctrl, sim.plans, sim.plan_status, sim.counters, 1, 1, wrench[1:], fcache=fcache
        )["x"]
        what = f"n={n} trial {trial}"
        M = twin.unpack_model(sim.model, n)
        b0, b1 = twin.unpack_state(x0, n), twin.unpack_state(x1, n)
        decay = np.exp(-h / M.motor_tau)[:, None]
        assert_close(b1.rotor, ctrl[:, cmd] + (b0.rotor - ctrl[:, cmd]) * decay, 1e-14, 1.0, f"rotors {what}")
        f0, g0 = external_force_and_torque(x0, sim.model, n, wrench[0])
        f1, g1 = external_force_and_torque(x1, sim.model, n, wrench[1])
        lin0, ang0 = momenta(x0, sim.model, n)
        lin1, ang1 = momenta(x1, sim.model, n)
        # momenta of order 1 (kg m/s, kg m^2/s), changes of order 5e-3: rounding ~1e-16; a
        # cable force that were not internal or central would leave ~1e-3 (h/2 x 5-25 N)
        assert_close(lin1 - lin0, 0.5 * h * (f0 + f1), 1e-10, 0.01, f"linear momentum {what}")
        assert_close(ang1 - ang0, 0.5 * h * (g0 + g1), 1e-10, 0.01, f"angular momentum {what}")
        half = b0.vel + 0.5 * h * force0 / M.mass[:, None]
        assert_close(b1.pos - b0.pos, h * half, 1e-12, 1e-3, f"positions {what}")


# --- plans -----------------------------------------------------------------------------------


def sinusoid_motion(params, t):
    """p, v, a, jerk and body rates at times t of p_start + amp (sin(om t' + ph) - sin ph),
    t' = t - t0, per axis; small sinusoidal body rates."""
    p_start, t0, amp, om, ph = params
    arg = om * (np.asarray(t) - t0)[..., None] + ph
    return (
        p_start + amp * (np.sin(arg) - np.sin(ph)),
        amp * om * np.cos(arg),
        -amp * om**2 * np.sin(arg),
        -amp * om**3 * np.cos(arg),
        0.1 * np.sin(arg + 1.0),
    )


def motion_params(rng, p_start, t0):
    """Amplitudes 0.05-0.2 m and 1.5-4 rad/s per axis."""
    return (p_start, t0, rng.uniform(0.05, 0.2, 3), rng.uniform(1.5, 4.0, 3), rng.uniform(0.0, 2 * np.pi, 3))


def moving_trajectory(rng, p_start, t0, duration_scale=1.0):
    """A smooth plan from p_start at t0 on the horizon's nodes (spacing scaled by
    ``duration_scale``), with consistent p, v, a, jerk."""
    params = motion_params(rng, p_start, t0)
    t = t0 + duration_scale * node_offsets(N_NODES)
    p, v, a, j, rates = sinusoid_motion(params, t)
    return UavTrajectory(t=t, p=p, v=v, a=a, j=j, body_rates=rates)


def plan_array(traj: UavTrajectory) -> np.ndarray:
    """The trajectory buffer rows of one plan (as Simulator.send_plan writes them)."""
    plan = np.zeros((traj.n_nodes, layout.TR_SIZE))
    plan[:, layout.TR_TIME] = traj.t
    for field, values in (
        (layout.TR_POS, traj.p),
        (layout.TR_VEL, traj.v),
        (layout.TR_ACC, traj.a),
        (layout.TR_JERK, traj.j),
        (layout.TR_RATE, traj.body_rates),
    ):
        plan[:, field : field + 3] = values
    return plan


def kernel_sample(plan, t, hint):
    """kernels.sample_plan into slots 2..16 of a NaN-filled buffer: (segment, Reference or
    None); asserts that nothing outside those slots, or nothing at all past the end, is
    written."""
    out = np.full(20, np.nan)
    seg = kernels.sample_plan(plan, t, hint, out, 2)
    assert np.isnan(out[:2]).all() and np.isnan(out[17:]).all()
    if seg < 0:
        assert np.isnan(out).all()
        return seg, None
    return seg, twin.Reference(*out[2:17].reshape(5, 3))  # the documented order p, v, a, j, w


def test_sample_plan_matches_twin():
    """Random times inside, before and after the plan, exactly on every node, and hints that
    are right, behind, ahead, at the end or out of range: same segment and values."""
    rng = np.random.default_rng(300)
    plan = plan_array(moving_trajectory(rng, np.zeros(3), 0.5))
    times = plan[:, layout.TR_TIME]
    ts = np.concatenate(
        [
            rng.uniform(times[0] - 0.1, times[-1] + 0.1, 60),
            times,  # exactly on the nodes
            [times[0] - 1.0, times[-1] + 1e-9, np.nextafter(times[0], np.inf)],
        ]
    )
    seen = set()
    for t in ts:
        for hint in (0, 3, N_NODES - 2, N_NODES - 1, -1, 100):
            seg, ref = kernel_sample(plan, t, hint)
            seg_twin, ref_twin = twin.sample_plan(plan, t, hint)
            assert seg == seg_twin, (t, hint)
            if seg < 0:
                assert ref_twin is None and t > times[-1]
                seen.add("after")
                continue
            assert_close(ref.as_vector(), ref_twin.as_vector(), PLAN_REL, 1.0, f"sample t={t} hint={hint}")
            seen.add("before" if t <= times[0] else "inside")
    assert seen == {"before", "inside", "after"}


def test_sample_plan_interpolates_the_motion():
    """Independent of any twin: on the nodes, the node values; inside a short segment (37 ms),
    the sinusoid the plan was sampled from, to the cubic's accuracy (dt^4 / 384 times the
    fourth derivative: ~3e-7 m for p) and the linear one's for jerk and rates."""
    rng = np.random.default_rng(301)
    params = motion_params(rng, np.zeros(3), 0.0)
    t_nodes = node_offsets(N_NODES)
    p, v, a, j, rates = sinusoid_motion(params, t_nodes)
    plan = plan_array(UavTrajectory(t=t_nodes, p=p, v=v, a=a, j=j, body_rates=rates))
    for k in (0, 5, N_NODES - 1):
        _, ref = kernel_sample(plan, t_nodes[k], 0)
        want = np.concatenate([p[k], v[k], a[k], j[k], rates[k]])
        np.testing.assert_allclose(ref.as_vector(), want, rtol=0, atol=1e-12)
    for s in (0.25, 0.5, 0.8):
        t = t_nodes[3] + s * (t_nodes[4] - t_nodes[3])
        seg, ref = kernel_sample(plan, t, 0)
        assert seg == 3
        truth = sinusoid_motion(params, t)
        for got, want, tol in zip(ref, truth, (1e-6, 1e-5, 1e-4, 0.02, 0.01), strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=tol)


# --- controller ------------------------------------------------------------------------------


def random_controller_state(rng, sim, x, i):
    """A controller that has been running: filters and previous values near the measurements."""
    cs = np.zeros(layout.CS_SIZE)
    M = twin.quad_model(sim.cmodel, i)
    b = twin.unpack_state(x, sim.n)
    R = quat_to_matrix(b.quat[i + 1])
    thrust = twin.rotor_thrusts(b.rotor[i], M.kf)
    blocks = {
        layout.CS_ACC_FILT: rng.normal(0.0, 1.0, 3),
        layout.CS_FORCE_FILT: R[:, 2] * thrust.sum() + rng.normal(0.0, 0.5, 3),
        layout.CS_ALPHA_FILT: rng.normal(0.0, 5.0, 3),
        layout.CS_TORQUE_FILT: M.alloc[1:] @ thrust + rng.normal(0.0, 0.01, 3),
        layout.CS_PREV_VEL: b.vel[i + 1] + rng.normal(0.0, 0.01, 3),
        layout.CS_PREV_RATE: b.rate[i + 1] + rng.normal(0.0, 0.02, 3),
        layout.CS_PREV_FORCE: R[:, 2] * thrust.sum() + rng.normal(0.0, 0.2, 3),
        layout.CS_PREV_TORQUE: M.alloc[1:] @ thrust + rng.normal(0.0, 0.005, 3),
        layout.CS_HOLD_POS: b.pos[i + 1] + rng.normal(0.0, 0.3, 3),
    }
    for start, value in blocks.items():
        cs[start : start + 3] = value
    # the slow pull near what the filters say the cable pulls now
    cs[layout.CS_PULL_SLOW : layout.CS_PULL_SLOW + 3] = settled_pull(sim, cs, i) + rng.normal(0.0, 0.5, 3)
    yaw = rng.uniform(-np.pi, np.pi)
    cs[layout.CS_HEADING : layout.CS_HEADING + 2] = np.cos(yaw), np.sin(yaw)
    cs[layout.CS_MODE] = rng.choice([layout.MODE_TRACKING, layout.MODE_HOLD_NO_PLAN])
    cs[layout.CS_INITIALIZED] = 1.0
    cs[layout.CS_SEGMENT] = rng.integers(0, 4)
    cs[layout.CS_ROTOR_CMD : layout.CS_ROTOR_CMD + 4] = b.rotor[i]
    return cs


def settled_pull(sim, cs, i):
    """The cable's pull the INDI filters of ``cs`` estimate, m a_filt - F_filt + m g e_z (N)."""
    mass = twin.quad_model(sim.cmodel, i).mass
    g = sim.cmodel[layout.M_GRAVITY]
    return (
        mass * cs[layout.CS_ACC_FILT : layout.CS_ACC_FILT + 3]
        - cs[layout.CS_FORCE_FILT : layout.CS_FORCE_FILT + 3]
        + [0.0, 0.0, mass * g]
    )


def kernel_controller(sim, x, i, cs, plan, status, counters, t):
    cs, status, counters = cs.copy(), status.copy(), counters.copy()
    _, _, _, R = kernel_forces(x, sim.model, sim.n, np.zeros(6))
    scratch = np.full(kernels.SC_SIZE, np.nan)
    kernels.controller_update(x, i, cs, plan, status, counters, sim.cmodel, sim.gains, t, R, scratch)
    return cs, status, counters


# (name, plan kind, plan status before the update, uninitialized controller)
SCENARIOS = (
    ("no plan", None, layout.PLAN_NONE, False),
    ("first update", None, layout.PLAN_NONE, True),
    ("new plan", "moving", layout.PLAN_NEW, False),
    ("tracking", "moving", layout.PLAN_VALID, False),
    ("expired", "expired", layout.PLAN_VALID, False),
    ("new plan with NaN", "nan", layout.PLAN_NEW, False),
    ("new plan, times not increasing", "unordered", layout.PLAN_NEW, False),
    ("rejected earlier", "nan", layout.PLAN_REJECTED, False),
    ("far away plan", "far", layout.PLAN_VALID, False),
)


def scenario_plan(rng, kind, p, t):
    if kind is None:
        return np.zeros((N_NODES, layout.TR_SIZE))
    start = t - 0.05
    if kind == "expired":
        start = t - 3.0
    traj = moving_trajectory(rng, p + (np.array([2.0, -1.5, 1.0]) if kind == "far" else 0.0), start)
    plan = plan_array(traj)
    if kind == "nan":
        plan[rng.integers(N_NODES), layout.TR_POS + 1] = np.nan
    if kind == "unordered":
        plan[7, layout.TR_TIME] = plan[6, layout.TR_TIME]
    return plan


@pytest.mark.parametrize("n", N_UAVS)
def test_controller_update_matches_twin(n):
    """Every hold mode and plan case, on random states (some wild enough to saturate rotors,
    hit the tilt limit, clip the position error): kernel and twin agree on the whole controller
    state, the plan status and the counters."""
    rng = np.random.default_rng(400 + n)
    sim = make_sim(n)
    taken = {}
    for trial in range(2):
        wild = trial == 1
        x = random_state(
            sim,
            rng,
            speed=3.0 if wild else 0.3,
            spin=6.0 if wild else 1.0,
            rotor_noise=600.0 if wild else 150.0,
        )
        t = 1.0 + 0.002 * rng.integers(0, 100)
        for name, kind, status0, fresh in SCENARIOS:
            i = int(rng.integers(n))
            cs = np.zeros(layout.CS_SIZE) if fresh else random_controller_state(rng, sim, x, i)
            plans, status = layout.empty_plans(n)
            plans[i] = scenario_plan(rng, kind, quad_pos(x, i), t)
            status[i] = status0
            counters = rng.integers(0, 5, (n, layout.K_SIZE)).astype(float)
            cs_k, status_k, counters_k = kernel_controller(sim, x, i, cs, plans[i], status, counters, t)
            res = twin.controller_update(x, i, cs, plans[i], status, counters, sim.cmodel, sim.gains, t)
            what = f"n={n} {name} trial {trial}"
            assert_ctrl_close(cs_k, res.cs, CTRL_REL, what)
            np.testing.assert_array_equal(status_k, res.plan_status, err_msg=what)
            np.testing.assert_array_equal(counters_k, res.counters, err_msg=what)
            assert np.isfinite(cs_k).all(), what
            for key, value in res.info.items():
                taken.setdefault(key, set()).add(value)
    # the cases covered what they should: every mode, and both sides of every limiter
    assert taken["mode"] == {
        layout.MODE_TRACKING,
        layout.MODE_HOLD_NO_PLAN,
        layout.MODE_HOLD_EXPIRED,
        layout.MODE_HOLD_REJECTED,
    }
    for key in (
        "error_clipped",
        "tilt_limited",
        "tilt_braked",
        "yaw_dropped",
        "thrust_shifted",
        "rotor_clipped",
    ):
        assert taken[key] == {False, True}, key


def test_controller_saturation_and_upside_down():
    """Saturation and the upside-down branch forced on purpose; kernel and twin agree, and the
    kernel's commands stay within the rotor speed range."""
    n = 3
    rng = np.random.default_rng(450)
    sim = make_sim(n)
    x = random_state(sim, rng)
    i = 0
    o = layout.quad_offset(i)
    quad = twin.quad_model(sim.cmodel, i)
    cases = {}
    # huge vertical force demand: every rotor at its maximum
    cs = random_controller_state(rng, sim, x, i)
    cs[layout.CS_FORCE_FILT : layout.CS_FORCE_FILT + 3] = [0.0, 0.0, 100.0]
    cases["full thrust"] = (x, cs)
    # huge torque demand about x: yaw dropped, rotors clipped at both ends
    cs = random_controller_state(rng, sim, x, i)
    cs[layout.CS_TORQUE_FILT : layout.CS_TORQUE_FILT + 3] = [3.0, 0.0, 0.5]
    cases["roll torque"] = (x, cs)
    # body upside down under a vertical, zero-heading target: q_e = (0, -1, 0, 0), no split
    x_flip = x.copy()
    x_flip[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = [0.0, 1.0, 0.0, 0.0]
    x_flip[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 3] = 0.0
    cs = random_controller_state(rng, sim, x_flip, i)
    cs[layout.CS_HOLD_POS : layout.CS_HOLD_POS + 3] = quad_pos(x_flip, i) + [0.0, 0.0, 0.1]
    cs[layout.CS_FORCE_FILT : layout.CS_FORCE_FILT + 3] = [0.0, 0.0, 6.0]
    cs[layout.CS_ACC_FILT : layout.CS_ACC_FILT + 3] = 0.0
    cs[layout.CS_PREV_VEL : layout.CS_PREV_VEL + 3] = 0.0
    cs[layout.CS_PREV_FORCE : layout.CS_PREV_FORCE + 3] = 0.0  # the filtered force stays vertical
    cs[layout.CS_HEADING : layout.CS_HEADING + 2] = [1.0, 0.0]
    cs[layout.CS_MODE] = layout.MODE_HOLD_NO_PLAN
    cases["upside down"] = (x_flip, cs)
    plans, status = layout.empty_plans(n)
    counters = np.zeros((n, layout.K_SIZE))
    for name, (xc, cs) in cases.items():
        # a steady demand: the slow pull agrees with the filters (nothing to yield to)
        cs[layout.CS_PULL_SLOW : layout.CS_PULL_SLOW + 3] = settled_pull(sim, cs, i)
        cs_k, _, _ = kernel_controller(sim, xc, i, cs, plans[i], status, counters, 1.0)
        res = twin.controller_update(xc, i, cs, plans[i], status, counters, sim.cmodel, sim.gains, 1.0)
        assert_ctrl_close(cs_k, res.cs, CTRL_REL, name)
        speeds = cs_k[layout.CS_ROTOR_CMD : layout.CS_ROTOR_CMD + 4]
        assert np.all(speeds >= quad.speed_min * (1 - 1e-12))
        assert np.all(speeds <= quad.speed_max * (1 + 1e-12))
        cases[name] = (res.info, speeds)
    info, speeds = cases["full thrust"]
    assert info["thrust_limited"] and info["yaw_dropped"]
    assert np.isclose(speeds.max(), quad.speed_max, rtol=1e-12)
    info, speeds = cases["roll torque"]
    assert info["yaw_dropped"] and info["rotor_clipped"]
    assert np.isclose(speeds.max(), quad.speed_max, rtol=1e-12)
    assert np.isclose(speeds.min(), quad.speed_min, rtol=1e-12)
    info, _ = cases["upside down"]
    assert info["upside_down"]


# --- closed loop -----------------------------------------------------------------------------


def send_plans(rng, plans, status, x, n, t0, kinds):
    """Deliver a plan of each kind in ``kinds`` (one per quadrotor): 'moving' (1.9 s),
    'short' (runs out after 0.19 s), 'nan' (rejected) or None (nothing new)."""
    plans, status = plans.copy(), status.copy()
    for i, kind in enumerate(kinds):
        if kind is None:
            continue
        traj = moving_trajectory(rng, quad_pos(x, i), t0, 0.1 if kind == "short" else 1.0)
        plans[i] = plan_array(traj)
        if kind == "nan":
            plans[i, 3, layout.TR_ACC] = np.nan
        status[i] = layout.PLAN_NEW
    return plans, status


@pytest.mark.parametrize("n", N_UAVS)
def test_closed_loop_matches_twin(n):
    """500 steps (0.5 s) of physics and controllers in two calls of 250: moving plans, one that
    runs out (tracking -> hold), a NaN plan (rejected, counted), a random wrench every step;
    state, controllers, counters, statistics and logs agree."""
    rng = np.random.default_rng(500 + n)
    sim = make_sim(n)
    x = random_state(sim, rng, taut=range(n), speed=0.1, spin=0.3, rotor_noise=30.0)
    kinds = ["short", "moving"] + ["nan" if i % 2 else "moving" for i in range(2, n)]
    plans, status = send_plans(rng, sim.plans, sim.plan_status, x, n, 0.0, kinds)
    wrench = random_wrench(rng, rows=500)
    k = dict(x=x, ctrl=sim.ctrl, plan_status=status, counters=sim.counters, stats=None)
    tw = dict(k)
    infos = []
    for chunk in range(2):
        step0 = 250 * chunk
        if chunk == 1:  # new plans mid-flight for quadrotor 1 (valid) and 0 (NaN: rejected)
            assert np.array_equal(k["plan_status"], tw["plan_status"])
            kinds1 = ["nan", "moving"] + [None] * (n - 2)
            plans, status = send_plans(rng, plans, k["plan_status"], k["x"], n, step0 * sim.h, kinds1)
            k["plan_status"] = tw["plan_status"] = status
        k = kernel_advance(
            sim,
            k["x"],
            k["ctrl"],
            plans,
            k["plan_status"],
            k["counters"],
            step0,
            250,
            wrench[step0 : step0 + 250],
            k["stats"],
            log_every=50,
            log_rows=6,
        )
        res = twin_advance(
            sim,
            tw["x"],
            tw["ctrl"],
            plans,
            tw["plan_status"],
            tw["counters"],
            step0,
            250,
            wrench[step0 : step0 + 250],
            tw["stats"],
            log_every=50,
            log_rows=6,
        )
        tw = res._asdict()
        infos += res.infos
        what = f"n={n} after step {step0 + 250}"
        assert k["rows"] == res.rows == 5
        assert np.isnan(k["log_x"][5]).all()  # capacity beyond the rows written is untouched
        assert_states_close(k["x"], res.x, n, LOOP_REL, what)
        for row in range(5):
            assert_states_close(k["log_x"][row], res.log_x[row], n, LOOP_REL, f"{what} log {row}")
        assert_close(k["log_tension"][:5], res.log_tension[:5], LOOP_REL, FORCE_FLOOR, what)
        assert_ctrl_close(k["ctrl"], res.ctrl, LOOP_REL, what)
        np.testing.assert_array_equal(k["plan_status"], res.plan_status)
        np.testing.assert_array_equal(k["counters"], res.counters)
        for slot in (layout.ST_STEPS, layout.ST_SLACK_ANY):
            assert k["stats"][slot] == res.stats[slot]
        assert_close(k["stats"], res.stats, LOOP_REL, 1.0, f"{what} stats")
        assert np.isfinite(k["x"]).all() and np.isfinite(k["ctrl"]).all()

    # what the run went through
    modes = np.array([[info["mode"] for info in update] for update in infos])  # (updates, n)
    assert modes[0, 0] == layout.MODE_TRACKING and modes[124, 0] == layout.MODE_HOLD_EXPIRED
    assert modes[-1, 0] == layout.MODE_HOLD_REJECTED and modes[-1, 1] == layout.MODE_TRACKING
    assert k["counters"][0, layout.K_REJECTED_PLANS] == 1.0
    assert k["counters"][1, layout.K_REJECTED_PLANS] == 0.0
    assert k["stats"][layout.ST_STEPS] == 500.0
    # the load was carried: the controllers kept the system together
    cables = twin.cable_state(twin.unpack_state(k["x"], n), twin.unpack_model(sim.model, n))
    assert np.all(np.abs(cables.stretch) < 0.1)


# --- chunking ----------------------------------------------------------------------------------


def chunked_vs_single(damping: bool):
    """200 closed-loop steps in one advance call and in two calls of 100 (constant wrench)."""
    n, steps = 3, 200
    sim, x, plans, status, _ = loop_inputs(n, 800, steps)
    wrench = np.array([[1.0, -0.5, 0.3, 0.05, 0.02, -0.04]])
    model = sim.model.copy()
    if not damping:
        for i in range(n):
            model[layout.cable_model_offset(n, i) + layout.CM_DAMPING] = 0.0
    one = kernel_advance(sim, x, sim.ctrl, plans, status, sim.counters, 0, steps, wrench, model=model)
    a = kernel_advance(sim, x, sim.ctrl, plans, status, sim.counters, 0, steps // 2, wrench, model=model)
    b = kernel_advance(
        sim,
        a["x"],
        a["ctrl"],
        plans,
        a["plan_status"],
        a["counters"],
        steps // 2,
        steps // 2,
        wrench,
        a["stats"],
        model=model,
        fcache=a["fcache"],
    )
    return n, one, b


def test_advance_in_chunks_without_damping():
    """Without cable damping, two calls equal one call to rounding (the FSAL force at a call's
    start is recomputed from the state and equals the carried one; J w -> m round trip)."""
    n, one, chunked = chunked_vs_single(damping=False)
    assert_states_close(chunked["x"], one["x"], n, 1e-12, "chunked x")
    assert_ctrl_close(chunked["ctrl"], one["ctrl"], 1e-12, "chunked ctrl")


def test_advance_in_chunks_with_damping():
    """Splitting a run into two advance calls does not change it at all: the force cache carries
    the end-of-step forces (damping at half-step velocities) into the next call."""
    n, one, chunked = chunked_vs_single(damping=True)
    np.testing.assert_array_equal(chunked["x"], one["x"])
    np.testing.assert_array_equal(chunked["ctrl"], one["ctrl"])


# --- batch and determinism ---------------------------------------------------------------------
#
# Which machine code ``kernels.advance`` runs depends, under the kernels' fast-math flags, on the
# order in which numba first compiles or loads the kernels in a process (see
# test_advance_does_not_depend_on_what_ran_before). Bit-level comparisons between kernels are
# therefore made in fresh subprocesses with a known history, not in this pytest process.

BATCH_N, BATCH_STEPS, BATCH_B = 3, 200, 4


def loop_inputs(n, seed, steps):
    rng = np.random.default_rng(seed)
    sim = make_sim(n)
    x = random_state(sim, rng, taut=range(n), speed=0.1, spin=0.3, rotor_noise=30.0)
    plans, status = send_plans(rng, sim.plans, sim.plan_status, x, n, 0.0, ["moving"] * n)
    return sim, x, plans, status, random_wrench(rng, rows=steps)


def _subprocess_main(mode: str, out: str) -> None:
    """Run in a fresh interpreter. 'clean': kernels.advance, then kernels.advance_batch on
    BATCH_B copies of the same system. 'controller_first': one direct controller_update call
    from Python, then the same kernels.advance."""
    n, steps = BATCH_N, BATCH_STEPS
    sim, x, plans, status, wrench = loop_inputs(n, 600, steps)
    result = {}
    if mode == "controller_first":
        cs = random_controller_state(np.random.default_rng(1), sim, x, 0)
        kernel_controller(sim, x, 0, cs, plans[0], status, sim.counters, 0.0)
    single = kernel_advance(sim, x, sim.ctrl, plans, status, sim.counters, 0, steps, wrench)
    for key in ("x", "ctrl", "plan_status", "counters", "stats"):
        result["single_" + key] = single[key]
    if mode == "clean":
        stack = lambda a: np.stack([a] * BATCH_B)  # noqa: E731
        forces, valid = layout.empty_force_cache(n)
        batch = layout.SimData(
            x=stack(x),
            ctrl=stack(sim.ctrl),
            plans=stack(plans),
            plan_status=stack(status),
            counters=stack(sim.counters),
            stats=stack(layout.new_stats(n)),
            fcache=stack(forces),
            fvalid=stack(valid),
        )
        kernels.advance_batch(sim.kernel_model(), stack(sim.model), batch, 0, steps, stack(wrench))
        for key in ("x", "ctrl", "plan_status", "counters", "stats"):
            result["batch_" + key] = getattr(batch, key)
    result["x0"] = x
    np.savez(out, **result)


def run_in_subprocess(mode, tmp_dir):
    import subprocess

    out = str(Path(tmp_dir) / f"{mode}.npz")
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"import test_twins; test_twins._subprocess_main({mode!r}, {out!r})"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as data:
        return dict(data)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    return run_in_subprocess("clean", tmp_path_factory.mktemp("clean"))


def test_advance_batch_is_bit_identical_to_advance(clean_run):
    """B = 4 copies of one system through advance_batch (parallel) end bit-identical to one
    advance call: same state, controllers, plan status, counters and statistics."""
    for key in ("x", "ctrl", "plan_status", "counters", "stats"):
        batch, single = clean_run["batch_" + key], clean_run["single_" + key]
        assert batch.shape[0] == BATCH_B
        for b in range(BATCH_B):
            np.testing.assert_array_equal(batch[b], single, err_msg=f"{key}[{b}]")
    assert not np.array_equal(clean_run["single_x"], clean_run["x0"])  # it did move


def test_advance_does_not_depend_on_what_ran_before(clean_run, tmp_path):
    """The same inputs give the same bits whatever the process did before: here, one direct
    call of controller_update (as tests or tools may do) before the first advance."""
    other = run_in_subprocess("controller_first", tmp_path)
    np.testing.assert_array_equal(other["x0"], clean_run["x0"])
    for key in ("x", "ctrl", "stats"):
        np.testing.assert_array_equal(other["single_" + key], clean_run["single_" + key], err_msg=key)


def test_advance_is_deterministic():
    """In one process, the same inputs twice give bit-identical results (logs included)."""
    n, steps = 4, 200
    sim, x, plans, status, wrench = loop_inputs(n, 700, steps)
    runs = [
        kernel_advance(
            sim, x, sim.ctrl, plans, status, sim.counters, 0, steps, wrench, log_every=20, log_rows=10
        )
        for _ in range(2)
    ]
    for key in ("x", "ctrl", "plan_status", "counters", "stats", "log_x", "log_tension"):
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    assert runs[0]["rows"] == runs[1]["rows"] == 10
