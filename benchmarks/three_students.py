"""Several student planners on one machine, each in its own process deciding for one quadrotor
at the planner's rate, as `cableload node` runs them on a ground station; optionally with
another CPU-bound job beside them.

    python benchmarks/three_students.py [--students 3] [--seconds 20] [--busy 1] [--runtime torch]

Prints one JSON object: per student the decision time (median, p99, max, ms) and the periods
whose decision did not finish before the next one was due. The decision is the whole of it:
observation history, formation prior, network, decoding and the bounds check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import subprocess
import sys
import time

import numpy as np


def _student(index: int, seconds: float, runtime: str, start_at: float, out) -> None:
    from cableload_sim.params import load_config
    from cableload_sim.physics.simulator import Simulator
    from cableload_sim.trajectories import make_reference
    from learners.export import GENERALIST_POLICIES, student_planner

    config = load_config(None)
    planner = student_planner(config, GENERALIST_POLICIES[config.system.n_uavs], runtime)
    sim = Simulator(config)
    sim.advance(100)
    state, reference = sim.world_state(), make_reference("eight-medium")
    i = index % config.system.n_uavs
    obs = dataclasses.replace(state.local(i, planner.rho[i], planner.attach[i]), t=12.3)
    period = 1.0 / config.simulation.planner_rate_hz
    for _ in range(20):  # warm: traced network, first calls
        planner.act([planner.observe_local(i, obs, reference)], obs.uav_p[None], [i])
    times, late = [], 0
    due = start_at
    while time.monotonic() < due:
        time.sleep(0.001)
    end = start_at + seconds
    while due < end:
        begin = time.monotonic()
        planner.act([planner.observe_local(i, obs, reference)], obs.uav_p[None], [i])
        finished = time.monotonic()
        times.append(finished - begin)
        due += period
        if finished > due:
            late += 1
        while time.monotonic() < due:
            time.sleep(min(0.002, max(0.0, due - time.monotonic())))
    out.put((index, times, late))


def run(students: int = 3, seconds: float = 20.0, busy: int = 1, runtime: str = "torch") -> dict:
    """Run the students side by side; returns the figures (see the module's docstring)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        start_at = time.monotonic() + 15.0  # every process loaded and warm by then
        procs = [
            context.Process(target=_student, args=(k, seconds, runtime, start_at, queue))
            for k in range(students)
        ]
        for proc in procs:
            proc.start()
        results = sorted(queue.get(timeout=seconds + 120.0) for _ in procs)
        for proc in procs:
            proc.join()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    report = {"students": students, "busy_processes": busy, "seconds": seconds, "runtime": runtime}
    per = []
    for index, times, late in results:
        ms = np.array(times) * 1e3
        per.append(
            {
                "student": index,
                "decisions": len(ms),
                "median_ms": float(np.median(ms)),
                "p99_ms": float(np.percentile(ms, 99)),
                "max_ms": float(ms.max()),
                "late_periods": late,
            }
        )
    report["per_student"] = per
    report["late_periods"] = sum(p["late_periods"] for p in per)
    report["worst_p99_ms"] = max(p["p99_ms"] for p in per)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--busy", type=int, default=1, help="other CPU-bound processes beside them")
    parser.add_argument("--runtime", choices=["torch", "onnx", "numba"], default="torch")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.students, args.seconds, args.busy, args.runtime), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
