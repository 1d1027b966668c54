"""A ball sloshing free inside the load's box (``[ball]``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cableload_sim import checks
from cableload_sim.errors import ConfigError
from cableload_sim.params.control import SimulationParams
from cableload_sim.params.system import LoadParams


@dataclass(frozen=True)
class BallParams:
    """A ball free inside the load's box (the paper's sloshing load, section 6.6): a point
    mass with its own position and velocity, kept inside the box (closed, its walls the
    faces of ``load.size`` around ``load.box_centre``) by stiff, damped penalty contact along
    each wall's normal; the reaction acts on the load. The ball does not spin: friction
    slides it (a rolling ball's resistance is small, hence none by default). Planners and
    onboard controllers are not told about it."""

    enabled: bool = False
    mass: float = 0.6
    """Mass (kg); the paper's ball, 0.6 kg in the 1.4 kg basket."""
    radius: float = 0.05
    """Radius (m): the ball touches a wall when its centre is this close to it."""
    stiffness: float = 2.0e4
    """Wall contact force per metre of penetration (N/m)."""
    damping: float = 40.0
    """Wall contact force per m/s of approach (N s/m); pushes only, never pulls."""
    friction: float = 0.0
    """Coulomb friction coefficient of the ball sliding on a wall (-)."""
    slip_speed: float = 0.01
    """Sliding speed below which friction grows linearly from 0 (m/s): Coulomb friction,
    regularized so that the stepping stays smooth."""

    def contact_frequency(self) -> float:
        """Angular frequency of the ball bouncing on a wall, sqrt(k / m) (rad/s)."""
        return math.sqrt(self.stiffness / self.mass)


MAX_BALL_STEP_PHASE = 0.5
"""Largest angle (rad) the ball's wall contact turns through in one physics step,
sqrt(k / m) physics_dt: the bounce is then resolved by some 12 steps."""


def _ball(path: str, table: dict, load: LoadParams, sim: SimulationParams) -> BallParams:
    fields = {
        "enabled": checks.boolean,
        "mass": checks.positive,
        "radius": checks.positive,
        "stiffness": checks.positive,
        "damping": checks.non_negative,
        "friction": checks.non_negative,
        "slip_speed": checks.positive,
    }
    ball = checks.build(BallParams, path, table, fields)
    if ball.enabled and 2.0 * ball.radius >= min(load.size):
        raise ConfigError(
            f"{path}.radius: expected a ball that fits in the load's box "
            f"{list(load.size)} m (radius below {min(load.size) / 2:g}), got "
            f"{ball.radius!r}"
        )
    phase = ball.contact_frequency() * sim.physics_dt
    if ball.enabled and phase > MAX_BALL_STEP_PHASE:
        raise ConfigError(
            f"{path}.stiffness: {ball.stiffness!r} N/m on {ball.mass!r} kg bounces at "
            f"{ball.contact_frequency():.4g} rad/s, {phase:.3g} rad per physics step of "
            f"{sim.physics_dt!r} s; expected at most {MAX_BALL_STEP_PHASE} (a softer contact, "
            "a heavier ball or a shorter step)"
        )
    return ball
