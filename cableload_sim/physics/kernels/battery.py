"""Batteries (part of the integrator stage, run instead of ``motors`` when the model has
them): each quadrotor's state of charge and terminal voltage, and the top rotor speed the
voltage allows.

Thevenin model without RC branch: ``V = OCV(soc) - R I``; the rotors draw the electrical
power ``P = sum_k k_m w_k^3 / efficiency`` (shaft power, drag torque times speed), so
``V I = P`` gives ``I = (OCV - sqrt(OCV^2 - 4 R P)) / (2 R)`` (the smaller root; at most
OCV / (2 R), the pack's largest power, when P exceeds it); the charge falls by ``I h``. OCV is
linear between the table's points at soc = 0, 1/10, ..., 1. Each rotor's command is first
capped at the top speed ``speed_max min(1, V / V_nominal)`` of the voltage at the end of the
last step, then followed exactly (first-order lag, as ``motors``).
"""

from __future__ import annotations

import math

from cableload_sim.physics.kernels.jit import kernel, quad_model_offset, quad_offset
from cableload_sim.physics.layout import (
    BATT_OCV_POINTS,
    BATT_SOC,
    BATT_VOLTAGE,
    CS_ROTOR_CMD,
    M_BATT_CAPACITY,
    M_BATT_EFFICIENCY,
    M_BATT_NOMINAL_V,
    M_BATT_OCV,
    M_BATT_RESISTANCE,
    QM_KM,
    QM_SPEED_MAX,
    QUAD_ROTOR,
    battery_offset,
)

battery_offset_ = kernel(inline="always")(battery_offset)


@kernel(inline="always")
def open_circuit_voltage(model, soc):
    """OCV (V) of a pack at state of charge ``soc`` (clipped to [0, 1])."""
    s = min(max(soc, 0.0), 1.0) * (BATT_OCV_POINTS - 1)
    j = min(int(s), BATT_OCV_POINTS - 2)
    f = s - j
    return model[M_BATT_OCV + j] + f * (model[M_BATT_OCV + j + 1] - model[M_BATT_OCV + j])


@kernel(inline="always")
def battery_current(ocv, resistance, power):
    """Current (A) that delivers ``power`` (W) from a source of ``ocv`` (V) behind
    ``resistance`` (ohm)."""
    if resistance <= 0.0:
        return power / ocv
    disc = ocv * ocv - 4.0 * resistance * power
    if disc < 0.0:
        disc = 0.0
    return (ocv - math.sqrt(disc)) / (2.0 * resistance)


@kernel(inline="always")
def battery_motors(x, ctrl, n, decay, model, h, ball):
    """``motors`` with each command capped at the top speed the battery allows, then every
    battery discharged by one step of its rotors' power (``ball``: 1 when the state has the
    ball's block)."""
    resistance = model[M_BATT_RESISTANCE]
    per_watt = 1.0 / model[M_BATT_EFFICIENCY]
    for i in range(n):
        qm = quad_model_offset(i)
        bo = battery_offset_(n, ball, i)
        top = model[qm + QM_SPEED_MAX] * min(1.0, x[bo + BATT_VOLTAGE] / model[M_BATT_NOMINAL_V])
        o = quad_offset(i) + QUAD_ROTOR
        shaft = 0.0
        for r in range(4):
            cmd = min(ctrl[i, CS_ROTOR_CMD + r], top)
            w = cmd + (x[o + r] - cmd) * decay[i]
            x[o + r] = w
            shaft += w * w * abs(w)
        ocv = open_circuit_voltage(model, x[bo + BATT_SOC])
        current = battery_current(ocv, resistance, model[qm + QM_KM] * shaft * per_watt)
        soc = x[bo + BATT_SOC] - h * current / model[M_BATT_CAPACITY]
        x[bo + BATT_SOC] = soc if soc > 0.0 else 0.0
        x[bo + BATT_VOLTAGE] = ocv - resistance * current
