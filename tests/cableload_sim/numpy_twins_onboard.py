"""NumPy twin of ``cableload_sim.physics.kernels.onboard``: the IMU, the motion capture and the onboard
estimate of one quadrotor at one controller update, written from that module's docstring with
Python integers for the noise and the rotations module for attitudes (used only by tests)."""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.physics import layout as L
from cableload_sim.rotations import quat_exp, quat_log, quat_multiply, quat_to_matrix

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def normal(seed: int, counter: int) -> float:
    """Box-Muller on the splitmix64 outputs 2 counter + 1 and 2 counter + 2 of ``seed``."""
    state = (seed + 2 * counter * _GOLDEN) & _MASK
    u1 = ((_mix((state + _GOLDEN) & _MASK) >> 11) + 0.5) * 2.0**-53
    u2 = (_mix((state + 2 * _GOLDEN) & _MASK) >> 11) * 2.0**-53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def _noise(seed: int, base: int, channel: int) -> np.ndarray:
    return np.array([normal(seed, base + channel + r) for r in range(3)])


def _short(q: np.ndarray) -> np.ndarray:
    return -q if q[0] < 0.0 else q


def onboard_update(x, i, cs, model, force_i, update, dt):
    """Returns the new controller state row and what the controller reads: position,
    attitude, velocity and body rates. ``force_i``: the total force on quadrotor i (world)."""
    cs = np.array(cs, dtype=float)
    o = L.quad_offset(i)
    p_true = x[o + L.QUAD_POS : o + L.QUAD_POS + 3]
    q_true = x[o + L.QUAD_QUAT : o + L.QUAD_QUAT + 4]
    v_true = x[o + L.QUAD_VEL : o + L.QUAD_VEL + 3]
    w_true = x[o + L.QUAD_RATE : o + L.QUAD_RATE + 3]

    def block(start, width=3):
        return slice(start, start + width)

    if cs[L.CS_EST_READY] == 0.0:
        cs[block(L.CS_EST_POS)] = p_true
        cs[block(L.CS_EST_VEL)] = v_true
        cs[block(L.CS_EST_QUAT, 4)] = q_true
        cs[block(L.CS_EST_GYRO_BIAS)] = 0.0
        cs[block(L.CS_EST_ACCEL_BIAS)] = 0.0
        for s in range(L.PENDING_SLOTS):
            cs[L.CS_EST_PENDING + L.PENDING_SIZE * s + L.PENDING_USE] = -1.0
        cs[L.CS_EST_READY] = 1.0
    seed = int(cs[L.CS_IMU_SEED])
    base = 16 * update
    g = model[L.M_GRAVITY]
    mass = model[L.quad_model_offset(i) + L.QM_MASS]
    R_true = quat_to_matrix(q_true)
    gyro = w_true + cs[block(L.CS_IMU_GYRO_BIAS)] + model[L.M_IMU_GYRO_STD] * _noise(seed, base, 0)
    accel = (
        R_true.T @ (force_i / mass + np.array([0.0, 0.0, g]))
        + cs[block(L.CS_IMU_ACCEL_BIAS)]
        + model[L.M_IMU_ACCEL_STD] * _noise(seed, base, 3)
    )
    w = gyro - cs[block(L.CS_EST_GYRO_BIAS)]
    f = accel - cs[block(L.CS_EST_ACCEL_BIAS)]
    q = cs[block(L.CS_EST_QUAT, 4)]
    a = quat_to_matrix(q) @ f - np.array([0.0, 0.0, g])
    p = cs[block(L.CS_EST_POS)] + cs[block(L.CS_EST_VEL)] * dt + 0.5 * a * dt * dt
    v = cs[block(L.CS_EST_VEL)] + a * dt
    q = quat_multiply(q, quat_exp(w * dt))
    q /= np.linalg.norm(q)
    every = int(model[L.M_IMU_CAPTURE_EVERY])
    if update % every == 0:
        slot = L.CS_EST_PENDING + L.PENDING_SIZE * ((update // every) % L.PENDING_SLOTS)
        cs[slot + L.PENDING_USE] = update + model[L.M_IMU_CAPTURE_DELAY]
        p_m = p_true + cs[block(L.CS_MOCAP_POS_BIAS)] + model[L.M_IMU_POS_STD] * _noise(seed, base, 6)
        q_m = quat_multiply(
            q_true, quat_exp(cs[block(L.CS_MOCAP_ATT_BIAS)] + model[L.M_IMU_ATT_STD] * _noise(seed, base, 9))
        )
        cs[block(slot + L.PENDING_POS)] = p_m - p
        cs[block(slot + L.PENDING_ATT)] = quat_log(_short(quat_multiply(q * [1, -1, -1, -1], q_m)))
    for s in range(L.PENDING_SLOTS):
        slot = L.CS_EST_PENDING + L.PENDING_SIZE * s
        if cs[slot + L.PENDING_USE] != update:
            continue
        cs[slot + L.PENDING_USE] = -1.0
        e_p = cs[block(slot + L.PENDING_POS)]
        e_q = cs[block(slot + L.PENDING_ATT)]
        R = quat_to_matrix(q)
        p = p + model[L.M_EST_K_POS] * e_p
        v = v + model[L.M_EST_K_VEL] * e_p
        cs[block(L.CS_EST_ACCEL_BIAS)] -= model[L.M_EST_K_ACCEL_BIAS] * (R.T @ e_p)
        q = quat_multiply(q, quat_exp(model[L.M_EST_K_ATT] * e_q))
        q /= np.linalg.norm(q)
        cs[block(L.CS_EST_GYRO_BIAS)] -= model[L.M_EST_K_GYRO_BIAS] * e_q
    cs[block(L.CS_EST_POS)] = p
    cs[block(L.CS_EST_VEL)] = v
    cs[block(L.CS_EST_QUAT, 4)] = q
    return cs, p, q, v, w
