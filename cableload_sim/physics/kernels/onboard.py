"""Onboard sensing stage: each quadrotor's IMU and the state estimate its controller flies on.

Run when the model has an IMU (``layout.M_IMU``), at every controller update and before it:
``onboard_update`` reads the sensors, advances quadrotor i's estimate and writes it, in the
state's layout, into a state vector and rotation array of its own, which the controller then
reads instead of the true ones. Nothing else in the stepping changes.

Sensors (this flight's biases in the controller state row, ``layout.CS_IMU_*``):

- gyroscope ``w_m = w + b_g + n_g``, accelerometer ``f_m = R^T (F / m + g e_z) + b_a + n_a``
  (the specific force of the total force F on the quadrotor, ground contact included);
- the quadrotor's own motion-capture pose every ``M_IMU_CAPTURE_EVERY`` updates with bias and
  white noise, used ``M_IMU_CAPTURE_DELAY`` updates after it was taken.

Estimate (position p, velocity v, attitude q, biases c_g, c_a), at each update of period dt:

- ``q <- q (x) exp((w_m - c_g) dt)``, ``a = R(q) (f_m - c_a) - g e_z``,
  ``p <- p + v dt + a dt^2 / 2``, ``v <- v + a dt``;
- at a capture, the errors ``e_p = p_m - p`` and ``e_q = log(q^-1 (x) q_m)`` of the estimate
  at that update are kept; when the capture is used, ``p += k_p e_p``, ``v += k_v e_p``,
  ``c_a -= k_a R(q)^T e_p``, ``q <- q (x) exp(k_q e_q)``, ``c_g -= k_b e_q`` (a fixed-gain
  observer: an error delayed by the latency is applied to the estimate as it is then).

The controller sees p, q, v and ``w_m - c_g``; its rotor speeds are the true ones (the speed
controllers report them).

Noise is a function of (seed, update, channel) (splitmix64, Box-Muller), not a generator's
state, so a flight draws the same noise however its steps are split into calls and whatever
ran before; each quadrotor has its own seed.
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.physics.kernels.jit import (
    kernel,
    quad_model_offset,
    quad_offset,
    quat_product,
    quat_to_rot,
)
from cableload_sim.physics.layout import (
    CS_EST_ACCEL_BIAS,
    CS_EST_GYRO_BIAS,
    CS_EST_PENDING,
    CS_EST_POS,
    CS_EST_QUAT,
    CS_EST_READY,
    CS_EST_VEL,
    CS_IMU_ACCEL_BIAS,
    CS_IMU_GYRO_BIAS,
    CS_IMU_SEED,
    CS_MOCAP_ATT_BIAS,
    CS_MOCAP_POS_BIAS,
    M_EST_K_ACCEL_BIAS,
    M_EST_K_ATT,
    M_EST_K_GYRO_BIAS,
    M_EST_K_POS,
    M_EST_K_VEL,
    M_GRAVITY,
    M_IMU_ACCEL_STD,
    M_IMU_ATT_STD,
    M_IMU_CAPTURE_DELAY,
    M_IMU_CAPTURE_EVERY,
    M_IMU_GYRO_STD,
    M_IMU_POS_STD,
    PENDING_ATT,
    PENDING_POS,
    PENDING_SIZE,
    PENDING_SLOTS,
    PENDING_USE,
    QM_MASS,
    QUAD_POS,
    QUAD_QUAT,
    QUAD_RATE,
    QUAD_ROTOR,
    QUAD_VEL,
)

# Noise channels of one update (each a standard normal number of its own)
CH_GYRO = 0
CH_ACCEL = 3
CH_CAPTURE_POS = 6
CH_CAPTURE_ATT = 9
CHANNELS = 16

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2^-53


@kernel(inline="always")
def _mix(z):
    """splitmix64's output function: a bijection of 64-bit integers that scatters bits."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@kernel()
def normal(seed, counter):
    """A standard normal number, a function of the integers ``seed`` and ``counter`` only:
    Box-Muller on two uniforms made by ``_mix`` from the splitmix64 sequence of ``seed`` at
    positions 2 counter + 1 and 2 counter + 2."""
    base = np.uint64(seed) + np.uint64(2) * np.uint64(counter) * _GOLDEN
    u1 = (float(_mix(base + _GOLDEN) >> np.uint64(11)) + 0.5) * _TO_UNIT
    u2 = float(_mix(base + _GOLDEN + _GOLDEN) >> np.uint64(11)) * _TO_UNIT
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@kernel(inline="always")
def _turn(q, k, rx, ry, rz):
    """q[k:k+4] <- q[k:k+4] (x) exp(r) for the body rotation vector r, normalized."""
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    if angle < 1e-8:
        c = 1.0
        s = 0.5
    else:
        c = math.cos(0.5 * angle)
        s = math.sin(0.5 * angle) / angle
    w, x, y, z = quat_product(q[k], q[k + 1], q[k + 2], q[k + 3], c, s * rx, s * ry, s * rz)
    inv = 1.0 / math.sqrt(w * w + x * x + y * y + z * z)
    q[k] = w * inv
    q[k + 1] = x * inv
    q[k + 2] = y * inv
    q[k + 3] = z * inv


@kernel(inline="always")
def _attitude_error(a, ka, b, kb):
    """The body rotation vector log(a^-1 (x) b) of quaternions a[ka:ka+4], b[kb:kb+4], the
    short way round."""
    w, x, y, z = quat_product(
        a[ka], -a[ka + 1], -a[ka + 2], -a[ka + 3], b[kb], b[kb + 1], b[kb + 2], b[kb + 3]
    )
    if w < 0.0:
        w = -w
        x = -x
        y = -y
        z = -z
    sin_half = math.sqrt(x * x + y * y + z * z)
    if sin_half < 1e-12:
        scale = 2.0
    else:
        scale = 2.0 * math.atan2(sin_half, w) / sin_half
    return scale * x, scale * y, scale * z


@kernel(inline="always")
def _start(x, o, cs):
    """The estimate starts at the true state (as if it had run while the quadrotor waited),
    its biases unknown, no capture in flight."""
    for r in range(3):
        cs[CS_EST_POS + r] = x[o + QUAD_POS + r]
        cs[CS_EST_VEL + r] = x[o + QUAD_VEL + r]
        cs[CS_EST_GYRO_BIAS + r] = 0.0
        cs[CS_EST_ACCEL_BIAS + r] = 0.0
    for r in range(4):
        cs[CS_EST_QUAT + r] = x[o + QUAD_QUAT + r]
    for s in range(PENDING_SLOTS):
        cs[CS_EST_PENDING + PENDING_SIZE * s + PENDING_USE] = -1.0
    cs[CS_EST_READY] = 1.0


@kernel(inline="always")
def _capture(x, o, cs, model, seed, base, update, R):
    """Take a capture of the quadrotor's pose at this update and keep the estimate's error
    against it for when it is used. ``R`` (9,) is scratch."""
    every = int(model[M_IMU_CAPTURE_EVERY])
    slot = CS_EST_PENDING + PENDING_SIZE * ((update // every) % PENDING_SLOTS)
    cs[slot + PENDING_USE] = update + model[M_IMU_CAPTURE_DELAY]
    pos_std = model[M_IMU_POS_STD]
    for r in range(3):
        measured = (
            x[o + QUAD_POS + r]
            + cs[CS_MOCAP_POS_BIAS + r]
            + pos_std * normal(seed, base + CH_CAPTURE_POS + r)
        )
        cs[slot + PENDING_POS + r] = measured - cs[CS_EST_POS + r]
    # measured attitude q (x) exp(bias + noise), then its error from the estimate
    att_std = model[M_IMU_ATT_STD]
    for r in range(4):
        R[r] = x[o + QUAD_QUAT + r]
    _turn(
        R,
        0,
        cs[CS_MOCAP_ATT_BIAS] + att_std * normal(seed, base + CH_CAPTURE_ATT),
        cs[CS_MOCAP_ATT_BIAS + 1] + att_std * normal(seed, base + CH_CAPTURE_ATT + 1),
        cs[CS_MOCAP_ATT_BIAS + 2] + att_std * normal(seed, base + CH_CAPTURE_ATT + 2),
    )
    ex, ey, ez = _attitude_error(cs, CS_EST_QUAT, R, 0)
    cs[slot + PENDING_ATT] = ex
    cs[slot + PENDING_ATT + 1] = ey
    cs[slot + PENDING_ATT + 2] = ez


@kernel(inline="always")
def _correct(cs, model, update, Re, b):
    """Apply every capture due at this update (``Re[b]``: the estimate's rotation)."""
    for s in range(PENDING_SLOTS):
        slot = CS_EST_PENDING + PENDING_SIZE * s
        if cs[slot + PENDING_USE] != update:
            continue
        cs[slot + PENDING_USE] = -1.0
        kp = model[M_EST_K_POS]
        kv = model[M_EST_K_VEL]
        ka = model[M_EST_K_ACCEL_BIAS]
        ex = cs[slot + PENDING_POS]
        ey = cs[slot + PENDING_POS + 1]
        ez = cs[slot + PENDING_POS + 2]
        for r in range(3):
            e = cs[slot + PENDING_POS + r]
            cs[CS_EST_POS + r] += kp * e
            cs[CS_EST_VEL + r] += kv * e
            # the bias is body-fixed: the world error seen in the body, R^T e
            cs[CS_EST_ACCEL_BIAS + r] -= ka * (Re[b, r] * ex + Re[b, 3 + r] * ey + Re[b, 6 + r] * ez)
        kq = model[M_EST_K_ATT]
        kb = model[M_EST_K_GYRO_BIAS]
        _turn(
            cs,
            CS_EST_QUAT,
            kq * cs[slot + PENDING_ATT],
            kq * cs[slot + PENDING_ATT + 1],
            kq * cs[slot + PENDING_ATT + 2],
        )
        for r in range(3):
            cs[CS_EST_GYRO_BIAS + r] -= kb * cs[slot + PENDING_ATT + r]


@kernel(inline="always")
def onboard_update(x, i, cs, model, force, R, update, dt, xe, Re, scratch):
    """Quadrotor i's sensors and estimate at controller update number ``update`` (period dt):
    reads the true state x, its total force ``force[i + 1]`` (world, N) and rotation
    ``R[i + 1]``; advances the estimate in its controller state row ``cs``; writes the
    estimate into ``xe`` (quadrotor i's block, the state's layout) and ``Re[i + 1]``.
    ``scratch`` holds at least 4 values."""
    o = quad_offset(i)
    b = i + 1
    if cs[CS_EST_READY] == 0.0:
        _start(x, o, cs)
    seed = int(cs[CS_IMU_SEED])
    base = update * CHANNELS
    g = model[M_GRAVITY]
    inv_m = 1.0 / model[quad_model_offset(i) + QM_MASS]
    gyro_std = model[M_IMU_GYRO_STD]
    accel_std = model[M_IMU_ACCEL_STD]
    # sensors: body rates, and the specific force R^T (F / m + g e_z)
    wx = (
        x[o + QUAD_RATE]
        + cs[CS_IMU_GYRO_BIAS]
        + gyro_std * normal(seed, base + CH_GYRO)
        - cs[CS_EST_GYRO_BIAS]
    )
    wy = (
        x[o + QUAD_RATE + 1]
        + cs[CS_IMU_GYRO_BIAS + 1]
        + gyro_std * normal(seed, base + CH_GYRO + 1)
        - cs[CS_EST_GYRO_BIAS + 1]
    )
    wz = (
        x[o + QUAD_RATE + 2]
        + cs[CS_IMU_GYRO_BIAS + 2]
        + gyro_std * normal(seed, base + CH_GYRO + 2)
        - cs[CS_EST_GYRO_BIAS + 2]
    )
    sx = force[b, 0] * inv_m
    sy = force[b, 1] * inv_m
    sz = force[b, 2] * inv_m + g
    for r in range(3):
        scratch[r] = (
            R[b, r] * sx
            + R[b, 3 + r] * sy
            + R[b, 6 + r] * sz
            + cs[CS_IMU_ACCEL_BIAS + r]
            + accel_std * normal(seed, base + CH_ACCEL + r)
            - cs[CS_EST_ACCEL_BIAS + r]
        )
    # propagate with the rotation at the start of the interval for the specific force
    quat_to_rot(cs, CS_EST_QUAT, Re, b)
    for r in range(3):
        a = Re[b, 3 * r] * scratch[0] + Re[b, 3 * r + 1] * scratch[1] + Re[b, 3 * r + 2] * scratch[2]
        if r == 2:
            a -= g
        cs[CS_EST_POS + r] += (cs[CS_EST_VEL + r] + 0.5 * a * dt) * dt
        cs[CS_EST_VEL + r] += a * dt
    _turn(cs, CS_EST_QUAT, wx * dt, wy * dt, wz * dt)
    if update % int(model[M_IMU_CAPTURE_EVERY]) == 0:
        _capture(x, o, cs, model, seed, base, update, scratch)
    quat_to_rot(cs, CS_EST_QUAT, Re, b)
    _correct(cs, model, update, Re, b)
    # what the controller reads
    for r in range(3):
        xe[o + QUAD_POS + r] = cs[CS_EST_POS + r]
        xe[o + QUAD_VEL + r] = cs[CS_EST_VEL + r]
    for r in range(4):
        xe[o + QUAD_QUAT + r] = cs[CS_EST_QUAT + r]
        xe[o + QUAD_ROTOR + r] = x[o + QUAD_ROTOR + r]
    xe[o + QUAD_RATE] = wx
    xe[o + QUAD_RATE + 1] = wy
    xe[o + QUAD_RATE + 2] = wz
    quat_to_rot(cs, CS_EST_QUAT, Re, b)
