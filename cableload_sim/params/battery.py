"""Each quadrotor's battery, its sag limiting the rotors (``[battery]``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cableload_sim import checks
from cableload_sim.errors import ConfigError

BATTERY_CELL_OCV = (3.27, 3.69, 3.73, 3.77, 3.79, 3.82, 3.87, 3.92, 3.97, 4.10, 4.20)
"""Open-circuit voltage of one LiPo cell at state of charge 0, 0.1, ..., 1 (V): a typical
discharge curve (steep below 10 %, a plateau around 3.8 V, 4.2 V full)."""


@dataclass(frozen=True)
class BatteryParams:
    """Each quadrotor's battery (Thevenin model without RC branch): terminal voltage
    ``V = OCV(soc) - R I``, the current drawn by the rotors' electrical power
    ``P = sum k_m w^3 / efficiency = V I``, the charge falling by ``I`` per second. A rotor's
    top speed is ``speed_max * min(1, V / V_nominal)`` (a motor's speed is proportional to its
    voltage; V_nominal: the full pack unloaded), so the thrust available falls as the battery
    sags and empties. Planners and onboard controllers are not told about it."""

    enabled: bool = False
    cells: int = 4
    """LiPo cells in series (-): 4S is the class of a 20 N, 0.6 kg quadrotor."""
    capacity_ah: float = 1.5
    """Charge of a full battery (A h)."""
    internal_resistance: float = 0.05
    """Internal resistance of the pack (ohm)."""
    efficiency: float = 0.75
    """Rotor shaft power over electrical power, motors and speed controllers together (-)."""
    initial_charge: float = 1.0
    """State of charge at the start (-)."""
    cell_ocv: tuple[float, ...] = BATTERY_CELL_OCV
    """Open-circuit voltage of a cell at state of charge 0, 0.1, ..., 1 (V), increasing."""

    def ocv_table(self) -> np.ndarray:
        """Open-circuit voltage of the pack at state of charge 0, 0.1, ..., 1 (V)."""
        return self.cells * np.asarray(self.cell_ocv, dtype=float)

    def nominal_voltage(self) -> float:
        """Voltage at which the rotors reach ``speed_max``: the full pack, unloaded (V)."""
        return float(self.ocv_table()[-1])

    def open_circuit_voltage(self, soc: float) -> float:
        """OCV of the pack at state of charge ``soc`` (V), linear between the table's points."""
        table = self.ocv_table()
        return float(np.interp(soc, np.linspace(0.0, 1.0, table.size), table))


def _battery(path: str, table: dict) -> BatteryParams:
    fields = {
        "enabled": checks.boolean,
        "cells": checks.integer(1, 14),
        "capacity_ah": checks.positive,
        "internal_resistance": checks.non_negative,
        "efficiency": checks.positive,
        "initial_charge": checks.positive,
        "cell_ocv": checks.vector(len(BATTERY_CELL_OCV), checks.positive),
    }
    battery = checks.build(BatteryParams, path, table, fields)
    for name in ("efficiency", "initial_charge"):
        if getattr(battery, name) > 1.0:
            raise ConfigError(f"{path}.{name}: expected a fraction in (0, 1], got {getattr(battery, name)!r}")
    if any(b <= a for a, b in zip(battery.cell_ocv, battery.cell_ocv[1:])):
        raise ConfigError(
            f"{path}.cell_ocv: expected voltages rising with the charge, got {list(battery.cell_ocv)!r}"
        )
    return battery
