"""The Backend protocol: what every place the planners fly in must offer.

The embedded simulator, Gazebo RotorS and the real quadrotors all implement it, and the
episode runner drives any of them the same way: ``reset`` to a scenario, ``observe`` the
privileged ``WorldState``, ``send`` each quadrotor its ``UavTrajectory``, ``advance`` one
planner period (returning what was recorded meanwhile), ``health``, ``close``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from cableload_sim.errors import CableloadError
from cableload_sim.params import SystemParams
from cableload_sim.physics.disturbances import WrenchDisturbance
from cableload_sim.physics.world import UavTrajectory, WorldSamples, WorldState


@dataclass(frozen=True)
class Scenario:
    """How an episode starts: the load's initial pose (system at rest in hover around it, or
    on the ground with ``on_ground``)."""

    load_p: np.ndarray
    load_q: np.ndarray
    seed: int = 0
    """Seeds every random process of the episode (disturbances, message loss)."""
    disturbance: WrenchDisturbance | None = None
    on_ground: bool = False
    """Start at rest on the ground instead: the load below ``load_p`` (its heading from
    ``load_q``), each quadrotor idling on the ground below its hover slot, cables slack (needs
    ``[ground] enabled``; the embedded backend)."""

    def __post_init__(self) -> None:
        p = np.asarray(self.load_p, dtype=float)
        q = np.asarray(self.load_q, dtype=float)
        if p.shape != (3,) or not np.isfinite(p).all():
            raise ValueError(f"scenario.load_p: expected 3 finite numbers, got {self.load_p!r}")
        if q.shape != (4,) or not np.isfinite(q).all() or abs(np.linalg.norm(q) - 1.0) > 1e-6:
            raise ValueError(f"scenario.load_q: expected a unit quaternion, got {self.load_q!r}")
        object.__setattr__(self, "load_p", p)
        object.__setattr__(self, "load_q", q)


@dataclass
class BackendHealth:
    """What a backend reports about itself besides the state."""

    ok: bool = True
    messages: list[str] = field(default_factory=list)
    status: str = "backend_failed"
    """With ``ok`` false, the episode status it calls for (an ``EpisodeStatus`` value:
    ``backend_failed``, ``world_reset``, ``clock_stalled``, ...)."""
    rejected_plans: int = 0
    """References the onboard controllers or pilots refused (malformed, or against a stock
    pilot's queueing rule), whoever sent them."""
    hold_fraction: float = 0.0
    """Fraction of controller updates spent holding hover instead of tracking a plan."""
    extra: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    """Figures the episode's metrics report as they are (e.g. ``stamps_dropped``)."""


class EpisodeAborted(CableloadError):
    """A backend refuses to start the episode (``reset``): the run ends at once with
    ``status`` (an ``EpisodeStatus`` value, e.g. ``system_mismatch``) and the message."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


@runtime_checkable
class Backend(Protocol):
    name: str
    system: SystemParams
    """The nominal system: what planners are told."""
    planner_period_s: float

    @property
    def time(self) -> float: ...

    def reset(self, scenario: Scenario) -> WorldState: ...

    def observe(self) -> WorldState: ...

    def send(self, uav: int, trajectory: UavTrajectory) -> None: ...

    def advance(self) -> WorldSamples: ...

    def health(self) -> BackendHealth: ...

    def close(self) -> None: ...
