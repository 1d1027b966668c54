"""Side-by-side comparison of planners on the embedded simulator (the teacher issue's table).

    .venv/bin/python benchmarks/compare_planners.py [--duration 60] [--planners a,b,c]
        [--cases NAME,...|catalog|agile|eights|generalist] [--uavs N] [--config TOML]
        [--heldout TRAIN_TOML:SEED:COUNT] [--json out.json]

A planner ``student@DIR`` is the student with the policy in DIR (several may be compared);
``teacher@TRAIN_TOML`` the teacher with the ``teacher.*`` settings that training config's
``dagger.system_overrides`` give it (the teacher that labels its data).

Each case is a load reference with its orientation mode; every planner flies it for the same
duration from the same start, and the metrics of ``cableload simulate`` are tabulated, with the
teacher's solve times (median, p99 of the plans after the first) and its fallbacks.

Case groups: ``catalog`` is every reference of ``cableload trajectories`` at its defaults,
``catalog-zss`` every path among them with zero-sideslip orientation; ``agile`` are
zero-sideslip references made for this comparison, unseen by the teacher's tuning and the
student's training: a square of 3 m at 1.2 m/s with 0.6 m turns, a circle of 1 m radius at
1.2 m/s, and the Zandvoort centerline scaled to 6 m at 1.2 m/s with its turn radius clipped at
0.6, 0.4 and 0.3 m; ``eights`` are the figure-eights of the paper's Table 1; ``generalist``
are the named unseen cases of the generalist student (Zandvoort, 20 m, at 1.0 m/s constant and
1.5 m/s zero-sideslip, the Table 2 eights, the Table 10 square zero-sideslip) and eight-medium.
``--heldout`` adds COUNT references drawn from the ``[references]`` distribution of a training
config with SEED (choose one that neither training nor its validation uses).

A case beyond what the system can fly (``cableload trajectories --check``) is not flown but
listed as refused, with the limit it exceeds; ``--force`` flies it anyway.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from backends import make_backend
from backends.runner import run_episode
from cableload_sim.params import load_config
from cableload_sim.physics.feasibility import check_reference
from cableload_sim.trajectories import make_reference
from planners import make_planner

CASES = {
    # the catalog at its defaults
    "eight": ("eight", "constant", {}),
    "eight-slow": ("eight-slow", "constant", {}),
    "eight-medium": ("eight-medium", "constant", {}),
    "eight-medium-plus": ("eight-medium-plus", "constant", {}),
    "eight-fast": ("eight-fast", "constant", {}),
    "circle": ("circle", "constant", {}),
    "square": ("square", "constant", {}),
    "hover": ("hover", "constant", {}),
    "pose-to-pose": ("pose-to-pose", "constant", {}),
    "zandvoort": ("track:zandvoort", "constant", {}),
    # the catalog's paths with zero sideslip
    "eight-zss": ("eight", "zero-sideslip", {}),
    "eight-slow-zss": ("eight-slow", "zero-sideslip", {}),
    "eight-medium-zss": ("eight-medium", "zero-sideslip", {}),
    "eight-medium-plus-zss": ("eight-medium-plus", "zero-sideslip", {}),
    "eight-fast-zss": ("eight-fast", "zero-sideslip", {}),
    "circle-zss": ("circle", "zero-sideslip", {}),
    "square-zss": ("square", "zero-sideslip", {}),
    "zandvoort-zss": ("track:zandvoort", "zero-sideslip", {}),
    "zandvoort-zss-1.5": ("track:zandvoort", "zero-sideslip", {"speed": 1.5}),
    # agile, zero-sideslip, unseen
    "square-zss-1.2": ("square", "zero-sideslip", {"side": 3.0, "speed": 1.2, "corner_radius": 0.6}),
    "circle-zss-1.2": ("circle", "zero-sideslip", {"radius": 1.0, "w": 1.2}),
    "zandvoort-zss-1.2-r0.6": (
        "track:zandvoort",
        "zero-sideslip",
        {"track_size": 6.0, "speed": 1.2, "min_radius": 0.6},
    ),
    "zandvoort-zss-1.2-r0.4": (
        "track:zandvoort",
        "zero-sideslip",
        {"track_size": 6.0, "speed": 1.2, "min_radius": 0.4},
    ),
    "zandvoort-zss-1.2": (
        "track:zandvoort",
        "zero-sideslip",
        {"track_size": 6.0, "speed": 1.2, "min_radius": 0.3},
    ),
    # the paper's eights
    "eight-2.0": ("eight", "constant", {"ax": 2.0, "ay": 2.0, "w": 0.5}),
    "eight-2.5": ("eight", "constant", {"ax": 2.5, "ay": 2.5, "w": 0.5}),
    "eight-3.0": ("eight", "constant", {"ax": 3.0, "ay": 3.0, "w": 0.5}),
    "eight-3.5": ("eight", "constant", {"ax": 3.5, "ay": 3.5, "w": 0.5}),
}
GROUPS = {
    "catalog": [
        "eight",
        "eight-slow",
        "eight-medium",
        "eight-medium-plus",
        "eight-fast",
        "circle",
        "square",
        "hover",
        "pose-to-pose",
        "zandvoort",
    ],
    "catalog-zss": [
        "eight-zss",
        "eight-slow-zss",
        "eight-medium-zss",
        "eight-medium-plus-zss",
        "eight-fast-zss",
        "circle-zss",
        "square-zss",
        "zandvoort-zss",
    ],
    "agile": [
        "square-zss-1.2",
        "circle-zss-1.2",
        "zandvoort-zss-1.2-r0.6",
        "zandvoort-zss-1.2-r0.4",
        "zandvoort-zss-1.2",
    ],
    "eights": ["eight-2.0", "eight-2.5", "eight-3.0", "eight-3.5"],
    "generalist": [
        "zandvoort",
        "zandvoort-zss-1.5",
        "eight-2.0",
        "eight-2.5",
        "eight-3.0",
        "eight-3.5",
        "square-zss",
        "eight-medium",
    ],
}
KEYS = (
    "rmse_position_m",
    "rmse_orientation_deg",
    "min_uav_distance_m",
    "longest_slack_s",
    "max_thrust_ratio",
    "status",
)


def solve_figures(planner) -> dict:
    """A teacher's solve times after its first (cold) plan, and its fallbacks."""
    times = np.array(getattr(planner, "solve_times", [])[1:]) * 1e3
    if not times.size:
        return {}
    report = planner.report()
    return {
        "solve_ms_median": float(np.median(times)),
        "solve_ms_p99": float(np.percentile(times, 99)),
        "fallback_plans": report.get("fallback_plans", report.get("solver_failures", 0)),
        "longest_fallback_plans": report.get("longest_fallback_plans", 0),
        "paced_plans": report.get("paced_plans", 0),
    }


def build_planner(name: str, config, config_path=None, uavs=None):
    """``name`` from the registry; ``student@DIR``: the student with the policy in DIR;
    ``teacher@TRAIN_TOML``: the teacher that labels that training config (its
    ``dagger.system_overrides`` of ``teacher.*`` applied)."""
    if name.startswith("teacher@"):
        from learners.config import load_train_config

        overrides = load_train_config(name.split("@", 1)[1]).dagger.teacher_overrides()
        return make_planner("teacher", load_config(config_path, uavs=uavs, overrides=overrides))
    if "@" in name:
        kind, policy = name.split("@", 1)
        return make_planner(kind, config, policy=policy)
    return make_planner(name, config)


def heldout_cases(text: str, config, duration: float) -> dict:
    """Cases drawn from a training config's reference distribution: ``TOML:SEED:COUNT``."""
    from learners.distribution import load_distribution

    path, seed, count = text.rsplit(":", 2)
    specs = load_distribution(path).sample(int(seed), int(count), config, duration)
    return {f"heldout-{seed}-{k}": (s.name, s.orientation, dict(s.options)) for k, s in enumerate(specs)}


def compare(planners, cases, duration, uavs=None, config_path=None, force=False, extra=None):
    config = load_config(config_path, uavs=uavs)
    built = {name: build_planner(name, config, config_path, uavs) for name in planners}
    table = {**CASES, **(extra or {})}
    rows = []
    for case in cases:
        spec, orientation, options = table[case]
        reference = make_reference(spec, orientation=orientation, **options)
        check = check_reference(reference, config, duration)
        if not check.flyable and not force:
            rows.append(
                {
                    "case": case,
                    "planner": "-",
                    "uavs": config.system.n_uavs,
                    "reference": [spec, orientation, options],
                    "status": "refused: " + "; ".join(e.message() for e in check.excesses),
                }
            )
            print(f"{case:24s} {rows[-1]['status']}", file=sys.stderr, flush=True)
            continue
        for name, planner in built.items():
            result = run_episode(make_backend("embedded", config), planner, reference, duration)
            metrics = {k: result.metrics[k] for k in KEYS}
            metrics.update(solve_figures(planner))
            rows.append(
                {
                    "case": case,
                    "planner": name,
                    "uavs": config.system.n_uavs,
                    "reference": [spec, orientation, options],
                    **metrics,
                }
            )
            print(
                f"{case:24s} {name:15s} "
                + " ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
                ),
                file=sys.stderr,
                flush=True,
            )
    return rows


def case_names(text: str) -> list[str]:
    names = []
    for part in text.split(","):
        names += GROUPS.get(part, [part])
    unknown = [name for name in names if name not in CASES]
    if unknown:
        raise SystemExit(
            f"unknown cases {unknown}; expected some of {sorted(CASES)} or a group {sorted(GROUPS)}"
        )
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--planners", default="formation,formation-tilt,teacher")
    parser.add_argument("--cases", default="catalog")
    parser.add_argument("--uavs", type=int, default=None)
    parser.add_argument("--config", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--force", action="store_true", help="fly cases beyond the limits too")
    parser.add_argument(
        "--heldout",
        default=None,
        metavar="TRAIN_TOML:SEED:COUNT",
        help="also fly COUNT references drawn from that distribution with SEED",
    )
    args = parser.parse_args(argv)
    cases = case_names(args.cases) if args.cases else []
    extra = {}
    if args.heldout:
        extra = heldout_cases(args.heldout, load_config(args.config, uavs=args.uavs), args.duration)
        cases += list(extra)
    rows = compare(args.planners.split(","), cases, args.duration, args.uavs, args.config, args.force, extra)
    print(
        "| case | planner | n | pos RMSE (m) | att RMSE (deg) | min dist (m) | longest slack (s) "
        "| max thrust | solve median/p99 (ms) | fallbacks (longest run) | status |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"].startswith("refused"):
            print(f"| {r['case']} | | {r['uavs']} | | | | | | | | {r['status']} |")
            continue
        solve = f"{r['solve_ms_median']:.1f} / {r['solve_ms_p99']:.1f}" if "solve_ms_median" in r else ""
        fallback = f"{r['fallback_plans']} ({r['longest_fallback_plans']})" if "fallback_plans" in r else ""
        print(
            f"| {r['case']} | {r['planner']} | {r['uavs']} | {r['rmse_position_m']:.4f} | "
            f"{r['rmse_orientation_deg']:.2f} | {r['min_uav_distance_m']:.3f} | "
            f"{r['longest_slack_s']:.2f} | {r['max_thrust_ratio']:.2f} | {solve} | {fallback} | "
            f"{r['status']} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
