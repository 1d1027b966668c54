"""The ``cableload`` command line: the one place that wires simulator, planners and backends.

Heavy modules are imported inside each command, so ``cableload --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import warnings
from collections.abc import Sequence

from cableload_sim.errors import CableloadError, UsageError

# BLAS threads only contend with the simulator on a small machine; linear algebra here is tiny.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

NOT_TABULATED = ("planner", "trajectory", "message", "safety_events")
"""Result keys printed below the table instead of in it."""


def describe_safety_event(event: dict) -> str:
    """One line for a safety intervention (``hw.safety.Intervention.as_dict``)."""
    who = "every quadrotor" if event["uav"] is None else f"quadrotor {event['uav']}"
    return f"t={event['t']:.2f} s {event['rule']} -> {event['action']} ({who}): {event['reason']}"


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


class CliError(UsageError):
    """A user error on the command line: printed without a traceback, exit status 2."""


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
    reference = make_reference(spec, orientation=args.orientation, **options)
    if getattr(args, "from_ground", False):
        from cableload_sim.trajectories.lift import from_ground

        reference = from_ground(reference)
    return reference


def load_cli_config(args):
    from cableload_sim.params import load_config

    return load_config(args.config, uavs=args.uavs, overrides=getattr(args, "set", None) or ())


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="replace one value of the --config file before it is checked, in TOML "
        "syntax; repeatable, e.g. --set link.enabled=true --set "
        "load.size=[0.5,0.4,0.1]",
    )


def json_safe(value):
    """``value`` with every non-finite float as None: NaN and Infinity are not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return json_safe(value.item())
    return value


def print_json(value) -> None:
    """One JSON document on stdout; NaN and infinities as null."""
    print(json.dumps(json_safe(value), allow_nan=False, default=str))


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


def _warn(text: str) -> None:
    print(f"cableload: warning: {text}", file=sys.stderr)


def require_flyable(args, config, reference, duration: float) -> None:
    """Refuse a reference beyond what the system can fly, or warn with ``--force``."""
    from cableload_sim.physics.feasibility import require_flyable as check

    check(reference, config, duration, force=args.force, warn=_warn)


def cmd_check_reference(args) -> int:
    """``trajectories --check NAME``: what a reference asks of the system, against its limits;
    exit status 1 when it is beyond them."""
    from cableload_sim.physics.feasibility import check_reference

    args.trajectory = args.check
    config = load_cli_config(args)
    check = check_reference(build_reference(args), config, args.duration)
    if args.json:
        print_json(check.as_dict())
        return 0 if check.flyable else 1
    report = check.as_dict()
    print(f"{report['reference']} over {report['duration_s']:g} s, {config.system.n_uavs} quadrotors:")
    limits = {
        "thrust": f"<= {check.limits['thrust_N']:.3g} N "
        f"(teacher.thrust_margin {check.limits['thrust_margin']:g})",
        "tilt": f"<= {check.limits['tilt_deg']:g} deg (controller.max_tilt_deg)",
        "tension_max": f"<= {check.limits['tension_max_N']:g} N (teacher.tension_max)",
        "tension_min": f">= {check.limits['tension_min_N']:g} N (teacher.tension_min)",
    }
    for name, peak in report["peaks"].items():
        value = f"{peak['value']:.3g} {peak['unit']}"
        where = f"t = {peak['t']:.2f} s" + (f", quadrotor {peak['uav']}" if peak["uav"] is not None else "")
        print(f"  {name:13s} {value:>12s}  at {where:26s} {limits.get(name, '')}")
    print(check.message())
    return 0 if check.flyable else 1


def cmd_sample_references(args) -> int:
    """``trajectories --sample CONFIG --out DIR``: draw references from a distribution."""
    from learners.distribution import load_distribution, preview

    if args.out is None:
        raise CliError("--sample: expected --out DIR for the preview")
    if args.count < 1:
        raise CliError(f"--count: expected at least 1, got {args.count}")
    duration = 20.0 if args.duration is None else args.duration
    distribution = load_distribution(args.sample)
    specs = distribution.sample(args.seed, args.count, load_cli_config(args), duration)
    paths = preview(specs, duration, args.out)
    system = [
        *(["--config", args.config] if args.config else []),
        *(["--uavs", str(args.uavs)] if args.uavs else []),
        *(item for text in (args.set or []) for item in ("--set", text)),
    ]
    commands = [simulate_argv(spec, duration, system) for spec in specs]
    if args.json:
        print_json([{**spec.as_dict(), "command": shlex.join(argv)} for spec, argv in zip(specs, commands)])
        return 0
    for path in paths:
        print(path)
    for k, argv in enumerate(commands):
        print(f"{k}: {shlex.join(argv)}")
    return 0


def simulate_argv(spec, duration: float, system: Sequence[str] = ()) -> list[str]:
    """The ``cableload simulate`` command line that flies reference ``spec`` (a
    ``learners.distribution.ReferenceSpec``) for ``duration`` seconds on the system ``system``
    names (``--config``, ``--uavs``, ``--set`` as given to the draw)."""
    argv = ["cableload", "simulate", "--trajectory", spec.name, "--orientation", spec.orientation]
    for key, value in spec.options.items():
        argv += ["-o", f"{key}={json.dumps(value)}"]
    return [*argv, *system, "--duration", f"{duration:g}"]


def cmd_trajectories(args) -> int:
    from cableload_sim.trajectories import reference_catalog

    if args.check is not None:
        return cmd_check_reference(args)
    if args.sample is not None:
        return cmd_sample_references(args)
    catalog = reference_catalog()
    if args.json:
        print(json.dumps(json_safe(catalog), indent=2, default=str, allow_nan=False))
        return 0
    for entry in catalog:
        print(f"{entry['name']}: {entry['description']}")
        for key, value in entry.get("options", {}).items():
            print(f"    {key} = {value}")
    print(f"orientation modes (--orientation): {', '.join(ORIENTATIONS)}")
    return 0


def _planner_options(name: str, args, references=(), n_uavs: int = 3) -> dict:
    """The student's policy options from the command line (``student-prior`` flies the same
    policy's prior); the other planners take none.
    Without ``--policy``: the shipped policy for what is flown (``learners.export
    .default_policy``: the specialist on eight-medium, else the generalist for ``n_uavs``)."""
    if name == "nodes":
        return {"first_plan_wait_s": args.node_wait}
    if name not in ("student", "student-prior"):
        return {}
    policy = getattr(args, "policy", None)
    if policy is None:
        from learners.export import default_policy

        chosen = {default_policy(r, n_uavs) for r in references} or {default_policy(None, n_uavs)}
        policy = chosen.pop() if len(chosen) == 1 else default_policy(None, n_uavs)
    return {"policy": policy, "runtime": getattr(args, "runtime", "auto")}


def _flight(args, config, reference):
    """What ``simulate`` and ``evaluate`` fly, from their options."""
    from backends.session import Flight
    from cableload_sim.physics.disturbances import WrenchDisturbance

    disturbance = None
    if args.disturbance is not None:
        force, torque = args.disturbance
        disturbance = WrenchDisturbance(max_force=force, max_torque=torque)
    backend = getattr(args, "backend", "embedded")
    options = (
        {"pilot_queue": args.pilot_queue, "pilot_times": args.pilot_times} if backend == "gazebo" else {}
    )
    safety = None
    if not getattr(args, "no_safety", False):
        from hw.safety import SafetyLimits

        safety = SafetyLimits(min_distance_m=config.simulation.collision_distance_m)
    return Flight(
        config,
        reference,
        args.duration,
        seed=args.seed,
        disturbance=disturbance,
        backend=backend,
        backend_options=options,
        progress=not args.json and sys.stderr.isatty(),
        safety=safety,
    )


def cmd_simulate(args) -> int:
    """One planner, or several side by side (``--planner formation,teacher``). Every planner
    is built, and every run-log path and the disk space checked, before the first flight."""
    from backends import session

    names = session.planner_names(args.planner, getattr(args, "backend", "embedded"))
    config, reference = load_cli_config(args), build_reference(args)
    require_flyable(args, config, reference, args.duration)
    flight = _flight(args, config, reference)
    logs = session.log_paths(args.log, names)
    session.check_outputs(flight, logs, args.overwrite)
    planners = {
        name: session.build_planner(
            flight, name, _planner_options(name, args, [reference], config.system.n_uavs)
        )
        for name in names
        if name != session.NODES
    }
    results = [
        session.fly(
            flight,
            planners.get(name, name),
            log_path=log,
            overwrite=args.overwrite,
            planner_options=(_planner_options(name, args) if name == session.NODES else None),
        )
        for name, log in zip(names, logs)
    ]
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
    else:
        keys = list(SIM_KEYS)
        for metrics in results:
            keys += [k for k in metrics if k not in keys and k not in NOT_TABULATED]
        print(f"{results[0]['trajectory']} ({args.orientation}), {args.duration:g} s")
        print_table([(m["planner"], m) for m in results], keys)
        for metrics in results:
            if "message" in metrics:
                print(f"note ({metrics['planner']}): {metrics['message']}")
            for event in metrics.get("safety_events", []):
                print(f"safety ({metrics['planner']}): {describe_safety_event(event)}")
        for name, log in zip(names, logs):
            if log is not None:
                print(f"run log ({name}): {log}")
    return 0 if all(m["status"] == "completed" for m in results) else 1


def cmd_replay(args) -> int:
    from cableload_sim.viz.replay import replay

    written = replay(
        args.bag,
        video=args.video,
        screenshot=args.screenshot,
        time=args.time,
        start=args.start,
        end=args.end,
        speed=args.speed,
        window_size=tuple(args.window_size),
        fps=args.fps,
    )
    for path in written or []:
        print(path)
    return 0


def cmd_plot(args) -> int:
    from cableload_sim.viz.plots import plot_run

    for path in plot_run(args.bag, args.out):
        print(path)
    return 0


def cmd_metrics(args) -> int:
    from cableload_sim.io.runlog import metrics_from_bag

    system = None
    if args.config is not None or args.uavs is not None or args.set:
        system = load_cli_config(args).system
    metrics = metrics_from_bag(args.bag, system)
    if args.json:
        print_json(metrics)
    else:
        for key, value in metrics.items():
            print(f"{key:24s} {_format_value(value)}")
    return 0


def cmd_evaluate(args) -> int:
    """Teacher and student side by side on each named trajectory."""
    from backends import session

    config = load_cli_config(args)
    names = [name.strip() for name in args.trajectories.split(",")]
    if not all(names):
        raise UsageError(
            f"--trajectories: expected names separated by commas, e.g. "
            f"eight-medium,eight-slow; got {args.trajectories!r}"
        )
    references = []
    for name in names:
        args.trajectory = name
        references.append(build_reference(args))
        require_flyable(args, config, references[-1], args.duration)
    flights = [_flight(args, config, reference) for reference in references]
    planners = {
        name: session.build_planner(
            flights[0], name, _planner_options(name, args, references, config.system.n_uavs)
        )
        for name in ("teacher", "student")
    }
    rows = []
    for flight in flights:
        row = {"name": flight.reference.name}
        for name, planner in planners.items():
            row[name] = session.fly(flight, planner, derivative_mae=True)
        rows.append(row)
    if args.json:
        print_json({"trajectories": rows})
    else:
        keys = list(SIM_KEYS) + ["deriv_mae_mps"]
        for row in rows:
            print(f"{row['name']} ({args.orientation}), {args.duration:g} s")
            print_table([("teacher", row["teacher"]), ("student", row["student"])], keys)
            t, st = row["teacher"], row["student"]
            print(
                f"student/teacher: position {st['rmse_position_m'] / t['rmse_position_m']:.2f}x,"
                f" orientation {st['rmse_orientation_deg'] / t['rmse_orientation_deg']:.2f}x\n"
            )
    return 0


def cmd_train(args) -> int:
    from learners.config import load_train_config
    from learners.dagger import train
    from learners.export import SHIPPED_POLICY

    path = args.config or str(SHIPPED_POLICY.parent.parent / "configs" / "paper-eight-medium.toml")
    config = load_train_config(path)
    if args.set:
        config = _train_config_with(path, config, args.set)
    summary = train(
        config,
        args.out,
        resume=args.resume,
        executor=args.executor,
        address=args.address,
        progress=not args.json,
        force=args.force,
        warn=_warn,
    )
    if args.json:
        print_json(summary)
    else:
        last = summary["rounds"][-1] if summary["rounds"] else {}
        print(
            f"trained {len(summary['rounds'])} rounds into {args.out}; last loss "
            f"{last.get('loss', float('nan')):.4g}, evaluation RMSE "
            f"{last.get('eval_rmse_position_m', float('nan')):.4g} m; policy in "
            f"{args.out}/policy, summary plot {args.out}/training_summary.png"
        )
    return 0


def _train_config_with(path, config, overrides):
    """The training configuration of ``path`` with ``overrides`` (``--set``), checked as the
    file is; a relative ``system_config`` set here is relative to the working folder."""
    import dataclasses
    from pathlib import Path

    from cableload_sim.params import build_with_overrides, read_toml
    from learners.config import train_config_from_dict

    data = read_toml(Path(path), "training config")
    changed = build_with_overrides(data, overrides, lambda d: train_config_from_dict(d, str(path)))
    if changed.system_config == data.get("system_config", "paper"):
        return dataclasses.replace(changed, system_config=config.system_config)
    return changed


CONFIG_HELP = (
    "TOML configuration: a file, or a shipped one by name (paper: the paper's setup, the default; "
    "paper-conditions: that setup with motion capture, onboard estimators, Wi-Fi plans and the "
    "rotor headroom of the paper's simulations)"
)

HARDWARE_OVERRIDES = ("ground.enabled=true", "battery.enabled=true", "link.enabled=true")
"""What ``world --hardware`` always simulates: the floor, the batteries, the Wi-Fi."""


def _hardware_world(args):
    """The config, quadrotor names and ``HardwareOptions`` of ``world --hardware``."""
    from backends.world_node import HardwareOptions
    from cableload_sim import checks
    from hw.flight import EXAMPLE, read_flight

    flight = read_flight(args.flight or EXAMPLE)
    loss = checks.fraction(high_open=True).raising(CliError)("--wifi-loss", args.wifi_loss)
    low, high = args.wifi_delay
    if not 0.0 <= low <= high < 0.5:
        raise CliError(f"--wifi-delay: expected 0 <= MIN <= MAX < 0.5 s, got {low!r},{high!r}")
    overrides = [
        *HARDWARE_OVERRIDES,
        f"link.drop_fraction={loss!r}",
        f"link.delay_min_s={low!r}",
        f"link.delay_max_s={high!r}",
        *(getattr(args, "set", None) or ()),
    ]
    config = flight.load_config(overrides)
    hardware = HardwareOptions(
        bodies=tuple(q.body for q in flight.quads),
        load_body=flight.load.body,
        mocap_topic=flight.mocap_topic,
        load_start=flight.load.start,
        mocap_drop_fraction=args.mocap_drop,
        takeoff_height_m=flight.takeoff_height_m,
    )
    return config, flight.names, hardware, (flight.pilot_queue, flight.pilot_times)


def cmd_world(args) -> int:
    from backends.world_node import WorldNode, WorldOptions

    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise CliError(f"--duration: expected a positive number of seconds, got {args.duration!r}")
    hardware = names = None
    if args.hardware:
        config, names, hardware, (args.pilot_queue, args.pilot_times) = _hardware_world(args)
    elif args.flight is not None:
        raise CliError("--flight: a flight file is served with --hardware")
    if args.hardware and args.takeoff_height is not None:
        raise CliError("--takeoff-height: with --hardware the flight file's takeoff_height_m counts")
    else:
        config = load_cli_config(args)
    options = WorldOptions(
        real_time_factor=args.real_time_factor,
        state_rate_hz=args.state_rate,
        mocap_rate_hz=args.mocap_rate,
        pilot_queue=args.pilot_queue,
        pilot_times=args.pilot_times,
        start_paused=args.paused,
        seed=args.seed,
        lockstep=args.lockstep,
        **({} if args.takeoff_height is None else {"takeoff_height_m": args.takeoff_height}),
    )
    world = WorldNode(config, options, quad_names=names, hardware=hardware)
    from backends.gazebo import master_reachable, master_uri

    if not master_reachable(timeout=1.0):
        raise CliError(f"no ROS master at {master_uri()} (ROS_MASTER_URI); start `roscore`")
    world.connect()
    onboard = f", onboard IMU and estimate (seed {options.seed})" if world.config.imu.enabled else ""
    mode = (
        f", hardware mode (wall clock, on the ground, motion capture on {hardware.mocap_topic})"
        if hardware is not None
        else f", real-time factor {options.real_time_factor:g}"
    )
    print(
        f"cableload world: {world.n} quadrotors ({', '.join(world.names)}){mode}"
        f"{', lockstep' if options.lockstep else ''}, pilot queue {world.options.pilot_queue}, "
        f"trajectory times {world.options.pilot_times}{onboard}",
        file=sys.stderr,
    )

    # SIGINT or SIGTERM ends the loop at its next step: a KeyboardInterrupt raised inside rospy's
    # publish, between taking and releasing its lock, would end the world on a RuntimeError
    # instead, before its summary. A second SIGINT interrupts at once.
    def stop(signum, frame):
        world.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        world.run(duration_s=args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for message in [*world.messages, world.summary()]:
        print(f"cableload world: {message}", file=sys.stderr)
    if world.ended_by is not None:
        print(f"cableload world: error: {world.ended_by}", file=sys.stderr)
        return 1
    return 0


def _require_master() -> None:
    from backends.gazebo import master_reachable, master_uri

    if not master_reachable(timeout=1.0):
        raise CliError(f"no ROS master at {master_uri()} (ROS_MASTER_URI); start `roscore`")


def _preflight_table(results) -> None:
    for check in results:
        verdict = "pass" if check.passed else "FAIL"
        value = "-" if check.value is None else _format_value(check.value)
        print(f"{verdict:4}  {check.quad:8} {check.check:34} {value:>10}  ({check.expected})")


def cmd_preflight(args) -> int:
    """Every check of ``hw.preflight``; exit 1 naming each failure."""
    from hw.flight import read_flight
    from hw.preflight import preflight

    flight = read_flight(args.flight)
    _require_master()
    results = preflight(flight)
    failed = [c for c in results if not c.passed]
    if args.json:
        print_json({"passed": not failed, "checks": [c.as_dict() for c in results]})
    else:
        _preflight_table(results)
    for check in failed:
        print(
            f"preflight: {check.quad}: {check.check} is {check.value} (expected {check.expected})",
            file=sys.stderr,
        )
    return 1 if failed else 0


def cmd_fly(args) -> int:
    """Preflight, the operator's station, the hardware backend, the safety module and a run
    log: a flight from the ground (``hw.fly``)."""
    import numpy as np

    from hw.flight import read_flight
    from hw.fly import fly
    from hw.operator import input_source
    from hw.preflight import preflight

    flight = read_flight(args.flight)
    if args.nodes and args.planner != "student":
        raise CliError("--nodes: the students run as nodes; use it with --planner student")
    config = flight.load_config(getattr(args, "set", None) or ())
    args.from_ground = True
    reference = build_reference(args)
    start = reference.start_pose()[0]
    off = float(np.linalg.norm(start[:2] - np.asarray(flight.load.start[:2])))
    if off > flight.preflight.load_tolerance_m:
        raise CliError(
            f"--trajectory {args.trajectory}: the load is lifted at {np.round(start[:2], 3).tolist()} m "
            f"but rests at {list(flight.load.start[:2])} m in {args.flight} ({off:.2f} m apart); "
            "move the load or choose a trajectory that starts above it"
        )
    require_flyable(args, config, reference, args.duration)
    if args.log is not None:
        from cableload_sim.io.runlog import check_output_path

        check_output_path(args.log, args.overwrite)
    _require_master()
    if not args.skip_preflight:
        failed = [c for c in preflight(flight, config) if not c.passed]
        if failed:
            for check in failed:
                print(
                    f"preflight: {check.quad}: {check.check} is {check.value} (expected {check.expected})",
                    file=sys.stderr,
                )
            raise CliError(f"preflight failed ({len(failed)} checks): nothing was flown")
    source = input_source(args.operator)
    result = fly(
        flight,
        args.planner,
        reference,
        args.duration,
        source,
        config=config,
        planner_options=_planner_options(args.planner, args, [reference], config.system.n_uavs),
        log_path=args.log,
        overwrite=args.overwrite,
        nodes=args.nodes,
        node_wait_s=args.node_wait,
    )
    if args.json:
        print_json(result)
    else:
        keys = [
            k
            for k in (
                "status",
                "rmse_position_m",
                "rmse_orientation_deg",
                "min_uav_distance_m",
                "plans_rejected",
                "off_delay_s",
            )
            if k in result
        ]
        print_table([(args.planner, result)], keys)
        for event in result["safety_events"]:
            print(f"safety: {describe_safety_event(event)}")
        if "message" in result:
            print(f"note: {result['message']}")
    return 0 if result["status"] == "completed" else 1


def cmd_node(args) -> int:
    import time

    from backends import ros1
    from backends.planner_node import run_node

    config = load_cli_config(args)
    if args.planner == "student" and args.uav is None:
        raise CliError("--planner student runs one quadrotor per node: give --uav I")
    from planners import make_planner

    planner = make_planner(
        args.planner, config, **_planner_options(args.planner, args, n_uavs=config.system.n_uavs)
    )

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    # SIGTERM (roslaunch, kill) interrupts the set-up as Ctrl-C does; once the node plans,
    # either ends its loop and the node reports
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt),
        signal.SIGINT: signal.getsignal(signal.SIGINT),
    }
    try:
        node = run_node(
            config,
            planner,
            uav=args.uav,
            pilot_queue=args.pilot_queue,
            pilot_times=args.pilot_times,
            relay=args.relay,
        )
    except BaseException:
        signal.signal(signal.SIGTERM, previous[signal.SIGTERM])
        raise
    stopped = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stopped.append(signum))
    rospy = ros1.rospy()
    whom = "every quadrotor" if args.uav is None else node.names[args.uav]
    how = "for the flight station (`cableload fly --nodes`)" if args.relay else "on the world's clock"
    print(
        f"cableload node: {args.planner} planning for {whom} {how}",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not rospy.is_shutdown() and not stopped:
            time.sleep(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        node.close()
        print(f"cableload node: {node.summary()}", file=sys.stderr, flush=True)
        rospy.signal_shutdown("cableload node stopped")
    return 0


def _uav_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",")]
    except ValueError as err:
        raise CliError(f"--uavs: expected numbers like 3,4,5,6, got {text!r}") from err
    if any(v < 2 for v in values):
        raise CliError(f"--uavs: expected numbers of quadrotors >= 2, got {text!r}")
    return values


def cmd_reproduce(args) -> int:
    """The paper's tables beside ours (``cableload_sim.reproduce``)."""
    from cableload_sim.reproduce.runner import reproduce

    index = reproduce(
        args.tables or None,
        out=args.out,
        quick=args.quick,
        conditions=args.conditions,
        progress=not args.json,
    )
    if args.json:
        print_json({"index": str(index)})
    else:
        print(f"reproduction written to {index.parent} (index: {index})")
    return 0


def cmd_bench(args) -> int:
    if args.what == "sim":
        if args.set:
            raise CliError("--set: `bench sim` reads --config only; give it a TOML file")
        from cableload_sim.cli.bench import bench_sim

        uavs = _uav_list(args.uavs)[0] if args.uavs is not None else None
        figures = bench_sim(
            steps=args.steps,
            batch=args.batch,
            physics_dt=args.physics_dt,
            uavs=uavs,
            config_path=args.config,
        )
    elif args.what == "teacher":
        from backends.session import bench_teacher

        counts = _uav_list(args.uavs if args.uavs is not None else "3,4,5,6")
        figures = bench_teacher(counts, args.duration, args.trajectory, args.config, args.set)
    else:
        raise CliError(f"unknown benchmark {args.what!r}; expected: sim, teacher")
    if args.json:
        print_json(figures)
    elif args.what == "teacher":
        keys = list(next(iter(figures.values())))
        print_table([(f"n={n}", row) for n, row in figures.items()], keys)
    else:
        for key, value in figures.items():
            print(f"{key:28s} {_format_value(value)}")
    return 0


def cmd_launch(args) -> int:
    """``roslaunch`` of a launch file whose episode prints its JSON result; exits with the
    episode's status (roslaunch itself exits 0 whatever the episode did)."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("roslaunch") is None:
        raise CliError("cableload launch needs roslaunch: sudo apt-get install ros-core python3-roslaunch")
    ros = Path(__file__).resolve().parents[2] / "ros"
    launch = Path(args.file) if args.file else ros / "cableload/launch/multilift.launch"
    if not launch.is_file():
        raise CliError(f"--file {str(launch)!r}: no such launch file")
    env = dict(os.environ)
    env["ROS_PACKAGE_PATH"] = os.pathsep.join(
        filter(None, [str(ros), os.environ.get("ROS_PACKAGE_PATH", "")])
    )
    env.setdefault("CABLELOAD_PYTHON", sys.executable)
    proc = subprocess.Popen(
        ["roslaunch", str(launch), *args.launch_args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None  # stdout=PIPE
    result = None
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            if line.startswith("{"):
                try:
                    result = json.loads(line)
                except ValueError:
                    pass
        proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait()
        raise
    if not isinstance(result, dict) or "status" not in result:
        print(
            "cableload: error: the launch ended without an episode result (see its log above)",
            file=sys.stderr,
        )
        return 1
    return 0 if result["status"] == "completed" else 1


def cmd_ros_messages(args) -> int:
    """The project's message packages for the ROS tools (``rostopic echo`` of agiros topics)."""
    from backends.ros_messages import package_path_line, write_message_packages

    for folder in write_message_packages(args.out):
        print(f"wrote {folder}", file=sys.stderr)
    print(package_path_line(args.out))
    return 0


def cmd_gazebo_world(args) -> int:
    """An SDF world of the configured system for Gazebo classic with RotorS."""
    from backends.gazebo_world import write_world

    options = {} if args.cable_segments is None else {"cable_segments": args.cable_segments}
    print(write_world(load_cli_config(args), args.out, overwrite=args.overwrite, **options))
    return 0


# ---------------------------------------------------------------------------------------------
# parser


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random process")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_reference(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trajectory",
        default="eight-slow",
        help="reference name (see `cableload trajectories`), or track:PATH, track:zandvoort",
    )
    _add_reference_options(p)


# the orientation modes of ``cableload_sim.trajectories.ORIENTATION_MODES`` (not imported here:
# ``cableload --help`` stays instant; a test checks they agree)
ORIENTATIONS = ("constant", "zero-sideslip", "oscillating")


def _add_reference_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--orientation",
        default="constant",
        choices=ORIENTATIONS,
        help="the load's yaw along a looped path (oscillating: -o yaw_amplitude_deg=A -o yaw_frequency=F)",
    )
    p.add_argument("--track-size", type=float, default=None, help="track:... larger side (m)")
    p.add_argument("--speed", type=float, default=None, help="track/square speed (m/s)")
    p.add_argument(
        "-o",
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="reference option, e.g. -o ax=3 -o ay=3 -o w=0.5",
    )


def _add_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy",
        default=None,
        help="student policy directory (default: the shipped generalist for the "
        "number of quadrotors off eight-medium, when there is one, else the "
        "eight-medium student for that number)",
    )
    p.add_argument(
        "--runtime",
        choices=["auto", "torch", "onnx", "numba"],
        default="auto",
        help="student inference runtime (auto: numba, the network compiled, for the pinn "
        "decoder; torch for the mlp baseline)",
    )


def _add_force(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="fly references beyond the system's limits (thrust, tilt, cable "
        "tensions; see `cableload trajectories --check`) with a warning instead "
        "of refusing them",
    )


def _add_log(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log",
        default=None,
        metavar="RUN.bag",
        help="write a ROS1 bag of the run (one per planner with several)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --log file")


def _add_pilot_queue(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pilot-queue",
        choices=["stock", "replace"],
        default="stock",
        help="the Agilicious pilot's reference queue: stock (append-only; only the "
        "part of each plan up to the next one is sent) or replace (a patched "
        "pilot that replaces its queue)",
    )
    p.add_argument(
        "--pilot-times",
        choices=["receipt", "message"],
        default="message",
        help="how the pilot times a trajectory it receives: receipt (agiros: re-timed to "
        "its arrival; the clients start each piece one measured link latency ahead) or "
        "message (a pilot that keeps the message's times)",
    )


def _two_numbers(expects: str):
    """An argparse type: ``A,B``, two numbers; ``expects`` says which, with an example."""

    def parse(text: str) -> tuple[float, float]:
        try:
            first, second = (float(v) for v in text.split(","))
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"expected {expects}; got {text!r}") from err
        return first, second

    return parse


_disturbance = _two_numbers("FORCE,TORQUE (N, N m), e.g. 2.0,0.2")
_pair = _two_numbers("MIN,MAX (two numbers), e.g. 0.005,0.02")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cableload",
        description="Simulate, plan and learn cooperative transport of a cable-suspended load.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "trajectories", help="list the load reference trajectories, or check one against the system's limits"
    )
    p.add_argument(
        "--check",
        default=None,
        metavar="NAME",
        help="check one reference (with the options below): its peak speed, "
        "acceleration, jerk, and the thrust, tilt and cable tensions it needs; "
        "exit status 1 when beyond the limits",
    )
    p.add_argument(
        "--sample",
        default=None,
        metavar="CONFIG",
        help="draw references from the [references] table of CONFIG (a training "
        "config) and write a preview into --out",
    )
    p.add_argument("--out", default=None, metavar="DIR", help="with --sample: output folder")
    p.add_argument("--count", type=int, default=8, help="with --sample: how many")
    p.add_argument("--seed", type=int, default=0, help="with --sample: seed of the draws")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds to check (--check; default: the smooth start and one lap) or "
        "to draw (--sample; default 20)",
    )
    _add_reference_options(p)
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trajectories)

    p = sub.add_parser("simulate", help="fly one planner on the embedded simulator or a ROS world")
    p.add_argument(
        "--planner",
        default="formation",
        help="formation, formation-tilt, formation-wrench, formation-follow, teacher, "
        "teacher-ekf (the teacher seeing the load only through the quadrotors), student or "
        "student-prior; several, comma-separated, side by side; `nodes` (with "
        "--backend gazebo): the planners run as `cableload node` processes",
    )
    p.add_argument(
        "--backend",
        choices=["embedded", "gazebo"],
        default="embedded",
        help="embedded: the numba simulator in this process; gazebo: a ROS1 world "
        "(Gazebo + RotorS + Agilicious, or `cableload world`) at ROS_MASTER_URI",
    )
    _add_pilot_queue(p)
    _add_policy(p)
    _add_log(p)
    p.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help="seconds of simulated flight (--from-ground with eight-slow: "
        "the flight, ground to ground, takes 44 s)",
    )
    p.add_argument(
        "--node-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="with --planner nodes: how long (wall s) to wait, the world paused, for "
        "every node's first plan before the episode ends as node_lost",
    )
    p.add_argument(
        "--from-ground",
        action="store_true",
        help="start with the load and the quadrotors resting on the ground, cables "
        "slack: take off, lift the load, fly one lap of the path, set it down "
        "and land (cableload_sim/trajectories/lift.py; the teacher and the student "
        "fly the path, formation-tilt the lift around it: planners/handover.py)",
    )
    p.add_argument(
        "--disturbance",
        type=_disturbance,
        default=None,
        metavar="FORCE,TORQUE",
        help="random wrench on the load: largest force (N) and torque (N m)",
    )
    p.add_argument(
        "--no-safety",
        action="store_true",
        help="fly without the safety module (hw/safety.py; on by default, with its "
        "default limits: it stops the run, status safety_stop, when a rule fires)",
    )
    _add_reference(p)
    _add_force(p)
    _add_common(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("evaluate", help="teacher and student side by side on trajectories")
    p.add_argument(
        "--trajectories",
        default="eight-medium",
        help="comma-separated names, e.g. eight-medium,eight-slow,track:zandvoort",
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds per trajectory")
    p.add_argument("--disturbance", type=_disturbance, default=None, metavar="FORCE,TORQUE")
    _add_reference(p)
    _add_policy(p)
    _add_force(p)
    _add_common(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("train", help="train the student by DAgger")
    p.add_argument(
        "--config", default=None, help="training TOML (default: learners/configs/paper-eight-medium.toml)"
    )
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    _add_force(p)
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
    p.add_argument(
        "--config",
        default=None,
        help="TOML configuration of the flight, for a bag that records none (a real "
        "flight's) or to override the recorded one",
    )
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (with --config)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("bench", help="measure speed")
    p.add_argument(
        "what",
        choices=["sim", "teacher"],
        help="sim: physics + onboard controllers; teacher: time per NMPC plan",
    )
    p.add_argument("--steps", type=int, default=200_000, help="sim: physics steps")
    p.add_argument("--batch", type=int, default=64, help="sim: systems stepped in parallel")
    p.add_argument("--physics-dt", type=float, default=None, help="sim: physics step (s)")
    p.add_argument("--duration", type=float, default=20.0, help="teacher: closed-loop seconds")
    p.add_argument("--trajectory", default="eight-medium", help="teacher: load reference")
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", default=None, help="number(s) of quadrotors, e.g. 3,4,5,6")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("reproduce", help="run the paper's experiments and put its tables beside ours")
    p.add_argument(
        "tables",
        nargs="*",
        metavar="TABLE",
        help="the paper's table numbers (1-11) or `ablation`; default: every one",
    )
    p.add_argument("--quick", action="store_true", help="every table shortened (about a minute in all)")
    p.add_argument(
        "--out", default="runs/reproduce", help="output folder; a stopped run given the same one resumes"
    )
    p.add_argument(
        "--conditions",
        choices=["paper", "ideal"],
        default="paper",
        help="paper: the config paper-conditions (motion capture, onboard estimators, the Wi-Fi "
        "link and the rotor headroom of the paper's simulations); ideal: the config paper (exact "
        "states, plans at once)",
    )
    p.add_argument("--json", action="store_true", help="no progress bars; print the index's path as JSON")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("gazebo-world", help="write an SDF world of the system for Gazebo + RotorS")
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    p.add_argument("-o", "--out", required=True, metavar="WORLD.world", help="world file to write")
    p.add_argument(
        "--cable-segments", type=int, default=None, metavar="K", help="rigid links per cable (default: 10)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_gazebo_world)

    p = sub.add_parser(
        "launch",
        help="roslaunch a multi-lift episode (the world, planner "
        "nodes, rosbag, the episode) and exit with the episode's status",
    )
    p.add_argument(
        "--file",
        default=None,
        metavar="LAUNCH",
        help="launch file (default: ros/cableload/launch/multilift.launch)",
    )
    p.add_argument(
        "launch_args",
        nargs="*",
        metavar="ARG:=VALUE",
        help="the launch file's arguments, e.g. n:=3 planner:=teacher duration:=20",
    )
    p.set_defaults(func=cmd_launch)

    p = sub.add_parser(
        "ros-messages",
        help="write the agiros, gazebo and cableload message "
        "packages the ROS tools (rostopic, rosbag) need, and print the "
        "ROS_PACKAGE_PATH line",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write them in")
    p.set_defaults(func=cmd_ros_messages)

    p = sub.add_parser(
        "world", help="the simulator as a ROS1 world (what Gazebo + RotorS + the Agilicious pilot speak)"
    )
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    p.add_argument(
        "--real-time-factor",
        type=float,
        default=1.0,
        help="simulated seconds per wall second (0: as fast as possible)",
    )
    p.add_argument("--state-rate", type=float, default=100.0, help="state and /clock rate (Hz)")
    p.add_argument("--mocap-rate", type=float, default=100.0, help="load pose rate (Hz)")
    _add_pilot_queue(p)
    p.add_argument("--paused", action="store_true", help="start with the physics paused")
    p.add_argument(
        "--takeoff-height",
        type=float,
        default=None,
        metavar="M",
        help="how far the pilots climb on `start` from the ground (default 0.5 m: the cables "
        "stay slack; with --hardware the flight file's)",
    )
    p.add_argument(
        "--lockstep",
        action="store_true",
        help="the clock waits at every planner decision for its references (the same "
        "flight on a busy machine as on an idle one)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds of world time (default: run until killed)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the links' draws (with --set link.enabled=true)"
    )
    p.add_argument(
        "--hardware",
        action="store_true",
        help="stand in for an arena with real quadrotors (what `cableload fly` flies): wall "
        "clock, the system on the ground, motion capture of every body, Wi-Fi loss and "
        "delay, batteries; serves the quadrotors of --flight",
    )
    p.add_argument(
        "--flight",
        default=None,
        metavar="FLIGHT.toml",
        help="with --hardware: the flight file to serve (default: hw/flights/example.toml)",
    )
    p.add_argument(
        "--mocap-drop", type=float, default=0.01, help="with --hardware: share of motion-capture frames lost"
    )
    p.add_argument(
        "--wifi-loss",
        type=float,
        default=0.0,
        help="with --hardware: share of references lost on the Wi-Fi (TCPROS retransmits: a "
        "bad link shows as delay, not loss; a loss runs a stock pilot's queue dry)",
    )
    p.add_argument(
        "--wifi-delay",
        type=_pair,
        default=(0.005, 0.02),
        metavar="MIN,MAX",
        help="with --hardware: delay of a reference on the Wi-Fi, uniform in [MIN, MAX] s",
    )
    p.set_defaults(func=cmd_world)

    p = sub.add_parser("preflight", help="check every topic, body and battery of a flight before it flies")
    p.add_argument("flight", metavar="FLIGHT.toml", help="the flight file (e.g. hw/flights/example.toml)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser(
        "fly", help="fly real quadrotors (or `world --hardware`) from the ground, with an operator"
    )
    p.add_argument("flight", metavar="FLIGHT.toml", help="the flight file (e.g. hw/flights/example.toml)")
    p.add_argument("--planner", choices=["teacher", "student"], default="teacher", help="who flies the path")
    p.add_argument(
        "--operator",
        default="gamepad",
        metavar="SOURCE",
        help="the operator's input: gamepad[:/dev/input/eventN] (evdev), keyboard, or script:FILE "
        "(e.g. script:hw/flights/operator-fly.toml)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=40.0,
        help="seconds of the transport, ground to ground (eight-medium: 32 s), then the landing",
    )
    p.add_argument("--skip-preflight", action="store_true", help="fly without the preflight checks")
    p.add_argument(
        "--nodes",
        action="store_true",
        help="with --planner student: the students run as `cableload node --planner student "
        "--uav I --relay` processes, one per quadrotor (started by you, anywhere on the ROS "
        "graph); their plans pass the safety module here",
    )
    p.add_argument(
        "--node-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="with --nodes: how long (s) to wait for every node's first plan at the hand-over",
    )
    _add_policy(p)
    _add_log(p)
    _add_reference(p)
    _add_force(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_fly, trajectory="eight-medium")

    p = sub.add_parser("node", help="one planner as its own ROS1 node (one per quadrotor for the student)")
    p.add_argument(
        "--planner",
        required=True,
        help="student (with --uav), or a centralized planner: teacher, formation, ...",
    )
    p.add_argument(
        "--uav",
        type=int,
        default=None,
        help="the quadrotor this node plans for (0-based; decentralized planners)",
    )
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    p.add_argument("--uavs", type=int, default=None, help="number of quadrotors (default: config)")
    _add_policy(p)
    _add_pilot_queue(p)
    p.add_argument(
        "--relay",
        action="store_true",
        help="a flight's node: send the plans to the flight station (/<quad>/cableload/plan), "
        "which checks them with the safety module, instead of to the pilots; plan on the wall "
        "clock at each of the station's decisions (`cableload fly --nodes`)",
    )
    p.set_defaults(func=cmd_node)
    for command in sub.choices.values():  # every command that reads a --config takes --set
        if "--config" in command._option_string_actions:
            _add_set(command)
    return parser


def os_error_line(err: OSError) -> str:
    """An ``OSError`` in one line: the file(s) and what is wrong with them."""
    if err.filename is None:
        return str(err)
    files = f"{err.filename}" + (f" -> {err.filename2}" if err.filename2 is not None else "")
    return f"{files}: {err.strerror or err}"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"cableload: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run one command. Expected failures (``CableloadError``: a bad option or config, a
    corrupted file, a request too large for this machine) and operating-system errors (a full
    disk, a folder that cannot be written) are reported in one line with exit status 2 for
    usage errors and 1 for the rest; anything else is a bug and keeps its traceback."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    # roslaunch appends remappings such as __name:=world and __log:=...: not ours
    args = parser.parse_args([a for a in argv if not (a.startswith("__") and ":=" in a)])
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except CableloadError as err:
            print(f"cableload: error: {err}", file=sys.stderr)
            return err.exit_status
        except OSError as err:
            print(f"cableload: error: {os_error_line(err)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # Ctrl-C: what was written is closed on the way out
            print(f"cableload: {args.command} interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
