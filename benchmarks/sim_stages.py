"""Where a simulator step's time goes: each stage of the closed-loop step timed alone.

    .venv/bin/python benchmarks/sim_stages.py [--uavs 3] [--reps 200000]

A simulator of ``--uavs`` quadrotors and the load hovers with a plan in every controller (as
``cableload bench sim`` sets it up) for 2 s; then each stage of ``kernels.stepping._steps`` is
called ``--reps`` times in a compiled loop on that state (the same kernels, the same flags):
the two half kicks, the drift, the rates from the momenta, the motors, the wind sample, the
forces (cables, gravity, drag, contact), the slack statistics, and, once per controller
period, the controllers of every quadrotor and the sampled statistics. Prints nanoseconds per
call and per physics step, their sum, and the whole step timed by ``advance`` itself; the
difference is the loop's own bookkeeping and what the stages share in cache. The loops are
compiled without numba's reference counting, as ``_steps`` is: with it, the arrays passed into
the inlined controller stages are counted in and out on every call, which made the
controllers 40 % slower here (616 ns against 447 for three), a cost the step never pays.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from cableload_sim.cli.bench import prepared_simulator, run_closed_loop
from cableload_sim.params import load_config
from cableload_sim.physics.kernels.aero import wind_at
from cableload_sim.physics.kernels.controller import controller_update
from cableload_sim.physics.kernels.forces import forces_in_wind
from cableload_sim.physics.kernels.integrator import (
    body_constants,
    drift,
    kick,
    momenta_from_rates,
    motor_decay,
    motors,
    rates_from_momenta,
)
from cableload_sim.physics.kernels.jit import kernel
from cableload_sim.physics.kernels.stepping import _sampled_statistics, _slack_statistics
from cableload_sim.physics.layout import SC_SIZE


@kernel(_nrt=False)
def _kick(x, n, force, torque, half, mom, body, reps):
    for _ in range(reps):
        kick(x, n, force, torque, half, mom, body)


@kernel(_nrt=False)
def _drift(x, n, h, mom, body, reps):
    for _ in range(reps):
        drift(x, n, h, mom, body)


@kernel(_nrt=False)
def _rates(x, n, mom, body, reps):
    for _ in range(reps):
        rates_from_momenta(x, n, mom, body)


@kernel(_nrt=False)
def _motors(x, ctrl, n, decay, reps):
    for _ in range(reps):
        motors(x, ctrl, n, decay)


@kernel(_nrt=False)
def _wind(samples, dt, h, reps):
    total = 0.0
    for k in range(reps):
        wx, wy, wz = wind_at(samples, dt, k * h)
        total += wx + wy + wz
    return total


@kernel(_nrt=False)
def _forces(x, model, n, wrench, R, force, torque, tension, reps):
    for _ in range(reps):
        forces_in_wind(x, model, n, wrench, 0.0, 0.0, 0.0, R, force, torque, tension)


@kernel(_nrt=False)
def _slack(n, h, tension, stats, reps):
    for _ in range(reps):
        _slack_statistics(n, h, tension, stats)


@kernel(_nrt=False)
def _controllers(x, n, ctrl, plans, status, counters, nominal, gains, t, R, scratch, reps):
    for _ in range(reps):
        for i in range(n):
            controller_update(x, i, ctrl[i], plans[i], status, counters, nominal, gains, t, R, scratch)


@kernel(_nrt=False)
def _sampled(x, n, model, stats, reps):
    for _ in range(reps):
        _sampled_statistics(x, n, model, stats)


def _ns_per_call(run, reps: int) -> float:
    run(max(reps // 100, 1))  # compile or load the cache outside the timing
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        run(reps)
        best = min(best, time.perf_counter() - start)
    return best / reps * 1e9


def profile(uavs: int, reps: int) -> tuple[list[tuple[str, float, float]], float]:
    """(stage, ns per call, ns per physics step) rows and the whole step's ns."""
    config = load_config(uavs=uavs)
    sim = prepared_simulator(config)
    run_closed_loop(sim, 2000)
    m, d = sim.kernel_model(), sim.kernel_data()
    x = d.x.copy()
    n, h = m.n, m.h
    body = body_constants(m.physics, n)
    decay = motor_decay(m.physics, n, h)
    R = np.empty((n + 1, 9))
    force, torque = np.zeros((n + 2, 3)), np.zeros((n + 2, 3))
    tension, mom = np.empty(n), np.empty((n + 1, 3))
    wrench = np.zeros(6)
    forces_in_wind(x, m.physics, n, wrench, 0.0, 0.0, 0.0, R, force, torque, tension)
    momenta_from_rates(x, n, mom, body)
    stats = d.stats.copy()
    scratch = np.empty(SC_SIZE)
    per_period = 1.0 / m.decimation
    t_now = sim.time  # within the plans loaded
    stages = [
        ("kick (two per step)", lambda r: _kick(x, n, force, torque, 0.5 * h, mom, body, r), 2.0),
        ("drift", lambda r: _drift(x, n, h, mom, body, r), 1.0),
        ("rates from momenta", lambda r: _rates(x, n, mom, body, r), 1.0),
        ("motors", lambda r: _motors(x, d.ctrl, n, decay, r), 1.0),
        ("wind sample", lambda r: _wind(m.wind, m.wind_dt, h, r), 1.0),
        (
            "forces (cables, gravity, drag, contact)",
            lambda r: _forces(x, m.physics, n, wrench, R, force, torque, tension, r),
            1.0,
        ),
        ("slack statistics", lambda r: _slack(n, h, tension, stats, r), 1.0),
        (
            f"controllers, all {n} (once per {m.decimation} steps)",
            lambda r: _controllers(
                x, n, d.ctrl, d.plans, d.plan_status, d.counters, m.nominal, m.gains, t_now, R, scratch, r
            ),
            per_period,
        ),
        ("sampled statistics (same)", lambda r: _sampled(x, n, m.physics, stats, r), per_period),
    ]
    rows = []
    for name, run, calls_per_step in stages:
        ns = _ns_per_call(run, reps)
        rows.append((name, ns, ns * calls_per_step))
    steps = max(reps, 100_000)
    run_closed_loop(sim, 1000)
    start = time.perf_counter()
    run_closed_loop(sim, steps)
    whole = (time.perf_counter() - start) / steps * 1e9
    return rows, whole


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uavs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=200_000)
    args = parser.parse_args(argv)
    if args.uavs < 1 or args.reps < 100:
        raise SystemExit(f"expected --uavs >= 1 and --reps >= 100, got {args.uavs}, {args.reps}")
    rows, whole = profile(args.uavs, args.reps)
    total = sum(per_step for _, _, per_step in rows)
    print(f"| stage ({args.uavs} quadrotors) | ns per call | ns per step | share |")
    print("|---|---|---|---|")
    for name, ns, per_step in rows:
        print(f"| {name} | {ns:.0f} | {per_step:.0f} | {per_step / whole:.0%} |")
    print(f"| sum of the stages | | {total:.0f} | {total / whole:.0%} |")
    print(f"| whole step (`advance`) | | {whole:.0f} | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
