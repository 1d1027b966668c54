"""Running the reproduction: train what each experiment needs, fly its runs, and write per table
a Markdown and a CSV file with the paper's value beside ours and their ratio, a figure, and an
index page.

Everything a run produces is kept under ``OUT/work`` as it is made: each policy's DAgger run
directory (which ``learners.dagger.train`` resumes round by round) and each flight's figures as
one JSON file, written atomically. A stopped reproduction started again with the same
``--out`` therefore redoes nothing that had finished; ``--quick`` and the conditions are part of
what was run, and a mismatch is refused.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import fcntl
import io
import json
import math
import os
import platform
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from cableload_sim.errors import OutputExistsError, UsageError
from cableload_sim.io.files import atomic_write_bytes, atomic_write_json

from .conditions import condition_config, condition_settings, flat_settings
from .paper import Mark, PaperTable, paper_table
from .tables import (
    SAME_VALUES,
    STOP_SEPARATION_M,
    Experiment,
    Run,
    Training,
    experiment,
    experiment_names,
    page_names,
)

LOCK_FILE = ".lock"
"""Held while a call reads or writes the folder's stamp."""

RUN_FILE = "reproduction.json"
"""What the output folder was made with (quick, conditions): a resume must match it."""


def _write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


class Reproduction:
    """One reproduction into ``out``: ``run(names)`` runs the experiments of those tables."""

    def __init__(
        self, out: str | Path, *, quick: bool = False, conditions: str = "paper", progress: bool = True
    ):
        self.out = Path(out)
        self.quick = quick
        self.conditions = conditions
        self.system = condition_config(conditions)
        self.progress = progress
        self.work = self.out / "work"
        self._check_out()

    def _check_out(self) -> None:
        stamp = {
            "quick": self.quick,
            "conditions": self.conditions,
            "settings": condition_settings(self.conditions),
        }
        path = self.out / RUN_FILE
        fresh = not self.out.exists() or not any(self.out.iterdir())
        self.out.mkdir(parents=True, exist_ok=True)
        # two calls started together on one folder: one writes the stamp, the other reads it
        with open(self.out / LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                stored = json.loads(path.read_text())
                if {k: stored.get(k) for k in stamp} != stamp:
                    raise OutputExistsError(
                        f"{self.out} holds a reproduction made with {stored!r}; expected {stamp!r} "
                        "to resume it: give another --out or the same options"
                    )
            elif not fresh and any(p.name != LOCK_FILE for p in self.out.iterdir()):
                raise OutputExistsError(
                    f"{self.out} exists and is not a reproduction's folder; give an empty or new --out"
                )
            else:
                atomic_write_json(path, {**stamp, "started": _now()})

    # -- the experiments ------------------------------------------------------------------------

    def run(self, names: Iterable[str] | None = None) -> Path:
        """Run the experiments of ``names`` (all when None) and write their pages; returns the
        index page's path."""
        from tqdm import tqdm

        chosen = list(dict.fromkeys(names or experiment_names()))
        experiments = [experiment(name, self.quick, self.system) for name in chosen]
        start = time.perf_counter()
        for exp in tqdm(experiments, desc="reproduce", unit="table", disable=not self.progress):
            for training in exp.trainings:
                self.policy(training)
            results = [
                self.flown(exp, run)
                for run in tqdm(exp.runs, desc=exp.key, unit="run", leave=False, disable=not self.progress)
            ]
            self.write_table(exp, results)
            self._add_time(exp.key, time.perf_counter() - start)
            start = time.perf_counter()
        return self.write_index()

    def _add_time(self, key: str, seconds: float) -> None:
        """Add ``seconds`` of wall time spent on experiment ``key`` to the folder's record."""
        path = self.out / RUN_FILE
        with open(self.out / LOCK_FILE, "w") as lock:  # another call may add its own time
            fcntl.flock(lock, fcntl.LOCK_EX)
            stamp = json.loads(path.read_text())
            spent = stamp.setdefault("seconds", {})
            spent[key] = spent.get(key, 0.0) + seconds
            atomic_write_json(path, stamp)

    def policy(self, training: Training) -> Path:
        """The policy of ``training``, trained (or its training resumed) when not done."""
        from learners.config import train_config_from_dict
        from learners.dagger import train

        run_dir = self.work / "policies" / training.name
        policy = run_dir / "policy"
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        # one training per policy at a time: another reproduction of the same folder waits for it
        with open(run_dir.parent / f".{training.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            config = train_config_from_dict(training.config, f"reproduction policy {training.name}")
            _check_trained_system(run_dir, config)
            if not _trained(run_dir, training):
                train(config, run_dir, resume=(run_dir / "config.json").exists(), progress=self.progress)
        return policy

    def training_minutes(self) -> float:
        """Minutes of collection, training and validation of every policy trained in this folder."""
        total = 0.0
        for summary in (self.work / "policies").glob("*/summary.json"):
            rows = json.loads(summary.read_text())
            total += sum(r.get(k, 0.0) for r in rows for k in ("collect_s", "train_s", "eval_wall_s"))
        return total / 60.0

    def flown(self, exp: Experiment, run: Run) -> dict[str, Any]:
        """The figures of ``run``: flown now, or read from its file when an earlier call did."""
        path = self.work / "runs" / exp.key / f"{run.key}.json"
        if path.exists():
            return json.loads(path.read_text())
        result = {"key": run.key, "label": run.label, "planner": run.planner, **fly(self, exp, run)}
        atomic_write_json(path, result)
        return result

    # -- the pages -------------------------------------------------------------------------------

    def write_table(self, exp: Experiment, results: list[dict[str, Any]]) -> None:
        """Per table of ``exp``, its rows as a CSV file, a Markdown page and a figure
        (``table-02.csv``, ``table-02.md``, ``table-02.png``; ``ablation.*``)."""
        rows = table_rows(exp, results, self)
        for number, name in zip(exp.tables or (None,), page_names(exp), strict=True):
            mine = _same_columns(_rows_of(rows, number, exp))
            header = list(mine[0]) if mine else []
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=header)
            writer.writeheader()
            writer.writerows(mine)
            _write_text(self.out / f"{name}.csv", text.getvalue())
            _write_text(self.out / f"{name}.md", table_markdown(exp, mine, self, number))
            plot_table(exp, mine, self.out / f"{name}.png")

    def write_index(self) -> Path:
        """The index page: when, where, how, each experiment's page, the summary, the conditions."""
        stamp = json.loads((self.out / RUN_FILE).read_text())
        spent = stamp.get("seconds", {})
        lines = [
            "# The paper's tables reproduced",
            "",
            f"- Made {_now()} on {platform.node() or 'this machine'} ({platform.machine()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}), "
            f"{'quick (shortened) runs' if self.quick else 'full runs'}, conditions `{self.conditions}`.",
            f"- Command: `cableload reproduce{' --quick' if self.quick else ''} "
            f"--conditions {self.conditions} --out {self.out}`",
            f"- Started {stamp.get('started', 'at an unrecorded time')}: "
            f"{_minutes_since(stamp.get('started'))} of wall-clock time to this page (calls on one "
            "folder may run side by side).",
            f"- Time per table, every call on this folder together: {sum(spent.values()) / 60:.1f} min"
            + (" (only for the tables with a time below)." if spent else " (not recorded).")
            + f" The policies' DAgger runs (collection, training and validation, by their records) "
            f"took {self.training_minutes():.0f} min.",
            "",
            "| table | what | file | wall time (min) |",
            "|---|---|---|---|",
        ]
        for name in experiment_names():
            exp = experiment(name, self.quick, self.system)
            tables = ", ".join(map(str, exp.tables)) or "ablation"
            pages = [f"{page}.md" for page in page_names(exp) if (self.out / f"{page}.md").exists()]
            where = ", ".join(f"[{page}]({page})" for page in pages) or "not run in this folder yet"
            minutes = f"{spent[exp.key] / 60:.1f}" if exp.key in spent else ""
            lines.append(f"| {tables} | {exp.title} | {where} | {minutes} |")
        lines += ["", "## In short", "", results_summary(self.out), "## The conditions", ""]
        lines.append(
            f"The configuration `{self.system}` (`cableload_sim/configs/{self.system}.toml`, whose "
            "comments give each value's reason)"
            + (
                ": the default configuration, exact states, plans delivered at once."
                if self.system == "paper"
                else ", which changes the paper's setup (`paper.toml`) in:"
            )
        )
        lines += ["", *[f"- `{s}`" for s in condition_settings(self.conditions)]]
        lines += ["", "The policies were trained under:", ""]
        from cableload_sim.params import load_config

        flown = load_config(self.system).to_dict()
        for name in sorted(p.name for p in (self.work / "policies").glob("*") if p.is_dir()):
            stored = self.work / "policies" / name / "config.json"
            if stored.exists():
                trained = json.loads(stored.read_text())
                system = trained.get("system_config", "paper")
                changes = tuple(trained.get("dagger", {}).get("system_overrides", []))
                also = f" with `{'`, `'.join(changes)}`" if changes else ""
                differ = _differences(trained.get("system", {}), flown)
                note = f"; not the conditions flown: {', '.join(differ)}" if differ else ""
                lines.append(f"- `{name}`: `{system}`{also}{note}")
        lines += [
            "",
            "The paper's teacher read its EKF's estimate of the load. Table 8 flies the teacher both "
            "ways: on the load's motion-capture pose, and on an estimate from the quadrotors alone "
            "(`teacher-ekf`, planners/load_estimate.py).",
        ]
        path = self.out / "index.md"
        _write_text(path, "\n".join(lines) + "\n")
        return path


def _differences(trained: dict[str, Any], flown: dict[str, Any]) -> list[str]:
    """Where two resolved configurations differ: ``key trained (flown flown)``."""
    a, b = (
        flat_settings(json.loads(json.dumps(trained, default=float))),
        flat_settings(json.loads(json.dumps(flown, default=float))),
    )
    return [f"{k} {a.get(k)!r} (flown {b.get(k)!r})" for k in sorted({*a, *b}) if a.get(k) != b.get(k)]


def _check_trained_system(run_dir: Path, config) -> None:
    """Refuse a policy folder trained (or being trained) on another system than ``config``'s."""
    from learners.dagger import training_system

    stored = run_dir / "config.json"
    if not stored.exists():
        return
    trained = json.loads(stored.read_text()).get("system", {})
    wanted = training_system(config, max(config.dagger.uavs, default=None)).to_dict()
    differ = _differences(trained, wanted)
    if differ:
        raise OutputExistsError(
            f"{run_dir} holds a policy trained on another system ({'; '.join(differ[:4])}"
            f"{'; ...' if len(differ) > 4 else ''}): give another --out"
        )


def _trained(run_dir: Path, training: Training) -> bool:
    """Whether ``run_dir`` holds the whole training of ``training`` and its exported policy."""
    summary = run_dir / "summary.json"
    if not (run_dir / "policy").is_dir() or not summary.exists():
        return False
    rounds = json.loads(summary.read_text())
    return len(rounds) >= int(training.config["dagger"]["rounds"])


def _minutes_since(started: str | None) -> str:
    """Minutes from a stamp's ``started`` (``_now``'s form) to now, as text."""
    try:
        then = datetime.datetime.strptime(str(started), "%Y-%m-%d %H:%M UTC").replace(tzinfo=datetime.UTC)
    except ValueError:
        return "an unknown time"
    return f"{(datetime.datetime.now(datetime.UTC) - then).total_seconds() / 60:.0f} min"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


# -- flying ------------------------------------------------------------------------------------


class _Recorder:
    """A planner seen from outside: each plan's time by stage and its derivative consistency."""

    def __init__(self, planner):
        self.planner = planner
        self.mae: list[np.ndarray] = []
        self.stages: list[tuple[float, float, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.planner, name)

    def reset(self) -> None:
        self.planner.reset()

    def plan(self, state, reference):
        from cableload_sim.metrics import plan_derivative_mae_axes

        p = self.planner
        if hasattr(p, "observe") and hasattr(p, "act"):  # the student: observe, network, decode
            start = time.perf_counter()
            encoded = p.observe(state, reference)
            observed = time.perf_counter()
            before = len(p.infer_times)
            plans = p.act(encoded, state.uav_p)
            total = time.perf_counter() - start
            network = p.infer_times[-1] * len(encoded) if len(p.infer_times) > before else 0.0
            self.stages.append((observed - start, network, total - (observed - start) - network))
        else:
            plans = p.plan(state, reference)
            stage_times = getattr(p, "stage_times", None)
            if stage_times:
                self.stages.append(stage_times[-1])
        for plan in plans:
            self.mae.append(plan_derivative_mae_axes(plan.t, plan.p, plan.v))
        return plans


def fly(reproduction: Reproduction, exp: Experiment, run: Run) -> dict[str, Any]:
    """Fly ``run`` (and, for a sequence, each goal from the pose the last one reached)."""
    if run.sequence:
        return _fly_sequence(reproduction, run)
    if run.backend == "world":
        from backends.ros1 import ros_available

        ok, why = ros_available()
        if ok:
            return _fly_world(reproduction, exp, run)
        return {**_fly_once(reproduction, run, run.reference.build()), "backend": f"embedded ({why})"}
    return {**_fly_once(reproduction, run, run.reference.build()), "backend": "embedded"}


WORLD_FLIGHT_TIMEOUT_S = 600.0


def _flight_under(example: str, reference) -> str:
    """The example flight file moved so that the load rests below the start of ``reference``:
    the load's start and the quadrotors' slots shifted by the same horizontal distance."""
    p0, _ = reference.start_pose()
    found = re.search(r"^start = \[([^\]]*)\]", example, flags=re.M)
    if found is None:
        raise UsageError("the example flight file has no [load] start line to move")
    x, y, _z = (float(v) for v in found.group(1).split(","))
    dx, dy = float(p0[0]) - x, float(p0[1]) - y

    def shifted(match: re.Match) -> str:
        a, b, c = (float(v) for v in match.group(2).split(","))
        return f"{match.group(1)}[{a + dx:.4f}, {b + dy:.4f}, {c}]"

    return re.sub(r"^((?:start|slot) = )\[([^\]]*)\]", shifted, example, flags=re.M)


def _fly_world(reproduction: Reproduction, exp: Experiment, run: Run) -> dict[str, Any]:
    """``run`` as a flight: ``cableload fly`` of the example flight file against a fresh
    ``cableload world --hardware`` on a private ROS graph, ground to ground, the scripted
    operator (wall clock)."""
    from importlib import resources

    from backends.ros_graph import RosGraph, last_json

    folder = (reproduction.work / "world" / exp.key / run.key).resolve()  # the processes run in it
    folder.mkdir(parents=True, exist_ok=True)
    flights = resources.files("hw") / "flights"
    with (
        resources.as_file(flights / "example.toml") as example,
        resources.as_file(flights / "operator-fly.toml") as operator,
    ):
        flight = folder / "flight.toml"
        # the world's own motion capture and Wi-Fi stand for the conditions' sensing and link (the
        # conditions' config in the world as well stalled its motion capture on this machine)
        _write_text(flight, _flight_under(example.read_text(), run.reference.build()))
        graph = RosGraph(folder)
        try:
            link = _config(reproduction, run).link  # the conditions' Wi-Fi, not the world's default
            wifi = ["--wifi-delay", f"{link.delay_min_s!r},{link.delay_max_s!r}"]
            wifi += ["--wifi-loss", repr(link.drop_fraction if link.enabled else 0.0)]
            graph.cableload("world", "world", "--hardware", "--flight", str(flight), *wifi)
            graph.wait_for(
                lambda: "/mocap/load/pose" in graph.master_state()["publishers"], 90.0, "the hardware world"
            )
            time.sleep(1.0)
            args = ["fly", str(flight), "--json", "--planner", run.planner, "--duration", f"{run.duration:g}"]
            args += ["--operator", f"script:{operator}", "--trajectory", run.reference.name]
            args += ["--orientation", run.reference.orientation]
            for key, value in run.reference.options.items():
                args += ["-o", f"{key}={value}"]
            if run.policy is not None:
                args += ["--policy", str((reproduction.work / "policies" / run.policy / "policy").resolve())]
            done = graph.run(*args, timeout=WORLD_FLIGHT_TIMEOUT_S)
        finally:
            graph.stop()
    try:
        m = last_json(done.stdout)
    except ValueError:
        raise UsageError(f"the flight of {run.key} printed no result: {done.stderr[-2000:]}") from None
    return {
        "status": m["status"],
        "stopped_at_s": None if m["status"] == "completed" else m.get("sim_time_s"),
        "rmse_position_m": m["rmse_position_m"],
        "rmse_orientation_deg": m["rmse_orientation_deg"],
        "min_uav_distance_m": m["min_uav_distance_m"],
        "message": m.get("message", ""),
        "reference": run.reference.as_dict(),
        "duration_s": run.duration,
        "backend": "world (cableload fly against cableload world --hardware)",
        "safety_events": m.get("safety_events", []),
    }


def _config(reproduction: Reproduction, run: Run):
    from cableload_sim.params import load_config

    return load_config(reproduction.system, overrides=run.overrides)


def _planner(reproduction: Reproduction, run: Run, config):
    from planners import make_planner

    options = {}
    if run.policy is not None and run.policy.startswith(SHIPPED):
        options["policy"] = str(shipped_policy(run.policy.removeprefix(SHIPPED)))
    elif run.policy is not None:
        options["policy"] = str(reproduction.work / "policies" / run.policy / "policy")
    return make_planner(run.planner, config, **options)


def reproduction_safety():
    """The safety module of the reproduction's flights: the project's, stopping a run whose
    quadrotors come within the paper's 0.4 m, with the rules on measured speed and acceleration
    (a flight's: 8 m/s, 25 m/s^2) opened up, since the paper's simulations had none."""
    from hw.safety import SafetyLimits, SafetyModule

    return SafetyModule(
        SafetyLimits(min_distance_m=STOP_SEPARATION_M, max_speed_mps=50.0, max_acceleration_mps2=200.0)
    )


SHIPPED = "shipped:"
"""A run's policy named ``shipped:NAME`` is the project's ``learners/policies/NAME``."""


def shipped_policy(name: str) -> Path:
    from learners.export import POLICIES

    path = Path(POLICIES) / name
    if not path.is_dir():
        raise UsageError(f"shipped policy {name!r}: no folder {path}")
    return path


def _fly_once(reproduction: Reproduction, run: Run, reference, start=None) -> dict[str, Any]:
    from backends import make_backend
    from backends.base import Scenario
    from backends.runner import run_episode

    config = _config(reproduction, run)
    recorder = _Recorder(_planner(reproduction, run, config))
    p0, q0 = reference.start_pose() if start is None else start
    result = run_episode(
        make_backend("embedded", config),
        recorder,
        reference,
        run.duration,
        Scenario(load_p=p0, load_q=q0, seed=run.seed),
        collision_distance=STOP_SEPARATION_M,
        keep_samples=True,
        safety=reproduction_safety(),
    )
    m = result.metrics
    out: dict[str, Any] = {
        "status": m["status"],
        "stopped_at_s": m["sim_time_s"] if m["status"] != "completed" else None,
        "rmse_position_m": m["rmse_position_m"],
        "rmse_orientation_deg": m["rmse_orientation_deg"],
        "min_uav_distance_m": m["min_uav_distance_m"],
        "message": result.message,
        "reference": run.reference.as_dict(),
        "overrides": list(run.overrides),
        "duration_s": run.duration,
    }
    if recorder.mae:
        mae = np.mean(recorder.mae, axis=0)
        out.update(
            deriv_mae_x=mae[0], deriv_mae_y=mae[1], deriv_mae_z=mae[2], deriv_mae_overall=float(mae.mean())
        )
    if len(recorder.stages) > 1:
        stages = np.array(recorder.stages[1:]) * 1e3  # the first plan (a cold start) apart
        out.update(
            plan_ms_pre=float(np.median(stages[:, 0])),
            plan_ms_model=float(np.median(stages[:, 1])),
            plan_ms_post=float(np.median(stages[:, 2])),
            plan_ms_total=float(np.median(stages.sum(axis=1))),
        )
    samples = result.samples
    if samples is not None and len(samples.t):
        out["end_p"] = samples.load_p[-1].tolist()
        out["end_q"] = samples.load_q[-1].tolist()
        out["end_t"] = float(samples.t[-1])
    return out


def _fly_sequence(reproduction: Reproduction, run: Run) -> dict[str, Any]:
    """Table 9: each goal flown from the pose the previous flight ended in."""
    from cableload_sim.rotations import quat_angle_between, quat_to_euler
    from cableload_sim.trajectories import make_reference

    start_pose = list(run.reference.options["start"])
    steps = []
    for goal in run.sequence:
        options = {**run.reference.options, "start": start_pose, "goal": list(goal["goal"])}
        reference = make_reference("pose-to-pose", orientation="constant", **options)
        flown = _fly_once(reproduction, run, reference)
        end_p = np.array(flown.get("end_p", [math.nan] * 3))
        end_q = np.array(flown.get("end_q", [1.0, 0.0, 0.0, 0.0]))
        goal_sample = reference.sample(np.array([run.duration]))
        step = {
            "experiment": goal["experiment"],
            "status": flown["status"],
            "start": start_pose,
            "goal": list(goal["goal"]),
            "end": [*end_p.tolist(), *np.degrees(quat_to_euler(end_q)).tolist()],
            "position_error": float(np.linalg.norm(end_p - goal_sample.p[0])),
            "orientation_error": float(np.degrees(quat_angle_between(end_q, goal_sample.q[0]))),
        }
        steps.append(step)
        if flown["status"] != "completed":
            break
        start_pose = step["end"]
    return {
        "status": steps[-1]["status"] if steps else "completed",
        "sequence": steps,
        "position_error_mean": float(np.mean([s["position_error"] for s in steps])),
        "orientation_error_mean": float(np.mean([s["orientation_error"] for s in steps])),
    }


# -- tables ------------------------------------------------------------------------------------


def _paper_row(
    run_paper: dict[str, Any] | None, tables: tuple[int, ...]
) -> tuple[PaperTable | None, dict | None]:
    if run_paper is None or not tables:
        return None, None
    fields = dict(run_paper)
    number = int(fields.pop("table", tables[0]))
    table = paper_table(number)
    found = table.select(**fields)
    return table, (found[0] if len(found) == 1 else None)


def _value(row: dict | None, column: str) -> float | None:
    if row is None:
        return None
    value = row.get(column)
    if isinstance(value, Mark) or value is None:
        return None
    return float(value)


def _ratio(ours: float | None, paper: float | None) -> float | None:
    if ours is None or paper is None or paper == 0 or not math.isfinite(ours):
        return None
    return ours / paper


def _status(result: dict[str, Any]) -> str:
    if result.get("status") == "completed":
        return "completed"
    at = result.get("stopped_at_s")
    return f"✗ {result.get('status')}" + (f" at {at:.1f} s" if at is not None else "")


def table_rows(
    exp: Experiment, results: list[dict[str, Any]], reproduction: Reproduction
) -> list[dict[str, Any]]:
    """One dict per row of the table's files (the same columns in its Markdown and CSV)."""
    runs = {run.key: run for run in exp.runs}
    rows: list[dict[str, Any]] = []
    if exp.kind == "time":
        return _time_rows(exp, results, reproduction)
    if exp.kind == "mean":
        return _mean_rows(exp, results, reproduction)
    teacher = {}
    if exp.kind == "ablation":
        for r in results:
            if r["planner"] == "teacher":
                teacher[r["key"].rsplit("-", 1)[1]] = r
    for result in results:
        run = runs[result["key"]]
        table, paper = _paper_row(run.paper, exp.tables)
        row: dict[str, Any] = {"_table": table.number if table is not None else None, "row": result["label"]}
        if exp.kind == "derivative":
            for axis in ("x", "y", "z", "overall"):
                ours = result.get(f"deriv_mae_{axis}")
                theirs = _value(paper, axis)
                row[f"{axis} ours (m/s)"] = ours
                row[f"{axis} paper (m/s)"] = theirs
                row[f"{axis} ratio"] = _ratio(ours, theirs)
        elif exp.kind == "pose" and "sequence" in result:
            for step in result["sequence"]:
                paper_step = next(
                    (r for r in paper_table(9).rows if r["experiment"] == step["experiment"]), None
                )
                rows.append(
                    {
                        "_table": 9,
                        "row": f"goal {step['experiment']}",
                        "position error ours (m)": step["position_error"],
                        "position error paper (m)": _value(paper_step, "position_error"),
                        "position ratio": _ratio(
                            step["position_error"], _value(paper_step, "position_error")
                        ),
                        "orientation error ours (deg)": step["orientation_error"],
                        "orientation error paper (deg)": _value(paper_step, "orientation_error"),
                        "orientation ratio": _ratio(
                            step["orientation_error"], _value(paper_step, "orientation_error")
                        ),
                        "status": _status(step),
                    }
                )
            continue
        else:
            pos = result.get("rmse_position_m") if result.get("status") == "completed" else None
            ori = result.get("rmse_orientation_deg") if result.get("status") == "completed" else None
            row["position ours (m)"] = pos
            row["orientation ours (deg)"] = ori
            if exp.kind == "ablation":
                t = teacher.get(result["key"].rsplit("-", 1)[1])
                row["position / teacher"] = _ratio(pos, _value(t, "rmse_position_m"))
                row["orientation / teacher"] = _ratio(ori, _value(t, "rmse_orientation_deg"))
            else:
                stopped = paper is not None and isinstance(paper.get("position"), Mark)
                row["position paper (m)"] = "✗" if stopped else _value(paper, "position")
                row["orientation paper (deg)"] = "✗" if stopped else _value(paper, "orientation")
                row["position ratio"] = _ratio(pos, _value(paper, "position"))
                row["orientation ratio"] = _ratio(ori, _value(paper, "orientation"))
            row["min distance (m)"] = result.get("min_uav_distance_m")
        if "backend" in result and run.backend != "embedded":
            row["backend"] = result["backend"]
        row["status"] = _status(result)
        rows.append(row)
    return rows


def _mean_rows(
    exp: Experiment, results: list[dict[str, Any]], reproduction: Reproduction
) -> list[dict[str, Any]]:
    """Each flight without a ratio, then per paper row the mean of its completed flights beside
    the paper's (itself a mean of flights)."""
    rows = table_rows(dataclasses.replace(exp, kind="rmse"), results, reproduction)
    for row in rows:
        row["position ratio"] = row["orientation ratio"] = None
    runs = {run.key: run for run in exp.runs}
    groups: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault(json.dumps(runs[result["key"]].paper, sort_keys=True), []).append(result)
    for fields, flights in groups.items():
        done = [f for f in flights if f.get("status") == "completed"]
        _, paper = _paper_row(json.loads(fields), exp.tables)
        pos = float(np.mean([f["rmse_position_m"] for f in done])) if done else None
        ori = float(np.mean([f["rmse_orientation_deg"] for f in done])) if done else None
        rows.append(
            {
                "row": f"{flights[0]['planner']}, mean of {len(done)} of {len(flights)} flights",
                "position ours (m)": pos,
                "orientation ours (deg)": ori,
                "position paper (m)": _value(paper, "position"),
                "orientation paper (deg)": _value(paper, "orientation"),
                "position ratio": _ratio(pos, _value(paper, "position")),
                "orientation ratio": _ratio(ori, _value(paper, "orientation")),
                "min distance (m)": min(f["min_uav_distance_m"] for f in flights),
                "status": "completed" if len(done) == len(flights) else "✗ not all completed",
            }
        )
    return rows


def _time_rows(
    exp: Experiment, results: list[dict[str, Any]], reproduction: Reproduction
) -> list[dict[str, Any]]:
    """Table 11: minutes of collection and training per policy; Figure 15: ms per stage."""
    paper = paper_table(11)
    labels = {
        "eight-2.2x2": "SP (Real)",
        "sp-constant": "SP (Constant orientation)",
        "sp-zss": "SP (Zero sideslip)",
        "sp-both": "SP (Both)",
    }
    rows: list[dict[str, Any]] = []
    for training in exp.trainings:
        summary_path = reproduction.work / "policies" / training.name / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else []
        collect = sum(r.get("collect_s", 0.0) for r in summary) / 60.0
        trained = sum(r.get("train_s", 0.0) for r in summary) / 60.0
        validated = sum(r.get("eval_wall_s", 0.0) for r in summary) / 60.0
        found = paper.select(policy=labels.get(training.name, ""))
        theirs = found[0] if found else None
        rows.append(
            {
                "row": f"{labels.get(training.name, training.name)}: {training.label}",
                "rounds": len(summary),
                "collection ours (min)": collect,
                "collection paper (min)": _value(theirs, "data_collection_time"),
                "training ours (min)": trained,
                "training paper (min)": _value(theirs, "training_time"),
                "validation ours (min)": validated,
                "total ours (min)": collect + trained + validated,
                "total paper (min)": _value(theirs, "total_time"),
                "total ratio": _ratio(collect + trained + validated, _value(theirs, "total_time")),
            }
        )
    for result in results:
        rows.append(
            {
                "row": f"{result['label']} (ms per plan, median: pre-processing / model or solver / "
                "post-processing)",
                "rounds": None,
                "collection ours (min)": None,
                "collection paper (min)": None,
                "training ours (min)": None,
                "training paper (min)": None,
                "total ours (min)": None,
                "total paper (min)": None,
                "total ratio": None,
                "pre (ms)": result.get("plan_ms_pre"),
                "model (ms)": result.get("plan_ms_model"),
                "post (ms)": result.get("plan_ms_post"),
                "plan (ms)": result.get("plan_ms_total"),
            }
        )
    return rows


def _rows_of(rows: list[dict[str, Any]], number: int | None, exp: Experiment) -> list[dict[str, Any]]:
    """The rows of table ``number`` (every row of a one-table experiment), without their tag."""
    wanted = {number, SAME_VALUES[number] if number in SAME_VALUES else number}
    first = exp.tables[0] if exp.tables else None  # a row of no paper table: the first page's
    chosen = rows if len(exp.tables) <= 1 else [r for r in rows if (r.get("_table") or first) in wanted]
    return [{k: v for k, v in r.items() if k != "_table"} for r in chosen]


def _same_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row with every column any row has (empty where it has none), in first-seen order."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    return [{k: row.get(k) for k in keys} for row in rows]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return "nan"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def table_markdown(
    exp: Experiment, rows: list[dict[str, Any]], reproduction: Reproduction, number: int | None = None
) -> str:
    title = f"Table {number}" if number is not None else "Ablation"
    lines = [f"# {title}: {exp.title}", ""]
    if len(exp.tables) > 1:
        pages = zip(exp.tables, page_names(exp), strict=True)
        others = [f"[Table {t}]({page}.md)" for t, page in pages if t != number]
        same = f" It holds the same values as Table {SAME_VALUES[number]}." if number in SAME_VALUES else ""
        lines += [f"One experiment makes this table and {' and '.join(others)}.{same}", ""]
    if exp.note:
        lines += [exp.note, ""]
    lines.append(
        f"Conditions `{reproduction.conditions}`{', quick (shortened) runs' if reproduction.quick else ''}; "
        + ("ratios are to the teacher." if exp.kind == "ablation" else "ratios are ours / the paper's.")
    )
    lines.append("")
    for t in exp.trainings:
        lines.append(f"- Policy `{t.name}`: {t.label}.")
    lines.append("")
    if rows:
        header = list(rows[0])
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in rows:
            lines.append("| " + " | ".join(_cell(row.get(k)) for k in header) + " |")
    page = page_names(exp)[exp.tables.index(number)] if number is not None else "ablation"
    lines += ["", f"![{title}]({page}.png)", ""]
    return "\n".join(lines)


def plot_table(exp: Experiment, rows: list[dict[str, Any]], path: Path) -> None:
    """Ours beside the paper's, per row (log scale): the ratios at a glance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = _plot_pairs(rows)
    fig, axes = plt.subplots(
        1, max(1, len(pairs)), figsize=(5.0 * max(1, len(pairs)), 0.35 * len(rows) + 2.0), squeeze=False
    )
    for ax, (name, ours_key, paper_key) in zip(axes[0], pairs, strict=False):
        labels = [str(r["row"])[:48] for r in rows]
        y = np.arange(len(rows))
        ours = [_number(r.get(ours_key)) for r in rows]
        theirs = [_number(r.get(paper_key)) for r in rows] if paper_key else [math.nan] * len(rows)
        ax.barh(y - 0.2, ours, 0.4, label="ours")
        if paper_key:
            ax.barh(y + 0.2, theirs, 0.4, label="paper")
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        if any(v > 0 for v in ours + theirs if math.isfinite(v)):
            ax.set_xscale("log")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def _plot_pairs(rows: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    if not rows:
        return []
    keys = [k for row in rows for k in row]
    pairs = []
    for key in dict.fromkeys(keys):
        if " ours " in key:
            name = key.split(" ours ")[0]
            paper_key = key.replace(" ours ", " paper ")
            pairs.append((name, key, paper_key if paper_key in keys else None))
        elif key.endswith("/ teacher"):
            pairs.append((key, key, None))
        elif key.endswith("(ms)") and key != "plan (ms)":
            pairs.append((key, key, None))
    return pairs[:4]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def reproduce(
    names: Iterable[str] | None,
    *,
    out: str | Path,
    quick: bool = False,
    conditions: str = "paper",
    progress: bool = True,
) -> Path:
    """Run the reproduction of the tables ``names`` (every one when None) into ``out``;
    returns its index page. Raises ``UsageError`` for an unknown table."""
    names = list(names or [])
    for name in names:
        experiment(name, quick, "paper")  # refuse an unknown table before any work
    return Reproduction(out, quick=quick, conditions=conditions, progress=progress).run(names or None)


__all__ = ["Reproduction", "UsageError", "reproduce"]


SUMMARY_MEASURES = {
    "rmse": ("position, orientation RMSE", ("position ratio", "orientation ratio")),
    "mean": ("position, orientation RMSE (mean of the flights)", ("position ratio", "orientation ratio")),
    "derivative": ("derivative MAE, overall", ("overall ratio",)),
    "pose": ("set point RMSE", ("position ratio", "orientation ratio")),
    "time": ("training time, total", ("total ratio",)),
}
"""What the README's results table compares for each kind of experiment, and from which columns."""

SUMMARY_WORDS = {8: "set point RMSE", 9: "end-pose errors of the goal sequence"}
"""What the results table compares for a table whose experiment makes another too."""


def results_summary(folder: str | Path, link_prefix: str = "") -> str:
    """A Markdown table of a reproduction folder: per table, the median over its rows of ours /
    the paper's, for the teacher's rows and the students' (the README's results table), each
    table linking to its page (``link_prefix`` before the file name)."""
    folder = Path(folder)
    lines = [
        "| table | compared | teacher (ours / paper, median) | student (ours / paper, median) |",
        "|---|---|---|---|",
    ]
    for name in experiment_names():
        exp = experiment(name, False, "paper")
        if exp.kind not in SUMMARY_MEASURES:
            continue
        for number, page in zip(exp.tables, page_names(exp), strict=True):
            path = folder / f"{page}.csv"
            if number in SAME_VALUES or not path.exists():
                continue
            words, columns = SUMMARY_MEASURES[exp.kind]
            words = SUMMARY_WORDS.get(number, words)
            with open(path, newline="") as fh:
                rows = list(csv.DictReader(fh))
            cells = []
            for who in ("teacher", "student"):
                mine = [
                    r
                    for r in rows
                    if r["row"].startswith("teacher") == (who == "teacher") and "MLP" not in r["row"]
                ]  # the MLP decoder is Table 3's baseline, not the student
                values = [[float(r[c]) for r in mine if r.get(c)] for c in columns]
                cells.append(", ".join(f"{np.median(v):.2g}" for v in values) if all(values) else "-")
            shown = f"{number}" + "".join(f", {t}" for t, same in SAME_VALUES.items() if same == number)
            lines.append(f"| [{shown}]({link_prefix}{page}.md) | {words} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"
