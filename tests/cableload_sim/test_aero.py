"""Aerodynamics: drag on the load and the quadrotors, rotor drag and the wind field, checked
against hand calculations, the NumPy twin and the statistics the Dryden model promises."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from cableload_sim.params import AeroParams, ConfigError, WindParams, config_from_dict, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.wind import WindField
from cableload_sim.rotations import quat_to_matrix

sys.path.insert(0, str(Path(__file__).parent))
import numpy_twins as twin  # noqa: E402
from test_twins import (  # noqa: E402
    assert_states_close,
    kernel_advance,
    loop_inputs,
    make_sim,
    random_state,
)

RHO = 1.225
LOAD_CD = 1.05
FRAME = (0.005, 0.005, 0.01)
K_D = 5.0e-5
PAPER_DRAG = AeroParams(load_drag_coeff=1.05, quadrotor_drag=(0.005, 0.005, 0.01), rotor_drag_coeff=5.0e-5)
"""The coefficients paper.toml sets."""


AERO = AeroParams(air_density=RHO, load_drag_coeff=LOAD_CD, quadrotor_drag=FRAME, rotor_drag_coeff=K_D)


def drag_only(x, system, wind):
    """The kernel's forces and torques on ``system`` with ``AERO``'s drag less those without:
    the drag alone."""
    n = system.n_uavs
    out = []
    for model in (layout.pack_model(system, AERO), layout.pack_model(system)):
        R = np.empty((n + 1, 9))
        force, torque, tension = np.empty((n + 1, 3)), np.empty((n + 1, 3)), np.empty(n)
        kernels.forces_in_wind(x, model, n, np.zeros(6), *wind, R, force, torque, tension)
        out.append((force, torque))
    return out[0][0] - out[1][0], out[0][1] - out[1][1]


def level_state(sim, load_vel=(0.0, 0.0, 0.0), quad_vel=(0.0, 0.0, 0.0), yaw_rate=0.0, rotor=1500.0):
    """The hover state, every body level (identity attitude), with the given velocities."""
    x = sim.x.copy()
    x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4] = [1.0, 0.0, 0.0, 0.0]
    x[layout.LOAD_VEL : layout.LOAD_VEL + 3] = load_vel
    for i in range(sim.n):
        o = layout.quad_offset(i)
        x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = [1.0, 0.0, 0.0, 0.0]
        x[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 3] = quad_vel
        x[o + layout.QUAD_RATE : o + layout.QUAD_RATE + 3] = [0.0, 0.0, yaw_rate]
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = rotor
    return x


# --- hand calculations ---------------------------------------------------------------------


def test_drag_on_the_load_is_the_face_drag_at_the_airspeed():
    """The level load moving at 2 m/s along x in still air, and at rest in a 2 m/s wind along
    -y: the drag is 1/2 rho C_d A v^2 of the face across the flow, A = 0.45 x 0.15 m and
    0.54 x 0.15 m: 0.1736 N and 0.2084 N against the airspeed, nothing else."""
    sim = Simulator(dataclasses.replace(load_config(), aero=PAPER_DRAG))
    hand_x = 0.5 * 1.225 * 1.05 * (0.45 * 0.15) * 2.0**2
    hand_y = 0.5 * 1.225 * 1.05 * (0.54 * 0.15) * 2.0**2
    assert hand_x == pytest.approx(0.17364, abs=1e-5) and hand_y == pytest.approx(0.20837, abs=1e-5)
    force, torque = drag_only(level_state(sim, load_vel=(2.0, 0.0, 0.0)), sim.simulated, (0, 0, 0))
    np.testing.assert_allclose(force[0], [-hand_x, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(torque[0], 0.0, atol=1e-12)  # the box is centred on its CoM
    force, _ = drag_only(level_state(sim), sim.simulated, (0.0, -2.0, 0.0))
    np.testing.assert_allclose(force[0], [0.0, -hand_y, 0.0], atol=1e-12)  # pushed along -y


def test_drag_on_a_quadrotor_is_frame_plus_rotor_drag():
    """A level quadrotor at 1 m/s along x, rotors at 1500 rad/s: frame drag 0.005 N plus rotor
    drag 4 k_d w v = 4 x 5e-5 x 1500 x 1 = 0.3 N, along -x; climbing at 1 m/s: frame drag
    0.01 N only (rotor drag acts in the rotor plane). Yawing at 2 rad/s in place: rotor drag
    at hubs 0.15 m out brakes it with -4 k_d w r d^2 = -0.0135 N m and no net force."""
    sim = Simulator(dataclasses.replace(load_config(), aero=PAPER_DRAG))
    force, torque = drag_only(level_state(sim, quad_vel=(1.0, 0.0, 0.0)), sim.simulated, (0, 0, 0))
    for b in range(1, 4):
        np.testing.assert_allclose(force[b], [-(0.005 + 0.3), 0.0, 0.0], atol=1e-12)
        np.testing.assert_allclose(torque[b], 0.0, atol=1e-12)
    force, _ = drag_only(level_state(sim, quad_vel=(0.0, 0.0, 1.0)), sim.simulated, (0, 0, 0))
    np.testing.assert_allclose(force[1:], [[0.0, 0.0, -0.01]] * 3, atol=1e-12)
    force, torque = drag_only(level_state(sim, yaw_rate=2.0), sim.simulated, (0, 0, 0))
    np.testing.assert_allclose(force[1:], 0.0, atol=1e-12)
    np.testing.assert_allclose(torque[1:], [[0.0, 0.0, -4 * 5e-5 * 1500 * 2.0 * 0.15**2]] * 3, atol=1e-12)


def test_hovering_system_in_a_steady_wind_leans_into_it():
    """The paper's system holding hover in a steady 3 m/s wind along x settles at rest: the
    cables carry the load's drag, 0.5 rho C_d A_x 3^2 = 0.391 N, and the quadrotors' thrusts
    lean into the wind with a horizontal sum equal to the whole drag at 3 m/s airspeed. The
    quadrotors hover tilted (the splayed cables pull them sideways), so their drag is taken by
    hand in their body axes at the settled attitudes: rotor drag -k_d (sum of w) times the
    airspeed's part in the rotor plane, frame drag -c_a |v_a| v_a per body axis."""
    config = dataclasses.replace(load_config(), aero=AERO, wind=WindParams(mean=(3.0, 0.0, 0.0)))
    sim = Simulator(config)
    p0 = sim.world_state().load_p
    sim.advance(15_000, log=False)
    state = sim.world_state()
    assert np.abs(state.load_v).max() < 1e-3 and np.abs(state.uav_v).max() < 1e-3  # settled
    load_drag = 0.5 * 1.225 * 1.05 * (0.45 * 0.15) * 3.0**2
    assert load_drag == pytest.approx(0.391, abs=1e-3)
    air = np.array([-3.0, 0.0, 0.0])  # airspeed of a body at rest
    drag = np.array([load_drag, 0.0, 0.0])
    lean = np.zeros(3)
    for q, rotor in zip(state.uav_q, state.rotor_speeds):
        R = quat_to_matrix(q)
        along = R.T @ air  # body axes
        drag += R @ (-np.array([0.005, 0.005, 0.01]) * np.abs(along) * along)
        drag += -5e-5 * rotor.sum() * (air - along[2] * R[:, 2])
        lean += 8.0e-7 * (rotor**2).sum() * R[:, 2]
    assert drag[0] == pytest.approx(3.6, abs=0.1)  # rotor drag 3.2 N of it
    np.testing.assert_allclose(lean[:2], -drag[:2], atol=2e-3 * drag[0])
    # the load's drag is carried by the cables: their horizontal pulls sum to minus it (to
    # 0.3 %: the load pitches a little under the uneven pulls, turning its faces)
    pull = (state.cable_tension[:, None] * state.cable_dir).sum(axis=0)
    assert pull[0] == pytest.approx(-load_drag, rel=3e-3)
    # blown downwind by a few cm on its 1 m cables, the quadrotors held where they started
    assert 0.005 < state.load_p[0] - p0[0] < 0.05


# --- twin ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 6])
def test_drag_matches_twin(n):
    """Random states, spins and winds: the kernel's drag (forces with drag less without)
    equals the twin's ``aero_forces`` to rounding."""
    rng = np.random.default_rng(900 + n)
    sim = make_sim(n)
    for _ in range(4):
        x = random_state(sim, rng, speed=3.0, spin=2.0)
        wind = rng.normal(0.0, 3.0, 3)
        force, torque = drag_only(x, sim.simulated, wind)
        b, M = twin.unpack_state(x, n), twin.unpack_model(layout.pack_model(sim.simulated, AERO), n)
        f_twin, t_twin = twin.aero_forces(b, M, wind, twin.quat_to_matrix(b.quat))
        scale = np.abs(f_twin).max()
        assert scale > 0.1  # drag of a few tenths of a newton: a wrong term would show
        np.testing.assert_allclose(force, f_twin, atol=1e-12 * max(scale, 1.0), rtol=0)
        np.testing.assert_allclose(torque, t_twin, atol=1e-12, rtol=0)


def test_closed_loop_in_turbulent_wind_matches_twin():
    """200 closed-loop steps with drag on, in a turbulent wind sampled every 10 ms: kernel
    (``wind_at`` inside ``advance``) and twin agree."""
    n, steps = 3, 200
    sim, x, plans, status, wrench = loop_inputs(n, 950, steps)
    model = layout.pack_model(sim.simulated, AERO)
    field = WindField(
        WindParams(mean=(2.0, 1.0, 0.0), turbulence_sigma=(1.5, 1.5, 0.7)), np.random.default_rng(3)
    )
    field.cover(steps * sim.h)
    sim.wind = field
    k = kernel_advance(sim, x, sim.ctrl, plans, status, sim.counters, 0, steps, wrench, model=model)
    tw = twin.advance(
        x,
        sim.ctrl,
        plans,
        status,
        sim.counters,
        model,
        sim.cmodel,
        sim.gains,
        n,
        0,
        sim.h,
        steps,
        sim.decimation,
        wrench,
        layout.new_stats(n),
        0,
        np.empty((0, x.size)),
        np.empty((0, n)),
        wind=field.samples,
        wind_dt=field.dt,
    )
    assert_states_close(k["x"], tw.x, n, 1e-9, "x")
    calm = twin.advance(
        x,
        sim.ctrl,
        plans,
        status,
        sim.counters,
        model,
        sim.cmodel,
        sim.gains,
        n,
        0,
        sim.h,
        steps,
        sim.decimation,
        wrench,
        layout.new_stats(n),
        0,
        np.empty((0, x.size)),
        np.empty((0, n)),
    )
    assert np.abs(calm.x - tw.x).max() > 1e-4  # the wind made a difference


# --- wind field ------------------------------------------------------------------------------


def component_series(field, seconds):
    field.cover(seconds)
    return (field.samples - field.mean) @ field.axes.T


def test_dryden_turbulence_has_its_variance_and_correlation():
    """1000 s of turbulence carried at 10 m/s with L = 5 m (T = L / V = 0.5 s): each component
    has its standard deviation (within 8 %, the estimate's spread over ~1000 correlation
    times); u's autocorrelation at lag T is exp(-1); v's, (1 - tau / 2T) exp(-tau / T), is 0.18
    at T and crosses zero at 2T."""
    params = WindParams(
        mean=(0.0, 10.0, 0.0),
        turbulence_sigma=(1.2, 0.8, 0.5),
        turbulence_length=(5.0, 5.0, 5.0),
        sample_dt=0.01,
    )
    d = component_series(WindField(params, np.random.default_rng(11)), 1000.0)
    np.testing.assert_allclose(d.std(axis=0), [1.2, 0.8, 0.5], rtol=0.08)
    lag = 50  # T = 0.5 s

    def corr(series, k):
        return np.corrcoef(series[:-k], series[k:])[0, 1]

    assert corr(d[:, 0], lag) == pytest.approx(math.exp(-1.0), abs=0.05)
    assert corr(d[:, 1], lag) == pytest.approx(0.5 * math.exp(-1.0), abs=0.05)
    assert corr(d[:, 1], 2 * lag) == pytest.approx(0.0, abs=0.05)
    # u along the steady wind (world y here), w vertical
    np.testing.assert_allclose(
        params.mean + 1.2 * np.eye(3)[0] @ WindField(params, np.random.default_rng(0)).axes,
        [0.0, 11.2, 0.0],
        atol=1e-12,
    )


def test_wind_is_seeded_and_leaves_global_random_state_alone():
    params = WindParams(mean=(3.0, 0.0, 0.0), turbulence_sigma=(1.0, 1.0, 0.5))
    before = np.random.get_state()[1].copy()
    a = component_series(WindField(params, np.random.default_rng(5)), 20.0)
    b = component_series(WindField(params, np.random.default_rng(5)), 20.0)
    c = component_series(WindField(params, np.random.default_rng(6)), 20.0)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    assert np.array_equal(np.random.get_state()[1], before)
    steady = WindField(WindParams(mean=(1.0, 2.0, 0.0)), np.random.default_rng(0))
    steady.cover(100.0)
    assert steady.samples.shape == (1, 3)  # no turbulence: one held sample


def test_wind_at_interpolates_and_holds():
    wind = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 4.0], [3.0, 0.0, 0.0]])
    for t, expected in (
        (0.0, [0, 0, 0]),
        (0.05, [0.5, -1.0, 2.0]),
        (0.15, [2.0, -1.0, 2.0]),
        (0.2, [3, 0, 0]),
        (7.0, [3, 0, 0]),
    ):
        np.testing.assert_allclose(run_wind_at(wind, 0.1, t), expected, atol=1e-12)
        np.testing.assert_allclose(twin.wind_at(wind, 0.1, t), expected, atol=1e-12)


def run_wind_at(wind, dt, t):
    from numba import njit

    @njit
    def call(w, d, s):
        return kernels.wind_at(w, d, s)

    return np.array(call(wind, dt, t))


# --- configuration ---------------------------------------------------------------------------


def paper_dict():
    import tomllib
    from importlib import resources

    return tomllib.loads(resources.files("cableload_sim.configs").joinpath("paper.toml").read_text())


def test_paper_config_has_drag_on_and_wind_off():
    """paper.toml flies the documented drag (the teacher models it) in still air."""
    config = load_config()
    assert config.aero == PAPER_DRAG
    assert not config.wind.turbulent() and not any(config.wind.mean)


@pytest.mark.parametrize(
    "table, key, value, expected",
    [
        ("aero", "load_drag_coeff", -1.0, "non-negative"),
        ("aero", "quadrotor_drag", [0.01, 0.01], "list of 3"),
        ("aero", "air_density", 0.0, "positive"),
        ("aero", "drag", 1.0, "unknown key"),
        ("wind", "turbulence_sigma", [1.0, -1.0, 0.0], "non-negative"),
        ("wind", "turbulence_length", [1.0, 0.0, 1.0], "positive"),
        ("wind", "sample_dt", 0.5, "at most 0.1"),
        ("wind", "seed", -1, ">= 0"),
    ],
)
def test_bad_aero_and_wind_values_are_refused(table, key, value, expected):
    data = paper_dict()
    data.setdefault(table, {})[key] = value
    with pytest.raises(ConfigError, match=expected) as err:
        config_from_dict(data, "test.toml")
    assert table in str(err.value) and key in str(err.value)


def test_simulator_turbulence_follows_its_generator():
    """The simulator's wind comes from the generator it is given: the same seed flies the same
    bits, another seed another flight; reset draws a new realization."""
    config = dataclasses.replace(
        load_config(),
        aero=PAPER_DRAG,
        wind=WindParams(mean=(2.0, 0.0, 0.0), turbulence_sigma=(1.0, 1.0, 0.5)),
    )

    def flight(seed):
        sim = Simulator(config, rng=np.random.default_rng(seed))
        sim.advance(400, log=False)
        return sim.x.copy(), sim

    a, sim = flight(1)
    b, _ = flight(1)
    c, _ = flight(2)
    assert np.array_equal(a, b) and np.abs(a - c).max() > 1e-6
    first = sim.wind.samples.copy()
    sim.reset(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]))
    sim.advance(400, log=False)
    assert not np.allclose(sim.wind.samples[:40], first[:40])
