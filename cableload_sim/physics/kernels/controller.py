"""Controller stage: one update of one quadrotor's onboard controller.

``controller_update`` runs the stages below in order, each a small inlined kernel that reads
and writes the quadrotor's controller state row ``cs`` and the scratch array (``layout.SC_*``):
measure (INDI filters), reference (plan or hover hold), the cable's pull yielded to, force
command, thrust axis, attitude target, attitude loop, tilt barrier, body-rate INDI, allocation.
See the package docstring for the control law.
"""

from __future__ import annotations

import math

from cableload_sim.physics.kernels.contact import landed_idle
from cableload_sim.physics.kernels.jit import kernel, quad_model_offset, quad_offset, quat_product
from cableload_sim.physics.layout import (
    CS_ACC_FILT,
    CS_ALPHA_FILT,
    CS_FORCE_FILT,
    CS_HEADING,
    CS_HOLD_POS,
    CS_INITIALIZED,
    CS_MODE,
    CS_PREV_FORCE,
    CS_PREV_RATE,
    CS_PREV_TORQUE,
    CS_PREV_VEL,
    CS_PULL_SLOW,
    CS_ROTOR_CMD,
    CS_SEGMENT,
    CS_TORQUE_FILT,
    G_ATT_GAIN,
    G_COS_HALF_TILT,
    G_FILTER_ALPHA,
    G_HOLD_COMPLIANCE,
    G_INV_DT,
    G_KP,
    G_KV,
    G_MAX_POS_ERR,
    G_MAX_TILT,
    G_PULL_ALPHA,
    G_RATE_GAIN,
    G_RATE_LAG,
    G_TAN_MAX_TILT,
    G_TRACK_COMPLIANCE,
    G_YAW_GAIN,
    K_HOLD_UPDATES,
    K_REJECTED_PLANS,
    M_GRAVITY,
    M_GROUND,
    MODE_HOLD_EXPIRED,
    MODE_HOLD_NO_PLAN,
    MODE_HOLD_REJECTED,
    MODE_TRACKING,
    PLAN_NEW,
    PLAN_REJECTED,
    PLAN_VALID,
    QM_ALLOC,
    QM_ALLOC_INV,
    QM_INERTIA,
    QM_KF,
    QM_MASS,
    QM_MOTOR_TAU,
    QM_SPEED_MAX,
    QM_SPEED_MIN,
    QUAD_POS,
    QUAD_QUAT,
    QUAD_RATE,
    QUAD_ROTOR,
    QUAD_VEL,
    REF_ACC,
    REF_JERK,
    REF_POS,
    REF_RATE,
    REF_SIZE,
    REF_VEL,
    SC_ERR,
    SC_FORCE,
    SC_PULL,
    SC_RATE_CMD,
    SC_REF,
    SC_ROTOR,
    SC_TORQUE,
    SC_WRENCH,
    TR_ACC,
    TR_JERK,
    TR_POS,
    TR_RATE,
    TR_TIME,
    TR_VEL,
)

# ---------------------------------------------------------------------------------------------
# Plans


@kernel()
def _validate_plan(plan):
    """A plan is usable when all its values are finite and its node times strictly increase."""
    nodes = plan.shape[0]
    for j in range(nodes):
        for f in range(plan.shape[1]):
            if not math.isfinite(plan[j, f]):
                return False
        if j > 0 and plan[j, TR_TIME] <= plan[j - 1, TR_TIME]:
            return False
    return True


@kernel(inline="always")
def _hermite(p0, m0, p1, m1, dt, s):
    """Cubic Hermite value between (p0, slope m0) and (p1, slope m1) at s in [0, 1] of dt."""
    s2 = s * s
    s3 = s2 * s
    return (
        (2 * s3 - 3 * s2 + 1) * p0
        + (s3 - 2 * s2 + s) * dt * m0
        + (-2 * s3 + 3 * s2) * p1
        + (s3 - s2) * dt * m1
    )


@kernel(inline="always")
def sample_plan(plan, t, hint, out, w):
    """Sample a valid plan at time t into out[w:w+REF_SIZE] (``layout.REF_*``): p, v, a, jerk,
    body rates.

    Returns the segment index used, or -1 when t is past the last node. Before the first node
    the first node's values are used.
    """
    nodes = plan.shape[0]
    if t > plan[nodes - 1, TR_TIME]:
        return -1
    if t <= plan[0, TR_TIME]:
        for f in range(REF_SIZE):
            out[w + f] = plan[0, TR_POS + f]
        return 0
    j = hint if 0 <= hint < nodes - 1 else 0
    if plan[j, TR_TIME] > t:
        j = 0
    while j < nodes - 2 and plan[j + 1, TR_TIME] < t:
        j += 1
    dt = plan[j + 1, TR_TIME] - plan[j, TR_TIME]
    s = (t - plan[j, TR_TIME]) / dt
    for r in range(3):
        out[w + REF_POS + r] = _hermite(
            plan[j, TR_POS + r], plan[j, TR_VEL + r], plan[j + 1, TR_POS + r], plan[j + 1, TR_VEL + r], dt, s
        )
        out[w + REF_VEL + r] = _hermite(
            plan[j, TR_VEL + r], plan[j, TR_ACC + r], plan[j + 1, TR_VEL + r], plan[j + 1, TR_ACC + r], dt, s
        )
        out[w + REF_ACC + r] = _hermite(
            plan[j, TR_ACC + r],
            plan[j, TR_JERK + r],
            plan[j + 1, TR_ACC + r],
            plan[j + 1, TR_JERK + r],
            dt,
            s,
        )
        out[w + REF_JERK + r] = (1 - s) * plan[j, TR_JERK + r] + s * plan[j + 1, TR_JERK + r]
        out[w + REF_RATE + r] = (1 - s) * plan[j, TR_RATE + r] + s * plan[j + 1, TR_RATE + r]
    return j


# ---------------------------------------------------------------------------------------------
# Stages of one update


@kernel(inline="always")
def _rotor_wrench(x, o, cmodel, qm, R, b, out, w):
    """Thrust vector (world, out[w:w+3]) and rotor torque (body, out[w+3:w+6]) from rotor speeds."""
    kf = cmodel[qm + QM_KF]
    thrust = 0.0
    for r in range(3):
        out[w + 3 + r] = 0.0
    for k in range(4):
        f = kf * x[o + QUAD_ROTOR + k] ** 2
        thrust += f
        for r in range(3):
            out[w + 3 + r] += cmodel[qm + QM_ALLOC + 4 * (r + 1) + k] * f
    out[w] = R[b, 2] * thrust
    out[w + 1] = R[b, 5] * thrust
    out[w + 2] = R[b, 8] * thrust


@kernel(inline="always")
def _hold_heading(R, b, cs):
    """Keep the current heading as the yaw target: the horizontal unit vector c perpendicular to
    the body y axis, ``c ~ y_B x e_z``. The target attitude is built from a thrust axis z and c
    as ``y = z x c / |z x c|``, ``x = y x z``, which gives back this very attitude for z = z_B;
    the horizontal projection of body x would not (it leaves the vertical plane of c as soon as
    the body tilts about an axis other than x or y), and would turn a hovering, tilted
    quadrotor about its z axis on every entry into hold."""
    hx = R[b, 4]
    hy = -R[b, 1]
    norm = math.sqrt(hx * hx + hy * hy)
    if norm < 1e-6:  # body y axis vertical: any heading will do
        hx = 1.0
        hy = 0.0
        norm = 1.0
    cs[CS_HEADING] = hx / norm
    cs[CS_HEADING + 1] = hy / norm


@kernel(inline="always")
def _measure(x, o, b, cs, cmodel, qm, gains, R, scratch):
    """The INDI filters: measured acceleration and angular acceleration (finite differences
    over one update), and the rotor thrust vector and torque at the same mid-update instants,
    filtered alike. The first update seeds them and enters hold where the quadrotor is.
    Returns whether this was the first update."""
    rw = SC_WRENCH
    _rotor_wrench(x, o, cmodel, qm, R, b, scratch, rw)
    inv_dt = gains[G_INV_DT]
    alpha = gains[G_FILTER_ALPHA]
    fresh = cs[CS_INITIALIZED] == 0.0
    if fresh:
        for r in range(3):
            cs[CS_ACC_FILT + r] = 0.0
            cs[CS_ALPHA_FILT + r] = 0.0
            cs[CS_FORCE_FILT + r] = scratch[rw + r]
            cs[CS_TORQUE_FILT + r] = scratch[rw + 3 + r]
            cs[CS_HOLD_POS + r] = x[o + QUAD_POS + r]
        _hold_heading(R, b, cs)
        cs[CS_MODE] = MODE_HOLD_NO_PLAN
        cs[CS_INITIALIZED] = 1.0
    else:
        for r in range(3):
            acc = (x[o + QUAD_VEL + r] - cs[CS_PREV_VEL + r]) * inv_dt
            ang = (x[o + QUAD_RATE + r] - cs[CS_PREV_RATE + r]) * inv_dt
            fmid = 0.5 * (scratch[rw + r] + cs[CS_PREV_FORCE + r])
            tmid = 0.5 * (scratch[rw + 3 + r] + cs[CS_PREV_TORQUE + r])
            cs[CS_ACC_FILT + r] += alpha * (acc - cs[CS_ACC_FILT + r])
            cs[CS_ALPHA_FILT + r] += alpha * (ang - cs[CS_ALPHA_FILT + r])
            cs[CS_FORCE_FILT + r] += alpha * (fmid - cs[CS_FORCE_FILT + r])
            cs[CS_TORQUE_FILT + r] += alpha * (tmid - cs[CS_TORQUE_FILT + r])
    for r in range(3):
        cs[CS_PREV_VEL + r] = x[o + QUAD_VEL + r]
        cs[CS_PREV_RATE + r] = x[o + QUAD_RATE + r]
        cs[CS_PREV_FORCE + r] = scratch[rw + r]
        cs[CS_PREV_TORQUE + r] = scratch[rw + 3 + r]
    return fresh


@kernel(inline="always")
def _reference(x, o, i, b, cs, plan, plan_status, counters, t, R, scratch):
    """The reference at t into scratch[SC_REF:]: the plan sampled (a new plan checked first,
    a bad one rejected and counted), or hover where hold began. Returns the mode (MODE_*);
    ``cs[CS_MODE]`` still holds the previous one."""
    if plan_status[i] == PLAN_NEW:
        if _validate_plan(plan):
            plan_status[i] = PLAN_VALID
            cs[CS_SEGMENT] = 0.0
        else:
            plan_status[i] = PLAN_REJECTED
            counters[i, K_REJECTED_PLANS] += 1.0
    mode = MODE_HOLD_NO_PLAN
    if plan_status[i] == PLAN_VALID:
        seg = sample_plan(plan, t, int(cs[CS_SEGMENT]), scratch, SC_REF)
        if seg >= 0:
            mode = MODE_TRACKING
            cs[CS_SEGMENT] = seg
        else:
            mode = MODE_HOLD_EXPIRED
    elif plan_status[i] == PLAN_REJECTED:
        mode = MODE_HOLD_REJECTED
    if mode != MODE_TRACKING:
        if cs[CS_MODE] == MODE_TRACKING:
            for r in range(3):
                cs[CS_HOLD_POS + r] = x[o + QUAD_POS + r]
            _hold_heading(R, b, cs)
        for f in range(REF_SIZE):
            scratch[SC_REF + f] = 0.0
        for r in range(3):
            scratch[SC_REF + REF_POS + r] = cs[CS_HOLD_POS + r]
        counters[i, K_HOLD_UPDATES] += 1.0
    return mode


@kernel(inline="always")
def _yield_to_pull(cs, gains, mode, restart, mass, g, scratch):
    """The share of the cable's pull yielded to, into scratch[SC_PULL:] (world, N); returns
    that share, beta (0: nothing yielded to, scratch[SC_PULL:] not written).

    The pull as INDI sees it is m a_filt - F_filt + m g e_z; its slow part is a first-order
    filter, restarted from the pull itself (``restart``), kept only while some of the fast part
    is yielded to. The share: all of it when holding. When tracking, a share that is 0 unless
    the swing needs it; then only the part across the cable (tension changes along it are how
    planners move the load) and not what a mass mu carried rigidly would add under the plan's
    acceleration (the plan explains it; mu from the vertical part of the slow pull)."""
    beta = gains[G_HOLD_COMPLIANCE]
    mu = 0.0
    if mode == MODE_TRACKING:
        beta = gains[G_TRACK_COMPLIANCE]
        if beta != 0.0 and not restart and cs[CS_PULL_SLOW + 2] < 0.0:
            mu = -cs[CS_PULL_SLOW + 2] / g
    if beta != 0.0:
        slow = 1.0 if restart else gains[G_PULL_ALPHA]
        for r in range(3):
            pull = mass * cs[CS_ACC_FILT + r] - cs[CS_FORCE_FILT + r] + mu * scratch[SC_REF + REF_ACC + r]
            if r == 2:
                pull += mass * g
            cs[CS_PULL_SLOW + r] += slow * (pull - cs[CS_PULL_SLOW + r])
            scratch[SC_PULL + r] = beta * (pull - cs[CS_PULL_SLOW + r])
        norm2 = cs[CS_PULL_SLOW] ** 2 + cs[CS_PULL_SLOW + 1] ** 2 + cs[CS_PULL_SLOW + 2] ** 2
        if mode == MODE_TRACKING and norm2 > 0.0:
            along = (
                scratch[SC_PULL] * cs[CS_PULL_SLOW]
                + scratch[SC_PULL + 1] * cs[CS_PULL_SLOW + 1]
                + scratch[SC_PULL + 2] * cs[CS_PULL_SLOW + 2]
            ) / norm2
            for r in range(3):
                scratch[SC_PULL + r] -= along * cs[CS_PULL_SLOW + r]
    return beta


@kernel(inline="always")
def _force_command(x, o, cs, gains, mass, beta, scratch):
    """Position control with INDI force compensation into scratch[SC_FORCE:] (world, N):
    ``F = F_filt + m (a_ref + Kp e_p + Kv e_v - a_filt)``, the position error clipped, plus the
    pull yielded to."""
    ref = SC_REF
    ex = scratch[ref + REF_POS] - x[o + QUAD_POS]
    ey = scratch[ref + REF_POS + 1] - x[o + QUAD_POS + 1]
    ez = scratch[ref + REF_POS + 2] - x[o + QUAD_POS + 2]
    enorm = math.sqrt(ex * ex + ey * ey + ez * ez)
    if enorm > gains[G_MAX_POS_ERR]:
        scale = gains[G_MAX_POS_ERR] / enorm
        ex *= scale
        ey *= scale
        ez *= scale
    scratch[SC_ERR] = ex
    scratch[SC_ERR + 1] = ey
    scratch[SC_ERR + 2] = ez
    for r in range(3):
        acmd = (
            scratch[ref + REF_ACC + r]
            + gains[G_KP + r] * scratch[SC_ERR + r]
            + gains[G_KV + r] * (scratch[ref + REF_VEL + r] - x[o + QUAD_VEL + r])
        )
        scratch[SC_FORCE + r] = cs[CS_FORCE_FILT + r] + mass * (acmd - cs[CS_ACC_FILT + r])
    if beta != 0.0:
        for r in range(3):
            scratch[SC_FORCE + r] += scratch[SC_PULL + r]


@kernel(inline="always")
def _thrust_axis(scratch, gains, mass, g, R, b):
    """The commanded force kept upward (at least 0.2 of the weight) and within the tilt limit:
    returns its unit direction (world) and the collective thrust, its projection on the
    current body z (N)."""
    fx = scratch[SC_FORCE]
    fy = scratch[SC_FORCE + 1]
    fz = scratch[SC_FORCE + 2]
    fz_min = 0.2 * mass * g
    if fz < fz_min:
        fz = fz_min
    fh = math.sqrt(fx * fx + fy * fy)
    fh_max = gains[G_TAN_MAX_TILT] * fz
    if fh > fh_max:
        fx *= fh_max / fh
        fy *= fh_max / fh
    inv_fn = 1.0 / math.sqrt(fx * fx + fy * fy + fz * fz)
    thrust = fx * R[b, 2] + fy * R[b, 5] + fz * R[b, 8]
    return fx * inv_fn, fy * inv_fn, fz * inv_fn, thrust


@kernel(inline="always")
def _target_attitude(zx, zy, zz, cxw, cyw):
    """The quaternion (w, x, y, z) of the attitude with thrust axis z and heading c (the
    horizontal unit vector (cxw, cyw)): ``y = z x c / |z x c|``, ``x = y x z``."""
    yx = -zz * cyw
    yy = zz * cxw
    yz = zx * cyw - zy * cxw
    inv_yn = 1.0 / math.sqrt(yx * yx + yy * yy + yz * yz)
    yx *= inv_yn
    yy *= inv_yn
    yz *= inv_yn
    xx = yy * zz - yz * zy
    xy = yz * zx - yx * zz
    xz = yx * zy - yy * zx
    # rotation matrix [x y z] -> quaternion (Shepperd); R[r][c] = column c's component r
    tr = xx + yy + zz
    if tr > 0.0:
        s = 2.0 * math.sqrt(1.0 + tr)
        inv_s = 1.0 / s
        return 0.25 * s, (yz - zy) * inv_s, (zx - xz) * inv_s, (xy - yx) * inv_s
    if xx > yy and xx > zz:
        s = 2.0 * math.sqrt(1.0 + xx - yy - zz)
        return (yz - zy) / s, 0.25 * s, (yx + xy) / s, (zx + xz) / s
    if yy > zz:
        s = 2.0 * math.sqrt(1.0 + yy - xx - zz)
        return (zx - xz) / s, (yx + xy) / s, 0.25 * s, (zy + yz) / s
    s = 2.0 * math.sqrt(1.0 + zz - xx - yy)
    return (xy - yx) / s, (zx + xz) / s, (zy + yz) / s, 0.25 * s


@kernel(inline="always")
def _attitude_loop(x, o, dw, dxq, dyq, dzq, gains, scratch):
    """Tilt-prioritized attitude control (Brescianini et al. 2013) toward the target
    quaternion d: body-rate command into scratch[SC_RATE_CMD:]."""
    # error quaternion q_e = conj(q) (x) q_des
    ew, ewx, ewy, ewz = quat_product(
        x[o + QUAD_QUAT],
        -x[o + QUAD_QUAT + 1],
        -x[o + QUAD_QUAT + 2],
        -x[o + QUAD_QUAT + 3],
        dw,
        dxq,
        dyq,
        dzq,
    )
    if ew < 0.0:
        ew = -ew
        ewx = -ewx
        ewy = -ewy
        ewz = -ewz
    # tilt-prioritized split q_e = q_tilt (x) q_yaw
    c = math.sqrt(ew * ew + ewz * ewz)
    wc = SC_RATE_CMD
    if c > 1e-9:
        inv_c = 1.0 / c
        scratch[wc] = gains[G_ATT_GAIN] * (ew * ewx - ewy * ewz) * inv_c
        scratch[wc + 1] = gains[G_ATT_GAIN] * (ew * ewy + ewx * ewz) * inv_c
        scratch[wc + 2] = gains[G_YAW_GAIN] * ewz * inv_c
    else:  # upside down relative to the target: rotate about x
        scratch[wc] = gains[G_ATT_GAIN]
        scratch[wc + 1] = 0.0
        scratch[wc + 2] = 0.0


@kernel(inline="always")
def _tilt_barrier(R, b, scratch, wc, max_tilt, cos_half_max_tilt, lag):
    """Limit the body-rate command scratch[wc:wc+3] so that the tilt of body z from the vertical
    cannot overshoot ``max_tilt``. With e the horizontal direction of body z and k = e_z x e
    (world), the tilt grows with the world rate about k and the tilt direction turns with the
    rate about e. The rate about k may grow the tilt at most at ``brake (max_tilt - tilt)``
    (above the limit: must shrink it at least at that rate) and shrink it at most at
    ``brake (max_tilt + tilt)``, since a tilt swinging through the vertical must stop on the
    other side too; the rate about e, which near the vertical turns into tilt as fast, is kept
    within ``brake max_tilt``. ``brake = 1 / (4 lag)``, ``lag`` the delay with which the body
    rate follows its command: it brakes a lagging first-order follower without overshoot
    (critical damping). The thrust direction command is limited to ``max_tilt`` already; this
    keeps the attitude loop from overshooting it."""
    # nothing to limit (the common case, no square root or division): tilt at most half the
    # limit and |w| <= brake max_tilt / 2 = max_tilt / (8 lag); |w| bounds the rates about k
    # and about e
    reach = 8.0 * lag
    w2 = scratch[wc] * scratch[wc] + scratch[wc + 1] * scratch[wc + 1] + scratch[wc + 2] * scratch[wc + 2]
    if R[b, 8] >= cos_half_max_tilt and w2 * reach * reach <= max_tilt * max_tilt:
        return
    # world rate w = R w_B (horizontal part)
    wx = R[b, 0] * scratch[wc] + R[b, 1] * scratch[wc + 1] + R[b, 2] * scratch[wc + 2]
    wy = R[b, 3] * scratch[wc] + R[b, 4] * scratch[wc + 1] + R[b, 5] * scratch[wc + 2]
    zx = R[b, 2]
    zy = R[b, 5]
    sin_tilt = math.sqrt(zx * zx + zy * zy)
    if sin_tilt < 1e-9:
        return
    inv = 1.0 / sin_tilt
    about_k = (zx * wy - zy * wx) * inv
    about_e = (zx * wx + zy * wy) * inv
    brake = 0.25 / lag
    turn_max = brake * max_tilt
    tilt = math.atan2(sin_tilt, R[b, 8])
    dk = max(min(about_k, brake * (max_tilt - tilt)), -brake * (max_tilt + tilt)) - about_k
    de = max(min(about_e, turn_max), -turn_max) - about_e
    if dk == 0.0 and de == 0.0:
        return
    # back to the body frame: R^T (dk k + de e)
    dwx = (de * zx - dk * zy) * inv
    dwy = (dk * zx + de * zy) * inv
    for r in range(3):
        scratch[wc + r] += R[b, r] * dwx + R[b, 3 + r] * dwy


@kernel(inline="always")
def _rate_loop(x, o, cs, cmodel, qm, gains, scratch):
    """INDI body-rate control into scratch[SC_TORQUE:] (body, N m):
    ``tau = tau_filt + J (K_w (w_cmd - w) - alpha_filt)``."""
    for r in range(3):
        alpha_cmd = gains[G_RATE_GAIN + r] * (scratch[SC_RATE_CMD + r] - x[o + QUAD_RATE + r])
        scratch[SC_TORQUE + r] = cs[CS_TORQUE_FILT + r] + cmodel[qm + QM_INERTIA + r] * (
            alpha_cmd - cs[CS_ALPHA_FILT + r]
        )


@kernel(inline="always")
def _allocate(thrust, cs, cmodel, qm, scratch):
    """Rotor speed commands into cs[CS_ROTOR_CMD:] from the collective thrust and the torque in
    scratch[SC_TORQUE:]: when a rotor saturates the yaw torque is dropped first, then the
    collective thrust shifted so that the roll and pitch torque fit (attitude before thrust),
    then clipped."""
    tau = SC_TORQUE
    kf = cmodel[qm + QM_KF]
    f_min = kf * cmodel[qm + QM_SPEED_MIN] ** 2
    f_max = kf * cmodel[qm + QM_SPEED_MAX] ** 2
    thrust = min(max(thrust, 4.0 * f_min), 4.0 * f_max)
    for attempt in range(2):
        saturated = False
        for k in range(4):
            a = qm + QM_ALLOC_INV + 4 * k
            f = cmodel[a] * thrust + cmodel[a + 1] * scratch[tau] + cmodel[a + 2] * scratch[tau + 1]
            if attempt == 0:
                f += cmodel[a + 3] * scratch[tau + 2]
            if f < f_min or f > f_max:
                saturated = True
            scratch[SC_ROTOR + k] = f
        if not saturated:
            break
    if saturated:
        lo = min(
            min(scratch[SC_ROTOR], scratch[SC_ROTOR + 1]), min(scratch[SC_ROTOR + 2], scratch[SC_ROTOR + 3])
        )
        hi = max(
            max(scratch[SC_ROTOR], scratch[SC_ROTOR + 1]), max(scratch[SC_ROTOR + 2], scratch[SC_ROTOR + 3])
        )
        shift = 0.0
        if lo < f_min and hi + (f_min - lo) <= f_max:
            shift = f_min - lo
        elif hi > f_max and lo - (hi - f_max) >= f_min:
            shift = f_max - hi
        for k in range(4):
            scratch[SC_ROTOR + k] += shift
    inv_kf = 1.0 / kf
    for k in range(4):
        f = min(max(scratch[SC_ROTOR + k], f_min), f_max)
        cs[CS_ROTOR_CMD + k] = math.sqrt(f * inv_kf)


# ---------------------------------------------------------------------------------------------
# One update


@kernel(inline="always")
def controller_update(x, i, cs, plan, plan_status, counters, cmodel, gains, t, R, scratch):
    """One update of quadrotor i's onboard controller at time t.

    Reads the state x (its own block only) and its plan; writes its controller state cs (row),
    its rotor speed commands cs[CS_ROTOR_CMD:...] and counters. ``R`` (n+1, 9) must hold the
    current rotation matrices; ``scratch`` is a (SC_SIZE,) work array.
    """
    o = quad_offset(i)
    qm = quad_model_offset(i)
    b = i + 1
    g = cmodel[M_GRAVITY]
    mass = cmodel[qm + QM_MASS]
    fresh = _measure(x, o, b, cs, cmodel, qm, gains, R, scratch)
    mode = _reference(x, o, i, b, cs, plan, plan_status, counters, t, R, scratch)
    if cmodel[M_GROUND] != 0.0 and landed_idle(x, o, cs, cmodel, qm, scratch):
        _hold_heading(R, b, cs)
        cs[CS_MODE] = mode
        return
    # the slow pull restarts from the pull as it is on the first update and whenever the
    # controller changes between tracking and holding
    restart = fresh or ((cs[CS_MODE] == MODE_TRACKING) != (mode == MODE_TRACKING))
    cs[CS_MODE] = mode
    beta = _yield_to_pull(cs, gains, mode, restart, mass, g, scratch)
    _force_command(x, o, cs, gains, mass, beta, scratch)
    zx, zy, zz, thrust = _thrust_axis(scratch, gains, mass, g, R, b)
    dw, dxq, dyq, dzq = _target_attitude(zx, zy, zz, cs[CS_HEADING], cs[CS_HEADING + 1])
    _attitude_loop(x, o, dw, dxq, dyq, dzq, gains, scratch)
    # the plan's body rates fed forward; then the tilt limit as a barrier on the flown tilt
    for r in range(3):
        scratch[SC_RATE_CMD + r] += scratch[SC_REF + REF_RATE + r]
    _tilt_barrier(
        R,
        b,
        scratch,
        SC_RATE_CMD,
        gains[G_MAX_TILT],
        gains[G_COS_HALF_TILT],
        gains[G_RATE_LAG] + cmodel[qm + QM_MOTOR_TAU],
    )
    _rate_loop(x, o, cs, cmodel, qm, gains, scratch)
    _allocate(thrust, cs, cmodel, qm, scratch)
