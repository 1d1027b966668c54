"""The simulated system's mismatch: what the physics flies and the controllers do not know."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from cableload_sim.params import ConfigError, MismatchParams, config_from_dict, load_config
from cableload_sim.physics import layout
from cableload_sim.physics.kernels.integrator import motor_decay
from cableload_sim.physics.simulator import Simulator
from cableload_sim.rotations import quat_to_matrix

# --- quadrotor side: configuration ------------------------------------------------------------


@pytest.mark.parametrize(
    "table, match",
    [
        (
            {"quadrotor_mass_scale": [1.1, 1.0]},
            r"mismatch\.quadrotor_mass_scale: expected one number for every quadrotor or a list of "
            r"3 \(one per quadrotor\), got 2 values",
        ),
        (
            {"thrust_coeff_scale": -0.9},
            r"mismatch\.thrust_coeff_scale: expected a positive "
            r"number, got -0\.9",
        ),
        (
            {"motor_time_constant_scale": [1.0, 0.0, 1.0]},
            r"mismatch\.motor_time_constant_scale\[1\]: expected a positive number, got 0\.0",
        ),
        (
            {"quadrotor_inertia_scale": []},
            r"quadrotor_inertia_scale: expected a positive number, "
            r"or a non-empty list of positive numbers, got \[\]",
        ),
        (
            {"torque_coeff_scale": "big"},
            r"torque_coeff_scale: expected a positive number, or a "
            r"non-empty list of positive numbers, got 'big'",
        ),
        ({"load_com_offset": [0.0, 0.1]}, r"load_com_offset: expected a list of 3 numbers"),
        (
            {"load_com_offset": [0.0, 0.0, 0.3]},
            r"load_com_offset=\[0\.0, 0\.0, 0\.3\] m: leaves the load moments of inertia",
        ),
        (
            {"load_com_offset": [0.1, 0.1, 0.0]},
            r"adds a product of inertia of 0\.014 kg m\^2, more than 10% of the smallest",
        ),
    ],
)
def test_bad_mismatch_is_refused_naming_key_value_and_expectation(table, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({"load": {}, "mismatch": table})


def test_quadrotor_mismatch_changes_only_the_simulated_quadrotors(paper_config):
    mismatch = MismatchParams(
        quadrotor_mass_scale=(1.3, 1.0, 0.9),
        quadrotor_inertia_scale=1.2,
        thrust_coeff_scale=0.9,
        torque_coeff_scale=(1.0, 1.1, 1.0),
        motor_time_constant_scale=1.5,
    )
    config = dataclasses.replace(paper_config, mismatch=mismatch)
    nominal = config.system.quadrotors[0]
    simulated = mismatch.apply(config.system).quadrotors
    assert [q.mass for q in simulated] == pytest.approx([0.78, 0.6, 0.54])
    assert simulated[2].inertia == pytest.approx(tuple(1.2 * j for j in nominal.inertia))
    assert simulated[1].rotor.thrust_coeff == pytest.approx(0.9 * nominal.rotor.thrust_coeff)
    assert simulated[1].rotor.torque_coeff == pytest.approx(1.1 * nominal.rotor.torque_coeff)
    assert simulated[0].rotor.time_constant == pytest.approx(1.5 * nominal.rotor.time_constant)
    sim = Simulator(config)
    for i, quad in enumerate(simulated):
        qm = layout.quad_model_offset(i)
        assert sim.model[qm + layout.QM_MASS] == pytest.approx(quad.mass)
        assert sim.model[qm + layout.QM_KF] == pytest.approx(quad.rotor.thrust_coeff)
        assert sim.cmodel[qm + layout.QM_MASS] == nominal.mass  # the controllers: nominal
        assert sim.cmodel[qm + layout.QM_KF] == nominal.rotor.thrust_coeff
        assert sim.cmodel[qm + layout.QM_MOTOR_TAU] == nominal.rotor.time_constant
    # the motors the physics steps lag with the simulated time constant
    decay = motor_decay(sim.model, 3, 1e-3)
    assert decay == pytest.approx(np.exp(-1e-3 / (1.5 * nominal.rotor.time_constant)))
    assert config.system.quadrotors[0].mass == 0.6  # the nominal system untouched


# --- quadrotor side: physics --------------------------------------------------------------------


def settled_hover(config, seconds=6.0, tail=2.0):
    """Fly hold-hover (no plan) and return the last ``tail`` seconds' mean state."""
    sim = Simulator(config)
    steps = round(seconds / sim.h)
    log = sim.advance(steps)
    keep = log.t > log.t[-1] - tail
    return sim, log.x[keep].mean(axis=0), log.tension[keep].mean(axis=0)


def thrust_and_speeds(sim, x, i):
    o = layout.quad_offset(i)
    w = x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4]
    kf = sim.model[layout.quad_model_offset(i) + layout.QM_KF]
    return kf * float(np.sum(w**2)), w


def test_a_heavier_quadrotor_hovers_on_more_thrust(paper_config):
    """Quadrotor 0 is 30 % heavier than its controller thinks: at rest, its rotors carry its
    true weight and its cable's pull, as the force balance says (INDI measures the missing
    force as a disturbance, so it holds its position)."""
    config = dataclasses.replace(paper_config, mismatch=MismatchParams(quadrotor_mass_scale=(1.3, 1.0, 1.0)))
    sim, x, tension = settled_hover(config)
    ws = sim.world_state()
    thrust, _ = thrust_and_speeds(sim, x, 0)
    m_true = 1.3 * 0.6
    pull = tension[0] * ws.cable_dir[0]  # the cable pulls the quadrotor toward the load
    expected = np.linalg.norm(m_true * 9.81 * np.array([0.0, 0.0, 1.0]) + pull)
    assert thrust == pytest.approx(expected, rel=2e-3)
    nominal_thrust, _ = thrust_and_speeds(sim, x, 1)
    assert thrust - nominal_thrust == pytest.approx(0.3 * 0.6 * 9.81, rel=0.1)
    hold = sim.ctrl[0, layout.CS_HOLD_POS : layout.CS_HOLD_POS + 3]
    o = layout.quad_offset(0)
    assert np.linalg.norm(x[o : o + 3] - hold) < 0.01  # compensated: held within 1 cm


def test_weaker_rotors_spin_faster_for_the_same_thrust(paper_config):
    """k_f 15 % below what the controller allocates with: the same force balance needs rotor
    speeds 1/sqrt(0.85) higher than the nominal system's."""
    _, x0, _ = settled_hover(paper_config)
    config = dataclasses.replace(paper_config, mismatch=MismatchParams(thrust_coeff_scale=0.85))
    sim, x, _ = settled_hover(config)
    for i in range(3):
        _, w = thrust_and_speeds(sim, x, i)
        _, w0 = thrust_and_speeds(sim, x0, i)
        ratio = math.sqrt(np.sum(w**2) / np.sum(w0**2))
        assert ratio == pytest.approx(1.0 / math.sqrt(0.85), rel=2e-3)


# --- load centre of mass ------------------------------------------------------------------------


def test_com_offset_moves_attachments_box_and_inertia_to_the_centre_of_mass(paper_config):
    c = np.array([0.03, 0.0, -0.02])
    mismatch = MismatchParams(load_com_offset=tuple(c))
    load = paper_config.system.load
    simulated = mismatch.apply(paper_config.system).load
    np.testing.assert_allclose(simulated.attachments, np.array(load.attachments) - c)
    np.testing.assert_allclose(simulated.box_centre, -c)
    # parallel axes: I_box_centre = I_com + m (|c|^2 1 - c c^T), exact for c in a plane of
    # two axes up to the product m c_x c_z, which is left out
    shift = load.mass * (c @ c - c * c)
    np.testing.assert_allclose(np.diag(simulated.inertia_matrix()), np.diag(load.inertia_matrix()) - shift)
    model = layout.pack_model(mismatch.apply(paper_config.system))
    np.testing.assert_allclose(model[layout.M_LOAD_BOX_CENTRE : layout.M_LOAD_BOX_CENTRE + 3], -c)


def test_drag_of_an_offset_box_acts_at_its_centre_as_the_twin_says(paper_config):
    """With the centre of mass off the box centre, the box's drag (at the box centre's
    airspeed) also turns the load: kernel and twin agree."""
    import numpy_twins as twin
    from test_aero import AERO, drag_only
    from test_twins import random_state

    rng = np.random.default_rng(77)
    config = dataclasses.replace(
        paper_config, aero=AERO, mismatch=MismatchParams(load_com_offset=(0.04, 0.0, -0.03))
    )
    sim = Simulator(config)
    for _ in range(3):
        x = random_state(sim, rng, speed=3.0, spin=2.0)
        wind = rng.normal(0.0, 3.0, 3)
        force, torque = drag_only(x, sim.simulated, wind)
        b = twin.unpack_state(x, 3)
        M = twin.unpack_model(layout.pack_model(sim.simulated, AERO), 3)
        f_twin, t_twin = twin.aero_forces(b, M, wind, twin.quat_to_matrix(b.quat))
        assert np.abs(t_twin[0]).max() > 1e-3  # the offset box turns the load
        np.testing.assert_allclose(force, f_twin, atol=1e-12 * np.abs(f_twin).max(), rtol=0)
        np.testing.assert_allclose(torque, t_twin, atol=1e-12, rtol=0)


def test_hovering_load_tilts_until_its_centre_of_mass_hangs_below_the_attachment_line():
    """Two quadrotors holding their places; the load's centre of mass is c = (0, cy, cz) from
    its box centre, the attachments at (+-r, 0, h). Both cable forces act on the line through
    the attachments, so they have no moment about it: at rest the weight has none either, and
    the centre of mass hangs straight below that line. Hand calculation: the load rolls by
    atan(cy / (h - cz)) = atan(0.02 / 0.08) = 14.04 deg, toward -y, and does not pitch or
    yaw. The roll swings about that angle undamped (nothing dissipates it), so its mean over
    many periods is compared."""
    cy, cz = 0.02, -0.02
    config = load_config(uavs=2, overrides=[f"mismatch.load_com_offset=[0.0, {cy}, {cz}]"])
    h = config.system.load.attachments[0][2]
    expected = math.degrees(math.atan2(cy, h - cz))
    assert expected == pytest.approx(14.036, abs=1e-3)
    sim = Simulator(config)
    log = sim.advance(round(30.0 / sim.h))
    keep = log.t > 10.0
    R = np.array([quat_to_matrix(x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4]) for x in log.x[keep]])
    roll = np.degrees(np.arctan2(R[:, 2, 1], R[:, 2, 2]))
    pitch = np.degrees(np.arcsin(-R[:, 2, 0]))
    assert roll.min() < -5.0  # it tilts (a swing about the level start)
    assert -roll.mean() == pytest.approx(expected, abs=0.3)
    assert abs(pitch.mean()) < 0.2
    # the start holds the level load's equilibrium shifted: the quadrotors stay within 5 cm
    for i in range(2):
        o = layout.quad_offset(i)
        hold = sim.ctrl[i, layout.CS_HOLD_POS : layout.CS_HOLD_POS + 3]
        assert np.abs(log.x[keep][:, o : o + 3] - hold).max() < 0.05
