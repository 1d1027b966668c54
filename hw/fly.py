"""``cableload fly``: a flight from the ground to the ground, flown by an operator.

The station (``Station``) runs the flight in phases (``hw.operator.PHASES``):

1. ``idle``: the operator holds the dead-man and presses ``enable``: every pilot is armed;
2. ``enabled``: ``takeoff``: every pilot's ``start`` climbs its take-off height (cables still
   slack) and hovers; ``airborne`` once every quadrotor hovers there;
3. ``start_transport``: the planner is built and its first plans are shown (RViz markers on
   ``/cableload/plans`` and a summary on the terminal): ``shown``;
4. ``confirm``: the transport (``transport``): the episode runner flies a reference from the
   ground (``cableload_sim.trajectories.lift``): the lift planner tightens the cables and
   lifts the load, the chosen planner (teacher or students) flies the path once the load hangs
   free, the lift planner sets it down and brings the quadrotors back above their slots. Every
   plan passes the safety module (the flight file's limits);
5. ``done``: ``land``: every pilot lands (from hover), then is switched off: ``landed``.

At any moment, letting the dead-man go sends ``off`` to every quadrotor at once, from the
thread that reads the operator's input (not the planner's loop), and the flight ends
``operator_off``; ``hover``, ``land`` and ``off`` during the transport stop it likewise
(``operator_hover``, ``operator_land``, ``operator_off``). A safety rule ends it
``safety_stop``. Every operator action and safety intervention goes into the run log.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from backends import ros1
from backends.runner import run_episode
from cableload_sim.errors import CableloadError
from cableload_sim.metrics import uav_distances
from hw.backend import HardwareBackend
from hw.flight import FlightFile
from hw.operator import Button, InputSource, OperatorEvent
from hw.safety import Action, SafetyInputs, SafetyModule, decide

POLL_S = 0.002
"""How often the operator's input is read (s): the dead-man's reaction time."""
WATCH_S = 0.005
"""How often (s) the station checks the safety module's time rules between decisions (ages of
states and motion capture, the link, batteries, guards)."""
STATUS_S = 1.0
"""How often (s) the station prints its status line per quadrotor, from arming to landing."""
ENABLE_WAIT_S = 5.0
AIRBORNE_WAIT_S = 15.0
LANDED_WAIT_S = 20.0
OPERATOR_WAIT_S = 600.0
"""Longest wait for the operator's next button (s); the quadrotors hover meanwhile."""
HOVER_SPEED = 0.15
"""A quadrotor slower than this (m/s) at its target height counts as hovering."""


class FlightAborted(CableloadError):
    """The flight could not go on (a pilot did not arm, take off or land in time)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class OperatorLog:
    """Every operator action of the flight (wall-clock times), for the run log and the JSON."""

    actions: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, action: str, source: str, t: float, **detail) -> None:
        with self.lock:
            self.actions.append({"t_wall": t, "action": action, "source": source, **detail})


class Station:
    """The operator's station of one flight over a ``HardwareBackend``."""

    def __init__(self, flight: FlightFile, backend: HardwareBackend, source: InputSource, out=sys.stderr):
        self.flight = flight
        self.backend = backend
        self.source = source
        self.out = out
        self.phase = "idle"
        self.deadman = False
        self.log = OperatorLog()
        self.safety = SafetyModule(flight.safety)
        self.released_at: float | None = None
        self.off_sent_at: float | None = None
        self._buttons: queue.Queue[OperatorEvent] = queue.Queue()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._read_input, name="operator", daemon=True)
        self._watchdog = threading.Thread(target=self._watch_time_rules, name="safety", daemon=True)
        self._status = threading.Thread(target=self._show_status, name="status", daemon=True)
        self.transporting = False
        self._markers = None

    # -- the input thread --------------------------------------------------------------------

    def start(self) -> None:
        self._watch.start()
        self._watchdog.start()
        self._status.start()

    def close(self) -> None:
        self._stop.set()
        for thread in (self._watch, self._watchdog, self._status):
            if thread.is_alive():
                thread.join(timeout=1.0)
        self.source.close()

    def status_lines(self) -> list[str]:
        """One line per quadrotor: armed, the pilot's state (from its telemetry: ``off``,
        ``guard``, ``tracking`` while a finite reference is queued, else ``hover``), battery
        voltage, motion-capture rate, age of the plan it last took, and the safety module's action
        for it with the rule that fired last."""
        ages = getattr(self.backend, "safety_inputs", None)
        plan_age = ages()["plan_age"] if ages is not None else None
        observer = getattr(self.backend, "observer", None)
        rates = observer.mocap_rates() if observer is not None else {}
        latched, events = self.safety.latched, list(self.safety.events)
        lines = []
        for i, (quad, client) in enumerate(zip(self.flight.quads, self.backend.clients)):
            telemetry = client.telemetry
            armed = telemetry is not None and bool(telemetry.bridge_armed.data)
            if telemetry is None or not armed:
                state = "off"
            elif telemetry.guard_triggered.data:
                state = "guard"
            elif telemetry.num_references_in_queue > 0 and 0.0 < telemetry.reference_left_duration < 1e3:
                state = "tracking"
            else:
                state = "hover"
            volts = f"{telemetry.voltage:.2f} V" if telemetry is not None else "- V"
            hz = rates.get(quad.body)
            mocap = f"mocap {hz:.0f} Hz" if hz is not None and np.isfinite(hz) else "mocap -"
            age = f"plan {plan_age[i]:.2f} s old" if plan_age is not None and self.transporting else "no plan"
            # a load is carried by all or none: every quadrotor has the team's action
            safety = f"{latched[i].label} ({events[-1].rule})" if latched and events else "none"
            armed_text = "armed" if armed else "disarmed"
            lines.append(f"{quad.name}: {armed_text}, {state}, {volts}, {mocap}, {age}, safety: {safety}")
        return lines

    def _show_status(self) -> None:
        """Every ``STATUS_S`` from arming to landing: the status lines."""
        while not self._stop.wait(STATUS_S):
            if self.phase in ("idle", "landed"):
                continue
            try:
                lines = self.status_lines()
            except Exception as err:  # noqa: BLE001 - a status that cannot be read is said, not fatal
                lines = [f"status unavailable ({type(err).__name__}: {err})"]
            for line in lines:
                print(f"cableload fly: status {line}", file=self.out, flush=True)

    def _watch_time_rules(self) -> None:
        """During the transport, every ``WATCH_S``: the safety module's time rules on the
        backend's ages; what fires is acted on at once, as the dead-man is (the episode then
        ends ``safety_stop`` at its next decision)."""
        ages = getattr(self.backend, "safety_inputs", None)
        while ages is not None and not self._stop.wait(WATCH_S):
            if not self.transporting or self.safety.last_inputs is None or self.safety.stopped:
                continue  # not flying, no decision made yet, or the module has acted already
            try:
                inputs = ages()
                actions = self.safety.watch(self.backend.time, inputs, self.flight.n_uavs)
            except Exception as err:  # noqa: BLE001 - a watchdog that cannot judge stops the flight
                self.say(f"safety watchdog failed ({type(err).__name__}: {err}); every quadrotor hovers")
                actions = [Action.HOVER] * self.flight.n_uavs
                self.safety.trip(self.backend.time, "watchdog", Action.HOVER, str(err), self.flight.n_uavs)
            for i, action in enumerate(actions or ()):
                if action is not Action.NONE:
                    self.backend.command(i, action.label)

    def _read_input(self) -> None:
        while not self._stop.is_set():
            try:
                events = self.source.poll(self.phase)
            except Exception as err:  # noqa: BLE001 - a dead input is a dead-man let go
                events = [OperatorEvent(Button.DEADMAN, False, time.time(), f"input failed: {err}")]
            for event in events:
                if event.button is Button.DEADMAN:
                    self._on_deadman(event)
                elif event.pressed:
                    self.log.add(event.button.value, event.source, event.t)
                    if self.transporting and event.button in (Button.HOVER, Button.LAND, Button.OFF):
                        self._intervene(event)
                    else:
                        self._buttons.put(event)
            time.sleep(POLL_S)

    def _on_deadman(self, event: OperatorEvent) -> None:
        if event.pressed:
            if not self.deadman:
                self.log.add("deadman_held", event.source, event.t)
            self.deadman = True
            return
        if not self.deadman:
            return
        self.deadman = False
        if self.phase == "landed":  # the flight is over: every pilot is off already
            self.log.add("deadman_released", event.source, event.t)
            return
        self.released_at = event.t
        self.switch_off_all()
        self.off_sent_at = time.time()
        self.log.add("deadman_released", event.source, event.t, off_sent_s=self.off_sent_at - event.t)
        self.safety.trip(
            self.backend.time,
            "deadman",
            Action.OFF,
            "the operator let the dead-man go: every quadrotor off",
            self.flight.n_uavs,
            status="operator_off",
        )
        self._buttons.put(event)

    def switch_off_all(self) -> None:
        for client in self.backend.clients:
            client.command("off")

    def _intervene(self, event: OperatorEvent) -> None:
        action = {Button.HOVER: Action.HOVER, Button.LAND: Action.LAND, Button.OFF: Action.OFF}[event.button]
        for i in range(self.flight.n_uavs):
            self.backend.command(i, action.label)
        self.safety.trip(
            self.backend.time,
            "operator",
            action,
            f"the operator pressed {event.button.value}",
            self.flight.n_uavs,
            status=f"operator_{action.label}",
        )

    # -- the flight --------------------------------------------------------------------------

    def say(self, text: str) -> None:
        print(f"cableload fly: {text}", file=self.out, flush=True)

    def wait_button(self, *buttons: Button, timeout_s: float = OPERATOR_WAIT_S) -> Button:
        """The next of ``buttons`` pressed (others are ignored, with a note); the dead-man let
        go ends the flight (``FlightAborted``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_deadman()
            try:
                event = self._buttons.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise FlightAborted(
                        "operator_timeout", f"no {'/'.join(b.value for b in buttons)} within {timeout_s:g} s"
                    ) from None
                continue
            if event.button is Button.DEADMAN:
                self.check_deadman()
            if event.button in buttons:
                return event.button
            expected = ", ".join(b.value for b in buttons)
            self.say(f"{event.button.value} ignored in phase {self.phase} (expected {expected})")

    def check_deadman(self) -> None:
        if self.released_at is not None:
            raise FlightAborted("operator_off", "the dead-man was let go: every quadrotor switched off")

    def wait_until(self, condition, timeout_s: float, what: str, status: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            self.check_deadman()
            if time.monotonic() > deadline:
                raise FlightAborted(status, f"{what} not within {timeout_s:g} s")
            time.sleep(0.02)

    def armed(self) -> bool:
        return all(c.telemetry is not None and c.telemetry.bridge_armed.data for c in self.backend.clients)

    def positions(self) -> np.ndarray:

        return np.array([ros1.from_quad_state(c.state)[1] for c in self.backend.clients])

    def speeds(self) -> np.ndarray:

        return np.array([np.linalg.norm(ros1.from_quad_state(c.state)[3]) for c in self.backend.clients])

    def hovering_at(self, heights: np.ndarray) -> bool:
        p = self.positions()
        return bool(np.all(np.abs(p[:, 2] - heights) < 0.05) and np.all(self.speeds() < HOVER_SPEED))

    def prepare(self) -> None:
        """Phases idle to airborne: arm and take off (the dead-man held throughout)."""
        missing = self.backend.wait_ready()
        if missing is not None:
            raise FlightAborted("backend_failed", f"nothing received from {missing}")
        self.say("hold the dead-man and press enable")
        while True:
            self.wait_button(Button.ENABLE)
            if self.deadman:
                break
            self.say("enable refused: hold the dead-man first")
        for client in self.backend.clients:
            client.enable(True)
        self.wait_until(self.armed, ENABLE_WAIT_S, "every pilot armed", "backend_failed")
        self.phase = "enabled"
        self.say("armed; press take-off")
        self.wait_button(Button.TAKEOFF)
        ground = self.positions()[:, 2]
        for client in self.backend.clients:
            client.command("start")
        target = ground + self.flight.takeoff_height_m
        self.wait_until(
            lambda: self.hovering_at(target),
            AIRBORNE_WAIT_S,
            "every quadrotor hovering after take-off",
            "backend_failed",
        )
        self.phase = "airborne"
        self.say("hovering; press start-transport to see the first plans")

    def show_first_plans(self, planner, reference) -> None:
        """The plans the planner would send now, on RViz and the terminal; phase ``shown``."""
        from planners.base import PlanGuard

        state = self.backend.reset()
        guard = PlanGuard()
        plans = [guard.check(i, p, state) for i, p in enumerate(planner.plan(state, reference))]
        planner.reset()
        if self._markers is None:
            self._markers = marker_publisher()
        if self._markers is not None:
            self._markers.publish(plan_markers(plans, self.flight.names))
        for name, plan in zip(self.flight.names, plans):
            speed = np.linalg.norm(plan.v, axis=1).max()
            self.say(
                f"{name}: first plan from {np.round(plan.p[0], 2).tolist()} to "
                f"{np.round(plan.p[-1], 2).tolist()} m over {plan.t[-1] - plan.t[0]:.1f} s, "
                f"top speed {speed:.2f} m/s"
            )
        closest = float(uav_distances(np.stack([p.p for p in plans], axis=1)).min())
        preview = decide(plans, SafetyInputs(state.t, state), self.flight.safety)
        for event in preview.events:
            self.say(f"the safety module would refuse them: {event.rule}: {event.reason}")
        self.say(f"closest approach of the first plans {closest:.2f} m; press confirm to fly them")
        self.phase = "shown"

    def land(self) -> None:
        """Every pilot lands from hover, then is switched off; phase ``landed``."""
        for client in self.backend.clients:
            client.command("force_hover")
        time.sleep(0.2)
        for client in self.backend.clients:
            client.command("land")
        slots = self.flight.slots[:, 2]
        self.wait_until(
            lambda: (not self.armed()) or self.hovering_at(slots),
            LANDED_WAIT_S,
            "every quadrotor on the ground",
            "backend_failed",
        )
        self.switch_off_all()
        for client in self.backend.clients:
            client.enable(False)
        self.phase = "landed"


def marker_publisher():
    """A latched publisher of RViz markers on ``/cableload/plans`` (None without Debian's
    ``python3-visualization-msgs``: the terminal summary is shown all the same)."""
    try:
        from visualization_msgs.msg import MarkerArray
    except ImportError:
        return None

    return ros1.rospy().Publisher("/cableload/plans", MarkerArray, queue_size=1, latch=True)


def plan_markers(plans, names: list[str]):
    """The plans as RViz line strips (``visualization_msgs/MarkerArray``), one per quadrotor."""
    from visualization_msgs.msg import Marker, MarkerArray

    array = MarkerArray()
    for k, (name, plan) in enumerate(zip(names, plans)):
        marker = Marker()
        marker.header = ros1.header(time.time())
        marker.ns, marker.id, marker.type, marker.action = name, k, Marker.LINE_STRIP, Marker.ADD
        marker.scale.x = 0.02
        shade = k / max(len(plans) - 1, 1)  # blue to red across the quadrotors
        marker.color.r, marker.color.g, marker.color.b, marker.color.a = (
            0.1 + 0.8 * shade,
            0.6,
            0.9 - 0.8 * shade,
            1.0,
        )
        marker.pose.orientation.w = 1.0
        marker.points = [ros1.point(p) for p in plan.p]
        array.markers.append(marker)
    return array


class FlightLog:
    """The run log of a flight: the episode as the runner writes it, then the operator's
    actions (episode times) and the flight's end, written when the flight ends (after the
    landing), not when the transport does."""

    def __init__(self, writer) -> None:
        from cableload_sim.io.runlog import make_typestore

        self.writer = writer
        self._finish: tuple[str, dict] | None = None
        make_typestore()  # parsed now, not in the transport's first period

    def start(self, *args) -> None:
        self.writer.start(*args)

    def plans(self, *args) -> None:
        self.writer.plans(*args)

    def samples(self, *args) -> None:
        self.writer.samples(*args)

    def observed(self, state) -> None:
        self.writer.observed(state)

    def safety(self, event: dict) -> None:
        self.writer.safety(event)

    def finish(self, status: str, metrics: dict) -> None:
        self._finish = (status, metrics)

    def close(
        self, actions: list[dict], t0: float, status: str | None = None, extra: dict | None = None
    ) -> None:
        if self._finish is None:
            return
        for action in actions:
            self.writer.operator({**action, "t": action["t_wall"] - t0})
        episode_status, metrics = self._finish
        self.writer.finish(status or episode_status, {**metrics, **(extra or {})})


def fly(
    flight: FlightFile,
    planner_name: str,
    reference,
    duration: float,
    source: InputSource,
    *,
    config=None,
    planner_options: dict | None = None,
    log_path=None,
    overwrite: bool = False,
    out=sys.stderr,
    nodes: bool = False,
    node_wait_s: float = 30.0,
) -> dict:
    """One flight (see the module's docstring); the result as ``cableload fly --json`` prints
    it."""
    from backends.session import Flight, build_planner, warm_up

    config = config if config is not None else flight.load_config()
    backend = HardwareBackend(flight, config)
    station = Station(flight, backend, source, out=out)
    writer = None
    if log_path is not None:
        from cableload_sim.io.runlog import RunLogWriter

        writer = RunLogWriter(log_path, config, quad_names=flight.names, overwrite=overwrite)
    log = FlightLog(writer) if writer is not None else None
    result: dict = {"status": "aborted", "planner": planner_name, "trajectory": reference.name}
    episode = None
    station.start()
    try:
        station.prepare()
        station.wait_button(Button.START_TRANSPORT)
        plan_flight = Flight(config, reference, duration, safety=flight.safety)
        if nodes:
            from backends.session import with_lift
            from hw.nodes import RelayedNodes

            planner = with_lift(RelayedNodes(backend, node_wait_s), plan_flight)
        else:
            planner = build_planner(plan_flight, planner_name, planner_options)
        p0, q0 = reference.start_pose()
        warm_up(planner, config, reference, p0, q0)
        station.show_first_plans(planner, reference)
        station.wait_button(Button.CONFIRM)
        station.phase = "transport"
        station.transporting = True
        ros1.freeze_heap()  # no full garbage collection stops the station mid-transport
        episode = run_episode(
            backend,
            planner,
            reference,
            duration,
            collision_distance=flight.safety.min_distance_m,
            divergence_distance=config.simulation.divergence_distance_m,
            logger=log,
            safety=station.safety,
        )
        station.transporting = False
        result.update(episode.metrics)
        result["status"] = episode.status.value
        if episode.message:
            result["message"] = episode.message
        station.check_deadman()
        station.phase = "done"
        if episode.status.value != "completed":
            station.say(f"transport ended {episode.status.value}: {episode.message}; the quadrotors hover")
        station.say("press land")
        station.wait_button(Button.LAND)
        station.land()
    except FlightAborted as err:
        station.transporting = False
        if err.status != "operator_off":
            for client in backend.clients:  # when in doubt, hover
                client.command("force_hover")
        if result["status"] in ("aborted", "completed") or err.status == "operator_off":
            result["status"] = err.status
        result.setdefault("message", str(err))
    except BaseException:  # Ctrl-C, a failure of the station itself: when in doubt, hover
        station.transporting = False
        if station.released_at is None:
            for client in backend.clients:
                client.command("force_hover")
        raise
    finally:
        station.close()
        if station.released_at is not None and station.off_sent_at is not None and station.phase != "landed":
            result["status"] = "operator_off"
            result["off_delay_s"] = station.off_sent_at - station.released_at
        result["plans_rejected"] = int(result.get("rejected_plans", 0))
        result["safety_events"] = [
            {**event, "quadrotor": None if event["uav"] is None else flight.names[event["uav"]]}
            for event in station.safety.report()["safety_events"]
        ]
        result["operator_actions"] = [dict(a) for a in station.log.actions]
        if log is not None and writer is not None:
            log.close(
                station.log.actions, backend.t0, result["status"], {"off_delay_s": result.get("off_delay_s")}
            )
            writer.close()
        backend.close()
    return result
