"""Rotation conversions: quaternion, matrix, Euler, rotation vector and the 6D representation."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim import rotations as rot


def random_quats(rng, k=50):
    return rot.quat_normalize(rng.normal(size=(k, 4)))


def test_matrix_round_trip_and_orthonormal(rng):
    q = random_quats(rng)
    R = rot.quat_to_matrix(q)
    assert np.allclose(R @ np.swapaxes(R, -1, -2), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(R), 1.0)
    assert np.allclose(rot.matrix_to_quat(R), q, atol=1e-12)


def test_product_composes_rotations(rng):
    a, b = random_quats(rng), random_quats(rng)
    assert np.allclose(
        rot.quat_to_matrix(rot.quat_multiply(a, b)), rot.quat_to_matrix(a) @ rot.quat_to_matrix(b), atol=1e-12
    )


def test_exp_log_inverse(rng):
    v = rng.normal(size=(50, 3))
    v *= (np.pi * 0.99 / np.maximum(np.linalg.norm(v, axis=1), np.pi))[:, None]
    assert np.allclose(rot.quat_log(rot.quat_exp(v)), v, atol=1e-10)
    assert np.allclose(rot.quat_exp(np.zeros(3)), [1, 0, 0, 0])


def test_euler_round_trip(rng):
    angles = rng.uniform([-np.pi, -1.4, -np.pi], [np.pi, 1.4, np.pi], size=(50, 3))
    q = rot.quat_from_euler(angles[:, 0], angles[:, 1], angles[:, 2])
    assert np.allclose(rot.quat_to_euler(q), angles, atol=1e-10)


def test_six_d_round_trip_and_gram_schmidt(rng):
    q = random_quats(rng)
    d6 = rot.quat_to_6d(q)
    assert d6.shape == (50, 6)
    assert np.allclose(rot.sixd_to_quat(d6), q, atol=1e-10)
    # any non-degenerate 6D vector maps to a rotation; small noise moves it a little
    noisy = d6 + 0.01 * rng.normal(size=d6.shape)
    R = rot.sixd_to_matrix(noisy)
    assert np.allclose(R @ np.swapaxes(R, -1, -2), np.eye(3), atol=1e-12)
    assert np.degrees(rot.quat_angle_between(rot.matrix_to_quat(R), q)).max() < 3.0


def test_geodesic_angle(rng):
    q = random_quats(rng)
    axis = rng.normal(size=(50, 3))
    angle = rng.uniform(0, np.pi, 50)
    turned = rot.quat_multiply(q, rot.quat_from_axis_angle(axis, angle))
    assert np.allclose(rot.quat_angle_between(q, turned), angle, atol=1e-9)
    assert np.allclose(rot.quat_angle_between(q, -q), 0.0, atol=1e-7)


def test_bad_shapes_fail_clearly():
    with pytest.raises(ValueError, match="4 components"):
        rot.quat_to_matrix([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="zero quaternion"):
        rot.quat_normalize([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="6 components"):
        rot.sixd_to_matrix(np.zeros(5))
