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
- ``/cableload/observed/load/odometry`` and ``/cableload/observed/<quad>/odometry``:
  ``nav_msgs/Odometry``, every plan: the state the plan was made from, as the planner observed
  it (with ``[sensing]`` on, the filters' estimate; the other topics hold the true state);
- ``/cableload/onboard/<quad>/odometry``: ``nav_msgs/Odometry``, every plan, with ``[imu]`` on:
  the quadrotor's onboard estimate its controller flies on, as of its last update (angular
  velocity not estimated: zero);
- ``/cableload/config``: ``std_msgs/String`` (JSON, latched), once at the start;
- ``/cableload/metrics``: ``std_msgs/String`` (JSON, latched), once at the end;
- ``/cableload/safety``: ``std_msgs/String`` (JSON), every intervention of the safety module
  (``t``, ``rule``, ``action``, ``uav``, ``reason``);
- ``/cableload/operator``: ``std_msgs/String`` (JSON), every action of the operator's station
  in a flight (``t``, ``action``, ``source``, ``detail``).

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

Durability: the bag is written as ``<path>.active`` and renamed to ``<path>`` when closed; every
simulated second the open chunk is flushed, so a writer killed midway leaves a bag readable up to
its last flushed second. Such a bag has no index (and a damaged one has an index that cannot be
trusted); ``read_run`` then scans its chunks in order and recovers the connection records from
them, as ``rosbag reindex`` does.

Modules, one job each (rosbags splits its reader and writer alike):

- ``topics``: topic names, message types, the type store with the shipped messages;
- ``messages``: messages built from the project's arrays, time and JSON conventions;
- ``writer``: ``RunLogWriter``, the episode logger, and the checks of an output path;
- ``scan``: raw messages of a bag, through its index or by scanning its chunks;
- ``reader``: ``read_run``, every topic resampled at the load's stamps, ``metrics_from_bag``.

May import: ``cableload_sim.errors``, ``checks``, ``rotations``, ``horizon``, ``params``,
``physics``, ``metrics``. Imported by: ``viz``, ``cli``, the backends and the learners.
"""

from cableload_sim.io.runlog.messages import MessageBuilder, ros_time_ns
from cableload_sim.io.runlog.reader import (
    LoggedPlan,
    RunLog,
    metrics_from_bag,
    read_run,
    require_samples,
    resolve_bag_path,
    system_from_dict,
)
from cableload_sim.io.runlog.scan import BagConnection, RawMessage, read_raw_messages, scan_bag
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
    WORLD_FRAME,
    default_quad_names,
    make_typestore,
    message_md5,
)
from cableload_sim.io.runlog.writer import (
    RunLogWriter,
    active_path,
    check_output_path,
    estimated_size,
)

__all__ = [
    "BagConnection",
    "CABLE_TENSION",
    "CONFIG_TOPIC",
    "FORMAT",
    "LOAD_ODOMETRY_TOPIC",
    "LOAD_POSE_TOPIC",
    "LOAD_REFERENCE_TOPIC",
    "LoggedPlan",
    "METRICS_TOPIC",
    "MessageBuilder",
    "OBSERVED_LOAD_TOPIC",
    "OBSERVED_ODOMETRY_TOPIC",
    "ODOMETRY",
    "ODOMETRY_TOPIC",
    "POSE_STAMPED",
    "QUAD_STATE",
    "REFERENCE",
    "RawMessage",
    "RunLog",
    "RunLogWriter",
    "SAFETY_TOPIC",
    "OPERATOR_TOPIC",
    "STATE_TOPIC",
    "STRING",
    "TENSION_TOPIC",
    "TRAJECTORY_TOPIC",
    "VERSION",
    "WORLD_FRAME",
    "active_path",
    "check_output_path",
    "default_quad_names",
    "estimated_size",
    "make_typestore",
    "message_md5",
    "metrics_from_bag",
    "read_raw_messages",
    "read_run",
    "require_samples",
    "resolve_bag_path",
    "ros_time_ns",
    "scan_bag",
    "system_from_dict",
]
