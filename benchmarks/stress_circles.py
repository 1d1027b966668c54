"""The hardest circles of the generalists' distribution: zero-sideslip circles (the load yaws
with the path) flown at the largest angular rate whose thrust need stays within a share of the
thrust limit, the share the distribution accepts (``references.thrust_share``, 0.85 in
``learners/configs/generalist.toml``; the quasi-static estimate of
``cableload trajectories --check``), and no faster than the distribution's top speed (4 m/s).

    .venv/bin/python benchmarks/stress_circles.py [--uavs 3] [--planners teacher,formation-follow]
        [--radii 1.5,2,2.5,3,3.5,4] [--share 0.85] [--max-speed 4] [--duration 20]
        [--set table.key=value ...] [--json out.json]

For each radius, the angular rate is found by bisection on the estimate; each planner then
flies the circle in closed loop on the embedded simulator (default config and ``--set``).
Prints, per circle and planner, the status, the position (mm) and orientation (deg) RMSE, the
smallest distance between two quadrotors and, for the teacher, its fallback plans and why.
"""

from __future__ import annotations

import argparse
import json
import sys

from compare_planners import build_planner
from tqdm import tqdm

from backends import make_backend
from backends.runner import run_episode
from cableload_sim.params import load_config
from cableload_sim.physics.feasibility import check_reference
from cableload_sim.trajectories import make_reference


def fastest_rate(radius: float, share: float, config, duration: float) -> float:
    """The largest angular rate (rad/s) of a zero-sideslip circle of ``radius`` whose thrust
    need is within ``share`` of the limit (bisection to 1e-4 rad/s)."""
    low, high = 0.01, 5.0
    while high - low > 1e-4:
        rate = 0.5 * (low + high)
        check = check_reference(circle(radius, rate), config, duration)
        if check.flyable and check.thrust.value <= share * check.limits["thrust_N"]:
            low = rate
        else:
            high = rate
    return low


def circle(radius: float, rate: float):
    return make_reference("circle", orientation="zero-sideslip", radius=radius, w=rate)


def fly(planners, radii, share: float, max_speed: float, duration: float, uavs: int, overrides) -> list[dict]:
    """Each planner on each circle: one row per flight."""
    config = load_config(uavs=uavs, overrides=overrides)
    rows = []
    jobs = [(radius, name) for radius in radii for name in planners]
    rates = {r: min(fastest_rate(r, share, config, duration), max_speed / r) for r in radii}
    for radius, name in tqdm(jobs, desc="circles", unit="flight"):
        planner = build_planner(name, config)
        result = run_episode(
            make_backend("embedded", config), planner, circle(radius, rates[radius]), duration
        )
        metrics = result.metrics
        rows.append(
            {
                "radius_m": radius,
                "rate_rad_s": rates[radius],
                "speed_m_s": rates[radius] * radius,
                "planner": name,
                "status": result.status.value,
                "position_mm": 1e3 * metrics["rmse_position_m"],
                "orientation_deg": metrics["rmse_orientation_deg"],
                "min_distance_m": metrics["min_uav_distance_m"],
                "fallbacks": getattr(planner, "failures", None),
                "reasons": dict(getattr(planner, "reasons", {}) or {}),
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| radius (m) | speed (m/s) | planner | status | pos (mm) | orient (deg) | min distance (m) "
        "| fallbacks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fallbacks = "" if r["fallbacks"] is None else str(r["fallbacks"])
        if r["reasons"]:
            fallbacks += " (" + ", ".join(f"{k}: {v}" for k, v in r["reasons"].items()) + ")"
        lines.append(
            f"| {r['radius_m']:.1f} | {r['speed_m_s']:.2f} | {r['planner']} | {r['status']} | "
            f"{r['position_mm']:.1f} | {r['orientation_deg']:.2f} | {r['min_distance_m']:.3f} | {fallbacks} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uavs", type=int, default=3)
    parser.add_argument("--planners", default="teacher,formation-follow")
    parser.add_argument("--radii", default="1.5,2,2.5,3,3.5,4", help="circle radii (m)")
    parser.add_argument("--share", type=float, default=0.85, help="of the thrust limit, in (0, 1]")
    parser.add_argument("--max-speed", type=float, default=4.0, help="the circles' top speed (m/s)")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if not 0.0 < args.share <= 1.0:
        parser.error(f"--share: expected a share in (0, 1], got {args.share!r}")
    radii = [float(r) for r in args.radii.split(",")]
    if any(r <= 0.0 for r in radii):
        parser.error(f"--radii: expected positive radii, got {args.radii!r}")
    if args.max_speed <= 0.0:
        parser.error(f"--max-speed: expected a positive speed, got {args.max_speed!r}")
    rows = fly(
        args.planners.split(","), radii, args.share, args.max_speed, args.duration, args.uavs, args.set
    )
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
