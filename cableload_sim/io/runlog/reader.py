"""Reading a run log back: decode the messages and resample every topic at the load's stamps.

The reader takes any ROS1 bag with these topics, so a real flight's bag (stamped with
wall-clock time, without the simulator's own topics) gives the same ``RunLog``, with NaN, finite
differences or None where a topic is missing.
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from cableload_sim.errors import FileContentError, InputMissingError, UsageError
from cableload_sim.io.runlog.scan import RawMessage, read_raw_messages
from cableload_sim.io.runlog.topics import (
    CONFIG_TOPIC,
    FORMAT,
    LOAD_ODOMETRY_TOPIC,
    LOAD_POSE_TOPIC,
    LOAD_REFERENCE_TOPIC,
    METRICS_TOPIC,
    OBSERVED_LOAD_TOPIC,
    OBSERVED_ODOMETRY_TOPIC,
    ODOMETRY_TOPIC,
    ONBOARD_ESTIMATE_TOPIC,
    OPERATOR_TOPIC,
    SAFETY_TOPIC,
    STATE_TOPIC,
    TENSION_TOPIC,
    TRAJECTORY_TOPIC,
    make_typestore,
    normalize_msgtype,
)
from cableload_sim.metrics import episode_metrics
from cableload_sim.params import (
    CableParams,
    FormationParams,
    LoadParams,
    QuadrotorParams,
    RotorParams,
    SystemParams,
)
from cableload_sim.physics.world import UavTrajectory, WorldSamples
from cableload_sim.rotations import quat_conjugate, quat_log, quat_multiply, quat_to_matrix

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore


class _Decoder:
    """Deserializes raw messages; types whose MD5 differs from ours use the bag's definition."""

    def __init__(self):
        self.store = make_typestore()
        self._cache: dict[tuple[str, str], tuple[Typestore, str] | None] = {}
        self.damaged = 0
        """Messages whose data did not deserialize (skipped)."""

    def decode(self, raw: RawMessage):
        conn = raw.connection
        key = (conn.msgtype, conn.md5sum)
        if key not in self._cache:
            self._cache[key] = self._resolve(conn)
        entry = self._cache[key]
        if entry is None:
            return None
        store, typename = entry
        try:
            return store.deserialize_ros1(raw.data, typename)
        except Exception:  # noqa: BLE001 - damaged bytes fail in many ways inside rosbags
            self.damaged += 1
            return None

    def _resolve(self, conn):
        from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore

        typename = normalize_msgtype(conn.msgtype)
        if typename in self.store.types:
            if self.store.generate_msgdef(typename)[1] == conn.md5sum:
                return self.store, typename
        if not conn.msgdef.strip():
            warnings.warn(
                f"topic {conn.topic}: type {conn.msgtype} has no definition in the "
                "bag and differs from the known one; skipped",
                stacklevel=3,
            )
            return None
        try:
            store = get_typestore(Stores.EMPTY)
            store.register(get_types_from_msg(conn.msgdef, typename))
        except TypesysError as err:
            warnings.warn(
                f"topic {conn.topic}: cannot parse the definition of {conn.msgtype}: {err}; skipped",
                stacklevel=3,
            )
            return None
        return store, typename


class LoggedPlan(NamedTuple):
    """The plans sent at time ``t`` (s), one per quadrotor in order (None if one is missing)."""

    t: float
    trajectories: list[UavTrajectory | None]


@dataclass
class OnboardEstimates:
    """The quadrotors' onboard estimates (``[imu]``) at K plan times."""

    t: np.ndarray
    """Times (s), shape (K,)."""
    p: np.ndarray
    """Positions (K, n, 3), world."""
    q: np.ndarray
    """Attitudes (K, n, 4), w, x, y, z."""
    v: np.ndarray
    """Velocities (K, n, 3), world."""


@dataclass(frozen=True)
class RunLog:
    """An episode read back from a bag."""

    path: Path
    samples: WorldSamples
    ref_p: np.ndarray | None
    """Load reference position (k, 3) at the sample times (m); None if not recorded."""
    ref_q: np.ndarray | None
    """Load reference attitude (k, 4), w, x, y, z; None if not recorded."""
    plans: list[LoggedPlan]
    config: dict | None
    """The resolved configuration (``Config.to_dict()``), None if not recorded."""
    metrics: dict | None
    """Final metrics with ``status``; None when the run did not finish (killed)."""
    system: SystemParams | None
    """The nominal system the episode used, None if not recorded."""
    quad_names: list[str]
    info: dict
    """Everything on the config topic: planner, reference, scenario, ..."""
    indexed: bool
    """Whether the bag had its index (closed properly)."""
    time_origin_ns: int = 0
    """ROS time of ``t = 0``: 0 for run logs (simulation time), the first sample's stamp for
    other bags (flights stamped with wall-clock time)."""
    observed: WorldSamples | None = None
    """The states the plans were made from, as the planners observed them, at the plan times
    (rotor speeds and tensions NaN); None if not recorded."""
    onboard: OnboardEstimates | None = None
    """The quadrotors' onboard estimates at the plan times (``[imu]``); None if not recorded."""
    safety_events: list[dict] = dataclasses.field(default_factory=list)
    """Every intervention of the safety module, in order (``t``, ``rule``, ``action``, ``uav``,
    ``reason``)."""
    operator_actions: list[dict] = dataclasses.field(default_factory=list)
    """Every action of the operator's station, in order."""

    @property
    def status(self) -> str | None:
        return None if self.metrics is None else self.metrics.get("status")

    def plan_at(self, t: float) -> LoggedPlan | None:
        """The latest plans sent at or before ``t`` (s)."""
        times = [plan.t for plan in self.plans]
        k = int(np.searchsorted(times, t + 1e-9, side="right")) - 1
        return self.plans[k] if k >= 0 else None


def resolve_bag_path(path) -> Path:
    """``path``, or ``<path>.active`` when only the unfinished bag of a killed run exists."""
    path = Path(path)
    if path.exists():
        return path
    active = path.with_name(path.name + ".active")
    if active.exists():
        return active
    raise InputMissingError(f"run log {str(path)!r} does not exist (nor {active.name!r})")


def read_run(path) -> RunLog:
    """Read a run log, or any ROS1 bag with agiros / mocap topics, as far as it goes.

    Samples are taken at the load pose's stamps (``/mocap/load/pose``, else the load odometry,
    else the first quadrotor's state) within the time range every per-sample topic covers;
    topics stamped at other times are interpolated linearly (attitudes normalized). Missing
    optional topics give NaN (rotor speeds, tensions), finite differences (load velocity and
    body rates) or None (reference, config, metrics, system).
    """
    path = resolve_bag_path(path)
    raw, indexed = read_raw_messages(path)
    decoder = _Decoder()
    by_topic: dict[str, list[tuple[int, object]]] = {}
    for message in raw:
        decoded = decoder.decode(message)
        if decoded is not None:
            by_topic.setdefault(message.connection.topic, []).append((message.time_ns, decoded))

    if decoder.damaged:
        warnings.warn(f"{str(path)!r}: {decoder.damaged} damaged messages skipped", stacklevel=2)

    info = _last_json(by_topic.get(CONFIG_TOPIC))
    metrics = _last_json(by_topic.get(METRICS_TOPIC)) if METRICS_TOPIC in by_topic else None
    quad_names = info.get("quad_names")
    if not (isinstance(quad_names, list) and quad_names and all(isinstance(q, str) for q in quad_names)):
        quad_names = _discover_quads(by_topic)
    system = None
    if "system" in info:
        try:
            system = system_from_dict(info["system"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise FileContentError(
                f"{str(path)!r}: the recorded system is unreadable ({type(err).__name__}: {err})"
            ) from None

    samples, ref_p, ref_q, origin = _samples(
        by_topic, quad_names, relative=info.get("format") != FORMAT, path=path
    )
    plans = _plans(by_topic, quad_names, origin)
    return RunLog(
        path,
        samples,
        ref_p,
        ref_q,
        plans,
        info.get("config"),
        metrics,
        system,
        quad_names,
        info,
        indexed,
        origin,
        _observed(by_topic, quad_names, origin),
        _onboard(by_topic, quad_names, origin),
        _json_records(by_topic.get(SAFETY_TOPIC)),
        _json_records(by_topic.get(OPERATOR_TOPIC)),
    )


def require_samples(run: RunLog) -> RunLog:
    """``run``, or a ``FileContentError`` when the bag holds none of the sample topics."""
    if len(run.samples) == 0:
        raise FileContentError(
            f"{str(run.path)!r} holds no samples of this project's topics ({LOAD_POSE_TOPIC}, "
            f"{LOAD_ODOMETRY_TOPIC} or {STATE_TOPIC.format(quad='<quad>')})"
        )
    return run


def metrics_from_bag(path, system: SystemParams | None = None) -> dict:
    """``episode_metrics`` of the recorded samples; ``system`` (for a bag that records none,
    e.g. a real flight's, or to override it) defaults to the one in the bag."""
    run = require_samples(read_run(path))
    system = system if system is not None else run.system
    if system is None:
        raise UsageError(
            f"{str(run.path)!r} records no system ({CONFIG_TOPIC} missing); "
            "pass the flight's configuration: --config FILE (system= in Python)"
        )
    if run.samples.n_uavs != system.n_uavs:
        raise UsageError(
            f"{str(run.path)!r}: {run.samples.n_uavs} quadrotors recorded, "
            f"the system given has {system.n_uavs}"
        )
    k = len(run.samples)
    ref_p = run.ref_p if run.ref_p is not None else np.full((k, 3), np.nan)
    ref_q = run.ref_q if run.ref_q is not None else np.full((k, 4), np.nan)
    return episode_metrics(run.samples, ref_p, ref_q, system)


def system_from_dict(data: dict) -> SystemParams:
    """Rebuild ``SystemParams`` from ``dataclasses.asdict(system)`` (as stored in a run log)."""

    def load(d):
        return LoadParams(
            mass=d["mass"],
            size=tuple(d["size"]),
            attachments=tuple(tuple(p) for p in d["attachments"]),
            inertia=None if d.get("inertia") is None else tuple(d["inertia"]),
        )

    def quad(d):
        return QuadrotorParams(
            mass=d["mass"],
            inertia=tuple(d["inertia"]),
            attachment=tuple(d["attachment"]),
            rotor=RotorParams(**d["rotor"]),
        )

    return SystemParams(
        load=load(data["load"]),
        quadrotors=tuple(quad(d) for d in data["quadrotors"]),
        cables=tuple(CableParams(**d) for d in data["cables"]),
        gravity=data["gravity"],
        formation=FormationParams(**data.get("formation", {})),
    )


def _json_records(entries) -> list[dict]:
    """Every JSON object on a String topic, in order (unreadable ones skipped with a warning)."""
    records = []
    for _, message in entries or ():
        try:
            value = json.loads(message.data)
        except json.JSONDecodeError as err:
            warnings.warn(f"run log JSON unreadable: {err}", stacklevel=3)
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def _last_json(entries) -> dict:
    if not entries:
        return {}
    try:
        value = json.loads(entries[-1][1].data)
    except json.JSONDecodeError as err:
        warnings.warn(f"run log JSON unreadable: {err}", stacklevel=3)
        return {}
    return value if isinstance(value, dict) else {}


def _natural_key(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _discover_quads(by_topic: dict) -> list[str]:
    names = set()
    for topic in by_topic:
        match = re.fullmatch(r"/([^/]+)/agiros_pilot/(state|odometry|trajectory)", topic)
        if match:
            names.add(match.group(1))
    return sorted(names, key=_natural_key)


class _Series(NamedTuple):
    """One topic's values at its (sorted, unique) stamps."""

    stamps: np.ndarray  # (m,) int64 ns
    values: dict[str, np.ndarray]

    def at(self, times: np.ndarray, name: str) -> np.ndarray:
        """Values at ``times``: exact where the stamps match, linearly interpolated elsewhere."""
        values = self.values[name]
        if self.matches(times):
            return values[np.searchsorted(self.stamps, times)]
        x = times.astype(float)
        xp = self.stamps.astype(float)
        flat = values.reshape(len(values), -1)
        out = np.column_stack([np.interp(x, xp, col) for col in flat.T])
        return out.reshape((len(times),) + values.shape[1:])

    def matches(self, times: np.ndarray) -> bool:
        """Whether every time is one of the stamps (values are then taken as recorded)."""
        idx = np.clip(np.searchsorted(self.stamps, times), 0, len(self.stamps) - 1)
        return bool(np.array_equal(self.stamps[idx], times))

    def attitude_at(self, times: np.ndarray, name: str) -> np.ndarray:
        if self.matches(times):
            return self.at(times, name)
        q = self.values[name].copy()
        # Same hemisphere as the previous sample, so interpolation takes the short way.
        for k in range(1, len(q)):
            if np.dot(q[k], q[k - 1]) < 0.0:
                q[k] = -q[k]
        series = _Series(self.stamps, {name: q})
        out = series.at(times, name)
        return out / np.linalg.norm(out, axis=-1, keepdims=True)


def _stamp(message) -> int:
    return int(message.header.stamp.sec) * 10**9 + int(message.header.stamp.nanosec)


def _vec(v) -> list[float]:
    return [v.x, v.y, v.z]


def _quat(q) -> list[float]:
    return [q.w, q.x, q.y, q.z]


def _series(entries, extract: dict) -> _Series | None:
    """Series of the named fields ``extract[name](message)`` at the header stamps."""
    if not entries:
        return None
    by_stamp = {_stamp(m): m for _, m in entries}  # a repeated stamp keeps the last message
    stamps = np.array(sorted(by_stamp), dtype=np.int64)
    ordered = [by_stamp[s] for s in stamps]
    values = {name: np.array([f(m) for m in ordered], dtype=float) for name, f in extract.items()}
    return _Series(stamps, values)


def _pose_series(entries) -> _Series | None:
    return _series(entries, {"p": lambda m: _vec(m.pose.position), "q": lambda m: _quat(m.pose.orientation)})


def _odometry_series(entries) -> _Series | None:
    return _series(
        entries,
        {
            "p": lambda m: _vec(m.pose.pose.position),
            "q": lambda m: _quat(m.pose.pose.orientation),
            "v_body": lambda m: _vec(m.twist.twist.linear),
            "omega": lambda m: _vec(m.twist.twist.angular),
        },
    )


def _state_series(entries) -> _Series | None:
    return _series(
        entries,
        {
            "t": lambda m: m.t,
            "p": lambda m: _vec(m.pose.position),
            "q": lambda m: _quat(m.pose.orientation),
            "v": lambda m: _vec(m.velocity.linear),
            "omega": lambda m: _vec(m.velocity.angular),
            "motors": lambda m: list(m.motors) if len(m.motors) == 4 else [np.nan] * 4,
        },
    )


def _samples(by_topic: dict, quad_names: list[str], relative: bool, path=None):
    load_pose = _pose_series(by_topic.get(LOAD_POSE_TOPIC))
    load_odom = _odometry_series(by_topic.get(LOAD_ODOMETRY_TOPIC))
    reference = _pose_series(by_topic.get(LOAD_REFERENCE_TOPIC))
    tension = (
        _series(by_topic.get(TENSION_TOPIC), {"tension": lambda m: list(m.tension)})
        if by_topic.get(TENSION_TOPIC)
        else None
    )
    states = [_state_series(by_topic.get(STATE_TOPIC.format(quad=q))) for q in quad_names]
    odoms = [_odometry_series(by_topic.get(ODOMETRY_TOPIC.format(quad=q))) for q in quad_names]
    quads = [s if s is not None else o for s, o in zip(states, odoms, strict=True)]
    n = len(quad_names)
    if tension is not None and tension.values["tension"].shape[1:] != (n,):
        warnings.warn(
            f"{TENSION_TOPIC}: {tension.values['tension'].shape[1:]} tensions per "
            f"message for {n} quadrotors; ignored",
            stacklevel=3,
        )
        tension = None

    base = load_pose or load_odom or next((q for q in quads if q is not None), None)
    present = [s for s in (load_pose, load_odom, reference, tension, *quads) if s is not None]
    if base is None:
        return WorldSamples.empty(n), None, None, 0
    lo = max(s.stamps[0] for s in present)
    hi = min(s.stamps[-1] for s in present)
    times = base.stamps[(base.stamps >= lo) & (base.stamps <= hi)]
    k = len(times)

    origin = int(times[0]) if relative and k else 0
    t = (times - origin) / 1e9
    first = states[0] if states else None
    if first is not None and origin == 0:
        if k and first.matches(times) and np.allclose(first.at(times, "t"), t, rtol=0.0, atol=1e-6):
            t = first.at(times, "t")  # the exact float time the simulator wrote

    pose_source = load_pose or load_odom
    if pose_source is None and k:
        raise FileContentError(
            f"{str(path)!r}: the quadrotors are recorded but not the load; expected its pose "
            f"({LOAD_POSE_TOPIC}) or odometry ({LOAD_ODOMETRY_TOPIC})"
        )
    load_p = pose_source.at(times, "p") if pose_source is not None else np.zeros((0, 3))
    load_q = pose_source.attitude_at(times, "q") if pose_source is not None else np.zeros((0, 4))
    if load_odom is not None and k:
        load_q_odom = load_odom.attitude_at(times, "q")
        load_v = np.einsum("kij,kj->ki", quat_to_matrix(load_q_odom), load_odom.at(times, "v_body"))
        load_omega = load_odom.at(times, "omega")
    else:
        load_v, load_omega = _finite_differences(t, load_p, load_q)

    uav = {
        name: np.full((k, n, size), np.nan)
        for name, size in (("p", 3), ("q", 4), ("v", 3), ("omega", 3), ("motors", 4))
    }
    for i, (state, odom) in enumerate(zip(states, odoms, strict=True)):
        if k == 0:
            break
        if state is not None:
            uav["p"][:, i] = state.at(times, "p")
            uav["q"][:, i] = state.attitude_at(times, "q")
            uav["v"][:, i] = state.at(times, "v")
            uav["omega"][:, i] = state.at(times, "omega")
            uav["motors"][:, i] = state.at(times, "motors")
        elif odom is not None:
            uav["p"][:, i] = odom.at(times, "p")
            uav["q"][:, i] = odom.attitude_at(times, "q")
            uav["v"][:, i] = np.einsum("kij,kj->ki", quat_to_matrix(uav["q"][:, i]), odom.at(times, "v_body"))
            uav["omega"][:, i] = odom.at(times, "omega")
    cable_tension = tension.at(times, "tension") if tension is not None and k else np.full((k, n), np.nan)

    samples = WorldSamples(
        t=np.asarray(t, dtype=float),
        load_p=load_p,
        load_q=load_q,
        load_v=load_v,
        load_omega=load_omega,
        uav_p=uav["p"],
        uav_q=uav["q"],
        uav_v=uav["v"],
        uav_omega=uav["omega"],
        rotor_speeds=uav["motors"],
        cable_tension=cable_tension,
    )
    if reference is None or k == 0:
        return samples, None, None, origin
    return samples, reference.at(times, "p"), reference.attitude_at(times, "q"), origin


def _observed(by_topic: dict, quad_names: list[str], origin: int) -> WorldSamples | None:
    """The observed states at the observed load's stamps, when every body's were recorded."""
    load = _odometry_series(by_topic.get(OBSERVED_LOAD_TOPIC))
    series = [_odometry_series(by_topic.get(OBSERVED_ODOMETRY_TOPIC.format(quad=q))) for q in quad_names]
    if load is None or any(q is None for q in series):
        return None
    quads = cast("list[_Series]", series)  # none is None (checked above)
    times = load.stamps
    k, n = len(times), len(quad_names)
    load_q = load.at(times, "q")
    uav_q = np.stack([q.attitude_at(times, "q") for q in quads], axis=1)
    uav_v_body = np.stack([q.at(times, "v_body") for q in quads], axis=1)
    return WorldSamples(
        t=(times - origin) / 1e9,
        load_p=load.at(times, "p"),
        load_q=load_q,
        load_v=np.einsum("kij,kj->ki", quat_to_matrix(load_q), load.at(times, "v_body")),
        load_omega=load.at(times, "omega"),
        uav_p=np.stack([q.at(times, "p") for q in quads], axis=1),
        uav_q=uav_q,
        uav_v=np.einsum("knij,knj->kni", quat_to_matrix(uav_q), uav_v_body),
        uav_omega=np.stack([q.at(times, "omega") for q in quads], axis=1),
        rotor_speeds=np.full((k, n, 4), np.nan),
        cable_tension=np.full((k, n), np.nan),
    )


def _onboard(by_topic: dict, quad_names: list[str], origin: int) -> OnboardEstimates | None:
    """The onboard estimates at the first quadrotor's stamps, when every one's were recorded."""
    series = [_odometry_series(by_topic.get(ONBOARD_ESTIMATE_TOPIC.format(quad=q))) for q in quad_names]
    if not series or any(q is None for q in series):
        return None
    quads = cast("list[_Series]", series)  # none is None (checked above)
    times = quads[0].stamps
    uav_q = np.stack([q.attitude_at(times, "q") for q in quads], axis=1)
    v_body = np.stack([q.at(times, "v_body") for q in quads], axis=1)
    return OnboardEstimates(
        t=(times - origin) / 1e9,
        p=np.stack([q.at(times, "p") for q in quads], axis=1),
        q=uav_q,
        v=np.einsum("knij,knj->kni", quat_to_matrix(uav_q), v_body),
    )


def _finite_differences(t: np.ndarray, p: np.ndarray, q: np.ndarray):
    """World velocity and body rates from poses (used when no twist was recorded)."""
    k = len(t)
    if k < 2:
        return np.zeros((k, 3)), np.zeros((k, 3))
    v = np.gradient(p, t, axis=0)
    dt = np.diff(t)[:, None]
    rates = quat_log(quat_multiply(quat_conjugate(q[:-1]), q[1:])) / dt
    omega = np.vstack([rates, rates[-1:]])
    return v, omega


def _plans(by_topic: dict, quad_names: list[str], origin: int) -> list[LoggedPlan]:
    n = len(quad_names)
    grouped: dict[int, list] = {}
    for i, quad in enumerate(quad_names):
        for _, message in by_topic.get(TRAJECTORY_TOPIC.format(quad=quad), []):
            trajectory = _trajectory(message, origin / 1e9)
            if trajectory is not None:
                grouped.setdefault(_stamp(message), [None] * n)[i] = trajectory
    return [LoggedPlan((stamp - origin) / 1e9, grouped[stamp]) for stamp in sorted(grouped)]


def _trajectory(message, origin_s: float) -> UavTrajectory | None:
    points = message.points
    if len(points) < 2:
        return None
    return UavTrajectory(
        t=np.array([pt.state.t for pt in points]) - origin_s,
        p=np.array([_vec(pt.state.pose.position) for pt in points]),
        v=np.array([_vec(pt.state.velocity.linear) for pt in points]),
        a=np.array([_vec(pt.state.acceleration.linear) for pt in points]),
        j=np.array([_vec(pt.state.jerk) for pt in points]),
        body_rates=np.array([_vec(pt.command.bodyrates) for pt in points]),
    )
