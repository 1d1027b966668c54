"""Whether a configured system can hang in hover at all: checked before any flight.

A load too heavy for the rotors, a cable geometry with no equilibrium or a hover tilt beyond
what the controller commands cannot be flown; such a configuration is refused with the numbers
that make it so, instead of being flown into a diverged episode. Both the nominal system (what
planners are told) and the simulated one (with ``[mismatch]``) are checked.
"""

from __future__ import annotations

import math

import numpy as np

from cableload_sim.errors import UsageError
from cableload_sim.params import Config, SystemParams
from cableload_sim.statics import hover_state

HOVER_THRUST_LIMIT = 0.95
"""Largest hover thrust as a fraction of a quadrotor's maximum. Above it the rotors saturate
as soon as the load moves: on the paper's setup with the formation planner, the hover error
grows 20-fold at 101 % (a 2.7 kg load) and the load falls, diverged, at 136 % (4 kg)."""


def check_hover(config: Config) -> None:
    """Refuse (``UsageError``) a configuration whose system cannot hover: no equilibrium of
    the cables, or a quadrotor whose hover thrust, rotor speeds or tilt leave its limits."""
    check_system_hover(config.system, config.controller.max_tilt_deg, "")
    if config.mismatch != type(config.mismatch)():
        check_system_hover(config.mismatch.apply(config.system), config.controller.max_tilt_deg,
                           " (as simulated, with [mismatch])")


def check_system_hover(system: SystemParams, max_tilt_deg: float, which: str = "") -> None:
    """``check_hover`` for one system; ``which`` names it in the message."""
    load = f"load of {system.load.mass:g} kg on {system.n_uavs} cables{which}"
    try:
        with np.errstate(all="ignore"):
            hover = hover_state(system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    except (ValueError, ArithmeticError) as err:
        raise UsageError(f"the {load} has no hover equilibrium: {err}") from None
    if not all(np.isfinite(a).all() for a in (hover.uav_p, hover.rotor_speeds, hover.tensions)):
        raise UsageError(f"the {load} has no hover equilibrium (the statics give non-finite "
                         "values); check load.attachments and the cable lengths")
    needed = np.linalg.norm(hover.thrusts, axis=1)
    largest = np.array([quad.rotor.max_thrust() for quad in system.quadrotors])
    i = int(np.argmax(needed / largest))
    if needed[i] > HOVER_THRUST_LIMIT * largest[i]:
        raise UsageError(
            f"the {load} is too heavy: quadrotor {i} needs {needed[i]:.3g} N of thrust to hover, "
            f"{needed[i] / largest[i]:.0%} of its maximum {largest[i]:.3g} N (at most "
            f"{HOVER_THRUST_LIMIT:.0%}); expected a lighter load, more quadrotors or "
            "stronger rotors")
    for i, (quad, thrust, speeds) in enumerate(zip(system.quadrotors, hover.thrusts,
                                                   hover.rotor_speeds, strict=True)):
        needed = float(np.linalg.norm(thrust))
        if needed < quad.rotor.min_thrust():
            raise UsageError(
                f"the {load}: quadrotor {i} needs only {needed:.3g} N of thrust to hover, less "
                f"than its rotors give at idle ({quad.rotor.min_thrust():.3g} N)")
        if speeds.max() > quad.rotor.speed_max or speeds.min() < quad.rotor.speed_min:
            raise UsageError(
                f"the {load}: quadrotor {i} needs rotor speeds {np.round(speeds, 0).tolist()} "
                f"rad/s to hover, outside [{quad.rotor.speed_min:g}, {quad.rotor.speed_max:g}]")
        tilt = math.degrees(math.atan2(math.hypot(thrust[0], thrust[1]), thrust[2]))
        if tilt > max_tilt_deg:
            raise UsageError(
                f"the {load}: quadrotor {i} must tilt {tilt:.1f} deg to hover, more than "
                f"controller.max_tilt_deg = {max_tilt_deg:g}")
