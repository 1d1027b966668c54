"""Numba kernels: load-cable-quadrotor physics and the onboard controllers, compiled together.

Everything here takes flat float64 arrays laid out by ``cableload_sim.physics.layout`` and scalars, and
allocates nothing inside the time loop. The Python shell (``simulator.Simulator``) owns the arrays.

Physics
-------
Bodies: the load (index 0) and n quadrotors (index i + 1), rigid, with world position and
velocity, attitude quaternion and body-frame angular velocity. Cables are massless unilateral
spring-dampers between ``p_L + R_L rho_i`` and ``p_i + R_i r_i``: tension
``max(0, k (L - l0) + c dL/dt)`` while stretched (``L > l0``), zero while slack; force only, no
moment at the joints. Each quadrotor has four rotors with first-order speed dynamics
(integrated exactly over a step), thrust ``k_f w^2`` and drag torque ``k_m w^2``. The air
(when ``[aero]`` sets coefficients): per-face drag on the load's box and each quadrotor's frame,
and rotor drag ``-k_d w v_perp`` at each hub, against a wind sampled in time (``aero``).

Integrator: velocity Verlet (kick-drift-kick). Kicks add half a step of force to the linear
momenta and of torque to the body-frame angular momenta; the drift moves positions with their
velocities and turns each attitude by the free rigid-body flow, the body momentum
counter-rotating with it: exactly for axially symmetric bodies (the quadrotors: a turn about
the momentum vector, then one about body z), otherwise a turn about the momentum vector and a
symmetric splitting of the remainder into exact rotations about body y (h/2), z (h), y (h/2)
(in the manner of Dullweber, Leimkuhler and McLachlan 1997). Why:

- cables are the stiff part (axial mode about 140 rad/s with the default 5000 N/m); the scheme
  is symplectic and time-reversible and second order, so with damping off the energy error stays
  bounded (measured: 1e-7 of the energy over 10 s of taut, vibrating cables at 1 ms) instead of
  drifting (RK2 gains energy; Euler variants drift at first order), stable while ``w h < 2``;
- cable forces are central, so total linear and angular momentum are conserved to rounding,
  without gyroscopic terms written out (they come from carrying the momentum);
- it needs one force evaluation per step (reused first-same-as-last), which is what makes more
  than 1000x real time possible at 1 ms; RK4 would need four.
Velocity-dependent forces (cable damping) use the half-step velocities, first order in the
damping only; a cable going slack or taut inside a step is a kink in the force, with a local
error of first order at that instant. Rotor speeds follow their commands exactly (first-order
lag integrated in closed form). The default step is 1 ms (w h = 0.14); ``SimulationParams``
refuses steps above 2 ms. Load inertia must be given in principal axes (the load frame).

Controller (per quadrotor, every ``decimation`` physics steps)
--------------------------------------------------------------
Samples the last received plan at the current time (cubic Hermite between nodes for position,
velocity and acceleration, linear for jerk and body rates), or holds hover where it entered
hold when there is no plan, the plan has run out, or it held a non-finite value or
non-increasing times (rejected, counted). Position: ``a_cmd = a_ref + Kp e_p + Kv e_v``; INDI
force: ``F = F_filt + m (a_cmd - a_filt) + beta f_fast`` where ``a_filt`` is the filtered
measured acceleration and ``F_filt`` the equally filtered rotor thrust vector, so the cable's
pull ``f = m a_filt - F_filt + m g e_z`` is compensated without a cable model.

Compensating all of it would leave the load's swing undamped: the quadrotors would be fixed
points for it, and the lag of the compensation (mostly the attitude loop tilting the thrust)
damps the swing slightly when the pendulum is faster than the position loop and excites it
when slower (one or two quadrotors). So ``f`` is split into a slow part (first-order filter,
``pull_cutoff_hz``, restarted from the pull as it is at every change between tracking and
holding) and a fast part ``f_fast``, and the quadrotor yields to the fast part: all
of it (``beta`` = ``hold_compliance``, 1: as its own mass would) when holding, where the
velocity gain then damps the swing. When tracking, ``beta`` (``tracking_compliance``) is 0
unless the system's swing is slower than the position loop (``layout``): planners move the
load through tension changes and plan for the quadrotors to follow exactly. Where it is not 0,
only the part across the cable is yielded to, and ``mu a_ref`` is added to ``f`` first: the
pull a mass mu (from the slow pull's vertical part) carried rigidly would add under the plan's
acceleration, which the plan explains.

Tilt-prioritized attitude control (Brescianini et al. 2013) to the thrust direction at the held
heading (the horizontal direction perpendicular to body y when hold began, which the target
construction gives back exactly), plus the plan's body-rate feedforward, then a barrier on the
body rates that keeps the flown tilt within the limit the thrust direction is held to (the
attitude cascade overshoots it by some 15 % otherwise). INDI body rates:
``tau = tau_filt + J (K_w (w_cmd - w) - alpha_filt)``. Rotor thrusts from the inverse
allocation; when a rotor saturates the yaw torque is dropped first, then the collective thrust
shifted so that the roll and pitch torque fit, then clipped.

Stages, one module each
-----------------------
- ``forces``: every force and torque at one state (``compute_forces``, ``forces_in_wind``,
  ``cable_tensions``), the air's drag in ``aero`` (``aero_forces``, ``wind_at``);
- ``integrator``: the kick, the drift on the rotation group, the motors;
- ``controller``: one controller update (``controller_update``, ``sample_plan``), in stages;
- ``onboard``: the IMU and the state estimate the controller flies on (``onboard_update``);
- ``stepping``: ``advance(sys, data, step0, n_steps, wrench, log)`` and ``advance_batch``,
  taking the constant ``layout.SimModel`` and the ``layout.SimData`` it changes in place;
- ``jit``: how all of them are compiled and cached, and the index helpers from ``layout``.

May import: ``cableload_sim.physics.layout`` (and numba). Imported by: ``simulator`` and
the ``physics`` modules around it, the command line's benchmarks.
"""

from cableload_sim.physics.kernels.aero import aero_forces, wind_at
from cableload_sim.physics.kernels.controller import controller_update, sample_plan
from cableload_sim.physics.kernels.forces import cable_tensions, compute_forces, forces_in_wind
from cableload_sim.physics.kernels.jit import FASTMATH, quat_to_rot
from cableload_sim.physics.kernels.onboard import onboard_update
from cableload_sim.physics.kernels.stepping import advance, advance_batch
from cableload_sim.physics.layout import SC_SIZE

__all__ = [
    "FASTMATH",
    "SC_SIZE",
    "advance",
    "advance_batch",
    "aero_forces",
    "cable_tensions",
    "compute_forces",
    "controller_update",
    "forces_in_wind",
    "onboard_update",
    "quat_to_rot",
    "sample_plan",
    "wind_at",
]
