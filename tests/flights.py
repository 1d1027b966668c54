"""Recorded flights for the tests: a quick real run of the formation baseline, and a bag as a
real flight records it. Imported as ``from flights import ...`` (a module name of its own: each
test folder may have its ``conftest``)."""

from __future__ import annotations


def fly_formation(config, duration: float, logger=None, trajectory: str = "eight-slow"):
    """The formation baseline on the embedded backend (optionally logged), keeping its samples:
    a quick real run."""
    from backends import make_backend
    from backends.runner import run_episode
    from cableload_sim.trajectories import make_reference
    from planners import make_planner

    return run_episode(
        make_backend("embedded", config),
        make_planner("formation", config),
        make_reference(trajectory),
        duration,
        logger=logger,
        keep_samples=True,
    )


def write_flight_bag(path, topics: bool = True, load: bool = True):
    """A bag as a real flight records it: mocap of the load at 100 Hz and two quadrotors'
    ``agiros_pilot/state`` at 50 Hz with an offset, lz4 chunks, stamped with wall-clock time, no
    config, reference or tensions. Without ``topics``: only a topic of no interest here; without
    ``load``: the quadrotors' states alone."""
    import numpy as np
    from rosbags.rosbag1 import Writer

    from cableload_sim.io.runlog import LOAD_POSE_TOPIC, make_typestore

    store = make_typestore()
    T = store.types

    def header(ns):
        return T["std_msgs/msg/Header"](0, T["builtin_interfaces/msg/Time"](ns // 10**9, ns % 10**9), "world")

    def pose(p):
        return T["geometry_msgs/msg/Pose"](
            T["geometry_msgs/msg/Point"](*p), T["geometry_msgs/msg/Quaternion"](0.0, 0.0, 0.0, 1.0)
        )

    zero = T["geometry_msgs/msg/Vector3"](0.0, 0.0, 0.0)
    twist = T["geometry_msgs/msg/Twist"](zero, zero)
    start = 1_700_000_000 * 10**9
    writer = Writer(path)
    writer.set_compression(Writer.CompressionFormat.LZ4)
    with writer:
        if not topics:
            chatter = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
            for k in range(10):
                writer.write(
                    chatter,
                    start + k,
                    store.serialize_ros1(T["std_msgs/msg/String"](f"hello {k}"), "std_msgs/msg/String"),
                )
            return start
        mocap = writer.add_connection(LOAD_POSE_TOPIC, "geometry_msgs/msg/PoseStamped", typestore=store)
        quads = [
            writer.add_connection(
                f"/alpha{i}/agiros_pilot/state", "agiros_msgs/msg/QuadState", typestore=store
            )
            for i in (1, 2)
        ]
        for k in range(300 if load else 0):
            ns = start + k * 10**7
            msg = T["geometry_msgs/msg/PoseStamped"](header(ns), pose([0.5 * k / 100, 0, 1]))
            writer.write(mocap, ns, store.serialize_ros1(msg, "geometry_msgs/msg/PoseStamped"))
        for k in range(150):
            ns = start + 3 * 10**6 + k * 2 * 10**7
            t = (ns - start) / 1e9
            for i, conn in enumerate(quads):
                msg = T["agiros_msgs/msg/QuadState"](
                    header(ns),
                    ns / 1e9,
                    pose([t, 2.0 * i, 2.0]),
                    twist,
                    twist,
                    zero,
                    zero,
                    zero,
                    zero,
                    np.zeros(0),
                )
                writer.write(conn, ns, store.serialize_ros1(msg, "agiros_msgs/msg/QuadState"))
    return start
