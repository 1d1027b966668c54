"""Speed of the closed-loop simulator: physics plus onboard controllers, no planner.

The controllers track a real plan (the formation around a hover point, resent each planner
period by shifting its node times in place), so trajectory sampling, INDI and allocation all run.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from cableload_sim.horizon import node_times
from cableload_sim.params import Config, load_config
from cableload_sim.physics import kernels, layout
from cableload_sim.physics.simulator import Simulator


def prepared_simulator(config: Config) -> Simulator:
    """A simulator hovering with a plan loaded in every controller."""
    sim = Simulator(config)
    state = sim.world_state()
    times = node_times(sim.time)
    for i in range(sim.n):
        sim.plans[i, :, layout.TR_TIME] = times
        sim.plans[i, :, layout.TR_POS : layout.TR_POS + 3] = state.uav_p[i]
        sim.plan_status[i] = layout.PLAN_NEW
    return sim


def run_closed_loop(sim: Simulator, steps: int, period_steps: int = 1000) -> None:
    """Step ``steps`` physics steps, refreshing the plans' times every ``period_steps``."""
    done = 0
    while done < steps:
        chunk = min(period_steps, steps - done)
        sim.plans[:, :, layout.TR_TIME] += chunk * sim.h
        sim.plan_status[:] = layout.PLAN_NEW
        sim.advance(chunk, log=False)
        done += chunk


def _batch_arrays(sim: Simulator, batch: int):
    """``batch`` copies of ``sim``'s data (``layout.SimData``, batch first), simulated models
    and a zero wrench."""
    rep = lambda a: np.repeat(a[None], batch, axis=0).copy()  # noqa: E731
    data = layout.SimData(*(rep(a) for a in sim.kernel_data()))
    return data, rep(sim.model), rep(np.zeros((1, 6)))


def run_batch(sim: Simulator, arrays, steps: int, period_steps: int = 1000) -> None:
    data, physics, wrench = arrays
    done = 0
    step = sim.step
    while done < steps:
        chunk = min(period_steps, steps - done)
        data.plans[:, :, :, layout.TR_TIME] += chunk * sim.h
        data.plan_status[:] = layout.PLAN_NEW
        kernels.advance_batch(sim.kernel_model(), physics, data, step + done, chunk, wrench)
        done += chunk


ROUNDS = 5


def _median_time(work) -> float:
    """Median wall time of ``ROUNDS`` runs of ``work`` (s)."""
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_sim(
    steps: int = 200_000,
    batch: int = 64,
    physics_dt: float | None = None,
    uavs: int | None = None,
    config_path=None,
) -> dict:
    """Steps per second on one core and over all cores; real-time factors."""
    config = load_config(config_path, uavs=uavs)
    if physics_dt is not None:
        config = dataclasses.replace(
            config, simulation=dataclasses.replace(config.simulation, physics_dt=physics_dt)
        )
    sim = prepared_simulator(config)
    run_closed_loop(sim, 1000)  # compile or load the cache outside the timing
    single = _median_time(lambda: run_closed_loop(sim, steps // ROUNDS)) * ROUNDS
    arrays = _batch_arrays(sim, batch)
    run_batch(sim, arrays, 200)
    per_system = max(steps // batch * 2, 2000)
    batched = _median_time(lambda: run_batch(sim, arrays, per_system // ROUNDS)) * ROUNDS
    per_system = per_system // ROUNDS * ROUNDS
    steps = steps // ROUNDS * ROUNDS
    finite = bool(np.isfinite(sim.x).all() and np.isfinite(arrays[0].x).all())
    return {
        "uavs": sim.n,
        "physics_dt_s": sim.h,
        "controller_rate_hz": config.controller.rate_hz,
        "steps_per_s": steps / single,
        "real_time_factor": steps * sim.h / single,
        "batch_systems": batch,
        "threads": int(os.environ.get("NUMBA_NUM_THREADS", os.cpu_count() or 1)),
        "batch_steps_per_s": batch * per_system / batched,
        "batch_real_time_factor": batch * per_system * sim.h / batched,
        "state_finite": finite,
    }
