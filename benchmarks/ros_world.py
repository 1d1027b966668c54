"""The ROS1 path against the embedded backend, 60 s at real-time factor 1 (the ROS issue's
figures): the teacher through the Gazebo backend against ``cableload world``, and three student
nodes (separate processes) recorded by ``rosbag record``, each beside the same planner on the
embedded backend; the stock pilot queue throughout (``--pilot-queue replace`` for a patched
one). Needs Debian's ROS1 packages; starts a private master. The machine's load average is
printed with the figures: other work on it delays the ROS processes.

    .venv/bin/python benchmarks/ros_world.py [--duration 60] [--trajectory eight-medium]

Prints a table and one JSON object (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from backends.ros_graph import RosGraph, last_json
from learners.export import SHIPPED_POLICY

KEYS = (
    "status",
    "rmse_position_m",
    "rmse_orientation_deg",
    "min_uav_distance_m",
    "rejected_plans",
    "real_time_factor",
)


def simulate(graph: RosGraph, args, *extra: str) -> dict:
    done = graph.run(
        "simulate",
        "--trajectory",
        args.trajectory,
        "--duration",
        str(args.duration),
        "--json",
        *extra,
        timeout=args.duration * 5 + 300,
    )
    return last_json(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--trajectory", default="eight-medium")
    parser.add_argument("--pilot-queue", default="stock", choices=["stock", "replace"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {}
    queue = ("--pilot-queue", args.pilot_queue)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        graph = RosGraph(Path(folder))
        try:
            graph.cableload("world", "world", "--real-time-factor", "1", *queue)
            rows["teacher, gazebo backend"] = simulate(
                graph, args, "--backend", "gazebo", "--planner", "teacher", *queue
            )
            load.append(os.getloadavg()[0])
            rows["teacher, embedded"] = simulate(graph, args, "--planner", "teacher")
            for i in range(3):
                graph.cableload(
                    f"node{i}",
                    "node",
                    "--planner",
                    "student",
                    "--uav",
                    str(i),
                    "--runtime",
                    "onnx",
                    "--policy",
                    str(SHIPPED_POLICY),
                    *queue,
                )
            graph.wait_for(
                lambda: (
                    len(
                        [
                            node
                            for node in graph.master_state()["subscribers"].get(
                                "/cableload/load/reference_horizon", []
                            )
                            if node.startswith("/cableload_student_")
                        ]
                    )
                    == 3
                ),
                120,
                "three student nodes",
            )
            bag = Path(folder) / "nodes.bag"
            graph.start(
                "rosbag",
                [
                    "rosbag",
                    "record",
                    "-O",
                    str(bag),
                    "-e",
                    "/quad[0-9]+/agiros_pilot/(state|odometry|trajectory)|"
                    "/mocap/load/pose|/cableload/(load/odometry|load/reference|"
                    "cable_tension|config|metrics)",
                ],
            )
            time.sleep(2.0)
            rows["student nodes, gazebo backend"] = simulate(
                graph, args, "--backend", "gazebo", "--planner", "nodes", *queue
            )
            load.append(os.getloadavg()[0])
            time.sleep(0.5)
            graph.kill("rosbag", signal.SIGINT)
            graph.wait_for(bag.exists, 10, "the bag")
            rows["student nodes, from the rosbag"] = last_json(
                graph.run("metrics", str(bag), "--json").stdout
            )
            rows["student, embedded"] = simulate(
                graph, args, "--planner", "student", "--runtime", "onnx", "--policy", str(SHIPPED_POLICY)
            )
        finally:
            graph.stop()
        world = [line for line in graph.log("world").splitlines() if "accepted/rejected" in line]
    rows["machine"] = {"load_average_1min": load, "world": world[-1] if world else ""}
    if args.json:
        print(json.dumps(rows, default=float))
        return 0
    print(
        f"{args.trajectory}, {args.duration:g} s, real-time factor 1, {args.pilot_queue} pilot "
        f"queue; 1-minute load average at start and after the ROS runs: "
        f"{', '.join(f'{x:.2f}' for x in load)}"
    )
    print(rows["machine"]["world"])
    print("".ljust(34) + "".join(k[:18].rjust(20) for k in KEYS))
    for name, row in rows.items():
        if name == "machine":
            continue
        cells = [row.get(k, "") for k in KEYS]
        print(
            name.ljust(34)
            + "".join((f"{c:.4g}" if isinstance(c, float) else str(c)).rjust(20) for c in cells)
        )
    print(json.dumps(rows, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
