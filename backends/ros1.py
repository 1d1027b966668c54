"""The ROS1 layer shared by the Gazebo backend, ``cableload world``, the planner nodes and the
hardware backend: lazy rospy, message classes from the shipped text, conversions, the clock.

rospy comes from Debian's packages (``apt-get install python3-rospy ...``) and is imported only
here, on first use, with a clear error naming the packages when it is missing. Standard messages
(std_msgs, geometry_msgs, nav_msgs, rosgraph_msgs, std_srvs) are Debian's generated classes;
``agiros_msgs``, ``gazebo_msgs`` (neither is packaged) and ``cableload_msgs`` are built at run
time from the ``.msg`` / ``.srv`` text shipped in ``cableload_sim/msgs`` with genmsg and
``genpy.dynamic``; their MD5 sums are those of the real packages (tested).

Conventions at this edge (inside the project: world frame z up, quaternions w, x, y, z, body
rates in the body frame):

- ``geometry_msgs/Quaternion`` is x, y, z, w.
- ``agiros_msgs/QuadState``: ``velocity.linear`` world, ``velocity.angular`` body rates (body).
- ``nav_msgs/Odometry``: the twist is in the child frame (RotorS' odometry plugin and
  Agilicious both publish it so): linear velocity and angular velocity in the body frame.
- Times: ROS time in seconds. A backend measures an episode's time from the world's clock at its
  start, so planners see the same times on every backend.

Every process of a flight (world, episode, planner node) calls ``freeze_heap`` once it has
loaded what it flies with: see there why.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import math
import os
import sys
import types
import xmlrpc.client
from importlib import resources
from typing import cast

import numpy as np

from cableload_sim.errors import CableloadError
from cableload_sim.io.runlog.topics import (  # noqa: F401  (re-exported: the ROS layer's names)
    CONFIG_TOPIC,
    LOAD_ODOMETRY_TOPIC,
    LOAD_POSE_TOPIC,
    LOAD_REFERENCE_TOPIC,
    METRICS_TOPIC,
    ODOMETRY_TOPIC,
    STATE_TOPIC,
    TENSION_TOPIC,
    TRAJECTORY_TOPIC,
    WORLD_FRAME,
)
from cableload_sim.physics.world import UavTrajectory
from cableload_sim.rotations import quat_to_matrix

DEBIAN_PACKAGES = (
    "python3-rospy",
    "python3-rosmaster",
    "python3-genpy",
    "python3-genmsg",
    "python3-std-msgs",
    "python3-std-srvs",
    "python3-geometry-msgs",
    "python3-nav-msgs",
    "python3-rosgraph-msgs",
)
DEBIAN_PYTHON_PATH = "/usr/lib/python3/dist-packages"

# topics (``{quad}`` is the quadrotor's name, ``quad1`` .. ``quadN``): those a run log records
# plus the pilot's commands and telemetry and the reference stream for planner nodes
PILOT_NS = "/{quad}/agiros_pilot"
TELEMETRY_TOPIC = PILOT_NS + "/telemetry"
ENABLE_TOPIC = PILOT_NS + "/enable"
START_TOPIC = PILOT_NS + "/start"
LAND_TOPIC = PILOT_NS + "/land"
OFF_TOPIC = PILOT_NS + "/off"
FORCE_HOVER_TOPIC = PILOT_NS + "/force_hover"
LOAD_HORIZON_TOPIC = "/cableload/load/reference_horizon"
REFERENCES_RECEIVED_TOPIC = "/cableload/world/references_received"
"""``cableload world``: how many references each quadrotor's pilot has received so far
(``std_msgs/String``, a JSON list in the quadrotors' order; latched), published as each comes
in: an episode against a world in lockstep unpauses it only once its first plans are in."""
RESET_WORLD = "/gazebo/reset_world"
PAUSE_PHYSICS = "/gazebo/pause_physics"
UNPAUSE_PHYSICS = "/gazebo/unpause_physics"
SET_MODEL_STATE = "/gazebo/set_model_state"
MODEL_NAME = "multilift"
DECISION_EPS = 1e-6
"""Tolerance, in planner periods, of a ROS time on a multiple of the period (above the
nanoseconds of a ROS stamp and the rounding of a float clock)."""


def decision_index(ros_time: float, period_s: float) -> int:
    """Whole planner periods in ``ros_time`` (s), a time on a period's end counting as reached
    up to ``DECISION_EPS`` (a planner node counts its decisions from its episode's first)."""
    return math.floor(ros_time / period_s + DECISION_EPS)


def freeze_heap() -> None:
    """Collect garbage once, then exempt every object alive now from later collections.

    A process that has loaded numba, torch, onnxruntime or CasADi holds about 190 000 objects
    the collector tracks; each full collection visits them all and stops every thread of the
    process for 0.09 s of CPU, 0.1-0.4 s of wall time on a loaded machine (measured in student
    nodes, one every 3-4 s per process). A planner node stopped that long sends nothing, and
    the stock pilot's queue, which holds only until the next plan is due, runs dry. After this
    a full collection visits only what was allocated since (microseconds). ``thaw_heap``
    undoes it."""
    gc.collect()
    gc.freeze()


def thaw_heap() -> None:
    """Return the objects ``freeze_heap`` exempted to the collector."""
    gc.unfreeze()


class RosUnavailable(CableloadError):
    """ROS1 (rospy and its Debian packages) cannot be imported."""


class RosFailure(CableloadError):
    """The ROS graph failed: no master, a world that does not answer, a timeout."""


def _import_rospy():
    try:
        import rospy  # noqa: F401
    except ImportError:
        if (
            os.path.isdir(DEBIAN_PYTHON_PATH)
            and DEBIAN_PYTHON_PATH not in sys.path
            and sys.version_info[:2] == (3, 11)
        ):
            sys.path.append(DEBIAN_PYTHON_PATH)  # Debian's rospy in another Python 3.11
            try:
                import rospy  # noqa: F401
            except ImportError:
                pass
            else:
                return
        raise RosUnavailable(
            "ROS1 is not installed: rospy could not be imported; on Debian run "
            f"`sudo apt-get install {' '.join(DEBIAN_PACKAGES)}` and use a venv made with "
            "`/usr/bin/python3 -m venv --system-site-packages`"
        ) from None


def ros_available() -> tuple[bool, str]:
    """Whether rospy imports, and why not."""
    try:
        _import_rospy()
    except RosUnavailable as err:
        return False, str(err)
    return True, ""


def rospy():
    """The rospy module (imported on first use)."""
    _import_rospy()
    import rospy as module

    return module


# ---------------------------------------------------------------------------------------------
# Message classes


def _msg_dir():
    return resources.files("cableload_sim").joinpath("msgs")


def _debian_messages() -> dict:
    from geometry_msgs import msg as geometry
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from std_msgs import msg as std

    return {
        "std_msgs/Header": std.Header,
        "std_msgs/String": std.String,
        "std_msgs/Bool": std.Bool,
        "std_msgs/Empty": std.Empty,
        "geometry_msgs/Point": geometry.Point,
        "geometry_msgs/Quaternion": geometry.Quaternion,
        "geometry_msgs/Vector3": geometry.Vector3,
        "geometry_msgs/Pose": geometry.Pose,
        "geometry_msgs/Twist": geometry.Twist,
        "geometry_msgs/PoseStamped": geometry.PoseStamped,
        "nav_msgs/Odometry": Odometry,
        "rosgraph_msgs/Clock": Clock,
    }


def _register_debian(context, classes: dict) -> None:
    """Make the Debian classes' definitions (each class's own text, the first part of its full
    text) known to genmsg, so shipped messages can depend on them."""
    from genmsg import msg_loader

    separator = "\n" + "=" * 80 + "\n"
    for name, cls in classes.items():
        for part in cls._full_text.split(separator):
            if part.startswith("MSG: "):
                head, _, body = part.partition("\n")
                dep = head[5:].strip()
            else:
                dep, body = name, part
            if not context.is_registered(dep):
                context.register(dep, msg_loader.load_msg_from_string(context, body, dep))


SHIPPED_PACKAGES = ("agiros_msgs", "gazebo_msgs", "cableload_msgs")
"""The message packages the project ships as text (``cableload_sim/msgs``)."""


@functools.lru_cache(maxsize=1)
def shipped_specs():
    """(genmsg context with Debian's definitions registered, {``package/Name``: spec}) of
    the shipped ``.msg`` and ``.srv`` files, every dependency loaded."""
    _import_rospy()
    import genmsg
    from genmsg import msg_loader

    debian = _debian_messages()
    context = genmsg.MsgContext.create_default()
    _register_debian(context, debian)
    specs = {}
    for package in sorted(_msg_dir().iterdir(), key=lambda p: p.name):
        if package.name not in SHIPPED_PACKAGES:
            continue
        for file in sorted(package.iterdir(), key=lambda p: p.name):
            name = f"{package.name}/{file.name[:-4]}"
            if file.name.endswith(".msg"):
                spec = msg_loader.load_msg_from_string(context, file.read_text(), name)
                context.register(name, spec)
                specs[name] = spec
            elif file.name.endswith(".srv"):
                specs[name] = msg_loader.load_srv_from_string(context, file.read_text(), name)
    for spec in specs.values():
        msg_loader.load_depends(context, spec, {})
    return context, specs


@functools.lru_cache(maxsize=1)
def messages() -> types.SimpleNamespace:
    """Every message and service class the ROS layer uses, by short name."""
    import genmsg
    import genpy.dynamic
    from std_srvs.srv import Empty as EmptyService

    context, specs = shipped_specs()
    out = {name.split("/")[1]: cls for name, cls in _debian_messages().items()}
    out["EmptyService"] = EmptyService
    for name, spec in specs.items():
        short = name.split("/")[1]
        if isinstance(spec, genmsg.MsgSpec):
            out[short] = genpy.dynamic.generate_dynamic(name, genmsg.compute_full_text(context, spec))[name]
        else:
            out[short] = _service_class(context, name, spec)
    return types.SimpleNamespace(**out)


def _service_class(context, name: str, spec):
    """A service class (``_type``, ``_md5sum``, request and response classes) as genpy would
    generate it, from a ``SrvSpec``."""
    import genmsg
    import genpy.dynamic

    classes = {}
    for part, sub in (("Request", spec.request), ("Response", spec.response)):
        full = f"{name}{part}"
        sub_spec = genmsg.MsgSpec(sub.types, sub.names, sub.constants, sub.text, full, sub.package)
        classes[part] = genpy.dynamic.generate_dynamic(full, genmsg.compute_full_text(context, sub_spec))[
            full
        ]
    md5 = hashlib.md5(
        (
            genmsg.compute_md5_text(context, spec.request) + genmsg.compute_md5_text(context, spec.response)
        ).encode()
    ).hexdigest()
    return type(
        name.split("/")[1],
        (),
        {
            "_type": name,
            "_md5sum": md5,
            "_request_class": classes["Request"],
            "_response_class": classes["Response"],
        },
    )


# ---------------------------------------------------------------------------------------------
# Conversions (world frame, quaternions w, x, y, z inside; x, y, z, w in messages)


def stamp(t: float):
    """``rospy.Time`` of ``t`` seconds, to the nearest nanosecond (``Time.from_sec`` truncates:
    4.9999999999 s would become 4.999999999 s and miss a planner's decision time)."""
    ns = round(max(float(t), 0.0) * 1e9)
    return rospy().Time(ns // 1_000_000_000, ns % 1_000_000_000)


def header(t: float, frame: str = WORLD_FRAME):
    return messages().Header(stamp=stamp(t), frame_id=frame)


def point(v):
    return messages().Point(*map(float, v))


def vector(v):
    return messages().Vector3(*map(float, v))


def quaternion(q_wxyz):
    w, x, y, z = map(float, q_wxyz)
    return messages().Quaternion(x, y, z, w)


def pose(p, q_wxyz):
    return messages().Pose(point(p), quaternion(q_wxyz))


def twist(linear, angular):
    return messages().Twist(vector(linear), vector(angular))


def xyz(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z])


def wxyz(q) -> np.ndarray:
    return np.array([q.w, q.x, q.y, q.z])


def set_vector(msg, v) -> None:
    """Set a ``Vector3`` or ``Point`` in place."""
    msg.x, msg.y, msg.z = float(v[0]), float(v[1]), float(v[2])


def set_pose(msg, p, q_wxyz) -> None:
    """Set a ``Pose`` in place (quaternion x, y, z, w at the edge)."""
    set_vector(msg.position, p)
    o = msg.orientation
    o.w, o.x, o.y, o.z = (float(c) for c in q_wxyz)


def fill_quad_state(
    msg, t: float, p, q, v, omega, motors=(), acceleration=(0, 0, 0), jerk=(0, 0, 0), time_stamp=None
):
    """Set ``msg`` (an ``agiros_msgs/QuadState`` made by ``quad_state``) in place; rospy
    serializes a message when it is published, so a publisher may reuse one. ``time_stamp``:
    ``stamp(t)`` when the caller has it already."""
    msg.header.stamp = stamp(t) if time_stamp is None else time_stamp
    msg.t = float(t)
    set_pose(msg.pose, p, q)
    set_vector(msg.velocity.linear, v)
    set_vector(msg.velocity.angular, omega)
    set_vector(msg.acceleration.linear, acceleration)
    set_vector(msg.jerk, jerk)
    msg.motors = [float(w) for w in motors]
    return msg


def quad_state(t: float, p, q, v, omega, motors=(), acceleration=(0, 0, 0), jerk=(0, 0, 0)):
    """``agiros_msgs/QuadState``: world position and velocity, body rates in the body frame."""
    msg = messages().QuadState(header=header(t))
    return fill_quad_state(msg, t, p, q, v, omega, motors, acceleration, jerk)


def fill_odometry(msg, t: float, p, q, v_body, omega_body, time_stamp=None):
    """Set ``msg`` (a ``nav_msgs/Odometry`` made by ``odometry``) in place, the linear velocity
    already in the child (body) frame."""
    msg.header.stamp = stamp(t) if time_stamp is None else time_stamp
    set_pose(msg.pose.pose, p, q)
    set_vector(msg.twist.twist.linear, v_body)
    set_vector(msg.twist.twist.angular, omega_body)
    return msg


def odometry(t: float, child: str, p, q, v_world, omega_body):
    """``nav_msgs/Odometry`` with the twist in the child (body) frame."""
    msg = messages().Odometry(header=header(t), child_frame_id=child)
    v_body = quat_to_matrix(np.asarray(q, dtype=float)).T @ np.asarray(v_world, dtype=float)
    return fill_odometry(msg, t, p, q, v_body, omega_body)


def from_odometry(msg) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, p, q w-x-y-z, world velocity, body rates) of a ``nav_msgs/Odometry`` whose twist is
    in the child frame."""
    q = wxyz(msg.pose.pose.orientation)
    q = q / np.linalg.norm(q)
    v_world = quat_to_matrix(q) @ xyz(msg.twist.twist.linear)
    return (msg.header.stamp.to_sec(), xyz(msg.pose.pose.position), q, v_world, xyz(msg.twist.twist.angular))


def from_quad_state(msg) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, p, q, world velocity, body rates, rotor speeds) of a ``QuadState``."""
    q = wxyz(msg.pose.orientation)
    q = q / np.linalg.norm(q)
    motors = np.zeros(4)
    motors[: min(4, len(msg.motors))] = list(msg.motors)[:4]
    return (
        msg.header.stamp.to_sec(),
        xyz(msg.pose.position),
        q,
        xyz(msg.velocity.linear),
        xyz(msg.velocity.angular),
        motors,
    )


def reference_message(traj: UavTrajectory, t_offset: float = 0.0):
    """``agiros_msgs/Reference`` of a plan, node times shifted by ``t_offset`` (episode time to
    ROS time). Each ``Setpoint``: ``state.t`` and its stamp the node time, world position,
    velocity, acceleration and jerk, body rates in ``state.velocity.angular`` and
    ``command.bodyrates``; identity attitude and zero thrust (a plan carries neither)."""
    m = messages()
    points = []
    identity = (1.0, 0.0, 0.0, 0.0)
    for k in range(traj.n_nodes):
        t = float(traj.t[k] + t_offset)
        state = quad_state(
            t, traj.p[k], identity, traj.v[k], traj.body_rates[k], acceleration=traj.a[k], jerk=traj.j[k]
        )
        command = m.Command(
            header=header(t),
            t=t,
            is_single_rotor_thrust=False,
            collective_thrust=0.0,
            bodyrates=vector(traj.body_rates[k]),
            thrusts=[0.0] * 4,
        )
        points.append(m.Setpoint(state=state, command=command))
    return m.Reference(header=header(float(traj.t[0] + t_offset)), points=points)


def trajectory_arrays(msg, t_offset: float = 0.0) -> dict[str, np.ndarray]:
    """Node arrays (t, p, v, a, j, w) of a ``Reference``, times shifted by ``-t_offset``."""
    states = [point.state for point in msg.points]
    return {
        "t": np.array([s.t for s in states]) - t_offset,
        "p": np.array([xyz(s.pose.position) for s in states]).reshape(-1, 3),
        "v": np.array([xyz(s.velocity.linear) for s in states]).reshape(-1, 3),
        "a": np.array([xyz(s.acceleration.linear) for s in states]).reshape(-1, 3),
        "j": np.array([xyz(s.jerk) for s in states]).reshape(-1, 3),
        "w": np.array([xyz(p.command.bodyrates) for p in msg.points]).reshape(-1, 3),
    }


def load_setpoints_message(t0: float, times: np.ndarray, sample, t_offset: float = 0.0):
    """``agiros_msgs/Reference`` carrying the *load's* reference over a horizon (what planner
    nodes read instead of computing the reference themselves): each setpoint's state holds the
    load's p and q (``pose``), v and body rate omega (``velocity``), a and body angular
    acceleration alpha (``acceleration``) and jerk at one time (``t``, episode time plus
    ``t_offset``)."""
    m = messages()
    points = []
    for k, t in enumerate(times):
        state = quad_state(
            t + t_offset,
            sample.p[k],
            sample.q[k],
            sample.v[k],
            sample.omega[k],
            acceleration=sample.a[k],
            jerk=sample.j[k],
        )
        state.acceleration.angular = vector(sample.alpha[k])
        points.append(m.Setpoint(state=state))
    return m.Reference(header=header(t0 + t_offset, frame="load_reference"), points=points)


def seconds_since(stamp, origin: int = 0) -> float:
    """``stamp`` (``rospy.Time``) less ``origin`` whole seconds, exact to the nanosecond
    (``to_sec()`` of a wall-clock stamp, about 1.8e9 s, keeps float64's 0.24 us there)."""
    return float(stamp.secs - origin) + stamp.nsecs * 1e-9


GRID_S = 1e-6
"""The grid (s) a load-reference message's times are put back on, relative to its header."""


def load_setpoints_arrays(msg, origin: int = 0) -> dict[str, np.ndarray]:
    """Arrays t, p, v, a, j, q (w, x, y, z), omega, alpha of a load-reference message, times
    less ``origin`` whole seconds. A setpoint's ``t`` is a float64 of ROS time: at wall-clock
    magnitudes its resolution is 0.24 us, and a 20 ms grid of them jitters by that much. A
    planner differentiating the reference three times (the formation's jerk, through the
    reference's acceleration) turned that jitter into jerks of hundreds of m/s^3 and body rates
    of tens of rad/s. So the times are taken relative to the header's stamp (exact), rounded to
    ``GRID_S``, and added to the stamp less ``origin``."""
    states = [point.state for point in msg.points]
    relative = np.array([s.t for s in states]) - msg.header.stamp.to_sec()
    return {
        "t": seconds_since(msg.header.stamp, origin) + np.round(relative / GRID_S) * GRID_S,
        "p": np.array([xyz(s.pose.position) for s in states]).reshape(-1, 3),
        "v": np.array([xyz(s.velocity.linear) for s in states]).reshape(-1, 3),
        "a": np.array([xyz(s.acceleration.linear) for s in states]).reshape(-1, 3),
        "j": np.array([xyz(s.jerk) for s in states]).reshape(-1, 3),
        "q": np.array([wxyz(s.pose.orientation) for s in states]).reshape(-1, 4),
        "omega": np.array([xyz(s.velocity.angular) for s in states]).reshape(-1, 3),
        "alpha": np.array([xyz(s.acceleration.angular) for s in states]).reshape(-1, 3),
    }


# ---------------------------------------------------------------------------------------------
# The graph: who publishes, whether a node answers, what the world says it is

WORLD_NODE = "/cableload_world"
WORLD_PARAM = "/cableload/world"
"""The parameter ``cableload world`` sets (JSON): its instance, quadrotors, configuration and
pacing; a real Gazebo world sets none."""


class _TimeoutTransport(xmlrpc.client.Transport):
    """An XML-RPC transport whose connections time out (a node killed with SIGKILL leaves its
    address registered; a call to it must not hang)."""

    def __init__(self, timeout: float):
        super().__init__()
        self.timeout = timeout

    def make_connection(self, host):
        connection = super().make_connection(host)
        connection.timeout = self.timeout
        return connection


def node_answers(name: str, timeout: float = 0.3) -> bool:
    """Whether the node registered as ``name`` is known to the master and answers at its
    address (never hangs longer than about ``timeout`` per call)."""
    import rosgraph

    try:
        uri = rosgraph.Master("/cableload_check").lookupNode(name)
        proxy = xmlrpc.client.ServerProxy(uri, transport=_TimeoutTransport(timeout))
        # the slave API's answer: (code, status message, pid)
        code, _message, _pid = cast("tuple[int, str, int]", proxy.getPid("/cableload_check"))
        return code == 1
    except Exception:  # noqa: BLE001 - unknown to the master, refused, timed out: not answering
        return False


def caller_of(msg) -> str | None:
    """The node that published a received message (rospy's connection header)."""
    header = getattr(msg, "_connection_header", None)
    return header.get("callerid") if header else None


def world_info() -> dict | None:
    """What ``cableload world`` says of itself (``WORLD_PARAM``; None for another world, or
    when the master cannot be asked)."""
    import json

    try:
        text = rospy().get_param(WORLD_PARAM, None)
    except Exception:  # noqa: BLE001 - a master gone is reported by its own check
        return None
    if not isinstance(text, str):
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None
