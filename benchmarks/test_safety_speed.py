"""The safety module's cost per decision, and the dead-man switch's reaction on the topics.

``check`` times one decision of the safety module for three quadrotors (every rule, the plans
stacked) as the episode runner makes it every planner period: on the embedded simulator this is
all it adds. ``deadman`` lets the operator's dead-man go and times until every quadrotor's
``off`` has been received on its pilot's topic (a subscriber on each ``/<quad>/agiros_pilot/off``,
through a real ROS master): 20 releases, median and worst in the report (the target is 100 ms).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from cableload_sim.params import load_config
from cableload_sim.physics.simulator import Simulator
from cableload_sim.trajectories import make_reference
from hw.safety import SafetyModule
from planners.formation import FormationPlanner


def test_safety_check_time(benchmark):
    config = load_config()
    sim = Simulator(config)
    reference = make_reference("eight-medium")
    sim.reset(*reference.start_pose())
    planner = FormationPlanner(config.system, tilt=True)
    state = sim.world_state()
    plans = planner.plan(state, reference)
    module = SafetyModule()
    for _ in range(20):
        module.check(state, plans)
    benchmark.pedantic(lambda: module.check(state, plans), rounds=500, iterations=1)
    assert not module.stopped


class ManualSource:
    """The operator's input, pressed from the benchmark."""

    name = "bench"

    def __init__(self):
        self._events = []
        self._lock = threading.Lock()

    def press(self, pressed: bool) -> float:
        from hw.operator import Button, OperatorEvent

        t = time.time()
        with self._lock:
            self._events.append(OperatorEvent(Button.DEADMAN, pressed, t, self.name))
        return t

    def poll(self, phase):
        with self._lock:
            events, self._events = self._events, []
        return events

    def close(self):
        pass


def test_deadman_release_to_off_on_every_topic(benchmark, tmp_path):
    from backends import ros1
    from backends.ros1 import RosUnavailable
    from backends.ros_graph import RosGraph

    try:
        graph = RosGraph(tmp_path)
    except RosUnavailable as err:
        pytest.skip(str(err))
    import os

    os.environ.update({k: graph.env[k] for k in ("ROS_MASTER_URI", "ROS_HOSTNAME")})
    try:
        from backends.agiros import AgirosClient
        from backends.gazebo import init_node
        from hw.flight import EXAMPLE, read_flight
        from hw.fly import Station

        flight = read_flight(EXAMPLE)
        init_node("cableload_bench_deadman")
        rospy = ros1.rospy()
        received: dict[str, float] = {}

        def on_off(name):
            def callback(_msg):
                received[name] = time.time()

            return callback

        subscribers = [
            rospy.Subscriber(ros1.OFF_TOPIC.format(quad=q), ros1.messages().Empty, on_off(q), queue_size=10)
            for q in flight.names
        ]

        class Pilots:  # what the station needs of a backend
            clients = [AgirosClient(q, "stock") for q in flight.names]
            time = 0.0

            def command(self, i, action):
                pass

        backend = Pilots()
        deadline = time.monotonic() + 10.0
        while not all(c.pub_commands["off"].get_num_connections() for c in backend.clients):
            assert time.monotonic() < deadline, "the off subscribers did not connect"
            time.sleep(0.01)
        source = ManualSource()
        station = Station(flight, backend, source)
        station.start()
        delays = []

        def release() -> None:
            source.press(True)
            time.sleep(0.05)
            received.clear()
            released = source.press(False)
            while len(received) < len(flight.names):
                time.sleep(0.0005)
            delays.append(max(received.values()) - released)

        benchmark.pedantic(release, rounds=20, iterations=1)
        station.close()
        for sub in subscribers:
            sub.unregister()
        benchmark.extra_info["release_to_last_off_median_ms"] = 1e3 * float(np.median(delays))
        benchmark.extra_info["release_to_last_off_worst_ms"] = 1e3 * float(np.max(delays))
        print(
            f"dead-man release to the last off received: median {1e3 * np.median(delays):.1f} ms, "
            f"worst {1e3 * np.max(delays):.1f} ms over {len(delays)} releases"
        )
        assert len(delays) == 20
    finally:
        graph.stop()


if __name__ == "__main__":
    pytest.main([__file__, "--benchmark-enable", "-s", "-q"])
