"""Flat float64 layouts shared by the numba kernels and the Python shell around them.

This module is the only place that knows an index or a size:

- the simulation **state** ``x``: the load block (position, attitude, velocity, body rates)
  followed by one block per quadrotor (the same plus four rotor speeds), then, when they are
  simulated, the sloshing ball's block and one battery block per quadrotor;
- the **model** vector: everything the physics needs (gravity, masses, inertias and their
  inverses, rotor allocation, cables), packed from ``SystemParams``;
- the **controller** gains vector and each quadrotor's **controller state**;
- the **trajectory buffer**: the nodes of the last plan each quadrotor received, and a
  reference sampled from it;
- the kernels' work arrays: the controller's scratch, the force cache, per-body constants;
- the named tuples the stepping kernel takes: ``SimModel`` (constant), ``SimData`` (changed in
  place), ``SimLog``.

Integer constants are module globals, so numba compiles them in as literals.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from cableload_sim.horizon import N_NODES
from cableload_sim.params import (
    AeroParams,
    BallParams,
    BatteryParams,
    ControllerParams,
    GroundParams,
    ImuParams,
    SensingParams,
    SimulationParams,
    SystemParams,
)
from cableload_sim.physics.statics import swing_frequencies

# --- state ------------------------------------------------------------------------------------
# Every body's block starts with the same rigid-body part: world position (m), attitude
# quaternion w,x,y,z (body->world), world velocity (m/s), body angular velocity (rad/s).
BODY_POS = 0
BODY_QUAT = 3
BODY_VEL = 7
BODY_RATE = 10
# Load block: the rigid-body part only.
LOAD_POS = BODY_POS
LOAD_QUAT = BODY_QUAT
LOAD_VEL = BODY_VEL
LOAD_RATE = BODY_RATE
LOAD_SIZE = 13
# Quadrotor block: the rigid-body part, then the four rotor speeds (rad/s).
QUAD_POS = BODY_POS
QUAD_QUAT = BODY_QUAT
QUAD_VEL = BODY_VEL
QUAD_RATE = BODY_RATE
QUAD_ROTOR = 13
QUAD_SIZE = 17
# Sloshing ball block (after the quadrotors, when simulated): a point mass, world frame.
BALL_POS = 0
BALL_VEL = 3
BALL_SIZE = 6
# Battery block of each quadrotor (after the ball's, when simulated).
BATT_SOC = 0  # state of charge (-), 1 full
BATT_VOLTAGE = 1  # terminal voltage at the last step (V)
BATT_SIZE = 2


def state_size(n_uavs: int, ball: bool = False, battery: bool = False) -> int:
    """Length of the state of ``n_uavs`` quadrotors, with the ball's and the batteries' blocks
    when they are simulated."""
    return LOAD_SIZE + QUAD_SIZE * n_uavs + BALL_SIZE * int(ball) + BATT_SIZE * n_uavs * int(battery)


def ball_offset(n_uavs: int) -> int:
    """Index of the ball's block in the state (when simulated)."""
    return LOAD_SIZE + QUAD_SIZE * n_uavs


def battery_offset(n_uavs: int, ball: int, i: int) -> int:
    """Index of quadrotor ``i``'s battery block (when simulated); ``ball`` 1 with a ball."""
    return LOAD_SIZE + QUAD_SIZE * n_uavs + BALL_SIZE * ball + BATT_SIZE * i


def quad_offset(i: int) -> int:
    """Index of quadrotor ``i``'s block in the state."""
    return LOAD_SIZE + QUAD_SIZE * i


def body_offset(b: int) -> int:
    """Index of body ``b``'s block in the state: the load at b = 0, quadrotor i at b = i + 1."""
    return 0 if b == 0 else LOAD_SIZE + QUAD_SIZE * (b - 1)


# --- model ------------------------------------------------------------------------------------
M_GRAVITY = 0
M_LOAD_MASS = 1
M_LOAD_INERTIA = 2  # 3x3 row-major
M_LOAD_INERTIA_INV = 11  # 3x3 row-major
M_LOAD_DRAG = 20  # 1/2 rho C_d A of each pair of faces, per load axis (kg/m) (3)
M_AERO = 23  # 1 when any drag acts (the aero stage runs), else 0
M_LOAD_BOX_CENTRE = 24  # centre of the load's box from its centre of mass, load frame (m) (3)
M_LOAD_HALF_SIZE = 27  # half the box's size along each load axis (m) (3)
M_BALL = 30  # 1 when the sloshing ball is simulated (its state block present), else 0
M_BALL_MASS = 31  # (kg)
M_BALL_RADIUS = 32  # (m)
M_BALL_STIFFNESS = 33  # wall contact, per metre of penetration (N/m)
M_BALL_DAMPING = 34  # wall contact, per m/s of approach (N s/m)
M_BALL_FRICTION = 35  # Coulomb friction coefficient against the walls (-)
M_BALL_SLIP_SPEED = 36  # slip speed below which friction grows linearly (m/s)
M_BATTERY = 37  # 1 when batteries are simulated (their state blocks present), else 0
M_BATT_CAPACITY = 38  # charge of a full battery (C)
M_BATT_RESISTANCE = 39  # internal resistance (ohm)
M_BATT_EFFICIENCY = 40  # rotor shaft power over electrical power (-)
M_BATT_NOMINAL_V = 41  # voltage at which the rotors reach speed_max (V)
M_BATT_OCV = 42  # open-circuit voltage at state of charge 0, 1/10, ..., 1 (V) (BATT_OCV_POINTS)
BATT_OCV_POINTS = 11
M_GROUND = M_BATT_OCV + BATT_OCV_POINTS  # 1 when the ground is simulated (``kernels.contact``), else 0
M_GROUND_STIFFNESS = M_GROUND + 1  # per contact point (N/m)
M_GROUND_DAMPING = M_GROUND + 2  # per contact point (N s/m)
M_GROUND_FRICTION = M_GROUND + 3  # Coulomb coefficient (-)
M_GROUND_SLIP_SPEED = M_GROUND + 4  # (m/s)
M_GROUND_LANDING = M_GROUND + 5  # quadrotor's centre of gravity above its landing points (m)
M_GROUND_LOAD_REACH = M_GROUND + 6  # farthest box corner from the load's centre of mass (m)
M_GROUND_QUAD_REACH = M_GROUND + 7  # farthest landing point from a quadrotor's centre (m)
M_SNAP_INELASTIC = M_GROUND + 8  # 1: a slack cable reaching its length snaps by an impulse
# The onboard IMU and state estimate (``kernels.onboard``), when M_IMU is 1. Gains are per
# capture of the quadrotor's own pose.
M_IMU = M_GROUND + 9  # 1 when the controllers fly on the onboard estimate, else 0
M_IMU_GYRO_STD = M_IMU + 1  # gyroscope white noise per reading (rad/s)
M_IMU_ACCEL_STD = M_IMU + 2  # accelerometer white noise per reading (m/s^2)
M_IMU_CAPTURE_EVERY = M_IMU + 3  # controller updates per motion capture
M_IMU_CAPTURE_DELAY = M_IMU + 4  # controller updates from a capture to its use
M_IMU_POS_STD = M_IMU + 5  # motion capture's white position noise (m)
M_IMU_ATT_STD = M_IMU + 6  # and attitude noise, a small body rotation (rad)
M_EST_K_POS = M_IMU + 7  # position correction per unit error (-)
M_EST_K_VEL = M_IMU + 8  # velocity correction per unit position error (1/s)
M_EST_K_ACCEL_BIAS = M_IMU + 9  # accelerometer-bias correction per unit position error (1/s^2)
M_EST_K_ATT = M_IMU + 10  # attitude correction per unit attitude error (-)
M_EST_K_GYRO_BIAS = M_IMU + 11  # gyroscope-bias correction per unit attitude error (1/s)
M_HEADER = M_IMU + 12
# Per-quadrotor block
QM_MASS = 0
QM_INERTIA = 1  # principal moments (3)
QM_ATTACH = 4  # cable attachment, body frame (3)
QM_KF = 7
QM_KM = 8
QM_SPEED_MIN = 9
QM_SPEED_MAX = 10
QM_MOTOR_TAU = 11
QM_ALLOC = 12  # 4x4 row-major: rotor thrusts -> [thrust, torque]
QM_ALLOC_INV = 28  # 4x4 row-major
QM_FRAME_DRAG = 44  # 1/2 rho C_d A of the frame, per body axis (kg/m) (3)
QM_ROTOR_DRAG = 47  # rotor drag k_d: in-plane force per rotor speed and airspeed (kg/rad)
QM_ROTOR_XY = 48  # each rotor's hub x, y in the body frame (m) (4 x 2, row-major)
QM_SIZE = 56
# Per-cable block
CM_REST_LENGTH = 0
CM_STIFFNESS = 1
CM_DAMPING = 2
CM_LOAD_ATTACH = 3  # load frame (3)
CM_SIZE = 6


def model_size(n_uavs: int) -> int:
    return M_HEADER + (QM_SIZE + CM_SIZE) * n_uavs


def quad_model_offset(i: int) -> int:
    return M_HEADER + QM_SIZE * i


def cable_model_offset(n_uavs: int, i: int) -> int:
    return M_HEADER + QM_SIZE * n_uavs + CM_SIZE * i


def pack_model(
    system: SystemParams,
    aero: AeroParams | None = None,
    ball: BallParams | None = None,
    battery: BatteryParams | None = None,
    ground: GroundParams | None = None,
) -> np.ndarray:
    """The model vector of ``system`` (what the physics kernels simulate), with the drag of
    ``aero`` (None: no drag), the sloshing ``ball`` and the ``battery`` of every quadrotor
    (None or not enabled: none)."""
    n = system.n_uavs
    m = np.zeros(model_size(n))
    m[M_LOAD_BOX_CENTRE : M_LOAD_BOX_CENTRE + 3] = system.load.box_centre
    m[M_LOAD_HALF_SIZE : M_LOAD_HALF_SIZE + 3] = np.asarray(system.load.size) / 2.0
    if ball is not None and ball.enabled:
        m[M_BALL] = 1.0
        m[M_BALL_MASS] = ball.mass
        m[M_BALL_RADIUS] = ball.radius
        m[M_BALL_STIFFNESS] = ball.stiffness
        m[M_BALL_DAMPING] = ball.damping
        m[M_BALL_FRICTION] = ball.friction
        m[M_BALL_SLIP_SPEED] = ball.slip_speed
    if battery is not None and battery.enabled:
        m[M_BATTERY] = 1.0
        m[M_BATT_CAPACITY] = battery.capacity_ah * 3600.0
        m[M_BATT_RESISTANCE] = battery.internal_resistance
        m[M_BATT_EFFICIENCY] = battery.efficiency
        m[M_BATT_NOMINAL_V] = battery.nominal_voltage()
        m[M_BATT_OCV : M_BATT_OCV + BATT_OCV_POINTS] = battery.ocv_table()
    if ground is not None and ground.enabled:
        _pack_ground(m, system, ground)
    if aero is not None:
        m[M_LOAD_DRAG : M_LOAD_DRAG + 3] = aero.load_drag(system.load)
        m[M_AERO] = float(aero.any_drag())
    m[M_GRAVITY] = system.gravity
    m[M_LOAD_MASS] = system.load.mass
    inertia = system.load.inertia_matrix()
    m[M_LOAD_INERTIA : M_LOAD_INERTIA + 9] = inertia.ravel()
    m[M_LOAD_INERTIA_INV : M_LOAD_INERTIA_INV + 9] = np.linalg.inv(inertia).ravel()
    for i, quad in enumerate(system.quadrotors):
        b = quad_model_offset(i)
        m[b + QM_MASS] = quad.mass
        m[b + QM_INERTIA : b + QM_INERTIA + 3] = quad.inertia
        m[b + QM_ATTACH : b + QM_ATTACH + 3] = quad.attachment
        rotor = quad.rotor
        m[b + QM_KF] = rotor.thrust_coeff
        m[b + QM_KM] = rotor.torque_coeff
        m[b + QM_SPEED_MIN] = rotor.speed_min
        m[b + QM_SPEED_MAX] = rotor.speed_max
        m[b + QM_MOTOR_TAU] = rotor.time_constant
        alloc = rotor.allocation_matrix()
        m[b + QM_ALLOC : b + QM_ALLOC + 16] = alloc.ravel()
        m[b + QM_ALLOC_INV : b + QM_ALLOC_INV + 16] = np.linalg.inv(alloc).ravel()
        m[b + QM_ROTOR_XY : b + QM_ROTOR_XY + 8] = rotor.rotor_positions()[:, :2].ravel()
        if aero is not None:
            m[b + QM_FRAME_DRAG : b + QM_FRAME_DRAG + 3] = aero.quadrotor_drag
            m[b + QM_ROTOR_DRAG] = aero.rotor_drag_coeff
    for i, (cable, rho) in enumerate(zip(system.cables, system.load.attachments)):
        b = cable_model_offset(n, i)
        m[b + CM_REST_LENGTH] = cable.length
        m[b + CM_STIFFNESS] = cable.stiffness
        m[b + CM_DAMPING] = cable.damping
        m[b + CM_LOAD_ATTACH : b + CM_LOAD_ATTACH + 3] = rho
    return m


def pack_imu(m: np.ndarray, imu: ImuParams, sensing: SensingParams, update_s: float) -> None:
    """Write the onboard IMU and estimate of ``imu`` into model vector ``m`` (nothing when it
    is off): noise per reading at controller updates ``update_s`` apart, the motion capture of
    ``sensing`` (captures on whole updates, its latency rounded up to one), the observers'
    gains per capture, each with all its poles at its bandwidth (``ImuParams``)."""
    if not imu.enabled:
        return
    every = max(1, round(1.0 / (sensing.mocap_rate_hz * update_s)))
    period = every * update_s
    m[M_IMU] = 1.0
    m[M_IMU_GYRO_STD] = imu.gyro_noise_density / math.sqrt(update_s)
    m[M_IMU_ACCEL_STD] = imu.accel_noise_density / math.sqrt(update_s)
    m[M_IMU_CAPTURE_EVERY] = every
    m[M_IMU_CAPTURE_DELAY] = math.ceil(sensing.latency_s / update_s - 1e-9)
    m[M_IMU_POS_STD] = sensing.position_noise_m
    m[M_IMU_ATT_STD] = sensing.attitude_noise_rad
    # (s + w)^3 = s^3 + 3 w s^2 + 3 w^2 s + w^3 for (position, velocity, accelerometer bias),
    # (s + w)^2 for (attitude, gyroscope bias); continuous gains times the capture period
    w = imu.position_bandwidth
    m[M_EST_K_POS] = 3.0 * w * period
    m[M_EST_K_VEL] = 3.0 * w * w * period
    m[M_EST_K_ACCEL_BIAS] = w**3 * period
    w = imu.attitude_bandwidth
    m[M_EST_K_ATT] = 2.0 * w * period
    m[M_EST_K_GYRO_BIAS] = w * w * period


def _pack_ground(m: np.ndarray, system: SystemParams, ground: GroundParams) -> None:
    """The ground's entries of the model vector (``kernels.contact``)."""
    m[M_GROUND] = 1.0
    m[M_GROUND_STIFFNESS] = ground.stiffness
    m[M_GROUND_DAMPING] = ground.damping
    m[M_GROUND_FRICTION] = ground.friction
    m[M_GROUND_SLIP_SPEED] = ground.slip_speed
    m[M_GROUND_LANDING] = ground.landing_height
    half = np.asarray(system.load.size) / 2.0
    m[M_GROUND_LOAD_REACH] = np.linalg.norm(system.load.box_centre) + np.linalg.norm(half)
    hubs = max(
        float(np.max(np.linalg.norm(q.rotor.rotor_positions()[:, :2], axis=1))) for q in system.quadrotors
    )
    m[M_GROUND_QUAD_REACH] = math.hypot(hubs, ground.landing_height)
    m[M_SNAP_INELASTIC] = float(ground.inelastic_snap())


# --- controller gains -------------------------------------------------------------------------
G_KP = 0  # (3)
G_KV = 3  # (3)
G_ATT_GAIN = 6  # 2 / tilt time constant (1/s)
G_YAW_GAIN = 7  # 2 / yaw time constant (1/s)
G_RATE_GAIN = 8  # (3)
G_FILTER_ALPHA = 11  # first-order filter blend per controller update (-)
G_TAN_MAX_TILT = 12
G_MAX_POS_ERR = 13
G_DT = 14  # controller period (s)
G_HOLD_COMPLIANCE = 15  # share of the pull's fast part yielded to while holding (-)
G_TRACK_COMPLIANCE = 16  # share of the pull's fast part across the cable yielded to while tracking
G_PULL_ALPHA = 17  # first-order filter blend per update of the slow pull (-)
G_MAX_TILT = 18  # largest tilt of the thrust axis (rad)
G_RATE_LAG = 19  # delay of the body rate behind its command, less the motors' (s)
G_COS_HALF_TILT = 20  # cosine of half the largest tilt (-)
G_INV_DT = 21  # 1 / controller period (1/s)
G_SIZE = 22


def controller_decimation(controller: ControllerParams, simulation: SimulationParams) -> int:
    """Physics steps per controller update; the rate must divide the physics rate."""
    ratio = 1.0 / (controller.rate_hz * simulation.physics_dt)
    steps = round(ratio)
    if steps < 1 or abs(ratio - steps) > 1e-6:
        raise ValueError(
            f"controller.rate_hz={controller.rate_hz!r} is not a whole fraction of the physics "
            f"rate 1/{simulation.physics_dt!r} Hz; expected physics_dt * rate_hz = 1/k"
        )
    return steps


def tracking_compliance(controller: ControllerParams, system: SystemParams | None) -> float:
    """The share of the cable's fast pull yielded to while tracking, for ``system``.

    A stiff tracking loop compensates the pull with a lag (the attitude loop tilting the
    thrust) that damps the load's swing a little when the swing is faster than the horizontal
    position loop and excites it when slower. So ``controller.tracking_compliance`` applies
    only where the system's slowest swing (``statics.swing_frequencies``, the cables' upper
    ends held fixed) is slower than the position loop, sqrt(kp): one or two quadrotors on 1 m
    cables (3.2 rad/s against 3.74). Elsewhere 0: planners that plan the cable forces (the
    teacher) want the quadrotors on their plans. Without a system, the configured share.
    """
    if system is None:
        return controller.tracking_compliance
    swings = swing_frequencies(system)
    if swings.size and swings[0] ** 2 < min(controller.kp[0], controller.kp[1]):
        return controller.tracking_compliance
    return 0.0


def pack_gains(
    controller: ControllerParams, simulation: SimulationParams, system: SystemParams | None = None
) -> np.ndarray:
    """The gains vector; ``system`` (the nominal one the controllers know) decides the tracking
    compliance (``tracking_compliance``)."""
    g = np.zeros(G_SIZE)
    dt = controller_decimation(controller, simulation) * simulation.physics_dt
    g[G_KP : G_KP + 3] = controller.kp
    g[G_KV : G_KV + 3] = controller.kv
    g[G_ATT_GAIN] = 2.0 / controller.attitude_time_constant
    g[G_YAW_GAIN] = 2.0 / controller.yaw_time_constant
    g[G_RATE_GAIN : G_RATE_GAIN + 3] = controller.rate_gain
    g[G_FILTER_ALPHA] = 1.0 - math.exp(-2.0 * math.pi * controller.filter_cutoff_hz * dt)
    g[G_TAN_MAX_TILT] = math.tan(math.radians(controller.max_tilt_deg))
    g[G_MAX_TILT] = math.radians(controller.max_tilt_deg)
    g[G_COS_HALF_TILT] = math.cos(0.5 * g[G_MAX_TILT])
    # rate loop 1 / K_w and the INDI filters' mean delay, (1 - a) / a updates (the kernel adds
    # each quadrotor's motor time constant)
    g[G_RATE_LAG] = (
        1.0 / min(controller.rate_gain[0], controller.rate_gain[1])
        + dt * (1.0 - g[G_FILTER_ALPHA]) / g[G_FILTER_ALPHA]
    )
    g[G_MAX_POS_ERR] = controller.max_position_error
    g[G_DT] = dt
    g[G_INV_DT] = 1.0 / dt
    g[G_HOLD_COMPLIANCE] = controller.hold_compliance
    g[G_TRACK_COMPLIANCE] = tracking_compliance(controller, system)
    g[G_PULL_ALPHA] = 1.0 - math.exp(-2.0 * math.pi * controller.pull_cutoff_hz * dt)
    return g


# --- controller state (per quadrotor) ---------------------------------------------------------
CS_ACC_FILT = 0  # filtered measured acceleration, world (3)
CS_FORCE_FILT = 3  # filtered rotor thrust vector, world (3), same filter
CS_ALPHA_FILT = 6  # filtered measured angular acceleration, body (3)
CS_TORQUE_FILT = 9  # filtered rotor torque, body (3), same filter
CS_PREV_VEL = 12  # velocity at the previous update (3)
CS_PREV_RATE = 15  # body rates at the previous update (3)
CS_PREV_FORCE = 18  # rotor thrust vector at the previous update (3)
CS_PREV_TORQUE = 21  # rotor torque at the previous update (3)
CS_HOLD_POS = 24  # position held while hovering without a usable plan (3)
CS_HEADING = 27  # held heading: horizontal unit vector perpendicular to body y, world (2)
CS_MODE = 29  # MODE_* below
CS_ROTOR_CMD = 30  # commanded rotor speeds (4)
CS_INITIALIZED = 34  # 0 until the first update has seeded the filters
CS_SEGMENT = 35  # index of the plan segment used last (search hint)
CS_PULL_SLOW = 36  # slow part of the cable's pull, kept while yielding to its fast part, world (3)
CS_LANDED = 39  # 1 while idling on the ground (``kernels.contact.landed_idle``)
# The onboard IMU and state estimate (``kernels.onboard``; used when the model's M_IMU is 1).
# This flight's sensor calibration (set with the controller state, ``Simulator.seed_onboard``):
CS_IMU_SEED = 40  # seed of this quadrotor's sensor noise, an integer below 2^52
CS_IMU_GYRO_BIAS = 41  # gyroscope bias (rad/s) (3)
CS_IMU_ACCEL_BIAS = 44  # accelerometer bias (m/s^2) (3)
CS_MOCAP_POS_BIAS = 47  # motion capture's position bias for this quadrotor, world (m) (3)
CS_MOCAP_ATT_BIAS = 50  # and attitude bias, a small body rotation (rad) (3)
# The estimate:
CS_EST_READY = 53  # 0 until the first update has started the estimate
CS_EST_POS = 54  # position, world (3)
CS_EST_QUAT = 57  # attitude (4)
CS_EST_VEL = 61  # velocity, world (3)
CS_EST_GYRO_BIAS = 64  # (3)
CS_EST_ACCEL_BIAS = 67  # (3)
# Captures in flight, each: the update it is used at (-1: none), the position error and the
# attitude error (a small body rotation) of the estimate at its capture.
CS_EST_PENDING = 70
PENDING_USE = 0
PENDING_POS = 1
PENDING_ATT = 4
PENDING_SIZE = 7
PENDING_SLOTS = 4  # ``params.IMU_PENDING_CAPTURES``
CS_SIZE = CS_EST_PENDING + PENDING_SIZE * PENDING_SLOTS

MODE_TRACKING = 0.0
MODE_HOLD_NO_PLAN = 1.0
MODE_HOLD_EXPIRED = 2.0
MODE_HOLD_REJECTED = 3.0

# --- a reference sampled from a plan: p, v, a, jerk (world), body rates ------------------------
REF_POS = 0
REF_VEL = 3
REF_ACC = 6
REF_JERK = 9
REF_RATE = 12
REF_SIZE = 15

# --- trajectory buffer (per quadrotor): N_NODES rows of the node time, then a reference -------
TR_TIME = 0
TR_POS = 1 + REF_POS
TR_VEL = 1 + REF_VEL
TR_ACC = 1 + REF_ACC
TR_JERK = 1 + REF_JERK
TR_RATE = 1 + REF_RATE
TR_SIZE = 1 + REF_SIZE

# --- the controller's scratch array (one update's intermediate values) -------------------------
SC_REF = 0  # sampled reference (REF_SIZE)
SC_ERR = SC_REF + REF_SIZE  # clipped position error (3)
SC_FORCE = SC_ERR + 3  # commanded thrust vector, world (3)
SC_RATE_CMD = SC_FORCE + 3  # attitude loop's body-rate command (3)
SC_TORQUE = SC_RATE_CMD + 3  # commanded body torque (3)
SC_WRENCH = SC_TORQUE + 3  # rotor thrust vector (world, 3), then rotor torque (body, 3)
SC_ROTOR = SC_WRENCH + 6  # rotor thrusts (4)
SC_PULL = SC_ROTOR + 4  # share of the cable's fast pull yielded to, world (3)
SC_SIZE = SC_PULL + 3

# plan status per quadrotor
PLAN_NONE = 0
PLAN_NEW = 1
PLAN_VALID = 2
PLAN_REJECTED = 3

# counters per quadrotor, accumulated by the kernels
K_REJECTED_PLANS = 0
K_HOLD_UPDATES = 1
K_SIZE = 2


def empty_plans(n_uavs: int, n_nodes: int = N_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Trajectory buffer (n, n_nodes, TR_SIZE) and plan status (n,) with no plan received."""
    return np.zeros((n_uavs, n_nodes, TR_SIZE)), np.full(n_uavs, PLAN_NONE, dtype=np.int64)


# --- per-system statistics accumulated by the kernels ---------------------------------------
ST_STEPS = 0  # physics steps taken
ST_SLACK_ANY = 1  # steps with at least one slack cable
ST_MAX_THRUST_RATIO = 2  # largest collective thrust over its maximum (-)
ST_LONGEST_SLACK = 3  # longest time one cable stayed slack (s)
ST_MIN_UAV_DIST_SQ = 4  # smallest squared distance between two quadrotors (m^2)
ST_STREAK = 5  # current slack streak of each cable (s), n entries


def stats_size(n_uavs: int) -> int:
    return ST_STREAK + n_uavs


def new_stats(n_uavs: int) -> np.ndarray:
    stats = np.zeros(stats_size(n_uavs))
    stats[ST_MIN_UAV_DIST_SQ] = np.inf
    return stats


# --- force cache: per body, what one step ends with and the next starts from -------------------
FC_FORCE = 0  # world (N) (3)
FC_TORQUE = 3  # body frame (N m) (3)
FC_MOMENTUM = 6  # angular momentum, body frame (kg m^2/s) (3)
FC_SIZE = 9
# rows: the load, the n quadrotors, then the ball (its force only; unused without a ball)


def force_rows(n_uavs: int) -> int:
    """Rows of the force cache and the kernels' force arrays: every body and the ball."""
    return n_uavs + 2


def empty_force_cache(n_uavs: int) -> tuple[np.ndarray, np.ndarray]:
    """Forces, torques and angular momenta carried between ``advance`` calls
    (``force_rows``, FC_SIZE), and their validity flag."""
    return np.zeros((force_rows(n_uavs), FC_SIZE)), np.zeros(1, dtype=np.int64)


# --- per-body constants gathered once per ``advance`` call --------------------------------------
BC_INV_MASS = 0  # 1 / mass (1/kg)
BC_INERTIA = 1  # principal moments (kg m^2) (3)
BC_INV_INERTIA = 4  # their inverses (3)
BC_SIZE = 7


# --- what the stepping kernel takes -------------------------------------------------------------
# Named tuples (numba compiles them as structs, and caches functions taking them): the constant
# model, as Brax's ``sys`` or MuJoCo's mjModel, and the data the kernels change in place.


class SimModel(NamedTuple):
    """What stays constant while a system is stepped."""

    physics: np.ndarray
    """Model vector of the simulated system (``pack_model``)."""
    nominal: np.ndarray
    """Model vector the onboard controllers know (``pack_model`` of the nominal system)."""
    gains: np.ndarray
    """Controller gains (``pack_gains``)."""
    n: int
    """Number of quadrotors."""
    h: float
    """Physics step (s)."""
    decimation: int
    """Physics steps per controller update."""
    wind: np.ndarray
    """Wind velocity, world (m/s), sampled every ``wind_dt`` from t = 0 (rows, 3); linear
    between samples, the last row held after them (one row: a steady wind)."""
    wind_dt: float
    """Period of the wind samples (s)."""


def still_air() -> np.ndarray:
    """The wind samples of still air (``SimModel.wind``)."""
    return np.zeros((1, 3))


class SimData(NamedTuple):
    """What the kernels advance in place; the leading axis of every array is the batch's when
    stepped in a batch."""

    x: np.ndarray
    """State (``state_size``)."""
    ctrl: np.ndarray
    """Controller states (n, CS_SIZE)."""
    plans: np.ndarray
    """Trajectory buffers (n, nodes, TR_SIZE)."""
    plan_status: np.ndarray
    """PLAN_* per quadrotor (n,), int64."""
    counters: np.ndarray
    """K_* per quadrotor (n, K_SIZE)."""
    stats: np.ndarray
    """ST_* (``stats_size``)."""
    fcache: np.ndarray
    """Force cache (n+1, FC_SIZE)."""
    fvalid: np.ndarray
    """1 when ``fcache`` holds the forces at ``x`` (1,), int64."""


class SimLog(NamedTuple):
    """Where ``advance`` records the state and tensions after every ``every``-th global step
    (``every`` = 0: nothing recorded)."""

    every: int
    x: np.ndarray
    """(rows, state size)."""
    tension: np.ndarray
    """(rows, n)."""


def no_log(n_uavs: int) -> SimLog:
    return SimLog(0, np.empty((0, state_size(n_uavs))), np.empty((0, n_uavs)))
