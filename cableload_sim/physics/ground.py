"""Starting on the ground: the state of a system resting on the plane z = 0 (``[ground]``).

The load lies level on its box's bottom face, each quadrotor sits level on its landing points
straight below its hover slot (``cableload_sim.physics.statics.hover_state``), rotors idling, every
cable slack; each body sunk by its weight over the contact points' stiffness, so that it
starts at rest. ``cableload_sim.physics.kernels.contact`` has the contact model.
"""

from __future__ import annotations

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.params import Config, SystemParams
from cableload_sim.physics import layout
from cableload_sim.rotations import quat_from_yaw, quat_to_euler, quat_to_matrix


def resting_state(config: Config, simulated: SystemParams, hover_x: np.ndarray, load_p, load_q) -> np.ndarray:
    """The state at rest on the ground below the hover state ``hover_x`` (the simulator's
    state after ``reset(load_p, load_q)``): the load below ``load_p`` with the heading of
    ``load_q``, each quadrotor below its slot, heading +x."""
    ground = config.ground
    if not ground.enabled:
        raise UsageError(
            "starting on the ground needs the ground: set ground.enabled = true "
            "(--set ground.enabled=true), got ground.enabled = false"
        )
    x = hover_x.copy()
    g = simulated.gravity
    load = simulated.load
    yaw = float(quat_to_euler(np.asarray(load_q, dtype=float))[2])
    q_load = quat_from_yaw(yaw)
    box = np.asarray(load.box_centre, dtype=float)
    sink = load.mass * g / (4.0 * ground.stiffness)
    centre = np.array([load_p[0], load_p[1], 0.5 * load.size[2] - sink])
    R = quat_to_matrix(q_load)
    x[layout.LOAD_POS : layout.LOAD_POS + 3] = centre - R @ box
    x[layout.LOAD_QUAT : layout.LOAD_QUAT + 4] = q_load
    x[layout.LOAD_VEL : layout.LOAD_VEL + 6] = 0.0
    level = np.array([1.0, 0.0, 0.0, 0.0])
    for i, (quad, cable, rho) in enumerate(zip(simulated.quadrotors, simulated.cables, load.attachments)):
        o = layout.quad_offset(i)
        idle = quad.rotor.speed_min
        lift = 4.0 * quad.rotor.thrust_coeff * idle**2
        sink = max(quad.mass * g - lift, 0.0) / (4.0 * ground.stiffness)
        x[o + layout.QUAD_POS + 2] = ground.landing_height - sink
        x[o + layout.QUAD_QUAT : o + layout.QUAD_QUAT + 4] = level
        x[o + layout.QUAD_VEL : o + layout.QUAD_VEL + 6] = 0.0
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = idle
        span = (
            x[o + layout.QUAD_POS : o + layout.QUAD_POS + 3]
            + np.asarray(quad.attachment)
            - x[layout.LOAD_POS : layout.LOAD_POS + 3]
            - R @ np.asarray(rho)
        )
        if np.linalg.norm(span) >= cable.length:
            raise UsageError(
                f"starting on the ground: quadrotor {i} below its slot is "
                f"{np.linalg.norm(span):.3f} m from its load attachment, its cable "
                f"{cable.length!r} m long would be taut; expected a slack cable (a steeper "
                "formation.min_cable_angle_deg or longer cables)"
            )
    return x


def cable_lift(samples, system: SystemParams) -> np.ndarray:
    """The cables' vertical pull on the load at each sample (k,), N: what it weighs when it
    leaves the ground. ``samples``: ``WorldSamples``."""
    rho = system.attachment_array()
    R_L = quat_to_matrix(samples.load_q)
    total = np.zeros(len(samples.t))
    for i, quad in enumerate(system.quadrotors):
        R_i = quat_to_matrix(samples.uav_q[:, i])
        span = samples.uav_p[:, i] + R_i @ np.asarray(quad.attachment) - samples.load_p - R_L @ rho[i]
        total += samples.cable_tension[:, i] * span[:, 2] / np.linalg.norm(span, axis=1)
    return total


def lift_off_index(load_z: np.ndarray, rise: float = 1e-3) -> int | None:
    """The first sample at which the load is ``rise`` (m) above where it started, or None."""
    above = np.flatnonzero(load_z > load_z[0] + rise)
    return int(above[0]) if above.size else None
