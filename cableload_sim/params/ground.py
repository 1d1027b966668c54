"""Contact with the ground plane z = 0 and how cables snap taut (``[ground]``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.params.control import SimulationParams
from cableload_sim.params.system import SystemParams

SNAP_MODELS = ("spring", "inelastic")
"""How a slack cable snapping taut is simulated (``GroundParams.cable_snap``)."""


@dataclass(frozen=True)
class GroundParams:
    """The ground, the plane z = 0: the load's box (its 8 corners) and each quadrotor (its 4
    landing points, under the rotor hubs ``landing_height`` below the centre of gravity)
    rest on it. Each point below the plane is pushed up by ``max(0, k d - c d')`` (d its
    depth, d' its downward speed: unilateral, pushes only) and held by Coulomb friction
    ``-mu N s / max(|s|, slip_speed)`` of its slip velocity s (regularized below
    ``slip_speed``). ``cable_snap`` chooses how a slack cable that reaches its length is
    simulated: ``spring`` (the cable's spring-damper alone) or ``inelastic`` (RotorTM's model:
    an impulse along the cable first removes the separating velocity of its two ends,
    conserving momentum; the spring-damper carries the load after)."""

    enabled: bool = False
    stiffness: float = 5000.0
    """Normal force per metre of depth, per contact point (N/m)."""
    damping: float = 40.0
    """Normal force per m/s of downward speed, per contact point (N s/m)."""
    friction: float = 0.6
    """Coulomb friction coefficient (-)."""
    slip_speed: float = 0.02
    """Slip speed below which friction grows linearly from 0 (m/s)."""
    landing_height: float = 0.05
    """Height of a quadrotor's centre of gravity above its landing points (m)."""
    cable_snap: str = "spring"
    """``spring`` or ``inelastic`` (see the class docstring)."""

    def inelastic_snap(self) -> bool:
        return self.cable_snap == "inelastic"


MAX_GROUND_STEP_PHASE = 0.5
"""Largest angle (rad) the stiffest contact mode turns through in one physics step."""


def _ground(path: str, table: dict, system: SystemParams, sim: SimulationParams) -> GroundParams:
    fields = {
        "enabled": checks.boolean,
        "stiffness": checks.positive,
        "damping": checks.non_negative,
        "friction": checks.non_negative,
        "slip_speed": checks.positive,
        "landing_height": checks.positive,
        "cable_snap": checks.choice(SNAP_MODELS),
    }
    ground = checks.build(GroundParams, path, table, fields)
    # the stiffest mode: one quadrotor on its four points (the load is heavier)
    mass = min(q.mass for q in system.quadrotors)
    phase = math.sqrt(4.0 * ground.stiffness / mass) * sim.physics_dt
    if phase > MAX_GROUND_STEP_PHASE:
        raise ConfigError(
            f"{path}.stiffness: {ground.stiffness!r} N/m per point under a {mass!r} kg "
            f"quadrotor bounces at {phase / sim.physics_dt:.4g} rad/s, {phase:.3g} rad per "
            f"physics step of {sim.physics_dt!r} s; expected at most {MAX_GROUND_STEP_PHASE}"
        )
    return ground
