"""A system that cannot hover is refused before it flies, with the numbers that say why."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.errors import UsageError
from cableload_sim.params import MismatchParams, config_from_dict
from cableload_sim.physics.feasibility import HOVER_THRUST_LIMIT, check_hover
from cableload_sim.physics.simulator import Simulator
from cableload_sim.physics.statics import hover_state


def heaviest_thrust_ratio(config) -> float:
    system = config.system
    hover = hover_state(system, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    return float(np.max(np.linalg.norm(hover.thrusts, axis=1)) / system.quadrotors[0].rotor.max_thrust())


def test_the_paper_setup_hovers_with_margin(paper_config):
    check_hover(paper_config)
    assert heaviest_thrust_ratio(paper_config) < 0.7


def test_a_load_too_heavy_for_the_thrust_is_refused_before_flight():
    heavy = config_from_dict({"load": {"mass": 4.0}})
    # quadrotor 2 (the rear cable carries the most) would need more than its maximum thrust
    assert heaviest_thrust_ratio(heavy) > 1.0
    with pytest.raises(
        UsageError,
        match=r"load of 4 kg on 3 cables is too heavy: quadrotor 2 "
        r"needs 27\.2 N of thrust to hover, 136% of its maximum "
        r"20 N \(at most 95%\)",
    ):
        Simulator(heavy)
    # just under the limit it flies
    light = config_from_dict({"load": {"mass": 2.3}})
    assert heaviest_thrust_ratio(light) < HOVER_THRUST_LIMIT
    Simulator(light)


def test_more_quadrotors_carry_what_three_cannot():
    heavy = config_from_dict({"load": {"mass": 4.0, "uavs": 6, "attachment_radius": 0.3}})
    check_hover(heavy)  # six share it


def test_the_simulated_system_with_mismatch_is_checked_too(paper_config):
    mismatch = dataclasses.replace(paper_config, mismatch=MismatchParams(load_mass_scale=3.0))
    with pytest.raises(UsageError, match=r"as simulated, with \[mismatch\]\) is too heavy"):
        Simulator(mismatch)


def test_a_hover_tilt_beyond_the_controller_is_refused(paper_config):
    tilted = dataclasses.replace(
        paper_config, controller=dataclasses.replace(paper_config.controller, max_tilt_deg=5.0)
    )
    with pytest.raises(
        UsageError,
        match=r"must tilt \d+\.\d deg to hover, more than "
        r"controller\.max_tilt_deg = 5",
    ):
        check_hover(tilted)
