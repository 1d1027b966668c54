"""Random loops and wandering paths, the oscillating yaw and turned paths: seeded, smooth,
consistent to the third derivative, within their turn radius, and flyable where they should be."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.errors import UsageError
from cableload_sim.physics.feasibility import check_reference
from cableload_sim.rotations import quat_to_euler
from cableload_sim.trajectories import make_reference, min_turn_radius
from cableload_sim.trajectories.draws import WanderCurve, random_loop_points

T = np.linspace(0.0, 30.0, 3001)


def _derivative_errors(reference) -> tuple[float, float, float, float]:
    """Largest differences between the numerical derivative of p, v, a, yaw and v, a, j, omega_z."""
    s = reference.sample(T)
    inner = slice(5, -5)
    errors = [
        np.abs(np.gradient(x, T, axis=0) - dx)[inner].max() for x, dx in ((s.p, s.v), (s.v, s.a), (s.a, s.j))
    ]
    yaw = np.unwrap(quat_to_euler(s.q)[:, 2])
    errors.append(np.abs(np.gradient(yaw, T) - s.omega[:, 2])[inner].max())
    return tuple(errors)


@pytest.mark.parametrize(
    "spec, orientation, options",
    [
        ("loop", "constant", {"seed": 1}),
        ("loop", "zero-sideslip", {"seed": 2, "harmonics": 6, "speed": 1.3}),
        ("wander", "zero-sideslip", {"seed": 3}),
        ("wander", "oscillating", {"seed": 4, "yaw_amplitude_deg": 60, "yaw_frequency": 0.1}),
        ("eight-medium", "oscillating", {"rotate_deg": 40}),
        ("loop", "zero-sideslip", {"seed": 7, "rotate_deg": -120}),
    ],
)
def test_consistent_to_the_third_derivative(spec, orientation, options):
    # central differences at 10 ms: errors of order (0.01 s)^2 times the next derivative
    v, a, j, yaw_rate = _derivative_errors(make_reference(spec, orientation=orientation, **options))
    assert v < 2e-4 and a < 1e-3 and j < 5e-3 and yaw_rate < 2e-3


def test_same_seed_same_path_other_seed_other_path():
    one = make_reference("loop", seed=5).sample(T).p
    np.testing.assert_array_equal(one, make_reference("loop", seed=5).sample(T).p)
    assert np.abs(one - make_reference("loop", seed=6).sample(T).p).max() > 0.5
    wander = make_reference("wander", seed=5).sample(T).p
    np.testing.assert_array_equal(wander, make_reference("wander", seed=5).sample(T).p)
    assert np.abs(wander - make_reference("wander", seed=6).sample(T).p).max() > 0.5


@pytest.mark.parametrize("seed", range(6))
def test_loops_keep_their_size_speed_and_turn_radius(seed):
    reference = make_reference("loop", seed=seed, size=5.0, speed=1.2, min_radius=0.6)
    lap = reference.sample(np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 4000))
    assert np.max(np.ptp(lap.p[:, :2], axis=0)) == pytest.approx(5.0, rel=0.01)
    np.testing.assert_allclose(np.linalg.norm(lap.v, axis=1), 1.2, rtol=0.01)
    assert min_turn_radius(reference.curve) >= 0.95 * 0.6
    # closed: one lap later it is back where it was
    again = reference.sample(np.array([reference.ramp_s, reference.ramp_s + reference.period_s]))
    np.testing.assert_allclose(again.p[0], again.p[1], atol=1e-6)


def test_loops_go_both_ways_round():
    turning = []
    for seed in range(12):
        xy = random_loop_points(seed, 4)
        area = 0.5 * np.sum(xy[:, 0] * np.roll(xy[:, 1], -1) - np.roll(xy[:, 0], -1) * xy[:, 1])
        turning.append(np.sign(area))
    assert 0 < turning.count(1.0) < 12


@pytest.mark.parametrize("seed", range(4))
def test_wander_is_open_with_bounded_curvature_at_constant_speed(seed):
    curve = WanderCurve(seed, min_radius=0.8, turn_scale=5.0, length=100.0)
    s = np.linspace(0.0, 300.0, 30001)
    jet = curve.jet(s)
    np.testing.assert_allclose(np.linalg.norm(jet.d1, axis=1), 1.0, atol=1e-12)
    curvature = np.abs(jet.d1[:, 0] * jet.d2[:, 1] - jet.d1[:, 1] * jet.d2[:, 0])
    assert curvature.max() <= 1.0 / 0.8 + 1e-12
    # the tabulated position is the integral of the tangent: its central differences are the
    # tangent (to (0.01 m)^2 |p'''| / 6, below 5e-5 here) and the chords add up to s (each chord
    # falls short of its arc by at most 0.01^3 / (24 0.8^2) m: 2e-3 m over 300 m)
    slope = np.gradient(jet.value, s, axis=0)
    assert np.abs(slope - jet.d1)[1:-1].max() < 5e-5
    steps = np.linalg.norm(np.diff(jet.value, axis=0), axis=1)
    assert 300.0 - 2e-3 <= np.sum(steps) <= 300.0
    # open: it does not come back to its start
    assert np.linalg.norm(jet.value[-1] - jet.value[0]) > 10.0


def test_oscillating_yaw_swings_about_its_mean():
    reference = make_reference(
        "circle", orientation="oscillating", yaw_deg=20, yaw_amplitude_deg=45, yaw_frequency=0.1
    )
    t = np.linspace(reference.ramp_s, reference.ramp_s + 20.0, 2001)
    yaw = np.degrees(np.unwrap(quat_to_euler(reference.sample(t).q)[:, 2]))
    assert yaw.max() == pytest.approx(65.0, abs=0.1) and yaw.min() == pytest.approx(-25.0, abs=0.1)


def test_a_turned_path_is_the_path_turned():
    plain = make_reference("eight-medium", orientation="zero-sideslip").sample(T)
    turned = make_reference("eight-medium", orientation="zero-sideslip", rotate_deg=90).sample(T)
    np.testing.assert_allclose(turned.p[:, 0], -plain.p[:, 1], atol=1e-12)
    np.testing.assert_allclose(turned.p[:, 1], plain.p[:, 0], atol=1e-12)
    yaw = lambda s: np.unwrap(quat_to_euler(s.q)[:, 2])  # noqa: E731
    np.testing.assert_allclose(yaw(turned) - yaw(plain), np.pi / 2, atol=1e-9)


def test_random_paths_are_flyable_at_moderate_speed(paper_config):
    for seed in range(4):
        for spec in ("loop", "wander"):
            reference = make_reference(spec, orientation="zero-sideslip", seed=seed)
            assert check_reference(reference, paper_config, 40.0).flyable


@pytest.mark.parametrize(
    "options, message",
    [
        ({"seed": -1}, "option 'seed': expected an integer >= 0, got -1"),
        ({"seed": 1.5}, "option 'seed': expected an integer >= 0, got 1.5"),
        ({"harmonics": 9}, "option 'harmonics': expected an integer from 1 to 8"),
        ({"size": 4.0, "min_radius": 0.7}, "option 'min_radius': expected at most size/6"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(UsageError, match=message):
        make_reference("loop", **options)
    with pytest.raises(UsageError, match="unknown orientation mode 'sideways'"):
        make_reference("wander", orientation="sideways")
