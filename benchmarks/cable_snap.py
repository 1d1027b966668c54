"""One cable snap, simulated both ways ([ground] cable_snap): the spring-damper alone against
RotorTM's inelastic impulse, at several physics steps.

The paper's system without gravity and with the rotors stopped (no controller updates): the
load, 1 cm closer to the quadrotors than at hover (all three cables slack), moves away from
them at 1 m/s; the cables snap taut. Printed per model and step: the peak tension (N) and the
impulse the cables passed (N s, the load's momentum change), the load's and the quadrotors'
vertical velocity 0.2 s after (m/s), and the kinetic energy lost (J, spring energy counted).

    .venv/bin/python benchmarks/cable_snap.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cableload_sim.params import load_config
from cableload_sim.physics import layout
from cableload_sim.physics.simulator import Simulator

SPEED = 1.0  # m/s, the load moving away from the quadrotors
SLACK_LIFT = 0.01  # m, the load raised above its hover position
AFTER_S = 0.2


def energy(sim: Simulator) -> float:
    """Kinetic energy of every body plus the cables' spring energy (J)."""
    x, model, n = sim.x, sim.model, sim.n
    total = 0.0
    for b in range(n + 1):
        o = layout.body_offset(b)
        if b == 0:
            mass = model[layout.M_LOAD_MASS]
            inertia = model[layout.M_LOAD_INERTIA : layout.M_LOAD_INERTIA + 9].reshape(3, 3)
        else:
            qm = layout.quad_model_offset(b - 1)
            mass = model[qm + layout.QM_MASS]
            inertia = np.diag(model[qm + layout.QM_INERTIA : qm + layout.QM_INERTIA + 3])
        v = x[o + layout.BODY_VEL : o + layout.BODY_VEL + 3]
        w = x[o + layout.BODY_RATE : o + layout.BODY_RATE + 3]
        total += 0.5 * mass * v @ v + 0.5 * w @ inertia @ w
    state = sim.world_state()
    k = sim.config.system.cables[0].stiffness
    for t in state.cable_tension:
        total += 0.5 * (t / k) ** 2 * k if t > 0 else 0.0
    return total


def snap(model_name: str, dt: float) -> dict:
    config = load_config()
    config = dataclasses.replace(
        config,
        simulation=dataclasses.replace(config.simulation, physics_dt=dt),
        ground=dataclasses.replace(config.ground, cable_snap=model_name),
    )
    sim = Simulator(config)
    sim.model[layout.M_GRAVITY] = 0.0
    x = sim.x.copy()
    x[layout.LOAD_POS + 2] += SLACK_LIFT
    x[layout.LOAD_VEL + 2] = -SPEED
    for i in range(sim.n):
        o = layout.quad_offset(i)
        x[o + layout.QUAD_ROTOR : o + layout.QUAD_ROTOR + 4] = 0.0
    sim.set_state(x, step=1)
    sim.decimation = 10**9  # no controller update: a free mechanical snap
    sim.log_every = 1
    e0 = energy(sim)
    load_mass = config.system.load.mass
    log = sim.advance(round(AFTER_S / dt))
    after = sim.world_state()
    return {
        "model": model_name,
        "dt_ms": dt * 1e3,
        "peak_tension_N": float(log.tension.max()),
        "impulse_Ns": float(load_mass * (after.load_v[2] + SPEED)),
        "load_vz_after": float(after.load_v[2]),
        "uav_vz_after": float(after.uav_v[:, 2].mean()),
        "energy_lost_J": float(e0 - energy(sim)),
        "energy_before_J": float(e0),
    }


def main() -> None:
    rows = [snap(name, dt) for name in ("spring", "inelastic") for dt in (2e-3, 1e-3, 2.5e-4)]
    keys = list(rows[0])
    print("  ".join(f"{k:>15}" for k in keys))
    for row in rows:
        print("  ".join(f"{row[k]:>15}" if isinstance(row[k], str) else f"{row[k]:>15.4g}" for k in keys))


if __name__ == "__main__":
    main()
