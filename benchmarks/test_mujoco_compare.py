"""The closed-loop simulator beside MuJoCo's tendon model of the same system stepped without
controllers (``mujoco_model.py``), in one run: three quadrotors and the load, 1 ms, one core
(target: ours at least 25x MuJoCo's steps per second).

The benchmark times ours. MuJoCo's rates go to ``extra_info`` with the ratios ours / MuJoCo,
each the median of ``ROUNDS`` runs: the cable as a tendon limit (the reference) stepped from a
Python loop, in C (``mj_step`` with ``nstep``) and through ``mujoco.rollout``; the cable as a
tendon spring with a dead band (the project's cable law) from a Python loop and in C.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from mujoco_model import (  # noqa: E402  (needs mujoco)
    mujoco_c_loop_steps_per_second,
    mujoco_rollout_steps_per_second,
    mujoco_steps_per_second,
    rollout_available,
)

from cableload_sim.cli.bench import prepared_simulator, run_closed_loop  # noqa: E402
from cableload_sim.params import load_config  # noqa: E402

STEPS = 100_000
MUJOCO_STEPS = 20_000
ROUNDS = 5


def test_closed_loop_against_mujoco(benchmark):
    config = load_config()
    sim = prepared_simulator(config)
    run_closed_loop(sim, 1000)
    benchmark.pedantic(run_closed_loop, args=(sim, STEPS), rounds=ROUNDS, iterations=1)
    ours = STEPS / benchmark.stats["median"]
    ways = {
        "mujoco_python_loop": (mujoco_steps_per_second, "limit"),
        "mujoco_c_loop": (mujoco_c_loop_steps_per_second, "limit"),
        "mujoco_spring_python_loop": (mujoco_steps_per_second, "spring"),
        "mujoco_spring_c_loop": (mujoco_c_loop_steps_per_second, "spring"),
    }
    if rollout_available():
        ways["mujoco_rollout"] = (mujoco_rollout_steps_per_second, "limit")
    info = {"steps_per_s": ours, "mujoco_steps": MUJOCO_STEPS}
    for name, (measure, cable) in ways.items():
        # each run raises if MuJoCo's state is not finite or its load drifted away
        runs = [measure(MUJOCO_STEPS, cable=cable, config=config) for _ in range(ROUNDS)]
        rate = float(np.median(runs))
        info[f"{name}_steps_per_s"] = rate
        info[f"ratio_to_{name}"] = ours / rate
    benchmark.extra_info.update(info)
    assert np.isfinite(sim.x).all()
