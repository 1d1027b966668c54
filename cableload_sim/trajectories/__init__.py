"""Load reference trajectories: where the load should be, and how oriented, at any time.

A reference is a function of time ``t`` (s). Sampling it gives, in the world frame (z up), the
load's position ``p`` (m), velocity ``v`` (m/s), acceleration ``a`` (m/s^2) and jerk ``j`` (m/s^3),
its attitude ``q`` (unit quaternion (w, x, y, z), body to world, continuous in time) and, in the
load's BODY frame, its angular velocity ``omega`` (rad/s) and angular acceleration ``alpha``
(rad/s^2). All of them come from analytic derivatives composed by the chain rule, so they agree
with each other to rounding error.

Looped references (eights, circle, rounded square, race tracks) are built from three parts:

- a closed planar curve parametrized by a *phase* (rad or m), with derivatives up to third order
  with respect to the phase, flown at a constant phase rate (rad/s or m/s) of a *path time* tau;
- a time warp ``tau(t)``: ``dtau/dt`` rises from 0 to 1 over ``ramp_s`` seconds along the C^3
  smoothstep ``35x^4 - 84x^5 + 70x^6 - 20x^7``, so each reference starts from rest
  (v = a = j = 0, omega = alpha = 0 at t = 0) and ``tau = t - ramp_s / 2`` after the ramp;
- an optional vertical oscillation ``z = z0 + z_amplitude sin(2 pi z_frequency tau)`` and an
  orientation mode: ``constant`` yaw or ``zero-sideslip`` (the body x axis along the horizontal
  velocity).

``hover`` holds a pose; ``pose-to-pose`` moves from one pose to another with the same smoothstep.
Times before 0 behave as t = 0. Use ``make_reference(spec, orientation=..., **options)`` to build
one by name and ``reference_catalog()`` to list the names and their options.

Modules by family: ``jets`` (derivative jets, the time warp), ``curves`` (closed planar
curves), ``tracks`` (race-track centerlines), ``attitude`` (height and yaw modes),
``references`` (the reference types), ``pose`` (pose to pose), ``draws`` (random loops and
wanderings), ``lift`` (the flight from the ground), ``options`` and ``catalog`` (by name).

May import: ``cableload_sim.errors``, ``checks``, ``rotations``. Imported by: ``physics``,
``metrics``, ``cli``, the planners, learners and backends.
"""

from cableload_sim.trajectories.attitude import ORIENTATION_MODES, OscillatingYaw
from cableload_sim.trajectories.catalog import make_reference, reference_catalog
from cableload_sim.trajectories.curves import PlanarCurve, min_turn_radius
from cableload_sim.trajectories.jets import (
    Jet,
    LoadReferenceSample,
    smoothstep_jet,
    time_warp,
)
from cableload_sim.trajectories.pose import PoseToPose
from cableload_sim.trajectories.references import Hover, LoadReference, LoopReference
from cableload_sim.trajectories.tracks import TRACKS_DIR

__all__ = [
    "ORIENTATION_MODES",
    "TRACKS_DIR",
    "Hover",
    "Jet",
    "LoadReference",
    "LoadReferenceSample",
    "LoopReference",
    "OscillatingYaw",
    "PlanarCurve",
    "PoseToPose",
    "make_reference",
    "min_turn_radius",
    "reference_catalog",
    "smoothstep_jet",
    "time_warp",
]
