"""The run log's schema: topics, message types and the type store that knows them.

Topic names and types are those a real flight records (Agilicious, motion capture), plus a few
of the simulator's own under ``/cableload``; see the package docstring for frames and units.
"""

from __future__ import annotations

import functools
from importlib import resources

FORMAT = "cableload-runlog"
VERSION = 1

STATE_TOPIC = "/{quad}/agiros_pilot/state"
ODOMETRY_TOPIC = "/{quad}/agiros_pilot/odometry"
TRAJECTORY_TOPIC = "/{quad}/agiros_pilot/trajectory"
LOAD_POSE_TOPIC = "/mocap/load/pose"
LOAD_ODOMETRY_TOPIC = "/cableload/load/odometry"
LOAD_REFERENCE_TOPIC = "/cableload/load/reference"
TENSION_TOPIC = "/cableload/cable_tension"
OBSERVED_LOAD_TOPIC = "/cableload/observed/load/odometry"
OBSERVED_ODOMETRY_TOPIC = "/cableload/observed/{quad}/odometry"
ONBOARD_ESTIMATE_TOPIC = "/cableload/onboard/{quad}/odometry"
CONFIG_TOPIC = "/cableload/config"
METRICS_TOPIC = "/cableload/metrics"
SAFETY_TOPIC = "/cableload/safety"
OPERATOR_TOPIC = "/cableload/operator"

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
    return make_typestore().generate_msgdef(normalize_msgtype(msgtype))[1]


def normalize_msgtype(name: str) -> str:
    """``pkg/Type`` -> ``pkg/msg/Type`` (rosbags' spelling)."""
    parts = name.split("/")
    return name if len(parts) == 3 else f"{parts[0]}/msg/{parts[-1]}"


def denormalize_msgtype(name: str) -> str:
    """``pkg/msg/Type`` -> ``pkg/Type`` (ROS1's spelling)."""
    parts = name.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 else name
