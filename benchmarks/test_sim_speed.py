"""Closed-loop physics + onboard controllers, the paper's system (targets: >= 1e6 steps/s at
1 ms on one core, >= 2e6 at 0.5 ms, i.e. >= 1000x real time)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cableload_sim.cli.bench import _batch_arrays, prepared_simulator, run_batch, run_closed_loop
from cableload_sim.params import load_config

STEPS = 100_000


def config_with(dt, uavs=None):
    config = load_config(uavs=uavs)
    return dataclasses.replace(config, simulation=dataclasses.replace(config.simulation, physics_dt=dt))


@pytest.mark.parametrize("dt", [1e-3, 5e-4])
@pytest.mark.parametrize("uavs", [3, 6])
def test_single_core_closed_loop(benchmark, dt, uavs):
    sim = prepared_simulator(config_with(dt, uavs))
    run_closed_loop(sim, 1000)
    benchmark.pedantic(run_closed_loop, args=(sim, STEPS), rounds=5, iterations=1)
    steps_per_s = STEPS / benchmark.stats["median"]
    benchmark.extra_info.update(steps_per_s=steps_per_s, real_time_factor=steps_per_s * dt)
    assert np.isfinite(sim.x).all()


def test_batched_closed_loop(benchmark):
    sim = prepared_simulator(config_with(1e-3))
    batch = 64
    arrays = _batch_arrays(sim, batch)
    run_batch(sim, arrays, 200)
    per_system = 10_000
    benchmark.pedantic(run_batch, args=(sim, arrays, per_system), rounds=3, iterations=1)
    steps_per_s = batch * per_system / benchmark.stats["median"]
    benchmark.extra_info.update(batch_steps_per_s=steps_per_s, batch=batch)
    assert np.isfinite(arrays[0].x).all()


@pytest.mark.parametrize("effects", ["imu", "imu+ball+battery"])
def test_single_core_closed_loop_with_effects(benchmark, effects):
    """The optional effects' cost, n = 3 at 1 ms: the onboard IMU and estimate, then with the
    sloshing ball and the batteries too."""
    overrides = {
        "imu": ["imu.enabled=true"],
        "imu+ball+battery": ["imu.enabled=true", "ball.enabled=true", "battery.enabled=true"],
    }[effects]
    sim = prepared_simulator(load_config(overrides=overrides))
    run_closed_loop(sim, 1000)
    benchmark.pedantic(run_closed_loop, args=(sim, STEPS), rounds=5, iterations=1)
    steps_per_s = STEPS / benchmark.stats["median"]
    benchmark.extra_info.update(steps_per_s=steps_per_s, real_time_factor=steps_per_s * 1e-3)
    assert np.isfinite(sim.x).all()
