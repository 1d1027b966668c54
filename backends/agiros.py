"""One quadrotor's Agilicious pilot (agiros) over ROS1: the client the Gazebo backend, the planner
nodes and the hardware backend share.

Topics (``/<quad>/agiros_pilot/``): ``state`` (``QuadState``), ``odometry`` and ``telemetry`` in;
``trajectory`` (``Reference``), ``enable`` (``std_msgs/Bool``), ``start``, ``land``, ``off``,
``force_hover`` (``std_msgs/Empty``) out.

Two kinds of pilot are handled (``queue``):

- ``stock``: the Agilicious pilot appends a reference to its queue only when it starts at or
  after the end of the queued one, and rejects it otherwise. A receding-horizon plan overlaps
  the previous one, so the client sends what the pilot accepts: the part of each plan from the
  end of what is queued to one planner period plus ``margin_s`` past the moment it is sent
  (so a plan that was slow to make still lasts until the next arrives), resampled every
  ``resample_s`` as the onboard controller samples it. A queue that runs dry makes the pilot
  hover at its end: the quadrotor brakes for a moment and the load swings for seconds. So
  ``margin_s`` covers how much later than one period after the previous plan the next can
  reach the pilot. The default, 0.1 s, is sized for one planner process beside the world on a
  loaded 2-core machine (the teacher through the Gazebo backend: no queue ran dry in 60 s at a
  load average of 3-6, 1-3 times with 0.05 s); student nodes, a process per quadrotor, use
  more (``planner_node.STUDENT_MARGIN_S``). The price is latency: a plan takes effect when the
  queued part ends, ``margin_s`` plus the previous plan's latency after it was made (about
  0.12 s with the default), which the teacher and the student fly with as well as without
  (measured on the embedded simulator with plans delayed so; with 0.2 s of delay the teacher's
  attitude error doubles). Rejections are detected from ``telemetry``
  (the queue's end, ``t + reference_left_duration``, falls short of what was sent) and counted;
  after one the client resumes from the pilot's own queue end.
- ``replace``: a pilot patched to replace its queue by every new reference; the whole plan is
  sent.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from backends import ros1
from backends.pilot import (
    QUEUE_MODES,
    TIME_MODES,
    TIME_TOLERANCE,
    ReferenceQueue,
    reference_problem,
    sample_nodes,
)
from cableload_sim.physics.world import UavTrajectory


def plan_piece(traj: UavTrajectory, start: float, end: float, step: float) -> UavTrajectory | None:
    """``traj`` between ``start`` and ``end`` (s) resampled every ``step`` (both ends included)
    as the onboard controller samples it (``backends.pilot.sample_nodes``); None when the piece
    is empty."""
    end = min(end, float(traj.t[-1]))
    start = max(start, float(traj.t[0]))
    if end - start < 1e-4:
        return None
    count = max(2, int(np.ceil((end - start) / step - 1e-9)) + 1)
    times = np.linspace(start, end, count)
    out = sample_nodes(
        {"t": traj.t, "p": traj.p, "v": traj.v, "a": traj.a, "j": traj.j, "w": traj.body_rates}, times
    )
    return UavTrajectory(times, out["p"], out["v"], out["a"], out["j"], out["w"])


MARGIN_S = 0.1
"""A stock pilot's piece of plan reaches this far past one planner period (s; see above)."""


class StockQueue:
    """What a client knows of a stock pilot's queue (ROS times, s): where it ends after what was
    sent, and the references the pilot rejected, detected from its telemetry.

    A reference counts as rejected when a telemetry message stamped ``in_flight_s`` or more after
    it was *sent* (not after the plan's time: a plan made late is sent late) shows the queue
    ending short of it; the client then resumes from the pilot's own queue end. Judged from the
    plan's time, a plan sent 0.2 s late was taken for rejected while still on its way, the
    client resumed from the telemetry's stale end, and the pilot rejected the next reference
    (seen in a clean CI run)."""

    def __init__(self, in_flight_s: float):
        if not in_flight_s > 0.0:
            raise ValueError(f"in_flight_s: expected a positive time, got {in_flight_s!r}")
        self.in_flight_s = in_flight_s
        self.end: float | None = None
        self.rejected = 0
        self._pending: list[tuple[float, float]] = []  # (sent at, end)

    def sent(self, sent_at: float, end: float) -> None:
        self.end = end
        self._pending.append((sent_at, end))

    def telemetry(self, now: float, queue_end: float, count: bool = True) -> bool:
        """A telemetry message stamped ``now`` with the queue ending at ``queue_end`` (``now``
        when empty); whether it showed a rejection. After one the queue ends where the pilot
        says, or where the last reference still on its way ends (it starts where the rejected
        one ended or later, past the pilot's queue end, so the pilot will take it)."""
        keep, rejected = [], 0
        for sent_at, end in self._pending:
            if sent_at + self.in_flight_s > now:
                keep.append((sent_at, end))
            elif count and end > now and queue_end < end - 1e-3:
                rejected += 1
        self._pending = keep
        if rejected:
            self.rejected += rejected
            self.end = keep[-1][1] if keep else queue_end
        return rejected > 0

    def reset(self) -> None:
        self.end = None
        self._pending = []


REJECTED_FOR_S = 1.0
"""A pilot that refuses every reference it is sent for this long (ROS s) ends the episode
(``plans_rejected``): the planner no longer flies that quadrotor."""


STALE_GRACE_S = 0.005
"""How long after a stock pilot's queue has run out (s) the client sends the next piece of the
newest plan when no newer one has come (in lockstep the world's clock waits at the queue's end
for the next plan, so this never fires there)."""
TIMER_MIN_S = 0.002
"""The shortest wait (wall s) of a client's timer."""

VERDICT_WAIT_S = 0.03
"""How long after a piece left (s, at least; twice the longest latency measured if more) a
client reads the stock re-timing pilot's telemetry to judge whether the pilot took it."""
VERDICT_MARGIN_S = 0.005
"""A piece taken ends its pilot's queue no sooner than this short of its duration after it left
(s): float noise and the telemetry's own rounding."""

RECEIPT_TOLERANCE_S = 0.05
"""How much earlier than its pilot a watch may see a reference arrive (s): delivery jitter,
which on a loaded machine reached 30 ms and more in lockstep (the watch then counted pieces the
pilot took as rejected). Half a planner period at 10 Hz: a piece the pilot really rejects ends
its queue a whole piece short, which the sending client sees in the telemetry."""


class PilotWatch:
    """What one pilot makes of every reference its trajectory topic carries, whoever sent it
    (the episode's clients, planner nodes, anyone else), so that each rejection is counted in
    every mode.

    The watch keeps a mirror of the pilot's queue (``backends.pilot.ReferenceQueue``, the
    pilot's own rule: a malformed reference is refused, a stock queue refuses one that starts
    before its end, a disarmed pilot refuses all) and offers it each reference as it is seen.
    The pilot's telemetry keeps the mirror true: ``bridge_armed``, and the queue's end
    (``t + reference_left_duration``) once ``settle_s`` has passed since the newest reference
    was seen (it is then in the pilot's queue, or lost): a pilot queue that ends short of the
    mirror's (a reference lost on the way, a queue cleared by a command) replaces it
    (``resynced``). Times are ROS times (s)."""

    def __init__(self, mode: str = "stock", settle_s: float = 0.05, times: str = "message"):
        """``times``: how the pilot times a trajectory (``backends.pilot.TIME_MODES``). A watch
        sees a reference when it does, not when the pilot does, so for a re-timing pilot its
        mirror counts a reference as after the queue's end within ``RECEIPT_TOLERANCE_S``
        (the pilot's telemetry corrects the mirror, and the sending client counts the
        rejections it sees there)."""
        if not settle_s > 0.0:
            raise ValueError(f"settle_s: expected a positive time, got {settle_s!r}")
        tolerance = RECEIPT_TOLERANCE_S if times == "receipt" else TIME_TOLERANCE
        self.queue = ReferenceQueue(mode, times, tolerance)
        self.settle_s = settle_s
        self.armed: bool | None = None
        """The pilot's ``bridge_armed`` from its newest telemetry (None before one)."""
        self.seen = 0
        self.rejected = 0
        self.resynced = 0
        self.last_seen: float | None = None
        self.disarmed_at: float | None = None
        """When telemetry first said disarmed after saying armed (None: it has not)."""
        self._refusing_since: float | None = None
        self._last_refused: float | None = None
        self.last_problem = ""
        self.senders: set[str] = set()
        """Nodes seen publishing references on the topic."""
        self.trusted: set[str] | None = None
        """The episode's planners (None: anyone, until the episode says)."""
        self.foreign: list[tuple[float, str | None]] = []
        """(start time, sender) of each reference the pilot took from outside ``trusted``."""

    def overridden(self, now: float) -> str | None:
        """Who made the pilot fly a reference of theirs by ROS time ``now`` (None: nobody)."""
        for start, sender in self.foreign:
            if start <= now:
                return f"flies a reference from {sender} (from ROS time {start:.2f} s)"
        return None

    def reference(self, ref: dict, now: float, sender: str | None = None) -> bool:
        """A reference seen on the topic at ROS time ``now``, published by node ``sender``;
        whether the pilot takes it. One that the pilot takes from a node outside ``trusted``
        (once that is set) is kept in ``foreign``."""
        self.seen += 1
        self.last_seen = now
        if sender is not None:
            self.senders.add(sender)
        problem = reference_problem(ref)
        if problem is None and self.armed is False:
            problem = "the pilot is disarmed"
        if problem is None:
            end = self.queue.end
            if self.queue.offer(ref, now):
                self._refusing_since = self._last_refused = None
                if self.trusted is not None and sender not in self.trusted:
                    self.foreign.append((float(ref["t"][0]), sender))
                return True
            problem = f"starts at {ref['t'][0]:.3f} s, before the queue's end {end:.3f} s"
        self.rejected += 1
        self.last_problem = problem
        if self._refusing_since is None:
            self._refusing_since = now
        self._last_refused = now
        return False

    def telemetry(self, now: float, armed: bool, in_queue: int, left_s: float) -> None:
        if self.armed and not armed and self.disarmed_at is None:
            self.disarmed_at = now
        self.armed = bool(armed)
        if self.last_seen is not None and now - self.last_seen < self.settle_s:
            return  # a reference may still be on its way to the pilot
        self.queue.drop_expired(now)
        pilot_end = now + left_s if in_queue > 0 and left_s > 0.0 else None
        mirror_end = self.queue.end
        # only a queue that ends short of the mirror's corrects it: one that ends beyond it
        # holds a reference the pilot got and this watch has not seen yet (another connection)
        if mirror_end is not None and (pilot_end is None or pilot_end < mirror_end - 1e-3):
            self.resynced += 1
            self.queue.clear()
            if pilot_end is not None:
                self.queue.references = [{"t": np.array([min(now, pilot_end - 1e-3), pilot_end])}]

    def refusing(self) -> str | None:
        """Why the pilot is refusing the planner's references, when it has refused every one
        for ``REJECTED_FOR_S`` (None otherwise)."""
        if self._refusing_since is None:
            return None
        assert self._last_refused is not None  # set and cleared with _refusing_since
        if self._last_refused - self._refusing_since < REJECTED_FOR_S:
            return None
        return (
            f"every reference refused for {self._last_refused - self._refusing_since:.1f} "
            f"s ({self.rejected} in all; the last {self.last_problem})"
        )


class LinkLatency:
    """How long a reference takes from this client to its pilot (s), measured from the pilot's
    telemetry. A re-timing pilot queues a piece from the moment it arrives, so the end of its
    queue (``t + reference_left_duration``) less the piece's duration is when the piece
    arrived; less when it was sent, the latency. The station's and the pilot's clocks are taken
    as synchronised (chrony; ``cableload preflight`` reports the offset)."""

    KEEP = 25
    MAX_S = 0.5
    """A sample beyond this (s) is taken for a mismatch of pieces, not a latency."""

    def __init__(self) -> None:
        self.samples: collections.deque[float] = collections.deque(maxlen=self.KEEP)

    def add(self, value: float) -> None:
        if 0.0 <= value <= self.MAX_S:
            self.samples.append(float(value))

    @property
    def typical(self) -> float:
        """The median of the recent samples (0 before one)."""
        return float(np.median(self.samples)) if self.samples else 0.0

    @property
    def shortest(self) -> float:
        """The shortest recent sample (0 before one): no piece arrives sooner."""
        return min(self.samples) if self.samples else 0.0

    @property
    def longest(self) -> float:
        """The longest recent sample (0 before one)."""
        return max(self.samples) if self.samples else 0.0


def judge_pieces(pieces, now: float, queued: bool, queue_end: float, longest_s: float, sends=()):
    """Which pieces ``(sent at, duration, seen short)`` a stock re-timing pilot took, from one
    telemetry message stamped ``now`` (its queue ending at ``queue_end`` when ``queued``): (the
    pieces still to judge, how many it refused). Taken, a piece ends the queue ``duration``
    after its arrival, so no earlier than ``duration`` after it was sent; refused, the queue
    ends where it did, which was at most the shortest latency after the piece left (the client
    sends no sooner). Between the moment it surely arrived (``VERDICT_WAIT_S``, or twice the
    longest latency measured, at most half its duration) and the moment it would have ended,
    one message showing the queue reaching that end counts it taken; one showing it short marks
    it (a piece that arrived later than any before was first seen short, then taken, on a
    loaded machine). A marked piece that no message of that span showed taken is judged by the
    first message after it: the queue reaching the piece's end, and ending before any newer
    piece could end (``sends``: (sent at, duration) of the recent pieces; a newer piece ends no
    sooner than its duration after it left), counts it taken (the only message of the span
    came before it arrived); else it counts as refused."""
    keep, refused = [], 0
    for sent_at, duration, short in pieces:
        opens = sent_at + min(max(2.0 * longest_s, VERDICT_WAIT_S), duration / 2.0)
        closes = sent_at + duration - VERDICT_MARGIN_S
        if now < opens:
            keep.append((sent_at, duration, short))
        elif now <= closes:
            if not (queued and queue_end >= closes):
                keep.append((sent_at, duration, True))
        elif short:
            newer = [(t, d) for t, d in sends if t > sent_at + 1e-9]
            # the queue's end is this piece's while no newer piece can have reached it, or
            # while it ends before the next one could (sent, then flown at once)
            ceiling = min(t + d for t, d in newer) - VERDICT_MARGIN_S if newer else float("inf")
            if not (queued and closes <= queue_end < ceiling):
                refused += 1
    return keep, refused


class AgirosClient:
    """Talks to one quadrotor's pilot. ``t_offset`` converts episode times to ROS times."""

    def __init__(
        self,
        quad: str,
        queue: str = "stock",
        period_s: float = 0.1,
        margin_s: float = MARGIN_S,
        resample_s: float = 0.01,
        in_flight_s: float | None = None,
        times: str = "message",
        clock=None,
    ):
        """``in_flight_s``: how long a reference may take to reach the pilot and show in its
        telemetry before it counts as lost or rejected (default two planner periods).
        ``times``: how the pilot times a received trajectory (``backends.pilot.TIME_MODES``;
        agiros re-times it to its arrival). ``clock``: the ROS time now (s; default rospy's),
        for pieces held back until a re-timing stock pilot's queue ends."""
        if queue not in QUEUE_MODES:
            raise ValueError(f"pilot queue: expected one of {QUEUE_MODES}, got {queue!r}")
        if times not in TIME_MODES:
            raise ValueError(f"pilot trajectory times: expected one of {TIME_MODES}, got {times!r}")
        rospy = ros1.rospy()
        m = ros1.messages()
        self.quad = quad
        self.queue = queue
        self.times = times
        self.clock = clock if clock is not None else rospy.get_time
        self.period_s, self.margin_s, self.resample_s = period_s, margin_s, resample_s
        self._lock = threading.Lock()
        self.state = None
        self.telemetry = None
        self.sent = 0
        self.latency = LinkLatency()
        self._queue = StockQueue(in_flight_s=in_flight_s if in_flight_s is not None else 2.0 * period_s)
        self._last_piece: tuple[float, float] | None = None  # (sent at, duration) awaiting a sample
        self._verdicts: list[tuple[float, float, bool]] = []  # (sent at, duration, seen short)
        self._sends: collections.deque[tuple[float, float]] = collections.deque(maxlen=16)  # (left, duration)
        self._newest: tuple[UavTrajectory, float, float] | None = None  # (plan, t_offset, left at)
        self._fresh = False  # whether no piece of the newest plan has been sent yet
        self._timer: threading.Timer | None = None
        self._closed = False

        def topic(template):
            return template.format(quad=quad)

        self.pub_trajectory = rospy.Publisher(topic(ros1.TRAJECTORY_TOPIC), m.Reference, queue_size=10)
        self.pub_enable = rospy.Publisher(topic(ros1.ENABLE_TOPIC), m.Bool, queue_size=1, latch=True)
        self.pub_commands = {
            name: rospy.Publisher(topic(t), m.Empty, queue_size=1)
            for name, t in (
                ("start", ros1.START_TOPIC),
                ("land", ros1.LAND_TOPIC),
                ("off", ros1.OFF_TOPIC),
                ("force_hover", ros1.FORCE_HOVER_TOPIC),
            )
        }
        self._subscribers = [
            rospy.Subscriber(topic(ros1.STATE_TOPIC), m.QuadState, self._on_state, queue_size=10),
            rospy.Subscriber(topic(ros1.TELEMETRY_TOPIC), m.Telemetry, self._on_telemetry, queue_size=10),
        ]
        self.on_state: Callable[[Any], None] | None = None  # optional callback(msg)
        self.on_telemetry = None  # optional callback(msg)

    # -- incoming --------------------------------------------------------------------------

    def _on_state(self, msg) -> None:
        self.state = msg
        if self.on_state is not None:
            self.on_state(msg)

    def _on_telemetry(self, msg) -> None:
        self.telemetry = msg
        if self.on_telemetry is not None:
            self.on_telemetry(msg)
        now = msg.header.stamp.to_sec()
        queued = msg.num_references_in_queue > 0
        queue_end = now + msg.reference_left_duration if queued else now
        with self._lock:
            if self.times == "receipt" and queued and self._last_piece is not None:
                sent_at, duration = self._last_piece
                arrived = queue_end - duration
                if sent_at - 1e-6 <= arrived <= now + 1e-6:
                    self.latency.add(arrived - sent_at)
                    self._last_piece = None
                    if self.queue == "stock":
                        self._queue.end = queue_end  # where the pilot's queue really ends
            if self.queue == "stock":
                if self.times == "receipt":
                    self._judge(now, queued, queue_end)
                # a re-timing pilot's refusals are judged above: the watch of pieces that end
                # short, which the next piece taken hides, would miss them
                self._queue.telemetry(now, queue_end, count=self.times != "receipt")

    def _judge(self, now: float, queued: bool, queue_end: float) -> None:
        """Count the pieces the stock re-timing pilot refused (``judge_pieces``; lock held)."""
        self._verdicts, refused = judge_pieces(
            self._verdicts, now, queued, queue_end, self.latency.longest, self._sends
        )
        if refused:
            self._queue.rejected += refused
            self._queue.end = queue_end  # the pilot's own end: the next piece goes at once

    @property
    def rejected(self) -> int:
        """References the pilot was seen to reject (from its telemetry)."""
        return self._queue.rejected

    def connected(self) -> bool:
        """Whether the pilot subscribes to the trajectory and command topics (a message
        published before that is lost) and publishes its state."""
        publishers = (self.pub_trajectory, self.pub_enable, *self.pub_commands.values())
        return self.state is not None and all(p.get_num_connections() > 0 for p in publishers)

    def wait_for_subscribers(self, seconds: float = 3.0) -> bool:
        """Until the trajectory publisher is connected to every node the master lists as
        subscribing to it (at most ``seconds``); whether it is. ROS1 connects a subscriber to a
        new publisher after the master tells it, so a first plan sent before that reaches
        only some of them: the pilot, say, and not the episode that counts the plans."""
        rospy = ros1.rospy()
        topic = self.pub_trajectory.resolved_name
        deadline = time.monotonic() + seconds
        while True:
            try:
                _, _, (_, subscribers, _) = rospy.get_master().getSystemState()
                expected = next((len(nodes) for name, nodes in subscribers if name == topic), 0)
            except Exception:  # noqa: BLE001 - a master gone is reported by its own check
                return False
            if self.pub_trajectory.get_num_connections() >= expected:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    # -- outgoing --------------------------------------------------------------------------

    def command(self, name: str) -> None:
        """``start``, ``land``, ``off`` or ``force_hover``."""
        self.pub_commands[name].publish(ros1.messages().Empty())
        if name in ("land", "off", "force_hover"):
            self.reset_queue()

    def enable(self, on: bool = True) -> None:
        self.pub_enable.publish(ros1.messages().Bool(bool(on)))

    def send(self, traj: UavTrajectory, t_offset: float = 0.0, now: float | None = None) -> bool:
        """Send a plan (episode times; ``t_offset`` added); whether something was sent or held
        back to be sent. ``now``: the ROS time as the plan leaves (default: the plan's time).

        To a re-timing pilot (``times="receipt"``) every piece sent starts at the plan's value
        one typical link latency after it leaves, so that the pilot, which flies its first
        point on arrival, flies the plan at the times it was planned for. A stock pilot takes a
        piece only when it arrives after its queue ends: a piece of ``period_s`` of the newest
        plan leaves as soon as even the shortest latency measured brings it after that end;
        until then the plan is held back (a timer sends it then). When no newer plan has come
        by the time the queue has run out, the timer sends the next piece of the last one, up
        to ``period_s + margin_s`` past the moment that plan left (a late plan then costs a
        short hover, not one until the next plan)."""
        if self.times == "message":
            return self._send_stamped(traj, t_offset, now)
        now = float(traj.t[0]) + t_offset if now is None else max(float(now), float(traj.t[0]) + t_offset)
        with self._lock:
            if self._closed:
                return False
            self._newest = (traj, t_offset, now)
            self._fresh = True
            return self._flush(now)

    def _flush(self, now: float) -> bool:
        """Send a piece of the newest plan if its time has come, else arm the timer (lock
        held); whether a piece was sent or is due to be."""
        if self._newest is None or self._closed:
            return False
        traj, t_offset, left_at = self._newest
        start = now + self.latency.typical
        if self.queue == "replace":
            if not self._fresh:
                return False
            self._fresh = False
            self._newest = None
            return self._publish_piece(traj, t_offset, start, float(traj.t[-1]) + t_offset, now)
        end = self._queue.end
        last = left_at + self.period_s + self.margin_s + self.latency.typical  # no piece goes further
        if self._fresh:
            if end is not None and now + self.latency.shortest < end - TIME_TOLERANCE:
                self._arm(end - self.latency.shortest - now)
                return True
            self._fresh = False
        elif end is not None and now < end + STALE_GRACE_S:  # its piece has gone: wait for the end
            self._arm(end + STALE_GRACE_S - now)
            return True
        sent = self._publish_piece(traj, t_offset, start, min(start + self.period_s, last), now)
        if sent and self._queue.end is not None and self._queue.end < last - TIME_TOLERANCE:
            self._arm(self._queue.end + STALE_GRACE_S - now)  # to continue it if no newer plan comes
        else:
            self._newest = None
        return sent

    def _publish_piece(
        self, traj: UavTrajectory, t_offset: float, start: float, end: float, now: float
    ) -> bool:
        """Publish ``traj`` from ROS time ``start`` to ``end``; whether a piece was sent (none
        when the plan ends before ``start``: the pilot hovers at its end)."""
        piece = plan_piece(traj, start - t_offset, end - t_offset, self.resample_s)
        if piece is None:
            return False
        self.pub_trajectory.publish(ros1.reference_message(piece, t_offset))
        duration = float(piece.t[-1] - piece.t[0])
        self._last_piece = (now, duration)
        self._sends.append((now, duration))
        if self.queue == "stock":
            # until the telemetry tells where the pilot's queue ends, take the piece to arrive
            # as late as any has: the next one then never arrives before it has ended
            self._queue.sent(now, now + max(self.latency.longest, start - now) + duration)
            if duration >= 2.0 * VERDICT_WAIT_S:
                self._verdicts.append((now, duration, False))
        self.sent += 1
        return True

    def _arm(self, wait_s: float) -> None:
        """Call ``_flush`` again in ``wait_s`` wall seconds (lock held; one timer at a time)."""
        if self._timer is not None and self._timer.is_alive():
            self._timer.cancel()
        self._timer = threading.Timer(max(wait_s, TIMER_MIN_S), self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        now = self.clock()
        with self._lock:
            if self._closed or self._newest is None:
                return
            if now is None:  # no clock yet
                self._arm(TIMER_MIN_S)
            else:
                self._flush(float(now))

    def _send_stamped(self, traj: UavTrajectory, t_offset: float, now: float | None) -> bool:
        """To a pilot that keeps the message's times: a stock pilot's piece starts at the end
        of its queue and reaches ``period_s + margin_s`` past ``now``, so a plan that took long
        to make still lasts until the next one arrives."""
        if self.queue == "replace":
            self.pub_trajectory.publish(ros1.reference_message(traj, t_offset))
            self.sent += 1
            return True
        plan_time = float(traj.t[0]) + t_offset
        sent_at = max(plan_time, now if now is not None else plan_time)
        with self._lock:
            queued_end = self._queue.end
        if queued_end is not None and queued_end >= float(traj.t[-1]) + t_offset:
            # the pilot's queue reaches past this whole plan (someone queued a reference far
            # ahead): send it anyway, so that the pilot's refusals are seen and counted
            queued_end = None
        start = plan_time if queued_end is None or queued_end < plan_time else queued_end
        piece = plan_piece(
            traj, start - t_offset, sent_at + self.period_s + self.margin_s - t_offset, self.resample_s
        )
        if piece is None:
            return False
        if queued_end is not None and queued_end >= plan_time:
            # start exactly where the queue ends (the pilot compares times exactly)
            piece = UavTrajectory(
                np.concatenate([[queued_end - t_offset], piece.t[1:]]),
                piece.p,
                piece.v,
                piece.a,
                piece.j,
                piece.body_rates,
            )
        self.pub_trajectory.publish(ros1.reference_message(piece, t_offset))
        with self._lock:
            self._queue.sent(sent_at, float(piece.t[-1]) + t_offset)
        self.sent += 1
        return True

    def reset_queue(self) -> None:
        """Forget what the pilot's queue holds (it dropped it, or a new episode starts): nothing
        is left to judge, and no piece of the last plan may follow."""
        with self._lock:
            self._queue.reset()
            self._verdicts = []
            self._sends.clear()
            self._newest = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._newest = None
            if self._timer is not None:
                self._timer.cancel()
        for sub in self._subscribers:
            sub.unregister()
        for pub in (self.pub_trajectory, self.pub_enable, *self.pub_commands.values()):
            pub.unregister()
