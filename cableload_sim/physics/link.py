"""The link between the planners and the quadrotors: plans lost, or arriving late.

``LinkModel`` is one radio link (one quadrotor's): ``transmit(t_sent)`` says when a message
sent at ``t_sent`` arrives, or None when it is lost. ``InFlight`` holds the messages on their
way and hands each over once the time has come. A backend uses them as::

    links = [LinkModel(config.link, rng) for rng in np.random.default_rng(seed).spawn(n)]
    inbox = InFlight()
    # when quadrotor i's plan is sent at time t:
    arrival = links[i].transmit(t)
    if arrival is not None:
        inbox.put(arrival, i, plan)
    # while simulating: step to inbox.next_arrival(), then deliver inbox.due(now)

Both are plain Python and know nothing of plans, so the embedded simulator and the ROS world
(where a message arrives in a subscriber and waits for its time) use them alike.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from cableload_sim.params import LinkParams


@dataclass(frozen=True)
class LinkStats:
    """What one or more links did since their start."""

    sent: int
    dropped: int
    delay_mean_s: float
    """Mean delay of the messages that arrived (s); 0 when none did."""
    delay_max_s: float

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.sent if self.sent else 0.0

    @staticmethod
    def combined(parts: list[LinkStats]) -> LinkStats:
        sent = sum(p.sent for p in parts)
        dropped = sum(p.dropped for p in parts)
        arrived = sent - dropped
        total = sum(p.delay_mean_s * (p.sent - p.dropped) for p in parts)
        return LinkStats(
            sent,
            dropped,
            total / arrived if arrived else 0.0,
            max((p.delay_max_s for p in parts), default=0.0),
        )


class LinkModel:
    """One link: each message dropped with probability ``params.drop_fraction``, the others
    delayed uniformly in [``delay_min_s``, ``delay_max_s``] and kept in the order sent.

    Draws come from ``rng`` only (two per message, lost or not, so that a message's fate does
    not depend on the others'); the same generator state gives the same arrivals. A link
    whose ``params.enabled`` is false delivers every message when it is sent.
    """

    def __init__(self, params: LinkParams, rng: np.random.Generator):
        self.params = params
        self.rng = rng
        self._last_arrival = -np.inf
        self._sent = 0
        self._dropped = 0
        self._delay_sum = 0.0
        self._delay_max = 0.0

    def transmit(self, t_sent: float) -> float | None:
        """Arrival time (s) of a message sent at ``t_sent`` (s), never before it; None if lost."""
        t_sent = float(t_sent)
        if not np.isfinite(t_sent):
            raise ValueError(f"t_sent: expected a finite time (s), got {t_sent!r}")
        self._sent += 1
        if not self.params.enabled:
            arrival = t_sent
        else:
            lost, fraction = self.rng.random(2)
            if lost < self.params.drop_fraction:
                self._dropped += 1
                return None
            p = self.params
            arrival = t_sent + p.delay_min_s + fraction * (p.delay_max_s - p.delay_min_s)
        # in order: a message does not overtake the one sent before it on the same link
        arrival = max(arrival, self._last_arrival)
        self._last_arrival = arrival
        delay = arrival - t_sent
        self._delay_sum += delay
        self._delay_max = max(self._delay_max, delay)
        return arrival

    def stats(self) -> LinkStats:
        arrived = self._sent - self._dropped
        return LinkStats(
            self._sent,
            self._dropped,
            float(self._delay_sum / arrived) if arrived else 0.0,
            float(self._delay_max),
        )


LINK_STREAM = 1
"""Distinguishes the links' random stream from the episode's other ones (sensing: 2)."""


def make_links(params: LinkParams, n: int, seed: int) -> list[LinkModel]:
    """``n`` independent links (one per quadrotor), seeded from an episode's ``seed``.

    Their generators are a stream of their own (``SeedSequence((seed, LINK_STREAM))``), so
    turning the link on changes no other random process of the episode.
    """
    root = np.random.SeedSequence([int(seed), LINK_STREAM])
    return [LinkModel(params, np.random.default_rng(child)) for child in root.spawn(n)]


class InFlight:
    """Messages on their way: each handed over at its arrival time, in order of arrival
    (ties in order of sending)."""

    def __init__(self):
        self._heap: list[tuple[float, int, int, Any]] = []
        self._count = 0

    def __len__(self) -> int:
        return len(self._heap)

    def put(self, arrival: float, channel: int, message: Any) -> None:
        """``message`` for ``channel`` (e.g. a quadrotor's index), to arrive at ``arrival`` (s)."""
        heapq.heappush(self._heap, (float(arrival), self._count, channel, message))
        self._count += 1

    def next_arrival(self) -> float:
        """Arrival time (s) of the next message; infinity when none is on its way."""
        return self._heap[0][0] if self._heap else np.inf

    def due(self, now: float) -> list[tuple[int, Any]]:
        """The (channel, message) pairs that have arrived by ``now`` (s), in arrival order."""
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, _, channel, message = heapq.heappop(self._heap)
            out.append((channel, message))
        return out

    def clear(self) -> None:
        self._heap.clear()
