"""The ROS layer under faults, against a real master and ``cableload world``: every fault ends
the episode with a named status or is survived with the figures of a clean run, never a
``completed`` with wrong figures; the world survives any single bad message and a few hundred
random or malformed ones per topic.

Faults are published by ``ros_inject.py`` (a process of its own) once the episode flies.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from requirements import require

from backends.ros_graph import last_json
from learners.export import SHIPPED_POLICY

INJECT = [sys.executable, str(Path(__file__).with_name("ros_inject.py"))]
FAULT_STATUSES = {
    "node_lost",
    "world_replaced",
    "world_reset",
    "clock_stalled",
    "system_mismatch",
    "plans_rejected",
    "uav_off",
    "pilot_override",
    "backend_failed",
}


def episode(ros_graph, *args: str, name: str = "driver"):
    """An episode of the gazebo backend started in the background."""
    return ros_graph.cableload(
        name, "simulate", "--backend", "gazebo", "--trajectory", "eight-medium", "--json", *args
    )


def wait_flying(ros_graph, seconds: float = 90.0) -> None:
    """Until the episode publishes its first reference sample (set-up over)."""
    require(shutil.which("rostopic") is not None, "needs rostopic: sudo apt-get install ros-core")
    ros_graph.wait_for(
        lambda: "/cableload/load/reference" in ros_graph.master_state()["publishers"], seconds, "the episode"
    )
    subprocess.run(
        ["rostopic", "echo", "-n", "1", "/cableload/load/reference"],
        env=ros_graph.env,
        capture_output=True,
        timeout=seconds,
        check=True,
    )


def inject(ros_graph, kind: str, *args: str, name: str = "inject") -> str:
    """Publish one fault (``ros_inject.py``) and wait until it is sent."""
    proc = ros_graph.start(name, [*INJECT, kind, *args])
    proc.wait(timeout=60)
    log = ros_graph.log(name)
    assert proc.returncode == 0 and "sent" in log, log
    return log


def inject_during(ros_graph, faults: list[tuple[str, ...]], start_episode):
    """Faults sent once an episode flies: each injector connects first and prints ``ready``,
    then ``start_episode()`` starts the episode (its process is returned), and each sends once
    the load's reference flows. Injectors started after the episode can miss a short one on a
    loaded machine."""
    injectors = [
        (f"inject{k}", ros_graph.start(f"inject{k}", [*INJECT, *fault, "--when-flying"]))
        for k, fault in enumerate(faults)
    ]
    for name, _ in injectors:
        ros_graph.wait_for(lambda name=name: "ready" in ros_graph.log(name), 60.0, name)
    driver = start_episode()
    for name, proc in injectors:
        proc.wait(timeout=120)
        assert proc.returncode == 0 and "sent" in ros_graph.log(name), ros_graph.log(name)
    return driver


def result_of(ros_graph, proc, name: str = "driver", timeout: float = 120.0) -> dict:
    proc.wait(timeout=timeout)
    return last_json(ros_graph.log(name))


def fly(ros_graph, *args: str, timeout: float = 180.0) -> dict:
    done = ros_graph.run(
        "simulate", "--backend", "gazebo", "--trajectory", "eight-medium", "--json", *args, timeout=timeout
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return last_json(done.stdout)


def same_figures(live: dict, clean: dict, rel: float, context=None) -> None:
    for key in ("rmse_position_m", "rmse_orientation_deg"):
        assert live[key] == pytest.approx(clean[key], rel=rel), (context, key, live, clean)


@pytest.mark.parametrize(
    "fault, status, detail",
    [
        ("reset-world", "world_reset", "the world was reset"),
        ("off", "uav_off", "quad2"),
        ("late-reference", "plans_rejected", "quad1"),
        ("pause-physics", "clock_stalled", "alive"),
        ("world-param", "world_replaced", "replaced"),
    ],
)
@pytest.mark.slow
def test_a_fault_mid_flight_ends_the_episode_with_its_status(ros_graph, fault, status, detail):
    """Each of these once ended ``completed`` with wrong figures, crashed or hung: a reset
    world (the load parked at spawn, 205 references refused and 0 reported), ``off`` to one
    quadrotor (the world froze silently), a reference 50 s ahead blocking a stock queue (73
    refused, 0 reported), a paused world publishing an unchanged clock (the episode waited
    forever), another world taking over."""
    world = ros_graph.cableload("world", "world")
    driver = episode(ros_graph, "--planner", "formation", "--duration", "40")
    wait_flying(ros_graph)
    time.sleep(1.0)
    inject(ros_graph, fault, "--quad", "quad2" if fault == "off" else "quad1")
    started = time.monotonic()
    result = result_of(ros_graph, driver)
    assert result["status"] == status, (result, ros_graph.log("world"))
    assert detail in result["message"], result
    assert driver.returncode == 1
    assert time.monotonic() - started < 20.0
    assert result["sim_time_s"] < 30.0
    if fault == "late-reference":  # every refusal counted, as the world counted them
        assert result["rejected_plans"] >= 10, result
    ros_graph.stop()
    assert world.returncode == 0, ros_graph.log("world")
    log = ros_graph.log("world")
    if fault == "off":
        assert "quad2 switched off in flight; the flight stops here" in log, log
    if fault == "late-reference":
        refused = sum(
            int(part.split("/")[1]) for part in log.split("accepted/rejected:")[1].split(";")[0].split(",")
        )
        assert refused >= result["rejected_plans"] - 1, (result, log)


@pytest.mark.slow
def test_bad_messages_are_survived_with_the_figures_of_a_clean_run(ros_graph):
    """An empty reference on a pilot's topic once crashed the world (IndexError); a state
    stamped 100 s ahead made the run diverge within 1 s; an empty reference horizon from
    another node ended the lockstep world's waits. Now the world rejects the first (counted
    by the episode), the second is dropped for its stamp, the third is ignored, and the
    episode flies as a clean one does (the world in lockstep: figures within 5 %)."""
    world = ros_graph.cableload("world", "world", "--lockstep")
    clean = fly(ros_graph, "--planner", "formation", "--duration", "8")
    assert clean["status"] == "completed", clean
    driver = inject_during(
        ros_graph,
        [("empty-trajectory",), ("future-state",), ("empty-horizon",)],
        lambda: episode(ros_graph, "--planner", "formation", "--duration", "8"),
    )
    live = result_of(ros_graph, driver)
    assert live["status"] == "completed", (live, ros_graph.log("world"))
    same_figures(live, clean, rel=0.05)
    assert live["rejected_plans"] == 1, live  # the empty reference, refused by the pilot
    assert live["stamps_dropped"] >= 1, live
    assert world.poll() is None, ros_graph.log("world")
    ros_graph.stop()
    log = ros_graph.log("world")
    assert "rejected (hover" in log or "rejected (tracking" in log, log
    assert "empty reference horizon from /cableload_inject" in log and "ignored" in log, log


@pytest.mark.slow
def test_a_second_world_is_refused_and_the_first_flies_on(ros_graph):
    """A second ``cableload world`` on the same master once made the master shut the first one
    down mid-flight (one node name), and the episode carried on against the new world."""
    ros_graph.cableload("world", "world")
    driver = episode(ros_graph, "--planner", "formation", "--duration", "8")
    wait_flying(ros_graph)
    second = ros_graph.cableload("world2", "world")
    second.wait(timeout=60)
    assert second.returncode == 1, ros_graph.log("world2")
    assert "a world is already running on this master" in ros_graph.log("world2")
    result = result_of(ros_graph, driver)
    assert result["status"] == "completed", result
    assert result["rmse_position_m"] < 0.2, result


@pytest.mark.slow
def test_a_world_of_another_system_or_configuration_is_refused(ros_graph):
    """A world of four quadrotors against an episode of three ended "diverged"; options the
    gazebo backend cannot honour (sensing) were silently ignored."""
    ros_graph.cableload("world", "world", "--uavs", "4")
    started = time.monotonic()
    result = fly(ros_graph, "--planner", "formation", "--duration", "5")
    assert result["status"] == "system_mismatch", result
    assert "4 quadrotors" in result["message"] and "--uavs" in result["message"], result
    imu = fly(
        ros_graph, "--planner", "formation", "--duration", "5", "--uavs", "4", "--set", "imu.enabled=true"
    )
    assert imu["status"] == "system_mismatch", imu
    assert "imu.enabled: this episode True, the world False" in imu["message"], imu
    assert time.monotonic() - started < 90.0
    done = ros_graph.run(
        "simulate", "--backend", "gazebo", "--uavs", "4", "--set", "sensing.enabled=true", "--duration", "5"
    )
    assert done.returncode == 2, done.stderr
    assert "sensing.enabled=true" in done.stderr and "Traceback" not in done.stderr


def test_planner_nodes_that_never_start_end_node_lost(ros_graph):
    """``--planner nodes`` with no node running waited 30 s, then reported "diverged"."""
    ros_graph.cableload("world", "world", "--lockstep")
    result = fly(ros_graph, "--planner", "nodes", "--duration", "5", "--node-wait", "2")
    assert result["status"] == "node_lost", result
    assert all(q in result["message"] for q in ("quad1", "quad2", "quad3")), result
    assert "cableload node" in result["message"]


@pytest.mark.slow
def test_student_nodes_under_faults(ros_graph):
    """Three student nodes against the world in lockstep. A load pose stamped 100 s ahead
    (once 0.189 m / 5.6 deg against 0.0037 m) and an empty reference horizon from another
    node (once queues dry, 3.5x the error) leave the flight as a clean one; a node killed
    with SIGKILL (once ``completed`` at 0.82 m / 93 deg) ends the next episode ``node_lost``
    naming its quadrotor."""
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
            str(SHIPPED_POLICY),
        )
    ros_graph.wait_for(
        lambda: (
            len(
                [
                    node
                    for node in ros_graph.master_state()["subscribers"].get(
                        "/cableload/load/reference_horizon", []
                    )
                    if node.startswith("/cableload_student_")
                ]
            )
            == 3
        ),
        120,
        "three student nodes",
    )
    clean = fly(ros_graph, "--planner", "nodes", "--duration", "6")
    assert clean["status"] == "completed", (clean, ros_graph.log("node0"))

    driver = inject_during(
        ros_graph,
        [("future-load-pose",), ("empty-horizon",), ("empty-trajectory", "--quad", "quad3")],
        lambda: episode(ros_graph, "--planner", "nodes", "--duration", "6"),
    )
    live = result_of(ros_graph, driver)
    assert live["status"] == "completed", (live, ros_graph.log("node0"))
    assert clean["rejected_plans"] == 0 and live["rejected_plans"] == 1, (clean, live)
    same_figures(live, clean, rel=0.25)  # as the lockstep nodes against the embedded student

    driver = episode(ros_graph, "--planner", "nodes", "--duration", "20", name="driver2")
    wait_flying(ros_graph)
    time.sleep(1.0)
    ros_graph.kill("node1")
    lost = result_of(ros_graph, driver, name="driver2")
    assert lost["status"] == "node_lost", lost
    assert "quad2" in lost["message"] and "quad1" not in lost["message"], lost
    ros_graph.stop()
    summaries = "".join(ros_graph.log(f"node{i}", tail=None) for i in (0, 2))
    dropped = [
        int(line.split(" messages dropped")[0].split(", ")[-1])
        for line in summaries.splitlines()
        if "messages dropped" in line
    ]
    ignored = [
        int(line.split(" reference horizons ignored")[0].split(", ")[-1])
        for line in summaries.splitlines()
        if "reference horizons ignored" in line
    ]
    assert len(dropped) == 2 and min(dropped) >= 1, summaries
    assert len(ignored) == 2 and min(ignored) >= 1, summaries


FUZZED = ("trajectory", "enable", "start", "land", "off", "force-hover", "horizon")


@pytest.mark.slow
def test_fuzzing_the_worlds_topics(ros_graph):
    """300 random or malformed messages (a quarter of them raw bytes) on each topic the world
    subscribes to, seeded: the world never dies, and each episode either completes with the
    figures of a clean run (within 5 %) or ends with a named fault status."""
    world = ros_graph.cableload("world", "world", "--lockstep", "--real-time-factor", "0")
    clean = fly(ros_graph, "--planner", "formation", "--duration", "6")
    assert clean["status"] == "completed", clean
    outcomes = {}
    for k, topic in enumerate(FUZZED):
        driver = inject_during(
            ros_graph,
            [(f"fuzz-{topic}", "--count", "300", "--seed", str(k))],
            lambda topic=topic: episode(
                ros_graph, "--planner", "formation", "--duration", "6", name=f"driver-{topic}"
            ),
        )
        result = result_of(ros_graph, driver, name=f"driver-{topic}")
        outcomes[topic] = result["status"]
        if result["status"] == "completed":
            same_figures(result, clean, rel=0.05, context=(topic, ros_graph.log("world")))
        else:
            assert result["status"] in FAULT_STATUSES, (topic, result)
        assert world.poll() is None, (topic, ros_graph.log("world"))
    ros_graph.kill("world", signal.SIGINT)
    assert world.returncode == 0, ros_graph.log("world")
    assert "accepted/rejected" in ros_graph.log("world")
    # the Empty-typed commands that change the flight are reported as such
    assert outcomes["off"] == "uav_off" and outcomes["land"] == "pilot_override", outcomes


def test_the_ros_tools_read_the_agiros_topics(ros_graph, tmp_path):
    """``rostopic echo`` could not load ``agiros_msgs/QuadState``: ``cableload ros-messages``
    writes the message packages it needs (with the real packages' MD5 sums)."""
    require(shutil.which("rostopic") is not None, "needs rostopic: sudo apt-get install ros-core")
    done = ros_graph.run("ros-messages", "--out", str(tmp_path / "msgs"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"export ROS_PACKAGE_PATH={tmp_path / 'msgs'}"), done.stdout
    ros_graph.cableload("world", "world")
    env = {**ros_graph.env, "ROS_PACKAGE_PATH": str(tmp_path / "msgs")}
    for topic, field in (
        ("/quad1/agiros_pilot/state", "motors"),
        ("/quad1/agiros_pilot/telemetry", "bridge_armed"),
        ("/cableload/cable_tension", "tension"),
    ):
        echo = subprocess.run(
            ["rostopic", "echo", "-n", "1", topic], env=env, capture_output=True, text=True, timeout=60
        )
        assert echo.returncode == 0 and field in echo.stdout, (topic, echo.stdout, echo.stderr)
    md5 = subprocess.run(
        ["rosmsg", "md5", "agiros_msgs/Telemetry"], env=env, capture_output=True, text=True, timeout=60
    )
    assert md5.stdout.strip() == "5251574f675e7717477eef1003887d54", md5


def test_cableload_launch_exits_with_the_episodes_status(ros_graph):
    """roslaunch exits 0 whatever its episode did; ``cableload launch`` exits with it."""
    require(shutil.which("roslaunch") is not None, "needs roslaunch: sudo apt-get install ros-core")
    done = ros_graph.run("launch", "n:=3", "planner:=formation", "duration:=-1", timeout=120)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "without an episode result" in done.stderr


def test_ctrl_c_ends_a_simulation_in_one_line_with_its_log_readable(ros_graph, tmp_path):
    """Ctrl-C on ``simulate`` printed a KeyboardInterrupt traceback."""
    bag = tmp_path / "stopped.bag"
    proc = ros_graph.cableload(
        "simulate", "simulate", "--planner", "formation", "--duration", "600", "--log", str(bag)
    )
    active = bag.with_name(bag.name + ".active")  # renamed to bag once closed
    ros_graph.wait_for(
        lambda: active.exists() and active.stat().st_size > 100_000, 120, "the run log to grow"
    )
    ros_graph.kill("simulate", signal.SIGINT)
    assert proc.returncode == 130, ros_graph.log("simulate")
    log = ros_graph.log("simulate")
    assert "cableload: simulate interrupted" in log and "Traceback" not in log, log
    assert bag.exists() and not active.exists()
    metrics = ros_graph.run("metrics", str(bag), "--json")
    assert metrics.returncode == 0, metrics.stderr
    assert last_json(metrics.stdout)["sim_time_s"] >= 1.0  # at least the first flushed second


def test_a_planner_node_reports_on_sigterm(ros_graph):
    """``cableload node`` printed its summary only on Ctrl-C; roslaunch and kill send
    SIGTERM."""
    ros_graph.cableload("world", "world")
    node = ros_graph.cableload("node", "node", "--planner", "formation")
    ros_graph.wait_for(lambda: "planning for every quadrotor" in ros_graph.log("node"), 60, "the node")
    ros_graph.kill("node", signal.SIGTERM)
    assert node.returncode == 0, ros_graph.log("node")
    assert "cableload node: 0 plans sent" in ros_graph.log("node", tail=None)
