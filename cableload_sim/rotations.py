"""Rotations: unit quaternions (w, x, y, z), rotation matrices and the 6D representation.

Conventions used everywhere in the project:

- A quaternion ``q = (w, x, y, z)`` maps body-frame vectors to the world frame:
  ``v_world = R(q) @ v_body``.
- Angular velocities called ``omega`` are expressed in the body frame unless a name says
  otherwise; ``dq/dt = 0.5 * q (x) (0, omega)``.
- The 6D representation of Zhou et al. (CVPR 2019) is the first two columns of ``R``,
  stacked column after column: ``(R[:,0], R[:,1])``.

All functions accept a single rotation or a batch along the leading axes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

_EPS = 1e-12


def _as_quat(q: ArrayLike) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape[-1] != 4:
        raise ValueError(f"quaternion must have 4 components (w, x, y, z), got shape {q.shape}")
    return q


def quat_normalize(q: ArrayLike) -> np.ndarray:
    """Unit quaternion with non-negative w (one of the two equivalent signs)."""
    u = _as_quat(q)
    norm = np.linalg.norm(u, axis=-1, keepdims=True)
    if np.any(norm < _EPS):
        raise ValueError("cannot normalize a zero quaternion")
    u = u / norm
    return np.where(u[..., :1] < 0.0, -u, u)


def quat_multiply(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Hamilton product ``a (x) b``."""
    a = _as_quat(a)
    b = _as_quat(b)
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conjugate(q: ArrayLike) -> np.ndarray:
    q = _as_quat(q)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_matrix(q: ArrayLike) -> np.ndarray:
    """Rotation matrix ``R`` (body to world) of a quaternion; the quaternion is normalized."""
    u = _as_quat(q)
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    w, x, y, z = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
    R = np.empty(u.shape[:-1] + (3, 3))  # filled entry by entry: stacking costs more, small
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - w * z)
    R[..., 0, 2] = 2 * (x * z + w * y)
    R[..., 1, 0] = 2 * (x * y + w * z)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - w * x)
    R[..., 2, 0] = 2 * (x * z - w * y)
    R[..., 2, 1] = 2 * (y * z + w * x)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def matrix_to_quat(R: ArrayLike) -> np.ndarray:
    """Quaternion (w >= 0) of a rotation matrix, numerically robust (Shepperd's method)."""
    R = np.asarray(R, dtype=float)
    if R.shape[-2:] != (3, 3):
        raise ValueError(f"rotation matrix must be 3x3, got shape {R.shape}")
    flat = R.reshape(-1, 3, 3)
    out = np.empty((flat.shape[0], 4))
    for k, m in enumerate(flat):
        trace = m[0, 0] + m[1, 1] + m[2, 2]
        choice = int(np.argmax([trace, m[0, 0], m[1, 1], m[2, 2]]))
        if choice == 0:
            s = 2.0 * np.sqrt(1.0 + trace)
            q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
        elif choice == 1:
            s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
            q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
        elif choice == 2:
            s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
            q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
        else:
            s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
            q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
        out[k] = q
    return quat_normalize(out).reshape(R.shape[:-2] + (4,))


def quat_from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    angle = np.asarray(angle, dtype=float)
    norm = np.linalg.norm(axis, axis=-1, keepdims=True)
    if np.any(norm < _EPS):
        raise ValueError("rotation axis must be non-zero")
    half = 0.5 * angle[..., None]
    return np.concatenate([np.cos(half), np.sin(half) * axis / norm], axis=-1)


def quat_exp(rotvec: ArrayLike) -> np.ndarray:
    """Quaternion of a rotation vector (axis times angle, rad)."""
    rotvec = np.asarray(rotvec, dtype=float)
    angle = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(a/2)/a, with its Taylor series near zero
    small = angle < 1e-8
    safe = np.where(small, 1.0, angle)
    sinc = np.where(small, 0.5 - angle**2 / 48.0, np.sin(half) / safe)
    return np.concatenate([np.cos(half), sinc * rotvec], axis=-1)


def quat_log(q: ArrayLike) -> np.ndarray:
    """Rotation vector (axis times angle in [0, pi], rad) of a quaternion."""
    q = quat_normalize(q)
    vec = q[..., 1:]
    s = np.linalg.norm(vec, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    small = s < 1e-12
    scale = np.where(small, 2.0 / np.maximum(q[..., :1], _EPS), angle / np.where(small, 1.0, s))
    return scale * vec


def quat_from_yaw(yaw: ArrayLike) -> np.ndarray:
    yaw = np.asarray(yaw, dtype=float)
    out = np.zeros(yaw.shape + (4,))
    out[..., 0] = np.cos(0.5 * yaw)
    out[..., 3] = np.sin(0.5 * yaw)
    return out


def quat_from_euler(roll: ArrayLike, pitch: ArrayLike, yaw: ArrayLike) -> np.ndarray:
    """Quaternion of intrinsic z-y'-x'' (yaw, pitch, roll) Euler angles in rad."""
    qx = quat_from_axis_angle([1.0, 0.0, 0.0], np.asarray(roll, dtype=float))
    qy = quat_from_axis_angle([0.0, 1.0, 0.0], np.asarray(pitch, dtype=float))
    qz = quat_from_axis_angle([0.0, 0.0, 1.0], np.asarray(yaw, dtype=float))
    return quat_multiply(quat_multiply(qz, qy), qx)


def quat_to_euler(q: ArrayLike) -> np.ndarray:
    """(roll, pitch, yaw) in rad, intrinsic z-y'-x''; inverse of ``quat_from_euler``."""
    R = quat_to_matrix(q)
    roll = np.arctan2(R[..., 2, 1], R[..., 2, 2])
    pitch = -np.arcsin(np.clip(R[..., 2, 0], -1.0, 1.0))
    yaw = np.arctan2(R[..., 1, 0], R[..., 0, 0])
    return np.stack([roll, pitch, yaw], axis=-1)


def quat_angle_between(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Geodesic angle (rad, in [0, pi]) between two attitudes."""
    a = quat_normalize(a)
    b = quat_normalize(b)
    dot = np.abs(np.sum(a * b, axis=-1))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


def matrix_to_6d(R: ArrayLike) -> np.ndarray:
    """6D continuous representation: first two columns of ``R``, column-major (6,)."""
    R = np.asarray(R, dtype=float)
    return np.concatenate([R[..., :, 0], R[..., :, 1]], axis=-1)


def sixd_to_matrix(d6: ArrayLike) -> np.ndarray:
    """Rotation matrix from a 6D vector by Gram-Schmidt (Zhou et al.)."""
    d6 = np.asarray(d6, dtype=float)
    if d6.shape[-1] != 6:
        raise ValueError(f"6D rotation must have 6 components, got shape {d6.shape}")
    a1, a2 = d6[..., :3], d6[..., 3:]
    n1 = np.linalg.norm(a1, axis=-1, keepdims=True)
    if np.any(n1 < _EPS):
        raise ValueError("6D rotation has a zero first column")
    b1 = a1 / n1
    u2 = a2 - np.sum(b1 * a2, axis=-1, keepdims=True) * b1
    n2 = np.linalg.norm(u2, axis=-1, keepdims=True)
    if np.any(n2 < _EPS):
        raise ValueError("6D rotation has parallel columns")
    b2 = u2 / n2
    b3 = np.cross(b1, b2)
    return np.stack([b1, b2, b3], axis=-1)


def quat_to_6d(q: ArrayLike) -> np.ndarray:
    """``matrix_to_6d(quat_to_matrix(q))``, the two columns computed alone."""
    u = _as_quat(q)
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    w, x, y, z = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
    out = np.empty(u.shape[:-1] + (6,))
    out[..., 0] = 1 - 2 * (y * y + z * z)
    out[..., 1] = 2 * (x * y + w * z)
    out[..., 2] = 2 * (x * z - w * y)
    out[..., 3] = 2 * (x * y - w * z)
    out[..., 4] = 1 - 2 * (x * x + z * z)
    out[..., 5] = 2 * (y * z + w * x)
    return out


def sixd_to_quat(d6: ArrayLike) -> np.ndarray:
    return matrix_to_quat(sixd_to_matrix(d6))
