"""Publishing an episode's own topics on a ROS graph, so that ``rosbag record`` of a run holds
what ``cableload metrics``, ``plot`` and ``replay`` read: the configuration (latched, at the
start), the load reference at every sample's stamp, and the metrics (latched, at the end). The
world publishes the states, the pilots' references travel on their own topics.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from backends import ros1

FORMAT = "cableload-ros"


class RosTopicsLogger:
    """An ``EpisodeLogger`` that publishes instead of writing; episode times plus ``t0``."""

    def __init__(self, backend):
        rospy = ros1.rospy()
        m = ros1.messages()
        self.backend = backend
        self.pub_config = rospy.Publisher(ros1.CONFIG_TOPIC, m.String, queue_size=1, latch=True)
        self.pub_metrics = rospy.Publisher(ros1.METRICS_TOPIC, m.String, queue_size=1, latch=True)
        self.pub_reference = rospy.Publisher(ros1.LOAD_REFERENCE_TOPIC, m.PoseStamped, queue_size=200)

    def start(self, system, reference, scenario, planner_name: str) -> None:
        info = {
            "format": FORMAT,
            "version": 1,
            "quad_names": list(self.backend.names),
            "planner": planner_name,
            "reference": reference.describe() if hasattr(reference, "describe") else None,
            "scenario": {
                "load_p": scenario.load_p.tolist(),
                "load_q": scenario.load_q.tolist(),
                "seed": scenario.seed,
            },
            "system": dataclasses.asdict(system),
            "t0": self.backend.t0,
        }
        self.pub_config.publish(ros1.messages().String(json.dumps(info, default=float)))

    def plans(self, t: float, trajectories) -> None:
        pass  # the pilots' trajectory topics carry them

    def samples(self, samples, ref_p: np.ndarray, ref_q: np.ndarray) -> None:
        m = ros1.messages()
        t0 = self.backend.t0
        for k, t in enumerate(samples.t):
            self.pub_reference.publish(
                m.PoseStamped(header=ros1.header(t + t0), pose=ros1.pose(ref_p[k], ref_q[k]))
            )

    def finish(self, status: str, metrics: dict) -> None:
        clean = {k: (v if not isinstance(v, float) or np.isfinite(v) else None) for k, v in metrics.items()}
        self.pub_metrics.publish(
            ros1.messages().String(json.dumps({**clean, "status": status}, default=float))
        )


class FanOutLogger:
    """Several ``EpisodeLogger``s as one."""

    def __init__(self, *loggers):
        self.loggers = [log for log in loggers if log is not None]

    def start(self, *args) -> None:
        for log in self.loggers:
            log.start(*args)

    def plans(self, *args) -> None:
        for log in self.loggers:
            log.plans(*args)

    def samples(self, *args) -> None:
        for log in self.loggers:
            log.samples(*args)

    def safety(self, event: dict) -> None:
        for log in self.loggers:
            if hasattr(log, "safety"):
                log.safety(event)

    def operator(self, action: dict) -> None:
        for log in self.loggers:
            if hasattr(log, "operator"):
                log.operator(action)

    def finish(self, *args) -> None:
        for log in self.loggers:
            log.finish(*args)
