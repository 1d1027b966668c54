"""Run logs: an episode written as a ROS1 bag (format 2.0) as it happens, and read back.

The bag holds the topics a real flight records, so the same reader, plots and replay work on
both, plus a few topics of the simulator's own:

- ``/<quad>/agiros_pilot/state``: ``agiros_msgs/QuadState``, every sample;
- ``/<quad>/agiros_pilot/odometry``: ``nav_msgs/Odometry``, every sample;
- ``/<quad>/agiros_pilot/trajectory``: ``agiros_msgs/Reference``, every plan;
- ``/mocap/load/pose``: ``geometry_msgs/PoseStamped``, every sample;
- ``/cableload/load/odometry``: ``nav_msgs/Odometry``, every sample;
- ``/cableload/load/reference``: ``geometry_msgs/PoseStamped``, every sample;
- ``/cableload/cable_tension``: ``cableload_msgs/CableTension``, every sample;
- ``/cableload/config``: ``std_msgs/String`` (JSON, latched), once at the start;
- ``/cableload/metrics``: ``std_msgs/String`` (JSON, latched), once at the end.

Quadrotors are named ``quad1`` .. ``quadN`` unless given names. Header stamps and record times
are the simulation time (s since the episode's start, as ROS time). Frames and units:

- World frame ``world``: z up, gravity along -z; m, m/s, rad/s, N.
- Poses: position in the world, orientation body to world (ROS order x, y, z, w; the
  project's arrays are w, x, y, z).
- ``QuadState``: ``t`` the sample time (s); ``velocity.linear`` world (m/s);
  ``velocity.angular`` body rates in the body frame (rad/s); ``motors`` the four rotor speeds
  (rad/s); acceleration, biases, jerk and snap are not recorded (zero).
- ``nav_msgs/Odometry``: as that message defines, the twist is in the child frame
  (``<quad>/body`` or ``load``): linear velocity and angular velocity both in the body frame.
- ``Reference``: one ``Setpoint`` per plan node; ``state.t`` the node time (s),
  ``state.pose.position``, ``state.velocity.linear``, ``state.acceleration.linear`` and
  ``state.jerk`` the planned world position, velocity, acceleration and jerk;
  ``command.bodyrates`` (also ``state.velocity.angular``) the planned body rates. Plans carry no
  attitude (identity orientation) and no thrust (zero). The header stamp is the plan's time.
- ``CableTension.tension``: each cable's tension (N) in quadrotor order, 0 when slack.
- ``/cableload/config``: ``{"format", "version", "quad_names", "planner", "reference",
  "scenario", "system", "config"}``, ``system`` being the nominal ``SystemParams`` as a dict
  and ``config`` the resolved ``Config.to_dict()``.
- ``/cableload/metrics``: the episode's metrics and ``status``.

Durability: the bag is written as ``<path>.active`` (as ``rosbag record`` does) and renamed to
``<path>`` when closed. Every simulated second (``flush_period_s``) the open chunk is closed,
written and flushed to the operating system (and fsync'ed), so a writer killed midway leaves a
bag readable up to its last flushed second. Such a bag has no index; ``read_run`` then scans its
chunks in order and recovers the connection records from them, as ``rosbag reindex`` does.
"""

from __future__ import annotations

import bz2
import dataclasses
import functools
import json
import math
import os
import re
import struct
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from cableload_sim.metrics import episode_metrics
from cableload_sim.params import (
    CableParams,
    FormationParams,
    LoadParams,
    QuadrotorParams,
    RotorParams,
    SystemParams,
)
from cableload_sim.rotations import quat_conjugate, quat_log, quat_multiply, quat_to_matrix
from cableload_sim.world import UavTrajectory, WorldSamples

FORMAT = "cableload-runlog"
VERSION = 1

STATE_TOPIC = "/{quad}/agiros_pilot/state"
ODOMETRY_TOPIC = "/{quad}/agiros_pilot/odometry"
TRAJECTORY_TOPIC = "/{quad}/agiros_pilot/trajectory"
LOAD_POSE_TOPIC = "/mocap/load/pose"
LOAD_ODOMETRY_TOPIC = "/cableload/load/odometry"
LOAD_REFERENCE_TOPIC = "/cableload/load/reference"
TENSION_TOPIC = "/cableload/cable_tension"
CONFIG_TOPIC = "/cableload/config"
METRICS_TOPIC = "/cableload/metrics"

QUAD_STATE = "agiros_msgs/msg/QuadState"
REFERENCE = "agiros_msgs/msg/Reference"
ODOMETRY = "nav_msgs/msg/Odometry"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
STRING = "std_msgs/msg/String"
CABLE_TENSION = "cableload_msgs/msg/CableTension"

WORLD_FRAME = "world"


def default_quad_names(n: int) -> list[str]:
    """``quad1`` .. ``quadN``."""
    return [f"quad{i + 1}" for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Message types


@functools.lru_cache(maxsize=1)
def make_typestore():
    """ROS1 Noetic's standard types plus the shipped ``agiros_msgs`` and ``cableload_msgs``."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    types = {}
    msgs = resources.files("cableload_sim").joinpath("msgs")
    for package in sorted(msgs.iterdir(), key=lambda p: p.name):
        if not package.is_dir():
            continue
        for file in sorted(package.iterdir(), key=lambda p: p.name):
            if file.name.endswith(".msg"):
                name = f"{package.name}/msg/{file.name[:-4]}"
                types.update(get_types_from_msg(file.read_text(), name))
    store.register(types)
    return store


def message_md5(msgtype: str) -> str:
    """The ROS1 MD5 sum of a type, e.g. ``agiros_msgs/Reference``, as rosbags computes it."""
    return make_typestore().generate_msgdef(_normalize_msgtype(msgtype))[1]


def _normalize_msgtype(name: str) -> str:
    """``pkg/Type`` -> ``pkg/msg/Type`` (rosbags' spelling)."""
    parts = name.split("/")
    return name if len(parts) == 3 else f"{parts[0]}/msg/{parts[-1]}"


def _ros_time_ns(t: float) -> int:
    if not math.isfinite(t) or t < 0.0:
        raise ValueError(f"time: expected a finite non-negative number of seconds, got {t!r}")
    return int(round(t * 1e9))


class _Builder:
    """Builds messages from arrays (world frame, quaternions w, x, y, z)."""

    def __init__(self, store):
        types = store.types
        self.Header = types["std_msgs/msg/Header"]
        self.Time = types["builtin_interfaces/msg/Time"]
        self.Point = types["geometry_msgs/msg/Point"]
        self.Quaternion = types["geometry_msgs/msg/Quaternion"]
        self.Vector3 = types["geometry_msgs/msg/Vector3"]
        self.Pose = types["geometry_msgs/msg/Pose"]
        self.Twist = types["geometry_msgs/msg/Twist"]
        self.PoseStamped = types[POSE_STAMPED]
        self.PoseCov = types["geometry_msgs/msg/PoseWithCovariance"]
        self.TwistCov = types["geometry_msgs/msg/TwistWithCovariance"]
        self.Odometry = types[ODOMETRY]
        self.String = types[STRING]
        self.QuadState = types[QUAD_STATE]
        self.Command = types["agiros_msgs/msg/Command"]
        self.Setpoint = types["agiros_msgs/msg/Setpoint"]
        self.Reference = types[REFERENCE]
        self.CableTension = types[CABLE_TENSION]
        self.zero3 = self.Vector3(0.0, 0.0, 0.0)
        self.zero_twist = self.Twist(self.zero3, self.zero3)
        self.covariance = np.zeros(36)

    def header(self, stamp_ns: int, frame: str = WORLD_FRAME, seq: int = 0):
        return self.Header(seq, self.Time(stamp_ns // 10**9, stamp_ns % 10**9), frame)

    def vector(self, v) -> object:
        return self.Vector3(*v)

    def pose(self, p, q_wxyz):
        w, x, y, z = q_wxyz
        return self.Pose(self.Point(*p), self.Quaternion(x, y, z, w))

    def twist(self, linear, angular):
        return self.Twist(self.Vector3(*linear), self.Vector3(*angular))

    def odometry(self, header, child, p, q, v_body, omega_body):
        return self.Odometry(header, child, self.PoseCov(self.pose(p, q), self.covariance),
                             self.TwistCov(self.twist(v_body, omega_body), self.covariance))

    def quad_state(self, header, t, p, q, v, omega, motors, acceleration=None, jerk=None):
        accel = self.zero_twist if acceleration is None else self.twist(acceleration, (0, 0, 0))
        return self.QuadState(
            header, t, self.pose(p, q), self.twist(v, omega), accel, self.zero3, self.zero3,
            self.zero3 if jerk is None else self.vector(jerk), self.zero3, motors,
        )


# ---------------------------------------------------------------------------------------------
# Writer


class RunLogWriter:
    """Writes an episode to a ROS1 bag as it runs; an ``EpisodeLogger`` for ``run_episode``.

    ``config`` is the resolved ``Config`` (or its dict) stored in the bag; ``quad_names``
    default to ``quad1`` .. ``quadN``. The bag is written as ``<path>.active`` and renamed to
    ``path`` by ``finish``/``close``; use it as a context manager so an exception still closes
    it (complete, without metrics). An existing ``path`` is an error unless ``overwrite``.
    """

    def __init__(self, path, config=None, quad_names=None, *, overwrite: bool = False,
                 flush_period_s: float = 1.0, fsync: bool = True):
        self.path = Path(path)
        self.active_path = self.path.with_name(self.path.name + ".active")
        for existing in (self.path, self.active_path):
            if existing.exists():
                if not overwrite:
                    raise FileExistsError(f"run log {str(existing)!r} exists already; "
                                          "choose another path or pass overwrite=True")
                existing.unlink()
        if not flush_period_s > 0.0:
            raise ValueError(f"flush_period_s: expected a positive number, got {flush_period_s!r}")
        if config is not None and not isinstance(config, dict):
            config = config.to_dict()
        self.config = config
        self.quad_names = list(quad_names) if quad_names is not None else None
        self.flush_period_s = float(flush_period_s)
        self.fsync = fsync
        self.flushed_time = -math.inf
        """Simulation time (s) up to which every sample is on disk."""
        self._bag = None
        self._closed = False
        self._last_t = 0.0
        self._next_flush = self.flush_period_s

    # EpisodeLogger protocol ------------------------------------------------------------------

    def start(self, system: SystemParams, reference=None, scenario=None,
              planner_name: str = "") -> None:
        """Open the bag, register every topic, write the configuration and flush."""
        from rosbags.rosbag1 import Writer

        if self._bag is not None or self._closed:
            raise RuntimeError(f"run log {str(self.path)!r}: start() may be called only once")
        n = system.n_uavs
        names = self.quad_names if self.quad_names is not None else default_quad_names(n)
        if len(names) != n or len(set(names)) != n:
            raise ValueError(f"quad_names: expected {n} distinct names, got {names!r}")
        bad = [q for q in names if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", q)]
        if bad:
            raise ValueError(f"quad_names: {bad[0]!r} is not a valid ROS name component")
        self.quad_names = names
        self._store = make_typestore()
        self._msg = _Builder(self._store)
        self._bag = Writer(self.active_path)
        self._bag.open()
        self._seq: dict[str, int] = {}
        self._conn = {}
        for quad in names:
            self._add(STATE_TOPIC.format(quad=quad), QUAD_STATE)
            self._add(ODOMETRY_TOPIC.format(quad=quad), ODOMETRY)
            self._add(TRAJECTORY_TOPIC.format(quad=quad), REFERENCE)
        self._add(LOAD_POSE_TOPIC, POSE_STAMPED)
        self._add(LOAD_ODOMETRY_TOPIC, ODOMETRY)
        self._add(LOAD_REFERENCE_TOPIC, POSE_STAMPED)
        self._add(TENSION_TOPIC, CABLE_TENSION)
        self._add(CONFIG_TOPIC, STRING, latching=1)
        self._add(METRICS_TOPIC, STRING, latching=1)
        info = {
            "format": FORMAT,
            "version": VERSION,
            "quad_names": names,
            "planner": planner_name,
            "reference": _describe_reference(reference),
            "scenario": _describe_scenario(scenario),
            "system": dataclasses.asdict(system),
            "config": self.config if self.config is not None else {
                "system": dataclasses.asdict(system)},
        }
        self._write(CONFIG_TOPIC, 0, self._msg.String(_to_json(info)))
        self._flush()

    def plans(self, t: float, trajectories: list[UavTrajectory]) -> None:
        """One plan per quadrotor sent at time ``t`` (s)."""
        self._check_open()
        if len(trajectories) != len(self.quad_names):
            raise ValueError(f"plans: expected {len(self.quad_names)} trajectories, "
                             f"got {len(trajectories)}")
        stamp = _ros_time_ns(t)
        msg = self._msg
        for quad, traj in zip(self.quad_names, trajectories, strict=True):
            points = []
            for k in range(traj.n_nodes):
                node_stamp = _ros_time_ns(max(float(traj.t[k]), 0.0))
                rates = traj.body_rates[k].tolist()
                state = msg.quad_state(
                    msg.header(node_stamp), float(traj.t[k]), traj.p[k].tolist(),
                    (1.0, 0.0, 0.0, 0.0), traj.v[k].tolist(), rates, np.zeros(0),
                    acceleration=traj.a[k].tolist(), jerk=traj.j[k].tolist(),
                )
                command = msg.Command(msg.header(node_stamp), float(traj.t[k]), False, 0.0,
                                      msg.vector(rates), np.zeros(4))
                points.append(msg.Setpoint(state, command))
            topic = TRAJECTORY_TOPIC.format(quad=quad)
            self._write(topic, stamp, msg.Reference(self._header(topic, stamp), points))

    def samples(self, samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray) -> None:
        """Samples with the load reference at the same times; flushes every simulated second."""
        self._check_open()
        k_count = len(samples)
        if k_count == 0:
            return
        if samples.n_uavs != len(self.quad_names):
            raise ValueError(f"samples: expected {len(self.quad_names)} quadrotors, "
                             f"got {samples.n_uavs}")
        ref_p = np.asarray(ref_p, dtype=float)
        ref_q = np.asarray(ref_q, dtype=float)
        if ref_p.shape != (k_count, 3) or ref_q.shape != (k_count, 4):
            raise ValueError(f"samples: reference shapes {ref_p.shape}, {ref_q.shape}; expected "
                             f"({k_count}, 3) and ({k_count}, 4)")
        msg = self._msg
        # Odometry twists are in the child (body) frame: v_body = R^T v_world.
        load_v_body = np.einsum("kji,kj->ki", quat_to_matrix(samples.load_q), samples.load_v)
        uav_v_body = np.einsum("knji,knj->kni", quat_to_matrix(samples.uav_q), samples.uav_v)
        arrays = {f: getattr(samples, f).tolist() for f in WorldSamples.FIELDS}
        load_v_body = load_v_body.tolist()
        uav_v_body = uav_v_body.tolist()
        ref_p_list, ref_q_list = ref_p.tolist(), ref_q.tolist()
        for k in range(k_count):
            t = arrays["t"][k]
            stamp = _ros_time_ns(t)
            for i, quad in enumerate(self.quad_names):
                p, q = arrays["uav_p"][k][i], arrays["uav_q"][k][i]
                omega = arrays["uav_omega"][k][i]
                topic = STATE_TOPIC.format(quad=quad)
                self._write(topic, stamp, msg.quad_state(
                    self._header(topic, stamp), t, p, q, arrays["uav_v"][k][i], omega,
                    np.array(arrays["rotor_speeds"][k][i])))
                topic = ODOMETRY_TOPIC.format(quad=quad)
                self._write(topic, stamp, msg.odometry(
                    self._header(topic, stamp), f"{quad}/body", p, q, uav_v_body[k][i], omega))
            self._write(LOAD_POSE_TOPIC, stamp, msg.PoseStamped(
                self._header(LOAD_POSE_TOPIC, stamp),
                msg.pose(arrays["load_p"][k], arrays["load_q"][k])))
            self._write(LOAD_ODOMETRY_TOPIC, stamp, msg.odometry(
                self._header(LOAD_ODOMETRY_TOPIC, stamp), "load", arrays["load_p"][k],
                arrays["load_q"][k], load_v_body[k], arrays["load_omega"][k]))
            self._write(LOAD_REFERENCE_TOPIC, stamp, msg.PoseStamped(
                self._header(LOAD_REFERENCE_TOPIC, stamp), msg.pose(ref_p_list[k], ref_q_list[k])))
            self._write(TENSION_TOPIC, stamp, msg.CableTension(
                self._header(TENSION_TOPIC, stamp), np.array(arrays["cable_tension"][k])))
        self._last_t = max(self._last_t, arrays["t"][-1])
        if self._last_t >= self._next_flush - 1e-9:
            self._flush()
            periods = math.floor(self._last_t / self.flush_period_s + 1e-9) + 1
            self._next_flush = periods * self.flush_period_s

    def finish(self, status: str, metrics: dict) -> None:
        """Write the metrics (with ``status``) and close the bag."""
        self._check_open()
        record = dict(metrics)
        record["status"] = str(status)
        self._write(METRICS_TOPIC, _ros_time_ns(self._last_t), self._msg.String(_to_json(record)))
        self.close()

    # Closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Write the index, make it durable and rename ``<path>.active`` to ``path``."""
        if self._closed:
            return
        self._closed = True
        if self._bag is None:
            return
        self._bag.close()
        if self.fsync:
            fd = os.open(self.active_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(self.active_path, self.path)

    def __enter__(self) -> RunLogWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.close()
        return False

    # Internals -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._bag is None or self._closed:
            state = "closed" if self._closed else "not started (call start() first)"
            raise RuntimeError(f"run log {str(self.path)!r} is {state}")

    def _add(self, topic: str, msgtype: str, latching: int | None = None) -> None:
        self._conn[topic] = (self._bag.add_connection(
            topic, msgtype, typestore=self._store, callerid="/cableload", latching=latching),
            msgtype)

    def _header(self, topic: str, stamp: int):
        seq = self._seq.get(topic, 0)
        self._seq[topic] = seq + 1
        return self._msg.header(stamp, seq=seq)

    def _write(self, topic: str, stamp: int, message) -> None:
        connection, msgtype = self._conn[topic]
        self._bag.write(connection, stamp, self._store.serialize_ros1(message, msgtype))

    def _flush(self) -> None:
        """Close the open chunk and push it to the disk."""
        bag = self._bag
        bag.write_chunk(bag.chunks[-1])
        bag.bio.flush()
        if self.fsync:
            os.fsync(bag.bio.fileno())
        self.flushed_time = self._last_t


def _describe_reference(reference) -> dict | None:
    if reference is None:
        return None
    describe = getattr(reference, "describe", None)
    info = dict(describe()) if callable(describe) else {}
    info.setdefault("name", getattr(reference, "name", type(reference).__name__))
    return info


def _describe_scenario(scenario) -> dict | None:
    if scenario is None:
        return None
    disturbance = getattr(scenario, "disturbance", None)
    return {
        "load_p": np.asarray(scenario.load_p, dtype=float).tolist(),
        "load_q": np.asarray(scenario.load_q, dtype=float).tolist(),
        "seed": getattr(scenario, "seed", None),
        "disturbance": dataclasses.asdict(disturbance)
        if dataclasses.is_dataclass(disturbance) else None,
    }


def _to_json(value) -> str:
    def default(obj):
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        if isinstance(obj, Path):
            return str(obj)
        raise TypeError(f"cannot write {type(obj).__name__} {obj!r} to a run log as JSON")

    return json.dumps(value, default=default)


# ---------------------------------------------------------------------------------------------
# Raw bag access: indexed through rosbags, or by scanning the chunks of an unindexed bag


class BagConnection(NamedTuple):
    """A topic's connection record: ROS1 type ``pkg/Type``, MD5 sum and definition text."""

    topic: str
    msgtype: str
    md5sum: str
    msgdef: str


class RawMessage(NamedTuple):
    connection: BagConnection
    time_ns: int
    data: bytes


_U32 = struct.Struct("<L")
_BAG_MAGIC = b"#ROSBAG V2.0\n"
_OP_MSGDATA, _OP_BAGHEADER, _OP_CHUNK, _OP_CONNECTION = 2, 3, 5, 7


def read_raw_messages(path) -> tuple[list[RawMessage], bool]:
    """Every message of a ROS1 bag in time order, and whether the bag had a usable index.

    An indexed bag is read with rosbags; one without an index (a writer killed before
    closing it) or with a damaged one is scanned chunk by chunk.
    """
    from rosbags.rosbag1 import Reader, ReaderError

    path = Path(path)
    try:
        with Reader(path) as reader:
            messages = [
                RawMessage(BagConnection(c.topic, _denormalize(c.msgtype), c.digest,
                                         c.msgdef.data), t, bytes(raw))
                for c, t, raw in reader.messages()
            ]
        return messages, True
    except ReaderError as err:
        messages = scan_bag(path)
        if not messages and not path.read_bytes().startswith(_BAG_MAGIC):
            raise ValueError(f"{str(path)!r} is not a ROS1 bag (version 2.0): {err}") from None
        return messages, False


def scan_bag(path) -> list[RawMessage]:
    """Messages of a ROS1 bag read sequentially, without its index (like ``rosbag reindex``).

    Connection records are taken from the chunks (and from the index section if present).
    Reading stops at the first incomplete record; an uncompressed chunk cut short still gives
    its complete messages. Messages are returned in time order.
    """
    data = Path(path).read_bytes()
    if not data.startswith(_BAG_MAGIC):
        raise ValueError(f"{str(path)!r} is not a ROS1 bag (version 2.0): bad magic line")
    connections: dict[int, BagConnection] = {}
    messages: list[RawMessage] = []
    pos = len(_BAG_MAGIC)
    while True:
        record = _read_record(data, pos)
        if record is None:
            break
        fields, body, pos, complete = record
        if "op" not in fields or (not complete and fields.get("compression") != b"none"):
            break
        op = fields.get("op", b"\0")[0]
        if op == _OP_CHUNK:
            compression = fields["compression"].decode()
            _scan_chunk(_decompress(compression, body), connections, messages)
        elif op == _OP_CONNECTION:
            _add_connection(fields, body, connections)
        if not complete:
            break
    messages.sort(key=lambda m: m.time_ns)
    return messages


def _read_record(data: bytes, pos: int):
    """(header fields, data, next position, complete) or None at the end or a cut header."""
    if pos + 4 > len(data):
        return None
    (header_len,) = _U32.unpack_from(data, pos)
    start = pos + 4
    if start + header_len + 4 > len(data):
        return None
    fields = _parse_fields(data[start:start + header_len])
    if fields is None:
        return None
    (data_len,) = _U32.unpack_from(data, start + header_len)
    body_start = start + header_len + 4
    body_end = body_start + data_len
    complete = body_end <= len(data)
    return fields, data[body_start:min(body_end, len(data))], body_end, complete


def _parse_fields(block: bytes) -> dict[str, bytes] | None:
    fields = {}
    pos = 0
    while pos < len(block):
        if pos + 4 > len(block):
            return None
        (size,) = _U32.unpack_from(block, pos)
        item = block[pos + 4:pos + 4 + size]
        if len(item) != size or b"=" not in item:
            return None
        key, value = item.split(b"=", 1)
        fields[key.decode()] = value
        pos += 4 + size
    return fields


def _decompress(compression: str, body: bytes) -> bytes:
    if compression == "none":
        return body
    if compression == "bz2":
        return bz2.decompress(body)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(body)
    raise ValueError(f"chunk compression {compression!r} is not supported; "
                     "expected none, bz2 or lz4")


def _scan_chunk(chunk: bytes, connections: dict, messages: list) -> None:
    pos = 0
    while True:
        record = _read_record(chunk, pos)
        if record is None or not record[3]:
            return
        fields, body, pos, _ = record
        op = fields.get("op", b"\0")[0]
        if op == _OP_CONNECTION:
            _add_connection(fields, body, connections)
        elif op == _OP_MSGDATA:
            conn = connections.get(_U32.unpack(fields["conn"])[0])
            if conn is not None:
                sec, nsec = struct.unpack("<LL", fields["time"])
                messages.append(RawMessage(conn, sec * 10**9 + nsec, body))


def _add_connection(fields: dict, body: bytes, connections: dict) -> None:
    info = _parse_fields(body) or {}
    conn_id = _U32.unpack(fields["conn"])[0]
    topic = fields["topic"].decode()
    topic = "/" * topic.startswith("/") + "/".join(x for x in topic.split("/") if x)
    connections[conn_id] = BagConnection(
        topic,
        info.get("type", b"").decode(),
        info.get("md5sum", b"").decode(),
        info.get("message_definition", b"").decode(),
    )


def _denormalize(msgtype: str) -> str:
    parts = msgtype.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 else msgtype


class _Decoder:
    """Deserializes raw messages; types whose MD5 differs from ours use the bag's definition."""

    def __init__(self):
        self.store = make_typestore()
        self._cache: dict[tuple[str, str], tuple[object, str] | None] = {}

    def decode(self, raw: RawMessage):
        conn = raw.connection
        key = (conn.msgtype, conn.md5sum)
        if key not in self._cache:
            self._cache[key] = self._resolve(conn)
        entry = self._cache[key]
        if entry is None:
            return None
        store, typename = entry
        return store.deserialize_ros1(raw.data, typename)

    def _resolve(self, conn: BagConnection):
        from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore

        typename = _normalize_msgtype(conn.msgtype)
        if typename in self.store.types:
            if self.store.generate_msgdef(typename)[1] == conn.md5sum:
                return self.store, typename
        if not conn.msgdef.strip():
            warnings.warn(f"topic {conn.topic}: type {conn.msgtype} has no definition in the "
                          "bag and differs from the known one; skipped", stacklevel=3)
            return None
        try:
            store = get_typestore(Stores.EMPTY)
            store.register(get_types_from_msg(conn.msgdef, typename))
        except TypesysError as err:
            warnings.warn(f"topic {conn.topic}: cannot parse the definition of {conn.msgtype}: "
                          f"{err}; skipped", stacklevel=3)
            return None
        return store, typename


# ---------------------------------------------------------------------------------------------
# Reader


class LoggedPlan(NamedTuple):
    """The plans sent at time ``t`` (s), one per quadrotor in order (None if one is missing)."""

    t: float
    trajectories: list[UavTrajectory | None]


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
    raise FileNotFoundError(f"run log {str(path)!r} does not exist (nor {active.name!r})")


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

    info = _last_json(by_topic.get(CONFIG_TOPIC))
    metrics = _last_json(by_topic.get(METRICS_TOPIC)) if METRICS_TOPIC in by_topic else None
    quad_names = info.get("quad_names") or _discover_quads(by_topic)
    system = system_from_dict(info["system"]) if "system" in info else None

    samples, ref_p, ref_q, origin = _samples(by_topic, quad_names,
                                             relative=info.get("format") != FORMAT)
    plans = _plans(by_topic, quad_names, origin)
    return RunLog(path, samples, ref_p, ref_q, plans, info.get("config"), metrics, system,
                  quad_names, info, indexed, origin)


def metrics_from_bag(path, system: SystemParams | None = None) -> dict:
    """``episode_metrics`` of the recorded samples; ``system`` defaults to the one in the bag."""
    run = read_run(path)
    system = system if system is not None else run.system
    if system is None:
        raise ValueError(f"{str(run.path)!r} records no system ({CONFIG_TOPIC} missing); "
                         "pass system=")
    if run.samples.n_uavs != system.n_uavs:
        raise ValueError(f"{str(run.path)!r}: {run.samples.n_uavs} quadrotors recorded, "
                         f"the system has {system.n_uavs}")
    k = len(run.samples)
    ref_p = run.ref_p if run.ref_p is not None else np.full((k, 3), np.nan)
    ref_q = run.ref_q if run.ref_q is not None else np.full((k, 4), np.nan)
    return episode_metrics(run.samples, ref_p, ref_q, system)


def system_from_dict(data: dict) -> SystemParams:
    """Rebuild ``SystemParams`` from ``dataclasses.asdict(system)`` (as stored in a run log)."""

    def load(d):
        return LoadParams(
            mass=d["mass"], size=tuple(d["size"]),
            attachments=tuple(tuple(p) for p in d["attachments"]),
            inertia=None if d.get("inertia") is None else tuple(d["inertia"]),
        )

    def quad(d):
        return QuadrotorParams(mass=d["mass"], inertia=tuple(d["inertia"]),
                               attachment=tuple(d["attachment"]), rotor=RotorParams(**d["rotor"]))

    return SystemParams(
        load=load(data["load"]),
        quadrotors=tuple(quad(d) for d in data["quadrotors"]),
        cables=tuple(CableParams(**d) for d in data["cables"]),
        gravity=data["gravity"],
        formation=FormationParams(**data.get("formation", {})),
    )


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
    return _series(entries, {"p": lambda m: _vec(m.pose.position),
                             "q": lambda m: _quat(m.pose.orientation)})


def _odometry_series(entries) -> _Series | None:
    return _series(entries, {
        "p": lambda m: _vec(m.pose.pose.position),
        "q": lambda m: _quat(m.pose.pose.orientation),
        "v_body": lambda m: _vec(m.twist.twist.linear),
        "omega": lambda m: _vec(m.twist.twist.angular),
    })


def _state_series(entries) -> _Series | None:
    return _series(entries, {
        "t": lambda m: m.t,
        "p": lambda m: _vec(m.pose.position),
        "q": lambda m: _quat(m.pose.orientation),
        "v": lambda m: _vec(m.velocity.linear),
        "omega": lambda m: _vec(m.velocity.angular),
        "motors": lambda m: list(m.motors) if len(m.motors) == 4 else [np.nan] * 4,
    })


def _samples(by_topic: dict, quad_names: list[str], relative: bool):
    load_pose = _pose_series(by_topic.get(LOAD_POSE_TOPIC))
    load_odom = _odometry_series(by_topic.get(LOAD_ODOMETRY_TOPIC))
    reference = _pose_series(by_topic.get(LOAD_REFERENCE_TOPIC))
    tension = _series(by_topic.get(TENSION_TOPIC), {"tension": lambda m: list(m.tension)}) \
        if by_topic.get(TENSION_TOPIC) else None
    states = [_state_series(by_topic.get(STATE_TOPIC.format(quad=q))) for q in quad_names]
    odoms = [_odometry_series(by_topic.get(ODOMETRY_TOPIC.format(quad=q))) for q in quad_names]
    quads = [s if s is not None else o for s, o in zip(states, odoms, strict=True)]
    n = len(quad_names)
    if tension is not None and tension.values["tension"].shape[1:] != (n,):
        warnings.warn(f"{TENSION_TOPIC}: {tension.values['tension'].shape[1:]} tensions per "
                      f"message for {n} quadrotors; ignored", stacklevel=3)
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
    load_p = pose_source.at(times, "p") if k else np.zeros((0, 3))
    load_q = pose_source.attitude_at(times, "q") if k else np.zeros((0, 4))
    if load_odom is not None and k:
        load_q_odom = load_odom.attitude_at(times, "q")
        load_v = np.einsum("kij,kj->ki", quat_to_matrix(load_q_odom), load_odom.at(times, "v_body"))
        load_omega = load_odom.at(times, "omega")
    else:
        load_v, load_omega = _finite_differences(t, load_p, load_q)

    uav = {name: np.full((k, n, size), np.nan) for name, size in
           (("p", 3), ("q", 4), ("v", 3), ("omega", 3), ("motors", 4))}
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
            uav["v"][:, i] = np.einsum("kij,kj->ki", quat_to_matrix(uav["q"][:, i]),
                                       odom.at(times, "v_body"))
            uav["omega"][:, i] = odom.at(times, "omega")
    cable_tension = tension.at(times, "tension") if tension is not None and k else \
        np.full((k, n), np.nan)

    samples = WorldSamples(
        t=np.asarray(t, dtype=float), load_p=load_p, load_q=load_q, load_v=load_v,
        load_omega=load_omega, uav_p=uav["p"], uav_q=uav["q"], uav_v=uav["v"],
        uav_omega=uav["omega"], rotor_speeds=uav["motors"], cable_tension=cable_tension,
    )
    if reference is None or k == 0:
        return samples, None, None, origin
    return samples, reference.at(times, "p"), reference.attitude_at(times, "q"), origin


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
