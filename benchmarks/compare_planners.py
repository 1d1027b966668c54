"""Side-by-side comparison of planners on the embedded simulator (the teacher issue's table).

    .venv/bin/python benchmarks/compare_planners.py [--duration 60] [--planners a,b,c]
        [--cases NAME,...] [--json out.json]

Each case is a load reference with its orientation mode; every planner flies it for the same
duration from the same start, and the metrics of ``cableload simulate`` are tabulated.
"""

from __future__ import annotations

import argparse
import json
import sys

from backends import make_backend
from backends.runner import run_episode
from cableload_sim.params import load_config
from cableload_sim.trajectories import make_reference
from planners import make_planner

CASES = {
    "eight-slow": ("eight-slow", "constant", {}),
    "eight-medium": ("eight-medium", "constant", {}),
    "eight-fast": ("eight-fast", "constant", {}),
    "circle-zss": ("circle", "zero-sideslip", {}),
    "eight-slow-zss": ("eight-slow", "zero-sideslip", {}),
    "eight-2.0": ("eight", "constant", {"ax": 2.0, "ay": 2.0, "w": 0.5}),
    "eight-2.5": ("eight", "constant", {"ax": 2.5, "ay": 2.5, "w": 0.5}),
    "eight-3.0": ("eight", "constant", {"ax": 3.0, "ay": 3.0, "w": 0.5}),
    "eight-3.5": ("eight", "constant", {"ax": 3.5, "ay": 3.5, "w": 0.5}),
}
KEYS = ("rmse_position_m", "rmse_orientation_deg", "min_uav_distance_m", "longest_slack_s",
        "max_thrust_ratio", "status")


def compare(planners, cases, duration, uavs=None):
    config = load_config(uavs=uavs)
    built = {name: make_planner(name, config) for name in planners}
    rows = []
    for case in cases:
        spec, orientation, options = CASES[case]
        reference = make_reference(spec, orientation=orientation, **options)
        for name, planner in built.items():
            result = run_episode(make_backend("embedded", config), planner, reference, duration)
            metrics = {k: result.metrics[k] for k in KEYS}
            metrics.update({k: v for k, v in planner.report().items() if k.startswith("solve")})
            rows.append({"case": case, "planner": name, **metrics})
            print(f"{case:15s} {name:15s} " + " ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in metrics.items()), file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--planners", default="formation,formation-tilt,teacher")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--uavs", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = compare(args.planners.split(","), args.cases.split(","), args.duration, args.uavs)
    header = "| case | planner | pos RMSE (m) | att RMSE (deg) | min dist (m) | longest slack (s) | status |"
    print(header)
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['planner']} | {r['rmse_position_m']:.3f} | "
              f"{r['rmse_orientation_deg']:.2f} | {r['min_uav_distance_m']:.2f} | "
              f"{r['longest_slack_s']:.2f} | {r['status']} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
