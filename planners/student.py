"""The student: one decentralized planner per quadrotor, all running the same policy.

Each quadrotor sees only ``LocalObservation``s (its own state and the load's pose; the type has
no field for another quadrotor) and the load reference. ``ObservationEncoder`` turns them into
the policy's input, the paper's equations 1-5, in the load-attached frame (origin at the load's
position at planning time, axes of the world frame):

- stream ``ego`` (history of ``history`` planner periods, oldest first): own position,
  velocity, attitude (6D), body rates, and the quadrotor's end of its cable;
- stream ``load`` (same history): the load's position relative to its current one (zero for the
  newest sample: the paper's p_L in frame L), attitude (6D), and the load's end of this
  quadrotor's cable;
- stream ``ref`` (the 21 horizon nodes): reference position, velocity, acceleration, attitude
  (6D) and body rates of the load;
- ``prior`` (the 21 nodes): this quadrotor's plan in the formation it plans relative to
  (``PRIORS``, ``planners.formation``: formation-tilt, formation-wrench told the drag of the
  config's ``[aero]``, or formation-follow, the wrench formation moved by a share of the load's
  transient error that each quadrotor estimates from the load positions it observed), which
  depends on the load reference, the system's design and, for formation-follow, the load's
  observed positions, made to start at the quadrotor's own position and join its slot with the
  time constant ``prior_converge_s`` (a network option; ``PRIOR_CONVERGE_S`` for policies that
  record none): position relative to the own position, velocity, acceleration, jerk,
  body rates. The network may plan relative to it (``learners.network``: a residual decoder),
  so an untrained or uncertain student degrades toward a stable, if mediocre, planner instead
  of anywhere.

The policy is any callable ``policy(ego, load, ref, prior) -> outputs`` on batches (leading axis
quadrotors) returning ``p`` (position relative to the quadrotor's own position at planning time),
``v``, ``a``, ``j`` (world axes) and ``w`` (body rates), each (batch, 21, 3): a loaded torch module
or an onnxruntime session (``learners.export``). This module never imports the learning code.

A non-finite observation gives that quadrotor a hover-hold plan (and is counted); a policy
output that is non-finite or out of bounds gives the previous plan shifted, or a hover hold.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from cableload_sim.horizon import N_NODES, node_times
from cableload_sim.params import AeroParams, Config, SystemParams
from cableload_sim.physics.world import LocalObservation, UavTrajectory, WorldState
from cableload_sim.rotations import quat_to_6d
from planners.base import PlanBounds, hover_plan, violation_code
from planners.formation import FormationPlanner, LoadFollower, SlotArrays, slot_of

EGO_FEATURES = 18  # p (3), v (3), attitude 6D (6), body rates (3), cable end on the quadrotor (3)
LOAD_FEATURES = 12  # p relative to now (3), attitude 6D (6), cable end on the load (3)
REF_FEATURES = 18  # p (3), v (3), a (3), attitude 6D (6), body rates (3)
PRIOR_FEATURES = 15  # p relative to the own position (3), v (3), a (3), jerk (3), body rates (3)
ERROR_FEATURES = 12
"""Columns a policy with ``error_inputs`` reads after the load stream's own, per past
observation: the load's position less the reference's (3), the load's attitude error to the
reference's (the rotation vector of q_L q_ref^-1, world axes, 3), the quadrotor's position less
its slot's in the formation it plans relative to (3) and its velocity less the slot's (3). They
are millimetres where every other feature is metres: apart, each is normalized by its own
spread, and the feedback the teacher applies to them can be learnt."""
PRIOR_CONVERGE_S = 0.5
"""Time constant (s) with which the prior plan joins the formation slot from where the
quadrotor is (formation-tilt made to start there flies eight-medium at 0.018 m / 2.8 deg)."""


@dataclass(frozen=True)
class EncodedObservation:
    """One quadrotor's policy input: ``ego`` (history, EGO_FEATURES), ``load`` (history,
    LOAD_FEATURES), ``ref`` (N_NODES, REF_FEATURES), ``prior`` (N_NODES, PRIOR_FEATURES); plus
    where the output frame is."""

    ego: np.ndarray
    load: np.ndarray
    ref: np.ndarray
    prior: np.ndarray
    origin: np.ndarray  # the quadrotor's own position at planning time (world)
    t: float
    axes: np.ndarray = field(default_factory=lambda: np.eye(3))
    """World components of the frame's axes (columns): vectors in the features are
    ``axes.T @ world``; the identity in the ``world`` frame."""

    def to_world(self, vectors: np.ndarray) -> np.ndarray:
        """Frame vectors (..., 3) in world components."""
        return vectors @ self.axes.T

    def to_frame(self, vectors: np.ndarray) -> np.ndarray:
        """World vectors (..., 3) in frame components."""
        return vectors @ self.axes

    def is_finite(self) -> bool:
        return bool(
            np.isfinite(self.ego).all()
            and np.isfinite(self.load).all()
            and np.isfinite(self.ref).all()
            and np.isfinite(self.prior).all()
            and np.isfinite(self.origin).all()
        )


# an observation's features with positions still in the world frame, computed once when it
# arrives; positions (these columns) move to the load-attached frame at each decision
_EGO_POSITIONS = (slice(0, 3), slice(15, 18))
_LOAD_POSITIONS = (slice(0, 3), slice(9, 12))
# the columns holding world vectors (positions, velocities, accelerations, jerks, the columns of
# 6D attitudes): turned into the frame's axes. The quadrotors' body rates (their own and the
# prior's) are turned too: the quadrotors head along world +x, so their body axes are the
# world's axes tilted, and their body rates turn with the scene to first order in the tilt. The
# load's body rates are in the load's frame, which turns with the scene: they stay.
_EGO_VECTORS = (0, 3, 6, 9, 12, 15)
_LOAD_VECTORS = (0, 3, 6, 9)
_REF_VECTORS = (0, 3, 6, 9, 12)
_PRIOR_VECTORS = (0, 3, 6, 9, 12)
assert all(
    columns == tuple(range(0, 3 * len(columns), 3))
    for columns in (_EGO_VECTORS, _LOAD_VECTORS, _REF_VECTORS, _PRIOR_VECTORS)
), "vectors lead (_turned)"

PRIORS = ("formation-tilt", "formation-wrench", "formation-follow")
"""Formations a student may plan relative to (``planners.formation``)."""

FRAMES = ("world", "load-yaw")
"""Axes of the policy's inputs and outputs (the origin is the load's position either way):
``world`` keeps the world's axes (a student must learn every heading of travel and every load
yaw); ``load-yaw`` turns them with the load's yaw at planning time (x along the load's heading,
z up), which makes the policy equivariant to yaw."""


def frame_axes(frame: str, load_q: np.ndarray) -> np.ndarray:
    """(3, 3) world components of the frame's axes at a load attitude ``load_q``."""
    if frame == "world":
        return np.eye(3)
    if frame != "load-yaw":
        raise ValueError(f"frame: expected one of {FRAMES}, got {frame!r}")
    w, x, y, z = (float(v) for v in load_q)
    norm_sq = w * w + x * x + y * y + z * z  # quat_to_matrix's first column, unnormalized
    yaw = math.atan2(2.0 * (x * y + w * z), norm_sq - 2.0 * (y * y + z * z))
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _turned(features: np.ndarray, columns, axes: np.ndarray) -> np.ndarray:
    """``features`` with the vectors starting at ``columns`` (0, 3, 6, ...: the leading
    columns) in the frame's axes, turned by one product."""
    out = features.copy()
    width = 3 * len(columns)
    lead = features.shape[:-1]
    out[..., :width] = (features[..., :width].reshape(*lead, len(columns), 3) @ axes).reshape(*lead, width)
    return out


def _ego_world(obs: LocalObservation) -> np.ndarray:
    return np.concatenate([obs.uav_p, obs.uav_v, quat_to_6d(obs.uav_q), obs.uav_omega, obs.cable_uav_end])


def _load_world(obs: LocalObservation) -> np.ndarray:
    return np.concatenate([obs.load_p, quat_to_6d(obs.load_q), obs.cable_load_end])


def _in_load_frame(rows: list[np.ndarray], columns, load_p: np.ndarray) -> np.ndarray:
    out = np.stack(rows)
    for c in columns:
        out[:, c] -= load_p
    return out


# ---------------------------------------------------------------------------------------------
# Kernels: a decision's encoding and its output in two compiled calls. In NumPy the hundred-odd
# operations on arrays of a few dozen numbers cost most of a decision (each call's overhead is
# larger than its arithmetic); the expressions are the same as the NumPy definitions kept beside
# them (``_encode_numpy``; ``trajectory_from_output`` with ``PlanBounds.violation``), which tests
# compare them with.


@njit(cache=True)
def _six_d(q, out, at):
    """``quat_to_6d`` of ``q`` (4,) into ``out[at:at + 6]``."""
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    w, x, y, z = q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm
    out[at] = 1 - 2 * (y * y + z * z)
    out[at + 1] = 2 * (x * y + w * z)
    out[at + 2] = 2 * (x * z - w * y)
    out[at + 3] = 2 * (x * y - w * z)
    out[at + 4] = 1 - 2 * (x * x + z * z)
    out[at + 5] = 2 * (y * z + w * x)


@njit(cache=True)
def _world_rows(uav_p, uav_v, uav_q, uav_omega, cable_uav_end, load_p, load_q, cable_load_end, ego, load):
    """One observation's ego (EGO_FEATURES) and load (LOAD_FEATURES) rows, world frame;
    whether they are finite."""
    for c in range(3):
        ego[c] = uav_p[c]
        ego[3 + c] = uav_v[c]
        ego[12 + c] = uav_omega[c]
        ego[15 + c] = cable_uav_end[c]
        load[c] = load_p[c]
        load[9 + c] = cable_load_end[c]
    _six_d(uav_q, ego, 6)
    _six_d(load_q, load, 3)
    for x in (ego, load):
        for c in range(x.shape[0]):
            if not math.isfinite(x[c]):
                return False
    return True


@njit(cache=True)
def _error_row(load_p, load_q, uav_p, uav_v, ref_p, ref_q, slot_p, slot_v, out):
    """One observation's ``ERROR_FEATURES`` (world axes) into ``out`` (12,)."""
    # q_e = q_L q_r^-1: the load's attitude error as a rotation in world axes
    lw, lx, ly, lz = load_q[0], load_q[1], load_q[2], load_q[3]
    rw, rx, ry, rz = ref_q[0], -ref_q[1], -ref_q[2], -ref_q[3]
    ew = lw * rw - lx * rx - ly * ry - lz * rz
    ex = lw * rx + lx * rw + ly * rz - lz * ry
    ey = lw * ry - lx * rz + ly * rw + lz * rx
    ez = lw * rz + lx * ry - ly * rx + lz * rw
    s = math.sqrt(ex * ex + ey * ey + ez * ez)
    if ew < 0.0:  # the shorter way round
        ew, ex, ey, ez = -ew, -ex, -ey, -ez
    scale = 2.0 * math.atan2(s, ew) / s if s > 1e-12 else 2.0 / max(ew, 1e-12)
    for c in range(3):
        out[c] = load_p[c] - ref_p[c]
        out[6 + c] = uav_p[c] - slot_p[c]
        out[9 + c] = uav_v[c] - slot_v[c]
    out[3], out[4], out[5] = scale * ex, scale * ey, scale * ez


@njit(cache=True)
def _turn_rows(x, vectors, axes):
    """The first ``vectors`` 3-vectors of every row of ``x`` (k, f) times ``axes``, in place."""
    for k in range(x.shape[0]):
        for m in range(vectors):
            a, b, c = x[k, 3 * m], x[k, 3 * m + 1], x[k, 3 * m + 2]
            for col in range(3):
                x[k, 3 * m + col] = a * axes[0, col] + b * axes[1, col] + c * axes[2, col]


@njit(cache=True)
def _history(ring, head, count, load_p, positions, out):
    """The ring's rows oldest first into ``out`` (history, f), the oldest repeated where the
    history is short; columns starting at ``positions`` made relative to ``load_p``."""
    history = out.shape[0]
    for r in range(history):
        m = max(r - (history - count), 0)  # index among the stored rows, oldest first
        row = (head - count + m) % history
        for c in range(out.shape[1]):
            out[r, c] = ring[row, c]
        for start in positions:
            for c in range(3):
                out[r, start + c] -= load_p[c]


@njit(cache=True)
def _encode(
    ego_ring,
    load_ring,
    head,
    count,
    load_p,
    uav_p,
    axes,
    turn,
    ref_p,
    ref_v,
    ref_a,
    ref_q,
    ref_w,
    slot_t,
    slot_p,
    slot_v,
    slot_a,
    slot_j,
    slot_w,
    tau,
    uav_v,
    from_state,
    ego,
    load,
    ref,
    prior,
):
    """``ObservationEncoder.encode``'s arrays (``_encode_numpy`` in NumPy). With
    ``from_state`` the prior starts at the quadrotor's velocity ``uav_v`` as well as its
    position and joins its slot critically damped (``FormationPlanner.anchored``)."""
    _history(ego_ring, head, count, load_p, (0, 15), ego)
    _history(load_ring, head, count, load_p, (0, 9), load)
    gap = np.empty(3)
    gap_v = np.empty(3)  # from_state: the velocity less the slot's
    lead = np.zeros(3)  # from_state: b of the gap's (gap + b t) exp(-t / tau)
    for c in range(3):
        gap[c] = uav_p[c] - slot_p[0, c]
        if from_state:
            gap_v[c] = uav_v[c] - slot_v[0, c]
            lead[c] = gap_v[c] + gap[c] / tau
    for k in range(ref.shape[0]):
        for c in range(3):
            ref[k, c] = ref_p[k, c] - load_p[c]
            ref[k, 3 + c] = ref_v[k, c]
            ref[k, 6 + c] = ref_a[k, c]
            ref[k, 15 + c] = ref_w[k, c]
        _six_d(ref_q[k], ref[k], 9)
        elapsed = slot_t[k] - slot_t[0]
        g = math.exp(-elapsed / tau)
        for c in range(3):
            if from_state:
                b = lead[c]
                e0 = (gap[c] + b * elapsed) * g
                e1 = (gap_v[c] - b * elapsed / tau) * g
                e2 = (-(b + gap_v[c]) / tau + b * elapsed / tau**2) * g
                e3 = ((2.0 * b + gap_v[c]) / tau**2 - b * elapsed / tau**3) * g
            else:
                e0 = gap[c] * g
                e1 = -e0 / tau
                e2 = e0 / tau**2
                e3 = -e0 / tau**3
            prior[k, c] = (slot_p[k, c] + e0) - uav_p[c]
            prior[k, 3 + c] = slot_v[k, c] + e1
            prior[k, 6 + c] = slot_a[k, c] + e2
            prior[k, 9 + c] = slot_j[k, c] + e3
            prior[k, 12 + c] = slot_w[k, c]
    if turn:
        _turn_rows(ego, 6, axes)
        _turn_rows(load, 4, axes)
        _turn_rows(ref, 5, axes)
        _turn_rows(prior, 5, axes)


@njit(cache=True)
def _output(x, residual, axes, turn, origin, out):
    """A policy's output ``x`` (5, nodes, 3: p, v, a, j, w in the frame's axes) less
    ``residual`` (the same shape) in world components, positions from ``origin``, into ``out``
    (5, nodes, 3) (``trajectory_from_output`` in NumPy). The plan guard's ``violation_code``
    checks it next, called on its own: a cached kernel calling another module's is not
    recompiled when that one changes."""
    nodes = x.shape[1]
    for m in range(5):
        for k in range(nodes):
            a0 = x[m, k, 0] - residual[m, k, 0]
            a1 = x[m, k, 1] - residual[m, k, 1]
            a2 = x[m, k, 2] - residual[m, k, 2]
            if turn:
                b0 = a0 * axes[0, 0] + a1 * axes[0, 1] + a2 * axes[0, 2]
                b1 = a0 * axes[1, 0] + a1 * axes[1, 1] + a2 * axes[1, 2]
                b2 = a0 * axes[2, 0] + a1 * axes[2, 1] + a2 * axes[2, 2]
            else:
                b0, b1, b2 = a0, a1, a2
            if m == 0:
                b0, b1, b2 = b0 + origin[0], b1 + origin[1], b2 + origin[2]
            out[m, k, 0], out[m, k, 1], out[m, k, 2] = b0, b1, b2


_KERNELS_READY = False


def load_kernels() -> None:
    """Compile the student's kernels, or load them from numba's cache, once per process (when
    the first student planner is made, not in its first decision)."""
    global _KERNELS_READY
    if _KERNELS_READY:
        return
    history = 2
    ego_ring, load_ring = np.zeros((history, EGO_FEATURES)), np.zeros((history, LOAD_FEATURES))
    q = np.array([1.0, 0.0, 0.0, 0.0])
    z3 = np.zeros(3)
    _world_rows(z3, z3, q, z3, z3, z3, q, z3, ego_ring[0], load_ring[0])
    _error_row(z3, q, z3, z3, z3, q, z3, z3, np.empty(ERROR_FEATURES))
    nodes = np.zeros((N_NODES, 3))
    quats = np.zeros((N_NODES, 4))
    quats[:, 0] = 1.0
    times = node_times(0.0)
    _encode(
        ego_ring,
        load_ring,
        1,
        1,
        z3,
        z3,
        np.eye(3),
        True,
        nodes,
        nodes,
        nodes,
        quats,
        nodes,
        times,
        nodes,
        nodes,
        nodes,
        nodes,
        nodes,
        0.5,
        z3,
        True,
        np.empty((history, EGO_FEATURES)),
        np.empty((history, LOAD_FEATURES)),
        np.empty((N_NODES, REF_FEATURES)),
        np.empty((N_NODES, PRIOR_FEATURES)),
    )
    plan = np.zeros((5, N_NODES, 3))
    _output(plan, plan, np.eye(3), True, z3, plan.copy())
    violation_code(times, *plan, z3 - 1.0, z3 + 1.0, 1.0, 1.0, 1.0)
    _KERNELS_READY = True


class ObservationEncoder:
    """Keeps one quadrotor's observation history and encodes it with the reference."""

    def __init__(self, history: int, frame: str = "world", errors: bool = False, from_state: bool = False):
        if history < 1:
            raise ValueError(f"history: expected at least 1 past observation, got {history}")
        if frame not in FRAMES:
            raise ValueError(f"frame: expected one of {FRAMES}, got {frame!r}")
        self.history = history
        self.frame = frame
        self.errors = errors
        """Append ``ERROR_FEATURES`` to the load stream (a policy with ``error_inputs``)."""
        self.from_state = from_state
        """The prior starts at the quadrotor's velocity too (``prior_from_state``)."""
        # the last ``history`` observations' features in the world frame, a ring: ``head`` is
        # where the next goes, ``count`` how many are held
        self.ego_ring = np.empty((history, EGO_FEATURES))
        self.load_ring = np.empty((history, LOAD_FEATURES))
        # their errors to the reference and the slot, world axes, written when each is encoded
        # (an observation pushed but never encoded keeps the error encoded before it)
        self.error_ring = np.zeros((history, ERROR_FEATURES))
        self.reset()

    @property
    def load_width(self) -> int:
        """Columns of the encoded load stream."""
        return LOAD_FEATURES + (ERROR_FEATURES if self.errors else 0)

    def reset(self) -> None:
        self.head = 0
        self.count = 0
        self.newest: LocalObservation | None = None
        self.error_ring[:] = 0.0

    def push(self, obs: LocalObservation) -> bool:
        """Take in ``obs``; a non-finite one is left out of the history (returns False)."""
        if not math.isfinite(obs.t):
            return False
        if not _world_rows(
            obs.uav_p,
            obs.uav_v,
            obs.uav_q,
            obs.uav_omega,
            obs.cable_uav_end,
            obs.load_p,
            obs.load_q,
            obs.cable_load_end,
            self.ego_ring[self.head],
            self.load_ring[self.head],
        ):
            return False
        self.error_ring[self.head] = self.error_ring[(self.head - 1) % self.history]
        self.head = (self.head + 1) % self.history
        self.count = min(self.count + 1, self.history)
        self.newest = obs
        return True

    def encode(
        self, reference, slot: UavTrajectory | SlotArrays, prior: FormationPlanner, reference_sample=None
    ) -> EncodedObservation:
        """The input for the newest observation; missing history repeats the oldest one.
        ``slot``: this quadrotor's formation slot plan (reference only), anchored here by
        ``prior``; ``reference_sample``: the reference at the horizon nodes, when already
        sampled."""
        newest = self.newest
        if newest is None:
            raise ValueError("encode: no observation pushed yet")
        if reference_sample is None:
            reference_sample = reference.sample(node_times(newest.t))
        if prior.converge_s is None:
            raise ValueError("encode: the prior must be made with converge_s")
        axes = frame_axes(self.frame, newest.load_q)
        ego = np.empty((self.history, EGO_FEATURES))
        load = np.empty((self.history, LOAD_FEATURES))
        ref = np.empty((N_NODES, REF_FEATURES))
        prior_features = np.empty((N_NODES, PRIOR_FEATURES))
        c = np.ascontiguousarray
        _encode(
            self.ego_ring,
            self.load_ring,
            self.head,
            self.count,
            c(newest.load_p),
            c(newest.uav_p),
            axes,
            self.frame != "world",
            c(reference_sample.p),
            c(reference_sample.v),
            c(reference_sample.a),
            c(reference_sample.q),
            c(reference_sample.omega),
            slot.t,
            slot.p,
            slot.v,
            slot.a,
            slot.j,
            slot.body_rates,
            float(prior.converge_s),
            np.ascontiguousarray(newest.uav_v, dtype=float),
            self.from_state,
            ego,
            load,
            ref,
            prior_features,
        )
        if self.errors:
            load = np.hstack([load, self._error_history(newest, reference_sample, slot, axes)])
        return EncodedObservation(
            ego=ego,
            load=load,
            ref=ref,
            prior=prior_features,
            origin=newest.uav_p.copy(),
            t=newest.t,
            axes=axes,
        )

    def _error_history(self, newest: LocalObservation, reference_sample, slot, axes) -> np.ndarray:
        """(history, ERROR_FEATURES), oldest first as the other streams (the oldest repeated
        where the history is short), in the frame's axes; the newest row is computed here from
        the reference and the slot at the decision's time (their first node)."""
        c = np.ascontiguousarray
        _error_row(
            c(newest.load_p, dtype=float),
            c(newest.load_q, dtype=float),
            c(newest.uav_p, dtype=float),
            c(newest.uav_v, dtype=float),
            c(reference_sample.p[0], dtype=float),
            c(reference_sample.q[0], dtype=float),
            c(slot.p[0], dtype=float),
            c(slot.v[0], dtype=float),
            self.error_ring[(self.head - 1) % self.history],
        )
        history, count = self.history, self.count
        rows = [(self.head - count + max(r - (history - count), 0)) % history for r in range(history)]
        errors = self.error_ring[rows]
        if self.frame == "world":
            return errors
        return (errors.reshape(history, 4, 3) @ axes).reshape(history, ERROR_FEATURES)


def _encode_numpy(
    frames: list[LocalObservation],
    history: int,
    frame: str,
    reference_sample,
    slot: UavTrajectory,
    prior: FormationPlanner,
    from_state: bool = False,
) -> EncodedObservation:
    """``ObservationEncoder.encode`` in NumPy expressions, from the observations held (oldest
    first): the kernels' definition, which tests compare them with."""
    newest = frames[-1]
    frames = [frames[0]] * (history - len(frames)) + list(frames)
    load_p = newest.load_p
    ego = _in_load_frame([_ego_world(f) for f in frames], _EGO_POSITIONS, load_p)
    load = _in_load_frame([_load_world(f) for f in frames], _LOAD_POSITIONS, load_p)
    ref = _reference_features(reference_sample, load_p)
    anchored = prior.anchored(slot, newest.uav_p, newest.uav_v if from_state else None)
    prior_features = np.hstack(
        [anchored.p - newest.uav_p, anchored.v, anchored.a, anchored.j, anchored.body_rates]
    )
    axes = frame_axes(frame, newest.load_q)
    if frame != "world":
        ego, load = _turned(ego, _EGO_VECTORS, axes), _turned(load, _LOAD_VECTORS, axes)
        ref = _turned(ref, _REF_VECTORS, axes)
        prior_features = _turned(prior_features, _PRIOR_VECTORS, axes)
    return EncodedObservation(
        ego=ego, load=load, ref=ref, prior=prior_features, origin=newest.uav_p.copy(), t=newest.t, axes=axes
    )


def _unusable(obs: LocalObservation, history: int, load_width: int = LOAD_FEATURES) -> EncodedObservation:
    nan = np.full
    return EncodedObservation(
        ego=nan((history, EGO_FEATURES), np.nan),
        load=nan((history, load_width), np.nan),
        ref=nan((N_NODES, REF_FEATURES), np.nan),
        prior=nan((N_NODES, PRIOR_FEATURES), np.nan),
        origin=np.asarray(obs.uav_p, dtype=float),
        t=float(obs.t),
    )


def _reference_features(sample, load_p: np.ndarray) -> np.ndarray:
    """(N_NODES, REF_FEATURES): the load reference sampled on the horizon, load-attached frame."""
    return np.hstack([sample.p - load_p, sample.v, sample.a, quat_to_6d(sample.q), sample.omega])


def trajectory_from_output(
    t: float, origin: np.ndarray, p, v, a, j, w, axes: np.ndarray | None = None
) -> UavTrajectory:
    """A policy output (positions relative to ``origin``; vectors in the frame whose axes are
    ``axes``, default the world's) as a world-frame ``UavTrajectory``."""
    if axes is not None:
        p, v, a, j, w = np.stack([p, v, a, j, w]) @ axes.T
    return UavTrajectory(node_times(t), np.asarray(p) + origin, v, a, j, w)


Policy = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], dict]
POLICY_OUTPUTS = ("p", "v", "a", "j", "w")
"""The policy's outputs, in the order of the prior's feature columns (3 each)."""
POLICY_INPUTS = ("ego", "load", "ref", "prior")
"""The policy's inputs, in the order it takes them (the exported model's input names)."""


class StudentPlanner:
    """Decentralized planner: per quadrotor, its own encoder and the shared policy."""

    name = "student"

    def __init__(
        self,
        system: SystemParams,
        policy: Policy,
        history: int,
        bounds: PlanBounds | None = None,
        frame: str = "world",
        hover_calibration: bool = False,
        prior: str = "formation-tilt",
        aero: AeroParams | None = None,
        prior_converge_s: float = PRIOR_CONVERGE_S,
        error_inputs: bool = False,
        prior_from_state: bool = False,
    ):
        if prior not in PRIORS:
            raise ValueError(f"prior: expected one of {PRIORS}, got {prior!r}")
        self.system = system
        self.policy = policy
        self.history = history
        self.frame = frame
        self.error_inputs = error_inputs
        """The policy reads ``ERROR_FEATURES`` after the load stream's own."""
        self.prior_from_state = prior_from_state
        """The prior starts at each quadrotor's velocity as well as its position."""
        self.bounds = bounds or PlanBounds()
        self.hover_calibration = hover_calibration
        self._hover_residuals: dict[int, np.ndarray] = {}  # (5, nodes, 3), POLICY_OUTPUTS order
        self._no_residual = np.zeros((5, N_NODES, 3))
        load_kernels()
        self._hover: tuple | None = None  # (rest, hover reference, its slots, its samples), made once
        self.policy_name: str | None = None
        """The policy's name, reported with the metrics (set by whoever loads it)."""
        self.rho = system.attachment_array()
        self.attach = np.array([q.attachment for q in system.quadrotors])
        wrench = prior in ("formation-wrench", "formation-follow")
        self.prior = FormationPlanner(
            system,
            tilt=True,
            converge_s=prior_converge_s,
            wrench=wrench,
            aero=aero if wrench else None,
            follow=prior == "formation-follow",
        )
        self.reset()

    @classmethod
    def from_config(cls, config: Config, policy: Policy, history: int, **kwargs):
        """For ``config``'s system; the wrench prior told its drag (``config.aero``)."""
        return cls(config.system, policy, history, **{"aero": config.aero, **kwargs})

    def reset(self) -> None:
        self.encoders = [
            ObservationEncoder(self.history, self.frame, self.error_inputs, self.prior_from_state)
            for _ in range(self.system.n_uavs)
        ]
        # each quadrotor's own estimate of the load's transient error (formation-follow)
        self.followers = (
            [LoadFollower() for _ in range(self.system.n_uavs)] if self.prior.follower is not None else None
        )
        self.previous: list[UavTrajectory | None] = [None] * self.system.n_uavs
        self.infer_times: list[float] = []
        self.bad_observations = 0
        self.bad_outputs = 0

    def report(self) -> dict:
        times = np.array(self.infer_times) * 1e3
        report: dict[str, float | str] = {
            "infer_ms_median": float(np.median(times)) if times.size else float("nan"),
            "bad_observations": self.bad_observations,
            "bad_outputs": self.bad_outputs,
        }
        if self.policy_name:
            report["policy"] = self.policy_name
        return report

    def observe(self, state: WorldState, reference) -> list[EncodedObservation]:
        """Each quadrotor takes in its own local observation (nothing else) and encodes it. A
        non-finite observation stays out of the history and is encoded as unusable."""
        shared: dict = {}  # the reference and formation over the horizon: the same for every
        # quadrotor (functions of the reference and time alone), so computed once here
        return [
            self.observe_local(i, state.local(i, self.rho[i], self.attach[i]), reference, shared)
            for i in range(self.system.n_uavs)
        ]

    def observe_local(
        self, i: int, obs: LocalObservation, reference, shared: dict | None = None
    ) -> EncodedObservation:
        """Quadrotor ``i`` takes in its own observation and encodes it (a planner node per
        quadrotor calls this with what it alone observes). ``shared`` caches the reference
        and the formation slots over the horizon between quadrotors planning at one time."""
        if not self.encoders[i].push(obs):
            return _unusable(obs, self.history, self.encoders[i].load_width)
        shared = {} if shared is None else shared
        if "slots" not in shared:
            shared["slots"] = self.prior.slot_arrays_and_sample(obs.t, reference)
        times, slots, sample = shared["slots"]
        slot = slot_of(times, slots, i)
        if self.followers is not None:
            slot = slot._replace(
                p=slot.p
                + self.prior.follow_offset(obs.t, obs.load_p, sample.p[0], reference, self.followers[i])
            )
        return self.encoders[i].encode(reference, slot, self.prior, sample)

    def act(
        self, encoded: list[EncodedObservation], positions: np.ndarray, uavs: list[int] | None = None
    ) -> list[UavTrajectory]:
        """Plans from encoded observations; ``positions`` (len(encoded), 3) are each
        quadrotor's own positions (only used to hold hover where an observation is unusable);
        ``uavs`` the quadrotors they belong to (default: all, in order)."""
        uavs = list(range(len(encoded))) if uavs is None else list(uavs)
        good = [k for k, e in enumerate(encoded) if e.is_finite()]
        plans: list[UavTrajectory | None] = [None] * len(encoded)
        if good:
            start = time.perf_counter()
            inputs: tuple[np.ndarray, ...]
            if len(good) == 1:  # one quadrotor deciding alone, as a planner node does
                e = encoded[good[0]]
                inputs = (e.ego[None], e.load[None], e.ref[None], e.prior[None])
            else:
                inputs = tuple(np.stack([getattr(encoded[k], name) for k in good]) for name in POLICY_INPUTS)
            stacked = getattr(self.policy, "stacked", None)
            if stacked is not None:  # (batch, 5, nodes, 3) at once (learners.numba_policy)
                raw = stacked(*inputs)
                self.infer_times.append((time.perf_counter() - start) / len(good))
            else:
                out = self.policy(*inputs)
                self.infer_times.append((time.perf_counter() - start) / len(good))
                raw = np.stack([np.asarray(out[name], dtype=float) for name in POLICY_OUTPUTS], axis=1)
            lo, hi, *limits = self.bounds.limits
            for row, k in enumerate(good):
                e = encoded[k]
                residual = (
                    self._hover_residual_stack(uavs[k]) if self.hover_calibration else self._no_residual
                )
                times = node_times(e.t)
                world = np.empty((5, N_NODES, 3))
                _output(raw[row], residual, e.axes, self.frame != "world", e.origin, world)
                broken = violation_code(times, *world, lo, hi, *limits)
                if not broken:
                    plans[k] = UavTrajectory(times, *world)
                else:
                    self.bad_outputs += 1
                    plans[k] = self._fallback(uavs[k], e.t, positions[k])
        sent: list[UavTrajectory] = []
        for k, e in enumerate(encoded):
            plan = plans[k]
            if plan is None:
                self.bad_observations += 1
                plan = self._hold(uavs[k], e.t, positions[k])
            self.previous[uavs[k]] = plan
            sent.append(plan)
        return sent

    def plan(self, state: WorldState, reference) -> list[UavTrajectory]:
        return self.act(self.observe(state, reference), state.uav_p)

    def hover_residual(self, i: int) -> dict[str, np.ndarray]:
        """What the network adds to the prior for quadrotor ``i`` (outputs p, v, a, j, w in the
        frame's axes) when the system rests in its hover equilibrium under a hover reference,
        load yaw 0, its whole history so: where the teacher holds still, a learned offset. The
        quadrotors share the frame's axes, so every one adding about the same offset moves them
        all, and the load, by it (5-11 mm at the horizon's end for the shipped generalists).
        With ``hover_calibration`` it is subtracted from every output: the student then holds
        the hover exactly at yaw 0; at other yaws 0.4-2.4 mm of the common offset stays (the
        quadrotors head along world +x, so their attitude seen in the frame turns with the
        load's yaw). Measured on the validation draws (seed 1000003, 40 s): scores 16.4, 29.0,
        23.1 for the generalists of 3, 4, 6 without it, 16.3, 28.3, 21.3 with it."""
        stack = self._hover_residual_stack(i)
        return {name: stack[c] for c, name in enumerate(POLICY_OUTPUTS)}

    def _hover_residual_stack(self, i: int) -> np.ndarray:
        """``hover_residual(i)`` as one (5, nodes, 3) array in ``POLICY_OUTPUTS`` order (what
        ``act`` subtracts), measured once."""
        if i not in self._hover_residuals:
            if self._hover is None:  # the rest and its formation: the same for every quadrotor
                from cableload_sim.physics.statics import hover_state
                from cableload_sim.trajectories import Hover

                rest = hover_state(self.system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
                reference = Hover(rest.load_p)
                self._hover = (rest, reference, *self.prior.slots_and_sample(0.0, reference))
            rest, reference, slots, sample = self._hover
            obs = LocalObservation.of(
                0.0,
                rest.load_p,
                rest.load_q,
                rest.uav_p[i],
                np.zeros(3),
                rest.uav_q[i],
                np.zeros(3),
                self.rho[i],
                self.attach[i],
            )
            encoder = ObservationEncoder(self.history, self.frame, self.error_inputs, self.prior_from_state)
            encoder.push(obs)
            e = encoder.encode(reference, slots[i], self.prior, sample)
            out = self.policy(e.ego[None], e.load[None], e.ref[None], e.prior[None])
            self._hover_residuals[i] = np.stack(
                [
                    np.asarray(out[name][0], dtype=float) - e.prior[:, 3 * c : 3 * c + 3]
                    for c, name in enumerate(POLICY_OUTPUTS)
                ]
            )
        return self._hover_residuals[i]

    def _fallback(self, i: int, t: float, position) -> UavTrajectory:
        previous = self.previous[i]
        if previous is not None:
            shifted = previous.shifted_to(t)
            if self.bounds.violation(shifted) is None:
                return shifted
        return self._hold(i, t, position)

    def _hold(self, i: int, t: float, position) -> UavTrajectory:
        position = np.asarray(position, dtype=float)
        previous = self.previous[i]
        if not np.isfinite(position).all() and previous is not None:
            position = previous.p[0]
        if not np.isfinite(position).all():
            position = np.zeros(3)
        return hover_plan(t, position)
