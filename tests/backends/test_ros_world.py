"""The ROS1 path end to end, against a real master: ``cableload world`` as the Gazebo world, the
Gazebo backend, planner nodes as separate processes, ``rosbag record``, failures.

Each test starts its own master and processes (``ros_graph``); the world runs at real-time
factor 1, so the planners' computing time counts as it would in a flight. Episodes are short
here (the 60 s figures of the closing note come from ``benchmarks/ros_world.py``).
"""

from __future__ import annotations

import shutil
import signal
import time

import pytest
from requirements import require

from backends.ros_graph import last_json
from learners.export import SHIPPED_POLICY

DURATION = "12"
QUADS = ("quad1", "quad2", "quad3")
SPECIALIST = str(SHIPPED_POLICY)  # the nodes and the embedded run fly the same policy


def simulate(ros_graph, *args: str, timeout: float = 300.0) -> dict:
    done = ros_graph.run("simulate", "--trajectory", "eight-medium", "--json", *args,
                         timeout=timeout)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return last_json(done.stdout)


def within(value: float, reference: float, factor: float) -> bool:
    return value <= reference * factor


@pytest.mark.parametrize("queue,factor", [("stock", 0.5), ("replace", 1.0)])
def test_teacher_through_the_gazebo_backend_flies_as_on_the_embedded_one(ros_graph, queue,
                                                                           factor):
    """At most 25 % worse than on the embedded backend. Against the stock pilot it flies
    better (by 15-30 % in 12 s runs): the teacher's plans fly better when they take effect
    0.1 s after they were made, as that pilot's queue makes them (so they do on the embedded
    simulator with plans delayed so), hence no lower bound near 1.

    The stock pilot's queue runs dry when a plan is more than its margin late, so that case
    runs at half real time: in a clean CI run of session 6, with the VM at about half its
    usual speed (the whole suite 10.4 min), the queues ran dry 7-9 times in 12 s at real-time
    factor 1 and the teacher flew 0.30 m. The replacing queue takes every whole plan (2 s
    long) and runs in real time."""
    ros_graph.cableload("world", "world", "--real-time-factor", str(factor), "--pilot-queue",
                        queue)
    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "teacher", "--duration",
                    DURATION, "--pilot-queue", queue)
    embedded = simulate(ros_graph, "--planner", "teacher", "--duration", DURATION)
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert live["rejected_plans"] == 0  # no reference refused by the pilot
    # paced: never faster than asked (slower if starved)
    assert live["real_time_factor"] <= 1.05 * factor
    # 1.35: over 12 s the orientation ratio has been measured up to 1.25 (replace queue, drag
    # on), so 1.25 failed by 0.1 % once in a clean CI run
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.5 * embedded[key] <= live[key] <= 1.35 * embedded[key], (
            key, live, embedded, ros_graph.log("world"))
    ros_graph.stop()
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")
    if queue == "replace":  # every plan whole: nothing short of a 1.8 s stall empties it
        assert world_counts(ros_graph, "queue ran dry") == ["0", "0", "0"], \
            ros_graph.log("world")


def world_counts(ros_graph, what: str) -> list[str]:
    """Per quadrotor, the world's count ``what`` from its summary at exit."""
    line = next(line for line in ros_graph.log("world").splitlines()
                if "accepted/rejected" in line)
    counts = line.split(f"{what}:")[1].split(";")[0]
    return [part.split()[1] for part in counts.split(",")]


def world_rejections(ros_graph) -> int:
    """References the world's pilots rejected."""
    return sum(int(count.split("/")[1]) for count in world_counts(ros_graph,
                                                                  "accepted/rejected"))


def node_subscriptions(state: dict) -> dict[str, set[str]]:
    by_node: dict[str, set[str]] = {}
    for topic, nodes in state["subscribers"].items():
        for node in nodes:
            by_node.setdefault(node, set()).add(topic)
    return by_node


def test_student_nodes_fly_decentralized_and_rosbag_records_the_run(ros_graph, tmp_path):
    """Against the stock pilot (pieces of each plan appended to its queue)."""
    require(shutil.which("rosbag") is not None, "needs rosbag: sudo apt-get install ros-core")
    # Half real time: three student nodes, the world, the episode and rosbag (five Python
    # processes) saturate 2 cores at real-time factor 1; plans then left up to 0.46 s apart on
    # the world's clock, the stock pilots' queues ran dry 0-4 times each in 12 s and the
    # flights ranged from 0.007 to 0.13 m (session 6, this machine). At 0.5 none ran dry.
    ros_graph.cableload("world", "world", "--real-time-factor", "0.5")
    for i in range(3):
        ros_graph.cableload(f"node{i}", "node", "--planner", "student", "--uav", str(i),
                            "--runtime", "onnx", "--policy", SPECIALIST)
    ros_graph.wait_for(
        lambda: len(ros_graph.master_state()["subscribers"].get(
            "/cableload/load/reference_horizon", [])) == 3, 120, "three student nodes")
    topics = [f"/{q}/agiros_pilot/{k}" for q in QUADS for k in ("state", "odometry",
                                                                 "trajectory")]
    topics += ["/mocap/load/pose", "/cableload/load/odometry", "/cableload/load/reference",
               "/cableload/cable_tension", "/cableload/config", "/cableload/metrics"]
    bag = tmp_path / "nodes.bag"
    ros_graph.start("rosbag", ["rosbag", "record", "-O", str(bag), *topics])

    # each node subscribes to its own quadrotor's topics, the load's pose and the reference
    subscriptions = node_subscriptions(ros_graph.master_state())
    students = {node: topics_ for node, topics_ in subscriptions.items()
                if node.startswith("/cableload_student_")}
    assert len(students) == 3, subscriptions
    for node, subscribed in students.items():
        own = next(q for q in QUADS if node.startswith(f"/cableload_student_{q}"))
        allowed = {f"/{own}/agiros_pilot/state", f"/{own}/agiros_pilot/telemetry",
                   "/mocap/load/pose", "/cableload/load/reference_horizon", "/clock"}
        assert subscribed <= allowed, (node, subscribed - allowed)
        others = [t for t in subscribed if any(t.startswith(f"/{q}/") for q in QUADS if q != own)]
        assert not others, (node, others)
        assert f"/{own}/agiros_pilot/state" in subscribed

    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "nodes", "--duration",
                    DURATION)
    assert live["status"] == "completed", (live, ros_graph.log("node0"))
    assert live["node_plans_min"] >= 0.8 * float(DURATION) * 10  # about 10 Hz from every node
    embedded = simulate(ros_graph, "--planner", "student", "--runtime", "onnx", "--duration",
                        DURATION, "--policy", SPECIALIST)
    # The nodes' plans take effect planner_node.STUDENT_MARGIN_S (0.15 s) later than the
    # embedded student's (the stock pilot's queue): 0.0063 m / 0.48 deg against 0.006 m /
    # 0.7 deg embedded.
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert within(live[key], embedded[key], 1.5), (key, live, embedded,
                                                       ros_graph.log("world"))

    time.sleep(0.5)
    ros_graph.kill("rosbag", signal.SIGINT)
    ros_graph.wait_for(bag.exists, 10, "rosbag to close the bag")
    recorded = ros_graph.run("metrics", str(bag), "--json")
    assert recorded.returncode == 0, recorded.stderr
    metrics = last_json(recorded.stdout)
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert metrics[key] == pytest.approx(live[key], rel=0.05), (key, metrics, live)
    ros_graph.stop()
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")
    shot = tmp_path / "shot.png"
    replay = ros_graph.run("replay", str(bag), "--screenshot", str(shot), "--time", "5")
    assert replay.returncode == 0, replay.stderr
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("victim", ["world", "master"])
def test_killing_the_world_or_the_master_ends_the_episode_as_backend_failed(ros_graph, victim):
    ros_graph.cableload("world", "world", "--real-time-factor", "1")
    driver = ros_graph.cableload("driver", "simulate", "--backend", "gazebo", "--planner",
                                 "formation", "--trajectory", "eight-slow", "--duration", "60",
                                 "--json")
    ros_graph.wait_for(
        lambda: "/cableload/load/reference" in ros_graph.master_state()["publishers"], 60,
        "the driver's episode")
    time.sleep(3.0)  # the episode is under way
    killed_at = time.monotonic()
    ros_graph.kill(victim)
    driver.wait(timeout=30)
    ended_after = time.monotonic() - killed_at
    result = last_json(ros_graph.log("driver"))
    assert result["status"] == "backend_failed", result
    assert ("no /clock" if victim == "world" else "stopped answering") in result["message"]
    assert driver.returncode == 1
    assert ended_after < 3.0  # detection within 0.5 s, then the process reports and exits
    if victim == "world":
        silent = float(result["message"].split("for ")[1].split(" s")[0])
        assert silent < 0.5
    assert result["sim_time_s"] < 20.0


def test_launch_file_runs_world_nodes_and_rosbag_for_n_quadrotors(ros_graph, tmp_path):
    """``ros/cableload/launch/multilift.launch`` with four quadrotors and a centralized planner
    node: the episode completes, ends the launch, and the recorded bag reads back."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    require(shutil.which("roslaunch") is not None, "needs roslaunch: sudo apt-get install ros-core")
    repo = Path(__file__).resolve().parents[2]
    env = {**ros_graph.env, "CABLELOAD_PYTHON": sys.executable,
           "ROS_PACKAGE_PATH": os.pathsep.join(filter(None, [
               str(repo / "ros"), ros_graph.env.get("ROS_PACKAGE_PATH", "")]))}
    bag = tmp_path / "launch.bag"
    done = subprocess.run(
        ["roslaunch", str(repo / "ros/cableload/launch/multilift.launch"), "n:=4",
         "planner:=formation", "trajectory:=eight-slow", "duration:=6", f"bag:={bag}"],
        env=env, capture_output=True, text=True, timeout=240, start_new_session=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    episode = last_json(done.stdout)
    assert episode["status"] == "completed", episode
    ros_graph.wait_for(bag.exists, 10, "the launch's bag")
    metrics = last_json(ros_graph.run("metrics", str(bag), "--json").stdout)
    assert metrics["rmse_position_m"] == pytest.approx(episode["rmse_position_m"], rel=0.05)
    assert metrics["min_uav_distance_m"] > 0.9
