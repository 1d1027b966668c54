"""Load reference trajectories: derivative consistency, start from rest, geometry, errors."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from cableload_sim.rotations import (
    quat_angle_between,
    quat_conjugate,
    quat_from_euler,
    quat_multiply,
    quat_to_euler,
    quat_to_matrix,
)
from cableload_sim.trajectories import (
    TRACKS_DIR,
    PoseToPose,
    make_reference,
    min_turn_radius,
    reference_catalog,
)

PRESETS = ["eight-slow", "eight-medium", "eight-medium-plus", "eight-fast"]
MODES = ["constant", "zero-sideslip"]

LOOPS = [
    *[(name, mode, {}) for name in PRESETS for mode in MODES],
    ("eight", "constant", {"ax": 3.0, "ay": 3.0, "w": 0.7, "yaw_deg": 30.0}),
    (
        "eight",
        "zero-sideslip",
        {"ax": 2.0, "ay": 2.0, "z_amplitude": 0.3, "z_frequency": 0.4, "ramp_s": 1.0},
    ),
    ("circle", "constant", {}),
    ("circle", "zero-sideslip", {"radius": 1.5, "w": 1.2, "ramp_s": 2.0}),
    ("square", "constant", {}),
    ("square", "zero-sideslip", {}),
    ("square", "zero-sideslip", {"side": 2.0, "corner_radius": 1.0, "speed": 1.5}),
    (
        "square",
        "constant",
        {"side": 3.0, "corner_radius": 0.2, "z_amplitude": 0.2, "z_frequency": 0.3},
    ),
    ("track:zandvoort", "constant", {}),
    ("track:zandvoort", "zero-sideslip", {}),
]
ALL = [*LOOPS, ("pose-to-pose", "constant", {}), ("hover", "constant", {"x": 1.0, "yaw_deg": 45.0})]


def _id(case):
    name, mode, options = case
    return f"{name}-{mode}-" + ",".join(f"{k}={v}" for k, v in options.items())


def _times(reference, count=240):
    """Times over the ramp and more than one lap after it (s)."""
    end = getattr(reference, "ramp_s", 0.0) + 1.3 * (reference.period_s or 5.0)
    return np.concatenate([[-0.7], np.linspace(0.01, end, count)])


def _body_rate_from_quaternion(q, q_plus, q_minus, h):
    """omega (body) = 2 vec(conj(q) (x) dq/dt), dq/dt by central differences."""
    return 2.0 * quat_multiply(quat_conjugate(q), (q_plus - q_minus) / (2.0 * h))[:, 1:]


# ---------------------------------------------------------------- derivative consistency


@pytest.mark.parametrize("case", ALL, ids=_id)
def test_derivatives_agree_with_finite_differences(case):
    """v, a, j, omega, alpha match central differences of p, v, a, q, omega (h = 1e-4 s) to
    2e-5 * (1 + largest magnitude): the difference error is O(h^2), a missing chain-rule term
    would be O(1)."""
    name, mode, options = case
    reference = make_reference(name, orientation=mode, **options)
    t, h = _times(reference), 1e-4
    now, plus, minus = reference.sample(t), reference.sample(t + h), reference.sample(t - h)
    pairs = {
        "v": ((plus.p - minus.p) / (2 * h), now.v),
        "a": ((plus.v - minus.v) / (2 * h), now.a),
        "j": ((plus.a - minus.a) / (2 * h), now.j),
        "omega": (_body_rate_from_quaternion(now.q, plus.q, minus.q, h), now.omega),
        "alpha": ((plus.omega - minus.omega) / (2 * h), now.alpha),
    }
    for quantity, (numerical, analytic) in pairs.items():
        tolerance = 2e-5 * (1.0 + np.max(np.abs(analytic)))
        error = np.max(np.abs(numerical - analytic))
        assert error < tolerance, f"{quantity}: finite-difference error {error:.2e} > {tolerance:.2e}"


@pytest.mark.parametrize("case", ALL, ids=_id)
def test_unit_and_continuous_quaternions(case):
    name, mode, options = case
    reference = make_reference(name, orientation=mode, **options)
    q = reference.sample(np.linspace(0.0, 3.0 * (reference.period_s or 5.0), 3000)).q
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-12)
    assert np.min(np.sum(q[1:] * q[:-1], axis=1)) > 0.99, "attitude jumps between neighbouring samples"


@pytest.mark.parametrize("case", ALL, ids=_id)
def test_starts_at_rest_and_holds_before_zero(case):
    name, mode, options = case
    reference = make_reference(name, orientation=mode, **options)
    start = reference.sample(np.array([0.0, -0.5, -10.0]))
    for quantity in (start.v, start.a, start.j, start.omega, start.alpha):
        np.testing.assert_allclose(quantity, 0.0, atol=1e-12)
    np.testing.assert_allclose(start.p, np.tile(start.p[0], (3, 1)), atol=1e-12)
    p0, q0 = reference.start_pose()
    np.testing.assert_allclose(p0, start.p[0])
    np.testing.assert_allclose(q0, start.q[0])
    assert reference.sample(0.25).p.shape == (1, 3)


def test_a_moving_reference_is_moving_after_the_start():
    sample = make_reference("eight-slow").sample(np.array([0.5, 5.0]))
    assert np.all(np.linalg.norm(sample.v, axis=1) > 1e-3)


# ---------------------------------------------------------------- eights, circle, height


@pytest.mark.parametrize(
    "preset,ax,ay,w",
    [
        ("eight-slow", 2.5, 2.0, 0.25),
        ("eight-medium", 2.5, 2.0, 0.5),
        ("eight-medium-plus", 1.0, 1.0, 1.0),
        ("eight-fast", 2.5, 2.0, 1.0),
    ],
)
def test_eight_presets_follow_the_formula_after_the_ramp(preset, ax, ay, w):
    reference = make_reference(preset)
    t = np.linspace(3.0, 40.0, 200)
    tau = t - 1.5
    sample = reference.sample(t)
    expected = np.stack([ax * np.cos(w * tau), ay * np.sin(2 * w * tau), np.ones_like(t)], axis=-1)
    np.testing.assert_allclose(sample.p, expected, atol=1e-12)
    expected_v = np.stack([-ax * w * np.sin(w * tau), 2 * ay * w * np.cos(2 * w * tau), 0 * t], axis=-1)
    np.testing.assert_allclose(sample.v, expected_v, atol=1e-12)
    assert reference.period_s == pytest.approx(2 * math.pi / w)


def test_options_override_a_preset_and_ramp_shifts_the_path_time():
    reference = make_reference("eight-slow", ax=3.0, ay=3.0, ramp_s=2.0, z=1.5)
    described = reference.describe()
    assert (described["ax"], described["ay"], described["w"], described["ramp_s"]) == (
        3.0,
        3.0,
        0.25,
        2.0,
    )
    t = np.array([2.0, 7.0, 31.0])
    tau = t - 1.0
    np.testing.assert_allclose(reference.sample(t).p[:, 0], 3.0 * np.cos(0.25 * tau), atol=1e-12)
    np.testing.assert_allclose(reference.sample(t).p[:, 2], 1.5, atol=1e-12)
    assert reference.sample(0.0).p[0] == pytest.approx([3.0, 0.0, 1.5])


def test_circle_keeps_its_radius_and_speed():
    reference = make_reference("circle", radius=1.5, w=0.8)
    sample = reference.sample(np.linspace(0.0, 30.0, 500))
    np.testing.assert_allclose(np.linalg.norm(sample.p[:, :2], axis=1), 1.5, atol=1e-12)
    after_ramp = reference.sample(np.linspace(3.0, 30.0, 100))
    np.testing.assert_allclose(np.linalg.norm(after_ramp.v, axis=1), 1.5 * 0.8, rtol=1e-12)
    assert reference.start_pose()[0] == pytest.approx([1.5, 0.0, 1.0])


def test_height_oscillation_follows_its_formula():
    reference = make_reference("circle", z=1.2, z_amplitude=0.3, z_frequency=0.25, ramp_s=2.0)
    t = np.linspace(2.0, 20.0, 50)
    expected = 1.2 + 0.3 * np.sin(2 * math.pi * 0.25 * (t - 1.0))
    np.testing.assert_allclose(reference.sample(t).p[:, 2], expected, atol=1e-12)


@pytest.mark.parametrize(
    "name,options", [("eight-fast", {}), ("circle", {}), ("square", {}), ("track:zandvoort", {})]
)
def test_loops_repeat_after_one_period(name, options):
    reference = make_reference(name, **options)
    t = np.linspace(reference.ramp_s, reference.ramp_s + 2 * reference.period_s, 100)
    now, later = reference.sample(t), reference.sample(t + reference.period_s)
    np.testing.assert_allclose(later.p, now.p, atol=1e-7)
    np.testing.assert_allclose(later.v, now.v, atol=1e-6)


# ---------------------------------------------------------------- rounded square


def test_rounded_square_geometry_and_constant_speed():
    reference = make_reference("square", side=4.0, speed=1.2, corner_radius=0.8)
    t = np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 6000)
    sample = reference.sample(t)
    np.testing.assert_allclose(np.linalg.norm(sample.v, axis=1), 1.2, rtol=1e-12)
    np.testing.assert_allclose(np.max(np.abs(sample.p[:, :2]), axis=0), 2.0, atol=1e-9)  # the sides are flown
    corner = np.max(np.abs(sample.p[:, 0] + sample.p[:, 1]))  # closest approach to the vertex (2, 2)
    assert 2.0 + 2.0 - 0.8 * 2 < corner < 4.0
    assert reference.start_pose()[0] == pytest.approx([2.0, 0.0, 1.0])


def test_rounded_square_has_continuous_curvature_and_jerk():
    reference = make_reference("square", side=2.0, corner_radius=0.5, speed=1.0)
    t = np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 20001)
    sample = reference.sample(t)
    step = t[1] - t[0]
    # continuous: neighbouring samples differ by O(step) (a step in a or j would show as O(1))
    assert np.max(np.abs(np.diff(sample.a, axis=0))) < 50 * step
    assert np.max(np.abs(np.diff(sample.j, axis=0))) < 500 * step
    assert np.max(np.linalg.norm(sample.j, axis=1)) < 20.0
    assert (
        1.0 / 0.5 < np.max(np.linalg.norm(sample.a, axis=1)) < 2.0 / 0.5
    )  # tighter than a 0.5 m fillet, bounded


# ---------------------------------------------------------------- race tracks


def _zandvoort_points():
    data = np.loadtxt(TRACKS_DIR / "zandvoort_centerline.csv", delimiter=",", comments="#")
    return data[:, :2]


@pytest.mark.parametrize("options", [{}, {"track_size": 12.0, "speed": 2.0, "min_radius": 0.5}])
def test_track_size_speed_and_turn_radius(options):
    reference = make_reference("track:zandvoort", **options)
    described = reference.describe()
    size, speed, min_radius = described["track_size"], described["speed"], described["min_radius"]
    lap = reference.sample(np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 8000))
    extent = np.ptp(lap.p[:, :2], axis=0)
    assert np.max(extent) == pytest.approx(size, rel=0.01)
    np.testing.assert_allclose(np.linalg.norm(lap.v, axis=1), speed, rtol=0.01)
    radius = min_turn_radius(reference.curve)
    assert 0.95 * min_radius <= radius < 0.3 * size
    lateral = np.linalg.norm(lap.a, axis=1)
    assert np.max(lateral) == pytest.approx(speed**2 / radius, rel=0.05)  # curvature finite and bounded


def test_track_keeps_the_shape_of_the_circuit():
    reference = make_reference("track:zandvoort", track_size=6.0)
    raw = _zandvoort_points()
    centre = 0.5 * (raw.min(axis=0) + raw.max(axis=0))
    scaled = (raw - centre) * 6.0 / np.max(np.ptp(raw, axis=0))
    lap = reference.sample(np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 6000)).p[
        :, :2
    ]
    distance = np.min(np.linalg.norm(scaled[:, None, :] - lap[None, :, :], axis=2), axis=1)
    assert np.max(distance) < 0.25  # hairpins open up to the minimum radius, the rest stays close
    assert np.median(distance) < 0.05
    start = reference.start_pose()[0][:2]
    assert np.linalg.norm(start - scaled[0]) < 0.1
    assert reference.describe()["length_m"] == pytest.approx(reference.period_s * 1.0)


def test_track_from_a_csv_path(tmp_path):
    angle = np.linspace(0.0, 2 * math.pi, 40, endpoint=False) + 0.3
    lines = ["# x_m,y_m,w_right,w_left", "# an ellipse"] + [
        f"{100 + 40 * math.cos(a)},{-20 + 20 * math.sin(a)},5.0,5.0" for a in angle
    ]
    path = tmp_path / "ellipse.csv"
    path.write_text("\n".join(lines) + "\n")
    reference = make_reference(f"track:{path}", track_size=8.0, speed=1.0, z=2.0)
    lap = reference.sample(np.linspace(reference.ramp_s, reference.ramp_s + reference.period_s, 4000))
    np.testing.assert_allclose(np.ptp(lap.p[:, :2], axis=0), [8.0, 4.0], rtol=0.01)
    np.testing.assert_allclose(np.mean(lap.p, axis=0), [0.0, 0.0, 2.0], atol=0.05)
    np.testing.assert_allclose(np.linalg.norm(lap.v, axis=1), 1.0, rtol=0.01)
    first = np.array([4.0 * math.cos(0.3), 2.0 * math.sin(0.3)])
    assert np.linalg.norm(reference.start_pose()[0][:2] - first) < 0.05


# ---------------------------------------------------------------- zero sideslip


@pytest.mark.parametrize(
    "name,options",
    [
        ("eight-fast", {}),
        ("eight-medium-plus", {}),
        ("circle", {}),
        ("square", {"corner_radius": 0.3}),
        ("track:zandvoort", {}),
    ],
)
def test_zero_sideslip_points_body_x_along_the_horizontal_velocity(name, options):
    reference = make_reference(name, orientation="zero-sideslip", **options)
    t = np.linspace(0.05, reference.ramp_s + 1.5 * reference.period_s, 2000)
    sample = reference.sample(t)
    body_x = quat_to_matrix(sample.q)[:, :, 0]
    horizontal = sample.v[:, :2] / np.linalg.norm(sample.v[:, :2], axis=1, keepdims=True)
    np.testing.assert_allclose(body_x[:, :2], horizontal, atol=1e-9)
    np.testing.assert_allclose(body_x[:, 2], 0.0, atol=1e-12)


def test_zero_sideslip_heading_is_defined_at_rest():
    sample = make_reference("eight-slow", orientation="zero-sideslip").sample(0.0)
    np.testing.assert_allclose(quat_to_matrix(sample.q)[0][:, 0], [0.0, 1.0, 0.0], atol=1e-12)


def test_constant_orientation_keeps_the_yaw():
    sample = make_reference("square", yaw_deg=30.0).sample(np.linspace(0.0, 20.0, 50))
    np.testing.assert_allclose(
        np.degrees(quat_to_euler(sample.q)), np.tile([0.0, 0.0, 30.0], (50, 1)), atol=1e-9
    )


# ---------------------------------------------------------------- pose to pose, hover


def test_pose_to_pose_endpoints_rest_and_hold():
    start_q = quat_from_euler(0.1, -0.2, 0.3)
    goal_q = quat_from_euler(-0.15, 0.1, 2.0)
    reference = PoseToPose([0.0, 1.0, 1.0], start_q, [2.0, -1.0, 1.5], goal_q, duration_s=11.0)
    ends = reference.sample(np.array([0.0, 11.0, 15.0, 100.0]))
    np.testing.assert_allclose(ends.p[0], [0.0, 1.0, 1.0], atol=1e-14)
    np.testing.assert_allclose(ends.p[1:], np.tile([2.0, -1.0, 1.5], (3, 1)), atol=1e-14)
    assert quat_angle_between(ends.q[0], start_q) < 1e-7
    assert np.all(quat_angle_between(ends.q[1:], goal_q) < 1e-7)
    for quantity in (ends.v, ends.a, ends.j, ends.omega, ends.alpha):
        np.testing.assert_allclose(quantity, 0.0, atol=1e-14)
    assert reference.period_s == 11.0
    middle = reference.sample(5.5)
    np.testing.assert_allclose(middle.p[0], [1.0, 0.0, 1.25], atol=1e-12)  # symmetric smoothstep


def test_pose_to_pose_rotates_about_one_body_axis_the_short_way():
    reference = make_reference(
        "pose-to-pose", start=[0, 0, 1, 0, 0, -170], goal=[0, 0, 1, 0, 0, 170], duration=4.0
    )
    sample = reference.sample(np.linspace(0.0, 4.0, 200))
    travelled = quat_angle_between(sample.q, sample.q[:1])
    assert np.max(travelled) == pytest.approx(math.radians(20.0), abs=1e-9)
    axis = sample.omega[1:-1] / np.linalg.norm(sample.omega[1:-1], axis=1, keepdims=True)
    np.testing.assert_allclose(axis, np.tile([0.0, 0.0, -1.0], (198, 1)), atol=1e-12)


def test_pose_to_pose_from_euler_degrees():
    reference = make_reference(
        "pose-to-pose", start=[1, 2, 1, 5, -5, 10], goal=[-1, 0, 1.2, -10, 12, 80], duration=11.0
    )
    end = reference.sample(11.0)
    np.testing.assert_allclose(end.p[0], [-1.0, 0.0, 1.2], atol=1e-12)
    np.testing.assert_allclose(np.degrees(quat_to_euler(end.q[0])), [-10.0, 12.0, 80.0], atol=1e-7)
    assert reference.describe()["goal"] == pytest.approx([-1.0, 0.0, 1.2, -10.0, 12.0, 80.0])


def test_hover_holds_its_pose():
    reference = make_reference("hover", x=1.0, y=-2.0, z=0.8, yaw_deg=90.0)
    sample = reference.sample(np.linspace(-1.0, 50.0, 10))
    np.testing.assert_allclose(sample.p, np.tile([1.0, -2.0, 0.8], (10, 1)))
    np.testing.assert_allclose(np.degrees(quat_to_euler(sample.q))[:, 2], 90.0, atol=1e-9)
    assert reference.period_s is None


# ---------------------------------------------------------------- catalog and describe


def test_catalog_lists_every_reference_and_builds_with_its_defaults():
    catalog = reference_catalog()
    json.dumps(catalog)
    names = [entry["name"] for entry in catalog]
    for name in [
        *PRESETS,
        "eight",
        "circle",
        "square",
        "hover",
        "pose-to-pose",
        "track:zandvoort",
        "track:PATH",
    ]:
        assert name in names
    for entry in catalog:
        if entry["name"] == "track:PATH":
            continue
        described = make_reference(entry["name"]).describe()
        json.dumps(described)
        assert described["name"] == entry["name"]
        for option, default in entry["options"].items():
            if option in described and isinstance(default, (int, float)):
                assert described[option] == pytest.approx(default), (entry["name"], option)


# ---------------------------------------------------------------- errors


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


ERRORS = [
    (lambda tmp: make_reference("figure-nine"), "unknown reference 'figure-nine'.*eight-slow"),
    (lambda tmp: make_reference("circle", ax=1.0), "circle: unknown option 'ax'.*radius"),
    (
        lambda tmp: make_reference("eight", w=-1.0),
        "eight: option 'w': expected a positive number \\(rad/s\\), got -1.0",
    ),
    (lambda tmp: make_reference("eight-fast", ax=float("nan")), "option 'ax'.*got nan"),
    (lambda tmp: make_reference("circle", radius=0), "option 'radius'.*got 0"),
    (lambda tmp: make_reference("circle", radius="big"), "option 'radius'.*got 'big'"),
    (lambda tmp: make_reference("square", speed=-2.5), "square: option 'speed'.*got -2.5"),
    (
        lambda tmp: make_reference("square", side=4.0, corner_radius=2.5),
        "option 'corner_radius'.*2.0.*got 2.5",
    ),
    (lambda tmp: make_reference("eight-slow", ramp_s=0.0), "option 'ramp_s'.*got 0.0"),
    (lambda tmp: make_reference("circle", z_amplitude=-0.1), "option 'z_amplitude'.*got -0.1"),
    (lambda tmp: make_reference("circle", z=float("inf")), "option 'z'.*got inf"),
    (
        lambda tmp: make_reference("circle", orientation="sideways"),
        "orientation mode 'sideways'.*zero-sideslip",
    ),
    (
        lambda tmp: make_reference("circle", orientation="zero-sideslip", yaw_deg=10.0),
        "'yaw_deg'.*10.0",
    ),
    (
        lambda tmp: make_reference("hover", orientation="zero-sideslip"),
        "hover: orientation 'zero-sideslip'",
    ),
    (lambda tmp: make_reference("pose-to-pose", duration=-1.0), "option 'duration'.*got -1.0"),
    (
        lambda tmp: make_reference("pose-to-pose", start=[1, 2, 3]),
        "option 'start': expected 6 finite numbers.*\\[1, 2, 3\\]",
    ),
    (
        lambda tmp: make_reference("pose-to-pose", goal=[0, 0, 1, 0, 0]),
        "option 'goal'.*\\[0, 0, 1, 0, 0\\]",
    ),
    (
        lambda tmp: PoseToPose([0, 0], [1, 0, 0, 0], [1, 1, 1], [1, 0, 0, 0], 5.0),
        "'start_p'.*\\[0, 0\\]",
    ),
    (
        lambda tmp: PoseToPose([0, 0, 1], [1, 0, 0, 0], [1, 1, 1], [1, 0, 0, 0], 0.0),
        "'duration'.*got 0.0",
    ),
    (
        lambda tmp: make_reference("track:zandvoort", track_size=-6.0),
        "option 'track_size'.*got -6.0",
    ),
    (lambda tmp: make_reference("track:zandvoort", speed=float("inf")), "option 'speed'.*got inf"),
    (
        lambda tmp: make_reference("track:zandvoort", track_size=6.0, min_radius=2.0),
        "option 'min_radius'.*1.5.*got 2.0",
    ),
    (lambda tmp: make_reference(f"track:{tmp}/missing.csv"), "missing.csv' does not exist"),
    (lambda tmp: make_reference(f"track:{tmp}"), "is not a regular file"),
    (lambda tmp: make_reference("track:/dev/zero"), "'/dev/zero' is not a regular file"),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "line.csv", "0,0\n1,1\n2,2\n3,3\n")),
        "span 0 m across at track_size 20 m, less than a U-turn of min_radius 0.3 m",
    ),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "huge.csv", "1e308,0\n-1e308,1\n1,1e308\n0,1\n")),
        "coordinate of 1e\\+308 m; expected at most 1e\\+08 m",
    ),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "empty.csv", "# nothing\n")),
        "at least 4.*got 0",
    ),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "three.csv", "0,0\n1,0\n1,1\n")),
        "at least 4.*got 3",
    ),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "text.csv", "0,0\n1,0\nx,y\n1,1\n")),
        "line 3.*'x,y'",
    ),
    (
        lambda tmp: make_reference("track:" + _write(tmp, "same.csv", "1,1\n1,1\n1,1\n1,1\n")),
        "coincide.*\\[1.0, 1.0\\]",
    ),
    (lambda tmp: make_reference("eight").sample(np.zeros((2, 2))), "1-D.*\\(2, 2\\)"),
]


@pytest.mark.parametrize("build,message", ERRORS, ids=[re.sub(r"\W+", "_", m)[:40] for _, m in ERRORS])
def test_bad_input_raises_value_error_naming_the_value(tmp_path, build, message):
    with pytest.raises(ValueError, match=message):
        build(tmp_path)


def test_user_input_errors_are_usage_errors(tmp_path):
    from cableload_sim.errors import UsageError

    for build, _ in ERRORS[:-1]:  # the last is a programming error (times of the wrong shape)
        with pytest.raises(UsageError):
            build(tmp_path)


def test_a_centerline_with_a_header_row_reads_as_without(tmp_path):
    rows = "".join(
        f"{4 * np.cos(a):.6f},{3 * np.sin(a):.6f},5.0,5.0\n"
        for a in np.linspace(0.0, 2 * np.pi, 40, endpoint=False)
    )
    plain = make_reference("track:" + _write(tmp_path, "plain.csv", rows))
    header = make_reference(
        "track:" + _write(tmp_path, "header.csv", "x_m,y_m,w_tr_right_m,w_tr_left_m\n" + rows)
    )
    t = np.linspace(0.0, 20.0, 50)
    np.testing.assert_array_equal(header.sample(t).p, plain.sample(t).p)
