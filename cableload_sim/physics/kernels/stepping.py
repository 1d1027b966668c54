"""Stepping stage: physics steps with the controllers at their rate, statistics and logs.

``advance(sys, data, step0, n_steps, wrench, log)`` in the manner of Brax's
``step(sys, state, act)``: ``sys`` is the constant ``layout.SimModel``, ``data`` the
``layout.SimData`` changed in place, ``wrench`` the input held over each step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import prange

from cableload_sim.physics.kernels.aero import wind_at
from cableload_sim.physics.kernels.ball import ball_drift, ball_forces, ball_kick
from cableload_sim.physics.kernels.battery import battery_motors
from cableload_sim.physics.kernels.contact import cable_snaps
from cableload_sim.physics.kernels.controller import controller_update
from cableload_sim.physics.kernels.forces import forces_in_wind
from cableload_sim.physics.kernels.integrator import (
    body_constants,
    drift,
    kick,
    momenta_from_rates,
    motor_decay,
    motors,
    rates_from_momenta,
)
from cableload_sim.physics.kernels.jit import (
    body_offset,
    kernel,
    quad_model_offset,
    quad_offset,
    quat_to_rot,
)
from cableload_sim.physics.kernels.onboard import onboard_update
from cableload_sim.physics.layout import (
    BODY_POS,
    BODY_QUAT,
    FC_FORCE,
    FC_MOMENTUM,
    FC_TORQUE,
    M_BALL,
    M_BATTERY,
    M_IMU,
    M_SNAP_INELASTIC,
    QM_SPEED_MAX,
    QUAD_ROTOR,
    SC_SIZE,
    ST_LONGEST_SLACK,
    ST_MAX_THRUST_RATIO,
    ST_MIN_UAV_DIST_SQ,
    ST_SLACK_ANY,
    ST_STEPS,
    ST_STREAK,
    SimData,
    SimLog,
    SimModel,
)


@kernel()
def _slack_statistics(n, h, tension, stats):
    """Every physics step: time with any cable slack, and each cable's longest slack streak."""
    stats[ST_STEPS] += 1.0
    any_slack = False
    for i in range(n):
        if tension[i] == 0.0:
            any_slack = True
            stats[ST_STREAK + i] += h
            if stats[ST_STREAK + i] > stats[ST_LONGEST_SLACK]:
                stats[ST_LONGEST_SLACK] = stats[ST_STREAK + i]
        else:
            stats[ST_STREAK + i] = 0.0
    if any_slack:
        stats[ST_SLACK_ANY] += 1.0


@kernel()
def _sampled_statistics(x, n, model, stats):
    """At every controller update: largest thrust ratio and closest pair of quadrotors."""
    for i in range(n):
        o = quad_offset(i)
        w2 = 0.0
        for r in range(4):
            w2 += x[o + QUAD_ROTOR + r] ** 2
        full = 4.0 * model[quad_model_offset(i) + QM_SPEED_MAX] ** 2
        if w2 > stats[ST_MAX_THRUST_RATIO] * full:  # the division only for a new largest
            stats[ST_MAX_THRUST_RATIO] = max(w2 / full, stats[ST_MAX_THRUST_RATIO])
        for k in range(i):
            ok = quad_offset(k)
            d2 = 0.0
            for r in range(3):
                d2 += (x[o + BODY_POS + r] - x[ok + BODY_POS + r]) ** 2
            if d2 < stats[ST_MIN_UAV_DIST_SQ]:
                stats[ST_MIN_UAV_DIST_SQ] = d2


@kernel()
def _restore_forces(x, n, fcache, R, force, torque, mom, ball):
    """Start from the forces, torques and momenta the last call ended with (and the ball's
    force when ``ball``)."""
    for b in range(n + 1):
        quat_to_rot(x, body_offset(b) + BODY_QUAT, R, b)
        for r in range(3):
            force[b, r] = fcache[b, FC_FORCE + r]
            torque[b, r] = fcache[b, FC_TORQUE + r]
            mom[b, r] = fcache[b, FC_MOMENTUM + r]
    if ball:
        for r in range(3):
            force[n + 1, r] = fcache[n + 1, FC_FORCE + r]


@kernel()
def _store_forces(n, force, torque, mom, fcache, ball):
    for b in range(n + 1):
        for r in range(3):
            fcache[b, FC_FORCE + r] = force[b, r]
            fcache[b, FC_TORQUE + r] = torque[b, r]
            fcache[b, FC_MOMENTUM + r] = mom[b, r]
    if ball:
        for r in range(3):
            fcache[n + 1, FC_FORCE + r] = force[n + 1, r]


class Work(NamedTuple):
    """``advance``'s work arrays, allocated once per call."""

    R: np.ndarray  # (n+1, 9) rotation matrices, row-major
    force: np.ndarray  # (n+2, 3) world (N); the last row the ball's
    torque: np.ndarray  # (n+1, 3) body frame (N m)
    tension: np.ndarray  # (n,) (N)
    mom: np.ndarray  # (n+1, 3) angular momenta, body frame
    scratch: np.ndarray  # (SC_SIZE,) the controller's
    decay: np.ndarray  # (n,) motor decay per step
    body: np.ndarray  # (n+1, BC_SIZE) body constants
    xe: np.ndarray  # (state size,) the quadrotors' onboard estimates, when the IMU is simulated
    Re: np.ndarray  # (n+1, 9) their rotation matrices
    imu: np.ndarray  # (4,) the onboard stage's scratch


@kernel()
def advance(sys, data, step0, n_steps, wrench, log):
    """Advance one system (``sys``: ``layout.SimModel``, ``data``: ``layout.SimData``, changed
    in place) by ``n_steps`` physics steps of ``sys.h`` seconds.

    ``step0`` is the global index of the first step (time ``step0 * h``); the controllers run
    on every step whose global index is a multiple of ``sys.decimation``. ``wrench`` (m, 6)
    gives the load's external world force and torque held during each step (the last row
    repeats when m < n_steps). ``data.fcache`` (n+1, FC_SIZE) carries the forces, torques and
    body angular momenta at the end of the last step into the next call (valid when
    ``data.fvalid[0]`` is 1), so splitting a run into calls changes no bit of it; without it
    they are evaluated at x with ``wrench[0]``. When ``log.every`` > 0, the state and tensions
    after every global step index that is a multiple of it go to ``log.x`` and
    ``log.tension``; returns the number of rows written.
    """
    n = sys.n
    work = Work(
        np.empty((n + 1, 9)),
        np.zeros((n + 2, 3)),
        np.zeros((n + 2, 3)),
        np.empty(n),
        np.empty((n + 1, 3)),
        np.empty(SC_SIZE),
        motor_decay(sys.physics, n, sys.h),
        body_constants(sys.physics, n),
        np.zeros(data.x.shape[0]),
        np.zeros((n + 1, 9)),
        np.zeros(4),
    )
    return _steps(sys, data, work, step0, n_steps, wrench, log)


# Without numba's reference counting (nothing here may allocate: numba refuses to compile an
# allocation here). With it, the arrays the inlined stages pass around are counted in and out
# at every step where its pruning cannot see through them: measured, the staged controller 20 %
# slower than the one-function one; without it the loop runs ~25 % faster than before the split.
@kernel(_nrt=False)
def _steps(sys, data, work, step0, n_steps, wrench, log):
    n = sys.n
    h = sys.h
    model = sys.physics
    x = data.x
    R = work.R
    force = work.force
    torque = work.torque
    tension = work.tension
    mom = work.mom
    body = work.body
    rows = 0
    half = 0.5 * h
    m_last = wrench.shape[0] - 1
    # optional effects: tested once here, so that without them the loop does no extra work
    ball = model[M_BALL] != 0.0
    battery = model[M_BATTERY] != 0.0
    snap = model[M_SNAP_INELASTIC] != 0.0
    imu = model[M_IMU] != 0.0
    ball_block = 1 if ball else 0
    if data.fvalid[0] == 1:
        _restore_forces(x, n, data.fcache, R, force, torque, mom, ball)
    else:
        wx, wy, wz = wind_at(sys.wind, sys.wind_dt, step0 * h)
        forces_in_wind(x, model, n, wrench[0], wx, wy, wz, R, force, torque, tension)
        if ball:
            ball_forces(x, model, n, R, force, torque)
        momenta_from_rates(x, n, mom, body)
    for k in range(n_steps):
        step = step0 + k
        if step % sys.decimation == 0:
            t = step * h
            for i in range(n):
                if imu:  # the controller flies on the onboard estimate
                    onboard_update(
                        x,
                        i,
                        data.ctrl[i],
                        model,
                        force,
                        R,
                        step // sys.decimation,
                        sys.decimation * h,
                        work.xe,
                        work.Re,
                        work.imu,
                    )
                    controller_update(
                        work.xe,
                        i,
                        data.ctrl[i],
                        data.plans[i],
                        data.plan_status,
                        data.counters,
                        sys.nominal,
                        sys.gains,
                        t,
                        work.Re,
                        work.scratch,
                    )
                else:
                    controller_update(
                        x,
                        i,
                        data.ctrl[i],
                        data.plans[i],
                        data.plan_status,
                        data.counters,
                        sys.nominal,
                        sys.gains,
                        t,
                        R,
                        work.scratch,
                    )
            _sampled_statistics(x, n, model, data.stats)
        kick(x, n, force, torque, half, mom, body)
        if ball:
            ball_kick(x, n, force, half, model)
            ball_drift(x, n, h)
        drift(x, n, h, mom, body)
        rates_from_momenta(x, n, mom, body)
        if snap:
            cable_snaps(x, model, n, h, R, mom, body)
        if battery:
            battery_motors(x, data.ctrl, n, work.decay, model, h, ball_block)
        else:
            motors(x, data.ctrl, n, work.decay)
        wx, wy, wz = wind_at(sys.wind, sys.wind_dt, (step + 1) * h)
        forces_in_wind(x, model, n, wrench[min(k, m_last)], wx, wy, wz, R, force, torque, tension)
        if ball:
            ball_forces(x, model, n, R, force, torque)
        kick(x, n, force, torque, half, mom, body)
        if ball:
            ball_kick(x, n, force, half, model)
        _slack_statistics(n, h, tension, data.stats)
        if log.every > 0 and (step + 1) % log.every == 0 and rows < log.x.shape[0]:
            for s in range(x.shape[0]):
                log.x[rows, s] = x[s]
            for i in range(n):
                log.tension[rows, i] = tension[i]
            rows += 1
    _store_forces(n, force, torque, mom, data.fcache, ball)
    data.fvalid[0] = 1
    return rows


@kernel(parallel=True)
def advance_batch(sys, physics, data, step0, n_steps, wrench):
    """``advance`` for B independent systems in parallel (no logging): every array of ``data``
    and ``wrench`` (B, m, 6) has the batch as leading axis, and so has ``physics`` (B, model
    size), each system's simulated model; the controllers' model and gains are ``sys``'s."""
    n = sys.n
    log = SimLog(0, np.empty((0, data.x.shape[1])), np.empty((0, n)))
    for b in prange(data.x.shape[0]):
        one = SimModel(physics[b], sys.nominal, sys.gains, n, sys.h, sys.decimation, sys.wind, sys.wind_dt)
        mine = SimData(
            data.x[b],
            data.ctrl[b],
            data.plans[b],
            data.plan_status[b],
            data.counters[b],
            data.stats[b],
            data.fcache[b],
            data.fvalid[b],
        )
        advance(one, mine, step0, n_steps, wrench[b], log)
