"""Publish faults into a running ROS graph, as an adversarial user would (a process of its own:
rospy allows one node per process).

    python ros_inject.py KIND [--quad quad1] [--count N] [--seed S]

Kinds: ``future-load-pose`` and ``future-state`` (stamped 100 s ahead of the world's clock),
``empty-horizon``, ``empty-trajectory``, ``late-reference`` (a valid reference 50 s ahead),
``off``, ``world-param`` (a world parameter naming another instance), ``reset-world`` and
``pause-physics`` (the gazebo_ros services), and ``fuzz-TOPIC`` with
TOPIC one of ``trajectory``, ``enable``, ``start``, ``land``, ``off``, ``force-hover``,
``horizon`` (``--count`` random and malformed messages, seeded). Each waits for a subscriber
of its topic and for the world's clock, publishes, and exits 0; it prints how many it sent.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time

import numpy as np

from backends import ros1
from cableload_sim.io.runlog.topics import LOAD_REFERENCE_TOPIC

FUZZ_TOPICS = {
    "trajectory": (ros1.TRAJECTORY_TOPIC, "Reference"),
    "enable": (ros1.ENABLE_TOPIC, "Bool"),
    "start": (ros1.START_TOPIC, "Empty"),
    "land": (ros1.LAND_TOPIC, "Empty"),
    "off": (ros1.OFF_TOPIC, "Empty"),
    "force-hover": (ros1.FORCE_HOVER_TOPIC, "Empty"),
    "horizon": (ros1.LOAD_HORIZON_TOPIC, "Reference"),
}


def raw_class(cls):
    """A message class with ``cls``'s type and MD5 whose ``serialize`` writes the bytes it
    holds (malformed wire data a subscriber must survive)."""

    class Raw:
        _type, _md5sum, _full_text, _has_header = cls._type, cls._md5sum, cls._full_text, False
        __slots__ = ("data",)

        def __init__(self, data: bytes = b""):
            self.data = data

        def serialize(self, buff: io.BytesIO) -> None:
            buff.write(self.data)

    return Raw


def wait_clock(rospy, seconds: float = 30.0) -> float:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = rospy.get_time()
        if now > 0.0:
            return now
        time.sleep(0.01)
    raise SystemExit("no /clock from the world")


def publisher(rospy, topic: str, cls, seconds: float = 30.0):
    pub = rospy.Publisher(topic, cls, queue_size=1000)
    deadline = time.monotonic() + seconds
    while pub.get_num_connections() == 0:
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing subscribes to {topic}")
        time.sleep(0.01)
    time.sleep(0.2)  # every subscriber connected, not only the first
    return pub


def reference(m, times, rng=None, bad: bool = False):
    """A ``Reference`` with a point per time; random (and sometimes non-finite) values with
    ``bad``."""
    points = []
    for t in times:
        values = rng.normal(0.0, 3.0, (6, 3)) if bad else np.zeros((6, 3))
        if bad and rng.random() < 0.2:
            values[rng.integers(6), rng.integers(3)] = rng.choice([np.nan, np.inf, -np.inf, 1e300])
        state = ros1.quad_state(
            float(t) if np.isfinite(t) else 0.0,
            values[0],
            (1, 0, 0, 0),
            values[1],
            values[2],
            acceleration=values[3],
            jerk=values[4],
        )
        state.t = float(t)
        command = m.Command(
            header=ros1.header(0.0), t=float(t), bodyrates=ros1.vector(values[2]), thrusts=[0.0] * 4
        )
        points.append(m.Setpoint(state=state, command=command))
    return m.Reference(
        header=ros1.header(float(times[0]) if len(times) and np.isfinite(times[0]) else 0.0), points=points
    )


def fuzz_messages(topic: str, m, rng, now: float, count: int):
    """``count`` random or malformed messages for one topic."""
    topic_template, kind = FUZZ_TOPICS[topic]
    cls = getattr(m, kind)
    raw = raw_class(cls)
    for _ in range(count):
        if rng.random() < 0.25:  # malformed bytes on the wire
            yield raw(bytes(rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8)))
        elif kind == "Bool":
            yield cls(bool(rng.random() < 0.5))
        elif kind == "Empty":
            yield cls()
        else:
            k = int(rng.integers(0, 25))
            start = now + rng.choice([-100.0, -1.0, 0.0, 0.5, 3.0, 1e6, np.nan])
            times = start + np.sort(rng.uniform(0.0, 2.0, k))
            if k > 1 and rng.random() < 0.3:
                times = times[::-1]  # times that do not increase
            yield reference(m, times, rng, bad=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind")
    parser.add_argument("--quad", default="quad1")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--when-flying",
        action="store_true",
        help="connect, print 'ready', and send once the load's reference sample flows",
    )
    args = parser.parse_args(argv)
    rospy = ros1.rospy()
    m = ros1.messages()
    rospy.init_node("cableload_inject", anonymous=True, disable_signals=True)
    now = wait_clock(rospy)
    quad = args.quad
    sent = 0
    if args.kind in ("reset-world", "pause-physics"):
        name = ros1.RESET_WORLD if args.kind == "reset-world" else ros1.PAUSE_PHYSICS
        rospy.wait_for_service(name, timeout=30.0)
        rospy.ServiceProxy(name, m.EmptyService)()
        sent = 1
    elif args.kind == "world-param":
        info = json.loads(rospy.get_param(ros1.WORLD_PARAM))
        rospy.set_param(ros1.WORLD_PARAM, json.dumps({**info, "instance": "another", "pid": 0}))
        sent = 1
    elif args.kind.startswith("fuzz-"):
        topic = args.kind[len("fuzz-") :]
        template, kind = FUZZ_TOPICS[topic]
        pub = publisher(rospy, template.format(quad=quad), getattr(m, kind))
        rng = np.random.default_rng(args.seed)
        if args.when_flying:  # set up before the episode starts, so nothing lags its flight
            print("ready", flush=True)
            rospy.wait_for_message(LOAD_REFERENCE_TOPIC, m.PoseStamped, timeout=120.0)
            now = rospy.get_time()
        for msg in fuzz_messages(topic, m, rng, now, args.count):
            if type(msg).__name__ == "Raw":  # through the topic's connections as they are
                pub.impl.publish(msg)
            else:
                pub.publish(msg)
            sent += 1
            time.sleep(0.002)
    else:
        if args.when_flying:  # set up before the episode, stamped as the flight runs
            print("ready", flush=True)
            rospy.wait_for_message(LOAD_REFERENCE_TOPIC, m.PoseStamped, timeout=120.0)
            now = rospy.get_time()
        if args.kind == "future-load-pose":
            pub = publisher(rospy, ros1.LOAD_POSE_TOPIC, m.PoseStamped)
            msg = m.PoseStamped(
                header=ros1.header(now + 100.0), pose=ros1.pose((0.0, 0.0, 5.0), (1.0, 0.0, 0.0, 0.0))
            )
        elif args.kind == "future-state":
            pub = publisher(rospy, ros1.STATE_TOPIC.format(quad=quad), m.QuadState)
            msg = ros1.quad_state(now + 100.0, (0.0, 0.0, 5.0), (1, 0, 0, 0), (0, 0, 0), (0, 0, 0))
        elif args.kind == "empty-horizon":
            pub = publisher(rospy, ros1.LOAD_HORIZON_TOPIC, m.Reference)
            msg = m.Reference(header=ros1.header(now), points=[])
        elif args.kind == "empty-trajectory":
            pub = publisher(rospy, ros1.TRAJECTORY_TOPIC.format(quad=quad), m.Reference)
            msg = m.Reference(header=ros1.header(now), points=[])
        elif args.kind == "late-reference":
            pub = publisher(rospy, ros1.TRAJECTORY_TOPIC.format(quad=quad), m.Reference)
            msg = reference(m, now + 50.0 + np.array([0.0, 1.0, 2.0]))
        elif args.kind == "off":
            pub = publisher(rospy, ros1.OFF_TOPIC.format(quad=quad), m.Empty)
            msg = m.Empty()
        else:
            parser.error(f"unknown kind {args.kind!r}")
        pub.publish(msg)
        sent = 1
    time.sleep(0.5)  # delivered before the connections close
    print(f"sent {sent}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
