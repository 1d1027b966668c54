"""Aerodynamic forces (part of the forces stage): drag on the load's faces and on each
quadrotor's frame, rotor drag, all against the wind sampled at the step's time.

Model (``params.AeroParams``): the load's pair of faces normal to load axis k takes
``-c_k |v_k| v_k`` (c_k = 1/2 rho C_d A_k, v the airspeed of the box's centre in the load
frame), acting at the box's centre (the centre of mass unless ``[mismatch] load_com_offset``
sets it off, when the drag also turns the load); a quadrotor's frame the same per body axis; each
rotor ``-k_d w (v_hub)_xy`` in its plane at its hub, w its speed and v_hub the hub's airspeed
in the body frame, body rate included (so rotor drag also yaws and damps yaw rate). Airspeed is
the body's velocity less the wind. Like cable damping, drag uses the velocities stored in x
(the half-step velocities inside a step).
"""

from __future__ import annotations

from cableload_sim.physics.kernels.jit import kernel, quad_model_offset, quad_offset
from cableload_sim.physics.layout import (
    LOAD_RATE,
    LOAD_VEL,
    M_LOAD_BOX_CENTRE,
    M_LOAD_DRAG,
    QM_FRAME_DRAG,
    QM_ROTOR_DRAG,
    QM_ROTOR_XY,
    QUAD_RATE,
    QUAD_ROTOR,
    QUAD_VEL,
)


@kernel(inline="always")
def wind_at(wind, wind_dt, t):
    """The wind (world, m/s) at time t >= 0 from samples every wind_dt from t = 0: linear
    between samples, the last one held after them."""
    last = wind.shape[0] - 1
    s = t / wind_dt
    j = int(s)
    if j >= last:
        return wind[last, 0], wind[last, 1], wind[last, 2]
    f = s - j
    return (
        wind[j, 0] + f * (wind[j + 1, 0] - wind[j, 0]),
        wind[j, 1] + f * (wind[j + 1, 1] - wind[j, 1]),
        wind[j, 2] + f * (wind[j + 1, 2] - wind[j, 2]),
    )


@kernel(inline="always")
def aero_forces(x, model, n, wx, wy, wz, R, force, torque):
    """Add the drag of the air moving at (wx, wy, wz) (world, m/s) to ``force`` (world, N) and
    ``torque`` (body, N m) of every body; R (n+1, 9) the current rotation matrices."""
    # load: the box centre's airspeed into the load frame, drag per pair of faces at the box
    # centre (c from the centre of mass), back to the world
    vx = x[LOAD_VEL] - wx
    vy = x[LOAD_VEL + 1] - wy
    vz = x[LOAD_VEL + 2] - wz
    cx = model[M_LOAD_BOX_CENTRE]
    cy = model[M_LOAD_BOX_CENTRE + 1]
    cz = model[M_LOAD_BOX_CENTRE + 2]
    ux = R[0, 0] * vx + R[0, 3] * vy + R[0, 6] * vz + x[LOAD_RATE + 1] * cz - x[LOAD_RATE + 2] * cy
    uy = R[0, 1] * vx + R[0, 4] * vy + R[0, 7] * vz + x[LOAD_RATE + 2] * cx - x[LOAD_RATE] * cz
    uz = R[0, 2] * vx + R[0, 5] * vy + R[0, 8] * vz + x[LOAD_RATE] * cy - x[LOAD_RATE + 1] * cx
    dx = -model[M_LOAD_DRAG] * abs(ux) * ux
    dy = -model[M_LOAD_DRAG + 1] * abs(uy) * uy
    dz = -model[M_LOAD_DRAG + 2] * abs(uz) * uz
    torque[0, 0] += cy * dz - cz * dy
    torque[0, 1] += cz * dx - cx * dz
    torque[0, 2] += cx * dy - cy * dx
    for r in range(3):
        force[0, r] += R[0, 3 * r] * dx + R[0, 3 * r + 1] * dy + R[0, 3 * r + 2] * dz
    for i in range(n):
        b = i + 1
        o = quad_offset(i)
        qm = quad_model_offset(i)
        vx = x[o + QUAD_VEL] - wx
        vy = x[o + QUAD_VEL + 1] - wy
        vz = x[o + QUAD_VEL + 2] - wz
        ux = R[b, 0] * vx + R[b, 3] * vy + R[b, 6] * vz
        uy = R[b, 1] * vx + R[b, 4] * vy + R[b, 7] * vz
        uz = R[b, 2] * vx + R[b, 5] * vy + R[b, 8] * vz
        dx = -model[qm + QM_FRAME_DRAG] * abs(ux) * ux
        dy = -model[qm + QM_FRAME_DRAG + 1] * abs(uy) * uy
        dz = -model[qm + QM_FRAME_DRAG + 2] * abs(uz) * uz
        # rotor drag at each hub (x_k, y_k, 0): in-plane hub airspeed u + w x r_hub
        kd = model[qm + QM_ROTOR_DRAG]
        yaw_rate = x[o + QUAD_RATE + 2]
        for k in range(4):
            hub_x = model[qm + QM_ROTOR_XY + 2 * k]
            hub_y = model[qm + QM_ROTOR_XY + 2 * k + 1]
            scale = -kd * x[o + QUAD_ROTOR + k]
            hx = scale * (ux - yaw_rate * hub_y)
            hy = scale * (uy + yaw_rate * hub_x)
            dx += hx
            dy += hy
            torque[b, 2] += hub_x * hy - hub_y * hx
        for r in range(3):
            force[b, r] += R[b, 3 * r] * dx + R[b, 3 * r + 1] * dy + R[b, 3 * r + 2] * dz
