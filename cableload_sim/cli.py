"""The ``cableload`` command line: the one place that wires simulator, planners and backends.

Heavy modules are imported inside each command, so ``cableload --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

# BLAS threads only contend with the simulator on a small machine; linear algebra here is tiny.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

SIM_KEYS = (
    "rmse_position_m",
    "rmse_orientation_deg",
    "min_uav_distance_m",
    "slack_fraction",
    "max_thrust_ratio",
    "sim_time_s",
    "wall_time_s",
    "real_time_factor",
    "status",
)


class CliError(Exception):
    """A user error: printed without a traceback, exit status 2."""


# ---------------------------------------------------------------------------------------------
# helpers


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _options(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"--option {pair!r}: expected KEY=VALUE, e.g. ax=3.0")
        key, value = pair.split("=", 1)
        out[key.strip().replace("-", "_")] = _parse_value(value.strip())
    return out


def build_reference(args):
    """The load reference named on the command line, with its options."""
    from cableload_sim.trajectories import make_reference

    options = _options(getattr(args, "option", None))
    spec = args.trajectory
    if spec.startswith("track:"):
        if args.track_size is not None:
            options["track_size"] = args.track_size
        if args.speed is not None:
            options["speed"] = args.speed
    elif args.track_size is not None:
        raise CliError(f"--track-size applies to track:... trajectories, not {spec!r}")
    elif args.speed is not None:
        options["speed"] = args.speed
    return make_reference(spec, orientation=args.orientation, **options)


def load_cli_config(args):
    from cableload_sim.params import load_config

    return load_config(args.config, uavs=args.uavs)


def _format_value(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def print_table(rows: list[tuple[str, dict]], keys) -> None:
    """Metrics side by side: one column per named result."""
    names = [name for name, _ in rows]
    width = max(len(k) for k in keys) + 2
    col = max(12, *(len(n) + 2 for n in names))
    print("".ljust(width) + "".join(n.rjust(col) for n in names))
    for key in keys:
        print(key.ljust(width) + "".join(_format_value(r.get(key, "")).rjust(col) for _, r in rows))


# ---------------------------------------------------------------------------------------------
# commands


def cmd_trajectories(args) -> int:
    from cableload_sim.trajectories import reference_catalog

    catalog = reference_catalog()
    if args.json:
        print(json.dumps(catalog, indent=2, default=str))
        return 0
    for entry in catalog:
        print(f"{entry['name']}: {entry['description']}")
        for key, value in entry.get("options", {}).items():
            print(f"    {key} = {value}")
    print("orientation modes (--orientation): constant, zero-sideslip")
    return 0


def build_planner(name: str, config, args):
    """A planner by name; ``student`` loads its policy (``--policy``, ``--runtime``)."""
    if name == "student":
        from learners.export import load_policy
        from planners.student import StudentPlanner

        policy, history, _ = load_policy(getattr(args, "policy", None),
                                         getattr(args, "runtime", "torch"))
        return StudentPlanner.from_config(config, policy, history)
    from planners import make_planner

    return make_planner(name, config)


def run_simulation(args, planner_name: str, reference=None, record_plans: bool = False,
                   log_path=None) -> dict:
    """One episode on the embedded backend; returns the metrics (and ``deriv_mae_mps`` when
    ``record_plans``)."""
    from backends import make_backend
    from backends.base import Scenario
    from backends.runner import run_episode
    from cableload_sim.disturbances import WrenchDisturbance

    config = load_cli_config(args)
    reference = build_reference(args) if reference is None else reference
    backend = make_backend("embedded", config)
    planner = build_planner(planner_name, config, args)
    p0, q0 = reference.start_pose()
    disturbance = None
    if args.disturbance is not None:
        force, torque = args.disturbance
        disturbance = WrenchDisturbance(max_force=force, max_torque=torque)
    scenario = Scenario(load_p=p0, load_q=q0, seed=args.seed, disturbance=disturbance)
    def episode(logger=None):
        return run_episode(
            backend, planner, reference, args.duration, scenario,
            collision_distance=config.simulation.collision_distance_m,
            divergence_distance=config.simulation.divergence_distance_m,
            progress=not args.json and sys.stderr.isatty(), record_plans=record_plans,
            logger=logger,
        )

    if log_path is None:
        result = episode()
    else:
        from cableload_sim.runlog import RunLogWriter

        with RunLogWriter(log_path, config, overwrite=getattr(args, "overwrite", False)) as log:
            result = episode(log)
    metrics = dict(result.metrics)
    if record_plans:
        from cableload_sim.metrics import plan_derivative_mae

        maes = [plan_derivative_mae(tr.t, tr.p, tr.v) for rec in result.plans
                for tr in rec.trajectories]
        metrics["deriv_mae_mps"] = float(sum(maes) / len(maes)) if maes else float("nan")
    metrics["planner"] = planner_name
    metrics["trajectory"] = reference.name
    if result.message:
        metrics["message"] = result.message
    return metrics


def _log_paths(log: str | None, names: list[str]) -> list:
    """One bag per planner: the path itself for one, ``stem-planner.bag`` for several."""
    if log is None:
        return [None] * len(names)
    if len(names) == 1:
        return [log]
    from pathlib import Path

    path = Path(log)
    return [str(path.with_name(f"{path.stem}-{name}{path.suffix or '.bag'}")) for name in names]


def cmd_simulate(args) -> int:
    """One planner, or several side by side (``--planner formation,teacher``)."""
    names = [name.strip() for name in args.planner.split(",") if name.strip()]
    logs = _log_paths(args.log, names)
    results = [run_simulation(args, name, log_path=log) for name, log in zip(names, logs)]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, default=float))
    else:
        keys = list(SIM_KEYS)
        for metrics in results:
            keys += [k for k in metrics if k not in keys and k not in
                     ("planner", "trajectory", "message")]
        print(f"{results[0]['trajectory']} ({args.orientation}), {args.duration:g} s")
        print_table([(m["planner"], m) for m in results], keys)
        for metrics in results:
            if "message" in metrics:
                print(f"note ({metrics['planner']}): {metrics['message']}")
        for name, log in zip(names, logs):
            if log is not None:
                print(f"run log ({name}): {log}")
    return 0 if all(m["status"] == "completed" for m in results) else 1


def cmd_replay(args) -> int:
    from cableload_sim.replay import replay

    try:
        written = replay(args.bag, video=args.video, screenshot=args.screenshot, time=args.time,
                         start=args.start, end=args.end, speed=args.speed,
                         window_size=tuple(args.window_size), fps=args.fps)
    except RuntimeError as err:
        raise CliError(str(err)) from err
    for path in written or []:
        print(path)
    return 0


def cmd_plot(args) -> int:
    from cableload_sim.plots import plot_run

    for path in plot_run(args.bag, args.out):
        print(path)
    return 0


def cmd_metrics(args) -> int:
    from cableload_sim.runlog import metrics_from_bag

    metrics = metrics_from_bag(args.bag)
    if args.json:
        print(json.dumps(metrics, default=float))
    else:
        for key, value in metrics.items():
            print(f"{key:24s} {_format_value(value)}")
    return 0


def cmd_evaluate(args) -> int:
    """Teacher and student side by side on each named trajectory."""
    rows = []
    for name in [n.strip() for n in args.trajectories.split(",") if n.strip()]:
        args.trajectory = name
        reference = build_reference(args)
        row = {"name": reference.name}
        for planner in ("teacher", "student"):
            row[planner] = run_simulation(args, planner, reference=reference, record_plans=True)
        rows.append(row)
    if args.json:
        print(json.dumps({"trajectories": rows}, default=float))
    else:
        keys = list(SIM_KEYS) + ["deriv_mae_mps"]
        for row in rows:
            print(f"{row['name']} ({args.orientation}), {args.duration:g} s")
            print_table([("teacher", row["teacher"]), ("student", row["student"])], keys)
            t, st = row["teacher"], row["student"]
            print(f"student/teacher: position {st['rmse_position_m'] / t['rmse_position_m']:.2f}x,"
                  f" orientation {st['rmse_orientation_deg'] / t['rmse_orientation_deg']:.2f}x\n")
    return 0


def cmd_train(args) -> int:
    from learners.config import load_train_config
    from learners.dagger import train
    from learners.export import SHIPPED_POLICY

    path = args.config or str(SHIPPED_POLICY.parent.parent / "configs" /
                              "paper-eight-medium.toml")
    config = load_train_config(path)
    summary = train(config, args.out, resume=args.resume, executor=args.executor,
                    address=args.address, progress=not args.json)
    if args.json:
        print(json.dumps(summary, default=float))
    else:
        last = summary["rounds"][-1] if summary["rounds"] else {}
        print(f"trained {len(summary['rounds'])} rounds into {args.out}; last loss "
              f"{last.get('loss', float('nan')):.4g}, evaluation RMSE "
              f"{last.get('eval_rmse_position_m', float('nan')):.4g} m; policy in "
              f"{args.out}/policy, summary plot {args.out}/training_summary.png")
    return 0


def _uav_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",")]
    except ValueError as err:
        raise CliError(f"--uavs: expected numbers like 3,4,5,6, got {text!r}") from err
    if any(v < 2 for v in values):
        raise CliError(f"--uavs: expected numbers of quadrotors >= 2, got {text!r}")
    return values


def bench_teacher(uavs: list[int], duration: float, trajectory: str, config_path=None) -> dict:
    """Per number of quadrotors: time of a full teacher plan (solve and post-processing), in
    closed loop on the embedded simulator, warm-started as in flight."""
    import time

    import numpy as np

    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.params import load_config
    from cableload_sim.trajectories import make_reference
    from planners.teacher import TeacherPlanner

    out = {}
    for n in uavs:
        config = load_config(config_path, uavs=n)
        t0 = time.perf_counter()
        planner = TeacherPlanner.from_config(config)
        build = time.perf_counter() - t0
        result = run_episode(make_backend("embedded", config), planner,
                             make_reference(trajectory), duration)
        times = np.array(planner.solve_times[1:]) * 1e3  # the cold first plan apart
        out[str(n)] = {
            "solve_ms_median": float(np.median(times)),
            "solve_ms_p99": float(np.percentile(times, 99)),
            "first_plan_ms": planner.solve_times[0] * 1e3,
            "solver_failures": planner.failures,
            "plans": len(planner.solve_times),
            "build_s": build,
            "status": result.status.value,
            "rmse_position_m": result.metrics["rmse_position_m"],
        }
    return out


def cmd_bench(args) -> int:
    if args.what == "sim":
        from cableload_sim.bench import bench_sim

        uavs = _uav_list(args.uavs)[0] if args.uavs is not None else None
        figures = bench_sim(
            steps=args.steps, batch=args.batch, physics_dt=args.physics_dt, uavs=uavs,
            config_path=args.config,
        )
    elif args.what == "teacher":
        uavs = _uav_list(args.uavs if args.uavs is not None else "3,4,5,6")
        figures = bench_teacher(uavs, args.duration, args.trajectory, args.config)
    else:
        raise CliError(f"unknown benchmark {args.what!r}; expected: sim, teacher")
    if args.json:
        print(json.dumps(figures))
    elif args.what == "teacher":
        keys = list(next(iter(figures.values())))
        print_table([(f"n={n}", row) for n, row in figures.items()], keys)
    else:
        for key, value in figures.items():
            print(f"{key:28s} {_format_value(value)}")
    return 0


# ---------------------------------------------------------------------------------------------
# parser


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="TOML configuration (default: the paper's)")
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random process")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_reference(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trajectory", default="eight-slow",
                   help="reference name (see `cableload trajectories`), or track:PATH, "
                        "track:zandvoort")
    p.add_argument("--orientation", default="constant", choices=["constant", "zero-sideslip"])
    p.add_argument("--track-size", type=float, default=None, help="track:... larger side (m)")
    p.add_argument("--speed", type=float, default=None, help="track/square speed (m/s)")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                   help="reference option, e.g. -o ax=3 -o ay=3 -o w=0.5")


def _add_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default=None,
                   help="student policy directory (default: the shipped one)")
    p.add_argument("--runtime", choices=["torch", "onnx"], default="torch",
                   help="student inference runtime")


def _add_log(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", default=None, metavar="RUN.bag",
                   help="write a ROS1 bag of the run (one per planner with several)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --log file")


def _disturbance(text: str):
    try:
        force, torque = (float(v) for v in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected FORCE,TORQUE (N, N m), e.g. 2.0,0.2; got {text!r}") from err
    return force, torque


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cableload",
        description="Simulate, plan and learn cooperative transport of a cable-suspended load.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trajectories", help="list the load reference trajectories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trajectories)

    p = sub.add_parser("simulate", help="fly one planner on the embedded simulator")
    p.add_argument("--planner", default="formation",
                   help="formation, formation-tilt, teacher or student; several, "
                        "comma-separated, side by side")
    _add_policy(p)
    _add_log(p)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of simulated flight")
    p.add_argument("--disturbance", type=_disturbance, default=None, metavar="FORCE,TORQUE",
                   help="random wrench on the load: largest force (N) and torque (N m)")
    _add_reference(p)
    _add_common(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("evaluate", help="teacher and student side by side on trajectories")
    p.add_argument("--trajectories", default="eight-medium",
                   help="comma-separated names, e.g. eight-medium,eight-slow,track:zandvoort")
    p.add_argument("--duration", type=float, default=60.0, help="seconds per trajectory")
    p.add_argument("--disturbance", type=_disturbance, default=None, metavar="FORCE,TORQUE")
    _add_reference(p)
    _add_policy(p)
    _add_common(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("train", help="train the student by DAgger")
    p.add_argument("--config", default=None,
                   help="training TOML (default: learners/configs/paper-eight-medium.toml)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("replay", help="replay a run log with pyvista")
    p.add_argument("bag")
    p.add_argument("--video", default=None, metavar="OUT.mp4", help="write a video off-screen")
    p.add_argument("--screenshot", default=None, metavar="OUT.png", help="one frame off-screen")
    p.add_argument("--time", type=float, default=None, help="screenshot time (s)")
    p.add_argument("--start", type=float, default=None, help="replay from (s)")
    p.add_argument("--end", type=float, default=None, help="replay until (s)")
    p.add_argument("--speed", type=float, default=1.0, help="replay speed factor")
    p.add_argument("--fps", type=float, default=25.0, help="video frames per second")
    p.add_argument("--window-size", type=int, nargs=2, default=[1280, 720], metavar=("W", "H"))
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("plot", help="PNG plots of a run log")
    p.add_argument("bag")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("metrics", help="metrics of a run log")
    p.add_argument("bag")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("bench", help="measure speed")
    p.add_argument("what", choices=["sim", "teacher"],
                   help="sim: physics + onboard controllers; teacher: time per NMPC plan")
    p.add_argument("--steps", type=int, default=200_000, help="sim: physics steps")
    p.add_argument("--batch", type=int, default=64, help="sim: systems stepped in parallel")
    p.add_argument("--physics-dt", type=float, default=None, help="sim: physics step (s)")
    p.add_argument("--duration", type=float, default=20.0, help="teacher: closed-loop seconds")
    p.add_argument("--trajectory", default="eight-medium", help="teacher: load reference")
    p.add_argument("--config", default=None, help="TOML configuration (default: the paper's)")
    p.add_argument("--uavs", default=None, help="number(s) of quadrotors, e.g. 3,4,5,6")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from cableload_sim.errors import CableloadError

    try:
        return args.func(args)
    except CliError as err:
        print(f"cableload: error: {err}", file=sys.stderr)
        return 2
    except CableloadError as err:
        print(f"cableload: error: {err}", file=sys.stderr)
        return err.exit_status
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        # configuration, option and file errors carry their own message
        print(f"cableload: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
