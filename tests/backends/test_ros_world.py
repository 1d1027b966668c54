"""The ROS1 path end to end, against a real master: ``cableload world`` as the Gazebo world, the
Gazebo backend, planner nodes as separate processes, ``rosbag record``, failures.

Each test starts its own master and processes (``ros_graph``). Flights compared closely with
the embedded simulator run the world in lockstep (``--lockstep``: the clock waits for every
plan; real time at most): the planners' computing time then does not count, so the comparison
holds on a busy machine too, and the embedded run is given the same latency (a stock pilot's
plan takes effect its margin after it was made). One flight runs in real time
(``test_teacher_in_real_time_through_the_replacing_pilot``). Episodes are short here (the 60 s
figures of the closing note come from ``benchmarks/ros_world.py``).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
from requirements import require

from backends.agiros import MARGIN_S
from backends.planner_node import STUDENT_MARGIN_S
from backends.ros_graph import last_json
from learners.export import SHIPPED_POLICY

DURATION = "12"
NODES_DURATION = "8"  # five Python processes in lockstep run at about half real time here
QUADS = ("quad1", "quad2", "quad3")
SPECIALIST = str(SHIPPED_POLICY)  # the nodes and the embedded run fly the same policy


def simulate(ros_graph, *args: str, timeout: float = 300.0) -> dict:
    done = ros_graph.run("simulate", "--trajectory", "eight-medium", "--json", *args, timeout=timeout)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return last_json(done.stdout)


def delayed(latency_s: float) -> list[str]:
    """Options of an embedded run whose plans take effect ``latency_s`` after they are made."""
    return [
        "--set",
        "link.enabled=true",
        "--set",
        "link.drop_fraction=0",
        "--set",
        f"link.delay_min_s={latency_s}",
        "--set",
        f"link.delay_max_s={latency_s}",
    ]


@pytest.mark.slow
def test_teacher_in_lockstep_through_the_stock_pilot_flies_as_on_the_embedded_one(ros_graph):
    """The gazebo backend against the stock pilot (pieces of each plan appended to its queue,
    each taking effect ``MARGIN_S`` after it was made), the world in lockstep: as the embedded
    simulator with plans delayed so, within 15 % (measured: -3 % in position, -3 % in attitude
    over 12 s). In real time on this 2-core VM, a slow phase of the machine ran the pilots'
    queues dry 7-9 times in 12 s and the teacher flew 0.30 m (seen in a clean CI run)."""
    ros_graph.cableload("world", "world", "--lockstep")
    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "teacher", "--duration", DURATION)
    ros_graph.stop()
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert live["rejected_plans"] == 0  # no reference refused by the pilot
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")
    embedded = simulate(ros_graph, "--planner", "teacher", "--duration", DURATION, *delayed(MARGIN_S))
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.85 * embedded[key] <= live[key] <= 1.15 * embedded[key], (
            key,
            live,
            embedded,
            ros_graph.log("world"),
        )
    # the world waited for the plans of (nearly) every decision: 120 in 12 s
    line = next(line for line in ros_graph.log("world").splitlines() if "lockstep waits" in line)
    assert int(line.split("lockstep waits:")[1].split(";")[0]) >= 100, line


@pytest.mark.slow
@pytest.mark.parametrize("queue", ["stock", "replace"])
def test_a_re_timing_pilot_flies_each_plan_when_it_was_planned_for(ros_graph, queue):
    """``--pilot-times receipt`` (agiros re-times every trajectory to its arrival): the client
    starts each piece one measured link latency ahead, so in lockstep the teacher flies as on the
    embedded simulator *without* latency: within 15 % in position, 30 % in attitude (measured
    on a quiet machine: equal to 0.1 % over 12 s, with either queue; with a third process
    burning a core, 1.18x in attitude: the latency it measures then varies with the load, and
    the attitude error is only 0.12 deg), no plan refused, ``plan_latency_s`` 0."""
    times = ("--pilot-times", "receipt", "--pilot-queue", queue)
    ros_graph.cableload("world", "world", "--lockstep", *times)
    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "teacher", "--duration", DURATION, *times)
    ros_graph.stop()
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert world_rejections(ros_graph) == 0, (live, ros_graph.log("world"))  # the pilots refused none
    # the client judges refusals from the telemetry alone: exact on a quiet machine, with at most
    # a few pieces taken counted refused on a loaded one (seen: up to 13 of about 360 pieces)
    assert live["rejected_plans"] == 0 or (queue == "stock" and live["rejected_plans"] <= 20), live
    assert live["plan_latency_s"] == 0.0
    assert 0.0 <= live["link_latency_s"] < 0.05, live
    embedded = simulate(ros_graph, "--planner", "teacher", "--duration", DURATION)
    for key, within in (("rmse_position_m", 0.15), ("rmse_orientation_deg", 0.3)):
        assert (1 - within) * embedded[key] <= live[key] <= (1 + within) * embedded[key], (
            key,
            live,
            embedded,
        )


@pytest.mark.slow
@pytest.mark.parametrize("planner", ["teacher", "student"])
def test_a_flight_from_the_ground_on_the_gazebo_backend(ros_graph, tmp_path, planner):
    """``--from-ground`` against the world in lockstep: the system placed resting on the
    ground, the pilots' take-off (slack cables), the lift, the hand-over to the planner, the
    path, the set-down and the pilots' landing; as on the embedded simulator with the stock
    pilot's latency, within 10 % (measured: teacher 6.23 mm against 6.41, student 6.70 against
    6.81, over the 32 s from the ground)."""
    ros_graph.cableload("world", "world", "--lockstep")
    log = tmp_path / "ground.bag"
    ground = ("--from-ground", "--planner", planner, "--duration", "32")
    live = simulate(ros_graph, "--backend", "gazebo", *ground, "--log", str(log))
    ros_graph.stop()
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert live["landed"] is True
    assert (live["rejected_plans"], world_rejections(ros_graph)) == (0, 0), ros_graph.log("world")
    from cableload_sim.io.runlog import read_run

    s = read_run(log).samples
    rest = s.load_p[0, 2]
    assert rest < 0.1 and s.load_p[:, 2].max() > 0.95  # lifted off the floor to the path
    assert abs(s.load_p[-1, 2] - rest) < 2e-3 and np.abs(s.load_v[-1]).max() < 0.01  # set down
    embedded = simulate(ros_graph, *ground, *delayed(MARGIN_S))
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.9 * embedded[key] <= live[key] <= 1.1 * embedded[key], (key, live, embedded)


@pytest.mark.slow
def test_world_flies_the_onboard_imu_and_estimate(ros_graph):
    """``[imu]`` on in the world (each quadrotor's controller flies its onboard estimate, seeded
    from ``--seed``): the teacher in lockstep against the stock pilot flies as on the embedded
    simulator with the same IMU and plan latency, within the spread of the noise's draws (the
    embedded teacher: 0.0075 m / 0.86 deg and 0.0102 / 1.09 with seeds 0 and 1, against
    0.0055 / 0.47 without the IMU)."""
    imu = ["--set", "imu.enabled=true"]
    ros_graph.cableload("world", "world", "--lockstep", "--seed", "3", *imu)
    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "teacher", "--duration", DURATION, *imu)
    ros_graph.stop()
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert "onboard IMU and estimate (seed 3)" in ros_graph.log("world")
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")
    embedded = simulate(
        ros_graph, "--planner", "teacher", "--duration", DURATION, "--seed", "3", *imu, *delayed(MARGIN_S)
    )
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.5 * embedded[key] <= live[key] <= 2.0 * embedded[key], (
            key,
            live,
            embedded,
            ros_graph.log("world"),
        )


@pytest.mark.realtime
@pytest.mark.slow
def test_teacher_in_real_time_through_the_replacing_pilot(ros_graph):
    """At most 35 % worse than on the embedded backend, the world paced at real time (its
    real-time factor 1, what Gazebo does): the planners' computing time counts as it would in a
    flight. Over 12 s the orientation ratio has been measured up to 1.25 (drag on), so 1.25
    failed by 0.1 % once in a clean CI run. The replacing queue takes every whole plan (2 s
    long): nothing short of a 1.8 s stall empties it."""
    ros_graph.cableload("world", "world", "--real-time-factor", "1", "--pilot-queue", "replace")
    live = simulate(
        ros_graph,
        "--backend",
        "gazebo",
        "--planner",
        "teacher",
        "--duration",
        DURATION,
        "--pilot-queue",
        "replace",
    )
    embedded = simulate(ros_graph, "--planner", "teacher", "--duration", DURATION)
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    assert live["rejected_plans"] == 0
    assert live["real_time_factor"] <= 1.05  # paced: never faster than asked (slower if starved)
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.5 * embedded[key] <= live[key] <= 1.35 * embedded[key], (
            key,
            live,
            embedded,
            ros_graph.log("world"),
        )
    ros_graph.stop()
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")
    assert world_counts(ros_graph, "queue ran dry") == ["0", "0", "0"], ros_graph.log("world")


def world_counts(ros_graph, what: str) -> list[str]:
    """Per quadrotor, the world's count ``what`` from its summary at exit."""
    line = next(line for line in ros_graph.log("world").splitlines() if "accepted/rejected" in line)
    counts = line.split(f"{what}:")[1].split(";")[0]
    return [part.split()[1] for part in counts.split(",")]


def world_rejections(ros_graph) -> int:
    """References the world's pilots rejected."""
    return sum(int(count.split("/")[1]) for count in world_counts(ros_graph, "accepted/rejected"))


def node_subscriptions(state: dict) -> dict[str, set[str]]:
    by_node: dict[str, set[str]] = {}
    for topic, nodes in state["subscribers"].items():
        for node in nodes:
            by_node.setdefault(node, set()).add(topic)
    return by_node


@pytest.mark.slow
def test_student_nodes_fly_decentralized_and_rosbag_records_the_run(ros_graph, tmp_path):
    """Against the stock pilot (pieces of each plan appended to its queue), the world in
    lockstep. In real time, three student nodes, the world, the episode and rosbag (five Python
    processes) saturate 2 cores: plans left up to 0.46 s apart on the world's clock, the queues
    ran dry 0-4 times each in 12 s, and the flights ranged from 0.007 to 0.13 m; at
    half real time a clean CI run still flew 1.85x the embedded attitude error. In
    lockstep they run at 0.7-0.8x real time here and fly as the embedded student with its plans
    taking effect ``STUDENT_MARGIN_S`` after they were made: two runs 0.00641 m / 0.522 deg
    against 0.00647 / 0.495."""
    require(shutil.which("rosbag") is not None, "needs rosbag: sudo apt-get install ros-core")
    ros_graph.cableload("world", "world", "--lockstep")
    for i in range(3):
        ros_graph.cableload(
            f"node{i}",
            "node",
            "--planner",
            "student",
            "--uav",
            str(i),
            "--runtime",
            "onnx",
            "--policy",
            SPECIALIST,
        )

    def students_subscribed() -> bool:
        """Every student node has registered its own quadrotor's state and the reference (a
        node registers its subscribers one after the other: on a loaded machine the master
        may list the reference's before the state's)."""
        subscribers = ros_graph.master_state()["subscribers"]

        def student_of(q: str, topic: str) -> bool:
            return any(n.startswith(f"/cableload_student_{q}") for n in subscribers.get(topic, []))

        return all(
            student_of(q, f"/{q}/agiros_pilot/state") and student_of(q, "/cableload/load/reference_horizon")
            for q in QUADS
        )

    ros_graph.wait_for(students_subscribed, 120, "three student nodes")
    topics = [f"/{q}/agiros_pilot/{k}" for q in QUADS for k in ("state", "odometry", "trajectory")]
    topics += [
        "/mocap/load/pose",
        "/cableload/load/odometry",
        "/cableload/load/reference",
        "/cableload/cable_tension",
        "/cableload/config",
        "/cableload/metrics",
    ]
    bag = tmp_path / "nodes.bag"
    ros_graph.start("rosbag", ["rosbag", "record", "-O", str(bag), *topics])

    # each node subscribes to its own quadrotor's topics, the load's pose and the reference
    subscriptions = node_subscriptions(ros_graph.master_state())
    students = {
        node: topics_ for node, topics_ in subscriptions.items() if node.startswith("/cableload_student_")
    }
    assert len(students) == 3, subscriptions
    for node, subscribed in students.items():
        own = next(q for q in QUADS if node.startswith(f"/cableload_student_{q}"))
        allowed = {
            f"/{own}/agiros_pilot/state",
            f"/{own}/agiros_pilot/telemetry",
            "/mocap/load/pose",
            "/cableload/load/reference_horizon",
            "/clock",
        }
        assert subscribed <= allowed, (node, subscribed - allowed)
        others = [t for t in subscribed if any(t.startswith(f"/{q}/") for q in QUADS if q != own)]
        assert not others, (node, others)
        assert f"/{own}/agiros_pilot/state" in subscribed

    live = simulate(ros_graph, "--backend", "gazebo", "--planner", "nodes", "--duration", NODES_DURATION)
    assert live["status"] == "completed", (live, ros_graph.log("node0"))
    assert live["node_plans_min"] >= 0.8 * float(NODES_DURATION) * 10  # about 10 Hz from every node
    time.sleep(0.5)
    ros_graph.kill("rosbag", signal.SIGINT)
    ros_graph.wait_for(bag.exists, 10, "rosbag to close the bag")
    ros_graph.stop()  # the world and the nodes: what follows needs the cores, not the master
    assert world_rejections(ros_graph) == 0, ros_graph.log("world")

    embedded = simulate(
        ros_graph,
        "--planner",
        "student",
        "--runtime",
        "onnx",
        "--duration",
        NODES_DURATION,
        "--policy",
        SPECIALIST,
        *delayed(STUDENT_MARGIN_S),
    )
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert 0.8 * embedded[key] <= live[key] <= 1.25 * embedded[key], (
            key,
            live,
            embedded,
            ros_graph.log("world"),
        )
    recorded = ros_graph.run("metrics", str(bag), "--json")
    assert recorded.returncode == 0, recorded.stderr
    metrics = last_json(recorded.stdout)
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert metrics[key] == pytest.approx(live[key], rel=0.05), (key, metrics, live)
    shot = tmp_path / "shot.png"
    replay = ros_graph.run("replay", str(bag), "--screenshot", str(shot), "--time", "5")
    assert replay.returncode == 0, replay.stderr
    assert shot.stat().st_size > 10_000


@pytest.mark.realtime
@pytest.mark.parametrize("victim", ["world", "master"])
def test_killing_the_world_or_the_master_ends_the_episode_as_backend_failed(ros_graph, victim):
    ros_graph.cableload("world", "world", "--real-time-factor", "1")
    driver = ros_graph.cableload(
        "driver",
        "simulate",
        "--backend",
        "gazebo",
        "--planner",
        "formation",
        "--trajectory",
        "eight-slow",
        "--duration",
        "60",
        "--json",
    )
    ros_graph.wait_for(
        lambda: "/cableload/load/reference" in ros_graph.master_state()["publishers"],
        60,
        "the driver's episode",
    )
    # its first reference sample: the set-up (pilots armed, hover settled) is over, however
    # long it took on a loaded machine
    require(shutil.which("rostopic") is not None, "needs rostopic: sudo apt-get install ros-core")
    subprocess.run(
        ["rostopic", "echo", "-n", "1", "/cableload/load/reference"],
        env=ros_graph.env,
        capture_output=True,
        timeout=60,
        check=True,
    )
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


@pytest.mark.realtime
@pytest.mark.slow
def test_launch_file_runs_world_nodes_and_rosbag_for_n_quadrotors(ros_graph, tmp_path):
    """``ros/cableload/launch/multilift.launch`` with four quadrotors and a centralized planner
    node: the episode completes, ends the launch, and the recorded bag reads back."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    require(shutil.which("roslaunch") is not None, "needs roslaunch: sudo apt-get install ros-core")
    repo = Path(__file__).resolve().parents[2]
    env = {
        **ros_graph.env,
        "CABLELOAD_PYTHON": sys.executable,
        "ROS_PACKAGE_PATH": os.pathsep.join(
            filter(None, [str(repo / "ros"), ros_graph.env.get("ROS_PACKAGE_PATH", "")])
        ),
    }
    bag = tmp_path / "launch.bag"
    done = subprocess.run(
        [
            "roslaunch",
            str(repo / "ros/cableload/launch/multilift.launch"),
            "n:=4",
            "planner:=formation",
            "trajectory:=eight-slow",
            "duration:=6",
            f"bag:={bag}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    episode = last_json(done.stdout)
    assert episode["status"] == "completed", episode
    ros_graph.wait_for(bag.exists, 10, "the launch's bag")
    metrics = last_json(ros_graph.run("metrics", str(bag), "--json").stdout)
    assert metrics["rmse_position_m"] == pytest.approx(episode["rmse_position_m"], rel=0.05)
    assert metrics["min_uav_distance_m"] > 0.9


@pytest.mark.realtime
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signalled_world_ends_its_loop_and_reports(ros_graph, sig):
    """SIGINT or SIGTERM ends the world's loop at its next step, and it exits 0 with its
    summary. (A KeyboardInterrupt raised inside rospy's publish, between taking and releasing
    its lock, once ended a CI run's world on ``RuntimeError: cannot release un-acquired
    lock``, before the summary the tests read.)"""
    world = ros_graph.cableload("world", "world", "--real-time-factor", "1")
    ros_graph.wait_for(lambda: "/clock" in ros_graph.master_state()["publishers"], 60, "the world's clock")
    time.sleep(1.0)  # publishing at its rates
    ros_graph.kill("world", sig)
    assert world.returncode == 0, ros_graph.log("world")
    log = ros_graph.log("world")
    assert "Traceback" not in log, log
    assert world_counts(ros_graph, "queue ran dry") == ["0", "0", "0"], log
