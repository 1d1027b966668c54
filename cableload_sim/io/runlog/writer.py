"""Writing an episode to a ROS1 bag as it runs: ``RunLogWriter``, an ``EpisodeLogger``.

Durability: the bag is written as ``<path>.active`` (as ``rosbag record`` does) and renamed to
``<path>`` when closed. Every simulated second (``flush_period_s``) the open chunk is closed,
written and flushed to the operating system (and fsync'ed), so a writer killed midway leaves a
bag readable up to its last flushed second. A write that fails (a full disk) stops the writer:
the ``OSError`` names the ``.active`` file, which keeps everything flushed before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from cableload_sim.errors import OutputExistsError, UsageError
from cableload_sim.horizon import N_NODES
from cableload_sim.io.runlog.messages import MessageBuilder, ros_time_ns, to_json
from cableload_sim.io.runlog.topics import (
    CABLE_TENSION,
    CONFIG_TOPIC,
    FORMAT,
    LOAD_ODOMETRY_TOPIC,
    LOAD_POSE_TOPIC,
    LOAD_REFERENCE_TOPIC,
    METRICS_TOPIC,
    OBSERVED_LOAD_TOPIC,
    OBSERVED_ODOMETRY_TOPIC,
    ODOMETRY,
    ODOMETRY_TOPIC,
    ONBOARD_ESTIMATE_TOPIC,
    OPERATOR_TOPIC,
    POSE_STAMPED,
    QUAD_STATE,
    REFERENCE,
    SAFETY_TOPIC,
    STATE_TOPIC,
    STRING,
    TENSION_TOPIC,
    TRAJECTORY_TOPIC,
    VERSION,
    default_quad_names,
    make_typestore,
)
from cableload_sim.params import SystemParams
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState
from cableload_sim.rotations import quat_to_matrix

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from rosbags.interfaces import Connection
    from rosbags.rosbag1 import Writer

RECORD_OVERHEAD = 58
"""Bytes a bag spends on each message besides its data: the record header (op, conn, time:
42 bytes), the data length (4) and its index entry (12)."""


def active_path(path) -> Path:
    """Where the bag of ``path`` is written until it is closed."""
    path = Path(path)
    return path.with_name(path.name + ".active")


def check_output_path(path, overwrite: bool = False) -> None:
    """Refuse a run-log path that cannot be written: a folder, a missing or read-only folder, a
    special file, or an existing log without ``overwrite``. Nothing is created or removed."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise UsageError(f"run log {str(path)!r}: folder {str(folder)!r} {what}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"run log {str(path)!r}: folder {str(folder)!r} is not writable")
    for existing in (path, active_path(path)):
        if not existing.exists() and not existing.is_symlink():
            continue
        if existing.is_dir():
            raise UsageError(
                f"run log {str(existing)!r} is a folder; expected a file name, "
                f"e.g. {str(existing / 'run.bag')!r}"
            )
        if not (existing.is_file() or existing.is_symlink()):
            raise UsageError(f"run log {str(existing)!r} exists and is not a regular file")
        if not overwrite:
            raise OutputExistsError(
                f"run log {str(existing)!r} exists already; choose another "
                "path or pass --overwrite (overwrite=True)"
            )


def estimated_size(
    n_uavs: int, duration_s: float, sample_rate_hz: float, plan_rate_hz: float, nodes: int = N_NODES
) -> float:
    """Bytes of a run log of ``duration_s`` seconds (s) with samples and plans at the given
    rates (Hz): the messages the writer writes, serialized, plus their record overhead."""
    store = make_typestore()
    msg = MessageBuilder(store)
    names = default_quad_names(n_uavs)

    def size(message, msgtype) -> int:
        return len(store.serialize_ros1(message, msgtype)) + RECORD_OVERHEAD

    zeros = (0.0, 0.0, 0.0)
    unit = (1.0, 0.0, 0.0, 0.0)
    header = msg.header(0)
    per_sample = size(msg.PoseStamped(header, msg.pose(zeros, unit)), POSE_STAMPED) * 2
    per_sample += size(msg.odometry(header, "load", zeros, unit, zeros, zeros), ODOMETRY)
    per_sample += size(msg.CableTension(header, np.zeros(n_uavs)), CABLE_TENSION)
    per_plan = 0
    for quad in names:
        per_sample += size(msg.quad_state(header, 0.0, zeros, unit, zeros, zeros, np.zeros(4)), QUAD_STATE)
        per_sample += size(msg.odometry(header, f"{quad}/body", zeros, unit, zeros, zeros), ODOMETRY)
        points = [msg.setpoint(0, 0.0, zeros, zeros, zeros, zeros, zeros)] * nodes
        per_plan += size(msg.Reference(header, points), REFERENCE)
    per_plan += (n_uavs + 1) * size(
        msg.odometry(header, "load", zeros, unit, zeros, zeros), ODOMETRY
    )  # the observed states
    return float(duration_s) * (sample_rate_hz * per_sample + plan_rate_hz * per_plan)


COMPRESSIONS = ("lz4", "bz2", "none")
"""How the bag's chunks are stored. LZ4 (the default) makes a run about a third of its
uncompressed size at a few percent of the writing time; every ROS1 bag tool reads it."""


class RunLogWriter:
    """Writes an episode to a ROS1 bag as it runs; an ``EpisodeLogger`` for ``run_episode``.

    ``config`` is the resolved ``Config`` (or its dict) stored in the bag; ``quad_names``
    default to ``quad1`` .. ``quadN``. The bag is written as ``<path>.active`` and renamed to
    ``path`` by ``finish``/``close``; use it as a context manager so an exception still closes
    it (complete, without metrics). An existing ``path`` is an error unless ``overwrite``
    (``check_output_path`` says what else is refused).
    """

    def __init__(
        self,
        path,
        config=None,
        quad_names=None,
        *,
        overwrite: bool = False,
        flush_period_s: float = 1.0,
        fsync: bool = True,
        compression: str = "lz4",
    ):
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression: expected one of {list(COMPRESSIONS)}, got {compression!r}")
        self.compression = compression
        self.path = Path(path)
        self.active_path = active_path(self.path)
        if not flush_period_s > 0.0:
            raise ValueError(f"flush_period_s: expected a positive number, got {flush_period_s!r}")
        check_output_path(self.path, overwrite)
        for existing in (self.path, self.active_path):
            if existing.exists() or existing.is_symlink():
                existing.unlink()
        if config is not None and not isinstance(config, dict):
            config = config.to_dict()
        self.config = config
        self._onboard = bool((config or {}).get("imu", {}).get("enabled", False))
        self.quad_names: list[str] | None = list(quad_names) if quad_names is not None else None
        self.flush_period_s = float(flush_period_s)
        self.fsync = fsync
        self.flushed_time = -math.inf
        """Simulation time (s) up to which every sample is on disk."""
        self._bag: Writer | None = None
        self._closed = False
        self._last_t = 0.0
        self._next_flush = self.flush_period_s
        self._compacted = 0

    # EpisodeLogger protocol ------------------------------------------------------------------

    def start(self, system: SystemParams, reference=None, scenario=None, planner_name: str = "") -> None:
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
        self._msg = MessageBuilder(self._store)
        bag = Writer(self.active_path)
        if self.compression != "none":
            bag.set_compression(Writer.CompressionFormat[self.compression.upper()])
        with self._disk():
            bag.open()
        self._bag = bag
        self._seq: dict[str, int] = {}
        self._conn: dict[str, tuple[Connection, str]] = {}
        with self._disk():
            for quad in names:
                self._add(STATE_TOPIC.format(quad=quad), QUAD_STATE)
                self._add(ODOMETRY_TOPIC.format(quad=quad), ODOMETRY)
                self._add(TRAJECTORY_TOPIC.format(quad=quad), REFERENCE)
                self._add(OBSERVED_ODOMETRY_TOPIC.format(quad=quad), ODOMETRY)
                if self._onboard:
                    self._add(ONBOARD_ESTIMATE_TOPIC.format(quad=quad), ODOMETRY)
            self._add(OBSERVED_LOAD_TOPIC, ODOMETRY)
            self._add(LOAD_POSE_TOPIC, POSE_STAMPED)
            self._add(LOAD_ODOMETRY_TOPIC, ODOMETRY)
            self._add(LOAD_REFERENCE_TOPIC, POSE_STAMPED)
            self._add(TENSION_TOPIC, CABLE_TENSION)
            self._add(CONFIG_TOPIC, STRING, latching=1)
            self._add(METRICS_TOPIC, STRING, latching=1)
            self._add(SAFETY_TOPIC, STRING)
            self._add(OPERATOR_TOPIC, STRING)
            info = {
                "format": FORMAT,
                "version": VERSION,
                "quad_names": names,
                "planner": planner_name,
                "reference": _describe_reference(reference),
                "scenario": _describe_scenario(scenario),
                "system": dataclasses.asdict(system),
                "config": self.config if self.config is not None else {"system": dataclasses.asdict(system)},
            }
            self._write(CONFIG_TOPIC, 0, self._msg.String(to_json(info)))
            self._flush()

    def plans(self, t: float, trajectories: list[UavTrajectory]) -> None:
        """One plan per quadrotor sent at time ``t`` (s); none when the planners run elsewhere
        (planner nodes publish their plans themselves)."""
        self._check_open()
        assert self.quad_names is not None  # set by start(), which _check_open requires
        if not trajectories:
            return
        if len(trajectories) != len(self.quad_names):
            raise ValueError(f"plans: expected {len(self.quad_names)} trajectories, got {len(trajectories)}")
        stamp = ros_time_ns(t)
        msg = self._msg
        with self._disk():
            for quad, traj in zip(self.quad_names, trajectories, strict=True):
                points = [
                    msg.setpoint(
                        ros_time_ns(max(float(traj.t[k]), 0.0)),
                        float(traj.t[k]),
                        traj.p[k].tolist(),
                        traj.v[k].tolist(),
                        traj.a[k].tolist(),
                        traj.j[k].tolist(),
                        traj.body_rates[k].tolist(),
                    )
                    for k in range(traj.n_nodes)
                ]
                topic = TRAJECTORY_TOPIC.format(quad=quad)
                self._write(topic, stamp, msg.Reference(self._header(topic, stamp), points))

    def observed(self, state: WorldState) -> None:
        """The state a plan was made from, as the planner observed it (the sensors' estimate
        when the backend has sensors; the true state otherwise)."""
        self._check_open()
        assert self.quad_names is not None  # set by start(), which _check_open requires
        if state.n_uavs != len(self.quad_names):
            raise ValueError(f"observed: expected {len(self.quad_names)} quadrotors, got {state.n_uavs}")
        stamp = ros_time_ns(state.t)
        with self._disk():
            self._odometry(
                OBSERVED_LOAD_TOPIC, stamp, "load", state.load_p, state.load_q, state.load_v, state.load_omega
            )
            for i, quad in enumerate(self.quad_names):
                self._odometry(
                    OBSERVED_ODOMETRY_TOPIC.format(quad=quad),
                    stamp,
                    f"{quad}/body",
                    state.uav_p[i],
                    state.uav_q[i],
                    state.uav_v[i],
                    state.uav_omega[i],
                )

    def _odometry(
        self,
        topic: str,
        stamp: int,
        child: str,
        p: np.ndarray,
        q: np.ndarray,
        v_world: np.ndarray,
        omega: np.ndarray,
    ) -> None:
        """One ``nav_msgs/Odometry``: pose, velocity turned into the body frame, body rates."""
        v_body = quat_to_matrix(q).T @ v_world
        message = self._msg.odometry(
            self._header(topic, stamp), child, p.tolist(), q.tolist(), v_body.tolist(), omega.tolist()
        )
        self._write(topic, stamp, message)

    def onboard_estimate(self, t: float, p: np.ndarray, q: np.ndarray, v: np.ndarray) -> None:
        """The quadrotors' onboard estimates (``[imu]``) at time ``t``: positions (n, 3),
        attitudes (n, 4), world velocities (n, 3). Written only when the config given to the
        writer has ``[imu]`` on (the topics are registered at the start)."""
        self._check_open()
        assert self.quad_names is not None  # set by start(), which _check_open requires
        if not self._onboard:
            return
        n = len(self.quad_names)
        p, q, v = (np.asarray(x, dtype=float) for x in (p, q, v))
        if p.shape != (n, 3) or q.shape != (n, 4) or v.shape != (n, 3):
            raise ValueError(
                f"onboard_estimate: expected ({n}, 3), ({n}, 4), ({n}, 3) arrays, "
                f"got {p.shape}, {q.shape}, {v.shape}"
            )
        stamp = ros_time_ns(t)
        with self._disk():
            for i, quad in enumerate(self.quad_names):
                self._odometry(
                    ONBOARD_ESTIMATE_TOPIC.format(quad=quad),
                    stamp,
                    f"{quad}/body",
                    p[i],
                    q[i],
                    v[i],
                    np.zeros(3),
                )

    def samples(self, samples: WorldSamples, ref_p: np.ndarray, ref_q: np.ndarray) -> None:
        """Samples with the load reference at the same times; flushes every simulated second."""
        self._check_open()
        assert self.quad_names is not None  # set by start(), which _check_open requires
        k_count = len(samples)
        if k_count == 0:
            return
        if samples.n_uavs != len(self.quad_names):
            raise ValueError(f"samples: expected {len(self.quad_names)} quadrotors, got {samples.n_uavs}")
        ref_p = np.asarray(ref_p, dtype=float)
        ref_q = np.asarray(ref_q, dtype=float)
        if ref_p.shape != (k_count, 3) or ref_q.shape != (k_count, 4):
            raise ValueError(
                f"samples: reference shapes {ref_p.shape}, {ref_q.shape}; expected "
                f"({k_count}, 3) and ({k_count}, 4)"
            )
        with self._disk():
            self._write_samples(samples, ref_p.tolist(), ref_q.tolist())
            self._last_t = max(self._last_t, float(samples.t[-1]))
            if self._last_t >= self._next_flush - 1e-9:
                self._flush()
                periods = math.floor(self._last_t / self.flush_period_s + 1e-9) + 1
                self._next_flush = periods * self.flush_period_s

    def safety(self, event: dict) -> None:
        """One intervention of the safety module (``Intervention.as_dict``), stamped at its
        time; flushed at once (it matters most after a crash)."""
        self._event(SAFETY_TOPIC, event)

    def operator(self, action: dict) -> None:
        """One action of the operator's station (``t``, ``action``, ``source``, ...)."""
        self._event(OPERATOR_TOPIC, action)

    def _event(self, topic: str, record: dict) -> None:
        self._check_open()
        t = float(record.get("t", self._last_t))
        with self._disk():
            self._write(topic, ros_time_ns(max(t, 0.0)), self._msg.String(to_json(record)))
            self._flush()

    def finish(self, status: str, metrics: dict) -> None:
        """Write the metrics (with ``status``) and close the bag."""
        self._check_open()
        record = dict(metrics)
        record["status"] = str(status)
        with self._disk():
            self._write(METRICS_TOPIC, ros_time_ns(self._last_t), self._msg.String(to_json(record)))
        self.close()

    # Closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Write the index, make it durable and rename ``<path>.active`` to ``path``."""
        if self._closed:
            return
        self._closed = True
        if self._bag is None:
            return
        with self._disk():
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

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        self.close()
        return False

    # Internals -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _disk(self):
        """A failed write stops the writer; the error names the file and what it keeps."""
        try:
            yield
        except OSError as err:
            self._closed = True
            if self._bag is not None and self._bag.bio is not None:
                with contextlib.suppress(OSError):
                    self._bag.abort()
            kept = self.active_path.exists() and self.flushed_time >= 0.0
            detail = err.strerror or str(err)
            if kept:
                detail += f" (the log up to {self.flushed_time:g} s of simulated time is kept in this file)"
            raise OSError(err.errno, detail, str(err.filename or self.active_path)) from None

    def _check_open(self) -> None:
        if self._bag is None or self._closed:
            state = "closed" if self._closed else "not started (call start() first)"
            raise RuntimeError(f"run log {str(self.path)!r} is {state}")

    def _add(self, topic: str, msgtype: str, latching: int | None = None) -> None:
        assert self._bag is not None  # called by start() once the bag is open
        self._conn[topic] = (
            self._bag.add_connection(
                topic, msgtype, typestore=self._store, callerid="/cableload", latching=latching
            ),
            msgtype,
        )

    def _header(self, topic: str, stamp: int):
        seq = self._seq.get(topic, 0)
        self._seq[topic] = seq + 1
        return self._msg.header(stamp, seq=seq)

    def _write(self, topic: str, stamp: int, message) -> None:
        connection, msgtype = self._conn[topic]
        assert self._bag is not None  # every write follows start() and _check_open
        self._bag.write(connection, stamp, self._store.serialize_ros1(message, msgtype))

    def _write_samples(self, samples: WorldSamples, ref_p: list, ref_q: list) -> None:
        assert self.quad_names is not None  # called by samples() after _check_open
        msg = self._msg
        # Odometry twists are in the child (body) frame: v_body = R^T v_world.
        load_v_body = np.einsum("kji,kj->ki", quat_to_matrix(samples.load_q), samples.load_v).tolist()
        uav_v_body = np.einsum("knji,knj->kni", quat_to_matrix(samples.uav_q), samples.uav_v).tolist()
        arrays = {f: getattr(samples, f).tolist() for f in WorldSamples.FIELDS}
        for k in range(len(samples)):
            t = arrays["t"][k]
            stamp = ros_time_ns(t)
            for i, quad in enumerate(self.quad_names):
                p, q = arrays["uav_p"][k][i], arrays["uav_q"][k][i]
                omega = arrays["uav_omega"][k][i]
                topic = STATE_TOPIC.format(quad=quad)
                self._write(
                    topic,
                    stamp,
                    msg.quad_state(
                        self._header(topic, stamp),
                        t,
                        p,
                        q,
                        arrays["uav_v"][k][i],
                        omega,
                        np.array(arrays["rotor_speeds"][k][i]),
                    ),
                )
                topic = ODOMETRY_TOPIC.format(quad=quad)
                self._write(
                    topic,
                    stamp,
                    msg.odometry(self._header(topic, stamp), f"{quad}/body", p, q, uav_v_body[k][i], omega),
                )
            self._write(
                LOAD_POSE_TOPIC,
                stamp,
                msg.PoseStamped(
                    self._header(LOAD_POSE_TOPIC, stamp), msg.pose(arrays["load_p"][k], arrays["load_q"][k])
                ),
            )
            self._write(
                LOAD_ODOMETRY_TOPIC,
                stamp,
                msg.odometry(
                    self._header(LOAD_ODOMETRY_TOPIC, stamp),
                    "load",
                    arrays["load_p"][k],
                    arrays["load_q"][k],
                    load_v_body[k],
                    arrays["load_omega"][k],
                ),
            )
            self._write(
                LOAD_REFERENCE_TOPIC,
                stamp,
                msg.PoseStamped(self._header(LOAD_REFERENCE_TOPIC, stamp), msg.pose(ref_p[k], ref_q[k])),
            )
            self._write(
                TENSION_TOPIC,
                stamp,
                msg.CableTension(self._header(TENSION_TOPIC, stamp), np.array(arrays["cable_tension"][k])),
            )

    def _flush(self) -> None:
        """Close the open chunk, push it to the disk, and keep only counts of what was written.

        The one place that uses rosbags' internals (``Writer.write_chunk``, ``bio``,
        ``chunks``; rosbags is bounded to < 0.12 in setup.cfg for this): its public API
        writes a chunk only when 1 MB is full, and it keeps a (time, offset) pair per written
        message until ``close``, where it needs only their number per connection. Replacing
        each written chunk's list by a ``range`` of the same length keeps a long run's memory
        from growing by ~100 bytes per message.
        """
        bag = self._bag
        assert bag is not None and bag.bio is not None  # open: flushed only between start and close
        bag.write_chunk(bag.chunks[-1])
        bag.bio.flush()
        if self.fsync:
            os.fsync(bag.bio.fileno())
        for k in range(self._compacted, len(bag.chunks) - 1):
            chunk = bag.chunks[k]
            compacted = {conn: range(len(items)) for conn, items in chunk.connections.items()}
            # a range in place of the (time, offset) list: close() needs only its length
            chunk.connections = compacted  # type: ignore[assignment]
        self._compacted = len(bag.chunks) - 1
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
        "disturbance": (
            dataclasses.asdict(cast("DataclassInstance", disturbance))  # a WrenchDisturbance (an instance)
            if dataclasses.is_dataclass(disturbance)
            else None
        ),
    }
