"""Batteries: the charge a hover draws, the voltage sag, and the thrust left."""

from __future__ import annotations

import numpy as np
import pytest

from cableload_sim.params import ConfigError, config_from_dict, load_config
from cableload_sim.physics import layout
from cableload_sim.physics.simulator import Simulator


def test_a_long_hover_drains_the_battery_and_the_thrust_left_falls_with_it():
    """Hover on small (0.1 A h) batteries for 7 s. Hand calculation, quadrotor 2 (the most
    loaded): its rotors'
    shaft power P_s = k_m sum w^3 (k_m = 1.28e-8, hover w ~ 1800 rad/s: ~75 W a rotor), the
    pack gives P = P_s / 0.75 at V = OCV - R I with V I = P, so I = P / V ~ 30 A; the charge
    falls by int I dt / 360 C, about 0.6 in 7 s, and with it the OCV (16.8 V full, 15.1 V at
    20 %, 4 x the cell table). The thrust available, 4 k_f (2500 V / 16.8)^2, falls from
    ~17 N to ~14 N: checked point by point against these formulas from the logged rotor
    speeds, charge and voltage."""
    config = load_config(overrides=["battery.enabled=true", "battery.capacity_ah=0.1"])
    battery = config.battery
    sim = Simulator(config)
    log = sim.advance(7000)
    o = layout.battery_offset(3, 0, 2)
    soc = log.x[:, o + layout.BATT_SOC]
    volt = log.x[:, o + layout.BATT_VOLTAGE]
    w = log.x[:, layout.quad_offset(2) + layout.QUAD_ROTOR : layout.quad_offset(2) + 17]
    rotor = config.system.quadrotors[0].rotor
    power = rotor.torque_coeff * np.sum(w**3, axis=1) / battery.efficiency
    ocv = np.array([battery.open_circuit_voltage(s) for s in soc])
    current = power / volt
    # Thevenin: V = OCV - R I with V I = P (the voltage is computed at each step's end)
    np.testing.assert_allclose(volt, ocv - battery.internal_resistance * current, rtol=2e-3)
    # the charge: Coulomb counting of that current
    drawn = np.sum(0.5 * (current[1:] + current[:-1]) * np.diff(log.t)) / 3600.0
    assert soc[0] - soc[-1] == pytest.approx(drawn / battery.capacity_ah, rel=2e-3)
    assert 0.4 < soc[0] - soc[-1] < 0.9
    # the thrust available, from the voltage: lower as the charge falls
    available = (
        4 * rotor.thrust_coeff * (rotor.speed_max * np.minimum(1.0, volt / battery.nominal_voltage())) ** 2
    )
    assert available[0] > 15.0 and available[-1] < 14.0
    assert np.all(np.diff(available[::100]) < 0)
    # while it exceeds the ~14 N this quadrotor's hover needs by a margin, the load holds
    # its height
    holding = log.t[available > 14.5]
    assert holding[-1] > 1.0
    held = log.x[log.t <= holding[-1], 2]
    assert np.abs(held - 1.0).max() < 0.01
    print(
        f"soc {soc[0]:.3f} -> {soc[-1]:.3f}; V {volt[0]:.2f} -> {volt[-1]:.2f} V; "
        f"I {current[0]:.1f} -> {current[-1]:.1f} A; available thrust {available[0]:.2f} -> "
        f"{available[-1]:.2f} N"
    )


def test_an_empty_battery_caps_the_rotors_and_the_load_comes_down():
    """Started at 2 % charge (OCV 13.4 V, sagging to ~11 V under the hover's current): the top
    speed 2500 x V / 16.8 gives less thrust than the hover needs, the rotors stay at that cap
    and the system sinks."""
    config = load_config(overrides=["battery.enabled=true", "battery.initial_charge=0.02"])
    sim = Simulator(config)
    log = sim.advance(3000)
    for i in range(3):
        o = layout.battery_offset(3, 0, i)
        top = 2500.0 * log.x[:-1, o + layout.BATT_VOLTAGE] / config.battery.nominal_voltage()
        w = log.x[
            1:, layout.quad_offset(i) + layout.QUAD_ROTOR : layout.quad_offset(i) + layout.QUAD_ROTOR + 4
        ]
        assert np.all((w.max(axis=1) <= top + 25.0)[20:])  # the cap, after the start's lag
    assert sim.x[2] < 0.8


@pytest.mark.parametrize(
    "table, match",
    [
        ({"efficiency": 1.5}, r"battery\.efficiency: expected a fraction in \(0, 1\], got 1\.5"),
        ({"cells": 0}, r"battery\.cells: expected an integer from 1 to 14, got 0"),
        ({"cell_ocv": [3.0] * 11}, r"battery\.cell_ocv: expected voltages rising with the charge"),
        ({"capacity_ah": -1}, r"battery\.capacity_ah: expected a positive number, got -1"),
    ],
)
def test_bad_battery_is_refused(table, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({"load": {}, "battery": table})
